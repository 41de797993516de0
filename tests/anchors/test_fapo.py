"""Agreement with FAPO's reward code (tests/anchors/formulas_fapo.py: yyDing1/FAPO @ e6d1164 and verl-recipe
@ 48ea0a7), on the same inputs, exactly:

    compute_score_fapo_genrm (both)   `fapo_genrm` with num_steps = extra_info["total_steps"]
    judge_fp_process / the recipe's   `flaw_index`: the step index a GenRM's answer boxes (None: no box, no int)
    err_location parse
    compute_score_fapo (both)         `fapo` with `flaw_index` of the GenRM's answer as the detector and the rule
                                      verdict as `scores`

Known difference, outside the compared inputs: yyDing1's `judge_fp_process` reads the boxed index with `eval`, so
"1+1" or "0x1" count as step indices there; verl-recipe (and ours) use `int`, and an unparseable answer is "no
flaw" in all three. The references return the score after the penalty; ours equally.
"""
import random

import pytest

from tests.anchors import formulas_fapo as ref
from workbench.rewards.fapo import fapo, fapo_genrm, flaw_index

pytestmark = pytest.mark.covers("fapo")

JUNK = ["", "no box", r"\boxed{}", r"\boxed{two}", r"\boxed{{1}", r"\boxed{3", "\\boxed{-1}\\boxed{"]


def genrm_answer(rng: random.Random, total_steps: int) -> str:
    """A GenRM output: reasoning, then (usually) a boxed index in or out of range, sometimes junk or two boxes."""
    if rng.random() < 0.15:
        return rng.choice(JUNK)
    index = rng.randint(-3, total_steps + 2)
    text = "x" * rng.choice([0, 10, 400]) + f"critique ... \\boxed{{{index}}}"
    if rng.random() < 0.2:
        text = text + " on second thought \\boxed{-1}"
    if rng.random() < 0.1:
        text = text + "y" * 400  # the box falls out of the last 300 characters
    return text


@pytest.mark.parametrize("seed", range(5))
def test_genrm_reward_matches_both_references(seed):
    rng = random.Random(seed)
    for _ in range(200):
        total = rng.randint(1, 9)
        label = rng.randint(-1, total - 1)
        text = genrm_answer(rng, total)
        ours = fapo_genrm([text], ground_truth=[label], num_steps=[total])[0]
        assert ours == ref.compute_score_fapo_genrm(text, label, {"total_steps": total})
        assert ours == ref.recipe_compute_score_fapo_genrm(text, label, {"total_steps": total})


@pytest.mark.parametrize("seed", range(5))
def test_flaw_index_reads_the_genrm_answer_as_both_references(seed):
    rng = random.Random(seed)
    for response in [genrm_answer(rng, 6) for _ in range(200)] + JUNK:
        index = flaw_index(response)
        assert index == ref.judge_fp_process(response, return_err_step=True)[1]  # yyDing1's int(result)
        assert (index not in (None, -1)) == ref.recipe_compute_score_fapo(True, response)[1]  # verl-recipe's flag
        assert (index not in (None, -1)) == bool(ref.judge_fp_process(response))


@pytest.mark.parametrize("seed", range(5))
def test_policy_reward_matches_both_references(seed):
    rng = random.Random(seed)
    for _ in range(200):
        correct = rng.random() < 0.6
        response = None if rng.random() < 0.05 else genrm_answer(rng, 6)
        ours = fapo(["solution"], scores=[float(correct)],
                    detector=lambda completion, **_: None if response is None else flaw_index(response))[0]
        assert ours == ref.compute_score_fapo(correct, response)[0]
        assert ours == ref.recipe_compute_score_fapo(correct, response)[0]


def test_only_yyding1_reads_a_non_integer_box_as_a_step():
    """The known difference: `eval("1.5")` is a number, so yyDing1 flags the answer; int() fails in verl-recipe
    and ours, which count it as no flaw (the GenRM is trained to box an integer index)."""
    response = r"\boxed{1.5}"
    assert ref.compute_score_fapo(True, response) == (0.0, True)
    assert ref.recipe_compute_score_fapo(True, response) == (1.0, False)
    assert flaw_index(response) is None
    assert fapo(["solution"], scores=[1.0], detector=lambda completion, **_: flaw_index(response)) == [1.0]
