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
# # Data that teaches: pools, curricula and replay
#
# A GRPO group teaches only when its rewards differ. On a prompt the policy solves with probability $p$, a group of
# $G$ samples has all rewards equal with probability $p^G + (1 - p)^G$: almost surely for the prompts it always or
# never solves, rarely for the ones it solves half the time. Uniform sampling from a pool of mixed difficulty spends
# most of its rollouts on groups that teach nothing. The methods of this family (F5, part 2) act on the data:
#
# - **which prompts**: a fixed pool revisited (`pool`), with a difficulty target (`dots-rr`: predicted pass rate near
#   1/2), a learned pass-rate model (`pcl`), a curriculum of unlabeled prompts whose pass-rate curves look like the
#   labeled ones (`trapo`), saturated prompts pruned (`rapo`), partial attempts as new start states (`exit`), more
#   rollouts for the hard ones (`dart`);
# - **which rows**: resample and keep the cleanest correct traces (`grpo-roc`), redraw by reward reliability
#   (`pf-ppo`), keep a central perplexity band (`bfs-prover-v2`), only high-entropy steps (`dart`);
# - **replay**: a stored success put into a group that fails throughout (`arpo-gui`, `rapo`), whole groups of earlier
#   steps trained again with a behaviour-corrected ratio (`dots-rr`, `remix`), self-imitation of good trajectories
#   (`spear`, `a3t`), expert solutions where the group fails (`ahpo`).
#
# This notebook shows what these components hold and do in a real run:
#
# 1. **a pool's pass rates over training**: each prompt of a pool, each step it was sampled, as a heatmap;
# 2. **a replay buffer's age and reward mix** over the run's checkpoints (`workbench inspect RUN` in a notebook);
# 3. **what Resample-on-Correct keeps** of each oversampled group;
# 4. **the sample-efficiency comparison**: held-out accuracy against rollouts spent, 3 seeds, with the share of
#    groups without signal and the wall time per step;
# 5. each paper's claim against what the runs show, and exercises.
#
# ## Key equations
#
# The share of a prompt's groups with a signal (rewards that differ), for 0/1 rewards and pass rate $p$, is PCL's
# *effective ratio*, maximal at $p = 1/2$:
#
# $$\rho(p, G) = 1 - p^G - (1 - p)^G .$$
#
# DOTS predicts each prompt's difficulty $\hat d_q$ (its failure rate; measured prompts by their last pass rate,
# the others by attention over the measured ones' features) and samples prompts without replacement with
# probabilities
#
# $$P(q) \propto \exp\!\big(-|\hat d_q - \alpha| / \tau\big), \qquad \alpha = 0.5,\ \tau = 10^{-3},$$
#
# nearly greedy towards the prompts it expects half solved. A replay buffer holds rows of earlier steps with their
# behaviour log-probs $\mu$; a replayed row is trained with $\mathrm{sg}(\pi_{old}/\mu)\cdot\ell^{PPO}(\pi_\theta /
# \pi_{old})$ (`dots-rr-clip`), importance-corrected to the policy that sampled it and clipped around the current one.
# Resample-on-Correct samples $n = 2G$ traces, drops the groups whose rewards are all equal, and keeps $G$ with the
# negatives' share kept: $k_- = \mathrm{round}(n_- G / n)$, $k_+ = G - k_-$ (at least 2 of each when there are), the
# correct traces of lowest penalty $p_{err} + p_{format}$ first.

# %% tags=["parameters"]
preset = "smoke"      # "smoke": a 40-step run on the tiny model (about a minute after the cached warm start)
seed = 0              # the run's and the batches' seed
pool_recipe = "dots-rr"  # section 1-2: a recipe that samples a pool and keeps a replay buffer
pool_steps = 40       # section 1-2: RL steps of that run
pool_size = 32        # section 1-2: prompts in its pool
roc_sft_steps = 150   # section 3: SFT steps of the calculator warm start (notebook 14's)
stored_runs_dir = None  # where the stored runs are read from (None: data/stored_runs)
solutions = False     # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"     # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import HTML, display
from transformers.utils import logging as hf_logging

from workbench.train import Trainer, make_config, train
from workbench.train.inspection import inspect_run
from workbench.train.metrics import read_rows
from workbench.viz import data_figures as df
from workbench.viz.widgets import explorer, slider

torch.set_num_threads(1)
hf_logging.disable_progress_bar()
big = preset != "smoke"

# %% [markdown]
# ## 1. A pool's pass rates over training
#
# Countdown with 2 to 5 numbers: after the warm start the policy solves about 3 in 4 puzzles of 2 numbers and 1 in 10
# of 5 (the stored comparison's base rates). The recipe below samples a fixed pool of `pool_size` of them, 8 a step,
# and keeps each prompt's pass rate (the share of its group that is right) every time it samples it. The run keeps a
# checkpoint every 5 steps; `inspect_run` reads the sampler's and the buffer's state out of each (the notebook form of
# `workbench inspect RUN`).

# %%
config = make_config("smoke", recipe=pool_recipe, seed=seed, task="countdown",
                     task_kw={"min_numbers": 2, "n_numbers": 5}, steps=pool_steps * (3 if big else 1),
                     prompts_per_step=8, group_size=8, eval_size=100, checkpoint_every=5, keep_checkpoints=40,
                     recipe_overrides={"sampler": {"size": pool_size}})
out = Path(runs_dir) / f"15_data_and_replay-{pool_recipe}-{config.short_hash()}"
summary = train(config, out, progress=False, report=False)  # resumes if already run
rows = read_rows(out / "metrics.jsonl")
info = inspect_run(out)
pool_key = next(k for k in info["components"] if k.startswith("sampler:"))
pool = info["components"][pool_key]
numbers = {p["id"]: f"{len(p['prompt'].split('>')[0].split())}n" for p in pool["prompts"]}  # "2 4 4 6>12:": 4n
print(f"{pool_recipe}: {len(rows)} steps, greedy held-out accuracy {summary['accuracy_before']:.3f} -> "
      f"{summary['accuracy_after']:.3f}; the pool: {pool['size']} prompts, {len(pool['chosen'])} steps of choices")

# %%
size_order = sorted(numbers, key=lambda i: (numbers[i], i))
df.pass_rate_heatmap(pool, labels=numbers, order=size_order,
                     title=f"{pool_recipe}: each pool prompt's pass rate at the steps it was sampled<br><sup>rows: "
                           "prompts by how many numbers the puzzle has (2n ... 5n); blank: not sampled that step"
                           "</sup>").show()

# %% [markdown]
# **What to look at:** each row is one prompt, each coloured cell a step that sampled it. A uniform epoch sampler
# visits every row once per epoch; a difficulty-targeted one (DOTS) comes back to the rows whose pass rate sits
# mid-scale and leaves the yellow (always solved) and dark (never solved) ones alone once it has measured them. In a
# healthy run the 2- and 3-number rows drift towards yellow (learned), and the rows sampled most are the ones in
# between. Hover a cell for the prompt.
#
# The share of a prompt's groups that carry any signal, $\rho(p, G)$, against its pass rate; the dots are the pool's
# prompts at their last measured pass rate. Move $G$: more samples a prompt give the extreme prompts a signal more
# often, at $G$ times the cost.

# %%
last = {p["id"]: p["pass_rates"][-1][1] for p in pool["prompts"] if p["pass_rates"]}


def signal_curve(G):
    ps = [i / 200 for i in range(201)]
    fig = go.Figure(go.Scatter(x=ps, y=[1 - p ** G - (1 - p) ** G for p in ps], name=f"rho(p, G={G})"))
    xs = list(last.values())
    fig.add_trace(go.Scatter(x=xs, y=[1 - p ** G - (1 - p) ** G for p in xs], mode="markers", name="pool prompts",
                             marker=dict(size=8, opacity=0.6)))
    fig.update_layout(template="plotly_white", height=360, xaxis_title="pass rate p", yaxis=dict(range=[0, 1.05]),
                      yaxis_title="share of groups with a signal", title=f"rho(p, G) = 1 - p^G - (1-p)^G at G = {G}")
    return fig


explorer({"G": W.IntSlider(value=8, min=2, max=32, description="G", continuous_update=False)}, signal_curve)

# %% [markdown]
# ## 2. A replay buffer's age and reward mix
#
# The same run's replay buffer at each kept checkpoint: how many rows it holds, how long ago they were added, and
# what rewards they carry. Every buffer here is bounded (a capacity, a per-prompt bound, and for some a maximum age),
# and the oldest rows leave first.

# %%
steps_kept = sorted(int(p.name.split("_")[1]) for p in (out / "checkpoints").glob("step_*") if p.is_dir())
snapshots = []
for step in steps_kept:
    view = inspect_run(out, step)["components"]
    buffers = [(name, v) for name, v in view.items() if v.get("type") == "replay buffer"] + [
        (f"{name}.{k}", b) for name, v in view.items() if "type" not in v for k, b in v.items()
        if isinstance(b, dict) and b.get("type") == "replay buffer"]
    if buffers:
        snapshots.append((step, buffers[0][1]))
if snapshots:
    print(f"{buffers[0][0]}: capacity {snapshots[-1][1]['capacity']} rows, per prompt {snapshots[-1][1]['per_key']}, "
          f"max age {snapshots[-1][1]['max_age']}; at step {snapshots[-1][0]}: {snapshots[-1][1]['size']} rows of "
          f"{snapshots[-1][1]['prompts']} prompts, {snapshots[-1][1]['added']} added and {snapshots[-1][1]['evicted']} "
          "evicted so far")
    df.buffer_mix_figure(snapshots, title=f"{pool_recipe}'s replay buffer at each checkpoint").show()
else:
    print(f"{pool_recipe} keeps no replay buffer")

# %% [markdown]
# **What to look at:** the stacked bars are the buffer's rows by age. A buffer that keeps groups (DOTS: the latest
# group of each question) fills up to its capacity and then turns over, so its age mix settles; one that keeps
# only successes (ARPO: 8 per prompt) grows with the number of prompts ever solved. The lower panel says what the
# rows hold: DOTS stores whole groups (rewards 0 and 1 mixed, the share of successes follows the policy's), ARPO
# only successes (share 1). A buffer whose rows all grow old means the sampler no longer revisits their prompts: its
# replay trains on a policy long gone (the behaviour weight $\pi_{old}/\mu$ corrects the ratio, not the relevance).
#
# ## 3. What Resample-on-Correct keeps of a group
#
# rStar2-Agent's RoC samples $2G$ traces a prompt and keeps $G$: the groups whose rewards are all equal are dropped
# whole, the rest keep their share of failures and, among the correct traces, those with the fewest tool errors and
# answer-format faults. On the calculator tool task (the agent calls `[a+b]` and ends with `A:<number>`), after a
# short warm start, one real batch of 16 traces a prompt, down-sampled to 8 by the transform's own function:

# %%
from workbench.transforms.grpo_roc import penalties, roc_kept

roc_config = make_config("smoke", recipe="grpo", seed=seed, task="calculator", task_kw={"n_operands": 3, "digits": 1},
                         sft_steps=roc_sft_steps, prompts_per_step=8, group_size=16, max_new_tokens=8, eval_size=16)
roc_trainer = Trainer(roc_config, Path(runs_dir) / f"15_data_and_replay-roc-{roc_config.short_hash()}",
                      progress=False).setup()
roc_batch = roc_trainer.make_batch(0)
roc_trainer.close()
penalty, counts = penalties(roc_batch)
kept, informative = roc_kept(roc_batch.rewards, roc_batch.group, penalty, keep=8)
roc_groups = df.roc_grid(roc_batch.rewards, roc_batch.group, penalty, kept)
print(f"{roc_batch.size} traces of {len(roc_groups)} prompts; {sum(not g['informative'] for g in roc_groups)} groups "
      f"with all rewards equal (dropped); {len(kept)} traces kept; tool responses {counts['responses']}, of which "
      f"errors {counts['errors']}")
df.roc_figure(roc_groups, title="Resample-on-Correct: 16 traces a prompt, 8 kept<br><sup>green correct, red wrong; "
                                "filled kept, hollow dropped; grey rows: all rewards equal, dropped whole</sup>").show()

# %% [markdown]
# **What to look at:** in a group with both colours, the kept traces keep the failures' share (rounded, at least 2 of
# each side when the group has them), and among the correct ones the kept are those of lowest penalty (hover: the
# penalty); ties keep the rollout order. A grey row is a group RoC drops: all its rewards are equal, it carries no
# signal. On countdown (no tools, no answer tags) every correct trace has the same penalty, so the ranking cannot act
# and RoC reduces to dropping the equal groups from twice the rollouts.
#
# ## 4. The sample-efficiency comparison
#
# The claim of most of these papers: reach GRPO's accuracy with fewer rollouts, because fewer groups are wasted. The
# stored comparison `f5-data-countdown` trains each recipe 100 steps of 16 prompts × G = 8 on countdown with 2 to 5
# numbers from the same warm start, 3 seeds (`python -m workbench.results.stored_runs f5-data-countdown`). Each panel:
# held-out greedy accuracy (200 puzzles) against the rows sampled so far (`rollouts/total`: resampling and
# replayed-group savings included), the method's mean over seeds and its min–max band against its baseline in grey:
# GRPO on the same pool of 64 prompts (`grpo-pool`) for the methods that sample a pool, GRPO on fresh prompts for
# the others.

# %%
from workbench.recipes import get_recipe
from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.results.stored_runs import load, made_by
from workbench.viz.credit_comparisons import against_baseline_grid
from workbench.viz.run_curves import with_start
from workbench.viz.tables import claims_html

name = "f5-data-countdown"
stored = load(name) if stored_runs_dir is None else load(name, data_dir=Path(stored_runs_dir))
if stored is None:
    print(f"no stored comparison {name} yet: make it with `python -m workbench.results.stored_runs {name}`")
else:
    meta, runs, summaries = stored
    print(made_by(meta))
    curves = with_start(runs, summaries)
    on_pool = {k for k in curves if get_recipe(k).sampler.key != "uniform"}  # read against GRPO on the same pool
    for baseline, keys in (("grpo-pool", sorted(on_pool, key=list(curves).index)),
                           ("grpo", [k for k in curves if k not in on_pool or k == "grpo-pool"])):
        against_baseline_grid({k: curves[k] for k in keys if k in curves}, key="eval/accuracy", baseline=baseline,
                              x_key="rollouts/total",
                              title=f"{name}: held-out accuracy against rollouts spent, against {baseline} (grey)<br>"
                                    "<sup>colour: the method; lines: mean over seeds, bands: min–max; the first point: "
                                    "the warm start</sup>").show()
    with pd.option_context("display.max_colwidth", None):
        display(pd.DataFrame(df.efficiency_rows(runs, summaries)).set_index("recipe"))

# %% [markdown]
# The table: held-out accuracy after 100 steps (mean ± std over seeds), the rows each recipe sampled, what it gained
# over the warm start per 1,000 of them, the share of its groups without reward spread (mean over steps; a transform
# that adds rows to a group changes what this counts), and wall seconds per step on this 2-core CPU (runs two at a
# time beside other jobs: a rough guide).
#
# **What the stored runs show** (3 seeds; each claim below has its numbers). A healthy data-selection method would lie
# left of the grey band (the same accuracy with fewer rollouts) or above it, and its share of groups without spread
# would be well under GRPO's. Here:
#
# - a fixed pool of 64 prompts costs against fresh prompts (`grpo-pool` 0.247 against `grpo` 0.283: each prompt is
#   seen 25 times), so the pool-based methods are read against `grpo-pool`, as the papers compare on one dataset;
# - selection gives more signal, not more accuracy: PCL cuts the groups without spread from 64 % to 37 %, DOTS to
#   51 %, but both concentrate on the 3- and 4-number puzzles (and RAPO prunes the solved 2-number ones), while the
#   held-out set keeps every size: their curves end below the band;
# - replay saves rollouts: DOTS's half-replayed steps sample 6,528 rows instead of 12,800, and without the behaviour
#   weight (`dots-rr-ppo`) it ends at `grpo-pool`'s accuracy; with `dots-rr-clip`'s untruncated $\pi_{old}/\mu$ (up to
#   3.4 on rows 12 steps old) it ends lower, and truncated at 1 (`cap=1.0`, 3 seeds not stored) it is back at 0.247;
# - DART is the one method above its baseline: 16 % fewer rollouts (2 a prompt for the prompts it solves) and the
#   higher-entropy half of each step trained, 0.270 against `grpo-pool`'s 0.247.
#
# ## 5. Claim vs what we see
#
# Each method's central claim as we read it, and what its comparison shows over seeds (the same rows as the book's
# claims page); where the mechanism cannot act here, the row says why.

# %%
F5_DATA_KEYS = ("arpo-gui", "arpo-gui-no-replay", "grpo-roc", "pf-ppo", "bfs-prover-v2", "ahpo", "rl4mle-duration",
                "dots-rr", "dots-rr-clip", "pcl", "trapo", "rapo", "spear", "remix", "exit", "a3t", "dart")
print(VERDICT_RULE)
display(HTML(claims_html([row for row in claims_table() if row["recipe"] in F5_DATA_KEYS])))

# %% [markdown]
# ## Exercises
#
# 1. A prompt the policy solves 1 time in 10, sampled in groups of $G = 8$: what share of its groups carry a signal
#    (rewards that differ)? And a prompt solved half the time? Two numbers, $\rho(0.1, 8)$ first.
# 2. Resample-on-Correct samples $n = 16$ traces of a prompt, 3 of them correct, and keeps $G = 8$ with at least 2 of
#    each sign. How many correct traces does it keep, and how many wrong ones? Two whole numbers, correct first.
# 3. DOTS samples with probabilities $\propto \exp(-|\hat d - \alpha|/\tau)$. Three prompts have predicted difficulty
#    $\hat d = 0.5, 0.4, 0.9$; with $\alpha = 0.5$ and a softer $\tau = 0.1$, what is the probability that the first
#    draw is the second prompt ($\hat d = 0.4$)?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
signal_shares = None     # 1: [rho(0.1, 8), rho(0.5, 8)]
roc_counts = None        # 2: [correct kept, wrong kept]
p_second = None          # 3: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    signal_shares = [1 - 0.1 ** 8 - 0.9 ** 8, 1 - 2 * 0.5 ** 8]     # 0.570 and 0.992
    roc_counts = [2, 6]  # k_- = round(13 * 8 / 16) = round(6.5) = 6 (half to even), k_+ = 8 - 6 = 2 >= 2
    weights = [math.exp(-abs(d - 0.5) / 0.1) for d in (0.5, 0.4, 0.9)]  # 1, e^-1, e^-4
    p_second = weights[1] / sum(weights)                            # 0.2654

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb15_data_and_replay import check_dots_probability, check_roc_counts, check_signal_shares

check_answers([(1, signal_shares, check_signal_shares),
               (2, roc_counts, check_roc_counts),
               (3, p_second, check_dots_probability)])
