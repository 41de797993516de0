"""Gradient accumulation: splitting a batch into micro-batches with global denominators changes nothing."""
import inspect

import pytest
import torch

from tests.helpers import random_mask
from workbench import ops, registry

# Objectives whose token selection uses statistics of the whole (micro-)batch: the covariance is centred by
# the batch means and the top-k / random subset is drawn per call, so they are invariant only when the
# selection is computed once per optimizer step (verl computes it per micro-batch, as here).
BATCH_DEPENDENT = {"clip_cov", "kl_cov"}
POLICY_OBJECTIVES = [e for e in registry.entries("objective") if e.key != "value-loss" and e.key not in BATCH_DEPENDENT]


def inputs(seed=0, B=8, T=7):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(B, 1, generator=g, dtype=torch.float64).expand(B, T) * mask
    mu = old + 0.1 * torch.randn(B, T, generator=g, dtype=torch.float64)
    return logp, old, adv, mask, mu


def call(entry, logp, old, adv, mask, mu, denom):
    extra = {"mu_logp": mu} if "mu_logp" in inspect.signature(entry.fn).parameters else {}
    agg = entry.defaults.get("agg", "token-mean")
    return entry.fn(logp, old, adv, mask, agg=agg, denom=denom, **extra)[0]


@pytest.mark.parametrize("entry", POLICY_OBJECTIVES, ids=[e.key for e in POLICY_OBJECTIVES])
@pytest.mark.parametrize("micro", [1, 2, 4])
def test_micro_batched_loss_and_gradient_equal_the_full_batch(entry, micro):
    logp, old, adv, mask, mu = inputs()
    denom = ops.Denominators.of(mask, norm_constant=8 * 7)
    full = call(entry, logp, old, adv, mask, mu, denom)
    (g_full,) = torch.autograd.grad(full, logp)
    size = 8 // micro
    parts = sum(call(entry, logp[i:i + size], old[i:i + size], adv[i:i + size], mask[i:i + size], mu[i:i + size],
                     denom) for i in range(0, 8, size))
    (g_parts,) = torch.autograd.grad(parts, logp)
    assert torch.allclose(full, parts, atol=1e-12) and torch.allclose(g_full, g_parts, atol=1e-12), entry.key


@pytest.mark.covers("seq-mean-token-mean", "token-mean")
def test_local_denominators_break_invariance_when_lengths_differ():
    logp, old, adv, mask, _ = inputs(seed=3)
    entry = registry.get("objective", "ppo-clip")
    full = call(entry, logp, old, adv, mask, None, None)
    local = sum(call(entry, logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], None, None)
                for i in range(0, 8, 2)) / 4  # the usual mean over micro-batches
    assert not torch.allclose(full, local)
