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
# # Metric glossary
#
# Every RL step appends one row to the run's `metrics.jsonl`. This notebook is the reference for reading those
# rows: **what each metric measures and what a healthy curve looks like**, next to the curve of a short real
# run (GRPO on countdown with the tiny model). The one-line definitions come from
# `workbench.train.glossary.GLOSSARY`, the same dictionary the reports use, and the "healthy" notes from
# `workbench.train.glossary.HEALTHY` (one for every glossary key). Both are gathered from where the metrics are
# logged: each component declares its own in its registration (`logs=`, next to `reads`), the training loop its
# own next to the code (`LOOP_METRICS` in `workbench/train/trainer.py`, ...). A final check asserts that every metric
# the run logged is declared.
#
# ## Key equations
#
# With $r_t = \pi_\theta(y_t)/\pi_{old}(y_t)$ over the valid tokens of a minibatch, and $G$ answers per prompt:
#
# $$\texttt{kl/k1_old} = \mathrm{mean}_t(-\log r_t), \qquad
#   \texttt{kl/k3_old} = \mathrm{mean}_t\big((r_t - 1) - \log r_t\big) \ge 0$$
#
# $$\texttt{clip/region} = \mathrm{mean}_t\big([A_t>0,\ r_t>1+\epsilon_{high}] + [A_t<0,\ r_t<1-\epsilon_{low}]\big)$$
#
# $$\texttt{clip/out_of_band} = \mathrm{mean}_t\big[r_t \notin [1-\epsilon_{low}, 1+\epsilon_{high}]\big]$$
#
# $$\texttt{entropy} = \mathrm{mean}_t\Big(-\sum_v \pi_\theta(v\mid y_{<t}) \log \pi_\theta(v\mid y_{<t})\Big)$$
#
# $$\texttt{frac_zero_std_groups} = \frac{\#\{g : \mathrm{std}(R_g) = 0\}}{\#\text{groups}}, \qquad
#   \texttt{kl} = \mathrm{mean}_t\, \widehat{\mathrm{KL}}\big(\pi_{old}(y_t) \,\|\, \pi_{ref}(y_t)\big)$$
#
# $$\texttt{value/explained_var} = 1 - \frac{\mathrm{Var}(R - V)}{\mathrm{Var}(R)}$$
#
# Training metrics (losses, ratios, clip fractions, gradient norm) are averaged over the step's optimizer
# steps; rollout metrics (rewards, advantages, entropy, lengths) describe the step's batch.

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU; "full": the preset's GPU model
recipe = "grpo"      # any registered recipe
task = "countdown"
steps = None         # None: 20 on smoke, the preset's count on full
eval_every = 10      # also log eval/accuracy every k steps (0: only before and after)
seed = 0
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from IPython.display import HTML, display
from transformers.utils import logging as hf_logging

from workbench.train import Trainer, make_config, train
from workbench.train.glossary import GLOSSARY, HEALTHY, unexplained
from workbench.train.metrics import read_rows
from workbench.viz.metric_glossary import glossary_html, metric_panels

torch.set_num_threads(1)
hf_logging.disable_progress_bar()  # no "Loading weights" bar per model load
overrides = {"recipe": recipe, "task": task, "seed": seed, "eval_every": eval_every}
if steps or preset == "smoke":
    overrides["steps"] = steps or 20
config = make_config(preset, **overrides)  # SFT fields keep the preset's: the warm start is shared with 01
out = Path(runs_dir) / f"06_metric_glossary-{recipe}-{task.replace(':', '_')}-{config.short_hash()}"
trainer = Trainer(config, out, progress=False).setup()
summary = train(config, out, trainer=trainer, progress=False, report=False)  # resumes if already run
rows = read_rows(out / "metrics.jsonl")
logged = {key for row in rows for key, value in row.items() if value is not None}
print(f"{len(rows)} steps of {recipe} on {task}: greedy accuracy {summary['accuracy_before']:.1%} -> "
      f"{summary['accuracy_after']:.1%}; {len(logged)} metrics logged, {len(GLOSSARY)} in the glossary")

# %% [markdown]
# ## 1. The glossary
#
# What a healthy curve looks like depends on the recipe and the task, so read these as rules of thumb for
# outcome-reward RL on a model that already solves some prompts. Metrics marked "—" are not logged by this
# recipe (value metrics need a critic, `clip/dual` a dual-clip cap, `sampling/*` dynamic sampling).

# %%
display(HTML(glossary_html([(key, text, HEALTHY[key], key in logged) for key, text in GLOSSARY.items()])))

# %% [markdown]
# ## 2. The curves of a real run
#
# Each metric below is drawn from the run above, with its definition and the healthy-curve note next to it.
# The run is short (a few dozen steps on a tiny model), so trends are faint and the noise is real: this is
# what the curves look like before anything has gone wrong.

# %%
SECTIONS = {
    "Outcome": ["reward/mean", "accuracy", "eval/accuracy", "reward/std"],
    "Learning signal": ["frac_zero_std_groups", "advantage/abs_mean", "advantage/mean", "sampling/rounds",
                        "sampling/shortfall_groups", "filtered_frac/min-abs-advantage"],
    "Policy health": ["entropy", "kl", "response_length/mean", "response_length/max", "truncated_frac"],
    "How far each update moves": ["kl/k3_old", "kl/k1_old", "ratio/mean", "ratio/max", "clip/region",
                                  "clip/high", "clip/low", "clip/out_of_band", "clip/dual"],
    "Losses, gradients and the critic": ["loss/policy", "loss/total", "grad_norm", "value/loss", "value/clipfrac",
                                         "value/mean", "value/explained_var"],
    "Throughput": ["time/step", "time/rollout", "time/train", "tokens_per_s/rollout", "tokens_per_s/train"],
}
placed = {key for keys in SECTIONS.values() for key in keys} | {"step"}
SECTIONS["Other"] = sorted((set(GLOSSARY) | logged) - placed)


def section(name):
    keys = [k for k in SECTIONS[name] if k in logged]
    absent = [k for k in SECTIONS[name] if k not in logged]
    if absent:
        print(f"not logged by {recipe}: {', '.join(absent)}")
    items = [(k, f"{GLOSSARY[k]}\nHealthy: {HEALTHY[k]}" if k in GLOSSARY else "(not in the glossary)")
             for k in keys]
    if items:
        metric_panels(rows, items, title=name).show()


# %% [markdown]
# ### Outcome
#
# Is the policy getting better? Rewards are measured on the sampled batch of each step (different prompts
# every step, hence the noise); `eval/accuracy` is greedy decoding on a fixed held-out set.

# %%
section("Outcome")

# %% [markdown]
# ### Learning signal
#
# Is there anything to learn from? An advantage of zero carries no gradient, whatever the loss.

# %%
section("Learning signal")

# %% [markdown]
# ### Policy health
#
# Is the policy still exploring, and how far has it moved from where it started?

# %%
section("Policy health")

# %% [markdown]
# ### How far each update moves
#
# These compare the policy being trained with the policy that sampled the batch. With one optimizer step per
# batch they are identically trivial ($r \equiv 1$); the smoke preset takes two (`minibatches=2`), so the
# second one can move (notebook 04 has the full story).

# %%
section("How far each update moves")

# %% [markdown]
# ### Losses, gradients and the critic
#
# The loss value of a policy-gradient surrogate is not an objective to watch go down; the gradient norm is
# the better health signal.

# %%
section("Losses, gradients and the critic")

# %% [markdown]
# ### Throughput
#
# Where the time goes, for budgeting longer runs.

# %%
section("Throughput")
if SECTIONS["Other"]:
    print("other metrics:", SECTIONS["Other"])
    section("Other")

# %% [markdown]
# ## 3. Every logged metric is declared
#
# A new metric without an explanation fails here: declare it where it is logged, in the `logs=` of the component's
# registration (what it measures, its healthy range and what a bad curve means), or in the loop's table next to the
# code that logs it. `unexplained` also reads the declarations whose names depend on a parameter
# (`rewards/<name>/mean`).

# %%
missing = sorted(unexplained(logged))
assert not missing, f"metrics logged by the run but declared nowhere: {missing}"
print(f"all {len(logged)} logged metrics are declared (GLOSSARY): {', '.join(sorted(logged))}")

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. Three tokens have ratios $r = 0.5, 1, 2$. What is their `kl/k3_old`?
# 2. The reward curve of a run went flat. Which logged metric tells you directly that most groups carry no
#    learning signal at all? (a metric key)
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_k3 = None       # 1: a float
no_signal = None   # 2: a metric key

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    ratios = (0.5, 1.0, 2.0)
    my_k3 = sum((r - 1) - math.log(r) for r in ratios) / len(ratios)   # (0.193 + 0 + 0.307) / 3 = 1/6
    # a group whose rewards are all equal has std 0 and advantage 0 on every token: no gradient at all. The share
    # of such groups is logged directly (reward/std is over the whole batch: it stays high when some prompts are
    # all right and others all wrong, although no group then carries a signal)
    no_signal = "frac_zero_std_groups"

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb06_metric_glossary import check_k3_old, check_no_signal_metric

check_answers([(1, my_k3, check_k3_old), (2, no_signal, check_no_signal_metric)])
