"""Agreement with Computer-use-agents/dart-gui @ e0e606d3 `verl/trainer/ppo/core_algos.py::compute_policy_loss`
(transcribed in formulas_dart.py): the TIS weight min(pi_old / mu, 1) that DART multiplies into the per-token PPO loss
is our `tis` objective's token_truncate weight with cap = 1 (value AND gradient, float64, 1e-6), and the entropy filter
keeps the reference's rows."""
from __future__ import annotations

import pytest
import torch

from tests.anchors import formulas_dart as ref
from tests.helpers import anchor_mask, assert_agree, seeded
from workbench import registry
from workbench.masks.dart import top_rows, trajectory_entropy
from workbench.objectives.tis import tis_weights

pytestmark = pytest.mark.covers("dart")
D = torch.float64


def case(seed, B=8, T=6, mismatch=0.5):
    g = seeded(seed)
    mask = anchor_mask(B, T, g)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=D) - 0.05
    mu = old + mismatch * torch.randn(B, T, generator=g, dtype=D)
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    adv = torch.randn(B, generator=g, dtype=D)[:, None] * mask
    return logp, old, mu, adv, mask


@pytest.mark.parametrize("seed", range(5))
def test_the_tis_weight_is_the_references_on_valid_tokens(seed):
    _, old, mu, _, mask = case(seed)
    ours, theirs = tis_weights(old, mu, mask, mode="token_truncate", cap=1.0), ref.tis_weight(old, mu)
    assert_agree(ours, theirs * mask)  # ours is 0 off the mask, where the reference's loss mask zeroes it
    assert bool((theirs < 1).any()) and bool((theirs == 1).any())  # both sides of the cap are exercised


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("seed", range(4))
def test_tis_objective_with_cap_one_matches_compute_policy_loss(seed, agg):
    """DART's recipe: clip 0.1 / 0.28, dual clip c = 10 (the script's clip_ratio_c), our `tis` with cap 1."""
    logp, old, mu, adv, mask = case(seed)
    theirs, clipfrac, _, _ = ref.compute_policy_loss(old, logp, adv, mask, vllm_log_prob=mu, cliprange_low=0.1,
                                                     cliprange_high=0.28, clip_ratio_c=10.0, loss_agg_mode=agg)
    ours, m = registry.get("objective", "tis").fn(logp, old, adv, mask, mu_logp=mu, agg=agg, mode="token_truncate",
                                                  cap=1.0, eps_low=0.1, eps_high=0.28, dual_clip_c=10.0)
    assert_agree(ours, theirs, leaf=logp)
    assert m["tis/mean_weight"] < 1


def test_matching_log_probs_give_weight_one_and_the_plain_loss():
    logp, old, _, adv, mask = case(0)
    theirs, *_ = ref.compute_policy_loss(old, logp, adv, mask, vllm_log_prob=old.clone(), cliprange=0.2)
    plain, *_ = ref.compute_policy_loss(old, logp, adv, mask, vllm_log_prob=None, cliprange=0.2)
    ours, _ = registry.get("objective", "tis").fn(logp, old, adv, mask, mu_logp=old.clone(), cap=1.0,
                                                  dual_clip_c=3.0)
    assert_agree(ours, theirs, leaf=logp)
    assert_agree(ours, plain, leaf=logp)


@pytest.mark.parametrize("seed", range(3))
def test_entropy_filter_keeps_the_references_rows_on_full_rows(seed):
    """With no padding the reference's plain mean over positions is our mean over valid tokens."""
    g = seeded(seed)
    entropy = torch.rand(10, 5, generator=g, dtype=D)
    mask = torch.ones(10, 5, dtype=D)
    ours = top_rows(trajectory_entropy(entropy, mask), 0.5)
    assert torch.equal(ours, ref.traj_entropy_topk(entropy, 0.5).squeeze(1))
