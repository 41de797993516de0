"""Agreement with ROLL's chunk ("segment") pieces (tests/anchors/formulas_ipa.py, alibaba/ROLL @ 8eb27cc) on random
log-probs over masks with gaps (observation tokens), ROLL's chunks being runs of mask == 1 (chunks="runs"):

    compute_segment_masked_mean        `chunk_mean`
    compute_agentic_reinforce_return   `ipa` advantage, credit="return", reference_bug=True (any token rewards) and
                                       the default (rewards only at chunk ends)
    loss_func, ratio_type "segment"    `ipa` objective, chunk_agg=False, token-mean and seq-mean-token-mean, with and
                                       without the dual clip (c = 1 + 2 pg_clip): values and gradients
"""
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask
from tests.anchors import formulas_ipa as ref
from workbench import registry
from workbench.advantages.base import last_token_mask
from workbench.advantages.ipa import chunk_ids, chunk_mean

pytestmark = pytest.mark.covers("ipa")


def gapped_mask(g, B=6, T=12):
    """Right-padded rows with observation gaps: runs of policy tokens separated by masked stretches."""
    mask = (torch.rand(B, T, generator=g) < 0.65).long()
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    mask = mask * (torch.arange(T)[None, :] < lengths[:, None])
    mask[:, 0] = 1
    return mask


@pytest.mark.parametrize("seed", range(6))
def test_chunk_mean_is_compute_segment_masked_mean(seed):
    g = torch.Generator().manual_seed(seed)
    mask = gapped_mask(g)
    x = torch.randn(mask.shape, generator=g, dtype=D)
    ours = chunk_mean(x, mask.double(), chunk_ids(mask.double(), None, "runs"))
    assert_agree(ours, ref.compute_segment_masked_mean(x, mask))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_return_credit_is_compute_agentic_reinforce_return(seed, gamma):
    g = torch.Generator().manual_seed(seed)
    mask = gapped_mask(g).double()
    token_rewards = torch.randn(mask.shape, generator=g, dtype=D) * 0.1 * mask  # e.g. -beta KL on every token
    batch = batch_with_mask(torch.rand(6, generator=g, dtype=D), [0, 0, 0, 1, 1, 1], mask,
                            token_rewards=token_rewards)
    ipa = registry.get("advantage", "ipa").fn
    # ROLL's input: the group-normalized outcome at the last token plus the per-token rewards
    outcome = registry.get("advantage", "grpo").fn(batch_with_mask(batch.rewards, batch.group, torch.ones(6, 1)))
    u = last_token_mask(mask).double() * outcome + token_rewards
    theirs, _ = ref.compute_agentic_reinforce_return(u, gamma, 1.0, mask)
    ours = ipa(batch, credit="return", gamma=gamma, chunks="runs", reference_bug=True)
    assert_agree(ours, theirs, rtol=1e-5, atol=1e-6)  # ROLL accumulates in float32
    batch.token_rewards = None  # rewards only at the chunk ends: summing the chunk's rewards is the same
    theirs, _ = ref.compute_agentic_reinforce_return(last_token_mask(mask).double() * outcome, gamma, 1.0, mask)
    assert_agree(ipa(batch, credit="return", gamma=gamma, chunks="runs"), theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("dual", [False, True])
def test_chunk_ratio_loss_is_rolls_segment_loss(seed, agg, dual):
    g = torch.Generator().manual_seed(seed)
    mask = gapped_mask(g)
    m = mask.double()
    old = -torch.rand(mask.shape, generator=g, dtype=D) * 2
    logp = (old + torch.randn(mask.shape, generator=g, dtype=D) * 0.3).requires_grad_(True)
    ids = chunk_ids(m, None, "runs")
    per_chunk = torch.randn(6, int(ids.max()) + 1, generator=g, dtype=D)  # one advantage per chunk, both signs
    A = per_chunk.gather(1, ids.clamp(min=0)) * m
    ours, _ = registry.get("objective", "ipa").fn(logp, old, A, m, chunks="runs", chunk_agg=False, agg=agg,
                                                  dual_clip_c=1.4 if dual else None)
    theirs = ref.segment_pg_loss(logp, old, A, mask, pg_clip=0.2, dual_clip_loss=dual, loss_agg_mode=agg)
    assert_agree(ours, theirs, leaf=logp)
