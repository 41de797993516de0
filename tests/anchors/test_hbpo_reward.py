"""hbpo-reward against the authors' reward (ZJU-REAL/HBPO @ 243997e, transcribed in formulas_hbpo_reward.py), with
their constants (L_max 4096, beta 4, alpha 1/4096) and their budgets 512 / 1024 / 2048 / 2560, on correct answers.

The documented difference (workbench/rewards/hbpo.py): the code pays min(f1(n, b), f2(b)) at every length n <= L_max,
the paper (ours) f2(b) within the budget. Past the budget f1 < f2 always, so both pay f1; within it they differ
exactly where f1 < f2, i.e. a short answer under a small budget (b = 512, n below about 300), by f2 - f1. Their
pi is 3.1416: values agree to 3e-5.
"""
import math

import pytest

from tests.anchors import formulas_hbpo_reward as ref
from workbench.rewards.hbpo import BUDGET_SENTENCE, hbpo_reward

pytestmark = pytest.mark.covers("hbpo-reward")
L, BETA, ALPHA = 4096, 4.0, 1 / 4096
PI_TOL = 3e-5


def ours(n: int, b: int) -> float:
    (value,) = hbpo_reward(["x"], [[1] * n], prompts=[f"2+2=\n{BUDGET_SENTENCE.format(budget=b)}."], scores=[1.0],
                           alpha=ALPHA, beta=BETA, max_len=L)
    return value


def theirs(n: int, b: int) -> float:
    return ref.correct_answer_reward(f"<think> I will answer the question with {b} tokens. Let me see", n)


@pytest.mark.parametrize("b", [512, 1024, 2048, 2560])
def test_the_code_differs_by_min_f1_f2_below_the_budget_and_agrees_elsewhere(b):
    lengths = sorted(set(range(0, L + 1, 32)) | {b - 1, b, b + 1, L})
    shown = 0
    for n in lengths:
        f1 = BETA * math.cos(math.pi * n / (2 * L)) - ALPHA * abs(n - b)
        f2 = BETA * math.cos(math.pi * b / (2 * L))
        documented = max(f2 - f1, 0.0) if n <= b else 0.0  # ours f2 where theirs min(f1, f2)
        assert ours(n, b) - theirs(n, b) == pytest.approx(documented, abs=PI_TOL), (n, b)
        shown += documented > 10 * PI_TOL
    assert shown > 0 if b == 512 else shown == 0  # the difference shows under the smallest budget only
