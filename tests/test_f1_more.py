"""Clip-Cov / KL-Cov, MDPO surrogate, MiniRL loss, GiGPO advantage and T-PPO's extended GAE."""
import math

import pytest
import torch

from tests.helpers import make_batch, random_mask
from workbench import ops, registry
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.gigpo import gigpo, step_advantages, step_returns
from workbench.advantages.group import grpo
from workbench.advantages.truncated import egae, egae_value_mask
from workbench.objectives.entropy_cov import (clip_cov, clip_cov_selection, kl_cov, kl_cov_selection,
                                              token_covariance)
from workbench.objectives.minirl import first_order_gap, minirl_loss, staleness_mask
from workbench.objectives.mirror import full_vocab_kl, mdpo_surrogate
from workbench.schedules.mdpo import mdpo_inv_t
from workbench.objectives.ppo import ppo_clip
from workbench.values import value_loss

D = torch.float64


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


def cov_batch(seed, B=8, T=16, a_scale=2.0, scale=0.3):
    """Random batch whose covariances spread over (1, 5): logp in [-3, 0], |A| ~ 2."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=4)
    logp0 = -torch.rand(B, T, generator=g, dtype=D) * 3
    old = logp0 + torch.randn(B, T, generator=g, dtype=D) * scale
    A = (torch.randn(B, 1, generator=g, dtype=D) * a_scale).expand(B, T) * mask
    return logp0.clone().requires_grad_(True), old, A, mask


# ------------------------------------------------------------------------------------------ clip_cov


@pytest.mark.covers("clip_cov", "kl_cov")
def test_cov_registered_with_verl_defaults():
    c, k = registry.get("objective", "clip_cov"), registry.get("objective", "kl_cov")
    assert {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0, "eps_low": 0.2,
            "eps_high": 0.2}.items() <= c.defaults.items()
    assert {"kl_cov_ratio": 2e-4, "ppo_kl_coef": 0.1}.items() <= k.defaults.items()
    assert c.family == k.family == "entropy" and c.equation and k.equation


@pytest.mark.covers("clip_cov", "kl_cov")
def test_token_covariance_is_the_centred_product_over_valid_tokens():
    logp, _, A, mask = cov_batch(0)
    cov = token_covariance(logp, A, mask)
    v = mask > 0
    expected = (A[v] - A[v].mean()) * (logp.detach()[v] - logp.detach()[v].mean())
    assert torch.allclose(cov[v], expected, atol=1e-14)
    assert torch.all(torch.isneginf(cov[~v])) and not cov.requires_grad


@pytest.mark.covers("clip_cov")
def test_clip_cov_ratio_zero_without_min_one_is_ppo_clip():
    logp, old, A, mask = cov_batch(1)
    loss, m = clip_cov(logp, old, A, mask, clip_cov_ratio=0.0, min_one=False)
    ref, _ = ppo_clip(logp, old, A, mask)
    assert loss.item() == pytest.approx(ref.item(), abs=1e-15)
    assert torch.equal(grad(loss, logp), grad(ref, logp))
    assert m["clip_cov/detached"] == 0
    # verl's max(int(ratio N), 1) detaches one candidate even at ratio 0
    detached, cand = clip_cov_selection(logp, old, A, mask, clip_cov_ratio=0.0, min_one=True)
    assert cand.sum() > 0 and detached.sum() == 1


@pytest.mark.covers("clip_cov")
@pytest.mark.parametrize("ratio", [0.02, 0.1, 1.0])
def test_clip_cov_detaches_min_k_candidates_inside_band_and_not_ppo_clipped(ratio):
    logp, old, A, mask = cov_batch(2, scale=0.5)
    lb, ub = 1.0, 5.0
    detached, cand = clip_cov_selection(logp, old, A, mask, clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub)
    k = max(int(ratio * mask.sum()), 1)
    n_cand = int(cand.sum())
    assert n_cand >= 3 and int(detached.sum()) == min(k, n_cand)
    assert torch.all(cand[detached])
    cov = token_covariance(logp, A, mask)
    assert torch.all((cov[detached] > lb) & (cov[detached] < ub))
    r = torch.exp(logp.detach() - old)
    ppo_clipped = ((r > 1.2) & (A > 0)) | ((r < 0.8) & (A < 0))
    assert ppo_clipped[mask > 0].any()  # the exclusion is exercised
    assert not torch.any(detached & ppo_clipped) and not torch.any(cand & ppo_clipped)
    in_band = (mask > 0) & (cov > lb) & (cov < ub) & ~ppo_clipped
    assert torch.equal(cand, in_band)


@pytest.mark.covers("clip_cov")
def test_clip_cov_detached_tokens_have_zero_loss_and_gradient_others_are_ppo():
    logp, old, A, mask = cov_batch(3, scale=0.5)
    kw = dict(clip_cov_ratio=0.05, seed=7)
    loss, m = clip_cov(logp, old, A, mask, **kw)
    detached, _ = clip_cov_selection(logp, old, A, mask, **kw)
    ref, _ = ppo_clip(logp, old, A, mask)
    g, g_ref = grad(loss, logp), grad(ref, logp)
    assert detached.sum() > 1
    assert torch.all(g[detached] == 0) and torch.any(g_ref[detached] != 0)
    assert torch.equal(g[~detached], g_ref[~detached])
    assert m["clip_cov/detached"] == float(detached.sum())
    assert m["clip_cov/detached_frac"] == pytest.approx(float(detached.sum() / mask.sum()))


@pytest.mark.covers("clip_cov")
def test_clip_cov_seeded_selection_is_deterministic_and_uniform():
    logp, old, A, mask = cov_batch(4)
    kw = dict(clip_cov_ratio=0.03)
    a, cand = clip_cov_selection(logp, old, A, mask, seed=11, **kw)
    b, _ = clip_cov_selection(logp, old, A, mask, seed=11, **kw)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(clip_cov_selection(logp, old, A, mask, generator=g1, **kw)[0],
                       clip_cov_selection(logp, old, A, mask, generator=g2, **kw)[0])
    # global RNG untouched
    state = torch.get_rng_state()
    clip_cov(logp, old, A, mask, **kw)
    assert torch.equal(state, torch.get_rng_state())
    # statistical cross-check of randperm selection: every candidate picked with probability k / n
    gen = torch.Generator().manual_seed(0)
    n_draws = 400
    counts = sum(clip_cov_selection(logp, old, A, mask, generator=gen, **kw)[0].double() for _ in range(n_draws))
    n, k = int(cand.sum()), max(int(0.03 * mask.sum()), 1)
    assert 1 < k < n
    p = k / n
    freq = counts[cand] / n_draws
    assert torch.all(counts[~cand] == 0)
    assert float(freq.mean()) == pytest.approx(p, rel=1e-12)  # exactly k per draw
    assert float((freq - p).abs().max()) < 5 * math.sqrt(p * (1 - p) / n_draws)


# -------------------------------------------------------------------------------------------- kl_cov


@pytest.mark.covers("kl_cov")
def test_kl_cov_ratio_zero_is_the_unclipped_surrogate():
    logp, old, A, mask = cov_batch(5, scale=0.5)
    for min_one in (False, True):  # verl applies no penalty at ratio 0 even with its max(1, .)
        loss, m = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0, min_one=min_one)
        ref, _ = ppo_clip(logp, old, A, mask, eps_low=1e9, eps_high=1e9)
        assert loss.item() == pytest.approx(ref.item(), abs=1e-15)
        assert torch.allclose(grad(loss, logp), grad(ref, logp), atol=1e-16)
        assert m["kl_cov/penalized"] == 0
    expected = ops.masked_mean(-A * torch.exp(logp.detach() - old), mask)
    assert kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)[0].item() == pytest.approx(expected.item(), abs=1e-15)


@pytest.mark.covers("kl_cov")
@pytest.mark.parametrize("ratio", [1e-4, 0.05, 0.2])
def test_kl_cov_penalizes_exactly_the_top_k_covariance_tokens(ratio):
    logp, old, A, mask = cov_batch(6, scale=0.5)
    coef = 0.1
    loss, m = kl_cov(logp, old, A, mask, kl_cov_ratio=ratio, ppo_kl_coef=coef)
    ref, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)
    extra = grad(loss, logp) - grad(ref, logp)
    k = max(1, int(mask.sum() * ratio))
    penalized = extra != 0
    assert int(penalized.sum()) == k == m["kl_cov/penalized"]
    assert torch.equal(penalized, kl_cov_selection(logp, A, mask, kl_cov_ratio=ratio))
    cov = token_covariance(logp, A, mask)
    rest = cov[(mask > 0) & ~penalized]
    assert rest.numel() > 0 and float(cov[penalized].min()) >= float(rest.max())
    # the penalty pulls logp toward old: descent direction -extra has the sign of old - logp
    n = mask.sum()
    assert torch.allclose(extra[penalized], coef * torch.sign(logp.detach() - old)[penalized] / n, atol=1e-15)


@pytest.mark.covers("kl_cov")
def test_kl_cov_penalty_step_shrinks_abs_kl_only_on_penalized_tokens():
    logp, old, A, mask = cov_batch(8, scale=0.5)
    loss, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.1, ppo_kl_coef=0.1)
    surrogate, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)
    penalty_grad = grad(loss, logp) - grad(surrogate, logp)
    sel = kl_cov_selection(logp, A, mask, kl_cov_ratio=0.1)
    new = logp.detach() - 1e-2 * penalty_grad
    d_old, d_new = (logp.detach() - old).abs(), (new - old).abs()
    assert sel.sum() > 1
    assert torch.all(d_new[sel] < d_old[sel]) and torch.equal(d_new[~sel], d_old[~sel])


# ---------------------------------------------------------------------------------------------- mdpo


def toy_logits(seed, N=5, V=7, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(N, V, generator=g, dtype=D)
    cur = old + shift * torch.randn(N, V, generator=g, dtype=D)
    tokens = torch.randint(0, V, (N,), generator=g)
    return cur, old, tokens


def gather_logp(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[:, None]).squeeze(-1)


@pytest.mark.covers("mdpo")
def test_full_vocab_kl_matches_torch_distributions_and_is_nonnegative():
    p, q, _ = toy_logits(0, shift=1.0)
    ref = torch.distributions.kl_divergence(torch.distributions.Categorical(logits=p),
                                            torch.distributions.Categorical(logits=q))
    kl = full_vocab_kl(p, q, chunk=2)
    assert torch.allclose(kl, ref, atol=1e-13) and torch.all(kl >= 0) and kl.dtype == D
    assert torch.allclose(full_vocab_kl(p, p), torch.zeros(5, dtype=D), atol=1e-15)
    assert torch.allclose(full_vocab_kl(p.reshape(1, 5, 7), q.reshape(1, 5, 7), temperature=2.0),
                          full_vocab_kl(p / 2, q / 2)[None], atol=1e-15)


@pytest.mark.covers("mdpo")
@pytest.mark.parametrize("exact", [True, False])
def test_mdpo_at_theta_k_kl_and_its_gradient_vanish_first_step_is_unclipped_pg(exact):
    _, old_logits, tokens = toy_logits(1)
    logits = old_logits.clone().requires_grad_(True)
    logp, old = gather_logp(logits, tokens)[None], gather_logp(old_logits, tokens)[None]
    A, mask = torch.randn(1, 5, generator=torch.Generator().manual_seed(2), dtype=D), torch.ones(1, 5, dtype=D)
    kl = full_vocab_kl(logits, old_logits)[None] if exact else None
    loss, m = mdpo_surrogate(logp, old, A, mask, inv_t=3.0, kl_per_token=kl)
    kl_val = full_vocab_kl(logits, old_logits) if exact else 0.5 * (logp - old) ** 2
    assert float(kl_val.detach().abs().max()) < 1e-15 and m["mdpo/kl"] == pytest.approx(0.0, abs=1e-15)
    assert float(grad(kl_val.sum(), logits).abs().max()) < 1e-14
    pg = ops.aggregate(-A * torch.exp(logp - old), mask)
    assert loss.item() == pytest.approx(pg.item(), abs=1e-15)
    assert torch.allclose(grad(loss, logits), grad(pg, logits), atol=1e-15)
    assert torch.allclose(grad(loss, logits), grad(ppo_clip(logp, old, A, mask)[0], logits), atol=1e-15)


@pytest.mark.covers("mdpo")
def test_mdpo_inv_t_zero_is_the_unclipped_surrogate():
    logits, old_logits, tokens = toy_logits(3, shift=1.5)
    logits.requires_grad_(True)
    logp, old = gather_logp(logits, tokens)[None], gather_logp(old_logits, tokens)[None]
    A, mask = torch.tensor([[1.0, -1.0, 2.0, -0.5, 0.3]], dtype=D), torch.ones(1, 5, dtype=D)
    kl = full_vocab_kl(logits, old_logits)[None]
    loss, _ = mdpo_surrogate(logp, old, A, mask, inv_t=0.0, kl_per_token=kl)
    ref, m = ppo_clip(logp, old, A, mask, eps_low=1e9, eps_high=1e9)
    r = torch.exp(logp.detach() - old)
    assert bool(((r - 1).abs() > 0.2).any())  # PPO-clip(0.2) would clip here
    assert loss.item() == pytest.approx(ref.item(), abs=1e-15)
    assert torch.allclose(grad(loss, logits), grad(ref, logits), atol=1e-15)
    near, _ = mdpo_surrogate(logp, old, A, mask, inv_t=1e-9, kl_per_token=kl)
    assert near.item() == pytest.approx(ref.item(), abs=1e-8)


@pytest.mark.covers("mdpo")
def test_mdpo_larger_inv_t_gives_smaller_kl_after_m_steps_on_a_fixed_toy():
    g = torch.Generator().manual_seed(4)
    S, V, n = 3, 6, 32
    old_logits = torch.randn(S, V, generator=g, dtype=D)
    adv_table = torch.randn(S, V, generator=g, dtype=D)
    states = torch.arange(S).repeat_interleave(n)
    actions = torch.multinomial(torch.softmax(old_logits, -1), n, replacement=True, generator=g).flatten()
    A = adv_table[states, actions]
    A = ((A - A.mean()) / A.std())[None]  # advantages standardized per batch, as the reference
    mask = torch.ones_like(A)
    old = gather_logp(old_logits[states], actions)[None]
    final_kl = []
    for inv_t in (0.0, 0.5, 2.0, 8.0):
        theta = old_logits.clone()
        for _ in range(10):  # m plain gradient steps from theta_k (torch.optim's first call is slow)
            theta.requires_grad_(True)
            logits = theta[states]
            loss, _ = mdpo_surrogate(gather_logp(logits, actions)[None], old, A, mask, inv_t=inv_t,
                                     kl_per_token=full_vocab_kl(logits, old_logits[states])[None])
            theta = (theta - 0.5 * torch.autograd.grad(loss, theta)[0]).detach()
        final_kl.append(float(full_vocab_kl(theta.detach(), old_logits).mean()))
    assert final_kl[0] > 0.01
    assert all(a > b for a, b in zip(final_kl, final_kl[1:])), final_kl


@pytest.mark.covers("mdpo")
def test_mdpo_inv_t_schedule_matches_reference_and_is_guarded():
    K = 10
    # reference: lr_now = 1 - (iters_so_far - 1) / n_updates, iters_so_far = 0, 1, ...
    assert mdpo_inv_t(0, K) == pytest.approx(1 / (1 + 1 / K))
    assert mdpo_inv_t(K - 1, K) == pytest.approx(K / 2)
    seq = [mdpo_inv_t(k, K) for k in range(K)]
    assert all(a < b for a, b in zip(seq, seq[1:]))
    assert mdpo_inv_t(0, K, offset=0) == 1.0 and mdpo_inv_t(K - 1, K, offset=0) == pytest.approx(K)
    assert mdpo_inv_t(K, K, offset=0) == pytest.approx(K) and mdpo_inv_t(5 * K, K) == pytest.approx(K)
    with pytest.raises(ValueError):
        mdpo_inv_t(-1, K)
    with pytest.raises(ValueError):
        mdpo_surrogate(torch.zeros(1, 1, dtype=D), torch.zeros(1, 1, dtype=D), torch.ones(1, 1, dtype=D),
                       torch.ones(1, 1, dtype=D), inv_t=-1.0)


# -------------------------------------------------------------------------------------------- minirl


@pytest.mark.covers("minirl")
def test_minirl_on_policy_is_reinforce_with_group_mean_baseline():
    b = make_batch([1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9], [0, 0, 0, 0, 1, 1, 1], [2, 5, 3, 4, 1, 6, 2])
    A = grpo(b, scale="none")
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(b.mask.shape, generator=g, dtype=D)).requires_grad_(True)
    same = logp.detach()
    loss, m = minirl_loss(logp, same, same, A, b.mask)
    reinforce = ops.aggregate(-A * logp, b.mask, "seq-mean-token-mean")
    assert torch.allclose(grad(loss, logp), grad(reinforce, logp), atol=1e-15)
    assert loss.item() == pytest.approx(-float(ops.masked_mean(A, b.mask, -1).mean()), abs=1e-15)
    assert m["minirl/masked_frac"] == 0 and m["minirl/w_mean"] == pytest.approx(1.0)
    # per token: -A_i / (B |y_i|)
    expected = -A / (b.size * b.mask.sum(-1, keepdim=True))
    assert torch.allclose(grad(loss, logp), expected * b.mask, atol=1e-15)


@pytest.mark.covers("minirl")
def test_minirl_mask_zeroes_only_tokens_past_the_bound_in_the_advantage_direction():
    r = torch.linspace(0.5, 1.6, 23, dtype=D)
    logr = torch.log(r).repeat(2)[:, None]
    A = torch.cat([torch.ones(23), -torch.ones(23)]).to(D)[:, None]
    mask = torch.ones_like(A)
    logp = logr.clone().requires_grad_(True)
    old = torch.zeros_like(logr)
    mu = old + torch.linspace(-0.7, 0.7, 46, dtype=D)[:, None]  # mismatch: w != pi_theta/pi_old
    eps_low, eps_high = 0.2, 0.28
    loss, m = minirl_loss(logp, old, mu, A, mask, eps_low=eps_low, eps_high=eps_high, agg="token-mean")
    g = grad(loss, logp)
    rr = torch.exp(logr)
    past = ((A > 0) & (rr > 1 + eps_high)) | ((A < 0) & (rr < 1 - eps_low))
    assert past.any() and (~past).any()
    assert torch.all(g[past] == 0)
    w = torch.exp(logr - mu)
    assert torch.allclose(g[~past], (-w * A / A.numel())[~past], atol=1e-15)
    # tokens past the bound against A's direction keep their gradient
    against = ((A > 0) & (rr < 1 - eps_low)) | ((A < 0) & (rr > 1 + eps_high))
    assert against.any() and torch.all(g[against] != 0)
    # M depends on pi_theta / pi_old only, never on mu
    assert torch.equal(staleness_mask(logp, old, A, eps_low=eps_low, eps_high=eps_high), (~past).to(D))
    assert m["minirl/masked_frac"] == pytest.approx(float(past.double().mean()))


@pytest.mark.covers("minirl")
def test_first_order_gap_is_second_order_and_grows_like_T_delta_squared():
    mask_of = lambda T: torch.ones(1, T, dtype=D)  # noqa: E731
    # exact to second order: gap = e_2(delta) + O((T delta)^3)
    g = torch.Generator().manual_seed(0)
    delta = torch.randn(1, 12, generator=g, dtype=D) * 1e-3
    gap = first_order_gap(torch.log1p(delta), mask_of(12))
    e2 = (delta.sum() ** 2 - (delta ** 2).sum()) / 2
    err = float((gap - e2).abs())
    assert err <= float(delta.abs().sum()) ** 3 and err < 0.02 * abs(float(e2))
    # no error at all for one token; exact (1 + d)^T - 1 - T d for equal deltas (worst case T^2 d^2 / 2)
    assert float(first_order_gap(torch.log(torch.tensor([[1.3]], dtype=D)), mask_of(1)).abs()) < 1e-15
    for T, d in [(8, 0.01), (64, 0.001)]:
        gap = float(first_order_gap(torch.full((1, T), math.log1p(d), dtype=D), mask_of(T)))
        assert gap == pytest.approx((1 + d) ** T - 1 - T * d, rel=1e-9)
        assert gap == pytest.approx(T * (T - 1) / 2 * d * d, rel=0.25)
    # independent zero-mean deltas: RMS gap = sigma^2 sqrt(T (T - 1) / 2) ~ T sigma^2 / sqrt(2)
    for T, sigma in [(16, 1e-3), (64, 1e-3), (64, 4e-3), (256, 5e-4)]:
        d = torch.randn(2000, T, generator=g, dtype=D) * sigma
        rms = float(first_order_gap(torch.log1p(d), torch.ones(2000, T, dtype=D)).pow(2).mean().sqrt())
        assert rms / (sigma ** 2 * math.sqrt(T * (T - 1) / 2)) == pytest.approx(1.0, abs=0.1)
    # padding is ignored
    padded = torch.tensor([[0.1, -0.2, 9.0]], dtype=D)
    assert torch.allclose(first_order_gap(padded, torch.tensor([[1.0, 1.0, 0.0]], dtype=D)),
                          first_order_gap(padded[:, :2], mask_of(2)), atol=1e-15)


# --------------------------------------------------------------------------------------------- gigpo


def agent_batch(rewards, groups, steps, tokens_per_step=2):
    """Rows of len(steps[i]) steps with `tokens_per_step` policy tokens each, right-padded; turn ids per token."""
    n_max = max(steps)
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(rewards), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, n_max + 5))
    return b


REW = [1.0, 0.0, 1.0, 0.0, 0.5, 0.25]
GRP = [0, 0, 0, 1, 1, 1]
STEPS = [3, 2, 4, 1, 3, 2]


def shared_states():
    return [["s0", "a", "goal"], ["s0", "b"], ["s0", "a", "c", "goal"],
            ["t0"], ["t0", "x", "y"], ["t0", "x"]]


@pytest.mark.covers("gigpo")
def test_gigpo_registered_with_verl_agent_defaults():
    e = registry.get("advantage", "gigpo")
    assert {"omega": 1.0, "gamma": 0.95, "mode": "mean_std_norm", "eps": 1e-6}.items() <= e.defaults.items()
    assert e.confidence == "partial" and e.equation


@pytest.mark.covers("gigpo")
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_gigpo_without_repeated_states_is_the_episode_advantage(mode):
    b = agent_batch(REW, GRP, STEPS)
    unique = [[f"r{i}s{s}" for s in range(n)] for i, n in enumerate(STEPS)]
    step_r = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=D)
    A = gigpo(b, states=unique, step_rewards=step_r, omega=1.0, mode=mode)
    scale = "group" if mode == "mean_std_norm" else "none"
    assert torch.allclose(A, grpo(b, scale=scale), atol=1e-15)


@pytest.mark.covers("gigpo")
def test_gigpo_omega_zero_is_trajectory_grpo():
    b = agent_batch(REW, GRP, STEPS)
    assert torch.equal(gigpo(b, states=shared_states(), omega=0.0), grpo(b))


@pytest.mark.covers("gigpo")
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_gigpo_step_advantage_is_zero_mean_inside_each_anchor_group(mode):
    states = shared_states()
    step_r = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=D)
    G = step_returns(step_r, STEPS, 0.9)
    a_s = step_advantages(G, states, torch.tensor(GRP), mode=mode)
    groups = {}
    for i, row in enumerate(states):
        for s, st in enumerate(row):
            groups.setdefault((GRP[i], st), []).append(float(a_s[i, s]))
    assert any(len(v) >= 3 for v in groups.values())
    for key, vals in groups.items():
        assert sum(vals) == pytest.approx(0.0, abs=1e-12), key
        if len(vals) == 1:
            assert vals[0] == 0.0
    # the same state in two prompt groups is two anchor groups: "goal" is reached only in group 0
    assert a_s[0, 2] == pytest.approx(-float(a_s[2, 3]))


@pytest.mark.covers("gigpo")
def test_gigpo_hand_computed_example_and_token_broadcast():
    b = agent_batch([1.0, 0.0], [0, 0], [2, 2], tokens_per_step=3)
    states = [["s0", "s1"], ["s0", "s2"]]
    gamma = 0.5
    A = gigpo(b, states=states, gamma=gamma, omega=0.7)
    # episode: (1 - 0.5)/(std([1, 0]) + eps) = +-0.5/0.7071
    a_e = 0.5 / (math.sqrt(0.5) + 1e-6)
    # sparse default: R on the last step, G = [gamma R, R]; anchor "s0": G = [0.5, 0] -> +-a_e
    expected = torch.tensor([[a_e + 0.7 * a_e] * 3 + [a_e] * 3,
                             [-a_e - 0.7 * a_e] * 3 + [-a_e] * 3], dtype=D)
    assert torch.allclose(A, expected, atol=1e-12)
    assert torch.allclose(step_returns(torch.tensor([[0.0, 1.0], [0.0, 0.0]]), [2, 2], gamma),
                          torch.tensor([[0.5, 1.0], [0.0, 0.0]], dtype=D))


@pytest.mark.covers("gigpo")
def test_gigpo_validates_inputs_and_steps_mode_weights_by_trajectory_length():
    b = agent_batch(REW, GRP, STEPS)
    with pytest.raises(ValueError, match="turn id"):
        bad = agent_batch(REW, GRP, STEPS)
        bad.turn = bad.turn.clone()
        bad.turn[0, 0] = 7
        gigpo(bad, states=shared_states())
    with pytest.raises(TypeError, match="hashable"):
        gigpo(b, states=[[["list"]] * n for n in STEPS])
    with pytest.raises(ValueError, match="needs batch fields"):
        gigpo(make_batch(REW, GRP), states=shared_states())
    with pytest.warns(UserWarning, match="without anchor"):
        assert torch.equal(gigpo(make_batch(REW, GRP)), grpo(make_batch(REW, GRP)))
    A = gigpo(b, states=shared_states(), omega=0.0, episode_stats="steps")
    R, n = torch.tensor(REW[:3], dtype=D), torch.tensor(STEPS[:3], dtype=D)
    vals = R.repeat_interleave(n.long())
    assert float(A[0, 0]) == pytest.approx(float((R[0] - vals.mean()) / (vals.std() + 1e-6)), rel=1e-12)


# --------------------------------------------------------------------------------------------- t-ppo


def value_batch(seed, B=5, T=9):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=2)
    mask[0, 1] = 0.0 if mask[0].sum() > 3 else mask[0, 1]  # an interior observation token
    values = torch.randn(B, T, generator=g, dtype=D)
    rewards = torch.randn(B, T, generator=g, dtype=D) * mask * 0.3
    return rewards, values, mask


@pytest.mark.covers("t-ppo")
def test_egae_on_finished_responses_is_gae():
    rewards, values, mask = value_batch(0)
    finished = torch.tensor([True, False, True, False, True])
    adv, ret = egae(rewards, values, mask, finished, gamma=0.99, lam=0.95)
    ref_adv, ref_ret = gae_and_returns(rewards, values, mask, 0.99, 0.95)
    assert torch.equal(adv[finished], ref_adv[finished]) and torch.equal(ret[finished], ref_ret[finished])
    assert not torch.allclose(adv[~finished], ref_adv[~finished])
    all_adv, _ = egae(rewards, values, mask, torch.ones(5, dtype=torch.bool), gamma=0.99, lam=0.95)
    assert torch.equal(all_adv, ref_adv)


@pytest.mark.covers("t-ppo")
def test_egae_truncated_gamma_lambda_one_telescopes_to_last_value_minus_value():
    _, values, mask = value_batch(1)
    adv, ret = egae(torch.zeros_like(values), values, mask, torch.zeros(5, dtype=torch.bool), gamma=1.0, lam=1.0)
    for i in range(5):
        valid = torch.nonzero(mask[i]).flatten()
        v_last = values[i, valid[-1]]
        assert torch.allclose(adv[i, valid], v_last - values[i, valid], atol=1e-14)
        assert torch.allclose(ret[i, valid], v_last.expand(len(valid)), atol=1e-14)


@pytest.mark.covers("t-ppo")
def test_egae_matches_the_explicit_truncated_sum():
    rewards, values, mask = value_batch(2)
    gamma, lam = 0.9, 0.8
    adv, _ = egae(rewards, values, mask, torch.zeros(5, dtype=torch.bool), gamma=gamma, lam=lam)
    for i in range(5):
        idx = torch.nonzero(mask[i]).flatten().tolist()
        v = [float(values[i, t]) for t in idx] + [float(values[i, idx[-1]])]  # V(s_l) := V(s_{l-1})
        r = [float(rewards[i, t]) for t in idx]
        delta = [r[j] + gamma * v[j + 1] - v[j] for j in range(len(idx))]
        for j, t in enumerate(idx):
            expected = sum((gamma * lam) ** k * delta[j + k] for k in range(len(idx) - j))
            assert float(adv[i, t]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.covers("t-ppo")
def test_value_loss_ignores_truncated_unfinished_responses():
    rewards, values, mask = value_batch(3)
    finished = torch.tensor([True, False, True, False, False])
    _, returns = egae(rewards, values, mask, finished, gamma=1.0, lam=0.95)
    v = values.clone().requires_grad_(True)
    vmask = egae_value_mask(mask, finished)
    loss, _ = value_loss(v, values, returns, vmask, clip_eps=None)
    gv = grad(loss, v)
    assert torch.all(gv[~finished] == 0) and torch.any(gv[finished] != 0)
    assert torch.equal(vmask[finished], mask[finished]) and torch.all(vmask[~finished] == 0)


@pytest.mark.covers("t-ppo")
def test_registered_t_ppo_equals_gae_when_nothing_is_truncated():
    from workbench.advantages.gae import gae, gae_targets
    from workbench.advantages.truncated import truncated_gae, truncated_gae_targets
    from workbench.batch import RolloutBatch

    b = RolloutBatch.from_rewards([1.0, 0.0, 0.5], [0, 0, 1], [3, 2, 4])
    b.values = torch.randn(b.mask.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * b.mask
    b.truncated = torch.zeros(3, dtype=torch.bool)
    assert torch.allclose(truncated_gae(b), gae(b))
    assert torch.allclose(truncated_gae_targets(b)[0], gae_targets(b)[0])
    b.truncated = torch.tensor([True, False, False])
    returns, value_mask = truncated_gae_targets(b)
    assert torch.all(value_mask[0] == 0) and torch.equal(value_mask[1:], b.mask[1:])
