"""The figures of notebook 08 (preference optimization) plot the right numbers: each is checked against an
independent closed form."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.preference import games
from workbench.viz import preference_figures as pf

M = np.array([-4.0, -1.5, -0.25, 0.0, 0.3, 0.5, 0.99, 1.0, 1.01, 2.5, 5.0])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def traces(fig, name):
    return [t for t in fig.data if t.name == name]


# ------------------------------------------------------------------------------- loss and weight vs margin


@pytest.mark.parametrize("beta,ratio,eps", [(0.1, 0.5, 0.1), (0.5, 1.3, 0.25)])
def test_margin_figure_matches_closed_forms(beta, ratio, eps):
    fig = pf.margin_figure(beta=beta, gamma_beta_ratio=ratio, label_smoothing=eps, margins=M)
    delta, gamma = M / beta, beta * ratio
    expected = {  # (loss, −∂L/∂Δ) as functions of m = βΔ
        "dpo": (np.log1p(np.exp(-M)), beta * sigmoid(-M)),
        "ipo": ((delta - 1 / (2 * beta)) ** 2, -2 * (delta - 1 / (2 * beta))),
        "cdpo-robust": (-(1 - eps) * np.log(sigmoid(M)) - eps * np.log(sigmoid(-M)),
                        beta * ((1 - eps) * sigmoid(-M) - eps * sigmoid(M))),
        "hinge": (np.maximum(0.0, 1 - M), beta * (M < 1)),  # a step: β below the margin, 0 from it on
        "simpo": (np.log1p(np.exp(-(M - gamma))), beta * sigmoid(gamma - M)),
    }
    for key, (loss, weight) in expected.items():
        loss_trace, weight_trace = traces(fig, key)
        np.testing.assert_allclose(loss_trace.x, M)
        np.testing.assert_allclose(loss_trace.customdata, delta)
        np.testing.assert_allclose(loss_trace.y, loss, rtol=1e-10, atol=1e-12, err_msg=key)
        np.testing.assert_allclose(weight_trace.y, weight, rtol=1e-10, atol=1e-12, err_msg=key)
    # where each loss stops pushing: zeros of the weight (IPO, cDPO), the hinge's kink, SimPO's margin γ
    assert pf.target_margin("ipo", beta) == 0.5 and pf.target_margin("hinge", beta) == 1.0
    assert pf.target_margin("dpo", beta) is None
    m_star = pf.target_margin("cdpo-robust", beta, label_smoothing=eps)
    assert abs(pf.pair_loss_and_weight("cdpo-robust", m_star / beta, beta=beta, label_smoothing=eps)[1]) < 1e-12
    assert pf.target_margin("simpo", beta, ratio) == pytest.approx(gamma)
    dotted = sorted(s.x0 for s in fig.layout.shapes if s.line.dash == "dot")  # one per row, all but dpo
    np.testing.assert_allclose(dotted, sorted([0.5, 1.0, m_star, gamma] * 2), rtol=1e-12)


# ---------------------------------------------------------------------------------------------- length


def test_length_gradient_figure_matches_closed_forms():
    n = np.array([1, 4, 10, 37, 100])
    n_l, delta = 10, 0.05
    fig = pf.length_gradient_figure(chosen_lengths=n, rejected_len=n_l, token_logratio=delta)
    b, b_simpo, gamma = 0.1, 2.0, 2.0 * 0.5
    # at π = π_ref (Δ = 0) every chosen token gets the same weight; length-normalized losses divide it by |y_w|
    per_token = {"dpo (summed)": np.full(n.shape, b / 2), "ipo (summed)": np.full(n.shape, 1 / b),
                 "ipo (length-averaged, TRL)": (1 / b) / n,
                 "simpo (length-normalized)": b_simpo * sigmoid(gamma) / n}
    # β × the margin read when every token of both answers has log-ratio δ (equal per-token quality)
    margin = {"dpo (summed)": b * (n - n_l) * delta, "ipo (summed)": b * (n - n_l) * delta,
              "ipo (length-averaged, TRL)": np.zeros(n.shape), "simpo (length-normalized)": np.zeros(n.shape)}
    for label in pf.LENGTH_LOSSES:
        token, answer, reward = traces(fig, label)
        np.testing.assert_allclose(token.x, n)
        np.testing.assert_allclose(token.y, per_token[label], rtol=1e-10, err_msg=label)
        np.testing.assert_allclose(answer.y, n * per_token[label], rtol=1e-10, err_msg=label)
        np.testing.assert_allclose(reward.y, margin[label], atol=1e-12, err_msg=label)
    # the rejected answer's tokens (fixed length) are pushed down with the summed losses' same per-token weight
    assert pf.length_pair("dpo", {"beta": b}, 30, n_l)["rejected_token_weight"] == pytest.approx(b / 2)


# -------------------------------------------------------------------------------------- training figures


def test_logp_figures_plot_the_logged_rows():
    rows = [{"step": s, "logps/chosen": -1.0 - s, "logps/rejected": -5.0 - 2 * s, "rewards/chosen": -0.1 * s,
             "rewards/rejected": -0.2 * s, "rewards/margins": 0.1 * s} for s in range(4)]
    rows.append({"step": 4, "pairs": 0})  # a step without pairs (online) logs no preference metrics
    fig = pf.logp_trajectories(rows)
    for key in ("logps/chosen", "logps/rejected", "rewards/chosen", "rewards/rejected", "rewards/margins"):
        (t,) = traces(fig, key)
        assert list(t.x) == [0, 1, 2, 3] and list(t.y) == [r[key] for r in rows[:4]]
    before_w, before_l = [-1.0, -2.0, -3.0], [-5.0, -6.0, -7.0]
    after_w, after_l = [-1.5, -1.0, -3.5], [-6.0, -5.5, -9.0]
    scatter = pf.logp_change_scatter(before_w, before_l, after_w, after_l)
    (pts,) = traces(scatter, "held-out pair")
    np.testing.assert_allclose(pts.x, [-0.5, 1.0, -0.5])
    np.testing.assert_allclose(pts.y, [-1.0, 0.5, -2.0])
    assert "chosen fell: 2/3" in scatter.layout.annotations[0].text
    assert "margin grew: 3/3" in scatter.layout.annotations[0].text


# ----------------------------------------------------------------------------------------------- games


def test_exploitability_and_simplex_figures_match_closed_forms():
    P = games.rock_paper_scissors(0.9)
    traj = torch.tensor([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    runs = {"rps": (P, {"SPPO": traj, "INPO": traj.flip(0)})}
    fig = pf.exploitability_figure(runs)
    Pn, tn = P.numpy(), traj.numpy()
    last = (tn @ Pn.T).max(1) - 0.5  # max_y P(y ≻ π) − ½
    avg = np.cumsum(tn, 0) / np.arange(1, 4)[:, None]
    np.testing.assert_allclose(traces(fig, "SPPO (last iterate)")[0].customdata, last, atol=1e-12)
    np.testing.assert_allclose(traces(fig, "SPPO (average iterate)")[0].customdata, (avg @ Pn.T).max(1) - 0.5,
                               atol=1e-12)
    np.testing.assert_allclose(traces(fig, "INPO")[0].customdata, last[::-1], atol=1e-12)
    # by hand: paper, the best response to π_0 = (0.6, 0.3, 0.1), wins 0.6·0.95 + 0.3·0.5 + 0.1·0.05 = 0.725
    assert last[0] == pytest.approx(0.225) and last[2] == pytest.approx(0.0, abs=1e-12)
    simplex = pf.simplex_figure(runs)
    (path,) = traces(simplex, "SPPO")
    np.testing.assert_allclose(np.stack([path.a, path.b, path.c], 1), tn)
    (star,) = traces(simplex, "Nash")
    np.testing.assert_allclose([star.a[0], star.b[0], star.c[0]], [1 / 3] * 3, atol=1e-9)


def test_game_dynamics_follow_the_closed_form_updates():
    P, start = games.rock_paper_scissors(0.9), torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
    out = pf.game_dynamics(P, start, steps=1, inpo_eta=1.0, inpo_tau=0.2, nash_mp_beta=0.01, nash_mp_eta=3.0)
    assert set(out) == set(pf.GAME_METHODS) and all(t.shape == (2, 3) for t in out.values())
    assert torch.allclose(out["INPO"][1], games.omd_step(P, start, eta=1.0, tau=0.2), atol=1e-8)
    assert torch.allclose(out["Nash-MP"][1], games.mirror_prox_step(P, start, beta=0.01, eta=3.0), atol=1e-8)
