"""GHPO's staged hints, re-derived from the authors' trainer on plain lists (one process).

Source: hkgc-1/GHPO @ af0a7dd859eafca17531bd7b01c76ccb3e36e0c0 (read at 563abfc, the same code)
    src/ghpo/ghpo_trainer.py  `GHPOTrainer._generate_and_score_completions`: `hint_prompt`, `inputs_hint_25/50/75`,
                              the blocks "add 25 hint", "add 50 hint", "add 75 hint" (is_all_wrong, true_indices,
                              true_indices2, redo_num, inputs_redo, the replacement of prompts, completions and
                              rewards_per_func); `_generate_and_score_completions_hint` returns -1 when no process
                              has anything to redo.

Variable names and the order of operations are theirs. A row is a dict {"prompt": user text, "solution_hint": str};
`sample(inputs_redo)` stands for `_generate_and_score_completions_hint` and returns (completions, accuracy) of the
re-generated rows in order. Chat messages are reduced to the user text (the system message is carried unchanged).
"""
from __future__ import annotations

hint_prompt = '\n The following text is the beginning part of the answer, which you can refer to for solving the problem:\n'


def generate_and_score(inputs, completions, accuracy_reward, num_of_generation, sample):
    """(prompts, completions, accuracy) after the three hint stages, and the rows re-generated at each stage."""
    prompts = [x["prompt"] for x in inputs]
    redone = []
    for omega in (0.25, 0.5, 0.75):
        inputs_hint = [{"prompt": x["prompt"] + hint_prompt + x["solution_hint"][:round(len(x["solution_hint"]) * omega)],
                        "solution_hint": x["solution_hint"]} for x in inputs]
        is_all_wrong = [0] * len(inputs)
        for x in range(0, len(accuracy_reward), num_of_generation):
            if all(a <= 0 for a in accuracy_reward[x:x + num_of_generation]):
                is_all_wrong[x:x + num_of_generation] = [1] * num_of_generation
        if max(is_all_wrong) == 0:
            is_all_wrong[0:num_of_generation] = [2] * num_of_generation
        true_indices = [index for index, value in enumerate(is_all_wrong) if value == 1 or value == 2]
        true_indices2 = [index for index, value in enumerate(is_all_wrong) if value == 1]
        redo_index = list(set([x // num_of_generation for x in true_indices2]))
        redo_num = len(redo_index)
        inputs_redo = []
        for index, value in enumerate(is_all_wrong):
            if value == 1:
                inputs_redo.append(inputs_hint[index])
            elif value == 2:
                inputs_redo.append(inputs[index])
        if redo_num == 0:
            inputs_redo = []
        updated_inputs = -1 if redo_num == 0 else sample(inputs_redo)  # one process: max(all_redo_num) == redo_num
        redone.append(sorted(true_indices2))
        if not updated_inputs == -1:
            new_completions, new_accuracy = updated_inputs
            prompt_hint = [inputs_hint[x] if x in true_indices2 else inputs[x] for x in range(len(inputs))]
            prompts = [x["prompt"] for x in prompt_hint]
            completions = [new_completions[true_indices.index(x)] if x in true_indices else completions[x]
                           for x in range(len(completions))]
            accuracy_reward = [new_accuracy[true_indices.index(x)] if x in true_indices else accuracy_reward[x]
                               for x in range(len(accuracy_reward))]
    return prompts, completions, accuracy_reward, redone
