"""PF-PPO (verl's compute_pf_ppo_reweight_data): the batch redrawn with replacement at the same size, weighted
towards reliable rewards; max_min keeps only the extremes; the R^2 diagnostic on a synthetic noisy reward model."""
import numpy as np
import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.transforms.pf_ppo import check_pf_ppo, pf_ppo, pf_weights, r_squared

pytestmark = pytest.mark.covers("pf-ppo")


def scored(rewards, group, scores=None):
    b = group_batch(rewards, group)
    b.scores = b.rewards.clone() if scores is None else torch.as_tensor(scores, dtype=torch.float64)
    b.prompts = [f"p{g}" for g in group]
    return b


def test_registered_with_verls_defaults():
    entry = registry.get("group_transform", "pf-ppo")
    assert entry.defaults == {"reweight_method": "pow", "weight_pow": 2.0, "scope": "batch"}
    assert entry.title == registry.catalog()["pf-ppo"]["title"]


def test_weights_known_values():
    r = torch.tensor([-2.0, 1.0, 0.0, 3.0, -2.0], dtype=torch.float64)
    assert pf_weights(r, "pow", 2.0).tolist() == [4.0, 1.0, 0.0, 9.0, 4.0]
    assert pf_weights(r, "pow", 1.0).tolist() == [2.0, 1.0, 0.0, 3.0, 2.0]
    assert pf_weights(r, "max_min").tolist() == [1.0, 0.0, 0.0, 1.0, 1.0]   # both minima count
    assert pf_weights(r, "max_random").tolist() == [0.1, 0.1, 0.1, 0.4, 0.1]
    group = torch.tensor([0, 0, 0, 1, 1])  # per group: max/min of {-2, 1, 0} and of {3, -2}
    assert pf_weights(r, "max_min", group=group).tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]
    assert pf_weights(r, "max_random", group=group).tolist() == [0.1, 0.4, 0.1, 0.4, 0.1]


@pytest.mark.parametrize("method", ["pow", "max_min", "max_random"])
@pytest.mark.parametrize("scope", ["batch", "group"])
def test_the_resampled_batch_has_the_same_size_and_whole_rows(method, scope):
    rewards = [0.2, 0.9, 0.0, 0.5, 1.0, 0.1, 0.7, 0.3]
    batch = scored(rewards, [0, 0, 0, 0, 1, 1, 1, 1])
    out = pf_ppo(batch, step_context(), reweight_method=method, scope=scope)
    assert out.size == batch.size
    # every drawn row is one of the batch's rows, all of its fields together
    for i in range(out.size):
        j = rewards.index(float(out.rewards[i]))
        assert out.group[i] == batch.group[j] and out.completions[i] == batch.completions[j]
        assert out.prompts[i] == batch.prompts[j] and out.scores[i] == batch.scores[j]


def test_max_min_keeps_only_the_extreme_reward_samples():
    rewards = [0.2, 0.9, 0.0, 0.5, 1.0, 0.1, 0.7, 0.3] * 4
    out = pf_ppo(scored(rewards, list(range(32))), step_context(), reweight_method="max_min")
    assert set(out.rewards.tolist()) == {0.0, 1.0}  # both extremes drawn, nothing else
    group = [i // 8 for i in range(32)]  # per prompt: every group's own max and min, 1.0 and 0.0 here too
    shifted = [r + g for r, g in zip(rewards, group)]
    out = pf_ppo(scored(shifted, group), step_context(), reweight_method="max_min", scope="group")
    assert set(out.rewards.tolist()) <= {g + e for g in range(4) for e in (0.0, 1.0)}
    out = pf_ppo(scored(shifted, group), step_context(), reweight_method="max_min", scope="batch")
    assert set(out.rewards.tolist()) == {0.0, 4.0}  # batch scope: the batch's extremes only


def test_draws_follow_the_weights():
    """|R|^2 for R in {1, 2, 3}: drawn with probabilities 1/14, 4/14, 9/14 (3000 draws, a few sigma)."""
    out = pf_ppo(scored([1.0, 2.0, 3.0] * 1000, list(range(3000))), step_context())
    freq = torch.stack([(out.rewards == r).double().mean() for r in (1.0, 2.0, 3.0)])
    torch.testing.assert_close(freq, torch.tensor([1, 4, 9], dtype=torch.float64) / 14, atol=0.03, rtol=0)
    zero = pf_ppo(scored([0.0] * 40, list(range(40))), step_context())  # all weights 0: verl's floor, uniform
    assert zero.size == 40


def test_draws_are_reproducible_per_step_and_differ_across_steps():
    batch = scored([0.1 * i for i in range(16)], [i // 4 for i in range(16)])
    a, b = pf_ppo(batch, step_context(step=3)), pf_ppo(batch, step_context(step=3))
    c = pf_ppo(batch, step_context(step=4))
    assert torch.equal(a.rewards, b.rewards) and not torch.equal(a.rewards, c.rewards)


def test_r_squared_matches_the_least_squares_fit_on_a_noisy_reward_model():
    g = np.random.default_rng(0)
    truth = g.uniform(0, 1, 200)
    rm = 2.0 * truth + 0.5 + g.normal(0, 0.3, 200)  # a noisy reward model
    b, a = np.polyfit(rm, truth, 1)
    expected = 1 - ((truth - (a + b * rm)) ** 2).sum() / ((truth - truth.mean()) ** 2).sum()
    ours = r_squared(torch.tensor(rm), torch.tensor(truth))
    assert ours == pytest.approx(expected, abs=1e-12) and ours == pytest.approx(np.corrcoef(rm, truth)[0, 1] ** 2)
    assert 0.6 < ours < 0.9  # noisy: far from 1
    assert r_squared(torch.tensor(truth), torch.tensor(3 * truth - 1)) == pytest.approx(1.0)  # affine: 1
    assert r_squared(torch.ones(5), torch.arange(5.0)) == 0.0 and r_squared(torch.arange(5.0), torch.ones(5)) == 1.0


def test_the_filter_raises_r2_when_the_reward_model_is_reliable_only_at_the_extremes():
    """The paper's premise: RM rewards track the true score at the extremes, noise in the middle. Best-Worst per
    prompt (max_min, scope group) keeps the reliable samples: R^2 rises; the logged metrics are the R^2 of the
    whole batch and of the drawn rows."""
    g = np.random.default_rng(1)
    truth = g.uniform(0, 1, (64, 8))
    rm = np.where((truth < 0.15) | (truth > 0.85), truth, g.uniform(0.3, 0.7, truth.shape))  # unsure: middling
    group = [k for k in range(64) for _ in range(8)]
    batch = scored(rm.flatten().tolist(), group, truth.flatten().tolist())
    ctx = step_context()
    out = pf_ppo(batch, ctx, reweight_method="max_min", scope="group")
    assert ctx.metrics["pf_ppo/r2_all"] == pytest.approx(r_squared(batch.rewards, batch.scores))
    assert ctx.metrics["pf_ppo/r2"] == pytest.approx(r_squared(out.rewards, out.scores))
    assert ctx.metrics["pf_ppo/r2"] > ctx.metrics["pf_ppo/r2_all"] + 0.2
    distinct = len(set(out.completions))  # completions name the batch's rows ("c<i>")
    assert ctx.metrics["pf_ppo/distinct_rows"] == distinct / batch.size and distinct <= 2 * 64  # 2 per prompt


def test_bad_settings_are_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"reweight_method must be one of \['pow', 'max_min', 'max_random'\]"):
        check_pf_ppo(reweight_method="best_worst")
    with pytest.raises(ValueError, match="scope must be one of"):
        check_pf_ppo(scope="prompt")
    with pytest.raises(ValueError, match=r"weight_pow must be a number in \[0, 16\]"):
        check_pf_ppo(weight_pow=-1.0)
