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
# # Beyond the clip
#
# PPO's clip is one answer to "how far may one batch move the policy?": a fixed band $[1-\epsilon, 1+\epsilon]$ on
# the ratio, enforced by zeroing the gradient of tokens that left it in the advantage's direction. The methods of
# family F2 (`surrogate`) keep the question and change the answer. They come in four kinds:
#
# - **ratio reshapers** replace the clipped surrogate by another function of the ratio: GBPO regresses $r$ to a
#   target, R²VPO penalises $(r-1)^2$ instead of cutting, LUFFY's policy shaping trains teacher tokens through
#   $p/(p+\gamma)$, AEPO keeps a gradient where PPO's clip has none;
# - **adaptive bounds** move the band itself: BAPO raises $c_{low}$ and $c_{high}$ per batch until good tokens carry
#   half the gradient, HAPO widens it by token entropy, VSPO narrows it for prompts of little value;
# - **masks** drop tokens or whole sequences instead of clipping them: DISPO on both sides of a per-class band,
#   HiSPO on the behaviour policy's mismatch, CAPO on a predicted KL;
# - **token-heterogeneous weights** scale each token's advantage: HAPO and AEPO by entropy, GUI-Libra by the
#   group's success, DOTS's replay weight $\pi_{old}/\mu$.
#
# This notebook draws every one of them at the level of a single token, then looks at real rollouts of the tiny
# model:
#
# 1. the key equation of every F2 component, read from the registry;
# 2. one explorer over the gradient-weight surfaces of every F1 and F2 objective, with a slider per parameter of the
#    objective you pick and one per extra input it reads (entropy, target advantage, $\pi_{old}/\mu$, ...), and the
#    book's picture of all F2 surfaces;
# 3. positive vs negative tokens on real rollouts: who carries the gradient, and which tokens each objective
#    silences;
# 4. BAPO's adaptive bounds and R²VPO's dual variable over short training runs;
# 5. each method's claim next to what our stored runs show.
#
# ## Key equations
#
# As in notebook 04, for one token with ratio $r = \pi_\theta/\pi_{old}$ and advantage $A$, the **gradient weight**
# of a per-token loss $\ell$ is the factor in front of $\nabla_\theta\log\pi_\theta$:
#
# $$w = \frac{\partial(-\ell)}{\partial \log\pi_\theta}, \qquad w_{\text{PPO-clip}} = \begin{cases} 0 & A>0,\
#   r>1+\epsilon_{high}\ \text{ or }\ A<0,\ r<1-\epsilon_{low} \\ A\,r & \text{otherwise.} \end{cases}$$
#
# Ratio reshapers change $w$'s shape. GBPO regresses the ratio to a target
# $\rho^* = 1-\epsilon_{low} + (\epsilon_{low}+\epsilon_{high})\,\sigma(\hat A)$ set by the reward's side of the group
# median, R²VPO replaces the clip by a penalty on the ratio's variance, policy shaping trains off-policy tokens
# through $f(p) = p/(p+\gamma)$:
#
# $$w_{\text{GBPO}} = |A|\,r\,\mathrm{sign}(\rho^* - r), \qquad w_{\text{R²VPO}} = r A - 2\lambda\, r (r - 1), \qquad
#   w_{\text{shaping}} = A\,\frac{\gamma\,p}{(p+\gamma)^2}.$$
#
# BAPO keeps dual-clip PPO but with explicit bounds $[c_{low}, c_{high}]$, raised (first $c_{low}$, then $c_{high}$)
# until the tokens that still carry gradient split it evenly between good and bad answers:
#
# $$\rho = \frac{\sum_{A>0,\ r \le c_{high}} r A}{\sum_{A>0,\ r\le c_{high}} r A + \sum_{A<0,\ c_{low}\le r\le c} r|A|}
#   \ \ge\ \rho_0 = \tfrac12 .$$
#
# Raising $c_{low}$ removes low-ratio negative tokens from the sum, raising $c_{high}$ admits more positive ones.
# DISPO masks both sides of a band chosen per class of answer, $M_t = [1-\epsilon^{c}_{low} \le r_t \le
# 1+\epsilon^{c}_{high}]$, where PPO only clips the side the advantage pushes towards.

# %% tags=["parameters"]
preset = "smoke"      # "smoke": tiny model on CPU; "full": the preset's GPU model
task = "countdown"    # the task of the real rollouts (sections 3 and 4)
rl_steps = 3          # GRPO steps before the batch of section 3 is drawn
moved_updates = 3     # policy updates after which that batch is re-scored (its ratios leave 1)
compare_objectives = ["ppo-clip", "cispo", "bapo", "dispo", "gbpo", "hapo", "aepo-agentic-clip", "r2vpo"]
run_steps = None      # section 4: None -> 10 steps on smoke, the preset's count on full
r2vpo_deltas = [None, 0.002]  # R2VPO variance budgets: None keeps the recipe budget (0.02); a tight one
seed = 0
solutions = False     # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"    # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
import torch
from IPython.display import HTML, Markdown, display
from transformers.utils import logging as hf_logging

from workbench import registry
from workbench.train import Trainer, make_config, train
from workbench.train.metrics import read_rows
from workbench.viz.gradient_shares import (contribution_figure, contribution_summary, silenced_scatter,
                                           token_gradient_weights)
from workbench.viz.run_curves import bapo_bounds_figure, dual_ascent_figure
from workbench.viz.tables import equations_markdown
from workbench.viz.weight_explorers import beyond_explorer
from workbench.viz.weight_surfaces import F2, drawable_keys, gradient_weight_surface, not_drawable, surface_grid

torch.set_num_threads(1)
hf_logging.disable_progress_bar()  # no "Loading weights" bar per model load
torch.manual_seed(seed)
f2 = [e for e in registry.entries() if e.family == F2 and e.kind != "recipe"]
print(f"F2 components registered: {len(f2)} ({len({e.key for e in f2})} methods); drawable objectives of F1 and "
      f"F2: {len(drawable_keys())}")
for key, reason in not_drawable().items():
    print(f"  no (r, A) surface: {key}: {reason[:110]}")

# %% [markdown]
# ## 1. Every F2 component, one equation each
#
# The table is built from the registry (`registry.entries()`, family `surrogate`): each component's key and kind,
# its summary and the equation it registers. A method registered later appears here by itself. A method can be several
# components: HAPO is an advantage (a token-level group average) and an objective (entropy-adaptive bounds), VSPO a
# group transform (resampling) and an objective (value-smoothing clip), R²VPO an objective and the controller that
# drives its $\lambda$.

# %% mystnb={"markdown_format": "myst"}
display(Markdown(equations_markdown(F2)))

# %% [markdown]
# ## 2. Every objective's gradient weight
#
# Pick an objective of F1 or F2. The surface is computed by autograd through the registered function on a grid of
# one-token sequences ($\log\pi_{old} = 0$, $\log\pi_\theta = \log r$), exactly as the clipping zoo of notebook 04:
# blue tokens are pushed up, red ones down, **grey cells get exactly zero gradient**. The explorer has one control
# per numeric (or on/off) parameter of the objective you pick, built from its registered defaults, and one per input
# the objective reads beyond $(\log\pi, \log\pi_{old}, A, \text{mask})$, each with an explicit default (hover a
# control for its meaning):
#
# | input | objectives | grid setting (default) |
# | --- | --- | --- |
# | `mu_logp` | `tis`, `minirl`, `r2vpo`, `hispo`, `dots-rr-clip` | $\pi_{old}/\mu$ (1: fresh data, $\mu = \pi_{old}$) |
# | `entropy` | `hapo`, `aepo-agentic-clip` | the token's entropy $H$ (1 nat), 99 others log-uniform on $[0.01, 2]$ |
# | `target_adv` | `gbpo` | $\hat A = A$ per row, or one value for every row (off: $\hat A = 1$) |
# | `offpolicy_mask` | `policy-shaping` | off-policy (on), with the token's old probability $p_{old} = 0.1$ |
# | `task_value` | `vspo` | $v = \hat p(1-\hat p) = 0.09$ (a prompt solved 10 % of the time) |
#
# BAPO's surface is drawn at fixed bounds $(c_{low}, c_{high})$: its search runs per minibatch on that minibatch's
# own tokens, which a grid is not (section 3 runs it on real rollouts). CAPO cannot be drawn at all: its mask
# predicts each token's KL after the coming optimizer step from the LM head and Adam's moments, not from $(r, A)$.
# The explorer needs a live kernel; the figures below are its static stand-ins.

# %%
beyond_explorer("bapo")

# %% [markdown]
# Every F2 objective at its defaults, one shared colour scale (the book's picture of the family):

# %%
surface_grid().show()

# %% [markdown]
# What to read off, panel by panel:
#
# - **bapo** is dual-clip PPO with a lower bound of 0.6 instead of 0.8: a bad token keeps its gradient further
#   down, and the cap $c = 3$ zeroes bad tokens whose probability tripled. Its bounds move per batch (section 3).
# - **gbpo** has no grey at all but a **sign flip**: left of the target ratio $\rho^*$ the token is pushed up, right of
#   it pushed down, whatever the sign of $A$ ($|A|$ only sets how hard). Ratios past the band are pulled back, not
#   merely left alone.
# - **dispo** is grey on both sides of $[0.8, 1.28]$ for both signs: it drops a bad token whose probability rose
#   and a good one whose probability fell, both of which PPO keeps.
# - **hapo** at $H = 1$ nat (above its batch's pivot) has a wider upper band and larger $|A'|$ outside the neutral
#   zone; **aepo-agentic-clip** at that entropy keeps a constant gradient $(1+\epsilon)A$ where PPO's clip is grey.
# - **r2vpo** never zeroes a token: the penalty $-2\lambda r(r-1)$ bends the weight down smoothly and, for large
#   $r$, pushes even good tokens back.
# - **policy-shaping** (an off-policy token with $p_{old} = 0.1$) peaks at $p = \gamma$ and fades for confident
#   tokens; **vspo**, **hispo** and **dots-rr-clip** at their default inputs look like PPO with a narrower band, a
#   token mask, and a weight 1.
#
# The inputs matter: the same objectives with the input at another value.

# %%
alternatives = [
    ("hapo", {}, {"entropy": 0.05}), ("hapo", {}, {"entropy": 2.0}),
    ("aepo-agentic-clip", {}, {"entropy": 0.05}), ("aepo-agentic-clip", {}, {"entropy": 1.5}),
    ("policy-shaping", {}, {"off_policy": False}), ("policy-shaping", {}, {"p_old": 0.5}),
    ("vspo", {}, {"task_value": 0.0}), ("vspo", {}, {"task_value": 0.25}),
    ("dots-rr-clip", {}, {"old_over_mu": 2.0}), ("hispo", {}, {"old_over_mu": 1.25}),
    ("r2vpo", {"lam": 0.0}), ("gbpo", {}, {"target_from_A": False, "target_adv": -2.0}),
]
surface_grid(alternatives, title="the same objectives with another input (grey: zero gradient)").show()

# %% [markdown]
# - A **low-entropy** token under HAPO gets a wider *lower* band (it may be pushed down further), a high-entropy one
#   a wider upper band. AEPO's kept gradient exists only for high-entropy tokens: at $H = 0.05$ it is PPO-clip.
# - **policy-shaping** on an on-policy token is PPO-clip; with $p_{old} = 0.5$ the off-policy weight is past its peak
#   and the cells with $p = r\,p_{old} > 1$ are blank (impossible).
# - **vspo** at $v = 0$ (a prompt always or never solved) halves the band; at $v = 1/4$ it is PPO-clip.
# - **dots-rr-clip** with $\pi_{old}/\mu = 2$ doubles every weight (a replayed token twice as likely now as when it was
#   sampled); **hispo** at $\pi_{old}/\mu = 1.25$ keeps only tokens whose total ratio $r\,\pi_{old}/\mu$ is in
#   $[0.8, 1.28]$, so its band shifts left to $[0.64, 1.02]$.
# - **r2vpo** with $\lambda = 0$ is the unclipped importance-sampling gradient $w = rA$; **gbpo** with one negative
#   target for every row pushes every ratio towards $\rho^* = 0.85$.
#
# Checks you can trust, against the formulas above (the same identities `tests/viz/test_weight_surfaces.py` checks
# on grids):

# %%
ratios, advs = np.array([0.5, 0.7, 0.9, 1.1, 1.5, 3.5]), np.array([-1.0, 1.0])
R, A = np.meshgrid(ratios, advs)
bapo_w = gradient_weight_surface("bapo", ratios, advs)
expected = np.where(((A > 0) & (R > 1.2)) | ((A < 0) & ((R < 0.6) | (R > 3.0))), 0.0, A * R)
rho = 0.8 + 0.4 / (1 + np.exp(-A))  # GBPO's target ratio with target_adv = A
gbpo_w = gradient_weight_surface("gbpo", ratios, advs)
print("bapo\n", np.round(bapo_w, 3), "\ngbpo\n", np.round(gbpo_w, 3))
assert np.allclose(bapo_w, expected) and np.allclose(gbpo_w, np.abs(A) * R * np.sign(rho - R))

# %% [markdown]
# ## 3. Positive vs negative tokens on real rollouts
#
# BAPO's motivation is a measurement: in off-policy updates of large models, **negative-advantage tokens carry most
# of the gradient**, and the fixed clip keeps it that way (it silences low-probability good tokens whose ratio rose
# past $1+\epsilon$). The tiny model trains a few GRPO steps on countdown, then a batch is drawn,
# the policy takes a few more updates (the first on that very batch: the second epoch BAPO is meant for), and the
# batch is re-scored: its ratios have left 1. For each objective, every token's weight $w_t$ comes from autograd
# through the registered function on the whole batch (BAPO's bound search included), with the inputs the batch
# provides (GBPO's target advantage is computed from its rewards, VSPO's task value from its groups' success; no
# token is off-policy, so policy shaping would be PPO-clip and is left out).

# %%
config = make_config(preset, task=task, seed=seed, steps=rl_steps + moved_updates + 1)
out = Path(runs_dir) / f"10_beyond_the_clip-grpo-{config.short_hash()}"
trainer = Trainer(config, out, progress=False).setup()  # SFT warm start shared with notebook 01 (cached)
for step in range(rl_steps):
    trainer.train_on(trainer.make_batch(step), step)
batch = trainer.make_batch(rl_steps)  # old_logp, entropy, mu_logp from the policy that sampled it
for k in range(moved_updates):  # first an epoch on this batch, then fresh batches: the policy moves on
    trainer.train_on(batch if k == 0 else trainer.make_batch(rl_steps + k), rl_steps + k)
logp = trainer.score(batch, config.temperature)  # the moved policy's log-probs of the same tokens
valid = batch.mask > 0
r = torch.exp(logp - batch.old_logp)[valid]
quantiles = torch.quantile(r, torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99])).numpy()
print(f"{batch.size} responses, {int(valid.sum())} tokens, {int((valid & (batch.advantages != 0)).sum())} with A != 0; "
      f"ratio quantiles 1/10/50/90/99 %: {np.round(quantiles, 3)}")

weights, summaries, metrics = {}, {}, {}
for key in compare_objectives:
    weights[key], metrics[key] = token_gradient_weights(key, batch, logp)
    summaries[key] = s = contribution_summary(weights[key], batch.advantages, batch.mask)
    print(f"{key:18} share of the gradient on A > 0: {s['pos_share']:.3f}   silenced: {s['silenced_pos']:6.1%} of "
          f"A > 0 tokens, {s['silenced_neg']:6.1%} of A < 0 tokens")
if "bapo" in metrics:
    m = metrics["bapo"]
    print(f"\nBAPO's search on this batch: c_low {m['bapo/c_low']:.2f}, c_high {m['bapo/c_high']:.2f}, its own "
          f"bapo/pos_share {m['bapo/pos_share']:.3f}")
    assert abs(m["bapo/pos_share"] - summaries["bapo"]["pos_share"]) < 1e-6  # rho is exactly this share

# %%
contribution_figure(summaries).show()

# %% [markdown]
# What to look at: the blue part of each bar is the share of the gradient (the sum of $|w_t|$) that pushes good
# answers up. With GRPO's advantages both sides of a group sum to zero per *answer*, but the gradient is per *token*:
# whichever side writes more tokens, or keeps more of them unclipped, carries more of it. PPO-clip and CISPO sit
# wherever the batch puts them; BAPO's search raises its bounds until the share reaches $\rho_0 = 0.5$ (dashed) or
# both bounds hit their maxima. DISPO silences tokens on both sides; R²VPO and CISPO silence none. On the smoke batch
# the imbalance is mild (PPO-clip's share is a little under 0.5, BAPO's search lifts it to about 0.5): a tiny model
# after a few updates moves few ratios far. A healthy off-policy update keeps the share near 0.5 and silences a few
# percent of tokens; a share persistently far below 0.5 means bad answers dominate the update (the failure BAPO's
# bounds exist to fix).

# %%
silenced_scatter(weights, batch).show()

# %% [markdown]
# Each dot is one token with $A \ne 0$, at its probability under the policy that sampled it (x, log scale) and its
# advantage (y, jittered): blue and red carry gradient, **black are silenced**. PPO-clip's black dots are good tokens
# whose probability rose past $1+\epsilon$ and bad ones that fell below $1-\epsilon$; they sit mostly at low
# $\pi_{old}$ (on the smoke batch a median of about 0.25, against about 0.9 for the kept tokens), where one update
# moves a token's ratio most. That is the "entropy-clip rule" of the BAPO paper: the clip silences exactly the
# low-probability tokens whose updates would change the entropy most. BAPO's search first raises $c_{low}$ (more bad
# low-ratio tokens silenced), then $c_{high}$ (good tokens past 1.2 get their gradient back): on the smoke batch it
# ends at $c_{low} = 0.8$, $c_{high} = 1.6$, so all its black dots are bad tokens. DISPO's black dots appear on both
# sides; GBPO silences only tokens sitting exactly at their target (certain tokens with $r = \rho^* = 1$) but
# *reverses* the push of tokens past it.
#
# **GUI-Libra** changes no ratio: after `grpo` it scales every negative advantage by $\mathrm{clip}(0.5 + 1.5\,\bar
# R_g, 0, 1)$, so a group that mostly fails (where a "wrong" answer may be one of several right actions that the
# verifier does not accept) pushes its answers down at half strength. **CAPO** has no picture on a grid either: its
# mask predicts each token's update from the LM head and Adam's moments (`tests/objectives/test_capo.py` checks the
# predicted KL against one real Adam step on a linear softmax head).

# %%
from workbench.viz.advantage_comparisons import success_scale_figure

success_scale_figure().show()

# %% [markdown]
# Positive advantages keep weight 1 whatever the success rate; above a success rate of 1/3 the negatives do too
# (the solid line reaches 1), so GUI-Libra only differs from GRPO on groups that are mostly wrong.
#
# ## 4. Adaptive bounds and a dual variable over a run
#
# Both methods only act once the ratio leaves 1, so the runs use `--set ppo_epochs=2` (two passes over each batch,
# each split into minibatches: from the second optimizer step on, $r \ne 1$). BAPO logs the bounds its search settled
# on (`bapo/c_low`, `bapo/c_high`) and the positive share after the search (`bapo/pos_share`), averaged over the
# optimizer steps of each training step. R²VPO logs the ratio variance it measures (`r2vpo/ratio_var`) and the
# controller logs the $\lambda$ it set (`objective:r2vpo.lam`), raised while the variance exceeds its budget
# $\delta$ and lowered otherwise.

# %%
steps = run_steps or (10 if preset == "smoke" else None)


def run(recipe, **overrides):
    """Train (or resume) one short run of `recipe` with two epochs per batch; its metric rows."""
    kw = {"recipe": recipe, "task": task, "seed": seed, "ppo_epochs": 2, **overrides}
    if steps:
        kw["steps"] = steps
    if preset == "smoke":
        kw["eval_size"] = 50
    config = make_config(preset, **kw)
    out = Path(runs_dir) / f"10_beyond_the_clip-{recipe}-{config.short_hash()}"
    summary = train(config, out, progress=False, report=False)
    print(f"{recipe}: {len(read_rows(out / 'metrics.jsonl'))} steps, greedy accuracy {summary['accuracy_before']:.3f} "
          f"-> {summary['accuracy_after']:.3f}")
    return read_rows(out / "metrics.jsonl")


bapo_rows = run("bapo")
for row in bapo_rows:
    print(f"step {row['step']:3d}: c_low {row['bapo/c_low']:.3f}  c_high {row['bapo/c_high']:.3f}  "
          f"pos_share {row['bapo/pos_share']:.3f}  clip/region {row['clip/region']:.4f}")
bapo_bounds_figure(bapo_rows).show()

# %% [markdown]
# What healthy looks like: $c_{low}$ between its start 0.6 and its cap 0.8, $c_{high}$ between 1.2 and 2.0, moving from
# step to step as batches differ, and `pos_share` at or just under 0.5 (the logged value averages over the optimizer
# steps, including the first one where $r = 1$ and the search has nothing to move). Warning signs: $c_{low}$ pinned at
# 0.8 *and* $c_{high}$ at 2.0 with the share below 0.5 every step (bad tokens swamp the update whatever the bounds:
# often long wrong answers), or a share of 1.0 throughout (no bad token carries gradient: the batch has no signal).

# %%
controller = registry.get("controller", "r2vpo").defaults
r2vpo_runs = {}
for delta in r2vpo_deltas:
    budget = controller["delta"] if delta is None else delta
    rows = run("r2vpo", **({"recipe_overrides": {"controllers": {"delta": delta}}} if delta is not None else {}))
    r2vpo_runs[f"δ = {budget:g}" + (" (recipe)" if delta is None else "")] = (rows, budget)
    print("   λ per step:", " ".join(f"{row['objective:r2vpo.lam']:.3f}" for row in rows))
    print("   ratio variance:", " ".join(f"{row['r2vpo/ratio_var']:.4f}" for row in rows))
dual_ascent_figure(r2vpo_runs).show()

# %% [markdown]
# What healthy looks like: the measured variance hovers around or below $\delta$ and $\lambda$ settles, rising after
# steps that moved the ratios too far and decaying when they did not. With the recipe's budget (0.02) the tiny model
# at smoke scale never uses it up (about 0.001 to 0.004), so $\lambda$ decays to 0 and R²VPO trains as the unclipped
# importance-sampling gradient, with no penalty and no clip. With a tight budget (0.002) the variance sits right at
# it, so $\lambda$ hovers near its start: up after a step above $\delta$, slightly down after the others. Warning
# sign: $\lambda$ climbing step after step with the variance still above $\delta$,
# the penalty no longer holds the update (lower the learning rate or the number of epochs).
#
# ## 5. Claim vs what we see
#
# Each F2 method's central claim as we read it, and what the stored comparison `f2-countdown` shows over seeds
# (`workbench.results.claims.claims_table`, the same rows as the book's claims page). The numbers are computed from
# `data/stored_runs/f2-countdown.jsonl` when it exists; until then the claims are listed without numbers.

# %%
from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.results.stored_runs import COMPARISONS, load, made_by
from workbench.viz.run_curves import seed_band_curves
from workbench.viz.tables import before_after_table, claims_html

catalog = registry.catalog()
f2_recipes = [e.key for e in registry.entries("recipe") if catalog.get(e.key, {}).get("family") == F2]
stored = load("f2-countdown")
if stored is None:
    how = ("`python -m workbench.results.stored_runs f2-countdown` (or `make stored-runs`)"
           if "f2-countdown" in COMPARISONS else
           "adding `f2-countdown` to `workbench/results/stored_runs.py`'s COMPARISONS, then "
           "`python -m workbench.results.stored_runs f2-countdown`")
    print(f"no stored comparison f2-countdown yet: make it with {how}; the claims below have no numbers")
print(VERDICT_RULE)
display(HTML(claims_html(claims_table(recipes=f2_recipes))))
if stored is not None:
    meta, stored_groups, summaries_ref = stored
    print(made_by(meta))
    seed_band_curves(stored_groups, keys=["accuracy", "entropy", "clip/region", "response_length/mean"],
                     title=f"stored runs: {meta['name']} (mean and min-max over {meta['seeds']} seeds)").show()
    before_after_table(summaries_ref, title="held-out before → after 80 steps (mean ± std over seeds)").show()

# %% [markdown]
# **What the stored runs show** (3 seeds, lr $3\cdot10^{-4}$, 80 steps, from one warm start at greedy 0.41): HAPO and
# VSPO beat GRPO's clip beyond seed noise on held-out accuracy (greedy 0.50 ± 0.01 and 0.47 ± 0.04 vs 0.40 ± 0.02;
# pass@1 0.46 and 0.43 vs 0.38), both at a lower pass@8 (0.63 vs 0.69): they sharpen more. HAPO ends at the lowest
# held-out entropy of all (0.20 vs 0.34). R²VPO loses accuracy on one seed of three (0.32 ± 0.11) and CAPO pass@8
# (0.55): at this learning rate it masks many tokens on the first updates. The recipes follow their papers' scripts,
# and most have no KL term (BAPO, DISPO, CAPO, R²VPO, HAPO, AEPO's clip) where GRPO keeps k3 KL 0.04: they end with
# less entropy and a lower pass@8. VSPO keeps GRPO's KL and still ends lower (0.25), probably because it replaces the
# groups with no reward spread, so more of each batch carries gradient (not measured separately). GBPO (KL 0.001) and
# policy shaping (entropy bonus 0.001, a reference answer in every group) keep GRPO's entropy and pass@8.
#
# Read a verdict as a statement about this toy setting only: a 0.5M-parameter model on countdown for 80 steps. Most
# F2 methods were made for long, off-policy, large-batch training, where the ratio drifts far from 1; here each step
# takes two optimizer steps on its batch (minibatches=2), so their mechanisms act on a few percent of tokens.
#
# ## Exercises (checked automatically)
#
# 1. A group of five answers has rewards $(1, 0, 0, 0, 0)$. What target ratio $\rho^*$ does GBPO give the correct
#    answer, and what a wrong one ($T = 1$, $\epsilon_{low} = \epsilon_{high} = 0.2$, Bessel std, $\epsilon = 10^{-6}$)?
#    (a pair: correct, wrong)
# 2. Five tokens under DISPO at its defaults (0.2 / 0.28 for both classes): a correct answer's token at $r = 1.25$
#    (a), at $0.75$ (b), at $1.35$ (e), and a wrong answer's token at $r = 1.3$ (c) and at $0.85$ (d). Which ones get
#    no gradient? (a set of labels)
# 3. BAPO sees five tokens $(r, A)$: $(1.1, +1)$, $(1.5, +1)$, $(0.72, -1)$, $(1.0, -1)$, $(0.5, -1)$. What is the
#    positive share $\rho$ at its start bounds $c_{low} = 0.6$, $c_{high} = 1.2$, and where does its search leave
#    $c_{low}$ (steps of 0.05, target $\rho_0 = 0.5$)? (a pair: share, c_low)
# 4. Policy shaping ($\gamma = 0.1$) trains an off-policy token with $A = 1$. What is its gradient weight
#    $\partial(-\ell)/\partial\log p$ at $p = 0.1$ and at $p = 0.9$? (a pair)
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
gbpo_targets = None     # 1: a pair of floats (correct answer, wrong answer)
dispo_masked = None     # 2: a set of labels, e.g. {"a"}
bapo_answer = None      # 3: a pair (positive share at the start bounds, c_low after the search)
shaping_answer = None   # 4: a pair of floats (p = 0.1, p = 0.9)

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    def sigmoid(x):
        return 1 / (1 + math.exp(-x))

    rewards = [1, 0, 0, 0, 0]
    median, mean = 0.0, sum(rewards) / 5                                # the median of four 0s and a 1 is 0
    std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / 4)           # Bessel: sqrt(0.8 / 4) = 0.447
    target = [(x - median) / (std + 1e-6) for x in rewards]              # 2.236 for the 1, exactly 0 for the 0s
    gbpo_targets = (0.8 + 0.4 * sigmoid(target[0]), 0.8 + 0.4 * sigmoid(target[1]))  # (1.161, 1.0): wrong ones stay

    tokens = {"a": (1.25, 1), "b": (0.75, 1), "c": (1.3, -1), "d": (0.85, -1), "e": (1.35, 1)}
    dispo_masked = {k for k, (r, a) in tokens.items() if not 1 - 0.2 <= r <= 1 + 0.28}  # both sides: {b, c, e}

    pairs = [(1.1, 1), (1.5, 1), (0.72, -1), (1.0, -1), (0.5, -1)]

    def pos_neg(c_low, c_high, c=3.0):  # only tokens that still carry gradient count
        pos = sum(r * a for r, a in pairs if a > 0 and r <= c_high)
        neg = sum(r * -a for r, a in pairs if a < 0 and c_low <= r <= c)
        return pos, neg

    pos, neg = pos_neg(0.6, 1.2)               # 1.1 (the 1.5 token is clipped) and 0.72 + 1.0 (0.5 < c_low)
    c_low = 0.6
    while pos_neg(c_low, 1.2)[0] < pos_neg(c_low, 1.2)[1] and c_low < 0.8:  # raise c_low until pos >= neg
        c_low = round(c_low + 0.05, 10)         # 0.65, 0.70 keep the 0.72 token; 0.75 drops it: 1.1 >= 1.0
    bapo_answer = (pos / (pos + neg), c_low)   # (0.390, 0.75)

    gamma = 0.1
    shaping_answer = tuple(gamma * p / (p + gamma) ** 2 for p in (0.1, 0.9))  # d f / d log p: (0.25, 0.09)

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb10_beyond_the_clip import (check_bapo_exercise, check_dispo_masked_tokens,
                                                      check_gbpo_target_ratios, check_shaping_weights)

check_answers([(1, gbpo_targets, check_gbpo_target_ratios),
               (2, dispo_masked, check_dispo_masked_tokens),
               (3, bapo_answer, check_bapo_exercise),
               (4, shaping_answer, check_shaping_weights)])
