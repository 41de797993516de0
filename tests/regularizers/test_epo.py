"""EPO's entropy term: the bonus, the historical-band smoothing penalty, its gate and the phase weight."""
import math

import pytest
import torch

from tests.helpers import D, batch_with_mask, random_mask
from workbench import ops, registry
from workbench.context import Forward
from workbench.regularizers.entropy import entropy_regularizer
from workbench.regularizers.epo import epo, epo_phase_weight, epo_penalty, phase_weight

AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def epo_case(seed, B=5, T=8, n_turns=3, scale=1.0):
    """Entropy leaf [B, T] (0.1 .. 3.1 nats), ragged mask, turn ids 0..n_turns-1 in contiguous blocks (-1 on
    padding) and a history of n_turns entries around 1.5 nats."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=3)
    entropy = (0.1 + 3 * scale * torch.rand(B, T, generator=g, dtype=D)).requires_grad_(True)
    turn = (torch.arange(T)[None, :] * n_turns // T).expand(B, T).clone()
    turn[mask == 0] = -1
    history = [1.2 + 0.6 * float(torch.rand((), generator=g)) for _ in range(n_turns)]
    batch = batch_with_mask([0.0] * B, list(range(B)), mask, turn=turn)
    return entropy, batch, history


def run(entropy, batch, **kw):
    return epo(Forward(logp=torch.zeros_like(entropy), entropy=entropy), batch, **kw)


def denom_for(agg, mask):
    return ops.Denominators.of(mask, norm_constant=float(mask.numel())) if agg == "seq-mean-token-sum-norm" else None


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


@pytest.mark.covers("epo")
def test_registered_with_the_reference_config_defaults():
    e = registry.get("regularizer", "epo")
    assert {"coef": 0.001, "smooth_coef": 1.0, "low": 0.8, "high": 1.2, "out_range_penalty": 0.1, "max_steps": 50,
            "mode": "token", "phase_weight": 1.0, "reference_bug": False}.items() <= e.defaults.items()
    assert e.family == "entropy" and e.equation and set(e.reads) == {"entropy", "turn"}
    assert e.title == registry.catalog()["epo"]["title"]
    assert registry.get("schedule", "epo").defaults == {"max_epochs": None}


@pytest.mark.covers("epo")
@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("mode", ["token", "seq"])
def test_smooth_coef_zero_is_the_plain_entropy_bonus(agg, mode):
    entropy, batch, history = epo_case(0)
    denom = denom_for(agg, batch.mask)
    kw = dict(agg=agg, denom=denom, coef=0.01, history=history, max_steps=0, mode=mode)
    bonus, _ = entropy_regularizer(Forward(torch.zeros_like(entropy), entropy), batch, agg=agg, denom=denom, coef=0.01)
    with_penalty, m = run(entropy, batch, **kw)
    assert m["epo/penalty"] > 0  # the penalty is live at smooth_coef = 1, so the reduction is not vacuous
    loss, _ = run(entropy, batch, **{**kw, "smooth_coef": 0.0})
    assert loss.item() == pytest.approx(bonus.item(), abs=1e-15)
    assert torch.equal(grad(loss, entropy), grad(bonus, entropy))
    assert with_penalty.item() > loss.item()


@pytest.mark.covers("epo")
@pytest.mark.parametrize("mode", ["token", "seq"])
@pytest.mark.parametrize("reference_bug", [False, True])
def test_no_penalty_when_every_entropy_is_inside_the_band(mode, reference_bug):
    entropy, batch, _ = epo_case(1)
    h = entropy.detach()
    # a band wide enough for every token (and every action mean) of every turn
    history = [float(h[batch.turn == k].mean()) for k in range(3)]
    low = min(float(h[batch.mask > 0].min()) / max(history), 1.0) * 0.99
    high = float(h[batch.mask > 0].max()) / min(history) * 1.01
    p, gated = epo_penalty(entropy, batch.mask, batch.turn, history, low=low, high=high, max_steps=0, mode=mode,
                           reference_bug=reference_bug)
    assert gated.sum() == batch.mask.sum() and torch.all(p == 0)
    loss, m = run(entropy, batch, history=history, low=low, high=high, max_steps=0, mode=mode,
                  reference_bug=reference_bug)
    bonus, _ = entropy_regularizer(Forward(torch.zeros_like(entropy), entropy), batch, coef=0.001)
    assert loss.item() == pytest.approx(bonus.item(), abs=1e-15) and m["epo/in_band_frac"] == 1.0


@pytest.mark.covers("epo")
def test_differentiable_penalty_pushes_entropy_back_toward_the_band_only_out_of_band():
    entropy, batch, history = epo_case(2)
    kw = dict(coef=0.01, smooth_coef=2.0, history=history, max_steps=2, out_range_penalty=0.1, phase_weight=0.5)
    loss, _ = run(entropy, batch, **kw)
    bonus, _ = entropy_regularizer(Forward(torch.zeros_like(entropy), entropy), batch, coef=0.01)
    g = grad(loss, entropy) - grad(bonus, entropy)  # the smoothing term's gradient alone
    hbar = torch.tensor(history, dtype=D)[batch.turn.clamp(min=0)]
    h, valid = entropy.detach(), batch.mask > 0
    gated = valid & (batch.turn >= 1)  # max_steps // 2 = 1
    above, below = gated & (h > 1.2 * hbar), gated & (h < 0.8 * hbar)
    inside = gated & ~above & ~below
    assert above.any() and below.any() and inside.any() and (valid & ~gated).any()
    step = 0.01 * 2.0 * 0.5 * 0.1 / float(batch.mask.sum())  # c_H c_s w rho / N (token mean)
    # descent on the loss lowers H above the band, raises it below, leaves in-band and ungated tokens alone
    assert torch.allclose(g[above], torch.full_like(g[above], step), atol=1e-15)
    assert torch.allclose(g[below], torch.full_like(g[below], -step), atol=1e-15)
    assert torch.all(g[inside] == 0) and torch.all(g[valid & ~gated] == 0) and torch.all(g[~valid] == 0)


@pytest.mark.covers("epo")
def test_reference_bug_penalty_is_a_constant_without_gradient():
    entropy, batch, history = epo_case(3)
    kw = dict(coef=0.01, history=history, max_steps=0, out_range_penalty=0.1)
    loss, m = run(entropy, batch, reference_bug=True, **kw)
    bonus, _ = entropy_regularizer(Forward(torch.zeros_like(entropy), entropy), batch, coef=0.01)
    assert torch.equal(grad(loss, entropy), grad(bonus, entropy))  # the smoothing term has no gradient
    hbar = torch.tensor(history, dtype=D)[batch.turn.clamp(min=0)]
    h, valid = entropy.detach(), batch.mask > 0
    outside = valid & ~((h > 0.8 * hbar) & (h < 1.2 * hbar))
    frac_out = float(outside.sum()) / float(valid.sum())
    shift = 0.01 * 0.1 * frac_out
    assert 0 < shift and loss.item() - bonus.item() == pytest.approx(shift, rel=1e-12)
    assert m["epo/in_band_frac"] == pytest.approx(1 - frac_out)
    fixed, _ = run(entropy, batch, **kw)
    assert not torch.equal(grad(fixed, entropy), grad(bonus, entropy))


@pytest.mark.covers("epo")
def test_gate_skips_early_turns_padding_and_turns_without_history():
    entropy, batch, history = epo_case(4)
    kw = dict(low=0.0, high=0.0)  # every token is out of band: only the gate decides
    p, gated = epo_penalty(entropy, batch.mask, batch.turn, history[:2] + [float("nan")], max_steps=2, **kw)
    assert torch.equal(gated, (batch.turn == 1) & (batch.mask > 0))  # turn 0 < 2 // 2, turn 2 unknown (NaN)
    assert torch.all(p[gated] > 0) and torch.all(p[~gated] == 0)
    p, gated = epo_penalty(entropy, batch.mask, batch.turn, history[:1], max_steps=0, **kw)
    assert torch.equal(gated, (batch.turn == 0) & (batch.mask > 0))  # past the history
    p, gated = epo_penalty(entropy, batch.mask, batch.turn, (), max_steps=0, **kw)
    assert not gated.any() and torch.all(p == 0)  # step 0: no history yet
    p, gated = epo_penalty(entropy, batch.mask, None, history, max_steps=0, **kw)  # no turn ids: one turn
    assert torch.equal(gated, batch.mask > 0)


@pytest.mark.covers("epo")
def test_seq_mode_compares_each_actions_mean_and_spreads_its_gradient():
    entropy, batch, history = epo_case(5)
    kw = dict(coef=1.0, history=history, max_steps=0, low=1.0, high=1.0, out_range_penalty=1.0)
    loss, _ = run(entropy, batch, mode="seq", **kw)
    bonus, _ = entropy_regularizer(Forward(torch.zeros_like(entropy), entropy), batch, coef=1.0)
    g = grad(loss, entropy) - grad(bonus, entropy)
    n = float(batch.mask.sum())
    for i in range(batch.size):
        for k in range(3):
            action = (batch.turn[i] == k) & (batch.mask[i] > 0)
            if not action.any():
                continue
            mean = float(entropy.detach()[i][action].mean())
            # P = |mean - Hbar| on each of the action's L tokens; d/dH_t of (L/N) |mean - Hbar| = sign / N
            expected = math.copysign(1.0, mean - history[k]) / n
            assert torch.allclose(g[i][action], torch.full((int(action.sum()),), expected, dtype=D), atol=1e-14)


@pytest.mark.covers("epo")
def test_phase_weight_is_the_reference_shape_and_non_increasing():
    for total in (1, 2, 7, 100, 150):
        w = [phase_weight(s, total) for s in range(total + 1)]
        assert all(a >= b for a, b in zip(w, w[1:])) and w[0] == 1.0
        assert all(0 < x <= 1 for x in w)
    assert phase_weight(75, 150) == pytest.approx(1 - 0.2 * (1 - math.exp(-2)))   # end of the slow half
    assert phase_weight(76, 150) == pytest.approx(0.8 * math.exp(-3 / 75))          # the fast half starts at 0.8
    assert phase_weight(150, 150) == pytest.approx(0.8 * math.exp(-3))
    assert epo_phase_weight(30, 60) == phase_weight(30, 60)
    assert epo_phase_weight(30, 60, max_epochs=150) == phase_weight(30, 150)
    with pytest.raises(ValueError, match="max_epochs"):
        epo_phase_weight(0, 10, max_epochs=-1)


@pytest.mark.covers("epo")
@pytest.mark.parametrize("bad, match", [
    (dict(low=1.3, high=1.2), "low <= high"), (dict(out_range_penalty=-0.1), "out_range_penalty"),
    (dict(phase_weight=1.5), "phase_weight"), (dict(mode="turn"), "mode"), (dict(coef=-1.0), "coef"),
    (dict(history=[-1.0]), "history"), (dict(max_steps=2.5), "max_steps")])
def test_bad_parameters_are_refused(bad, match):
    entropy, batch, history = epo_case(6)
    with pytest.raises(ValueError, match=match):
        run(entropy, batch, **{"history": history, **bad})
