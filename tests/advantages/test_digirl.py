"""DigiRL: success-classifier step critic, the paper's doubly-robust and the code's indicator advantages, the
top-10% trajectory filter (token mask), the binary cross-entropy value loss."""
import pytest
import torch

from tests.advantages.step_batches import D, episode_batch, returns_to_go
from workbench import registry
from workbench.advantages.digirl import (digirl, digirl_filter, digirl_steps, digirl_targets, doubly_robust_advantage,
                                         indicator_advantage, top_quantile_keep)
from workbench.advantages.step_critic import turn_spans
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("digirl")

ACTIONS = [[2, 1, 3], [1, 2], [2, 2, 1, 1]]
TERMINAL = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]


def test_registered_as_advantage_value_and_token_mask():
    e = registry.get("advantage", "digirl")
    assert e.defaults == {"mode": "paper", "lam": 0.5, "gamma": 0.95, "margin": 0.05}
    assert e.needs == ("multi_turn",) and "values" in e.reads and e.targets is digirl_targets
    assert registry.get("value", "digirl").defaults["coef"] == 1.0
    assert registry.get("token_mask", "digirl").defaults == {"quantile": 0.9}
    with pytest.raises(ValueError, match="mode must be one of"):
        digirl(episode_batch(ACTIONS, TERMINAL), mode="awr")


def test_the_codes_weight_is_one_iff_the_raw_advantage_is_positive():
    g = torch.Generator().manual_seed(0)
    p, p_next = torch.rand(50, generator=g, dtype=D), torch.rand(50, generator=g, dtype=D)
    r = (torch.rand(50, generator=g, dtype=D) < 0.2).to(D)
    G = r * 0.9 + (torch.rand(50, generator=g, dtype=D) < 0.2).to(D) * 0.5
    w = indicator_advantage(p, p_next, r, G)
    raw = p_next - p - 0.05 + r + G
    assert torch.equal(w, (raw > 0).to(D)) and set(w.tolist()) == {0.0, 1.0}
    b = episode_batch(ACTIONS, TERMINAL)
    A = digirl(b, mode="code")
    assert set(A[b.mask > 0].tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("seed", range(3))
def test_doubly_robust_at_lambda_one_is_the_monte_carlo_return_and_at_zero_the_one_step_td(seed):
    b = episode_batch(ACTIONS, TERMINAL, seed=seed)
    first, _, valid = turn_spans(b)
    p = torch.sigmoid(b.values.gather(1, first)) * valid
    mc = digirl(b, lam=1.0).gather(1, first) * valid
    for i, G in enumerate(returns_to_go(TERMINAL)):  # terminal reward: lam^(H-h) r_H = sum_{k>=h} r_k
        assert mc[i, :len(G)].tolist() == pytest.approx(G)
    td = digirl(b, lam=0.0).gather(1, first) * valid
    for i, rewards in enumerate(TERMINAL):
        n = len(rewards)
        for h in range(n - 1):  # the last step: lam^0 = 1, A_H = r_H
            assert float(td[i, h]) == pytest.approx(float(p[i, h + 1] + rewards[h] - p[i, h]))
        assert float(td[i, n - 1]) == pytest.approx(rewards[-1])


def test_doubly_robust_hand_computed_mix():
    p = torch.tensor([[0.2, 0.5, 0.9]], dtype=D)
    p_next = torch.tensor([[0.5, 0.9, 0.0]], dtype=D)
    r = torch.tensor([[0.0, 0.1, 1.0]], dtype=D)
    A = doubly_robust_advantage(p, p_next, r, torch.ones(1, 3, dtype=torch.bool), lam=0.5)
    assert A[0].tolist() == pytest.approx([0.25 * 1 + 0.75 * 0.3, 0.5 * 1 + 0.5 * 0.5, 1.0])


def test_targets_are_the_monte_carlo_returns_at_each_steps_first_token():
    rewards = [[0.0, 0.5, 1.0], [0.0, 0.0], [0.0, 1.0, 0.0, 1.0]]
    b = episode_batch(ACTIONS, rewards)
    returns, vmask = digirl_targets(b)
    first, _, valid = turn_spans(b)
    assert int(vmask.sum()) == 9
    for i, G in enumerate(returns_to_go(rewards, 0.95)):
        assert returns[i].gather(0, first[i, :len(G)]).tolist() == pytest.approx(G)
    p, p_next, _, _, _, _ = digirl_steps(b, 0.95)
    assert bool((p_next[valid] <= 1).all()) and p_next[0, 2] == 0 and torch.allclose(p_next[0, :2], p[0, 1:3])


def test_the_filter_keeps_the_top_tenth_ties_included():
    scores = torch.randperm(100, generator=torch.Generator().manual_seed(1)).to(D)
    assert int(top_quantile_keep(scores).sum()) == 10 and bool(top_quantile_keep(scores)[scores >= 90].all())
    for n in (16, 37, 64):
        kept = top_quantile_keep(torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=D)).float().mean()
        assert 0.1 <= float(kept) <= 0.1 + 1 / n
    assert bool(top_quantile_keep(torch.ones(8, dtype=D)).all())  # ties at the cutoff are all kept
    assert bool(top_quantile_keep(torch.randn(9, dtype=D), quantile=0.0).all())


def test_the_token_mask_zeroes_the_rows_below_the_cutoff_and_leaves_the_critic_alone():
    actions = [[1, 2]] * 20
    rewards = [[0.0, float(i % 3 == 0)] for i in range(20)]
    b = episode_batch(actions, rewards, seed=4)
    b.returns, b.value_mask = digirl_targets(b)
    vmask = b.value_mask.clone()
    mask = digirl_filter(b)
    kept = mask.sum(-1) > 0
    _first, _, _ = turn_spans(b)
    score = b.rewards - torch.sigmoid(b.values[:, 0]).clamp(1e-4, 1 - 1e-4)
    assert int(kept.sum()) == 2 and bool(score[kept].min() >= score[~kept].max())
    assert torch.equal(mask[kept], b.mask[kept]) and torch.equal(b.value_mask, vmask)
    assert torch.equal(digirl_filter(b, quantile=0.0), b.mask)


@pytest.mark.parametrize("target, overrides, message", [
    ("token_masks:digirl", {"quantile": 1.5}, r"token_mask 'digirl': quantile must be in \[0, 1\], got 1.5"),
    ("advantage:digirl", {"mode": "cod"}, r"advantage 'digirl': mode='cod' is not one of \['paper', 'code'\]"),
])
def test_settings_it_cannot_take_are_refused_when_the_recipe_is_built(target, overrides, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("digirl"), {target: overrides}))
