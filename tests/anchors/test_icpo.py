"""ICPO against the authors' code (formulas_icpo.py): the mixed loss (dual-clip PPO on own tokens, p/(p + 0.1) on
steered ones) with its gradient, and the annealed expert bonus step by step."""
import pytest
import torch

from tests.anchors.formulas_icpo import compute_icpo_policy_loss, compute_score_icpo_bonus
from tests.helpers import AGREE_TOL, assert_agree, random_batch
from workbench.context import StepContext
from workbench.objectives.policy_shaping import policy_shaping
from workbench.rewards.icpo_bonus import icpo_bonus

pytestmark = pytest.mark.covers("icpo")


@pytest.mark.parametrize("seed", range(4))
def test_the_loss_is_compute_icpo_policy_loss(seed):
    logp, old, A, mask = random_batch(seed, scale=0.6)  # ratios far from 1: the clip and the dual cap both act
    hinted = torch.zeros(logp.shape[0], dtype=torch.bool)
    hinted[[1, 3]] = True
    off = mask * hinted[:, None].to(mask.dtype)
    theirs = compute_icpo_policy_loss(old, logp, A, mask, hinted)
    ours, metrics = policy_shaping(logp, old, A, mask, offpolicy_mask=off, dual_clip_c=3.0)
    assert_agree(ours, theirs, logp, **AGREE_TOL)
    assert "clip/dual" in metrics


@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_the_bonus_is_compute_score_icpo_bonus_at_every_step(beta):
    from tests.rewards.test_icpo_bonus import steered_batch

    batch = steered_batch()
    hinted = batch.offpolicy_mask.any(-1).tolist()
    for step in (0, 1, 199, 399, 400, 1000):
        ctx = StepContext(step=step, total_steps=2000, seed=0, group_size=4, prompts_per_step=2, max_new_tokens=3)
        out = icpo_bonus(steered_batch(), ctx, beta=beta, horizon=400)
        theirs = [compute_score_icpo_bonus(bool(s == 1), int(h), step, beta=beta)
                  for s, h in zip(batch.scores.tolist(), hinted)]
        assert out.rewards.tolist() == pytest.approx(theirs, abs=1e-12)
        # the released code's current_step is never written (reward_manager.py L99 reads a missing field): it always
        # pays the step-0 bonus, where ours anneals
        as_run = [compute_score_icpo_bonus(bool(s == 1), int(h), 0, beta=beta) for s, h in zip(batch.scores.tolist(),
                                                                                               hinted)]
        assert (out.rewards.tolist() == as_run) == (step == 0 or beta == 0)
