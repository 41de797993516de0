"""Agreement with WujiangXu/EPO (commit 5b6fa98e), transcribed in tests/anchors/formulas_entropy.py: value AND
gradient, float64.

The reference computes one row per environment turn (`rollout_step` [B]); here a row is an episode with turn ids
[B, T], so its rows become our rows with `turn` = rollout_step on every valid token. `reference_bug=True` matches
the code (constant penalty mask); the default (differentiable) penalty agrees with it where no token leaves the
band and differs, with a gradient, where some do.
"""
import numpy as np
import pytest
import torch

from tests.helpers import AGREE_TOL, D, anchor_mask, assert_agree, batch_with_mask, seeded
from tests.anchors.formulas_entropy import (epo_calculate_epoch_based_entropy_weight, epo_entropy_history,
                                              epo_entropy_loss_terms)
from workbench.context import Forward
from workbench.controllers.epo import EPOEntropyHistory
from workbench.regularizers.epo import epo, epo_phase_weight


def turn_rows(seed, B=8, T=7, max_steps=50, late=True, full=False):
    """Entropy leaf [B, T], mask, rollout_step [B] (all >= max_steps // 2 when `late`, else all below) and a
    history over max_steps turn indices."""
    g = seeded(seed)
    mask = torch.ones(B, T, dtype=D) if full else anchor_mask(B, T, g)
    entropy = (2 * torch.rand(B, T, generator=g, dtype=D)).requires_grad_(True)
    lo, hi = (max_steps // 2, max_steps) if late else (0, max_steps // 2)
    rollout_step = torch.randint(lo, hi, (B,), generator=g).numpy().astype(np.int32)
    history = (0.5 + torch.rand(max_steps, generator=g, dtype=D)).numpy()
    turn = torch.where(mask > 0, torch.as_tensor(rollout_step, dtype=torch.long)[:, None], -1)
    return entropy, mask, rollout_step, history, batch_with_mask([0.0] * B, list(range(B)), mask, turn=turn)


KW = dict(entropy_coeff=0.001, entropy_smooth_coeff=1.0)


def ours(entropy, batch, history, **kw):
    loss, _ = epo(Forward(torch.zeros_like(entropy), entropy), batch, coef=KW["entropy_coeff"],
                  smooth_coef=KW["entropy_smooth_coeff"], history=list(history), **kw)
    return loss


@pytest.mark.covers("epo")
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("band", [(0.8, 1.2), (0.5, 1.5), (0.0, 2.0)])
def test_token_mode_with_reference_bug_matches_the_code(seed, agg, band):
    entropy, mask, step, history, batch = turn_rows(seed)
    low, high = band
    theirs = epo_entropy_loss_terms(entropy, mask, history, step, **KW, min_ratio=low, max_ratio=high,
                                    out_range_penalty=0.1, loss_agg_mode=agg)
    assert_agree(ours(entropy, batch, history, agg=agg, low=low, high=high, reference_bug=True), theirs, leaf=entropy)


@pytest.mark.covers("epo")
@pytest.mark.parametrize("epoch, max_epochs", [(0, 150), (40, 150), (75, 150), (76, 150), (149, 150), (3, 7)])
def test_phase_weighted_penalty_matches_enable_smooth_weights(epoch, max_epochs):
    entropy, mask, step, history, batch = turn_rows(11)
    theirs = epo_entropy_loss_terms(entropy, mask, history, step, **KW, enable_smooth_weights=True,
                                    trainer_epoch=epoch, max_epochs=max_epochs)
    w = epo_phase_weight(epoch, max_epochs)
    assert_agree(ours(entropy, batch, history, reference_bug=True, phase_weight=w), theirs, leaf=entropy)


@pytest.mark.covers("epo")
@pytest.mark.parametrize("seed", range(3))
def test_seq_mode_with_reference_bug_matches_the_code_on_unpadded_rows(seed):
    """The reference's row mean runs over every position (padding included); on full rows that is the action mean."""
    entropy, mask, step, history, batch = turn_rows(seed, full=True)
    history[step] = entropy.detach().mean(-1).numpy() * np.where(np.arange(len(step)) % 2 == 0, 1.0, 2.0)  # in / out
    theirs = epo_entropy_loss_terms(entropy, mask, history, step, **KW, mask_mode="seq")
    assert_agree(ours(entropy, batch, history, mode="seq", reference_bug=True), theirs, leaf=entropy)


@pytest.mark.covers("epo")
def test_no_penalty_before_max_steps_half_in_both():
    entropy, mask, step, history, batch = turn_rows(5, late=False)
    theirs = epo_entropy_loss_terms(entropy, mask, history, step, **KW)
    for bug in (False, True):
        assert_agree(ours(entropy, batch, history, reference_bug=bug), theirs, leaf=entropy)


@pytest.mark.covers("epo")
def test_differentiable_default_differs_from_the_code_only_by_a_gradient_carrying_penalty():
    entropy, mask, step, history, batch = turn_rows(6)
    theirs = epo_entropy_loss_terms(entropy, mask, history, step, **KW)
    fixed = ours(entropy, batch, history)
    g_theirs, g_fixed = (torch.autograd.grad(x, entropy, retain_graph=True)[0] for x in (theirs, fixed))
    assert not torch.allclose(g_theirs, g_fixed) and fixed.item() != pytest.approx(theirs.item())
    # inside the band both penalties vanish: same value and gradient
    wide = ours(entropy, batch, history, low=0.0, high=1e6)
    theirs_wide = epo_entropy_loss_terms(entropy, mask, history, step, **KW, min_ratio=-1.0, max_ratio=1e6)
    assert_agree(wide, theirs_wide, leaf=entropy)


@pytest.mark.covers("epo")
@pytest.mark.parametrize("max_epochs", [0, 1, 2, 7, 150])
def test_phase_weight_matches_the_reference_at_every_epoch(max_epochs):
    for epoch in range(-1, max_epochs + 2):
        assert epo_phase_weight(epoch, max_epochs) == pytest.approx(
            epo_calculate_epoch_based_entropy_weight(epoch, max_epochs), abs=1e-15)


@pytest.mark.covers("epo")
@pytest.mark.parametrize("max_steps", [3, 5])
def test_history_with_reference_bug_matches_the_trainers_left_padded_mean(max_steps):
    g = seeded(7)
    lengths = [2, 5, 1, 3, 6]  # episodes shorter and longer than max_steps
    step_lists = [[float(x) for x in torch.rand(n, generator=g, dtype=D)] for n in lengths]
    state = EPOEntropyHistory.init(initial=(), max_steps=max_steps, reference_bug=True)
    for lst in step_lists:
        b = batch_with_mask([0.0], [0], torch.ones(1, len(lst), dtype=D), entropy=torch.tensor([lst], dtype=D),
                            turn=torch.arange(len(lst))[None, :])
        state = EPOEntropyHistory.update(state, b, {})
    np.testing.assert_allclose(EPOEntropyHistory.value(state), epo_entropy_history(step_lists, max_steps),
                               **{"rtol": AGREE_TOL["rtol"], "atol": AGREE_TOL["atol"]})
    fixed = EPOEntropyHistory.init(initial=(), max_steps=max_steps)
    for lst in step_lists:
        fixed = EPOEntropyHistory.update(fixed, batch_with_mask(
            [0.0], [0], torch.ones(1, len(lst), dtype=D), entropy=torch.tensor([lst], dtype=D),
            turn=torch.arange(len(lst))[None, :]), {})
    assert EPOEntropyHistory.value(fixed)[0] == pytest.approx(np.mean([lst[0] for lst in step_lists]))
