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
# # Comparing recipes on one task
#
# Every recipe in the workbench is a composition of registered components, so two recipes that share
# a task, a model, a warm start and a seed differ **only** in the components they name. This notebook
# runs several of them side by side with `workbench.train.compare.compare`, the function behind
# `workbench compare`, and plots mean curves with a min–max band over seeds (no band with one seed).
#
# ## Key equations
#
# The recipes differ in the advantage $A_i$, the per-token loss $\ell_{i,t}$ and the aggregation:
#
# $$\text{GRPO: } A_i = \frac{R_i - \bar R_g}{\mathrm{std}_g R},\qquad
#   \text{Dr.GRPO: } A_i = R_i - \bar R_g,\qquad
#   \text{RLOO: } A_i = R_i - \frac{1}{G-1}\sum_{j\ne i} R_j$$
#
# "Steps to target" is the first step whose trailing 10-step mean of the sampled accuracy reaches the
# target, per seed.

# %% tags=["parameters"]
preset = "smoke"   # "smoke": short CPU runs; "full": the preset's GPU configuration
recipes = ["grpo", "dr_grpo", "dapo", "rloo", "lite-ppo", "cispo"]
task = "countdown"
seeds = 1          # seeds 0..seeds-1 for every recipe
steps = None       # None: 15 on smoke, the preset's count on full
seed = 0           # unused here (each run uses its own seed index); kept for the common parameter set
solutions = False  # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch

from workbench.recipes import get_recipe
from workbench.train.compare import compare
from workbench.viz.run_curves import seed_band_curves, with_start

torch.set_num_threads(1)
sets = []
if steps or preset == "smoke":
    sets.append(f"steps={steps or 15}")
if preset == "smoke":
    sets += ["eval_size=50", "checkpoint_every=15"]
for key in recipes:
    r = get_recipe(key)
    chain = "+".join(u.key for u in r.advantage)
    print(f"{key:12s} advantage={chain:10s} objective={r.objective.key:9s} agg={r.agg:24s} {r.summary}")

# %% [markdown]
# ## Run
#
# Each (recipe, seed) is its own resumable run folder; re-running this cell only finishes what is missing.

# %%
out = Path(runs_dir) / f"07_compare-{task.replace(':', '_')}-{preset}-{'-'.join(sorted(sets))}".replace("=", "")
result = compare(recipes, task=task, preset=preset, seeds=seeds, out=out, sets=sets, progress=False)
for key, row in result["recipes"].items():
    print(f"{key:12s} greedy accuracy {row['accuracy_before']:.3f} -> {row['accuracy_after']:.3f}   "
          f"steps to sampled accuracy {result['target_accuracy']}: {row['steps_to_target']}")

# %% [markdown]
# ## Curves
#
# Lines are the mean over seeds, bands the min–max spread; with one seed (the smoke default) each line is that run
# and there is no band, as the figure's title says. Watch entropy (does a recipe collapse it?), the KL to the warm
# start, and the response length (does the aggregation mode push it?).

# %%
from workbench.train.metrics import read_rows

groups = {key: [read_rows(out / f"{key}-s{s}" / "metrics.jsonl") for s in range(seeds)] for key in recipes}
seed_band_curves(groups, keys=["reward/mean", "accuracy", "entropy", "kl", "clip/region",
                               "response_length/mean"]).show()

# %% [markdown]
# ## Stored runs: the same comparison at a scale where differences show
#
# The smoke runs above are a live check of the pipeline: a few steps, one seed, curves on top of each other. The
# stored runs are the comparison itself: every F1 recipe for 200 steps on countdown, 3 seeds each, from the same
# warm start, trained once by `make stored-runs` and stored in `data/stored_runs/f1-countdown.jsonl` with
# the command, commit and machine that made them. Read them as a benchmark of this toy setting, not of the
# methods at scale: what to look at is whether the recipes separate by more than the seed bands, which one
# collapses entropy first, and whether any grows its responses.

# %%
from workbench.results.stored_runs import load, made_by

stored = load("f1-countdown")
if stored is None:
    print("nothing stored yet: run `make stored-runs` (about an hour on a 2-core CPU)")
else:
    meta, stored_groups, summaries = stored
    print(made_by(meta))
    for key in stored_groups:
        after = [s["accuracy_after"] for s in summaries if s["recipe"] == key]
        before = [s["accuracy_before"] for s in summaries if s["recipe"] == key]
        print(f"{key:12s} greedy held-out accuracy {sum(before) / len(before):.3f} -> "
              f"{sum(after) / len(after):.3f} (seeds: {', '.join(f'{a:.3f}' for a in after)})")
    seed_band_curves(stored_groups, keys=["accuracy", "entropy", "kl", "response_length/mean"],
                     title=f"stored runs: {meta['name']} (mean and min-max over {meta['seeds']} seeds)").show()

# %% [markdown]
# ## A real model learns: SmolLM2-135M-Instruct on this CPU
#
# Everything above is the 0.5M-parameter character model. `--preset small` trains a real pretrained instruct model,
# SmolLM2-135M-Instruct, with no SFT: asked 1-digit products in words ("Solve the following multiplication: 2 * 6.
# Give only the result as your final answer."), it answers in sentences, and the last number of its reply is read as
# its answer (`answer_format="last_number"`). Untrained, it is right on 62% of the held-out prompts greedily and about
# 30% of the time when sampling at temperature 1: enough right answers in a group of 8 for GRPO to have a signal. The
# stored comparison `small-products` is GRPO with 3 seeds (40 steps of 4 prompts x 8 samples, 20-30 minutes per seed
# on this 2-core CPU); `small-products-trl` is TRL's `GRPOTrainer` from the same start with the same task, batch,
# lengths, learning rate and loss, evaluated by the same code (`bench/peer_trl.py`).
#
# What to look at: held-out greedy accuracy (`eval/accuracy`, every 10 steps; step -1 is the untrained model) should
# rise above its start by more than the seed band, and the two trainers' bands should overlap. A healthy run's mean
# reward climbs within the first 10-20 steps and its responses get shorter (it stops explaining and states the
# product); a reward that climbs while held-out accuracy does not is memorising the training prompts.

# %%
real = {name: load(name) for name in ("small-products", "small-products-trl")}
if real["small-products"] is None:
    print("not stored yet: python -m workbench.results.stored_runs small-products (about 1.5 hours on a 2-core CPU)")
else:
    real_groups = {}
    for name, label in (("small-products", "ours: grpo"), ("small-products-trl", "TRL GRPOTrainer")):
        if real[name] is None:
            print(f"{name}: not stored yet (bench/peer_trl.py)")
            continue
        meta, groups, summaries = real[name]
        print(f"{meta['command']}  (commit {meta['commit']}, {meta['machine']})" if "peer" in meta else made_by(meta))
        before = [s["accuracy_before"] for s in summaries]
        after = [s["accuracy_after"] for s in summaries]
        print(f"  {label}: greedy held-out accuracy {sum(before) / len(before):.3f} -> {sum(after) / len(after):.3f} "
              f"(seeds: {', '.join(f'{a:.3f}' for a in after)})")
        real_groups.update(with_start({label: next(iter(groups.values()))},
                                      [{**s, "recipe": label} for s in summaries]))
    seed_band_curves(real_groups, keys=["eval/accuracy", "reward/mean", "response_length/mean"],
                     title="SmolLM2-135M-Instruct, --preset small (mean and min-max over seeds)").show()

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. Which of the recipes above uses no KL term at all, neither in the loss nor in the reward? Answer with a
#    list of keys.
#
# Write your answer in the cell below (it starts as `None`) and run the check cell after it. The worked
# solution is in the folded cell in between: it fills in the answer only when the notebook runs with
# `-p solutions=True`.

# %%
no_kl = None   # 1: a list of recipe keys

# %% tags=["hide-input"]
# The solution, worked out: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercise first; in the book this cell is folded.
if solutions:
    # a KL term sits in a recipe's regularizers (kl-penalty: in the loss) or its reward shaping (kl-in-reward)
    kl_terms = {key: [u.key for u in get_recipe(key).regularizers + get_recipe(key).reward_shaping
                      if u.key.startswith("kl-")] for key in recipes}
    no_kl = [key for key, terms in kl_terms.items() if not terms]

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb07_compare import check_recipes_without_kl

check_answers([(1, no_kl, lambda a: check_recipes_without_kl(a, recipes))])
