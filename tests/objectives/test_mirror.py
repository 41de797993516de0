"""MDPO: the full-vocabulary KL and the mirror-descent surrogate."""
import pytest
import torch

from tests.helpers import D, grad
from workbench import ops
from workbench.objectives.mirror import full_vocab_kl, mdpo_surrogate
from workbench.objectives.ppo import ppo_clip


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
