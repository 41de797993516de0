# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # KL estimators
#
# RL fine-tuning keeps the policy $\pi_\theta$ close to a frozen reference $\pi_{ref}$ with a penalty
# $\beta\,\mathrm{KL}(\pi_\theta\,\|\,\pi_{ref})$. The exact KL is a sum over the whole vocabulary at every
# position; trainers instead estimate it **from the sampled token alone**, with one of a few per-token
# estimators. They differ in bias, in variance, and, once used as a loss, in the gradient they produce.
# This notebook measures all three on a categorical "vocabulary" of 8 tokens, where every expectation can
# also be computed exactly:
#
# 1. the estimators on one toy policy,
# 2. bias and spread as $\pi$ moves away from $\pi_{ref}$,
# 3. their value distributions,
# 4. their gradients: which ones give $\nabla\mathrm{KL}(\pi\|\pi_{ref})$,
# 5. KL in the loss vs KL in the reward,
# 6. the adaptive controller's $\beta$.
#
# ## Key equations
#
# $$\mathrm{KL}(\pi\,\|\,\pi_{ref}) = \mathbb{E}_{y\sim\pi}\big[\log r(y)\big],\qquad
#   \log r = \log\pi_\theta(y) - \log\pi_{ref}(y)$$
#
# $$k_1 = \log r,\qquad k_2 = \tfrac12(\log r)^2,\qquad k_3 = e^{-\log r} - 1 + \log r
#   = \frac{\pi_{ref}}{\pi_\theta} - 1 - \log\frac{\pi_{ref}}{\pi_\theta},\qquad k_{abs} = |\log r|$$
#
# Straight-through variants (verl `k1+`, `k3+`): the value of $k_x$ with the gradient of $k_2$,
#
# $$k_{x+} = k_2 - \mathrm{sg}(k_2) + \mathrm{sg}(k_x).$$
#
# Placement: in the loss, $L \mathrel{+}= \beta\,\mathrm{agg}(k_t)$ (GRPO family); in the reward,
# $r_t \leftarrow r_t - \beta\,k_t$ (PPO, RLOO). Adaptive controller (Ziegler et al.):
#
# $$e = \mathrm{clip}\Big(\frac{\mathrm{KL}}{\mathrm{KL}_{target}} - 1,\ -0.2,\ 0.2\Big),\qquad
#   \beta \leftarrow \beta\,\Big(1 + e\,\frac{n_{steps}}{\mathrm{horizon}}\Big)$$

# %% tags=["parameters"]
preset = "smoke"     # nothing is trained here; "full" only draws more Monte Carlo samples
seed = 0
vocab = 8            # size of the toy vocabulary
distance = 1.5       # how far pi is from pi_ref in sections 1, 3 and 4
n_samples = None     # tokens per Monte Carlo estimate; None: 256 on smoke, 4096 on full
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch

from workbench import kl, registry
from workbench.regularizers.kl_penalty import kl_in_loss, kl_in_reward
from workbench.viz.kl_estimators import (adaptive_kl_trajectories, beta_trajectory, categorical_pair,
                                         estimator_moments, exact_kl, gradient_error, kl_estimator_histograms,
                                         kl_estimator_sweep, kl_gradient_check, kl_gradients)

torch.set_num_threads(1)
n_samples = n_samples or (256 if preset == "smoke" else 4096)
for key in ("k1", "k2", "k3", "abs", "kl-straight-through"):
    entry = registry.get("kl", key)
    print(f"{key:20} {entry.summary}")

# %% [markdown]
# ## 1. One policy, one reference, four estimates per token
#
# $\pi_{ref} = \mathrm{softmax}(z)$ and $\pi = \mathrm{softmax}(z + \text{distance}\cdot d)$ with random
# logits $z$ and direction $d$. Each row is one token of the vocabulary: what each estimator returns if that
# token is the one sampled. $k_1$ is negative wherever $\pi < \pi_{ref}$; the others never are.

# %%
logp, ref_logp = categorical_pair(distance, vocab, seed)
print(f"exact KL(pi || pi_ref) = {exact_kl(logp, ref_logp):.4f}\n")
print(f"{'y':>2} {'pi':>7} {'pi_ref':>7} " + " ".join(f"{k:>7}" for k in ("k1", "k2", "k3", "abs")))
values = {k: kl.estimate(logp, ref_logp, k) for k in ("k1", "k2", "k3", "abs")}
for y in range(vocab):
    print(f"{y:>2} {logp[y].exp():7.3f} {ref_logp[y].exp():7.3f} "
          + " ".join(f"{values[k][y]:7.3f}" for k in values))
for k in values:
    mean, std = estimator_moments(logp, ref_logp, k)
    print(f"E_pi[{k}] = {mean:.4f}   per-sample std {std:.4f}")

# %% [markdown]
# ## 2. Bias and spread as the distance grows
#
# Left: the mean of each estimator over `n_samples` sampled tokens (error bars: one standard error) against
# the exact KL. Middle: the exact bias $\mathbb{E}_\pi[k] - \mathrm{KL}$. Right: the exact per-sample standard
# deviation.
#
# * $k_1$ and $k_3$ are **unbiased** at every distance:
#   $\mathbb{E}_\pi[k_3] = \mathbb{E}_\pi[\pi_{ref}/\pi] - 1 + \mathrm{KL} = 1 - 1 + \mathrm{KL}$.
# * $k_2$ agrees with the KL to second order near $\pi = \pi_{ref}$ and drifts away from it further out
#   (above it for this pair; the sign depends on the pair). $|\log r|$ is biased upwards at every distance,
#   since $|\log r| \ge \log r$.
# * $k_3$ has far less spread than $k_1$ while $\pi$ is close to $\pi_{ref}$, which is the regime of RL
#   fine-tuning and why verl calls it `low_var_kl`. Far away its $\pi_{ref}/\pi$ term blows up on tokens that
#   $\pi$ rarely samples, and its spread overtakes $k_1$'s: the reason for verl's clamps
#   (`logr_clamp=20`, `value_clamp=10`).

# %%
kl_estimator_sweep(vocab=vocab, n_samples=n_samples, seed=seed).show()

# %% [markdown]
# ## 3. Value distributions
#
# The values on a batch of sampled tokens. With 8 tokens each histogram has at most 8 spikes, one per token,
# of height close to $\pi(y)$. $k_1$ puts mass on both sides of zero and averages out to the KL; $k_3$ is
# non-negative and concentrated.

# %%
kl_estimator_histograms(distance, vocab, n_samples=max(n_samples, 2000), seed=seed).show()

# %% [markdown]
# ## 4. Gradients: which estimator, used as a loss, pushes towards $\pi_{ref}$?
#
# In a GRPO-style loss the estimator is evaluated on tokens sampled from $\pi_\theta$ and differentiated
# through $\log\pi_\theta(y)$ only; the sampling itself is not differentiated. Its expected gradient is
# therefore $\sum_y \mathrm{sg}(\pi(y))\,\nabla_\theta k(y)$, which the figure computes exactly. With
# $\nabla\mathrm{KL}(\pi\|\pi_{ref}) = \sum_y \pi(y)\log r(y)\,\nabla\log\pi(y)$:
#
# * $\mathbb{E}[\nabla k_1] = \sum_y \pi\,\nabla\log\pi = \nabla\sum_y\pi = 0$: **no gradient at all**;
# * $\mathbb{E}[\nabla k_2] = \sum_y \pi\,\log r\,\nabla\log\pi = \nabla\mathrm{KL}(\pi\|\pi_{ref})$: **exact**;
# * $\mathbb{E}[\nabla k_3] = \sum_y (\pi - \pi_{ref})\,\nabla\log\pi = -\sum_y\pi_{ref}\nabla\log\pi
#   = \nabla\mathrm{KL}(\pi_{ref}\|\pi)$: the gradient of the **forward** KL (red crosses), not the reverse
#   KL whose value it estimates;
# * $k_{3+}$ (value of $k_3$, gradient of $k_2$) is exact, and so is $k_{1+}$.
#
# This is the argument of verl PR #2953 and OpenRLHF #1101 for the straight-through estimators.

# %%
kl_gradient_check(distance, vocab, seed).show()
grads = kl_gradients(distance, vocab, seed, kinds=("k1", "k2", "k3", "abs", "k1+", "k3+"))
for kind in ("k1", "k2", "k3", "abs", "k1+", "k3+"):
    print(f"E[grad {kind:3}]: error vs grad KL(pi||ref) {gradient_error(grads, kind):.2e}, "
          f"vs grad KL(ref||pi) {gradient_error(grads, kind, 'forward KL'):.2e}")

# %% [markdown]
# ## 5. KL in the loss or in the reward
#
# **In the loss** (GRPO, verl `use_kl_loss`), the estimator is a differentiable term, so its gradient is the
# gradient of the estimator: right with $k_2$ or $k_{3+}$, forward-KL with $k_3$. **In the reward** (PPO,
# RLOO, verl `use_kl_in_reward`), the per-token penalty $-\beta k_1$ is a constant added to the reward; it
# reaches the parameters only through the policy-gradient (score-function) term
# $\mathbb{E}[(R - \beta k_1)\nabla\log\pi]$, whose KL part is $-\beta\sum_y\pi\log r\,\nabla\log\pi
# = -\beta\nabla\mathrm{KL}$: the unbiased reverse-KL gradient, with the policy-gradient's variance, and
# in GRPO also rescaled by the group std with the rest of the advantage.
#
# The same toy, one sampled batch of tokens, the KL part of the gradient from `kl_in_loss` and
# `kl_in_reward`, against the exact $\beta\nabla_\theta\mathrm{KL}$ (the reward part is the same in both
# placements and left out):

# %%
beta, n_tokens = 0.1, 20000
logp0, ref_logp = categorical_pair(distance, vocab, seed)
gen = torch.Generator().manual_seed(seed)
y = torch.multinomial(logp0.exp(), n_tokens, replacement=True, generator=gen)
mask = torch.ones(n_tokens, 1, dtype=torch.float64)
target = beta * grads["reverse KL"]


def kl_part(placement, estimator):
    theta = logp0.clone().requires_grad_(True)
    logp_y = torch.log_softmax(theta, -1)[y][:, None]  # [N, 1]: N one-token responses
    if placement == "loss":
        loss, _ = kl_in_loss(logp_y, ref_logp[y][:, None], mask, beta=beta, estimator=estimator)
    else:  # REINFORCE on the penalty: -mean(penalty * log pi(y)), the penalty carries no gradient
        penalty = kl_in_reward(logp_y, ref_logp[y][:, None], mask, beta=beta, estimator=estimator)
        loss = -(penalty * logp_y).mean()
    (g,) = torch.autograd.grad(loss, theta)
    return g.numpy()


for placement, estimator in (("loss", "k3"), ("loss", "k2"), ("loss", "k3+"), ("reward", "k1")):
    g = kl_part(placement, estimator)
    err = np.linalg.norm(g - target) / np.linalg.norm(target)
    print(f"KL in the {placement:6} with {estimator:3}: relative error vs beta * grad KL = {err:.3f}")

# %% [markdown]
# With 20,000 tokens the Monte Carlo noise is a few percent; the $k_3$-in-loss error is the forward-KL bias
# of section 4 and does not shrink with more samples.
#
# ## 6. The adaptive controller
#
# A fixed $\beta$ (the default almost everywhere) leaves the KL wherever training takes it. The adaptive
# controller (`AdaptiveKLController`, verl and OpenRLHF) nudges $\beta$ up when the measured KL is above
# target and down when it is below, by at most a factor $1 \pm 0.2\,n_{steps}/\mathrm{horizon}$ per update.
# Three scenarios: a KL held at twice the target, at half the target, and a toy policy whose KL responds to
# the penalty, $\mathrm{KL} = 0.3/\beta$, so that the target of 6 is reached at $\beta = 0.05$.

# %%
target, horizon, n_per_update, steps = 6.0, 10000, 256, 400
scenarios = {"KL = 2 × target": [2 * target] * steps, "KL = target / 2": [target / 2] * steps,
             "KL = 0.3 / β (responds)": lambda b: 0.3 / b}
adaptive_kl_trajectories(scenarios, beta=0.2, target=target, horizon=horizon, n_steps=n_per_update,
                         steps=steps).show()
for name, values in scenarios.items():
    kls, betas = beta_trajectory(values, 0.2, target, horizon, n_per_update, steps)
    print(f"{name:24} beta after {steps} steps: {betas[-1]:.4f}   last KL {kls[-1]:.2f}")
up, down = (0.2 * (1 + s * 0.2 * n_per_update / horizon) ** (steps - 1) for s in (1, -1))
print(f"fastest possible: 0.2 * (1 +/- 0.2 * {n_per_update}/{horizon})^{steps - 1} = {up:.4f} / {down:.4f}")

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. A token has $\pi(y) = 0.1$ and $\pi_{ref}(y) = 0.4$. Is its $k_1$ estimate `"positive"`, `"negative"` or
#    `"zero"`?
# 2. Which of `k1`, `k2`, `k3`, `abs` are never negative, whatever the sampled token? (a list)
# 3. Estimators can be added: a trainer could use $k_1 + k_2$ as its per-token KL loss. Which of `"k1 + k2"`,
#    `"k3 - k1"`, `"k2 + k3"` and `"k2 - k1"`, used as a loss on tokens sampled from $\pi$, has the gradient of
#    $\mathrm{KL}(\pi\|\pi_{ref})$ in expectation? (a list of these strings)
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_sign = None             # 1: "positive", "negative" or "zero"
my_nonnegative = None      # 2: a list of estimator keys
my_right_gradient = None   # 3: a list of the expressions, e.g. ["k1 + k2"]

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    logr = math.log(0.1) - math.log(0.4)   # k1 = log r = log(1/4) < 0: the token is less likely under pi
    my_sign = "positive" if logr > 0 else "negative" if logr < 0 else "zero"
    # as functions of x = log r: k1 = x changes sign; k2 = x^2 / 2 >= 0; |x| >= 0; k3 = e^-x - 1 + x >= 0 because
    # e^-x lies above its tangent 1 - x at 0. Tried on a few values of both signs:
    estimators = {"k1": lambda x: x, "k2": lambda x: x * x / 2, "k3": lambda x: math.exp(-x) - 1 + x,
                  "abs": abs}
    my_nonnegative = [k for k, f in estimators.items() if all(f(x) >= 0 for x in (-3, -0.5, 0.5, 3))]
    # grad of k_x w.r.t. log pi(y), averaged over y ~ pi (sum_y pi(y) grad log pi(y) = grad sum_y pi(y) = 0):
    #   k1: E[grad log pi] = 0                                      (no gradient in expectation)
    #   k2: E[log r grad log pi] = grad KL(pi || pi_ref)            (the reverse KL's)
    #   k3: E[(1 - pi_ref / pi) grad log pi] = -sum_y pi_ref grad log pi = grad KL(pi_ref || pi)   (the forward KL's)
    # The expectation is linear, so a sum's expected gradient is the sum of these. Each estimator as its
    # (reverse, forward) gradient coefficients: k1 adds nothing, k3 brings the forward KL and nothing cancels it.
    expected_grad = {"k1": (0, 0), "k2": (1, 0), "k3": (0, 1)}
    combinations = {"k1 + k2": {"k1": 1, "k2": 1}, "k3 - k1": {"k3": 1, "k1": -1}, "k2 + k3": {"k2": 1, "k3": 1},
                    "k2 - k1": {"k2": 1, "k1": -1}}
    my_right_gradient = [name for name, terms in combinations.items()
                         if tuple(sum(c * expected_grad[k][i] for k, c in terms.items()) for i in (0, 1)) == (1, 0)]
    # ["k1 + k2", "k2 - k1"]; "k3 - k1" = pi_ref / pi - 1 is zero in expectation, yet its gradient is the forward KL's

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb03_kl_estimators import (check_k1_sign, check_nonnegative_estimators,
                                                    check_reverse_kl_gradient)

check_answers([(1, my_sign, check_k1_sign),
              (2, my_nonnegative, check_nonnegative_estimators),
              (3, my_right_gradient, check_reverse_kl_gradient)])
