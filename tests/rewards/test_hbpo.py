"""HBPO's budget-aware reward R(n | b): piecewise cosine in the length, given the budget the prompt announced."""
import math

import pytest
import torch

from workbench import registry
from workbench.rewards.hbpo import BUDGET_SENTENCE, budget_of, budget_reward, hbpo_reward
from workbench.rollout.hbpo import budgets_for

pytestmark = pytest.mark.covers("hbpo-reward")
D = torch.float64


def R(n, b, correct=True, L=100, **hp):
    n = torch.as_tensor(n, dtype=D).flatten()
    b = torch.as_tensor(b, dtype=D).expand_as(n)
    return budget_reward(n, b, torch.full(n.shape, correct), max_len=L, **hp)


def prompt(b: int, question="2+2=") -> str:
    return f"{question}\n{BUDGET_SENTENCE.format(budget=b)}.\n"


def test_non_increasing_in_length_beyond_the_budget():
    for b in (10, 25, 50, 75):
        r = R(torch.arange(b, 101), b)
        assert bool((r[1:] < r[:-1]).all())            # strictly: cosine falls and the overrun grows


def test_for_lengths_below_every_budget_smaller_budgets_pay_more():
    budgets = torch.tensor([25.0, 50.0, 75.0, 100.0], dtype=D)
    for n in (0, 5, 25):
        r = torch.stack([R([n], b)[0] for b in budgets])
        assert bool((r[1:] < r[:-1]).all())


def test_every_default_budget_pays_a_right_answer_more_than_a_wrong_one():
    """L_max is the context, above every budget (the paper's 512..2560 of 4096): the default budgets are fractions
    0.125 .. 0.625 of max_new_tokens = L_max, so no subgroup's right answers are paid what a wrong one is."""
    for L in (8, 10, 100, 4096):
        budgets = budgets_for(L)
        assert max(budgets) < L
        within = torch.stack([R([b], b, L=L)[0] for b in budgets])
        assert bool((within > 0).all()) and bool((within[1:] < within[:-1]).all())
    assert budgets_for(4096) == (512, 1024, 2048, 2560)                  # the paper's budgets
    assert float(R([3], 100)[0]) == pytest.approx(0.0)                  # only b = L_max (allowed) pays 0


def test_budgets_outside_one_to_l_max_or_not_integers_are_refused():
    for bad in (0, -3, 2.5, 9, True):
        with pytest.raises(ValueError, match=r"budget .*max_len = 8"):
            hbpo_reward(["4"], [[1] * 2], budget=[bad], scores=[1.0], max_len=8)
    with pytest.raises(ValueError, match="budget 9"):
        hbpo_reward(["4"], [[1] * 2], prompts=[prompt(9)], scores=[1.0], max_new_tokens=8)   # announced > L_max
    with pytest.raises(ValueError, match="budget"):
        R([3], 101)                                                     # the math function checks too
    with pytest.raises(ValueError, match="budget column has 1 rows for 2"):
        hbpo_reward(["4", "4"], [[1], [1]], budget=[4], scores=[1.0, 1.0], max_len=8)
    assert hbpo_reward(["4"], [[1] * 2], budget=[8.0], scores=[1.0], max_len=8) == pytest.approx([0.0])  # b = L_max


def test_incorrect_answers_get_zero():
    g = torch.Generator().manual_seed(0)
    n = torch.randint(0, 150, (50,), generator=g).double()
    b = torch.randint(1, 101, (50,), generator=g).double()
    assert bool((budget_reward(n, b, torch.zeros(50, dtype=torch.bool), max_len=100) == 0).all())


def test_known_values_continuity_at_the_budget_and_zero_past_l_max():
    L, b = 100, 40
    f2 = math.cos(math.pi * b / (2 * L))
    assert R([0, 20, 40], b).tolist() == pytest.approx([f2] * 3)       # flat within the budget
    assert float(R([60], b, alpha=0.01)[0]) == pytest.approx(math.cos(math.pi * 60 / 200) - 0.01 * 20)
    assert float(R([40 + 1e-9], b)[0]) == pytest.approx(f2)            # f1(b, b) = f2(b)
    assert float(R([101], b)[0]) == 0.0                                # n > L_max
    assert float(R([10], 50, beta=2.0)[0]) == pytest.approx(2 * math.cos(math.pi / 4))


def test_budget_is_read_from_the_prompt_sentence():
    assert budget_of(prompt(512)) == 512
    assert budget_of("I will answer the question within 3 tokens; i WILL answer the question within 7 tokens") == 7
    assert budget_of("no budget here") is None
    assert budget_of([{"role": "user", "content": prompt(9)}]) == 9     # TRL's conversational prompts
    assert budget_of("<think> I will answer the question with 512 tokens") == 512  # the authors' prefill


def test_reward_function_reads_budgets_from_prompts_or_a_budget_column():
    ids = [[1] * 2, [1] * 6, [1] * 2, [1] * 3]
    prompts = [prompt(4), prompt(4), prompt(8), "2+2="]
    out = hbpo_reward(["4"] * 4, ids, prompts=prompts, scores=[1.0, 1.0, 0.0, 1.0], max_new_tokens=8)
    f2 = math.cos(math.pi * 4 / 16)
    assert out[:3] == pytest.approx([f2, math.cos(math.pi * 6 / 16) - 1e-3 * 2, 0.0])
    assert out[3] is None                                               # no budget announced: not applicable
    column = hbpo_reward(["4"] * 4, ids, budget=[4, 4, 8, 8], scores=[1.0, 1.0, 0.0, 1.0], max_len=8)
    assert column[:3] == pytest.approx(out[:3]) and column[3] == pytest.approx(math.cos(math.pi * 8 / 16))


def test_l_max_comes_from_max_len_or_the_run_and_bad_values_are_refused():
    kw = dict(prompts=[prompt(4)], scores=[1.0])
    assert hbpo_reward(["4"], [[1] * 2], max_len=16, **kw) == pytest.approx([math.cos(math.pi * 4 / 32)])
    with pytest.raises(ValueError, match="max_len"):
        hbpo_reward(["4"], [[1]], **kw)                                 # TRL: no max_new_tokens column
    with pytest.raises(ValueError, match="alpha"):
        hbpo_reward(["4"], [[1]], alpha=-1.0, max_len=8, **kw)
    with pytest.raises(ValueError, match="prompts"):
        hbpo_reward(["4"], [[1]], scores=[1.0], max_len=8)              # neither prompts nor budget


def test_registered_with_the_catalog_start_values_and_finite_on_degenerate_completions():
    """Empty, non-UTF-8 and a million characters (its time per size: bench/bench_parsers.py)."""
    entry = registry.get("reward", "hbpo-reward")
    assert entry.defaults == {"alpha": 1e-3, "beta": 1.0, "max_len": None}
    texts = ["", "caf\udce9", "x" * 1_000_000]
    out = hbpo_reward(texts, [[], [1] * 5, [1] * 1_000_000], prompts=[prompt(4)] * 3, scores=[1.0, 1.0, 1.0],
                      max_new_tokens=8)
    assert out == pytest.approx([math.cos(math.pi / 4), math.cos(math.pi * 5 / 16) - 1e-3, 0.0])
