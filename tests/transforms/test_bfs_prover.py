"""BFS-Prover-V2's tactic filter: exactly the tactics inside the perplexity band are trained on, the band moves with
the distribution, and the plateau detector fires after `patience` evaluations without improvement."""
import numpy as np
import pytest
import torch

from tests.helpers import make_batch, step_context
from workbench import registry
from workbench.transforms.bfs_prover import bfs_prover, check_bfs, perplexity_band, plateaued

pytestmark = pytest.mark.covers("bfs-prover-v2")


def one_turn(nll, lengths=None):
    """One row per entry, a one-turn response whose tokens all have log-prob -nll (mean NLL = nll)."""
    n = len(nll)
    lengths = lengths or [3] * n
    b = make_batch([float(i % 2) for i in range(n)], [i // 4 for i in range(n)], lengths)
    b.mu_logp = -torch.tensor(nll, dtype=torch.float64)[:, None] * b.mask
    b.turn = torch.where(b.mask > 0, 0, -1).long()
    return b


def band_of(values, q_lo=0.1, q_hi=0.9):
    return np.quantile(values, q_lo, method="lower"), np.quantile(values, q_hi, method="higher")


def test_registered_with_the_catalogs_band():
    entry = registry.get("group_transform", "bfs-prover-v2")
    assert entry.defaults == {"q_lo": 0.1, "q_hi": 0.9} and entry.confidence == "abstract-only"
    assert entry.title == registry.catalog()["bfs-prover-v2"]["title"]


def test_the_filter_keeps_exactly_the_tactics_inside_the_quantile_band():
    g = torch.Generator().manual_seed(0)
    B, T = 40, 6
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    batch = make_batch([0.0] * B, [i // 4 for i in range(B)], lengths)
    batch.mu_logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 * batch.mask
    batch.turn = torch.where(batch.mask > 0, 0, -1).long()
    lp = [float(-batch.mu_logp[i, :int(lengths[i])].mean()) for i in range(B)]  # mean NLL of each response
    low, high = band_of(lp)
    inside = [i for i in range(B) if low <= lp[i] <= high]
    ctx = step_context()
    out = bfs_prover(batch, ctx)
    assert out.response_ids.shape[0] == len(inside) == B - 6  # sorted 3 .. 36 kept (floor 3.9, ceil 35.1): 3 + 3 out
    assert out.group.tolist() == [i // 4 for i in inside]
    assert torch.equal(out.mask, batch.mask[inside]) and torch.equal(out.mu_logp, batch.mu_logp[inside])
    assert ctx.metrics == {"bfs/kept_tactics": len(inside) / B, "bfs/band_low": pytest.approx(low),
                           "bfs/band_high": pytest.approx(high)}


def test_the_band_moves_with_the_distribution():
    nll = [0.5, 1.0, 1.2, 1.4, 1.5, 1.7, 2.0, 2.2, 2.5, 4.0, 0.1, 1.1]
    ctx = step_context()
    base = bfs_prover(one_turn(nll), ctx)
    shifted_ctx = step_context()
    shifted = bfs_prover(one_turn([x + 3.0 for x in nll]), shifted_ctx)  # every tactic 3 nats less likely
    assert ctx.metrics["bfs/band_low"] == 0.5 and ctx.metrics["bfs/band_high"] == 2.5
    assert shifted_ctx.metrics["bfs/band_low"] == pytest.approx(3.5)
    assert shifted_ctx.metrics["bfs/band_high"] == pytest.approx(5.5)
    assert torch.equal(base.group, shifted.group) and base.size == 10  # the same tactics: the tails 0.1 and 4.0 out
    assert -base.mu_logp.max() > 0.1 and -base.mu_logp.min() < 4.0 + 1e-9
    # a band of fixed edges would not move: the shifted batch's 3.5 .. 5.5 tactics would all fall outside [0.5, 2.5]
    wider = bfs_prover(one_turn(nll), step_context(), q_lo=0.0, q_hi=1.0)
    assert wider.size == len(nll)  # the whole range: nothing filtered


def test_each_turn_is_a_tactic_masked_on_its_own_and_a_row_without_one_is_dropped():
    """Row 0: turns of NLL 1.0 (kept) and 9.0 (the high tail: its tokens leave the mask); row 1: a single turn of
    NLL 0.01 (the low tail: the row is dropped); other rows fill the band."""
    T = 5
    mask = torch.tensor([[1, 1, 0, 1, 1]] + [[1, 1, 1, 0, 0]] * 9, dtype=torch.float64)
    turn = torch.tensor([[0, 0, 0, 1, 1]] + [[0, 0, 0, -1, -1]] * 9)
    nll = torch.tensor([[1.0, 1.0, 0.0, 9.0, 9.0], [0.01] * T] + [[1.0 + 0.1 * k] * T for k in range(8)],
                       dtype=torch.float64)
    batch = make_batch([1.0] * 10, [0] * 10, [T] * 10)
    batch.mask, batch.turn, batch.mu_logp = mask, turn, -nll * mask
    ctx = step_context()
    out = bfs_prover(batch, ctx, q_lo=0.1, q_hi=0.9)
    # 11 tactics; band: sorted values at floor(1) and ceil(9): 1.0 .. 1.7, so 0.01 and 9.0 are out
    assert ctx.metrics["bfs/band_low"] == 1.0 and ctx.metrics["bfs/band_high"] == pytest.approx(1.7)
    assert out.size == 9 and ctx.metrics["bfs/kept_tactics"] == 9 / 11
    assert out.mask[0].tolist() == [1, 1, 0, 0, 0] and out.mu_logp[0].tolist() == [-1.0, -1.0, 0.0, 0.0, 0.0]
    assert torch.equal(out.mask[1:], mask[2:])


def test_a_batch_without_turn_ids_filters_whole_responses():
    batch = one_turn([0.1, 1.0, 1.1, 1.2, 5.0])
    batch.turn = None
    out = bfs_prover(batch, step_context(), q_lo=0.25, q_hi=0.75)
    assert sorted((-out.mu_logp[:, 0]).tolist()) == pytest.approx([1.0, 1.1, 1.2])


def test_band_quantiles_round_outwards_to_tactic_values():
    lp = torch.tensor([0.0, 1.0])
    assert perplexity_band(lp) == (0.0, 1.0)  # linear quantiles 0.1 / 0.9 would keep neither tactic
    lp = torch.arange(11, dtype=torch.float64)
    assert perplexity_band(lp, 0.1, 0.9) == (1.0, 9.0) and perplexity_band(lp, 0.15, 0.85) == (1.0, 9.0)


def test_plateau_detector_fires_after_k_evaluations_without_improvement():
    assert not plateaued([])
    assert not plateaued([0.1, 0.2, 0.2, 0.2])         # two evaluations without improvement
    assert plateaued([0.1, 0.2, 0.2, 0.2, 0.2])         # three
    assert plateaued([0.3, 0.2, 0.1, 0.25])             # below the best counts as no improvement
    assert not plateaued([0.1, 0.2, 0.2, 0.2, 0.3])     # an improvement resets the count
    assert not plateaued([0.1, 0.2, 0.2, 0.2, 0.2], patience=4) and plateaued([0.5] * 5, patience=4)
    assert plateaued([0.1, 0.2, 0.205, 0.21, 0.2], min_delta=0.05)  # gains below min_delta do not count
    with pytest.raises(ValueError, match="patience must be a whole number >= 1"):
        plateaued([0.1], patience=0)


def test_a_band_that_holds_nothing_is_refused_before_training():
    for q_lo, q_hi in ((0.9, 0.1), (0.5, 0.5), (-0.1, 0.9), (0.1, 1.5)):
        with pytest.raises(ValueError, match="0 <= q_lo < q_hi <= 1"):
            check_bfs(q_lo=q_lo, q_hi=q_hi)
