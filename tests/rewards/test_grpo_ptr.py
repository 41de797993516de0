"""grpo-ptr: the group trust weight, the progressive ramp, the toy judge, and the catalog's properties."""
import math

import pytest
import torch

from tests.helpers import make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.rewards.grpo_ptr import grpo_ptr_rewards, progressive_weight, toy_judge, trust_weights

pytestmark = pytest.mark.covers("grpo-ptr")
D = torch.float64


def ctx(step=5, total=10):
    return StepContext(step=step, total_steps=total, seed=0, group_size=4, prompts_per_step=2, max_new_tokens=8)


def batch(scores, completions, group=(0, 0, 0, 0, 1, 1, 1, 1)):
    scores = torch.tensor(scores, dtype=D)
    return make_batch(scores.clone(), list(group), scores=scores, completions=list(completions),
                      prompts=[f"p{g}" for g in group])


def table_judge(values):
    return lambda prompts, completions: [values[c] for c in completions]


def test_registered_as_reward_shaping_with_catalog_defaults():
    e = registry.get("reward_shaping", "grpo-ptr")
    assert e.defaults == {"lam_max": 0.5, "warmup_frac": 0.3, "judge": None}
    assert e.provides == ("rewards",) and {"rewards", "scores", "group"} <= set(e.reads)
    assert e.confidence == "abstract-only"


def test_trust_weight_is_in_0_1_and_one_when_the_judge_ranks_correct_first():
    """Catalog test (1), on random groups: gamma = 1 iff mu_correct >= mu_incorrect (or one class is empty),
    else exp(mu_correct - mu_incorrect)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        group = torch.randint(0, 4, (16,), generator=g)
        reason = torch.rand(16, generator=g, dtype=D) * 3
        correct = torch.rand(16, generator=g) < 0.5
        gamma = trust_weights(reason, correct, group)
        assert torch.all((gamma > 0) & (gamma <= 1))
        for k in group.unique():
            rows = group == k
            c, w = reason[rows & correct], reason[rows & ~correct]
            expected = 1.0 if len(c) == 0 or len(w) == 0 or c.mean() >= w.mean() else math.exp(c.mean() - w.mean())
            assert torch.allclose(gamma[rows], torch.full_like(gamma[rows], expected))


def test_lambda_zero_is_grpo():
    """Catalog test (2): at the first step lambda(0) = 0, and with lam_max = 0 always, rewards and GRPO advantages
    are exactly the outcome's."""
    b = batch([1, 0, 0, 1, 0, 0, 1, 0], ["<think>1</think>1", "a", "b", "2", "c", "3", "4", "d"])
    before = b.rewards.clone()
    for c, kw in [(ctx(step=0), {}), (ctx(step=7), {"lam_max": 0.0})]:
        out = grpo_ptr_rewards(b, c, **kw)
        assert torch.equal(out.rewards, before)
        assert torch.equal(grpo(out), grpo(b))
    shaped = grpo_ptr_rewards(b, ctx(step=7))
    assert not torch.equal(shaped.rewards, before) and not torch.equal(grpo(shaped), grpo(b))


def test_vanishing_trust_cannot_flip_the_outcome_order():
    """Catalog test (3): a judge that prefers wrong answers by a growing margin k gets gamma = e^{-k dk}, so the
    reasoning term lam gamma R_reason -> 0 and every correct sample stays above every wrong one."""
    texts = ["r1", "r2", "w1", "w2", "r3", "w3", "w4", "w5"]
    scores = [1, 1, 0, 0, 1, 0, 0, 0]
    base_scores = {"r1": 0.1, "r2": 0.0, "w1": 1.0, "w2": 0.9, "r3": 0.2, "w3": 0.8, "w4": 1.0, "w5": 0.7}
    gaps = []
    for k in (1.0, 5.0, 20.0, 80.0):
        judge = table_judge({t: k * v for t, v in base_scores.items()})
        out = grpo_ptr_rewards(batch(scores, texts), ctx(step=10), judge=judge).rewards
        right, wrong = out[torch.tensor(scores) == 1], out[torch.tensor(scores) == 0]
        gaps.append(float((out - torch.tensor(scores, dtype=D)).abs().max()))
        if k >= 5:
            assert right.min() > wrong.max()
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-20  # shaped -> outcome as gamma -> 0


def test_progressive_weight_ramps_over_the_first_30_percent():
    assert [progressive_weight(t, 10) for t in (0, 1, 2, 3, 4, 9)] == pytest.approx(
        [0.0, 0.5 / 3, 1.0 / 3, 0.5, 0.5, 0.5])
    assert progressive_weight(0, 10, warmup_frac=0.0) == 0.5 and progressive_weight(3, None, warmup_frac=0.0) == 0.5


def test_the_ramp_needs_the_runs_length():
    """Without T the ramp is undefined: an error, not lam_max from step 0 (the reasoning reward unramped)."""
    for total in (0, None):
        with pytest.raises(ValueError, match="total_steps"):
            progressive_weight(3, total)
        with pytest.raises(ValueError, match="total_steps"):
            grpo_ptr_rewards(batch([1, 0] * 4, list("abcdefgh")), ctx(step=3, total=total))


def test_shaped_reward_value_and_metrics():
    """R = outcome + lambda gamma R_reason with a plugged-in judge; logs lambda, gamma_mean, reason_mean."""
    values = {"a": 0.2, "b": 0.8, "c": 0.4, "d": 0.6, "e": 1.0, "f": 0.0, "g": 0.5, "h": 0.5}
    b = batch([1, 0, 1, 0, 1, 1, 0, 0], list("abcdefgh"))
    c = ctx(step=1, total=10)  # lambda = 0.5 / 3
    out = grpo_ptr_rewards(b, c, judge=table_judge(values))
    lam = 0.5 / 3
    gamma0 = math.exp((0.2 + 0.4) / 2 - (0.8 + 0.6) / 2)  # group 0 prefers the wrong answers
    gamma = torch.tensor([gamma0] * 4 + [1.0] * 4, dtype=D)
    expected = torch.tensor([1, 0, 1, 0, 1, 1, 0, 0], dtype=D) + lam * gamma * torch.tensor(
        [values[k] for k in "abcdefgh"], dtype=D)
    assert torch.allclose(out.rewards, expected.to(out.rewards.dtype))
    assert c.metrics == {"grpo_ptr/lambda": pytest.approx(lam), "grpo_ptr/gamma_mean": pytest.approx((gamma0 + 1) / 2),
                         "grpo_ptr/reason_mean": pytest.approx(sum(values.values()) / 8)}


def test_toy_judge_rules():
    texts = ["<think>12+34=46</think> 46", "<think>so so so so so so</think> 46", "46", "no number", "",
             "caf\udce9", "x" * 1_000_000]
    scores = toy_judge([""] * len(texts), texts)
    assert scores[0] == 1.0                               # structured, consistent, no repetition
    assert scores[1] == pytest.approx((1 + 0 + 1 / 4) / 3)  # six "so": four 3-grams, one unique
    assert scores[2] == pytest.approx(1 / 3)              # no think block: no reasoning to be consistent with
    assert scores[3] == pytest.approx(1 / 3)
    unclosed = toy_judge([""], ["<think>46 then 46"])[0]  # no closed block either: fluency only
    assert unclosed == pytest.approx(1 / 3)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_judges_may_return_numpy_and_torch_numbers():
    np = pytest.importorskip("numpy")
    b = batch([1, 0, 0, 1, 0, 0, 1, 0], list("abcdefgh"))
    plain = grpo_ptr_rewards(b, ctx(), judge=lambda p, c: [0.25 * (i % 4) for i in range(8)]).rewards
    for judge in (lambda p, c: np.arange(8) % 4 * 0.25, lambda p, c: torch.arange(8) % 4 * 0.25,
                  lambda p, c: [np.float32(0.25 * (i % 4)) for i in range(8)]):
        assert torch.equal(grpo_ptr_rewards(b, ctx(), judge=judge).rewards, plain)


def test_bad_judges_and_options_are_refused():
    b = batch([1, 0, 0, 1, 0, 0, 1, 0], list("abcdefgh"))
    for judge, match in [(lambda p, c: [0.0], "returned 1 scores"), (lambda p, c: [float("nan")] * 8, "finite"),
                         ("judge", "callable")]:
        with pytest.raises(ValueError, match=match):
            grpo_ptr_rewards(b, ctx(), judge=judge)
    for bad in (["0.5"] * 8, [None] * 8, [torch.ones(2)] * 8, [float("inf")] * 8):
        with pytest.raises(ValueError, match="finite numbers"):
            grpo_ptr_rewards(b, ctx(), judge=lambda p, c, bad=bad: bad)
    short = batch([1, 0, 0, 1, 0, 0, 1, 0], list("abcdefgh"))
    short.prompts = short.prompts[:7]
    with pytest.raises(ValueError, match="7 prompts for 8 completions"):
        grpo_ptr_rewards(short, ctx())
    with pytest.raises(ValueError, match="batch.scores"):
        grpo_ptr_rewards(make_batch([1.0, 0.0], [0, 0], completions=["a", "b"], prompts=["p", "p"]), ctx())
    for kw in [{"lam_max": -0.1}, {"warmup_frac": 1.5}]:
        with pytest.raises(ValueError, match="grpo-ptr"):
            grpo_ptr_rewards(b, ctx(), **kw)
