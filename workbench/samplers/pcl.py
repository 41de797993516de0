"""Prompt Curriculum Learning (PCL): a value model of each prompt's pass rate picks the prompts solved half the time.

    p_pi(x)      = E_{y ~ pi}[r(x, y)]                                  pass rate, binary r
    E[A^2] and the effective ratio 1 - p^n - (1 - p)^n (share of groups of n with both rewards) peak at p = 1/2
    V_phi(x)     ~ p_pi(x)                                              value model on prompt features phi(x)
    each step:   C = k m candidates drawn from the pool;  keep the m of C with the smallest |V_phi(x) - tau|, tau = 1/2
    after it:    phi <- phi - lr Adam(grad_phi (1/m) sum_x (V_phi(x) - p_hat(x))^2)   p_hat: the step's mean reward

Decisions (the paper gives no code, no k, no architecture for V beyond "a value model"):
- V_phi(x) = sigmoid(w2 . relu(W1 phi(x) + b1) + b2) on `text.features.prompt_features` (hashed character
  n-grams, unit rows: the stand-in for a frozen LM embedding, see there), `hidden` = 32 units, float64. Initial
  weights ~ N(0, 1/fan_in) from a generator seeded by `pool_seed` (never the global RNG), b = 0, so V ~ 0.5 before
  any fit.
- Fit: `fit_steps` = 8 steps of Adam (lr 1e-2, betas 0.9 / 0.999, eps 1e-8), full batch over the step's prompts,
  on the MSE to their empirical pass rates (the mean verifier score of their n rows); the parameters and Adam's
  moments live in the sampler's state, so a resumed run continues the same fit.
- k = 4 (the catalog's default); C is drawn from the pool without replacement with the sampler's rng; when k m
  exceeds the pool, C is the whole pool. Ties in |V - tau| go to the lower pool id.
- Pool: 64 prompts (`samplers/pool.py`), in place of the paper's dataset: prompts recur, so V's fits are tested on
  the prompts it chooses again. The paper's batch of about 8K rollouts (m n = 512 x 16) is far above our 16 x 8.

Metrics are kept in the state (`state.metrics`) and the loop logs them with the step that chose
(`Pipeline.sampler_metrics`): `pcl/value_mse` of step t is V's error on step t - 1's prompts (V is fit after a step).

Reference: none located (ZhaolinGao et al., "Prompt Curriculum Learning for Efficient LLM Post-Training"); written
from the paper's algorithm.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.advantages.group import group_pass_rates
from workbench.text.features import DIM, prompt_features
from workbench.samplers.pool import PoolState, PromptPool, check_pool, ensure, record, take

PCL_TITLE = "Prompt Curriculum Learning for Efficient LLM Post-Training"
BETAS, ADAM_EPS = (0.9, 0.999), 1e-8


def effective_ratio(p, n: int):
    """1 - p^n - (1 - p)^n: the chance that a group of n samples holds both a success and a failure."""
    return 1 - p ** n - (1 - p) ** n


@dataclass
class PclState(PoolState):
    """The pool plus the value model: its parameters, Adam's moments and step count, and the last metrics."""
    k: int = 4
    tau: float = 0.5
    lr: float = 1e-2
    fit_steps: int = 8
    params: dict = field(default_factory=dict)     # name -> float64 tensor
    moments: dict = field(default_factory=dict)    # name -> (m, v) Adam moments
    adam_steps: int = 0
    metrics: dict = field(default_factory=dict)    # the last step's, by name (`PCL_LOGS`)


def init_params(hidden: int, seed: int) -> dict:
    """W ~ N(0, 1/fan_in), b = 0, from a generator of `seed` alone."""
    g = torch.Generator().manual_seed(seed)
    return {"W1": torch.randn(DIM, hidden, generator=g, dtype=torch.float64) / math.sqrt(DIM),
            "b1": torch.zeros(hidden, dtype=torch.float64),
            "w2": torch.randn(hidden, generator=g, dtype=torch.float64) / math.sqrt(hidden),
            "b2": torch.zeros((), dtype=torch.float64)}


def value(params: dict, features: torch.Tensor) -> torch.Tensor:
    """[N] V_phi(x) in (0, 1) of features [N, DIM]."""
    return torch.sigmoid(torch.relu(features @ params["W1"] + params["b1"]) @ params["w2"] + params["b2"])


def closest_to_tau(values: torch.Tensor, ids: list[int], m: int, tau: float) -> list[int]:
    """The m ids whose value is closest to tau (ties: the lower id), in that order."""
    gaps = (values - tau).abs().tolist()
    return [i for _, i in sorted(zip(gaps, ids))[:m]]


def fit_value(state: PclState, features: torch.Tensor, targets: torch.Tensor) -> None:
    """`fit_steps` Adam steps on the MSE of V to `targets` (bias-corrected moments, as torch.optim.Adam)."""
    for _ in range(state.fit_steps):
        leaves = {k: v.detach().requires_grad_(True) for k, v in state.params.items()}
        loss = ((value(leaves, features) - targets) ** 2).mean()
        grads = torch.autograd.grad(loss, list(leaves.values()))
        state.adam_steps += 1
        t = state.adam_steps
        for (name, p), grad in zip(state.params.items(), grads):
            m, v = state.moments.get(name, (torch.zeros_like(p), torch.zeros_like(p)))
            m, v = BETAS[0] * m + (1 - BETAS[0]) * grad, BETAS[1] * v + (1 - BETAS[1]) * grad ** 2
            state.moments[name] = (m, v)
            m_hat, v_hat = m / (1 - BETAS[0] ** t), v / (1 - BETAS[1] ** t)
            state.params[name] = p - state.lr * m_hat / (v_hat.sqrt() + ADAM_EPS)


def check_pcl(*, size=64, k=4, tau=0.5, hidden=32, lr=1e-2, fit_steps=8, history=256, pool_seed=0, **_):
    check_pool(size=size, history=history, pool_seed=pool_seed)
    for name, v in (("k", k), ("hidden", hidden), ("fit_steps", fit_steps)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0 < tau < 1:
        raise ValueError(f"tau must be a target pass rate in (0, 1) (the paper's 0.5), got {tau!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr must be the value model's Adam learning rate > 0, got {lr!r}")


PCL_LOGS = {
    "pcl/value_mse": ("MSE of V's predictions for the step's prompts against their pass rates, before V's fit.",
                      "Falls from ~0.1 as V learns; rising: the policy moves faster than V follows."),
    "pcl/chosen_gap": ("Mean |V - tau| of the step's chosen prompts.",
                       "Below pcl/candidate_gap; near 0 when the pool holds prompts V puts at tau."),
    "pcl/candidate_gap": ("Mean |V - tau| over the step's k m candidates.",
                          "Above pcl/chosen_gap; grows as the pool is solved or found hopeless."),
}


@registry.sampler(
    "pcl", title=PCL_TITLE,
    summary="A pool of prompts and a value model V(x) of each prompt's pass rate (an MLP on prompt features, fit "
            "by MSE to the step's empirical pass rates): each step draws k m candidates and keeps the m with V "
            "closest to tau = 0.5, where a group of n samples most often holds both a success and a failure.",
    equation=r"S = \arg\min_{S \subset C,\ |S| = m} \sum_{x \in S} |V_\phi(x) - \tau|,\quad "
             r"\phi \leftarrow \phi - \eta\,\nabla_\phi \tfrac1m \sum_{x \in S} (V_\phi(x) - \hat p(x))^2",
    logs=PCL_LOGS, check=check_pcl)
class PromptCurriculum:
    """The pool's calls with a value-model choice."""

    @staticmethod
    def init(*, size=64, k=4, tau=0.5, hidden=32, lr=1e-2, fit_steps=8, history=256, pool_seed=0):
        check_pcl(size=size, k=k, tau=tau, hidden=hidden, lr=lr, fit_steps=fit_steps, history=history,
                  pool_seed=pool_seed)
        return PclState(size=size, order="random", pool_seed=pool_seed, history=history, k=k, tau=tau, lr=lr,
                        fit_steps=fit_steps, params=init_params(hidden, pool_seed))

    @staticmethod
    def check_run(task, n: int, *, size=64, pool_seed=0, **_) -> None:
        PromptPool.check_run(task, n, size=size, pool_seed=pool_seed)

    @staticmethod
    def select(state, task, n, rng):
        ensure(state, task)
        candidates = sorted(rng.sample(range(state.size), min(state.k * n, state.size)))
        values = value(state.params, prompt_features([str(state.examples[i].prompt) for i in candidates]))
        chosen = closest_to_tau(values, candidates, n, state.tau)
        gaps = dict(zip(candidates, (values - state.tau).abs().tolist()))
        state.metrics.update({"pcl/chosen_gap": sum(gaps[i] for i in chosen) / n,  # value_mse: the last fit's
                              "pcl/candidate_gap": sum(gaps.values()) / len(gaps)})
        return take(state, chosen)

    @staticmethod
    def update(state, batch):
        rates, prompts = group_pass_rates(batch)
        pooled = [(p, r) for p, r in zip(prompts, rates.tolist()) if state.id_of(p) is not None]
        record(state, batch)
        if pooled:
            features = prompt_features([p for p, _ in pooled])
            targets = torch.tensor([r for _, r in pooled], dtype=torch.float64)
            with torch.no_grad():
                state.metrics["pcl/value_mse"] = float(((value(state.params, features) - targets) ** 2).mean())
            fit_value(state, features, targets)
        return state
