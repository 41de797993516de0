"""VL-DAC's objective: PPO clip 0.1 with the authors' ratio guard (any ratio > 10 -> clipped surrogate only)."""
import pytest
import torch

from tests.advantages.step_batches import D, layout
from workbench import registry
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.vl_dac import vl_dac_objective

pytestmark = pytest.mark.covers("vl-dac")


def tokens(ratios, advantages):
    """Two rows: row 0 two actions of 2 tokens, row 1 one action of 3 (observations between). Returns (logp leaf,
    old, A, mask, turn) with the given per-policy-token ratios and advantages (7 each)."""
    mask, turn, _, _ = layout([[2, 2], [3]], obs=1)
    policy = mask > 0
    logr, A = torch.zeros_like(mask), torch.zeros_like(mask)
    logr[policy] = torch.log(torch.tensor(ratios, dtype=D))
    A[policy] = torch.tensor(advantages, dtype=D)
    logp = logr.clone().requires_grad_(True)
    return logp, torch.zeros_like(mask), A, mask, turn


RATIOS = [1.05, 1.5, 12.0, 1.5, 0.8, 1.3, 1.0]
ADV = [1.0, -1.0, 1.0, -2.0, 0.5, -0.5, 1.0]


def test_registered_with_eps_01_cap_10_and_the_action_guard():
    e = registry.get("objective", "vl-dac")
    assert {"eps": 0.1, "ratio_cap": 10.0, "guard": "action"}.items() <= e.defaults.items()
    assert "turn" in e.reads


def test_without_a_runaway_ratio_or_the_guard_it_is_ppo_clip_at_01():
    logp, old, A, mask, turn = tokens([1.05, 1.5, 1.2, 0.5, 0.8, 1.3, 1.0], ADV)
    ours, _ = vl_dac_objective(logp, old, A, mask, turn=turn)
    ref, _ = ppo_clip(logp, old, A, mask, eps_low=0.1, eps_high=0.1)
    assert torch.allclose(ours, ref)
    logp, old, A, mask, turn = tokens(RATIOS, ADV)
    ours, _ = vl_dac_objective(logp, old, A, mask, turn=turn, guard=None)
    ref, _ = ppo_clip(logp, old, A, mask, eps_low=0.1, eps_high=0.1)
    assert torch.allclose(ours, ref)


def per_token_grad(logp, old, A, mask, turn, **kw):
    loss, metrics = vl_dac_objective(logp, old, A, mask, turn=turn, agg="token-mean", **kw)
    (g,) = torch.autograd.grad(loss * mask.sum(), logp)
    return g[mask > 0], metrics


def test_a_ratio_above_10_makes_its_action_train_on_the_clipped_surrogate_alone():
    logp, old, A, mask, turn = tokens(RATIOS, ADV)
    g, metrics = per_token_grad(logp, old, A, mask, turn)
    r, a = torch.tensor(RATIOS, dtype=D), torch.tensor(ADV, dtype=D)
    ppo = torch.where(((a > 0) & (r > 1.1)) | ((a < 0) & (r < 0.9)), torch.zeros_like(r), -a * r)
    # action (row 0, turn 1) holds r = 12: its tokens use -clip(r) A, flat outside [0.9, 1.1]; token 3 (r = 1.5,
    # A = -2) keeps the unclipped branch under PPO (gradient 3) and loses it under the guard
    assert g[2] == 0 and g[3] == 0 and ppo[3] == pytest.approx(3.0)
    # the other actions are ordinary PPO clip: d(-min(rA, clip(r)A))/dlogr
    assert torch.allclose(g[[0, 1, 4, 5, 6]], ppo[[0, 1, 4, 5, 6]])
    assert g[1] == pytest.approx(1.5) and g[0] == pytest.approx(-1.05)
    assert metrics["clip/ratio_guard"] == pytest.approx(2 / 7)


def test_the_minibatch_guard_covers_every_token_and_the_loss_is_the_clipped_surrogate():
    logp, old, A, mask, turn = tokens(RATIOS, ADV)
    loss, metrics = vl_dac_objective(logp, old, A, mask, turn=turn, guard="minibatch")
    r, a = torch.tensor(RATIOS, dtype=D), torch.tensor(ADV, dtype=D)
    assert loss.item() == pytest.approx(float((-a * r.clamp(0.9, 1.1)).mean()))
    assert metrics["clip/ratio_guard"] == 1.0


def test_bad_guard_and_missing_turn_are_refused():
    logp, old, A, mask, turn = tokens(RATIOS, ADV)
    with pytest.raises(ValueError, match="guard must be one of"):
        vl_dac_objective(logp, old, A, mask, turn=turn, guard="row")
    with pytest.raises(ValueError, match="needs `turn`"):
        vl_dac_objective(logp, old, A, mask)
