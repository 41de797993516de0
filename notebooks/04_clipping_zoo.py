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
# # The clipping zoo
#
# PPO's clip, GSPO's sequence ratio, CISPO's truncated weight, SAPO's soft gate, GMPO's log-space clip, the
# dual-clip cap: every "trust region" for language-model RL is, at the level of one token, a rule for **how
# much gradient a token gets as a function of its ratio $r$ and its advantage $A$**. This notebook draws that
# rule for every policy objective in the registry (new ones appear automatically; the F2 objectives, which also
# read a token's entropy, a target or an off-policy flag, are drawn with those inputs in notebook 10), then checks on
# real rollouts of a tiny model **when clipping can activate at all**:
#
# 1. the per-token gradient weight of every registered objective over $(r, A)$,
# 2. slices against $r$ at $A = \pm 1$,
# 3. sliders for $\epsilon_{low}$, $\epsilon_{high}$, $\tau$ and the caps, and a few alternative settings,
# 4. clip fractions on real rollouts against the number of optimizer steps per rollout batch,
# 5. stale data: the same batch re-scored after the policy kept training.
#
# ## Key equations
#
# For one token with log-probability $\log\pi_\theta$ under the policy being trained and $\log\pi_{old}$ under
# the policy that sampled it, $r = \pi_\theta / \pi_{old}$. The **gradient weight** of a per-token loss
# $\ell(r, A)$ is the factor in front of $\nabla_\theta \log\pi_\theta$:
#
# $$w(r, A) = \frac{\partial(-\ell)}{\partial \log\pi_\theta}, \qquad
#   \nabla_\theta(-\ell) = w(r, A)\,\nabla_\theta \log\pi_\theta$$
#
# On-policy REINFORCE has $w = A$. For the objectives of the zoo:
#
# $$w_{\text{PPO-clip}} = \begin{cases} 0 & A>0,\ r>1+\epsilon_{high}\ \text{ or }\ A<0,\ r<1-\epsilon_{low}
#   \\ A\,r & \text{otherwise} \end{cases}$$
#
# $$w_{\text{dual clip}} = 0 \ \text{ also where } A<0,\ r>c, \qquad w_{\text{CISPO}} = A\,\min(r, C)$$
#
# $$w_{\text{SAPO}} = A\,r\,4\sigma(1-\sigma), \qquad \sigma = \mathrm{sigmoid}\big(\tau(r-1)\big)$$
#
# GSPO and GMPO clip a sequence ratio (a geometric mean of token ratios); with one token per sequence, which
# is how the figures below are computed, it is the token's own ratio. The ratio can only leave 1 once the
# policy has moved since the batch was sampled, i.e. after the first of the $\mu$ optimizer steps taken on
# each rollout batch:
#
# $$\mu = \texttt{minibatches} \times \texttt{ppo_epochs}, \qquad r \equiv 1 \text{ on the first one.}$$

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU; "full": the preset's GPU model
task = "countdown"   # the task of the real rollouts in sections 4 and 5
rl_steps = 3         # rollout batches per setting of mu in section 4
stale_updates = 6    # policy updates after which the stale batch of section 5 is re-scored
seed = 0
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import dataclasses
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
import torch
from transformers.utils import logging as hf_logging

from workbench import ops, registry
from workbench.train import Trainer, make_config
from workbench.viz.run_curves import clip_fraction_figure, staleness_figure
from workbench.viz.weight_explorers import zoo_explorer
from workbench.viz.weight_surfaces import (gradient_weight_figure, gradient_weight_grid, gradient_weight_slices,
                                           gradient_weight_surface, policy_objectives)

torch.set_num_threads(1)
hf_logging.disable_progress_bar()  # no "Loading weights" bar per model load
torch.manual_seed(seed)
objectives = policy_objectives()
skipped = sorted({e.key for e in registry.entries("objective")} - {e.key for e in objectives})
for e in objectives:
    print(f"{e.key:12} agg={e.defaults.get('agg')!s:22} {e.confidence:8} {e.title[:70]}")
print("not policy objectives (skipped):", skipped)

# %% [markdown]
# ## 1. Every objective, one picture
#
# Each panel is computed by autograd through the registered function: a grid of one-token sequences with
# $\log\pi_{old} = 0$, $\log\pi_\theta = \log r$ and advantage $A$, aggregated with the objective's own default
# mode, and $w = -\partial L/\partial \log\pi_\theta$ read off token by token. Blue tokens are pushed up, red
# ones down, and **grey cells get exactly zero gradient**: that is where a clip is active. `tis` gets
# `mu_logp = old_logp` (no rollout-engine mismatch), so it is PPO-clip here.

# %%
gradient_weight_grid().show()

# %% [markdown]
# What to read off:
#
# - **PPO-clip** (and `tis` without mismatch) zeroes the gradient only on the side the advantage pushes
#   towards: a good token whose probability already rose by more than $1+\epsilon_{high}$, a bad token whose
#   probability already fell below $1-\epsilon_{low}$. The other side is never clipped: a bad token whose
#   ratio has grown keeps a gradient that grows with $r$.
# - **Dual clip** caps exactly that remaining side: bad tokens with $r > c$ get zero gradient.
# - **GSPO/LUSPO** use the same rule with $\epsilon \approx 3\cdot10^{-4}$, tuned for a *sequence* ratio (a
#   geometric mean over hundreds of tokens moves far less than one token's ratio): per token, almost the
#   whole "pushing further" half-plane is grey.
# - **GMPO** (`geo_mean`) clips in log space, $[e^{-\epsilon_{low}}, e^{\epsilon_{high}}]$ with $\epsilon = 0.4$.
# - **CISPO** never zeroes a token: the weight saturates at $A\cdot C$ instead of vanishing.
# - **SAPO** has no grey at all: the weight decays smoothly away from $r = 1$ and never reaches zero.
# - Objectives without a ratio (REINFORCE-style, $w = A$ everywhere) are flat along $r$.
# - Objectives that treat a few tokens specially by a batch statistic (the covariance-based `clip_cov` and
#   `kl_cov`, when registered) look like their base rule here, PPO-clip or the unclipped $A\,r$, except on
#   the handful of cells they select.

# %% [markdown]
# ## 2. Slices at A = +1 and A = −1
#
# The same weights as lines: PPO-clip drops to zero at the band edge, CISPO saturates, SAPO bends down.

# %%
gradient_weight_slices().show()

# %% [markdown]
# ## 3. Move the hyper-parameters
#
# Pick an objective and move $\epsilon_{low}$, $\epsilon_{high}$ (log scale), $\tau_{pos}$, $\tau_{neg}$, the
# dual-clip cap $c$ or CISPO's cap $C$; sliders an objective does not take are disabled, and picking an
# objective resets them to its defaults. The explorer needs a live kernel; the static figures below show
# the settings that matter most.

# %%
zoo_explorer("ppo-clip")

# %% [markdown]
# Clip-higher (DAPO's $\epsilon_{high} = 0.28$) with a dual-clip cap; SAPO with a soft and with a sharp gate;
# GSPO's rule with PPO's $\epsilon$ (what goes wrong if a token-level $\epsilon$ is reused for a sequence ratio
# is the opposite: nothing clips at sequence level); CISPO in verl's relative convention.

# %%
alternatives = [
    ("ppo-clip", {"eps_low": 0.2, "eps_high": 0.28, "dual_clip_c": 3.0}),
    ("sapo", {"tau_pos": 0.2, "tau_neg": 0.2}),
    ("sapo", {"tau_pos": 8.0, "tau_neg": 8.0}),
    ("gspo", {"eps_low": 0.2, "eps_high": 0.2}),
    ("geo_mean", {"eps_low": 0.2, "eps_high": 0.2}),
    ("cispo", {"cap_abs": None, "eps_low": 0.2, "eps_high": 0.28}),
]
alternatives = [(k, hp) for k, hp in alternatives if k in {e.key for e in objectives}]
gradient_weight_grid(alternatives, title="alternative settings (grey: zero gradient)").show()

# %%
gradient_weight_figure("dual-clip", eps_low=0.2, eps_high=0.28, dual_clip_c=2.0).show()

# %% [markdown]
# A check you can trust: for PPO-clip the autograd weight is exactly $A\,r$ inside and $0$ in the active
# clipped region (the same identity `tests/viz/test_weight_surfaces.py` checks on a grid).

# %%
ratios, advs = np.array([0.5, 0.9, 1.1, 1.5]), np.array([-1.0, 1.0])
w = gradient_weight_surface("ppo-clip", ratios, advs)
R, A = np.meshgrid(ratios, advs)
expected = np.where(((A > 0) & (R > 1.2)) | ((A < 0) & (R < 0.8)), 0.0, A * R)
print(np.round(w, 3))
assert np.allclose(w, expected)

# %% [markdown]
# ## 4. When can clipping activate at all?
#
# Every clip above acts on $r$, and $r = 1$ until the policy changes. The trainer samples one rollout batch per
# step, computes `old_logp` with the sampling policy, then takes $\mu$ optimizer steps on it
# (`ppo_epochs` passes, each split into `minibatches`). On the first of them $\pi_\theta = \pi_{old}$ exactly,
# so nothing can clip; only the later ones see a moved policy. Below, the tiny model (SFT warm start shared
# with notebook 01) trains a few steps for each $\mu \in \{1, 2, 4, 8\}$, and the clip fraction of **every
# optimizer step** is recorded (the trainer logs only their mean).

# %%
SETTINGS = {1: (1, 1), 2: (2, 1), 4: (2, 2), 8: (4, 2)}  # mu -> (minibatches, ppo_epochs)


def record_updates(trainer):
    """Keep the objective's metrics of every optimizer step (train_on returns only their mean)."""
    part = trainer.pipeline.parts["objective"][0]  # the recipe's objective in the running pipeline
    calls, fn = [], part.fn

    def recorded(*args, **kwargs):
        loss, metrics = fn(*args, **kwargs)
        calls.append(metrics)
        return loss, metrics

    part.entry = dataclasses.replace(part.entry, fn=recorded)
    return calls


records, trainers = [], {}
for mu, (minibatches, epochs) in SETTINGS.items():
    config = make_config(preset, task=task, seed=seed, steps=rl_steps, minibatches=minibatches, ppo_epochs=epochs)
    out = Path(runs_dir) / f"04_clipping_zoo-mu{mu}-{config.short_hash()}"
    trainer = trainers[mu] = Trainer(config, out, progress=False).setup()
    calls = record_updates(trainer)
    for step in range(rl_steps):
        batch = trainer.make_batch(step)
        first = len(calls)
        trainer.train_on(batch, step)
        for k, metrics in enumerate(calls[first:]):
            records.append({"mu": mu, "step": step, "update": k + 1, **metrics})
    mine = [r for r in records if r["mu"] == mu]
    print(f"mu = {mu} ({minibatches} minibatch(es) x {epochs} epoch(s)): mean clip/region "
          f"{np.mean([r['clip/region'] for r in mine]):.4f}, max ratio {max(r['ratio/max'] for r in mine):.3f}")

# %%
clip_fraction_figure(records).show()
clip_fraction_figure(records, key="clip/out_of_band").show()

# %% [markdown]
# With one minibatch and one epoch ($\mu = 1$) the clip fraction is exactly zero: $r \equiv 1$ and PPO-clip's
# gradient is plain REINFORCE with advantage $A$ (TRL's default `num_iterations=1` is in this regime). Clipping
# starts on the second optimizer step and grows with every step taken on the same batch; the logged
# per-batch mean dilutes it by the first, unclippable step.

# %%
first_updates = [r for r in records if r["update"] == 1]
assert all(r["clip/region"] == 0 and r["clip/out_of_band"] == 0 for r in first_updates), first_updates
assert all(r["clip/region"] == 0 for r in records if r["mu"] == 1)
print(f"first optimizer step of every batch: max |r - 1| = "
      f"{max(abs(r['ratio/max'] - 1) for r in first_updates):.2e}, clip/region = 0")

# %% [markdown]
# ## 5. Stale data makes it fire
#
# Asynchronous trainers, replay buffers and rollout engines that lag behind the trainer all hand the loss a
# batch whose `old_logp` was computed by an **older** policy. Take one batch, keep training the $\mu = 1$
# policy on fresh batches, and after each update re-score the old batch: the ratio drifts and the clip
# fractions rise, although every fresh batch on its own never clips.

# %%
trainer = trainers[1]
stale = trainer.make_batch(rl_steps)  # sampled by the current policy
denom = ops.Denominators.of(stale.mask, norm_constant=stale.size * trainer.config.max_new_tokens)
stale_rows = []
for k in range(stale_updates + 1):
    with torch.no_grad():
        _, metrics = trainer.minibatch_loss(stale, denom)
    stale_rows.append({"staleness": k, **metrics})
    if k < stale_updates:
        trainer.train_on(trainer.make_batch(rl_steps + 1 + k), rl_steps + 1 + k)
for row in stale_rows:
    print(f"staleness {row['staleness']}: clip/region {row['clip/region']:.4f}  out_of_band "
          f"{row['clip/out_of_band']:.4f}  kl/k3_old {row['kl/k3_old']:.2e}")
staleness_figure(stale_rows).show()

# %% [markdown]
# Off-policy data is where the zoo above matters: the choice between zeroing (PPO-clip, GSPO), saturating
# (CISPO) and smooth decay (SAPO) only changes anything for tokens that reach the grey or bent regions, and
# they only get there through several optimizer steps per batch or stale `old_logp`.
#
# ## Exercises (checked automatically)
#
# 1. A run uses `minibatches=3` and `ppo_epochs=1`. On one rollout batch, PPO-clip (ε = 0.2) clips 3% of the
#    tokens of its second optimizer step and 9% of those of its third. What `clip/region` does the trainer log
#    for that batch (the mean over the batch's optimizer steps)? A fraction, e.g. 0.5 for 50%.
# 2. At ratio $r = 1.5$ and advantage $A = +1$, which of `ppo-clip`, `dual-clip`, `cispo`, `sapo`, `gspo`
#    (all at their defaults) still give the token a non-zero gradient? (a set of keys)
# 3. A bad token ($A = -1$) became 5 times more likely since the batch was sampled ($r = 5$). What gradient
#    weight $w$ do `ppo-clip` (ε = 0.2) and `dual-clip` ($c = 3$) give it? (a pair: PPO-clip, dual-clip)
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
logged_clip_fraction = None       # 1: a float
nonzero_weight = None             # 2: a set of objective keys
bad_token_weights = None          # 3: a pair of floats (ppo-clip, dual-clip)

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    eps = 0.2
    r = 1.0   # the first optimizer step: old_logp comes from the very policy being trained, so r = 1 everywhere
    first_step = float(not 1 - eps <= r <= 1 + eps)   # no token outside [1 - eps, 1 + eps]: 0.0
    steps = [first_step, 0.03, 0.09]                  # mu = minibatches x ppo_epochs = 3 optimizer steps
    logged_clip_fraction = sum(steps) / len(steps)    # (0 + 0.03 + 0.09) / 3 = 0.04, not the later steps' 0.06
    r, A = 1.5, +1
    zeroed = {"ppo-clip": r > 1 + eps,      # A > 0 beyond 1 + eps_high: the clipped, constant branch
              "dual-clip": r > 1 + eps,     # the same for A > 0; its cap c only acts on A < 0
              "gspo": r > 1 + 4e-4,         # a sequence clip with eps_high = 4e-4: r = 1.5 is far out
              "cispo": False,               # w = A min(r, C): truncated, never 0
              "sapo": False}                # w = A r 4 sigma (1 - sigma): a smooth gate, small but not 0
    nonzero_weight = {key for key, zero in zeroed.items() if not zero}
    r, A, c = 5.0, -1, 3.0
    w_ppo = A * r if r > 1 - eps else 0.0   # A < 0 is only clipped below 1 - eps: above it w = r A, unbounded
    w_dual = 0.0 if r > c else w_ppo        # beyond r = c the loss is the constant cap -c A: no gradient
    bad_token_weights = (w_ppo, w_dual)     # (-5.0, 0.0)

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb04_clipping_zoo import (check_logged_clip_fraction, check_negative_advantage_weights,
                                                   check_nonzero_weight_objectives)

check_answers([(1, logged_clip_fraction, check_logged_clip_fraction),
              (2, nonzero_weight, check_nonzero_weight_objectives),
              (3, bad_token_weights, check_negative_advantage_weights)])
