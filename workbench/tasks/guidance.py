"""What guidance reads from a task: a solution to hint from, and a fraction of it rendered as a hint in the prompt.

    actions = solution_actions(task, example)    # the expert's action texts (a one-turn task: [example.target])
    text    = solution_hint(actions, fraction)   # the first round(fraction * len(solution)) characters
    task'   = HintedTask(task, hints)            # the same task, its episodes opening with a hint in the prompt

GHPO's hint is the first omega fraction of the ground-truth solution's characters ("hint length = round(omega *
len(solution))"), appended to the problem after a sentence that says what it is (`GHPO_TEMPLATE`, hkgc-1/GHPO
`ghpo_trainer.py`). POPE appends an oracle prefix with an instruction to build on it; ICPO, XRPO and iGRPO prepend
or append other text (a demonstration, a solved exemplar, a previous attempt): all are `HintedTask` with their own
hint text and template. The hint goes into the last user message the environment opens with, so a multi-turn
environment's later observations are untouched. A run's task keeps its verifier: a hinted episode is scored as the
plain one would be.

At toy scale the solution is the task's exact one (`Task.expert_actions`: the SFT target of a one-turn task, the
expert's actions of a multi-turn environment), not a human-written derivation: each guidance card says so.
"""
from __future__ import annotations

import copy
from collections.abc import Callable

from workbench.envs.base import Env, Message, OpeningEnv, as_messages
from workbench.tasks.base import Example, Task, WrappedTask

# Appended to the cards (recipe summaries) of the methods that read privileged information: where it comes from here
TOY_SOLUTION = (" At toy scale the solution (hint, prefix, demonstration, reference answer) is the task's exact one: a "
                "one-turn task's target or a multi-turn task's expert actions, not a written derivation.")
TOY_TEACHER = (" At toy scale the teachers are exact solvers of the task (workbench/tasks/teachers.py), not larger "
               "models.")
TOY_CRITIQUE = " At toy scale the critique is the verifier's diagnosis rendered as text, not a model's."
GHPO_TEMPLATE = ("{prompt}\n The following text is the beginning part of the answer, which you can refer to for "
                 "solving the problem:\n{hint}")  # hkgc-1/GHPO src/ghpo/ghpo_trainer.py `hint_prompt`, verbatim
PLAIN_TEMPLATE = "{prompt}{hint}"  # the hint glued to the prompt (a character-level model reads no instructions)


def check_fraction(name: str, value: float) -> float:
    """A fraction of a solution must lie in [0, 1]: refused with the field's name otherwise."""
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}={value!r} is a fraction of the solution: give a number in [0, 1] (0 = no hint, "
                         "1 = the whole solution)")
    return float(value)


def check_template(template: str) -> str:
    """A hint template must place both the prompt and the hint: `{prompt}` and `{hint}`, nothing else."""
    try:
        filled = template.format(prompt="\0p", hint="\0h")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"template={template!r} cannot be filled ({e!r}): use only the fields {{prompt}} and "
                         "{hint}") from None
    if "\0p" not in filled or "\0h" not in filled:
        raise ValueError(f"template={template!r} must contain both {{prompt}} and {{hint}} (where the problem and the "
                         "hint go)")
    return template


def solution_actions(task: Task, example: Example) -> list[str]:
    """The action texts of one solving episode of `example` (`task.expert_actions`); a task that cannot give one
    (no target, an outside environment) is refused naming the fix."""
    try:
        actions = task.expert_actions(example)
    except (NotImplementedError, KeyError) as e:
        raise ValueError(f"task {task.name!r} has no solution for {example.prompt[:40]!r} ({e!r}): guidance needs "
                         "a task whose examples carry one (a target, or an expert trajectory)") from None
    if not actions or not "".join(actions):
        raise ValueError(f"task {task.name!r} has no solution for {example.prompt[:40]!r} (its expert_actions are "
                         "empty): guidance needs a task whose examples carry one (a target, or an expert trajectory)")
    return list(actions)


def has_solutions(task: Task) -> bool:
    """Does `task` give a solution for its examples (read off its first known example)?"""
    examples = task.known_examples()[:1]
    try:
        return bool(examples) and bool(solution_actions(task, examples[0]))
    except ValueError:
        return False


def solution_hint(actions: list[str], fraction: float) -> str:
    """The first round(fraction * n) characters of the solution's text (its actions joined), n its length:
    GHPO's hint. fraction 0 gives "" (no hint), 1 the whole solution."""
    text = "".join(actions)
    return text[:round(check_fraction("fraction", fraction) * len(text))]


def solution_parts(actions: list[str], n: int) -> list[str]:
    """The solution in at most n consecutive parts whose concatenation is its text: its actions (steps) grouped into
    n runs when it has several, else its one action's characters cut into n near-equal pieces (empty ones dropped:
    a 2-character answer has 2 parts)."""
    pieces = actions if len(actions) > 1 else list(actions[0])
    bounds = [round(i * len(pieces) / n) for i in range(n + 1)]
    parts = ["".join(pieces[a:b]) for a, b in zip(bounds, bounds[1:])]
    return [p for p in parts if p]


def solution_prefix(actions: list[str], fraction: float) -> tuple[tuple[str, ...], str]:
    """The first round(fraction * n) characters of the solution (n its length) as (whole actions, the start of the
    next action): what a policy continues from when conditioned on a prefix of the solution. The last action is
    never given whole (it would end the episode): at fraction 1 it is the partial part."""
    text = "".join(actions)
    left = round(check_fraction("fraction", fraction) * len(text))
    whole = []
    for action in actions[:-1]:
        if len(action) > left:
            break
        whole.append(action)
        left -= len(action)
    return tuple(whole), actions[len(whole)][:left]


def with_hint(messages: list[Message], hint: str, template: str) -> list[Message]:
    """`messages` with the last user message's content replaced by template.format(prompt=content, hint=hint);
    no hint ("") leaves them as they are."""
    if not hint:
        return list(messages)
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last is None:
        raise ValueError("an episode without a user message has nowhere to put a hint")
    out = list(messages)
    out[last] = {**out[last], "content": template.format(prompt=out[last]["content"], hint=hint)}
    return out


class HintedTask(WrappedTask):
    """`task` whose episodes open with `hint(example)` in the prompt (`template` places it); the examples, the
    verifier and everything else are the wrapped task's. `hint` returns "" for an example that gets none."""

    def __init__(self, task: Task, hint: Callable[[Example], str], template: str = PLAIN_TEMPLATE):
        super().__init__(task)
        self.hint, self.template = hint, template

    def make_env(self) -> Env:
        return OpeningEnv(self.task.make_env(), self.with_hint)

    def with_hint(self, messages: list[Message], example: Example) -> list[Message]:
        return with_hint(messages, self.hint(example), self.template)

    def opening(self, example: Example):
        plain = self.task.opening(example)
        messages = self.with_hint(as_messages(plain), example)
        return messages[0]["content"] if isinstance(plain, str) else messages


def hinted_copies(task: Task, examples: list[Example], hints: list[str],
                  template: str = PLAIN_TEMPLATE) -> tuple[HintedTask, list[Example]]:
    """(HintedTask, copies): a copy of examples[i] for every hints[i], each opening with its own hint. HintedTask
    reads the hint off the example, and equal examples (two rows of one group, a prompt drawn twice) would share one;
    the copies are told apart by identity. Roll out the copies, one row each, on the returned task."""
    copies = [copy.copy(e) for e in examples]
    by_copy = {id(c): h for c, h in zip(copies, hints, strict=True)}
    return HintedTask(task, lambda example: by_copy[id(example)], template), copies
