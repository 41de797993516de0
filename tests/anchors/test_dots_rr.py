"""Agreement with ASTRAL-Group/data-efficient-llm-rl `rl_training/verl/verl/trainer/ppo/core_algos.py::
compute_policy_loss_temp` (commit 59df918), transcribed in formulas_trust_region.py: value AND gradient, float64,
1e-6, and the clip fraction.

The reference's `old_log_prob` is the stored behaviour log-prob (our `mu_logp`) and `temp_log_prob` the recomputed
pi_old (our `old_logp`); it aggregates with a plain token mean and clamps nothing.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import anchor_mask, assert_agree, seeded
from tests.anchors.formulas_trust_region import dots_policy_loss_temp
from workbench import registry

D = torch.float64


def replay_case(seed, B=10, T=7, staleness=0.6):
    g = seeded(seed)
    mask = anchor_mask(B, T, g, holes=True)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=D) - 0.05
    mu = old + staleness * torch.randn(B, T, generator=g, dtype=D)
    mu[: B // 2] = old[: B // 2]  # half the rows fresh, half replayed
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    adv = torch.randn(B, generator=g, dtype=D)[:, None] * mask
    return logp, old, mu, adv, mask


@pytest.mark.covers("dots-rr-clip")
@pytest.mark.parametrize("cliprange", [0.2, 0.28])
@pytest.mark.parametrize("seed", range(5))
def test_dots_rr_clip_matches_compute_policy_loss_temp(seed, cliprange):
    logp, old, mu, adv, mask = replay_case(seed)
    ref_loss, ref_clipfrac, _ = dots_policy_loss_temp(mu, logp, adv, mask, cliprange, old)
    ours, m = registry.get("objective", "dots-rr-clip").fn(logp, old, adv, mask, mu_logp=mu, eps_low=cliprange,
                                                           eps_high=cliprange)
    assert_agree(ours, ref_loss, leaf=logp)
    assert m["clip/region"] == pytest.approx(float(ref_clipfrac), abs=1e-6) and m["clip/region"] > 0
