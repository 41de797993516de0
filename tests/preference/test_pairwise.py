"""F7 pairwise preference losses (dpo, ipo, cdpo-robust, hinge, simpo): reductions, gradient weights, known
values, bad lengths. Float64 throughout."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import D, grad, lengths, pairs
from workbench.preference.pairwise import cdpo_robust, dpo, hinge, ipo, simpo
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def from_margin(delta):
    """Pairs whose Δ is exactly `delta` (chosen log-ratio = delta, rejected 0); returns (c, r, rc, rr, c leaf)."""
    d = torch.as_tensor(delta, dtype=D).clone().requires_grad_(True)
    z = torch.zeros_like(d)
    return d, z, z, z


@pytest.mark.covers("ipo", "simpo")
def test_length_normalized_losses_reject_bad_lengths():
    c, r, rc, rr = pairs()
    n_w, n_l = lengths()
    for bad in (0.0, -1.0, float("nan")):
        n = n_w.clone()
        n[3] = bad
        with pytest.raises(ValueError, match="> 0"):
            ipo(c, r, rc, rr, length_average=True, chosen_len=n, rejected_len=n_l)
        with pytest.raises(ValueError, match="> 0"):
            simpo(c, r, chosen_len=n_w, rejected_len=n)
    with pytest.raises(ValueError, match="needs chosen_len"):
        ipo(c, r, rc, rr, length_average=True)
    with pytest.raises(ValueError, match="needs chosen_len"):
        simpo(c, r)
    with pytest.raises(ValueError, match="length_average=False"):
        ipo(c, r, rc, rr, chosen_len=n_w, rejected_len=n_l)
    with pytest.raises(ValueError, match="one length per pair"):
        simpo(c, r, chosen_len=n_w[:-1], rejected_len=n_l)


# ------------------------------------------------------------------------------------------------ dpo


@pytest.mark.covers("dpo")
def test_dpo_known_values_and_gradient_weight():
    beta = 0.5
    delta = torch.tensor([-4.0, -1.0, 0.0, 1.0, 6.0, 40.0], dtype=D)
    c, r, rc, rr = from_margin(delta)
    loss, m = dpo(c, r, rc, rr, beta=beta)
    torch.testing.assert_close(loss, F.softplus(-beta * delta).mean())
    loss0, _ = dpo(*from_margin([0.0]), beta=beta)
    assert float(loss0) == pytest.approx(math.log(2))
    # dL_i/dΔ_i = -β σ(-βΔ_i) (per pair; the mean divides by B): vanishes for confident pairs
    g = grad(loss, c) * len(delta)
    torch.testing.assert_close(g, -beta * torch.sigmoid(-beta * delta))
    assert abs(float(g[-1])) < 1e-8
    assert m["dpo/weight"] == pytest.approx(float(torch.sigmoid(-beta * delta).mean()))
    # the gradient of the summed log-probs: +w on chosen policy, -w on rejected policy
    c2, r2, rc2, rr2 = pairs(1)
    l2, _ = dpo(c2, r2, rc2, rr2, beta=beta)
    gc, gr = torch.autograd.grad(l2, (c2, r2))
    torch.testing.assert_close(gc, -gr)
    w = torch.sigmoid(-beta * ((c2 - rc2) - (r2 - rr2))).detach()
    torch.testing.assert_close(gc, -beta * w / len(w))


@pytest.mark.covers("dpo")
def test_dpo_swap_and_beta_invariant_accuracy():
    c, r, rc, rr = pairs(2)
    l, m = dpo(c, r, rc, rr, beta=0.3)
    l_swapped, m_swapped = dpo(r, c, rr, rc, beta=0.3)
    delta = (c - rc) - (r - rr)
    torch.testing.assert_close(l_swapped, F.softplus(0.3 * delta).mean())  # L(Δ) -> L(-Δ)
    assert m_swapped["rewards/margins"] == pytest.approx(-m["rewards/margins"])
    accs = {dpo(c, r, rc, rr, beta=b)[1]["rewards/accuracies"] for b in (0.01, 0.1, 1.0, 7.0)}
    assert accs == {float((delta > 0).double().mean())}
    assert m["rewards/chosen"] == pytest.approx(float(0.3 * (c - rc).mean()))
    with pytest.raises(ValueError, match="beta"):
        dpo(c, r, rc, rr, beta=0.0)


# ------------------------------------------------------------------------------------------------ ipo


@pytest.mark.covers("ipo")
def test_ipo_minimizer_and_non_vanishing_gradient():
    beta = 0.25
    target = 1 / (2 * beta)
    for d0, sign in ((target, 0), (target - 3, -1), (target + 3, 1), (1e4, 1)):
        c, r, rc, rr = from_margin([d0])
        loss, m = ipo(c, r, rc, rr, beta=beta)
        g = float(grad(loss, c))
        assert float(loss) == pytest.approx((d0 - target) ** 2)
        assert g == pytest.approx(2 * (d0 - target))  # reverses sign past the target, grows with Δ
        assert (g > 0) - (g < 0) == sign
    assert m["ipo/target"] == target
    # unlike DPO, whose gradient vanishes as Δ → ∞
    c, r, rc, rr = from_margin([1e4])
    assert abs(float(grad(dpo(c, r, rc, rr, beta=beta)[0], c))) < 1e-12


@pytest.mark.covers("ipo")
def test_ipo_conventions_coincide_at_length_one_and_differ_otherwise():
    c, r, rc, rr = pairs(3)
    ones = torch.ones(8, dtype=D)
    l_sum, _ = ipo(c, r, rc, rr, beta=0.1)
    l_avg, _ = ipo(c, r, rc, rr, beta=0.1, length_average=True, chosen_len=ones, rejected_len=ones)
    torch.testing.assert_close(l_sum, l_avg)
    torch.testing.assert_close(grad(l_sum, c), grad(l_avg, c))
    n_w, n_l = lengths(3)
    l_avg, m = ipo(c, r, rc, rr, beta=0.1, length_average=True, chosen_len=n_w, rejected_len=n_l)
    h = (c - rc) / n_w - (r - rr) / n_l
    torch.testing.assert_close(l_avg, ((h - 5.0) ** 2).mean())
    assert m["ipo/margin"] == pytest.approx(float(h.mean()))
    assert not torch.allclose(l_sum, l_avg)


# ---------------------------------------------------------------------------------------- cdpo-robust


@pytest.mark.covers("cdpo-robust", "dpo")
def test_cdpo_and_rdpo_at_zero_noise_are_dpo():
    c, r, rc, rr = pairs(4)
    l_dpo, m_dpo = dpo(c, r, rc, rr, beta=0.2)
    for form in ("cdpo", "rdpo"):
        l, m = cdpo_robust(c, r, rc, rr, beta=0.2, label_smoothing=0.0, form=form)
        torch.testing.assert_close(l, l_dpo)
        torch.testing.assert_close(grad(l, c), grad(l_dpo, c))
        assert m["cdpo/weight"] == pytest.approx(m_dpo["dpo/weight"])


@pytest.mark.covers("cdpo-robust")
def test_rdpo_is_unbiased_under_label_flips():
    beta, eps = 0.3, 0.2
    delta = torch.linspace(-10, 10, 21, dtype=D)
    c, r, rc, rr = from_margin(delta)
    per = lambda sgn: torch.stack([cdpo_robust(*from_margin([float(sgn * d)]), beta=beta, label_smoothing=eps,  # noqa
                                               form="rdpo")[0] for d in delta])
    expected = (1 - eps) * per(1) + eps * per(-1)  # the observed label is flipped with probability ε
    torch.testing.assert_close(expected, F.softplus(-beta * delta))


@pytest.mark.covers("cdpo-robust")
def test_cdpo_finite_optimum_and_known_value():
    beta, eps = 0.5, 0.1
    d_star = math.log((1 - eps) / eps) / beta
    c, r, rc, rr = from_margin([d_star])
    loss, _ = cdpo_robust(c, r, rc, rr, beta=beta, label_smoothing=eps, form="cdpo")
    assert abs(float(grad(loss, c))) < 1e-12
    x = beta * 2.0
    l, _ = cdpo_robust(*from_margin([2.0]), beta=beta, label_smoothing=eps)
    assert float(l) == pytest.approx(0.9 * math.log1p(math.exp(-x)) + 0.1 * math.log1p(math.exp(x)))
    # the optimum is a minimum: beyond it the gradient pushes Δ back
    l_far, _ = cdpo_robust(*from_margin([d_star + 5]), beta=beta, label_smoothing=eps)
    assert float(l_far) > float(loss)
    with pytest.raises(ValueError, match="0.5"):
        cdpo_robust(c, r, rc, rr, label_smoothing=0.5, form="rdpo")
    with pytest.raises(ValueError, match="form"):
        cdpo_robust(c, r, rc, rr, form="robust")


# ---------------------------------------------------------------------------------------------- hinge


@pytest.mark.covers("hinge")
def test_hinge_margin_gradient_and_beta_scaling():
    beta = 0.5
    delta = torch.tensor([-3.0, 0.0, 1.9, 2.0, 2.5, 9.0], dtype=D)  # margin 1/β = 2
    c, r, rc, rr = from_margin(delta)
    loss, m = hinge(c, r, rc, rr, beta=beta)
    torch.testing.assert_close(loss, torch.relu(1 - beta * delta).mean())
    g = grad(loss, c) * len(delta)
    torch.testing.assert_close(g, torch.tensor([-beta, -beta, -beta, 0.0, 0.0, 0.0], dtype=D))
    assert m["hinge/active"] == pytest.approx(0.5)
    # β scales the margin: at β = 0.1 the same Δ = 2.5 is inside the margin (1/β = 10)
    assert float(hinge(*from_margin([2.5]), beta=0.1)[0]) == pytest.approx(0.75)
    # SLiC form relu(δ - Δ) with δ = 1/β is the TRL form divided by β
    l_slic, _ = hinge(c, r, rc, rr, beta=beta, margin=1 / beta)
    torch.testing.assert_close(l_slic, loss / beta)
    # reference-free SLiC: u = log π
    c2, r2, _, _ = pairs(5)
    torch.testing.assert_close(hinge(c2, r2, None, None, beta=beta)[0], torch.relu(1 - beta * (c2 - r2)).mean())


@pytest.mark.covers("hinge", "dpo")
def test_hinge_vs_dpo_limits():
    beta = 0.1
    far = torch.tensor([-1e3, -5e2], dtype=D)  # βΔ → -∞: both linear with slope -β, losses differ by 1
    l_h, l_d = hinge(*from_margin(far), beta=beta)[0], dpo(*from_margin(far), beta=beta)[0]
    assert float(l_h - l_d) == pytest.approx(1.0, abs=1e-12)
    c, r, rc, rr = from_margin(far)
    torch.testing.assert_close(grad(hinge(c, r, rc, rr, beta=beta)[0], c), grad(dpo(c, r, rc, rr, beta=beta)[0], c))
    # past the margin hinge stops (zero loss and gradient) while DPO keeps a positive loss
    c, r, rc, rr = from_margin([12.0])
    assert float(hinge(c, r, rc, rr, beta=beta)[0]) == 0.0 and float(grad(hinge(c, r, rc, rr, beta=beta)[0], c)) == 0
    assert float(dpo(c, r, rc, rr, beta=beta)[0]) > 0


# ---------------------------------------------------------------------------------------------- simpo


@pytest.mark.covers("simpo")
def test_simpo_conventions_agree_and_known_value():
    c, r, _, _ = pairs(6)
    n_w, n_l = lengths(6)
    beta, ratio = 2.5, 0.4
    l_ratio, m = simpo(c, r, beta=beta, gamma_beta_ratio=ratio, chosen_len=n_w, rejected_len=n_l)
    l_abs, _ = simpo(c, r, beta=beta, gamma=beta * ratio, gamma_beta_ratio=None, chosen_len=n_w, rejected_len=n_l)
    torch.testing.assert_close(l_ratio, l_abs)
    bar = c / n_w - r / n_l
    torch.testing.assert_close(l_ratio, -F.logsigmoid(beta * (bar - ratio)).mean())
    assert m["simpo/gamma"] == pytest.approx(1.0) and m["simpo/margin"] == pytest.approx(float(bar.mean()))
    assert m["rewards/chosen"] == pytest.approx(float((beta * c / n_w).mean()))
    with pytest.raises(ValueError, match="exactly one"):
        simpo(c, r, gamma=1.0, chosen_len=n_w, rejected_len=n_l)
    with pytest.raises(ValueError, match="neither"):
        simpo(c, r, gamma_beta_ratio=None, chosen_len=n_w, rejected_len=n_l)


@pytest.mark.covers("simpo")
def test_simpo_length_scaling_invariance_and_reads_no_reference():
    per_tok_w, per_tok_l = torch.tensor([-0.3, -1.2], dtype=D), torch.tensor([-0.9, -0.4], dtype=D)
    short = simpo(per_tok_w * 3, per_tok_l * 5, chosen_len=torch.tensor([3.0, 3.0], dtype=D),
                  rejected_len=torch.tensor([5.0, 5.0], dtype=D))[0]
    long = simpo(per_tok_w * 40, per_tok_l * 7, chosen_len=torch.tensor([40.0, 40.0], dtype=D),
                 rejected_len=torch.tensor([7.0, 7.0], dtype=D))[0]
    torch.testing.assert_close(short, long)
    c, r, rc, rr = pairs(7)
    n_w, n_l = lengths(7)
    nan = torch.full_like(rc, float("nan"))
    base = simpo(c, r, chosen_len=n_w, rejected_len=n_l)[0]
    torch.testing.assert_close(simpo(c, r, rc, rr, chosen_len=n_w, rejected_len=n_l)[0], base)
    torch.testing.assert_close(simpo(c, r, nan, nan, chosen_len=n_w, rejected_len=n_l)[0], base)


@pytest.mark.covers("simpo", "dpo")
def test_simpo_without_margin_at_equal_lengths_is_reference_free_dpo():
    c, r, _, _ = pairs(8)
    n = torch.full((8,), 6.0, dtype=D)
    z = torch.zeros(8, dtype=D)
    l_s = simpo(c, r, beta=2.0, gamma=0.0, gamma_beta_ratio=None, chosen_len=n, rejected_len=n)[0]
    l_d = dpo(c, r, z, z, beta=2.0 / 6.0)[0]
    torch.testing.assert_close(l_s, l_d)
    torch.testing.assert_close(grad(l_s, c), grad(l_d, c))


@pytest.mark.parametrize("recipe, overrides, message", [
    ("cdpo-robust", {"form": "rdpo", "label_smoothing": 0.5},
     r"objective 'preference': rdpo label_smoothing \(flip rate\) must lie in \[0, 0.5\)"),
    ("cdpo-robust", {"form": "robust"},
     r"preference loss 'cdpo-robust': form='robust' is not one of \['cdpo', 'rdpo'\]"),
    ("simpo", {"gamma": 1.0}, r"SimPO has two margin conventions"),
])
def test_settings_the_loss_cannot_take_are_refused_when_the_recipe_is_built(recipe, overrides, message):
    """A preference loss runs inside the preference objective: its own checks ran at the first update."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe(recipe), {"objective": overrides}))
