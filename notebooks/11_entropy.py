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
# # Entropy: why it collapses and what keeps it up
#
# RL on a verifier sharpens the policy: the token entropy falls, pass@1 rises, and the answers the policy no
# longer samples stop being found, so pass@k can fall. The F3 family of methods controls that collapse, each
# with a different lever: which tokens get a gradient (Clip-Cov, KL-Cov), a bonus or penalty on entropy (the
# entropy bonus, EPO, SAC's learned temperature, SAFE), the sampling temperature (AEPO, DCPO, HAPO), or which
# tokens' likelihood may fall (LLDS). This notebook takes them apart:
#
# 1. the key equations of every registered F3 component, from the registry;
# 2. the mechanism on one exact softmax: temperature, an entropy-bonus step and a policy-gradient step (explorer);
# 3. the logp-advantage covariance of real tokens, and which tokens Clip-Cov and KL-Cov act on;
# 4. the stored comparison (8 recipes × 3 seeds: entropy, greedy accuracy, pass@1, pass@k) and a live
#    smoke comparison;
# 5. one small picture per control that is not in the comparison (SAC's temperature, SAFE, LLDS, HAPO, EPO);
# 6. each paper's claim against what the stored runs show;
# 7. exercises.
#
# ## Key equations
#
# For a softmax policy $\pi = \mathrm{softmax}(z/T)$ over a vocabulary, the token entropy and its gradient are
#
# $$H = -\sum_a \pi(a)\log\pi(a), \qquad
#   \frac{\partial H}{\partial z_a} = -\frac{1}{T}\,\pi(a)\big(\log\pi(a) + H\big).$$
#
# The weights $\pi(a)(\log\pi(a) + H)$ sum to zero, so a small step $\Delta z$ of the logits changes the entropy by a
# covariance under the policy:
#
# $$\Delta H \approx -\,\mathrm{Cov}_{a\sim\pi}\big(\log\pi(a),\ \Delta z_a / T\big).$$
#
# **The entropy mechanism.** Under policy gradient the logit step follows the advantage, so the entropy change is
# about $-\mathrm{Cov}(\log\pi, A)$ (Cui et al., 2025, for natural policy gradient; $-\mathrm{Cov}(\log\pi, \pi A)$ for
# the plain gradient). Confident tokens that get a high advantage (and unlikely tokens that get a low one) make the
# covariance positive and collapse entropy; Clip-Cov and KL-Cov act on the tokens with the largest centred product
#
# $$\mathrm{cov}_t = (A_t - \overline{A})(\log\pi_t - \overline{\log\pi}).$$

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU; "full": the preset's GPU model
task = "countdown"   # the task of the real rollouts (section 3) and of the live comparison (section 4)
rl_steps = 3         # GRPO steps before the batch of section 3 is sampled
cov_ratio = 0.02     # section 3: share of the batch tokens that Clip-Cov and KL-Cov act on: k is ratio x tokens
clip_cov_lb = 1.0    # section 3: Clip-Cov's candidate band lb < cov_t < ub (verl's defaults)
clip_cov_ub = 5.0
compare_recipes = ["grpo", "entropy-bonus", "clip_cov", "kl_cov"]   # section 4, the live comparison
compare_steps = None  # None: 10 on smoke, the stored comparison's settings on full
compare_seeds = 1
stored_runs_dir = None  # where the stored runs are read from (None: data/stored_runs)
seed = 0
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from IPython.display import HTML, Markdown, display
from transformers.utils import logging as hf_logging

from workbench.viz.entropy_controls import (EVAL_CURVES, covariance_figure, covariance_summary, covariance_tokens,
                                            entropy_explorer, entropy_step_figure, entropy_steps, epo_band_figure,
                                            hapo_temperature_figure, llds_figure, safe_penalty_figure,
                                            sac_temperature_figure, shape_logits)
from workbench.viz.run_curves import seed_band_curves, with_start
from workbench.viz.tables import before_after_table, equations_markdown

torch.set_num_threads(1)
torch.manual_seed(seed)
hf_logging.disable_progress_bar()

# %% [markdown]
# ## 1. Every F3 component, one equation each
#
# Every F3 component as registered (the table is generated from `workbench.registry`, so a new registration appears
# here), plus the plain entropy bonus of F1:

# %% mystnb={"markdown_format": "myst"}
display(Markdown(equations_markdown("entropy", extra=[("regularizer", "entropy-bonus")])))

# %% [markdown]
# Read the table by kind: `objective` replaces the policy loss (Clip-Cov, KL-Cov), `regularizer` adds a term to it
# (EPO, LLDS, SAC, SAFE, the entropy bonus), `advantage` / `reward_shaping` / `group_transform` change what the loss
# is fed (DCPO, AEPO), `controller` and `schedule` move a parameter between steps (the temperature switch of AEPO
# and DCPO, SAC's $\alpha$, EPO's entropy history and phase weight), `rollout` changes how tokens are sampled
# (HAPO's per-token temperature), and `value` is SAFE's critic.
#
# ## 2. The mechanism on one exact softmax
#
# Eight tokens, logits = sharpness × a preset shape, sampled at temperature $T$. The explorer takes one exact
# gradient step of the `entropy-bonus` regularizer (loss $-H$) and one on-policy step of the registered `ppo-clip`
# objective on one sampled token with advantage $A$ (ratio 1, so REINFORCE: $\Delta z = \eta A\,\nabla_z\log\pi$), both
# by autograd through the library's functions, and shows
#
# - top: the distribution at $T$ and after each step;
# - bottom left: the entropy against the temperature (higher $T$ flattens, lower $T$ sharpens), with the entropy
#   after each step marked at the current $T$;
# - bottom right: the entropy change of the policy-gradient step **if it were taken on each token**, exact (bars) and
#   the first-order $-\mathrm{Cov}(\log\pi, \Delta z/T)$ (black ticks).
#
# The explorer needs a live kernel; its static picture is the default setting (one peak, sharpness 3, $T = 1$, a PG
# step on the likely token 0 with $A = +1$).

# %%
entropy_explorer(shape="one peak", sharpness=3.0, temperature=1.0, bonus_lr=0.5, token=0, advantage=1.0, pg_lr=0.5)

# %% [markdown]
# What to look at:
#
# - **The covariance picture** (bottom right): with $A > 0$, the step on the likely token 0 lowers the entropy, a step
#   on any unlikely token raises it. Flip the advantage to $A = -1$ and the signs flip: pushing down an unlikely token
#   sharpens too. Entropy falls whenever the advantage and the log-probability move together, which is what
#   training on a verifier does on average once the policy is mostly right: its likely answers are its correct
#   ones.
# - **The first-order ticks** sit on the bars for small steps ($\eta \lesssim 0.5$) and drift away for large ones:
#   the covariance formula is a local statement.
# - **The entropy bonus** raises $H$ (unless a huge step overshoots the uniform distribution): its step
#   $\Delta z = \eta\,\partial H/\partial z$ moves mass from the peak to the tail, most where
#   $\pi(a)\,|\log\pi(a) + H|$ is largest.
# - **The temperature** divides the logits: at $T < 1$ the same logits give a sharper distribution, at $T > 1$ a
#   flatter one, and a logit step $\Delta z$ moves the distribution by $\Delta z / T$, less at high temperature.
#
# The same numbers without a figure (the default setting, and a step with $A = -1$ on the unlikely token 5):

# %%
for token, advantage in ((0, 1.0), (5, -1.0)):
    s = entropy_steps(shape_logits("one peak", 3.0), temperature=1.0, bonus_lr=0.5, token=token, advantage=advantage,
                      pg_lr=0.5)
    print(f"PG step on token {token} (pi = {s['probs'][token]:.3f}) with A = {advantage:+g}: H {s['entropy']:.4f} -> "
          f"{s['pg']['entropy']:.4f} (exact {s['pg']['change']:+.4f}, first order {s['pg']['first_order']:+.4f}); "
          f"entropy-bonus step: {s['bonus']['change']:+.4f}")

# %% [markdown]
# Twice the logits (sharpness 6) at twice the temperature ($T = 2$) is the same distribution as the default, with the
# same entropy, but the same PG step changes it four times less: the gradient of $\log\pi$ with respect to the logits
# carries a $1/T$, and the distribution reads the step as $\Delta z/T$.

# %%
entropy_step_figure("one peak", sharpness=6.0, temperature=2.0, bonus_lr=0.5, token=0, advantage=1.0,
                    pg_lr=0.5).show()

# %% [markdown]
# ## 3. The covariance term on real rollouts
#
# The tiny model (the SFT warm start shared with the other notebooks) trains a few GRPO steps on the task; then one
# more batch is sampled and scored by one forward pass: each response token's log-prob, entropy and GRPO advantage.
# `workbench.objectives.entropy_cov.token_covariance` gives $\mathrm{cov}_t$, `clip_cov_selection` the tokens Clip-Cov
# would detach (a random $k$ among the candidates $lb < \mathrm{cov}_t < ub$ that PPO has not clipped already) and
# `kl_cov_selection` the top-$k$ tokens KL-Cov would penalize, exactly as the objectives select them in training.
#
# **Settings scaled to this batch.** verl's defaults (ratio $2\cdot10^{-4}$ for both) are meant for batches of
# millions of tokens, where $k$ is in the hundreds or thousands. This batch has about a thousand tokens, so
# $\mathrm{int}(2\cdot10^{-4} N) = 0$ and verl's rule $\max(k, 1)$ would act on a single token. Here both use
# `cov_ratio` = 0.02 (SPEAR's Clip-Cov ratio), i.e. $k = \mathrm{int}(0.02\,N)$ tokens, and Clip-Cov keeps verl's band
# $lb = 1$, $ub = 5$.

# %%
from workbench.rollout.engine import policy_forward
from workbench.train import Trainer, make_config

config = make_config(preset, recipe="grpo", task=task, seed=seed, steps=rl_steps + 1)
trainer = Trainer(config, Path(runs_dir) / f"11_entropy-cov-{config.short_hash()}", progress=False).setup()
for step in range(rl_steps):
    trainer.train_on(trainer.make_batch(step), step)
batch = trainer.make_batch(rl_steps)
with torch.no_grad():
    logp, entropy, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                      batch.mask, config.temperature, with_entropy=True)
tokens = covariance_tokens(logp, entropy, batch.advantages, batch.mask,
                           clip_cov=dict(clip_cov_ratio=cov_ratio, clip_cov_lb=clip_cov_lb, clip_cov_ub=clip_cov_ub),
                           kl_cov=dict(kl_cov_ratio=cov_ratio))
summary = covariance_summary(tokens)
print(f"{summary['tokens']} response tokens in {batch.size} samples; k = int({cov_ratio} x {summary['tokens']}) = "
      f"{int(cov_ratio * summary['tokens'])}")
print(f"Clip-Cov: {summary['candidates']} candidates with {clip_cov_lb:g} < cov < {clip_cov_ub:g}, "
      f"{summary['detached']} detached;  KL-Cov: {summary['penalized']} penalized")
print(f"all tokens:       mean entropy {summary['entropy']:.3f}, mean log pi {summary['logp']:.3f}")
print(f"KL-Cov's tokens:  mean entropy {summary['entropy_penalized']:.3f}, mean log pi "
      f"{summary['logp_penalized']:.3f}, mean A {summary['advantage_penalized']:+.3f}, share with A > 0 "
      f"{summary['positive_advantage_penalized']:.2f}")
covariance_figure(tokens, clip_cov_lb, clip_cov_ub).show()

# %% [markdown]
# What to look at:
#
# - **Two corners have positive covariance** (red in the bottom panel): likely tokens of answers better than their
#   group (top right: $\log\pi$ above the mean, $A > 0$) and unlikely tokens of worse answers (bottom left). Both
#   sharpen the policy (section 2: raising a likely token and lowering an unlikely one both lower the entropy).
# - **Which corner dominates depends on the spread of $\log\pi$.** The tiny model is confident (mean $\log\pi$ about
#   $-0.5$): a likely token can sit at most about 0.5 above the mean, an unlikely one ten below it. So on this batch
#   the largest $\mathrm{cov}_t$, and with them KL-Cov's top-$k$, are typically the rare unlikely tokens of wrong
#   answers (printed above: their mean $\log\pi$ and $A$), not the confident correct ones. With a broader policy the
#   confident-and-rewarded corner takes a larger share.
# - **Clip-Cov's band** (green, top) excludes the extreme products ($\geq ub$) and all small ones; it detaches $k$
#   tokens at random among the candidates, so repeated steps spread the detachment over the band.
# - **Entropy and covariance are different things**: a token's own entropy (top, y axis) is not what is selected; the
#   selection is by how strongly its update would move the distribution's entropy.
#
# ## 4. The toy run: eight recipes, three seeds
#
# The stored comparison `f3-entropy` (`workbench/results/stored_runs.py`) trains GRPO, clip-higher (DAPO's
# $\epsilon_{high} = 0.28$), the entropy bonus (0.01), Clip-Cov, KL-Cov, EPO, DCPO and AEPO from the same countdown warm
# start, 3 seeds each, at lr $3\cdot10^{-4}$ (3× the smoke default, so that GRPO sharpens within the run) for 80 steps,
# with held-out pass@1 and pass@8 on 100 prompts (8 samples each) every 20 steps. The point at step −1 is the held-out
# evaluation before training. Lines are the mean over seeds, bands the min–max.
#
# What a healthy curve looks like: **entropy falling slowly, pass@k holding while pass@1 (and greedy accuracy)
# rises.** GRPO's sharpening looks different: pass@1 up, pass@k down, entropy down fast; the policy concentrates on
# the answers it already finds and stops sampling the others. An entropy control has worked when its entropy and
# pass@k stay above GRPO's without its pass@1 falling below.

# %%
from workbench.results.stored_runs import COMPARISONS, load, made_by

comparison = COMPARISONS["f3-entropy"]
stored = load("f3-entropy") if stored_runs_dir is None else load("f3-entropy", data_dir=Path(stored_runs_dir))
if stored is None:
    print("The f3-entropy runs are not stored yet (data/stored_runs/f3-entropy.jsonl). Make them with\n"
          "    python -m workbench.results.stored_runs f3-entropy\n"
          f"({len(comparison.recipes)} recipes x {comparison.seeds} seeds, {' '.join(comparison.sets)}; resumable), "
          "then run this notebook again. The live comparison below still runs.")
else:
    meta, stored_groups, stored_summaries = stored
    print(made_by(meta))
    seed_band_curves(with_start(stored_groups, stored_summaries), keys=EVAL_CURVES,
                     title=f"stored runs {meta['name']}: mean, min-max over {meta['seeds']} seeds").show()
    before_after_table(stored_summaries, title="held-out before → after 80 steps (mean ± std over seeds)").show()

# %% [markdown]
# **What the stored runs show** (commit 5053e01, 3 seeds): GRPO sharpens as intended, pass@1 0.26 → 0.36 while
# pass@8 falls 0.73 → 0.67 and the held-out entropy 0.54 → 0.37. Only the entropy bonus ends above GRPO's training
# entropy (0.41 vs 0.39); clip-higher is level with it. Clip-Cov, KL-Cov, EPO, DCPO and AEPO end *below* it (0.30 to
# 0.34) with pass@8 0.56 to 0.58: each recipe runs as its paper's script does, **without the KL term** GRPO keeps (k3,
# 0.04), and losing that anchor costs more entropy than their mechanisms give back at this scale. The next cell runs
# the same recipes with GRPO's KL term (`f3-entropy-kl`), so that only the mechanism differs.

# %%
stored_kl = load("f3-entropy-kl") if stored_runs_dir is None else load("f3-entropy-kl", data_dir=Path(stored_runs_dir))
if stored_kl is None:
    print("f3-entropy-kl is not stored yet: python -m workbench.results.stored_runs f3-entropy-kl")
else:
    meta_kl, groups_kl, summaries_kl = stored_kl
    seed_band_curves(with_start(groups_kl, summaries_kl), keys=EVAL_CURVES,
                     title=f"{meta_kl['name']}: every recipe with grpo's KL term (k3, 0.04), {meta_kl['seeds']} seeds"
                     ).show()
    before_after_table(summaries_kl,
                       title="with grpo's KL term: held-out before → after (mean ± std over seeds)").show()

# %% [markdown]
# With GRPO's KL term in every recipe (same 3 seeds; its GRPO runs reproduce f3-entropy's exactly), Clip-Cov, KL-Cov
# and DCPO end *above* GRPO's training entropy (0.41, 0.41, 0.41 against 0.39) and pass@8 (0.69 to 0.70 against
# 0.67) at equal greedy accuracy (0.40 to 0.42 against 0.40): the mechanisms do what their papers say, by a margin
# about one seed standard deviation wide at this scale. AEPO's temperature-switched samples leave entropy where GRPO's
# is (0.39): with 3 of 128 rows replaced a step (the reference's 60 of 2560) it barely moves the batch.

# %% [markdown]
# How to read it: compare each recipe with GRPO on the same seeds (the warm start is shared, so the step −1 points
# coincide). `entropy` is the training batch's own token entropy, logged every step (stored every 5th); the `eval/`
# curves are on the held-out prompts. A method that keeps entropy up but lowers pass@1 has traded accuracy for
# exploration; one that keeps pass@k and raises pass@1 has done what the F3 papers claim.
#
# **The live comparison.** The notebook also trains a few recipes itself with `workbench.train.compare.compare`
# (the function behind `workbench compare`): at smoke, 10 steps and 1 seed with pass@4 on 20 held-out prompts every 5
# steps, a check that the pipeline and the evaluation run, not a ranking; at `preset="full"`, the reference
# comparison's recipes and settings (except its learning rate, which is the tiny model's).

# %%
from workbench.train.compare import compare
from workbench.train.metrics import read_rows

if preset == "smoke":
    sets = [f"steps={compare_steps or 10}", "pass_k=4", "eval_every=5", "eval_size=20", "checkpoint_every=10"]
    live_recipes = list(compare_recipes)
else:  # the reference settings on the preset's model; lr stays the preset's (3e-4 is tuned for the tiny model)
    sets = [s for s in comparison.sets if not s.startswith("lr=")]
    sets = [f"steps={compare_steps}" if s.startswith("steps=") and compare_steps else s for s in sets]
    live_recipes = list(comparison.recipes)
compare_out = Path(runs_dir) / f"11_entropy-compare-{task.replace(':', '_')}-{preset}-{'-'.join(sorted(sets))}".replace(
    "=", "")
result = compare(live_recipes, task=task, preset=preset, seeds=compare_seeds, out=compare_out, sets=sets,
                 progress=False)
live_groups = {key: [read_rows(compare_out / f"{key}-s{s}" / "metrics.jsonl") for s in range(compare_seeds)]
               for key in live_recipes}
live_summaries = [json.loads((compare_out / f"{key}-s{s}" / "summary.json").read_text())
                  for key in live_recipes for s in range(compare_seeds)]
for s in live_summaries:
    print(f"{s['recipe']:14s} seed {s['seed']}: greedy {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f}, "
          f"pass@1 {s['pass@1_before']:.3f} -> {s['pass@1_after']:.3f}, pass@{s['pass_k']} {s['pass@k_before']:.3f} "
          f"-> {s['pass@k_after']:.3f}, entropy {s['entropy_before']:.3f} -> {s['entropy_after']:.3f}")
seed_band_curves(with_start(live_groups, live_summaries), keys=EVAL_CURVES,
                 title=f"live comparison at {preset}, {compare_seeds} seed(s)").show()
before_after_table(live_summaries, title=f"live comparison: held-out before → after ({preset})").show()

# %% [markdown]
# At smoke scale the curves lie on top of each other and 20 held-out prompts move in steps of 0.05: read the
# stored runs above for the comparison, this cell for a live check that each recipe trains and evaluates.
#
# ## 5. The controls that are not in the comparison
#
# SAC's temperature, SAFE, LLDS and HAPO's sampling temperature act through state or inputs the countdown runs barely
# exercise (a critic, a KL above SAFE's threshold, several epochs per batch, a second generation per step), so each
# gets one small picture from the library's own functions instead. EPO is in the comparison, but its band penalty is
# easier to see on its own.
#
# **SAC's learned temperature** (`sac-temperature`). A toy softmax over 8 tokens is pushed towards token 0 at every
# step (a REINFORCE step with $A = 1$), which alone would collapse its entropy. The `sac-temperature` regularizer adds
# the bonus $\alpha H$, and its controller descends $J(\alpha) = \alpha\,(H - \bar H)$ in $\log\alpha$ with Adam after
# each step: $\alpha$ shrinks while $H > \bar H$ and grows while $H < \bar H$.

# %%
sac_temperature_figure(target_entropy=1.0, steps=300).show()

# %% [markdown]
# What to look at: with $\alpha$ fixed at its start (0.01) the entropy collapses towards 0. With $\alpha$ learned,
# $\alpha$ first shrinks (the uniform start is above the target) and the entropy falls well below the target; then
# $\alpha$ climbs (Adam on $\log\alpha$ moves it by a nearly constant factor per step), overshoots so that the entropy
# jumps back above the target, and both settle, the entropy at $\bar H = 1$ nat, after this damped oscillation. A
# healthy run looks like the settled part: $\alpha$ flat, entropy on the target. Note the target is in nats and
# absolute: SAC's rule of thumb $0.89\log|A|$ would be about 10 nats for an LLM vocabulary.
#
# **SAFE's entropy gate** (`safe`, `safe-kl-control`). SAFE penalizes the short-EMA KL to the reference only above a
# threshold $\theta$ that its controller moves, and multiplies the penalty by $g(H) = \max(0.5, H_f/(H + 0.1))$.

# %%
safe_penalty_figure(threshold=0.45, kl_excess=(0.1, 0.3)).show()

# %% [markdown]
# What to look at: below the threshold (the flat line at 0) nothing happens whatever the entropy; above it, the same
# KL excess costs 40× more at $H = 0$ than at $H \geq 3.9$ (the gate's floor of 0.5). A policy that both drifts from
# its reference and loses entropy is pulled back hardest: the gate makes the KL term an entropy control.
#
# **LLDS** (`llds`). A toy update on four responses: the bars are each token's log-prob change
# $\log\pi - \log\pi_{old}$. LLDS penalizes $\mathrm{relu}(\log\pi_{old} - \log\pi)$ only on the tokens of actions with
# $A \geq 0$ whose total likelihood fell, and only on their tokens that fell (red); its gradient pushes exactly those
# tokens back up.

# %%
llds_figure().show()

# %% [markdown]
# What to look at: response 0 ($A \geq 0$, likelihood fell) is penalized on the four tokens that fell, not on the two
# that rose; response 1 ($A \geq 0$) also has tokens that fell, but its total rose, so nothing is penalized; responses
# 2 and 3 have $A < 0$, where a falling likelihood is the point of the update. On an on-policy step's first minibatch
# $\log\pi = \log\pi_{old}$ and the penalty is 0: LLDS acts from the second minibatch or epoch on.
#
# **HAPO's per-token temperature** (`hapo-temperature`). Every sampled token is drawn at $T_t = T(1 + \tau\hat h_t)$,
# with $\hat h_t \in [-1, 1]$ the token entropy normalized around the 80% quantile of log-entropy (statistics of the
# previous step's batch, as in HAPO's trainer; the first step samples at $T$). Below: one-peak distributions from flat to nearly deterministic, through the
# registered sampler's `AdaptiveTemperature`.

# %%
hapo_temperature_figure(temperature=1.0, tau=0.05).show()

# %% [markdown]
# What to look at: the intended mapping (solid) cools confident tokens to $T(1 - \tau)$ and heats the most uncertain
# ones to $T(1 + \tau)$, crossing $T$ at the pivot; HAPO's code (dashed, `reference_bug=True`) maps low entropies to
# $\hat h \geq 0$ too, so its temperature never falls below $T$. With $\tau = 0.05$ the effect is small per token by
# design: it acts at the forks where a few percent of temperature changes which branch is sampled.
#
# **EPO's band** (`epo`). EPO's entropy term is a bonus $c_H H$ minus a penalty on tokens whose entropy leaves the band
# $[\kappa_l, \kappa_r] \times \bar H_k$ around the historical mean entropy of their turn, weighted by a phase schedule.

# %%
epo_band_figure(hbar=0.5, bands=((0.8, 1.2), (0.0, 2.0))).show()

# %% [markdown]
# What to look at: inside the band the penalty is 0; outside it grows linearly (the workbench's differentiable
# reading), so its gradient pushes the entropy back towards the band from both sides. EPO's own code (dotted) applies a
# constant there, with no gradient: it only shifts the loss. The `epo` recipe of the comparison uses the wide band
# $[0, 2]\bar H$ of EPO's README runs: only entropies above twice their history are penalized. The phase weight (right)
# keeps the penalty near full strength for the first half of training and then lets it fade.
#
# ## 6. Claim vs what we see
#
# Each method's central claim as we read its paper and what the stored runs show, from `workbench.results.claims` (the
# book's "claim vs what we see" page, restricted to this family and its F1 baselines). A claim is only judged against a
# stored comparison that tests it; the others say why not, or that none is written yet.

# %%
from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.viz.tables import claims_html

F3_RECIPES = ["clip-higher", "entropy-bonus", "clip_cov", "kl_cov", "epo", "dcpo", "aepo-arbitrary", "safe",
              "safe-kl-control", "llds", "sac-temperature", "hapo-temperature"]
print(VERDICT_RULE)
display(HTML(claims_html(claims_table(None if stored_runs_dir is None else Path(stored_runs_dir), recipes=F3_RECIPES))))

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. A policy has logits $(2, 1, 0, 0)$. What is its entropy, in nats, when sampled at temperature $T = 0.5$?
# 2. Five tokens of a batch have advantages $A = (1.5, 1.0, -0.5, -0.5, -1.0)$ and log-probs
#    $\log\pi = (-0.1, -2.0, -0.2, -1.5, -0.7)$. What is the covariance term $\mathrm{cov}_t$ of token 0?
# 3. Six tokens (one batch) have $A = (2, 1, 1, -2, -2, 0)$, $\log\pi = (0, -0.5, 0, -3, -2.5, 0)$ (so
#    $\overline{A} = 0$, $\overline{\log\pi} = -1$) and ratios $r = (1, 1, 1, 0.7, 1.1, 1)$. With Clip-Cov's $lb = 1$,
#    $ub = 5$ and PPO's $\epsilon = 0.2$, which tokens may Clip-Cov detach (its candidates)? A set of indices.
# 4. SAC's temperature: a batch has five tokens, with entropies $(0.9, 0.8, 0.7, 0.1, 0.2)$ nats, and the target
#    $\bar H$ is 0.6. The controller's $J(\alpha)$ takes the token-mean of $H_t - \bar H$ (its default `agg`). After
#    its step, does $\alpha$ `"rise"` or `"fall"`?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
entropy_at_half = None       # 1: a float (nats)
covariance_of_token0 = None  # 2: a float
clip_cov_candidates = None   # 3: a set of token indices
alpha_moves = None           # 4: "rise" or "fall"

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    T = 0.5
    scaled = [z / T for z in (2.0, 1.0, 0.0, 0.0)]              # divide the logits by T first: (4, 2, 0, 0)
    norm = sum(math.exp(v) for v in scaled)
    probs = [math.exp(v) / norm for v in scaled]
    entropy_at_half = -sum(p * math.log(p) for p in probs)      # natural log: nats (about 0.515)
    A, logps = (1.5, 1.0, -0.5, -0.5, -1.0), (-0.1, -2.0, -0.2, -1.5, -0.7)
    mean_A, mean_logp = sum(A) / len(A), sum(logps) / len(logps)  # 0.1 and -0.9: centre both factors
    covariance_of_token0 = (A[0] - mean_A) * (logps[0] - mean_logp)  # 1.4 * 0.8 = 1.12
    A, logps, r = (2, 1, 1, -2, -2, 0), (0, -0.5, 0, -3, -2.5, 0), (1, 1, 1, 0.7, 1.1, 1)
    cov = [a * (lp + 1) for a, lp in zip(A, logps)]              # the means are 0 and -1: (2, 0.5, 1, 4, 3, 0)
    clipped = [(a > 0 and x > 1.2) or (a < 0 and x < 0.8) for a, x in zip(A, r)]  # token 3: A < 0, r < 1 - eps
    clip_cov_candidates = {t for t in range(6) if 1.0 < cov[t] < 5.0 and not clipped[t]}  # strict bounds: {0, 4}
    H = sum((0.9, 0.8, 0.7, 0.1, 0.2)) / 5   # token-mean 0.54: three tokens of five lie above 0.6, the mean does not
    # dJ/dlog(alpha) = alpha (H - target) = alpha (0.54 - 0.6) < 0: descending it raises log(alpha)
    alpha_moves = "fall" if H > 0.6 else "rise"

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb11_entropy import (check_alpha_direction, check_clip_cov_candidates, check_covariance_term,
                                              check_entropy_at_temperature)

check_answers([(1, entropy_at_half, check_entropy_at_temperature),
              (2, covariance_of_token0, check_covariance_term),
              (3, clip_cov_candidates, check_clip_cov_candidates),
              (4, alpha_moves, check_alpha_direction)])
