"""The figures of notebooks 02 (loss aggregation) and 03 (KL estimators) plot the right numbers: each is
checked against an independent closed form."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.viz import math_figures as mf

MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def trace(fig, name, index=0):
    """The index-th trace called `name` (subplots repeat names)."""
    return [t for t in fig.data if t.name == name][index]


def y(fig, name, index=0):
    return np.asarray(trace(fig, name, index).y, dtype=float)


def closed_form_weights(lengths, mode, l_max=None):
    """Per-token weight of each answer, from the equations in the notebook."""
    n = np.asarray(lengths, dtype=float)
    b = len(n)
    l_max = n.max() if l_max is None else l_max
    return {"token-mean": np.full(b, 1 / n.sum()), "seq-mean-token-mean": 1 / (b * n),
            "seq-mean-token-sum": np.full(b, 1 / b), "seq-mean-token-sum-norm": np.full(b, 1 / (b * l_max))}[mode]


# ------------------------------------------------------------------------------------- aggregation


def test_ten_vs_thousand_token_example():
    fig = mf.aggregation_example((10, 1000))
    short, long = y(fig, "10-token answer"), y(fig, "1000-token answer")
    np.testing.assert_allclose(short, [1 / 1010, 1 / 20, 1 / 2, 1 / 2000], rtol=1e-12)
    np.testing.assert_allclose(long, [1 / 1010, 1 / 2000, 1 / 2, 1 / 2000], rtol=1e-12)
    assert list(trace(fig, "10-token answer").text) == ["1/1010", "1/20", "1/2", "1/2000"]
    # right panel: whole-answer weight |y| * w
    np.testing.assert_allclose(y(fig, "1000-token answer", 1), 1000 * long, rtol=1e-12)
    assert list(trace(fig, "10-token answer").x) == list(MODES)


def test_weight_vs_length_matches_closed_forms():
    lengths = (3, 10, 50, 400)
    fig = mf.weight_vs_length(lengths, l_max=512)
    for mode in MODES:
        expected = closed_form_weights(lengths, mode, l_max=512)
        np.testing.assert_allclose(y(fig, mode, 0), expected, rtol=1e-12)
        np.testing.assert_allclose(y(fig, mode, 1), np.asarray(lengths) * expected, rtol=1e-12)


def test_length_bias_push_is_advantage_times_weight():
    rewards, lengths = (1.0, 1.0, 0.0, 0.0, 1.0), (20, 200, 20, 200, 7)
    fig = mf.length_bias_bars(rewards, lengths)
    r = np.asarray(rewards)
    a_grpo = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    for mode in MODES:
        np.testing.assert_allclose(y(fig, f"{mode}, GRPO A"), a_grpo * closed_form_weights(lengths, mode), rtol=1e-9)
    dr = y(fig, mf.DR_GRPO[0])
    np.testing.assert_allclose(dr, (r - r.mean()) / (len(r) * max(lengths)), rtol=1e-9)
    np.testing.assert_allclose(y(fig, mf.DR_GRPO[0], 1), dr * np.asarray(lengths), rtol=1e-12)
    # seq-mean-token-mean: the long wrong answer is pushed down 10x less per token than the short one
    seq = y(fig, "seq-mean-token-mean, GRPO A")
    assert seq[2] < seq[3] < 0 and seq[2] == pytest.approx(10 * seq[3])


LENGTHS = (12, 300, 40, 25, 800, 60, 150, 5)


def test_microbatch_mismatch_global_is_exact_local_is_not():
    ks = (1, 2, 3, 4, 8)
    fig = mf.microbatch_mismatch(LENGTHS, ks=ks)
    assert list(trace(fig, "token-mean (global)").x) == list(ks)
    for mode in MODES:
        assert np.abs(y(fig, f"{mode} (global)")).max() < 1e-12, mode
        assert y(fig, f"{mode} (local)")[0] < 1e-12, mode  # k = 1 is the full batch
    assert (y(fig, "token-mean (local)")[1:] > 0.01).all()  # token counts differ across micro-batches
    seq = dict(zip(ks, y(fig, "seq-mean-token-mean (local)")))
    assert max(seq[2], seq[4], seq[8]) < 1e-12 and seq[3] > 0.01  # exact iff every micro-batch has B/k rows


@pytest.mark.parametrize("k", [2, 3])
def test_microbatch_weights_local_and_global(k):
    fig = mf.microbatch_weights(LENGTHS, k=k)
    n = np.asarray(LENGTHS, dtype=float)
    rows = np.array_split(np.arange(len(n)), k)
    for m, mode in enumerate(MODES):
        full, local, global_ = y(fig, "full", m), y(fig, "local", m), y(fig, "global", m)
        np.testing.assert_allclose(full, closed_form_weights(LENGTHS, mode, l_max=n.max()), rtol=1e-12)
        np.testing.assert_allclose(global_, full, rtol=1e-12)
        expected_local = np.empty(len(n))
        for r in rows:
            if mode == "token-mean":
                expected_local[r] = 1 / (k * n[r].sum())
            elif mode == "seq-mean-token-mean":
                expected_local[r] = 1 / (k * len(r) * n[r])
            elif mode == "seq-mean-token-sum":
                expected_local[r] = 1 / (k * len(r))
            else:
                expected_local[r] = 1 / (k * len(r) * n[r].max())
        np.testing.assert_allclose(local, expected_local, rtol=1e-12)


# ---------------------------------------------------------------------------------------------- KL


def closed_form_estimators(lp, lr):
    logr = lp - lr
    return {"k1": logr, "k2": 0.5 * logr ** 2, "k3": np.exp(-logr) - 1 + logr, "abs": np.abs(logr)}


def test_kl_sweep_exact_panels_and_monte_carlo_means():
    distances, n = np.array([0.0, 0.5, 1.0, 2.0]), 400
    fig = mf.kl_estimator_sweep(distances, vocab=8, n_samples=n, seed=3)
    exact = []
    moments = {k: ([], []) for k in mf.ESTIMATORS}
    for d in distances:
        lp, lr = (t.numpy() for t in mf.categorical_pair(float(d), 8, 3))
        p = np.exp(lp)
        exact.append(float((p * (lp - lr)).sum()))
        for k, v in closed_form_estimators(lp, lr).items():
            mean = (p * v).sum()
            moments[k][0].append(mean)
            moments[k][1].append(np.sqrt((p * (v - mean) ** 2).sum()))
    exact = np.asarray(exact)
    np.testing.assert_allclose(y(fig, "exact KL(π‖π_ref)"), exact, atol=1e-12)
    assert exact[0] == 0 and np.all(np.diff(exact) > 0)
    for k in mf.ESTIMATORS:
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
    fig = mf.kl_estimator_histograms(distance=1.0, vocab=8, n_samples=3000, seed=1)
    values = {t.name: np.asarray(t.x, dtype=float) for t in fig.data}
    k1 = values["k1"]
    np.testing.assert_allclose(values["k2"], 0.5 * k1 ** 2, atol=1e-12)
    np.testing.assert_allclose(values["k3"], np.exp(-k1) - 1 + k1, atol=1e-12)
    np.testing.assert_allclose(values["abs"], np.abs(k1), atol=1e-12)
    lp, lr = (t.numpy() for t in mf.categorical_pair(1.0, 8, 1))
    assert set(np.round(k1, 10)) <= set(np.round(lp - lr, 10))  # every value is one token's log-ratio
    exact = float((np.exp(lp) * (lp - lr)).sum())
    assert abs(k1.mean() - exact) < 0.1 and abs(values["k3"].mean() - exact) < 0.1
    assert fig.layout.shapes[0].x0 == pytest.approx(exact)


def test_kl_gradient_check_against_closed_forms():
    fig = mf.kl_gradient_check(distance=1.5, vocab=8, seed=0, distances=[0.5, 1.5, 2.5])
    lp, lr = (t.numpy() for t in mf.categorical_pair(1.5, 8, 0))
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
    fig = mf.adaptive_kl_trajectories({"above": above, "below": below, "loop": lambda b: 0.6 / b},
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
