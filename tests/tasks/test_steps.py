"""Monte Carlo step values: step splits, prefix values, step advantages, sibling pairs."""
from types import SimpleNamespace

import pytest
import torch

from workbench.tasks import get_task
from workbench.tasks.base import Example
from workbench.tasks.steps import advantage_steps, prefix_values, sibling_pairs, split_steps


class ScriptedEngine:
    """generate() continues `prompt` with `script(prompt, j)` for the j-th sample: deterministic values."""

    def __init__(self, script, max_len=99):
        self.script, self.max_len, self.calls = script, max_len, []

    def generate(self, prompts, *, n=1, max_new_tokens=16, temperature=1.0, top_p=1.0):
        self.calls.append((list(prompts), n, max_new_tokens))
        full = [self.script(p, j) for p in prompts for j in range(n)]
        texts = [t[:max_new_tokens] for t in full]
        return SimpleNamespace(texts=texts, truncated=torch.tensor([len(t) > max_new_tokens for t in full]))


def test_split_steps_and_prefix_values():
    assert split_steps("12345", 2) == ["12", "34", "5"] and split_steps("", 3) == [""]
    with pytest.raises(ValueError, match="step_chars"):
        split_steps("1", 0)
    task, e = get_task("addition"), Example("1+2=", "3", "3")
    # from "" the scripted policy answers "3" on even samples and "4" on odd ones: V = 1/2
    engine = ScriptedEngine(lambda prompt, j: "3" if j % 2 == 0 else "4")
    assert prefix_values(engine, task, [(e, ""), (e, "")], k=4, max_new_tokens=5) == [0.5, 0.5]


@pytest.mark.covers("direct-advantage-po")
def test_step_advantages_telescope_to_the_final_score_minus_the_start_value():
    task = get_task("addition")
    examples = [Example("12+30=", "42", "42"), Example("11+11=", "22", "22")]
    answers = {"12+30=": "4213", "11+11=": "22"}  # the first sample answers wrong (4213), the second right

    def script(prompt, j):
        for p, a in answers.items():
            if prompt.startswith(p):
                done = prompt[len(p):]
                return a[len(done):] if j == 0 else (a if p == "11+11=" else "42")[len(done):]
        raise AssertionError(prompt)

    items = advantage_steps(ScriptedEngine(script), task, examples, step_chars=2, k=2, max_new_tokens=8)
    by_example = [[i for i in items if i.prompt.startswith(e.prompt)] for e in examples]
    for e, steps in zip(examples, by_example):
        assert "".join(s.step for s in steps) == answers[e.prompt]
        assert [s.final for s in steps] == [False] * (len(steps) - 1) + [True]
        assert all(s.prompt == e.prompt + "".join(t.step for t in steps[:i]) for i, s in enumerate(steps))
    # V("") = mean of {own sample, alternative}; A sums to score - V("")
    wrong, right = by_example
    assert sum(s.advantage for s in wrong) == pytest.approx(0.0 - 0.5)   # V("") = (0 + 1)/2
    assert sum(s.advantage for s in right) == pytest.approx(1.0 - 1.0)
    assert wrong[-1].advantage == pytest.approx(0.0 - 0.5)  # "42" then "13": the last step ruins the answer


@pytest.mark.covers("mcts-dpo")
def test_sibling_pairs_prefer_the_higher_value_next_step():
    task, e = get_task("addition"), Example("12+30=", "42", "42")
    # the first sample is "42"; children from the cut state: "4" (then "2": value 1) or "5" (value 0)
    def script(prompt, j):
        done = prompt[len(e.prompt):]
        if done == "":
            return "42" if j == 0 else ("4" if j % 2 == 0 else "5") + "2"
        return {"4": "2", "5": "2"}.get(done, "")

    cut_at_start = SimpleNamespace(randrange=lambda n: 0)
    pairs = sibling_pairs(ScriptedEngine(script), task, [e], cut_at_start, step_chars=1, children=4, k=2,
                          max_new_tokens=4)
    assert len(pairs) == 1
    prompt, chosen, rejected, chosen_final, rejected_final, q_w, q_l = pairs[0]
    assert prompt == e.prompt and (chosen, rejected) == ("4", "5") and not chosen_final and not rejected_final
    assert (q_w, q_l) == (1.0, 0.0)
