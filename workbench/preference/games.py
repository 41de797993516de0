"""Toy preference games over K responses: oracles, exact equilibria and exact policy dynamics (catalog §0.5).

A preference oracle is a K×K matrix P[i, j] = Pr(y_i ≻ y_j) with P + Pᵀ = 1 (diagonal ½). It defines the
symmetric constant-sum game with payoff P(π ≻ π') = πᵀ P π' and value ½. Oracles:

- `bradley_terry(scores)`: P = σ(s_i − s_j) (transitive; its Nash is the best response, a pure strategy).
- `rock_paper_scissors(strength, n)`: cyclic, i beats the (n − 1)/2 responses before it with probability
  ½ + strength/2 (n = 3: paper ≻ rock ≻ scissors ≻ paper); Nash = uniform.
- `random_intransitive(K, seed)`: random P without a Condorcet winner, so its Nash is mixed.

`nash_equilibrium(P)` is exact (scipy is not installed, so no LP solver: support enumeration instead — for each
support S solve the indifference system (P − ½)_SS π_S = 0, Σ π_S = 1 and keep the first π ≥ 0 that no response
beats, i.e. max_y P(y ≻ π) = ½; exact up to float64 round-off, K ≤ 10). `regularized_nash(P, ref, beta)` solves
π = softmax(log π_ref + Pπ/β), the β-KL-regularized equilibrium, by Newton's method with a duality-gap certificate.

Dynamics on a categorical policy (softmax of logits over the K responses): `sppo_iterate`, `inpo_iterate`,
`nash_mp_iterate` and `dpo_iterate` each build the EXACT expectation of the registered loss (`sppo`, `inpo`,
`nash-mp`, `online-dpo`) — every pair of responses weighted by its sampling probability and, where the method
labels pairs, by the oracle's probability of each labelling — and minimize it over the logits by a (saddle-free)
Newton method started at the previous iterate (`PairObjective`). `spo_iterate` takes an exact policy-gradient
step on the expected `spo-minimax` reward (all K^n groups enumerated). No sampling anywhere. Closed forms of the
idealized updates (`exp_weights_step`, `omd_step`, `mirror_descent_step`, `mirror_prox_step`) are given for
comparison; `trajectory` iterates any of them.
"""
from __future__ import annotations

import itertools
from typing import Callable

import torch

from workbench import registry
from workbench.preference.selfplay import spo_minimax

D = torch.float64
MAX_SUPPORT_ENUMERATION = 10


# ---------------------------------------------------------------------------------------------- oracles


def check_preference_matrix(P, *, atol: float = 1e-12) -> torch.Tensor:
    """P as a float64 [K, K] tensor; ValueError unless square, K ≥ 2, finite, in [0, 1] and P + Pᵀ = 1."""
    P = torch.as_tensor(P, dtype=D)
    if P.dim() != 2 or P.shape[0] != P.shape[1] or P.shape[0] < 2:
        raise ValueError(f"a preference matrix is [K, K] with K >= 2, got shape {tuple(P.shape)}")
    if not bool(torch.isfinite(P).all()):
        raise ValueError("preference matrix has NaN/inf entries")
    if bool((P < 0).any()) or bool((P > 1).any()):
        raise ValueError(f"preference probabilities must lie in [0, 1]; got min {float(P.min())}, max {float(P.max())}")
    gap = float((P + P.T - 1).abs().max())
    if gap > atol:
        raise ValueError(f"preference matrix must satisfy P + P^T = 1 (Pr(i ≻ j) + Pr(j ≻ i) = 1, diagonal 1/2); "
                         f"largest violation {gap:.3g}")
    return P


def check_policy(policy, K: int, *, name: str = "policy", positive: bool = False) -> torch.Tensor:
    """A distribution over K responses as float64 [K]; ValueError otherwise (`positive`: full support)."""
    pi = torch.as_tensor(policy, dtype=D)
    if pi.shape != (K,):
        raise ValueError(f"{name} must be a distribution over the K={K} responses, got shape {tuple(pi.shape)}")
    if not bool(torch.isfinite(pi).all()) or bool((pi < 0).any()) or abs(float(pi.sum()) - 1) > 1e-9:
        raise ValueError(f"{name} must be non-negative and sum to 1, got {pi.tolist()}")
    if positive and bool((pi <= 0).any()):
        raise ValueError(f"{name} needs full support (log-probs of every response enter the loss), got {pi.tolist()}")
    return pi


def bradley_terry(scores) -> torch.Tensor:
    """Transitive oracle P[i, j] = σ(s_i − s_j)."""
    s = torch.as_tensor(scores, dtype=D)
    if s.dim() != 1 or s.numel() < 2 or not bool(torch.isfinite(s).all()):
        raise ValueError(f"bradley_terry needs >= 2 finite scores [K], got {s.tolist() if s.dim() <= 1 else s.shape}")
    return torch.sigmoid(s[:, None] - s[None, :])


def rock_paper_scissors(strength: float = 1.0, n: int = 3) -> torch.Tensor:
    """Cyclic oracle over n (odd) responses: i beats i − d (mod n), d = 1..(n−1)/2, with probability ½ + strength/2.

    n = 3 with responses (rock, paper, scissors): paper ≻ rock, scissors ≻ paper, rock ≻ scissors. strength ∈ (0, 1]
    (1: deterministic wins). Every response wins against half of the others, so the unique Nash is uniform.
    """
    if not 0 < strength <= 1:
        raise ValueError(f"rock_paper_scissors strength must lie in (0, 1], got {strength}")
    if n < 3 or n % 2 == 0:
        raise ValueError(f"rock_paper_scissors needs an odd number n >= 3 of responses, got {n}")
    P = torch.full((n, n), 0.5, dtype=D)
    for i in range(n):
        for d in range(1, (n - 1) // 2 + 1):
            j = (i - d) % n
            P[i, j], P[j, i] = 0.5 + strength / 2, 0.5 - strength / 2
    return P


def random_intransitive(K: int = 3, *, seed: int = 0, max_tries: int = 10_000) -> torch.Tensor:
    """Random oracle P = ½ + A (A antisymmetric, off-diagonal entries uniform in (−½, ½)) with no Condorcet
    winner — no response beats every other — so no Bradley–Terry model fits it and its Nash is mixed."""
    if K < 3:
        raise ValueError(f"an intransitive preference needs K >= 3 responses, got {K}")
    g = torch.Generator().manual_seed(seed)
    iu = torch.triu_indices(K, K, 1)
    for _ in range(max_tries):
        A = torch.zeros(K, K, dtype=D)
        A[iu[0], iu[1]] = torch.rand(iu.shape[1], generator=g, dtype=D) - 0.5
        A = A - A.T
        P = 0.5 + A
        beats_all = ((P > 0.5) | torch.eye(K, dtype=torch.bool)).all(1)
        if not bool(beats_all.any()):
            return P
    raise RuntimeError(f"no intransitive matrix found in {max_tries} draws")  # pragma: no cover


def win_rate(P, policy) -> torch.Tensor:
    """P(y ≻ π) = (P @ π)_y for every response y (policy [K] or a batch [.., K])."""
    P = check_preference_matrix(P)
    pi = torch.as_tensor(policy, dtype=D)
    if pi.dim() == 0 or pi.shape[-1] != P.shape[0]:
        raise ValueError(f"policy must be a distribution over the K={P.shape[0]} responses ([K] or [.., K]), "
                         f"got shape {tuple(pi.shape)}")
    if (not bool(torch.isfinite(pi).all()) or bool((pi < 0).any())
            or float((pi.sum(-1) - 1).abs().max()) > 1e-9):
        raise ValueError("policy must be non-negative and sum to 1 over the responses")
    return pi @ P.T


def exploitability(P, policy) -> float:
    """max_y P(y ≻ π) − ½ ≥ 0: how much the best response beats π; 0 exactly at a Nash equilibrium."""
    return float(win_rate(P, policy).max()) - 0.5


def sample_oracle(P, i, j, generator: torch.Generator | None = None) -> torch.Tensor:
    """Stochastic labels: 1.0 where response i is preferred to response j (probability P[i, j]), else 0.0.

    `i`, `j` are ints or integer tensors of the same shape; `generator` a torch.Generator for reproducibility.
    """
    P = check_preference_matrix(P)
    i, j = torch.as_tensor(i), torch.as_tensor(j)
    if i.shape != j.shape or i.is_floating_point() or j.is_floating_point():
        raise ValueError("sample_oracle needs integer response indices i, j of the same shape")
    K = P.shape[0]
    if bool(((i < 0) | (i >= K) | (j < 0) | (j >= K)).any()):
        raise ValueError(f"response indices must lie in [0, {K})")
    u = torch.rand(i.shape, generator=generator, dtype=D)
    return (u < P[i, j]).to(D)


def kl(p, q) -> float:
    """KL(p ‖ q) = Σ p log(p/q) (0 log 0 = 0)."""
    p, q = torch.as_tensor(p, dtype=D), torch.as_tensor(q, dtype=D)
    m = p > 0
    return float((p[m] * (p[m].log() - q[m].log())).sum())


# ------------------------------------------------------------------------------------------- equilibria


def nash_equilibrium(P, *, tol: float = 1e-10) -> torch.Tensor:
    """A mixed Nash equilibrium π* of the symmetric constant-sum game P (max_y P(y ≻ π*) = ½), exact.

    Support enumeration (no LP solver is available: scipy is not installed): for supports S of increasing size,
    solve (P − ½)_SS π_S = 0 with Σ π_S = 1 by least squares, keep it if the system is consistent, π_S ≥ 0 and
    exploitability(π) ≤ tol. At a Nash every supported response wins exactly ½ (Σ π_y (P(y ≻ π) − ½) = 0 with
    every term ≤ 0), so the enumeration misses none. The smallest-support equilibrium is returned (generic
    intransitive games have exactly one). K ≤ 10.
    """
    P = check_preference_matrix(P)
    K = P.shape[0]
    if K > MAX_SUPPORT_ENUMERATION:
        raise ValueError(f"nash_equilibrium enumerates supports and is meant for K <= {MAX_SUPPORT_ENUMERATION}, "
                         f"got K={K}")
    A = P - 0.5
    for size in range(1, K + 1):
        for S in itertools.combinations(range(K), size):
            idx = torch.tensor(S)
            M = torch.cat([A[idx][:, idx], torch.ones(1, size, dtype=D)], 0)
            rhs = torch.zeros(size + 1, 1, dtype=D)
            rhs[-1] = 1.0
            x = torch.linalg.lstsq(M, rhs, driver="gelsd").solution[:, 0]
            if float((M @ x - rhs[:, 0]).abs().max()) > tol or bool((x < -tol).any()):
                continue
            pi = torch.zeros(K, dtype=D)
            pi[idx] = x.clamp(min=0)
            pi = pi / pi.sum()
            if exploitability(P, pi) <= tol:
                return pi
    raise RuntimeError("support enumeration found no equilibrium (tolerance too tight?)")  # pragma: no cover


def regularized_gap(P, policy, ref, beta: float) -> float:
    """Duality gap of the β-regularized game at the symmetric profile (π, π):
    max_π' [P(π' ≻ π) − β KL(π'‖π_ref)] − [½ − β KL(π‖π_ref)] = β log Σ π_ref exp(Pπ/β) − ½ + β KL(π‖π_ref) ≥ 0,
    zero exactly at the regularized Nash."""
    P = check_preference_matrix(P)
    pi, ref = torch.as_tensor(policy, dtype=D), torch.as_tensor(ref, dtype=D)
    best = beta * float(torch.logsumexp(ref.log() + (P @ pi) / beta, 0))
    return best - 0.5 + beta * kl(pi, ref)


def regularized_nash(P, ref=None, beta: float = 0.1, *, tol: float = 1e-12, max_iter: int = 100) -> torch.Tensor:
    """π*_β, the unique symmetric equilibrium of max_π min_π' P(π ≻ π') − β KL(π‖π_ref) + β KL(π'‖π_ref):
    the solution of π = softmax(log π_ref + Pπ/β). Newton's method on the logits with backtracking, continued
    from β = 1 down to small β (warm starts); the result is certified by `regularized_gap` ≤ tol. ref None:
    uniform."""
    P = check_preference_matrix(P)
    K = P.shape[0]
    ref = torch.full((K,), 1.0 / K, dtype=D) if ref is None else check_policy(ref, K, name="ref", positive=True)
    if not beta > 0:
        raise ValueError(f"regularized_nash needs beta > 0, got {beta}")
    centre = torch.eye(K, dtype=D) - 1.0 / K

    def residual(z, b):
        r = torch.log_softmax(z, 0) - ref.log() - (P @ torch.softmax(z, 0)) / b
        return r - r.mean()

    def solve(z, b):
        r = residual(z, b)
        for _ in range(max_iter):
            if float(r.abs().max()) < 1e-14 * max(1.0, 1.0 / b):  # round-off level of P π / β
                break
            pi = torch.softmax(z, 0)
            S = torch.diag(pi) - torch.outer(pi, pi)
            J = centre @ (torch.eye(K, dtype=D) - pi[None, :] - P @ S / b)
            step = -torch.linalg.lstsq(J, r[:, None], driver="gelsd").solution[:, 0]
            t = 1.0
            while t > 1e-12:
                r_new = residual(z + t * step, b)
                if float(r_new.norm()) < (1 - 1e-4 * t) * float(r.norm()):
                    break
                t /= 2
            else:
                break  # no further decrease possible at this precision
            z, r = z + t * step, r_new
        return z

    z = ref.log().clone()
    b = max(float(beta), 1.0)
    while b > beta:
        z = solve(z, b)
        b = max(b / 4, float(beta))
    pi = torch.softmax(solve(z, float(beta)), 0)
    gap = regularized_gap(P, pi, ref, beta)
    if gap > tol:
        raise RuntimeError(f"regularized_nash did not converge (gap {gap:.3g})")  # pragma: no cover
    return pi


# ------------------------------------------------------------------------------ closed-form idealized steps


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, 0)


def exp_weights_step(P, pi, *, eta: float = 1.0) -> torch.Tensor:
    """SPPO's idealized update π_{t+1}(y) ∝ π_t(y) exp(η P(y ≻ π_t)) (multiplicative weights / Hedge)."""
    P = check_preference_matrix(P)
    pi = check_policy(pi, P.shape[0], positive=True)
    return _softmax(pi.log() + eta * (P @ pi))


def omd_step(P, pi, ref=None, *, eta: float = 1.0, tau: float = 0.5) -> torch.Tensor:
    """INPO's OMD step π_{t+1} ∝ π_t^{1−τ/η} π_ref^{τ/η} exp(P(y ≻ π_t)/η) (η here is INPO's η = `beta`)."""
    P, pi, ref = _game(P, pi, ref)
    return _softmax((1 - tau / eta) * pi.log() + (tau / eta) * ref.log() + (P @ pi) / eta)


def _prox(P, centre, opponent, ref, beta, eta):
    return _softmax((centre.log() + eta * beta * ref.log() + eta * (P @ opponent)) / (1 + eta * beta))


def mirror_descent_step(P, pi, ref=None, *, beta: float = 0.1, eta: float = 1.0) -> torch.Tensor:
    """One KL-prox mirror-descent step on the β-regularized game:
    log π ∝ [log π^k + ηβ log π_ref + η P(y ≻ π^k)]/(1 + ηβ)."""
    P, pi, ref = _game(P, pi, ref)
    return _prox(P, pi, pi, ref, beta, eta)


def mirror_prox_step(P, pi, ref=None, *, beta: float = 0.1, eta: float = 1.0, return_half: bool = False):
    """Mirror prox (extragradient): half step against π^k, full step from centre π^k against π^{k+½}."""
    P, pi, ref = _game(P, pi, ref)
    half = _prox(P, pi, pi, ref, beta, eta)
    full = _prox(P, pi, half, ref, beta, eta)
    return (full, half) if return_half else full


def _game(P, pi, ref):
    P = check_preference_matrix(P)
    K = P.shape[0]
    pi = check_policy(pi, K, positive=True)
    ref = torch.full((K,), 1.0 / K, dtype=D) if ref is None else check_policy(ref, K, name="ref", positive=True)
    return P, pi, ref


# ------------------------------------------------------------------ exact dynamics through registered losses


class PairObjective:
    """E(z) = Σ_p weight_p · ℓ_p(log π_z(y_w), log π_z(y_l)) for a registered loss that is a mean of per-pair terms.

    One batched call of the loss on the M pairs gives L = (1/M) Σ_p ℓ_p; since pairs do not interact, M·∂L/∂c_p
    and the 2×2 blocks M·∂²L/∂(c_p, r_p)² are the per-pair derivatives, which the chain rule through
    log π_z = z − logsumexp z turns into the exact gradient and Hessian of E over the logits z.
    `value` evaluates E itself (one loss call per pair, differentiable); the tests check these derivatives
    against autograd through it, for every loss used here.
    """

    def __init__(self, loss_fn, pairs, ref_logp: torch.Tensor, per_pair: dict | None = None, **kw):
        self.loss_fn, self.ref_logp, self.kw = loss_fn, ref_logp, kw
        self.w = torch.tensor([p[0] for p in pairs], dtype=torch.long)
        self.l = torch.tensor([p[1] for p in pairs], dtype=torch.long)
        self.weight = torch.tensor([p[2] for p in pairs], dtype=D)
        self.per_pair = per_pair or {}
        self.K = ref_logp.shape[0]

    def _call(self, c, r):
        extra = {name: values(self.w, self.l) for name, values in self.per_pair.items()}
        loss, _ = self.loss_fn(c, r, self.ref_logp[self.w], self.ref_logp[self.l], **self.kw, **extra)
        return loss

    def derivatives(self, z: torch.Tensor, hessian: bool = True):
        a = torch.log_softmax(z, 0).detach()
        pi = a.exp()
        c = a[self.w].clone().requires_grad_(True)
        r = a[self.l].clone().requires_grad_(True)
        M = len(self.w)
        loss = self._call(c, r)
        gc, gr = torch.autograd.grad(loss, (c, r), create_graph=hessian, allow_unused=True)
        gc = torch.zeros_like(c) if gc is None else gc
        gr = torch.zeros_like(r) if gr is None else gr
        Ga = (torch.zeros(self.K, dtype=D).index_add(0, self.w, self.weight * M * gc.detach())
              .index_add(0, self.l, self.weight * M * gr.detach()))
        grad = Ga - pi * Ga.sum()
        if not hessian:
            return grad
        blocks = {}
        for name, g in (("c", gc), ("r", gr)):
            if g.requires_grad:
                dc, dr = torch.autograd.grad(g.sum(), (c, r), retain_graph=True, allow_unused=True)
            else:
                dc = dr = None
            blocks[name] = (torch.zeros_like(c) if dc is None else dc * M,
                            torch.zeros_like(r) if dr is None else dr * M)
        Ha = torch.zeros(self.K, self.K, dtype=D)
        wt = self.weight
        Ha.index_put_((self.w, self.w), wt * blocks["c"][0], accumulate=True)
        Ha.index_put_((self.w, self.l), wt * blocks["c"][1], accumulate=True)
        Ha.index_put_((self.l, self.w), wt * blocks["r"][0], accumulate=True)
        Ha.index_put_((self.l, self.l), wt * blocks["r"][1], accumulate=True)
        J = torch.eye(self.K, dtype=D) - pi[None, :]
        S = torch.diag(pi) - torch.outer(pi, pi)
        H = J.T @ Ha @ J - Ga.sum() * S
        return grad, 0.5 * (H + H.T)

    def value(self, z: torch.Tensor) -> torch.Tensor:
        """E(z), one loss call per pair (differentiable)."""
        a = torch.log_softmax(z, 0)
        total = a.new_zeros(())
        for p in range(len(self.w)):
            w, l = self.w[p:p + 1], self.l[p:p + 1]
            extra = {name: values(w, l) for name, values in self.per_pair.items()}
            loss, _ = self.loss_fn(a[w], a[l], self.ref_logp[w], self.ref_logp[l], **self.kw, **extra)
            total = total + self.weight[p] * loss
        return total

    def argmin(self, z0: torch.Tensor, *, max_iter: int = 60, step_tol: float = 1e-13, decrement_tol: float = 1e-26,
               grad_tol: float = 1e-10):
        """Saddle-free Newton from z0 with a line search on the directional derivative; returns log-probs.

        Stops when the Newton step or the predicted decrease is negligible. Hessian eigen-directions with
        |λ| ≤ 1e-12·max|λ| (the constant shift z + c, and responses whose sampling weight is negligible) are left
        unchanged. RuntimeError unless the final gradient is ≈ 0.
        """
        z = torch.log_softmax(z0.detach().to(D), 0)
        for _ in range(max_iter):
            g, H = self.derivatives(z)
            lam, V = torch.linalg.eigh(H)
            keep = lam.abs() > 1e-12 * max(float(lam.abs().max()), 1e-300)
            step = -(V[:, keep] @ ((V.T @ g)[keep] / lam[keep].abs()))
            d0 = float(g @ step)  # −(Newton decrement)²: the predicted decrease, times 2
            if float(step.abs().max()) < step_tol or -d0 < decrement_tol:
                break
            t, d1 = 1.0, float(self.derivatives(z + step, hessian=False) @ step)
            if d1 > 0.5 * abs(d0):  # overshot the 1-D minimum: bisect the directional derivative on [0, 1]
                lo, hi = 0.0, 1.0
                for _ in range(40):
                    t = 0.5 * (lo + hi)
                    dt = float(self.derivatives(z + t * step, hessian=False) @ step)
                    if abs(dt) <= 0.5 * abs(d0):
                        break
                    lo, hi = (t, hi) if dt < 0 else (lo, t)
            z = torch.log_softmax(z + t * step, 0)
        g = self.derivatives(z, hessian=False)
        scale = float(self.weight.sum()) * max(1.0, float(z.abs().max()))
        if float(g.abs().max()) > grad_tol * scale:
            raise RuntimeError(f"exact policy update did not converge (gradient {float(g.abs().max()):.3g})")
        return z


def labelled_pairs(P: torch.Tensor, mu: torch.Tensor, *, min_weight: float = 0.0) -> list[tuple[int, int, float]]:
    """(y_w, y_l, weight) for y, y' ~ μ ⊗ μ (y ≠ y'), labelled y_w = y with probability P[y, y']:
    weight = μ(y_w) μ(y_l) P[y_w, y_l]. Identical draws carry no preference and are left out."""
    K = P.shape[0]
    return [(w, l, float(mu[w] * mu[l] * P[w, l])) for w in range(K) for l in range(K)
            if w != l and float(mu[w] * mu[l] * P[w, l]) > min_weight]


def sppo_objective(P, pi, *, eta: float = 1.0) -> PairObjective:
    """Exact expectation of the registered `sppo` loss at iterate π_t: pairs y, y' ~ π_t ⊗ π_t (y_w the one with
    the higher win rate; identical draws included, since SPPO regresses each response separately), reference
    π_t, win rates the exact P̂(y ≻ π_t) = (P π_t)_y, β = 1/η."""
    P = check_preference_matrix(P)
    K = P.shape[0]
    pi = check_policy(pi, K, positive=True)
    wr = P @ pi
    pairs = []
    for i in range(K):
        for j in range(i, K):
            w, l = (i, j) if wr[i] >= wr[j] else (j, i)
            pairs.append((w, l, float(pi[i] * pi[j] * (1 if i == j else 2))))
    return PairObjective(registry.get("preference", "sppo").fn, pairs, pi.log(),
                         {"chosen_winrate": lambda w, l: wr[w], "rejected_winrate": lambda w, l: wr[l]},
                         beta=1.0 / eta)


def sppo_iterate(P, pi, *, eta: float = 1.0) -> torch.Tensor:
    """π_{t+1} = argmin over the categorical policy of `sppo_objective` (started at π_t). Its idealized form
    is `exp_weights_step` (same fixed points; SPPO replaces the normalizer log Z by η/2)."""
    return sppo_objective(P, pi, eta=eta).argmin(torch.as_tensor(pi, dtype=D).log()).exp()


def inpo_objective(P, pi, ref=None, *, eta: float = 1.0, tau: float = 0.5) -> PairObjective:
    """Exact expectation of the registered `inpo` loss (beta = η, tau = τ): pairs y, y' ~ π_t labelled by the
    oracle, prev = π_t, ref = π_ref (uniform if None)."""
    P, pi, ref = _game(P, pi, ref)
    prev = pi.log()
    return PairObjective(registry.get("preference", "inpo").fn, labelled_pairs(P, pi), ref.log(),
                         {"prev_chosen_logp": lambda w, l: prev[w], "prev_rejected_logp": lambda w, l: prev[l]},
                         beta=eta, tau=tau)


def inpo_iterate(P, pi, ref=None, *, eta: float = 1.0, tau: float = 0.5) -> torch.Tensor:
    """π_{t+1} = argmin of `inpo_objective`; equals the closed-form `omd_step`."""
    return inpo_objective(P, pi, ref, eta=eta, tau=tau).argmin(torch.as_tensor(pi, dtype=D).log()).exp()


def nash_mp_objective(P, centre, opponent, ref=None, *, beta: float = 0.1, eta: float = 1.0) -> PairObjective:
    """Exact expectation of the registered `nash-mp` loss for one prox step: pairs from `opponent` labelled by
    the oracle, prox centre π^k = `centre` (prev), ref = π_ref (uniform if None)."""
    P, centre, ref = _game(P, centre, ref)
    opponent = check_policy(opponent, P.shape[0], name="opponent")
    prev = centre.log()
    return PairObjective(registry.get("preference", "nash-mp").fn, labelled_pairs(P, opponent), ref.log(),
                         {"prev_chosen_logp": lambda w, l: prev[w], "prev_rejected_logp": lambda w, l: prev[l]},
                         beta=beta, eta=eta)


def nash_mp_iterate(P, pi, ref=None, *, beta: float = 0.1, eta: float = 1.0, return_half: bool = False):
    """One Nash-MP (mirror-prox) iteration through the registered `nash-mp` loss, exact expectations:
    half step = argmin with pairs from π^k, full step = argmin with pairs from π^{k+½}, both with prox centre
    π^k. Equals the closed-form `mirror_prox_step`."""
    start = torch.as_tensor(pi, dtype=D).log()
    half = nash_mp_objective(P, pi, pi, ref, beta=beta, eta=eta).argmin(start).exp()
    full = nash_mp_objective(P, pi, half, ref, beta=beta, eta=eta).argmin(start).exp()
    return (full, half) if return_half else full


def dpo_objective(P, pi, ref=None, *, beta: float = 1.0, loss_type: str = "sigmoid", pairs_from=None) -> PairObjective:
    """Exact expectation of the registered `online-dpo` loss: pairs y, y' ~ π_t (or `pairs_from`, e.g. π_ref
    for offline DPO) labelled by the oracle, reference π_ref fixed (uniform if None)."""
    P, pi, ref = _game(P, pi, ref)
    mu = pi if pairs_from is None else check_policy(pairs_from, P.shape[0], name="pairs_from")
    return PairObjective(registry.get("preference", "online-dpo").fn, labelled_pairs(P, mu), ref.log(),
                         beta=beta, loss_type=loss_type)


def dpo_iterate(P, pi, ref=None, *, beta: float = 1.0, loss_type: str = "sigmoid", pairs_from=None) -> torch.Tensor:
    """Online DPO step: argmin of `dpo_objective` (started at π_t).

    The minimizer is the Bradley–Terry fit of P weighted by the pair distribution: log π = log π_ref + g/β with
    σ(g_w − g_l) ≈ P[w, l] (sigmoid) — for an intransitive P no BT model is consistent, so the fit, and the
    policy, depend on which pairs were sampled, and the online iterates chase each other instead of settling at
    the Nash. Oracle probabilities of exactly 0/1 can make the fit unbounded (a pair the BT model can separate):
    use strength < 1; the update then raises RuntimeError instead of returning a non-minimizer.
    """
    return dpo_objective(P, pi, ref, beta=beta, loss_type=loss_type, pairs_from=pairs_from).argmin(
        torch.as_tensor(pi, dtype=D).log()).exp()


def spo_expected_rewards(P, pi, *, n: int = 3) -> torch.Tensor:
    """E[r | response y] of the registered `spo-minimax` reward for groups of n iid draws from π, exact:
    every one of the K^n groups is scored (its judgments are the oracle's probabilities) and weighted by its
    probability. Equals P(y ≻ π) = (Pπ)_y for any n ≥ 2."""
    P = check_preference_matrix(P)
    K = P.shape[0]
    pi = check_policy(pi, K)
    if n < 2:
        raise ValueError(f"spo needs groups of n >= 2 trajectories, got {n}")
    groups = torch.tensor(list(itertools.product(range(K), repeat=n)))  # [K^n, n]
    prob = pi[groups].prod(-1)  # [K^n]
    rewards, _ = spo_minimax(P[groups[:, :, None], groups[:, None, :]])
    num = torch.zeros(K, dtype=D).index_add_(0, groups.reshape(-1), (prob[:, None] * rewards).reshape(-1))
    den = torch.zeros(K, dtype=D).index_add_(0, groups.reshape(-1), prob[:, None].expand(-1, n).reshape(-1))
    return torch.where(den > 0, num / den.clamp(min=1e-300), torch.full_like(num, float("nan")))


def spo_iterate(P, pi, *, lr: float = 1.0, n: int = 3) -> torch.Tensor:
    """One exact policy-gradient step on the logits with the SPO reward (opponents frozen at π_t):
    z += lr · π_t ⊙ (r − E_π r), r = `spo_expected_rewards`."""
    P = check_preference_matrix(P)
    pi = check_policy(pi, P.shape[0], positive=True)
    r = spo_expected_rewards(P, pi, n=n)
    return _softmax(pi.log() + lr * pi * (r - (pi * r).sum()))


def trajectory(step: Callable[[torch.Tensor], torch.Tensor], pi0, steps: int) -> torch.Tensor:
    """[steps + 1, K] iterates π_0, step(π_0), …"""
    out = [torch.as_tensor(pi0, dtype=D)]
    for _ in range(steps):
        out.append(step(out[-1]))
    return torch.stack(out)
