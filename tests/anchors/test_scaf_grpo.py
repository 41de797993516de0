"""Scaf-GRPO against the authors' trainer (transcribed in formulas_scaf_grpo.py): the same cliff groups, the same
winning level, the same rows replaced under the same prompts. Differences shown: our solution parts re-join without
the spaces the reference puts between its sentence parts, and a task without knowledge hints has no knowledge tier
here, where the reference still samples four levels with an empty knowledge hint."""
import pytest
import torch

from tests.anchors.formulas_scaf_grpo import build_new_message, hint_loop
from tests.helpers import DigitFirst
from tests.transforms.test_ghpo import rows
from tests.transforms.test_scaf_grpo import EXAMPLES, G, context, first_batch
from workbench.transforms.scaf_grpo import scaf_grpo

pytestmark = pytest.mark.covers("scaf-grpo")
KNOWLEDGE = ["k1.", "k2.", "k3.", "k4."]
SOLUTION = ["ab", "cd", "ef", "gh"]  # solution_parts of "abcdefgh"


class Taught(DigitFirst):
    def knowledge_hints(self, example):
        return KNOWLEDGE


def level_shown(content: str) -> tuple[str, int]:
    """(question, hint level) read off a hinted prompt of either side: knowledge levels 1-4, solution levels 5-8."""
    question, hint = content.split("\n")
    question = question.removeprefix("Question: ")
    if hint.startswith("Knowledge Hints: "):
        return question, len(hint.removeprefix("Knowledge Hints: ").split())
    return question, 4 + len(hint.removeprefix("Solution Hints: ").replace(" ", "")) // 2


def wins_at(level_of: dict):
    """A world whose sample of question q succeeds from hint level level_of[q] on (None: never)."""
    def solves(content: str) -> float:
        question, level = level_shown(content)
        return float(level_of[question] is not None and level >= level_of[question])
    return solves


LEVEL_OF = {"q0": 2, "q1": 6, "q2": None, "q3": 1}  # q3 is solved alone (no cliff) in the first batch


class Rollout:
    """ctx.rollout stand-in: one sample per hinted prompt, scored by the world."""

    def __init__(self, solves):
        self.solves = solves

    def __call__(self, examples, *, group_size, task, rewarded=False, **_):
        prompts = [task.opening(e) for e in examples]
        scores = [self.solves(p) for p in prompts]
        return rows(prompts, [s for s in scores for _ in range(G)], "h", list(range(len(prompts)))).select(
            torch.arange(0, len(prompts) * G, G))


@pytest.mark.parametrize("replace_num, plain", [(1, False), (1, True), (2, False)])
def test_same_rows_replaced_at_the_same_level_under_the_same_prompt(replace_num, plain):
    solves = wins_at(LEVEL_OF)
    ctx = context(Rollout(solves))
    ctx.task = Taught()
    out = scaf_grpo(first_batch(), ctx, replace_num=replace_num, plain_prompt=plain)
    batch = first_batch()
    theirs = hint_loop(
        [{"uid": int(g), "prompt": q, "response": c, "reward": float(s)}
         for g, q, c, s in zip(batch.group, batch.prompts, batch.completions, batch.scores)],
        {g: e.prompt for g, e in enumerate(EXAMPLES)},
        {"knowledge_components_parts": {g: KNOWLEDGE for g in range(4)},
         "solution_breakdown_parts": {g: SOLUTION for g in range(4)}},
        lambda contents: (["hinted"] * len(contents), [solves(c) for c in contents]),
        replace_num=replace_num, replace_hint_prompt=plain)
    assert out.scores.tolist() == [r["reward"] for r in theirs]
    assert [c.startswith("h/") for c in out.completions] == [r["response"] == "hinted" for r in theirs]
    assert out.prompts == [unspaced(r["prompt"]) for r in theirs]


def unspaced(content: str) -> str:
    """The reference's prompt with its solution parts re-joined without spaces, as ours are (the one difference)."""
    if "\nSolution Hints: " not in content:
        return content
    head, hint = content.split("\nSolution Hints: ")
    return f"{head}\nSolution Hints: {hint.replace(' ', '')}"


def test_the_references_levels_without_knowledge_hints_include_four_empty_ones():
    levels = build_new_message(["q"], [0], {"solution_breakdown_parts": [SOLUTION[:2]]})
    assert [content.split("\n")[1] for _, _, content in levels] == (
        ["Knowledge Hints: "] * 4 + ["Solution Hints: ab", "Solution Hints: ab cd", "Solution Hints: ab cd",
                                     "Solution Hints: ab cd"])  # empty tier, then repeated levels: ours has 2 levels
