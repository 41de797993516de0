"""The KL-estimator figures (notebook 03) plot the right numbers: each is checked against an independent closed form
(exact sums over the vocabulary, the controller's update rule)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.viz.test_aggregation_weights import y
from workbench.viz import kl_estimators as ke


def closed_form_estimators(lp, lr):
    logr = lp - lr
    return {"k1": logr, "k2": 0.5 * logr ** 2, "k3": np.exp(-logr) - 1 + logr, "abs": np.abs(logr)}


def test_kl_sweep_exact_panels_and_monte_carlo_means():
    distances, n = np.array([0.0, 0.5, 1.0, 2.0]), 400
    fig = ke.kl_estimator_sweep(distances, vocab=8, n_samples=n, seed=3)
    exact = []
    moments = {k: ([], []) for k in ke.ESTIMATORS}
    for d in distances:
        lp, lr = (t.numpy() for t in ke.categorical_pair(float(d), 8, 3))
        p = np.exp(lp)
        exact.append(float((p * (lp - lr)).sum()))
        for k, v in closed_form_estimators(lp, lr).items():
            mean = (p * v).sum()
            moments[k][0].append(mean)
            moments[k][1].append(np.sqrt((p * (v - mean) ** 2).sum()))
    exact = np.asarray(exact)
    np.testing.assert_allclose(y(fig, "exact KL(π‖π_ref)"), exact, atol=1e-12)
    assert exact[0] == 0 and np.all(np.diff(exact) > 0)
    for k in ke.ESTIMATORS:
        mean, std = (np.asarray(a) for a in moments[k])
        np.testing.assert_allclose(y(fig, k, 1), mean - exact, atol=1e-12)   # bias panel
        np.testing.assert_allclose(y(fig, k, 2), std, atol=1e-12)            # std panel
        mc = y(fig, k, 0)
        assert np.all(np.abs(mc - mean) <= 5 * std / np.sqrt(n) + 1e-12), k  # Monte Carlo mean near E[k]
    for k in ("k1", "k3"):  # unbiased: the Monte Carlo mean is near the exact KL itself
        assert np.abs(y(fig, k, 1)).max() < 1e-12
        assert np.all(np.abs(y(fig, k, 0) - exact) <= 5 * np.asarray(moments[k][1]) / np.sqrt(n) + 1e-12), k
    # k2 is biased (in either direction, depending on the pair); |logr| >= logr makes abs biased upwards
    assert np.all(np.abs(y(fig, "k2", 1)[1:]) > 1e-4) and np.all(y(fig, "abs", 1)[1:] > 0)


def test_kl_histograms_plot_the_estimators_of_sampled_tokens():
    fig = ke.kl_estimator_histograms(distance=1.0, vocab=8, n_samples=3000, seed=1)
    values = {t.name: np.asarray(t.x, dtype=float) for t in fig.data}
    k1 = values["k1"]
    np.testing.assert_allclose(values["k2"], 0.5 * k1 ** 2, atol=1e-12)
    np.testing.assert_allclose(values["k3"], np.exp(-k1) - 1 + k1, atol=1e-12)
    np.testing.assert_allclose(values["abs"], np.abs(k1), atol=1e-12)
    lp, lr = (t.numpy() for t in ke.categorical_pair(1.0, 8, 1))
    assert set(np.round(k1, 10)) <= set(np.round(lp - lr, 10))  # every value is one token's log-ratio
    exact = float((np.exp(lp) * (lp - lr)).sum())
    assert abs(k1.mean() - exact) < 0.1 and abs(values["k3"].mean() - exact) < 0.1
    assert fig.layout.shapes[0].x0 == pytest.approx(exact)


def test_kl_gradient_check_against_closed_forms():
    fig = ke.kl_gradient_check(distance=1.5, vocab=8, seed=0, distances=[0.5, 1.5, 2.5])
    lp, lr = (t.numpy() for t in ke.categorical_pair(1.5, 8, 0))
    p, q = np.exp(lp), np.exp(lr)
    reverse = p * ((lp - lr) - (p * (lp - lr)).sum())   # d/dθ_j KL(π‖π_ref), π = softmax(θ)
    forward = p - q                                      # d/dθ_j KL(π_ref‖π)
    np.testing.assert_allclose(y(fig, "exact ∇KL(π‖π_ref)"), reverse, atol=1e-12)
    np.testing.assert_allclose(y(fig, "∇KL(π_ref‖π)"), forward, atol=1e-12)
    np.testing.assert_allclose(y(fig, "E[∇k1]"), 0, atol=1e-12)
    np.testing.assert_allclose(y(fig, "E[∇k2]"), reverse, atol=1e-12)
    np.testing.assert_allclose(y(fig, "E[∇k3+]"), reverse, atol=1e-12)
    np.testing.assert_allclose(y(fig, "E[∇k3]"), forward, atol=1e-12)
    errors = {k: y(fig, f"E[∇{k}]", 1) for k in ("k1", "k2", "k3", "abs", "k3+")}
    np.testing.assert_allclose(errors["k1"], 1.0, atol=1e-12)
    assert errors["k2"].max() < 1e-12 and errors["k3+"].max() < 1e-12
    assert errors["k3"].min() > 0.05 and errors["abs"].min() > 0.05


def test_adaptive_beta_follows_the_update_rule():
    target, horizon, n, beta0 = 6.0, 1000, 64, 0.1
    above, below = [9.0, 12.0, 30.0, 6.0], [1.0, 5.4, 6.0, 3.0]
    fig = ke.adaptive_kl_trajectories({"above": above, "below": below, "loop": lambda b: 0.6 / b},
                                      beta=beta0, target=target, horizon=horizon, n_steps=n, steps=4)
    for name, kls in (("above", above), ("below", below)):
        beta, expected = beta0, []
        for value in kls:
            expected.append(beta)
            beta *= 1 + np.clip(value / target - 1, -0.2, 0.2) * n / horizon
        np.testing.assert_allclose(y(fig, name, 0), kls)
        np.testing.assert_allclose(y(fig, name, 1), expected, rtol=1e-12)
    loop_kl, loop_beta = y(fig, "loop", 0), y(fig, "loop", 1)
    np.testing.assert_allclose(loop_kl, 0.6 / loop_beta, rtol=1e-12)
    assert np.all(np.diff(y(fig, "above", 1)[:3]) > 0) and np.all(np.diff(y(fig, "below", 1)[:2]) < 0)
    np.testing.assert_allclose(y(fig, "fixed controller", 0), beta0)
