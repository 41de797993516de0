"""The loss-aggregation figures (notebook 02) plot the right per-token weights: each is checked against an
independent closed form."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.viz import aggregation_weights as aw

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
    fig = aw.aggregation_example((10, 1000))
    short, long = y(fig, "10-token answer"), y(fig, "1000-token answer")
    np.testing.assert_allclose(short, [1 / 1010, 1 / 20, 1 / 2, 1 / 2000], rtol=1e-12)
    np.testing.assert_allclose(long, [1 / 1010, 1 / 2000, 1 / 2, 1 / 2000], rtol=1e-12)
    assert list(trace(fig, "10-token answer").text) == ["1/1010", "1/20", "1/2", "1/2000"]
    # right panel: whole-answer weight |y| * w
    np.testing.assert_allclose(y(fig, "1000-token answer", 1), 1000 * long, rtol=1e-12)
    assert list(trace(fig, "10-token answer").x) == list(MODES)


def test_weight_vs_length_matches_closed_forms():
    lengths = (3, 10, 50, 400)
    fig = aw.weight_vs_length(lengths, l_max=512)
    for mode in MODES:
        expected = closed_form_weights(lengths, mode, l_max=512)
        np.testing.assert_allclose(y(fig, mode, 0), expected, rtol=1e-12)
        np.testing.assert_allclose(y(fig, mode, 1), np.asarray(lengths) * expected, rtol=1e-12)


def test_length_bias_push_is_advantage_times_weight():
    rewards, lengths = (1.0, 1.0, 0.0, 0.0, 1.0), (20, 200, 20, 200, 7)
    fig = aw.length_bias_bars(rewards, lengths)
    r = np.asarray(rewards)
    a_grpo = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    for mode in MODES:
        np.testing.assert_allclose(y(fig, f"{mode}, GRPO A"), a_grpo * closed_form_weights(lengths, mode), rtol=1e-9)
    dr = y(fig, aw.DR_GRPO[0])
    np.testing.assert_allclose(dr, (r - r.mean()) / (len(r) * max(lengths)), rtol=1e-9)
    np.testing.assert_allclose(y(fig, aw.DR_GRPO[0], 1), dr * np.asarray(lengths), rtol=1e-12)
    # seq-mean-token-mean: the long wrong answer is pushed down 10x less per token than the short one
    seq = y(fig, "seq-mean-token-mean, GRPO A")
    assert seq[2] < seq[3] < 0 and seq[2] == pytest.approx(10 * seq[3])


LENGTHS = (12, 300, 40, 25, 800, 60, 150, 5)


def test_microbatch_mismatch_global_is_exact_local_is_not():
    ks = (1, 2, 3, 4, 8)
    fig = aw.microbatch_mismatch(LENGTHS, ks=ks)
    assert list(trace(fig, "token-mean (global)").x) == list(ks)
    for mode in MODES:
        assert np.abs(y(fig, f"{mode} (global)")).max() < 1e-12, mode
        assert y(fig, f"{mode} (local)")[0] < 1e-12, mode  # k = 1 is the full batch
    assert (y(fig, "token-mean (local)")[1:] > 0.01).all()  # token counts differ across micro-batches
    seq = dict(zip(ks, y(fig, "seq-mean-token-mean (local)")))
    assert max(seq[2], seq[4], seq[8]) < 1e-12 and seq[3] > 0.01  # exact iff every micro-batch has B/k rows


@pytest.mark.parametrize("k", [2, 3])
def test_microbatch_weights_local_and_global(k):
    fig = aw.microbatch_weights(LENGTHS, k=k)
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
