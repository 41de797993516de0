"""Agreement with ryyzn9/SAFE (commit 183daf7a), transcribed in tests/anchors/formulas_entropy.py: values AND
gradients, float64.

Call for call: the reference's `compute_penalty(kl_t, entropy, reward_t)` updates the KL EMAs, the phase and the PID
with step t's values, then thresholds. Our controller does the same update after step t (`update`), and our
penalty at step t reads the EMA of step t - 1 (`kl_short_prev`) with the live KL. So the reference's outputs at
call t are our state after update t (threshold, EMAs, phase) and our penalty with kl_short_prev = state t - 1 and
threshold = theta_t.
"""
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask, random_mask, seeded
from tests.anchors.formulas_entropy import (SafeEntropyAwarePredictiveController, safe_kl, safe_soft_min,
                                              safe_value_loss)
from workbench import ops
from workbench.context import Forward
from workbench.controllers.safe import SafeKLControl
from workbench.regularizers.safe import safe_kl_control
from workbench.values.soft_min import huber_value_loss, soft_min


def reward_trace(n=260):
    """Flat, then climbing, then converged high rewards with noise: WARMUP, CLIMBING, PLATEAU and CONVERGED."""
    g = seeded(0)
    base = [0.2] * 60 + [0.2 + 0.7 * i / 80 for i in range(80)] + [0.9] * (n - 140)
    noise = 0.005 * torch.randn(n, generator=g, dtype=D)
    return [b + float(e) for b, e in zip(base, noise)]


def policy_step(seed, kl_level, B=5, T=6):
    g = seeded(seed)
    mask = random_mask(B, T, g, min_len=2)
    ref = -2 * torch.rand(B, T, generator=g, dtype=D)
    logp = (ref + kl_level * torch.rand(B, T, generator=g, dtype=D)).requires_grad_(True)
    entropy = 3 * torch.rand(B, T, generator=g, dtype=D) * mask
    return logp, batch_with_mask([0.0] * B, list(range(B)), mask, ref_logp=ref, entropy=entropy)


@pytest.mark.covers("safe-kl-control", "safe")
def test_controller_and_penalty_match_compute_penalty_call_for_call():
    rewards = reward_trace()
    theirs = SafeEntropyAwarePredictiveController()
    state = SafeKLControl.init(initial={"kl_short_decay": 0.9})
    phases, active = set(), 0
    for t, reward in enumerate(rewards):
        logp, batch = policy_step(t, kl_level=0.2 + 1.6 * (t % 40) / 40)  # KL sweeps below and above theta
        kl = safe_kl(logp, batch.ref_logp, batch.mask)
        entropy = float(ops.aggregate(batch.entropy, batch.mask, "seq-mean-token-mean"))  # rollouts["entropy"]
        out = theirs.compute_penalty(kl.item(), entropy=entropy, reward=reward)
        prev = state.kl_short
        state = SafeKLControl.update(state, batch, {"safe/kl": kl.item(), "reward/mean": reward})
        assert state.threshold == pytest.approx(out["threshold"], abs=1e-12)
        assert state.kl_short == pytest.approx(out["kl_short"], abs=1e-12)
        assert state.kl_long == pytest.approx(out["kl_long"], abs=1e-12) and state.phase == out["phase"]
        for bug in (True, False):
            penalty, m = safe_kl_control(Forward(logp), batch, threshold=out["threshold"], kl_short_prev=prev,
                                         reference_bug=bug)
            assert penalty.item() == pytest.approx(out["penalty"], rel=1e-6, abs=1e-12)  # 0.1 KL vs (1 - 0.9) KL
            assert m["safe/active"] == float(out["active"]) and m["safe/gate"] == pytest.approx(out["entropy_factor"])
            if out["active"]:  # the reference's float has no gradient; the fix has one
                assert penalty.requires_grad != bug
                if not bug:
                    assert torch.autograd.grad(penalty, logp)[0].abs().sum() > 0
        phases.add(out["phase"])
        active += out["active"]
    assert phases == {"WARMUP", "CLIMBING", "PLATEAU", "CONVERGED"} and 0 < active < len(rewards)


@pytest.mark.covers("safe")
@pytest.mark.parametrize("alpha", [0.05, 0.3, 2.0])
def test_soft_min_matches_double_critic(alpha):
    g = seeded(1)
    v1, v2 = (torch.randn(4, 5, generator=g, dtype=D).requires_grad_(True) for _ in range(2))
    ours, theirs = soft_min(v1, v2, alpha), safe_soft_min(v1, v2, alpha)
    assert_agree(ours.sum(), theirs.sum(), leaf=v1)
    assert_agree(ours.sum(), theirs.sum(), leaf=v2)


@pytest.mark.covers("safe")
def test_value_loss_matches_train_step_on_one_value_per_sequence():
    g = seeded(2)
    B = 9
    v = (2 * torch.randn(B, generator=g, dtype=D)).requires_grad_(True)
    old_v = v.detach() + 0.5 * torch.randn(B, generator=g, dtype=D)  # some inside, some outside the 0.2 clip
    rewards = torch.randn(B, generator=g, dtype=D)
    ours = huber_value_loss(v[:, None], old_v[:, None], rewards[:, None], torch.ones(B, 1, dtype=D))
    assert_agree(ours, safe_value_loss(v, old_v, rewards), leaf=v)
