"""The entropy controls follow the library: entropy steps by autograd through the registered entropy bonus and
objectives, a batch's token entropy as drawn, the covariance selections of Clip-Cov / KL-Cov, and the per-method
pictures (SAC's temperature, SAFE, LLDS, HAPO, EPO). Fast: no model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from workbench import ops
from workbench.viz.entropy_controls import (covariance_figure, covariance_summary, covariance_tokens,
                                            entropy_bonus_step, entropy_explorer, entropy_heatmap, entropy_step_figure,
                                            entropy_steps, epo_band_curves, epo_band_figure,
                                            first_order_entropy_change, hapo_temperature_curves,
                                            hapo_temperature_figure, llds_figure, llds_toy, policy_gradient_step,
                                            sac_temperature_figure, sac_temperature_toy, safe_penalty_curves,
                                            safe_penalty_figure, shape_logits, token_entropy)

LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5, -3.0], dtype=torch.float64)


def probs_at(z, T):
    return torch.softmax(z / T, -1)


# ---------------------------------------------------------------------------------------------- the mechanism


@pytest.mark.parametrize("T", [0.5, 1.0, 2.0])
def test_token_entropy_is_the_trainers_entropy(T):
    z = torch.randn(5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    np.testing.assert_allclose(token_entropy(z, T).numpy(), ops.entropy_from_logits(z, T).numpy(), atol=1e-5)
    assert float(token_entropy(torch.zeros(8), T)) == pytest.approx(math.log(8))
    assert float(token_entropy(LOGITS, T)) == pytest.approx(float(token_entropy(LOGITS / T, 1.0)))


def test_shapes():
    assert torch.equal(shape_logits("flat", 5.0), torch.zeros(8, dtype=torch.float64))
    p = probs_at(shape_logits("zipf", 1.0), 1.0)
    np.testing.assert_allclose(p.numpy(), (1 / np.arange(1, 9)) / (1 / np.arange(1, 9)).sum())
    assert shape_logits("two peaks", 2.0).tolist()[:3] == [2.0, 2.0, 0.0]
    with pytest.raises(ValueError, match="shape"):
        shape_logits("square")


@pytest.mark.covers("entropy-bonus")
@pytest.mark.parametrize("T", [0.5, 1.0, 2.0])
def test_entropy_bonus_step_is_gradient_ascent_on_the_exact_entropy(T):
    p = probs_at(LOGITS, T)
    H = token_entropy(LOGITS, T)
    dH = -p * (p.log() + H) / T  # the analytic gradient of H(softmax(z / T)) in z
    new = entropy_bonus_step(LOGITS, T, lr=0.1)
    torch.testing.assert_close(new, LOGITS + 0.1 * dH)
    assert token_entropy(new, T) > H
    torch.testing.assert_close(entropy_bonus_step(LOGITS, T, lr=0.1, coef=0.0), LOGITS)


@pytest.mark.parametrize("token, A, T", [(0, 1.0, 1.0), (5, -1.0, 1.0), (2, 0.7, 0.5)])
def test_policy_gradient_step_is_reinforce(token, A, T):
    p = probs_at(LOGITS, T)
    onehot = torch.nn.functional.one_hot(torch.tensor(token), 8).double()
    new = policy_gradient_step(LOGITS, T, token, A, lr=0.3)  # through the registered ppo-clip at ratio 1
    torch.testing.assert_close(new, LOGITS + 0.3 * A * (onehot - p) / T)
    torch.testing.assert_close(policy_gradient_step(LOGITS, T, token, A, lr=0.3, objective="cispo"), new)


def test_first_order_change_is_minus_the_covariance_and_matches_small_steps():
    for T in (0.5, 1.0, 2.0):
        dz = torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 1e-4
        exact = float(token_entropy(LOGITS + dz, T) - token_entropy(LOGITS, T))
        assert first_order_entropy_change(LOGITS, LOGITS + dz, T) == pytest.approx(exact, rel=1e-3)
        p = probs_at(LOGITS, T)
        logp = p.log()
        cov = (p * logp * dz / T).sum() - (p * logp).sum() * (p * dz / T).sum()
        assert first_order_entropy_change(LOGITS, LOGITS + dz, T) == pytest.approx(-float(cov))


def test_entropy_falls_when_the_advantage_follows_the_log_prob():
    s = entropy_steps(shape_logits("one peak", 3.0), 1.0, bonus_lr=0.5, token=0, advantage=1.0, pg_lr=0.5)
    assert s["pg"]["change"] < 0 < s["bonus"]["change"]
    assert all(s["pg_by_token"][1:] > 0)  # A > 0 on an unlikely token raises the entropy
    flipped = entropy_steps(shape_logits("one peak", 3.0), 1.0, token=5, advantage=-1.0)
    assert flipped["pg"]["change"] < 0 and flipped["pg_by_token"][0] > 0  # A < 0: the signs flip
    for k in range(8):  # the per-token entries are the steps themselves
        step = entropy_steps(shape_logits("one peak", 3.0), 1.0, token=k, advantage=1.0)
        assert step["pg"]["change"] == pytest.approx(s["pg_by_token"][k])
        assert step["pg"]["first_order"] == pytest.approx(s["pg_by_token_first_order"][k])
    assert s["pg"]["change"] == pytest.approx(s["pg"]["first_order"], abs=5e-3)


def test_entropy_step_figure_draws_the_steps():
    fig = entropy_step_figure("zipf", sharpness=2.0, temperature=0.7, bonus_lr=0.3, token=2, advantage=-1.0, pg_lr=0.4)
    s = entropy_steps(shape_logits("zipf", 2.0), 0.7, 0.3, 2, -1.0, 0.4)
    np.testing.assert_allclose(fig.data[0].y, s["probs"])
    np.testing.assert_allclose(fig.data[1].y, s["bonus"]["probs"])
    np.testing.assert_allclose(fig.data[2].y, s["pg"]["probs"])
    assert [float(t.y[0]) for t in fig.data[4:7]] == pytest.approx(
        [s["entropy"], s["bonus"]["entropy"], s["pg"]["entropy"]])
    np.testing.assert_allclose(fig.data[7].y, s["pg_by_token"])
    np.testing.assert_allclose(fig.data[8].y, s["pg_by_token_first_order"])


def test_entropy_explorer_redraws_in_place():
    box = entropy_explorer()
    fig, c = box.figure, box.controls
    n, before = len(fig.data), list(fig.data[0].y)
    default = entropy_step_figure()
    np.testing.assert_allclose(fig.data[0].y, default.data[0].y)  # the book's static picture is the default
    c["sharpness"].value = 1.0
    assert len(fig.data) == n and list(fig.data[0].y) != before
    c["advantage"].value = -1.0
    c["token"].value = 4
    c["shape"].value = "two peaks"
    c["temperature"].value = 2.0
    expected = entropy_step_figure("two peaks", 1.0, 2.0, 0.5, 4, -1.0, 0.5)
    for got, want in zip(fig.data, expected.data):
        np.testing.assert_allclose(np.asarray(got.y, float), np.asarray(want.y, float))
    assert fig.layout.title.text == expected.layout.title.text
    assert set(c) == {"shape", "sharpness", "temperature", "bonus_lr", "token", "advantage", "pg_lr"}


# ---------------------------------------------------------------------------------------------- a batch's tokens


def test_entropy_heatmap_shape_text_and_mask():
    tokens = [["The", " cat", "<eos>"], ["1", "+"]]
    entropy = torch.tensor([[0.5, 1.0, 2.0], [0.1, 0.2, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    fig = entropy_heatmap(tokens, entropy, mask)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2, 3)
    assert np.isnan(z[0, 2]) and np.isnan(z[1, 2])  # masked, and past the row's tokens
    assert z[0, 1] == pytest.approx(1.0)
    assert fig.data[0].text[0][0] == "The" and fig.data[0].text[0][2] == ""
    assert "&lt;" in entropy_heatmap([["<eos>"]], [[1.0]]).data[0].text[0][0]


# ---------------------------------------------------------------------------------------------- covariance


def random_batch(B=12, T=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, 8, generator=g, dtype=torch.float64) * 2
    logp = torch.log_softmax(logits, -1)[..., 0]
    entropy = ops.entropy_from_logits(logits).double()
    adv = torch.randn(B, 1, generator=g, dtype=torch.float64).expand(B, T).clone()
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).double()
    return logp * mask, entropy * mask, adv * mask, mask


@pytest.mark.covers("clip_cov", "kl_cov")
def test_covariance_tokens_are_the_objectives_selections():
    from workbench.objectives.entropy_cov import clip_cov_selection, kl_cov_selection, token_covariance

    logp, entropy, adv, mask = random_batch()
    clip_kw = dict(clip_cov_ratio=0.1, clip_cov_lb=0.2, clip_cov_ub=5.0)
    data = covariance_tokens(logp, entropy, adv, mask, clip_cov=clip_kw, kl_cov=dict(kl_cov_ratio=0.1))
    valid = mask > 0
    N = int(mask.sum())
    assert len(data["cov"]) == N
    np.testing.assert_allclose(data["cov"], token_covariance(logp, adv, mask)[valid].numpy())
    np.testing.assert_allclose(data["entropy"], entropy[valid].numpy())
    detached, candidates = clip_cov_selection(logp, logp, adv, mask, **clip_kw)
    assert np.array_equal(data["detached"], detached[valid].numpy())
    assert np.array_equal(data["candidate"], candidates[valid].numpy())
    assert np.array_equal(data["penalized"], kl_cov_selection(logp, adv, mask, kl_cov_ratio=0.1)[valid].numpy())
    k = int(0.1 * N)
    assert data["penalized"].sum() == k and data["detached"].sum() == min(k, candidates.sum())
    # KL-Cov takes the top k by cov, Clip-Cov only from inside its band
    assert data["cov"][data["penalized"]].min() >= data["cov"][~data["penalized"]].max()
    assert np.all((data["cov"][data["detached"]] > 0.2) & (data["cov"][data["detached"]] < 5.0))
    summary = covariance_summary(data)
    assert summary["tokens"] == N and summary["penalized"] == k
    assert summary["entropy_penalized"] == pytest.approx(data["entropy"][data["penalized"]].mean())
    rows, positions = torch.nonzero(valid, as_tuple=True)
    assert np.array_equal(data["row"], rows.numpy()) and np.array_equal(data["position"], positions.numpy())


def test_covariance_figure_marks_the_selections():
    logp, entropy, adv, mask = random_batch(seed=2)
    data = covariance_tokens(logp, entropy, adv, mask, clip_cov=dict(clip_cov_ratio=0.1, clip_cov_lb=0.1),
                             kl_cov=dict(kl_cov_ratio=0.05))
    fig = covariance_figure(data, 0.1, 5.0)
    np.testing.assert_allclose(fig.data[0].x, data["cov"])
    np.testing.assert_allclose(fig.data[0].y, data["entropy"])
    np.testing.assert_allclose(fig.data[1].x, data["logp"])
    np.testing.assert_allclose(fig.data[2].x, data["cov"][data["detached"]])
    np.testing.assert_allclose(fig.data[4].x, data["cov"][data["penalized"]])
    assert fig.layout.shapes[0].x0 == 0.1 and fig.layout.shapes[0].x1 == 5.0


# ---------------------------------------------------------------------------------------------- the claims


def test_claims_table_covers_the_family():
    from workbench.results.claims import claims_table

    rows = claims_table(recipes=["clip_cov", "kl_cov", "entropy-bonus"])
    assert {r["recipe"] for r in rows} == {"clip_cov", "kl_cov", "entropy-bonus"}


# ---------------------------------------------------------------------------------------------- per method


@pytest.mark.covers("sac-temperature")
def test_sac_temperature_drives_the_entropy_to_its_target():
    learned = sac_temperature_toy(target_entropy=1.0, steps=300)
    fixed = sac_temperature_toy(target_entropy=1.0, steps=300, learn_alpha=False)
    assert abs(learned["entropy"][-50:].mean() - 1.0) < 0.05
    assert fixed["entropy"][-1] < 0.1 and np.all(fixed["alpha"] == 0.01)
    assert learned["alpha"][0] == pytest.approx(0.01) and learned["alpha"][-1] > 0.1
    # the first controller step: H = log 8 > target, so alpha falls
    assert learned["alpha"][1] < learned["alpha"][0]
    fig = sac_temperature_figure(target_entropy=1.0, steps=50)
    np.testing.assert_allclose(fig.data[0].y, sac_temperature_toy(1.0, 50)["entropy"])


@pytest.mark.covers("safe")
def test_safe_penalty_is_gated_by_entropy():
    d = safe_penalty_curves(entropies=[0.0, 1.0, 3.9, 5.0], kl_excess=(0.2,), threshold=0.45)
    np.testing.assert_allclose(d["gate"], [20.0, 2 / 1.1, 0.5, 0.5])
    assert np.all(d[0.4] == 0)
    np.testing.assert_allclose(d[0.65], 0.1 * 0.2 ** 2 * d["gate"])
    assert len(safe_penalty_figure().data) == 4


@pytest.mark.covers("llds")
def test_llds_penalizes_only_fallen_tokens_of_fallen_preserved_responses():
    d = llds_toy()
    delta, pen = d["delta"], d["penalty"] > 0
    expected = (delta < 0) & (d["advantages"][:, None] >= 0) & d["fell"][:, None]
    assert np.array_equal(pen, expected) and pen.any()
    np.testing.assert_allclose(d["grad"], -expected.astype(float))  # d relu(old - logp) / d logp = -1 there
    assert d["fell"][1] == False and (delta[1] < 0).any()  # noqa: E712 - fell tokens, but the response rose
    assert len(llds_figure().data) == len(d["delta"])


@pytest.mark.covers("hapo-temperature")
def test_hapo_temperature_follows_the_sampler():
    d = hapo_temperature_curves(temperature=1.0, tau=0.05)
    np.testing.assert_allclose(d["T"], 1.0 * (1 + 0.05 * d["h_hat"]), rtol=1e-6)
    assert d["T"].min() == pytest.approx(0.95, abs=1e-6) and d["T"].max() == pytest.approx(1.05, abs=1e-6)
    assert np.all(np.diff(d["T"]) >= -1e-6)  # hotter with entropy
    assert np.all(d["T_bug"] >= 1.0 - 1e-6)  # the code's mapping never cools
    assert len(hapo_temperature_figure().data) == 4


@pytest.mark.covers("epo")
def test_epo_band_penalty_pushes_back_into_the_band():
    d = epo_band_curves(hbar=0.5, bands=((0.8, 1.2),), out_range_penalty=0.1, total=10)
    H, band = d["entropy"], d[(0.8, 1.2)]
    inside = (H > 0.4) & (H < 0.6)
    assert np.all(band["penalty"][inside] == 0) and np.all(band["grad"][inside] == 0)
    assert np.all(band["grad"][H < 0.4] == -0.1) and np.all(band["grad"][H > 0.6] == 0.1)
    np.testing.assert_allclose(band["penalty"][H > 0.6], 0.1 * (H[H > 0.6] - 0.6))
    assert set(np.unique(band["reference_bug"])) <= {0.0, 0.1}
    assert d["phase_weight"][0] == 1.0 and np.all(np.diff(d["phase_weight"]) <= 0)
    assert len(epo_band_figure().data) == 5
