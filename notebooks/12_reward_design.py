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
# # Reward design: what the policy is actually paid for
#
# Every notebook so far trained on one number per answer: the verifier's 1 (solved) or 0. The F6 family of
# methods changes that number. Some add a second reward next to it (a length penalty, a format bonus, a tool-call
# bonus), some replace it by a richer one (a length-scaled correctness, a checklist, tiers of "nearly right"), some
# reshape it with group statistics or judges. Each extra term is a new thing the policy can optimize, on purpose or
# not. This notebook takes them apart:
#
# 1. the key equations of every registered F6 component, from the registry, and how the reward stage combines
#    several rewards (an explorer: when a large-scale reward drowns correctness, and when it does not);
# 2. the length rewards against the response length (explorer), and the stored comparison `f6-length`;
# 3. a reward that can be gamed (a reward model's length bias), the stored comparison `f6-hacking`, and CGPO's
#    judges as the fix;
# 4. the per-reward curves of a multi-reward run (live at smoke, and stored);
# 5. one small picture per process reward: CM2's checklist, SRPO, ReflexiCoder, SPEAR, RetroAgent, SSL, FAPO;
# 6. each paper's claim against what the stored runs show;
# 7. exercises.
#
# ## Key equations
#
# A reward function has TRL's signature, `fn(completions, **columns) -> list[float | None]`: one value per answer,
# `None` where the reward does not apply to that row (TRL turns it into NaN). The reward stage of the pipeline
# computes the environment's verifier score $s_i$ (`batch.scores`, 1.0 = solved) and every reward function
# $r_{ik}$ of the recipe, and combines them into the one reward $R_i$ the advantage reads, in one of two ways
# (`workbench.rewards.aggregate.combine`, the recipe's `reward_aggregation`):
#
# $$\mathtt{sum\_then\_normalize}\text{:}\quad R_i = w_0\, s_i + \sum_k w_k\, r_{ik}$$
#
# (TRL's default; GRPO then normalizes $R$ in its group), or
#
# $$\mathtt{normalize\_then\_sum}\text{:}\quad R_i = w_0\, \hat s_i + \sum_k w_k\, \hat r_{ik}, \qquad
#   \hat r_{ik} = \frac{r_{ik} - \mathrm{mean}_{g}\, r_{k}}{\mathrm{std}_{g}\, r_{k} + 10^{-4}}$$
#
# (each reward z-scored within its group $g$ first),
# with $w_0$ the recipe's `task_reward` (0 where the paper's reward already holds the verdict) and $w_k$ each reward's
# `weight`. A `None` is left out of every sum, mean and std; a row no reward applies to is masked out of the update.
# A run with reward functions logs `rewards/<name>/mean` and `rewards/<name>/std` for each of them (and for the
# verifier's score, as `task`) over the rows it applies to, next to `reward/mean`, the combined reward after any
# reward shaping.

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU; "full": the preset's GPU model
task = "countdown"   # the task of the live multi-reward run (section 4)
agg_scale = 10.0     # section 1: the length reward's scale in the explorer's static picture
agg_weight = 0.5     # section 1: its weight (the verifier's is 1)
max_len = 10         # section 2: the budget L of the length-reward pictures (countdown's max_new_tokens at smoke)
buffer = 2           # section 2: soft-overlong's buffer C (the soft-overlong recipe's: DAPO's 4096 / 20480 of L)
multi_rewards = [["soft-overlong", {"buffer": 4}], ["repetition-penalty", {"unit": "tokens", "n": 2}]]  # section 4
multi_aggregation = "normalize_then_sum"  # section 4: the live run's reward_aggregation
multi_steps = None   # section 4: None -> 8 steps on smoke, the preset's count on full
checklist_actions = ["[37*40]", "[1776+19]", "[37*48]", "[1776+19]", "A:1795"]  # section 5: one calculator episode
judge_noise = 0.0    # section 5: the checklist judge's label-flip probability (0: exact)
stored_runs_dir = None  # where the stored runs are read from (None: data/stored_runs)
seed = 0
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from IPython.display import HTML, Markdown, display
from transformers.utils import logging as hf_logging

from workbench.results.stored_runs import COMPARISONS, load, made_by
from workbench.viz.reward_curves import (aggregation_advantages, aggregation_explorer, checklist_grid_figure,
                                         fapo_figure, fapo_rows, family_recipes, hacking_figure, length_explorer,
                                         length_table, per_reward_figure, reflection_figure, reward_names,
                                         reward_spread, schedules_figure, ssl_figure, stored_summary_text)
from workbench.viz.run_curves import seed_band_curves
from workbench.viz.tables import before_after_table, equations_markdown

torch.set_num_threads(1)
torch.manual_seed(seed)
hf_logging.disable_progress_bar()
ACCURACY = (("accuracy", "greedy accuracy"),)  # the F6 comparisons evaluate greedy held-out accuracy only


def stored(name):
    """A stored comparison (meta, recipe -> rows per seed, summaries), or None with a note on making it."""
    data = load(name) if stored_runs_dir is None else load(name, data_dir=Path(stored_runs_dir))
    if data is None:
        ref = COMPARISONS[name]
        print(f"The {name} runs are not stored yet (data/stored_runs/{name}.jsonl). Make them with\n"
              f"    python -m workbench.results.stored_runs {name}\n({len(ref.recipes)} recipes x {ref.seeds} seeds, "
              f"{' '.join(ref.sets)}; resumable), then run this notebook again.")
    else:
        meta = data[0]
        print(made_by(meta))
    return data


# %% [markdown]
# ## 1. Every F6 component, and how several rewards combine
#
# Every F6 component as registered (generated from `workbench.registry`, so a new registration appears here; the
# `length-bias` row is this notebook's teaching example, not a paper):

# %% mystnb={"markdown_format": "myst"}
display(Markdown(equations_markdown("rewards")))

# %% [markdown]
# Read the table by kind: `reward` is a function of TRL's signature, added to (or replacing) the verifier's score;
# `reward_shaping` rewrites the batch's rewards with what a reward function cannot see (group statistics: ARLCP's
# z-scores, CGPO's calibration; state across steps: RetroAgent's best prior success; per-round samples: EAPO);
# `rollout`, `advantage`, `group_transform` and `controller` are the other slots a method needs (HBPO's budget
# prompts, RLVMR's step advantage, PRS's stage switch).
#
# ### Two rewards, one advantage
#
# One group of 8 answers to one prompt (budget 10 tokens): three are right and short, five wrong and mostly long.
# Two rewards: the verifier's 0/1 (weight 1) and a reward that pays length, the registered `length-bias`
# $|y|/L$, times a **scale** (a reward model whose scores run from 0 to the scale) with a **weight** $w_2$. The
# explorer combines them with each aggregation through `aggregate.combine` and computes the `grpo` advantages;
# right: the right answers' mean advantage against the scale, both modes. The static picture is scale 10, weight
# 0.5.

# %%
aggregation_explorer(scale=agg_scale, weight=agg_weight)

# %% [markdown]
# What to look at:
#
# - **Under `sum_then_normalize` the scale is a weight.** $R = s + w_2 \cdot \text{scale} \cdot |y|/L$: at scale 10
#   the length term spans up to 5 points against the verifier's 1, so the two longest wrong answers get the largest
#   advantages and the right answers' mean advantage is negative (right panel: the orange curve crosses 0 near
#   scale 9; past scale 4 some wrong answer already outranks a right one). Nobody chose to weigh length ten times
#   more; the reward model's units did.
# - **Under `normalize_then_sum` the scale cancels**: each reward is z-scored in the group first, so the green curve
#   is flat, and the weight alone says how much length counts against correctness. It is not a free pass: move $w_2$
#   to 1 and a long wrong answer outranks a right one at every scale (length is anti-correlated with correctness
#   here, and the two z-scores then count equally).
# - A healthy multi-reward run shows it in the logs: `rewards/task/mean` rising, and no auxiliary reward whose
#   $w_k \cdot$ `rewards/<name>/std` dwarfs the verifier's (under `sum_then_normalize` that reward steers the
#   advantage).

# %%
for scale in (1.0, agg_scale):
    d = aggregation_advantages(scale, agg_weight)
    for mode in ("sum_then_normalize", "normalize_then_sum"):
        print(f"scale {scale:4g}, {mode:18s}: right answers' mean A {d[mode]['correct_mean']:+.3f}, every right "
              f"answer above every wrong one: {d[mode]['dominant']}")

# %% [markdown]
# ## 2. Length rewards
#
# Four ways to pay for length, each drawn by calling the registered function on answers of every length $|y|$
# (tokens, EOS included) with a `scores` column for the verdict:
#
# - **`cosine-length`** (Demystifying long CoT) holds the correctness term: a right answer earns 1.0 when short and
#   0.5 at the budget, a wrong one $-1.0$ when short and $-0.5$ at the budget, on a cosine in $|y|/L$;
# - **`soft-overlong`** (DAPO) is a penalty alone, added to the verifier: 0 up to $L - C$, linear to $-1$ over the
#   last $C$ tokens (shaded);
# - **`hbpo-reward`** (HBPO) conditions on a budget $b$ the prompt announces ("I will answer the question within
#   $b$ tokens", written by its rollout: $b$ = 1/8, 1/4, 1/2, 5/8 of the budget, as the paper's 512 to 2560 of a
#   4096-token context): a right answer within $b$ earns
#   $\cos(\pi b / 2L)$, past it $\cos(\pi n / 2L) - \alpha |n - b|$; a wrong one 0;
# - **`arlcp`** (ARLCP) is a reward shaping: a correct response loses $w_1\sigma(z_c) + w_2\sigma(z_L)$, its
#   reflection-word count and length z-scored against the group's other correct responses ($w_1 + w_2 = 0.2$, $w_1$
#   growing with the count: the dotted lines are the bracket edges $c = 40, 80$). The heatmap puts one correct
#   response with $c$ reflection words and $L$ tokens in a group of seven others.
#
# The explorer needs a live kernel; its static picture is the countdown budget $L = 10$ with the `soft-overlong`
# recipe's buffer $C = 2$.

# %%
length_explorer(max_len=max_len, buffer=buffer)

# %% [markdown]
# What to look at:
#
# - **The two cosines pull in opposite directions.** A right answer gains by being short; a wrong one by being
#   *long* ($-1$ when short, $-0.5$ at the budget), meant as "when you cannot solve it yet, think longer".
#   A policy that is mostly wrong may therefore grow longer under `cosine-length`, not shorter.
# - **`soft-overlong` is flat until the buffer**: it changes nothing for answers shorter than $L - C$, and then costs
#   up to as much as a right answer earns.
# - **HBPO's budgets rank themselves**: the smaller the announced budget, the more a right answer within it earns.
#   Every budget sits below $L$ (the paper's $L_{max}$ is the context length), so a right answer always earns more
#   than a wrong one; at $b = L$ it would earn $\cos(\pi/2) = 0$, a wrong answer's pay. $\alpha = 10^{-3}$ per token
#   of overrun is invisible at $L = 10$.
# - **ARLCP's penalty lives in $[0, 0.2]$**: more reflection and more length than the other correct answers both cost,
#   and crossing a bracket edge moves weight from the length term to the reflection term (the jumps along $z_c$).
#
# At countdown's scale the numbers are small. Its answers are 4 to 8 tokens of a 10-token budget, the lengths this
# table covers:

# %%
print(length_table(max_len, buffer))

# %% [markdown]
# So with $C = 2$, `soft-overlong` only touches answers of 9 and 10 tokens, which the warm-started model rarely
# writes (its `truncated_frac` is near 0): expect the `soft-overlong` runs to look like GRPO's. `cosine-length`
# separates a 4-token from an 8-token right answer by 0.28 (against a right-wrong gap of 1.1 to 1.65 at those
# lengths): it can shorten right answers, and it pays the same 0.28 for lengthening a wrong one. HBPO's budgets of
# 1, 3, 5 and 6 tokens are announced in a sentence the tiny model never saw in its warm start; with it in the
# prompt the model almost never answers right (none in 10 steps with it first), so `hbpo-reward` is not in the
# comparison (its claim below says so).
#
# **The stored comparison `f6-length`.** GRPO, `soft-overlong`, `cosine-length` and `arlcp` from the same countdown warm
# start, 3 seeds each, lr $3\cdot10^{-4}$, 80 steps (`workbench/results/stored_runs.py`). Lines are the mean over seeds,
# bands the min–max; the table is greedy held-out accuracy before and after.
#
# What a healthy curve looks like: **response length falling (or holding) while accuracy holds or rises, and
# `truncated_frac` near 0.** A length reward has failed when accuracy pays for the shorter answers, or when length
# moves the wrong way (longer wrong answers under the cosine).

# %%
f6_length = stored("f6-length")
if f6_length is not None:
    meta, length_groups, length_summaries = f6_length
    seed_band_curves(length_groups, keys=["response_length/mean", "accuracy", "truncated_frac", "entropy"],
                     title=f"stored runs {meta['name']}: mean, min-max over {meta['seeds']} seeds").show()
    before_after_table(length_summaries, metrics=ACCURACY,
                       title="greedy held-out accuracy before → after 80 steps (mean ± std over seeds)").show()
    print("first -> last logged value (mean over seeds), and held-out accuracy:")
    print(stored_summary_text(length_groups, length_summaries))

# %% [markdown]
# **What the stored runs show** (3 seeds): GRPO shortens its answers a little by itself (6.70 → 6.17
# tokens) while held-out accuracy goes 0.36 → 0.40 ± 0.06. `soft-overlong` with $C = 2$ fires on a handful of 9- and
# 10-token answers (`rewards/soft-overlong/mean` is never below −0.02) and ends where GRPO does (6.17 tokens,
# 0.397 ± 0.060): nothing to cut, nothing lost. `cosine-length` does the opposite of its claim here: answers **grow**
# to 9.2 tokens, a third of them truncated, and held-out accuracy falls to 0.16 ± 0.12 (0.13, 0.05, 0.29 by seed).
# The mechanism is the one the explorer shows. With three answers in four wrong, the wrong branch's slope ($-1$ when
# short, $-0.5$ at the budget) is the strongest signal in most groups, and a longer wrong answer is easier to write
# than a right one; once a group is all wrong (seed 1 solves none of its training batch by step 40), length is all
# that is left to optimize. The paper's setting has long chains of thought in which length can buy correctness;
# countdown's 4- to 8-token expressions cannot. `arlcp` (run as its script: RLOO with KL in the reward) has only its
# length term to act with, since the policy writes no reflection words: it ends at 6.09 tokens against GRPO's 6.22
# and held-out accuracy 0.37 ± 0.04, neither beyond seed noise.
#
# How to read it: compare each recipe with GRPO on the same seeds (the warm start is shared, so the curves start
# together). `response_length/mean` and `truncated_frac` are the training batch's own, logged every step (stored every
# 5th); `accuracy` is the training batch's share of solved answers, the table's numbers are on held-out prompts. A
# length difference of half a token is a real change here (answers are 4 to 8 tokens), but only if it is wider than
# the seed band.
#
# ## 3. A reward that can be gamed
#
# A reward model trained on human preferences often likes long answers: length looks thorough. `length-bias`
# isolates that bias as a reward, $|y| / L$ (`workbench/rewards/proxy.py`), and the `length-bias` recipe adds it to
# the verifier. On a prompt the policy solves, a right short answer still beats a long wrong one ($1 + 0.5$ against
# $0 + 1$); on a prompt it **cannot** solve, the verifier says nothing (every answer 0) and the proxy is the whole
# signal: the longest answer gets the largest advantage, including answers cut at the budget.
#
# CGPO's fix (`length-bias-cgpo`) is a mixture of **judges** that flag constraint violations, here the format judge
# (an answer cut at the budget) and the length judge (more than 9 of the 10 tokens: above every right countdown
# answer, which is at most 8 tokens with EOS); a flagged answer gets $-1$, the
# others the calibrated $\sigma(R - \mathrm{mean}_g R)$ (`workbench/rewards/judges.py`). The picture computes both
# groups through the registered `length-bias` reward, the reward stage's sum and the registered `cgpo` shaping:

# %%
hacking_figure().show()

# %% [markdown]
# What to look at: on the unsolvable prompt plain GRPO gives every answer $A = 0$, `length-bias` ranks the answers by
# length (the two cut ones on top), and under CGPO's judges every flagged answer (⚑) is pushed down. Note what the
# judges do *not* do: among the answers they let through, the calibrated reward $\sigma(R - \bar R)$ still prefers the
# longer one (the 9-token answer is on top). A judge removes the worst exploit, up to its threshold; the bias below
# the threshold stays.
#
# **The stored comparison `f6-hacking`** trains GRPO, `length-bias`, `length-bias-cgpo` and `length-bias-cgpo-tight`
# (the length judge at 3/4 of the budget, 7.5 tokens, which also flags the 8-token right answers: about 30% of
# countdown's targets) in the same setting as `f6-length`. What a hacked run looks like: **the proxy
# (`rewards/length-bias/mean`) rising while accuracy falls, response length and `truncated_frac` rising**: the policy
# found it cheaper to pad than to solve. A healthy one: the proxy and accuracy move together, or the proxy stays flat
# while accuracy rises as GRPO's does. Under CGPO the proxy is still logged (it is the raw reward function before the
# judges), but padding past a judge's threshold no longer pays.

# %%
f6_hacking = stored("f6-hacking")
if f6_hacking is not None:
    meta, hacking_groups, hacking_summaries = f6_hacking
    seed_band_curves(hacking_groups, keys=["accuracy", "rewards/length-bias/mean", "response_length/mean",
                                           "truncated_frac"],
                     title=f"stored runs {meta['name']}: mean, min-max over {meta['seeds']} seeds").show()
    before_after_table(hacking_summaries, metrics=ACCURACY,
                       title="greedy held-out accuracy before → after 80 steps (mean ± std over seeds)").show()
    print("first -> last logged value (mean over seeds), and held-out accuracy:")
    print(stored_summary_text(hacking_groups, hacking_summaries,
                              keys=("rewards/length-bias/mean", "response_length/mean", "truncated_frac")))

# %% [markdown]
# How to read it: the proxy's panel has no GRPO line (GRPO has no `length-bias` reward to log). Compare the other
# three panels across all recipes: if `length-bias` ends longer, more often truncated and less accurate than GRPO, and
# `length-bias-cgpo` does not, the proxy was gamed and the judges stopped it. If the three lie together, 80 steps at
# this scale were not enough for the policy to find the exploit.
#
# **What the stored runs show** (3 seeds): the proxy was gamed. Under `length-bias` its mean climbs from 0.67 to
# 0.98 (answers at the budget), response length from 6.7 to 9.8 tokens, half of the last batches truncated, and
# held-out accuracy falls from 0.36 to 0.04 ± 0.02: the policy stopped solving prompts it used to solve, because
# padding paid more reliably. Under CGPO's judges the padding to the budget stops (nothing truncated), but the policy
# pads **up to the judge's threshold** instead: 8.3 tokens, the proxy at 0.83, held-out accuracy 0.16 ± 0.15, no
# better than `length-bias` beyond seed noise. The judge's threshold is itself a proxy, and it is gamed the same way.
# The tight judge leaves no room to pad (6.2 tokens, the proxy at 0.62, accuracy 0.34 ± 0.11, near GRPO's
# 0.40 ± 0.06), at the price of punishing right answers that happen to be long. Neither threshold is free: the
# papers' judges work when the constraint they check is the one the reward model gets wrong, not a stand-in for it.
#
# ## 4. Per-reward curves of a multi-reward run
#
# A recipe with several reward functions logs each of them separately. The notebook trains a few steps of GRPO on the
# task with two extra rewards (`multi_rewards`: DAPO's soft overlong penalty with a 4-token buffer, so that it bites
# on countdown's 7- and 8-token answers too, and the token-bigram repetition penalty) combined by `multi_aggregation`,
# the verifier's score kept (`task`), and plots every `rewards/<name>/mean` of its metrics, with the batch's
# `rewards/<name>/std` as a band. At smoke this is a check that the logging works, not a result.

# %%
from workbench.train import make_config, train
from workbench.train.metrics import read_rows

steps = multi_steps or (8 if preset == "smoke" else None)
kw = dict(recipe="grpo", task=task, seed=seed,
          recipe_overrides={"rewards": multi_rewards, "reward_aggregation": multi_aggregation})
if steps:
    kw["steps"] = steps
if preset == "smoke":
    kw["eval_size"] = 20
config = make_config(preset, **kw)
multi_out = Path(runs_dir) / f"12_reward_design-multi-{config.short_hash()}"
summary = train(config, multi_out, progress=False, report=False)
multi_rows = read_rows(multi_out / "metrics.jsonl")
print(f"{len(multi_rows)} steps, rewards logged: {reward_names(multi_rows)}; greedy held-out accuracy "
      f"{summary['accuracy_before']:.3f} -> {summary['accuracy_after']:.3f}")
weights = {"task": 1.0, **{key: kw_.get("weight", 1.0) for key, kw_ in multi_rewards}}
for r in reward_spread(multi_rows, weights):
    print(f"  {r['reward']:20s} mean {r['mean']:+.4f}   mean batch std {r['std']:.4f}   weight x std "
          f"{r['weighted_std']:.4f}")
per_reward_figure(multi_rows, title=f"live run at {preset}: grpo + {', '.join(k for k, _ in multi_rewards)} "
                                    f"({multi_aggregation})").show()

# %% [markdown]
# What to look at: `task` is the verifier's share of solved answers (the same number as `accuracy`); the penalties
# are $\leq 0$, near 0 on most answers, with a std that says how often they fire. The printed weight × std is each
# reward's say in the combined reward under `sum_then_normalize`: a penalty that fires rarely has a small std and
# little say, however large its value when it fires. Under `normalize_then_sum` (this run) every reward with any spread
# in a group gets the same say per unit weight, so a penalty that fires on one answer of eight moves that answer's
# advantage as much as the verdict does. A healthy run shows `task` rising and the penalties at or moving towards 0.
#
# The same curves from the stored `f6-length` runs (every 5th step is stored, so the curves are coarser): the
# `soft-overlong` recipe logs the verifier (`task`) and its penalty; `cosine-length` replaces the verifier
# (task_reward 0) and logs its own reward only (its mean falling towards $-0.5$: wrong answers at the budget).

# %%
if f6_length is not None:
    _, length_groups, _ = f6_length
    shaped = {k: seeds for k, seeds in length_groups.items() if reward_names([r for rows in seeds for r in rows])}
    keys = sorted({f"rewards/{n}/mean" for seeds in shaped.values() for rows in seeds for n in reward_names(rows)},
                  key=lambda k: (k != "rewards/task/mean", k))
    seed_band_curves(shaped, keys=keys, title="f6-length: per-reward means (mean, min-max over seeds)").show()

# %% [markdown]
# ## 5. Checklists and process rewards
#
# The rewards of this section look inside an answer or an episode rather than at its length. Each gets one small
# picture from its module's own functions.
#
# **CM2's checklist** (`cm2-checklist`). A calculator episode for `37*48+19=` is judged against a checklist: one item
# per intermediate result of the expert's solution ($r_0$: 1776, $r_1$: 1795, which needs $r_0$) and the final
# answer (strict). After every step a judge labels each item (here the rule-based toy judge of
# `workbench/rewards/checklist.py`); an item pays its weight once, at the step that first flips it to satisfied,
# and only if its dependencies were already satisfied. The episode below wastes a call (`[37*40]`), guesses the
# second result before computing the first (`[1776+19]`), then computes both and answers.

# %%
checklist_grid_figure(actions=checklist_actions, noise=judge_noise, seed=seed).show()

# %% [markdown]
# What to look at: $r_0$ pays at step 2 (dark green) and is **backfilled** on steps 0 and 1 (light green: eligible
# steps before the paying one, the credit CM2's step advantages spread backwards); $r_1$ is satisfied at step 1 but
# **blocked** (its dependency $r_0$ was not satisfied yet), and from then on it counts as already satisfied, so it
# never pays: a guessed intermediate result earns nothing, even when recomputed properly later. The answer item pays
# at the last step. $R = 2/3$: a right answer reached with a skipped dependency. With `judge_noise > 0` the labels
# flip at random (seeded) and an item can pay at a step where nothing happened, which is what a noisy LLM judge does.
#
# **Reflection rewards.** SRPO pays the *transition* between the first and the last answer of an
# answer → reflection → answer completion (`srpo_accuracy`), and ReflexiCoder multiplies its quality and efficiency
# terms by a cycle regulation $P(n)$ of the number of reflection rounds (`cycle_regulation`).

# %%
reflection_figure().show()

# %% [markdown]
# What to look at: SRPO's largest reward is for a wrong first answer corrected by the reflection (1.0), more than for
# two right answers (0.75), and a right answer spoiled by the reflection still earns 0.25: the reflection is what is
# rewarded. ReflexiCoder pays nothing without a reflection ($P(0) = 0$), fully for 1 to 5 rounds, and less and less
# after (with a small wobble from its sine term): reflect, but do not loop.
#
# **Intrinsic rewards that fade.** SPEAR's tool-call bonus $\min(1, 0.1 n)\,c(t)$ and RetroAgent's improvement bonus
# $\mathrm{coef}(t)\max(0, c - \phi)$ both exist to get exploration started and are scheduled away
# (`toolcall_coefficient`, `reflection_coefficient`; SPEAR's horizon as the `spear-tool-reward` recipe sets it, half
# the run).

# %%
schedules_figure().show()

# %% [markdown]
# What to look at: SPEAR's cosine reaches 0 at $T_{tool}$ and stays there, so late in training only the verifier
# counts; RetroAgent's exponential is at $e^{-5} \approx 0.007$ at the end, and its hard-cutoff variant is gone after
# the first tenth. A healthy run with such a bonus shows the bonus's own curve (`rewards/spear-tool-reward/mean`,
# `retroagent/intrinsic`) falling with its coefficient while `rewards/task/mean` (or `accuracy`) keeps rising;
# accuracy falling as the bonus fades means the policy had learnt the bonus, not the task.
#
# **SSL's tiers** (`ssl`) pay a near miss part of the reward: by the relative distance of the answer from the gold
# in rings of $\sigma$ (`distance_tier`), or by the share of the expert's intermediate results an episode produced
# (`progress_tier`).

# %%
ssl_figure().show()

# %% [markdown]
# What to look at: with $K = 4$ an answer within 5% of the gold earns 0.6, within 10% 0.3, within 20% 0.1; $K = 1$
# is the verifier's 0/1. The edges are inclusive (exercise 4). A tiered reward gives GRPO a signal on prompts the
# policy never solves, which is its point, and a way to be paid for being close, which is its risk: watch that the
# solved share keeps rising, not only the mean tier.
#
# **FAPO's flawed positives** (`fapo`): the rule reward is $\pm 1$, and a right answer whose reasoning a detector
# flags (a false step: the toy's stand-in for FAPO's GenRM checks the arithmetic written in the completion) gets 0.

# %%
for row in fapo_rows():
    print(f"{row['completion']!r:32}: {'right' if row['correct'] else 'wrong'}, first wrong step "
          f"{row['flaw'] if row['flaw'] is not None else '(not asked)'} -> reward {row['reward']:+g}")
fapo_figure().show()

# %% [markdown]
# What to look at: the middle answer reaches the right number through $3 + 4 = 8$: the verifier alone would pay it
# like the clean one. FAPO pays it like nothing (0), halfway to a wrong answer ($-1$), so GRPO stops reinforcing the
# lucky path while still preferring it to a wrong answer. Wrong answers never reach the detector.
#
# ## 6. Claim vs what we see
#
# Each method's central claim as we read its paper and what the stored runs show, from `workbench.results.claims` (the
# book's "claim vs what we see" page, restricted to this family's recipes and this notebook's teaching recipes). A claim
# is only judged against a stored comparison that tests it; the others say why not, or that none is written yet. Most F6
# rewards are made for long answers, tool-using agents or judges that the toy tasks do not have, so most of them have no
# stored comparison.

# %%
from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.viz.tables import claims_html

print(VERDICT_RULE)
display(HTML(claims_html(claims_table(None if stored_runs_dir is None else Path(stored_runs_dir),
                                      recipes=family_recipes()))))

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. `cosine-length` with its defaults and a budget of $L = 12$ tokens: what does a **right** answer of $|y| = 4$
#    tokens earn?
# 2. One group of four answers: the verifier says $(1, 0, 0, 1)$ and a reward model scores them $(2, 8, 6, 3)$ on a
#    0 to 10 scale, with weight 0.5 (the verifier's is 1). Under which `reward_aggregation`
#    (`"sum_then_normalize"`, `"normalize_then_sum"`, both or neither) does every right answer get a larger GRPO
#    advantage than every wrong one? (a mode, or a set of modes)
# 3. `soft-overlong` with budget $L = 10$ and buffer $C = 3$: what is the shortest response (in tokens) it penalizes?
# 4. `ssl` with its defaults (distance tiers, $\sigma = 0.1$, $K = 4$): what does the answer 48 earn when the gold is
#    40?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
cosine_reward = None        # 1: a float
dominant_aggregation = None  # 2: "sum_then_normalize", "normalize_then_sum", or a set of them
first_penalized = None      # 3: an int (tokens)
ssl_reward = None           # 4: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math
    import statistics

    u = 4 / 12                                                   # |y| / L = 1/3
    lo, hi = 0.5, 1.0                                            # a right answer: 1.0 when short, 0.5 at L
    cosine_reward = lo + (hi - lo) * (1 + math.cos(math.pi * u)) / 2   # cos(pi/3) = 0.5: 0.5 + 0.25 x 1.5 = 0.875

    correct, scores, w = (1, 0, 0, 1), (2, 8, 6, 3), 0.5

    def zscores(xs):  # within the group, Bessel std, + 1e-4 as TRL
        m, s = statistics.fmean(xs), statistics.stdev(xs)
        return [(x - m) / (s + 1e-4) for x in xs]

    summed = [c + w * s for c, s in zip(correct, scores)]       # (2, 4, 3, 2.5): a wrong answer on top
    normalized = [c + w * s for c, s in zip(zscores(correct), zscores(scores))]  # (0.37, -0.28, -0.64, 0.55)

    def right_on_top(R):  # GRPO's advantage is increasing in R within a group: compare the R's
        return min(R[0], R[3]) > max(R[1], R[2])

    dominant_aggregation = {mode for mode, R in (("sum_then_normalize", summed), ("normalize_then_sum", normalized))
                            if right_on_top(R)}

    L, C = 10, 3
    first_penalized = next(n for n in range(1, L + 1) if n > L - C)  # penalty ((L - C) - n) / C < 0 from n = 8

    d = abs(48 - 40) / max(abs(40), 1)                          # 0.2 = 2 sigma: on the outer edge, which is inclusive
    ssl_reward = next((v for e, v in ((0, 1.0), (0.5, 0.6), (1, 0.3), (2, 0.1)) if d <= e * 0.1), 0.0)  # 0.1

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb12_reward_design import (check_cosine_length_value, check_dominant_aggregation,
                                                    check_soft_overlong_first_length, check_ssl_tier)

check_answers([(1, cosine_reward, check_cosine_length_value),
               (2, dominant_aggregation, check_dominant_aggregation),
               (3, first_penalized, check_soft_overlong_first_length),
               (4, ssl_reward, check_ssl_tier)])
