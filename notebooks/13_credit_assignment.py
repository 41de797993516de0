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
# # Credit assignment, measured against the exact answer
#
# An agent's episode is a chain of decisions and one reward at the end. Which decision earned it? Every method of
# this family answers with an *advantage* per turn (or per token): how much better the action taken was than what
# the policy does on average from the same place. Estimators differ in what they compare against: the group's
# other episodes (GRPO, RLOO), a learned critic (GAE), the group's steps taken from the same observed state
# (GiGPO, HGPO), Monte Carlo continuations from the same prefix (SPO, ProAct), a model's belief in the answer
# (IGPO), ...
#
# On a real task nobody knows the right answer to "which decision earned it". On a small enough problem we do:
# this notebook computes the **exact** advantage of every action of every history for the current policy and
# puts each estimator beside it.
#
# 1. **the exact answer** on a key-door problem, where picking up a key at the first turn decides whether the
#    door opens at the end;
# 2. **an explorer**: every estimator's per-turn advantage on the same sampled episodes, beside the exact one;
# 3. **bias and variance** of every estimator against the exact advantage, over many sampled groups.
#
# Everything here is `workbench.advantages.exact` (the exact values and the sampled comparison) and the registered
# advantage estimators, called exactly as the trainer calls them.
#
# ## Key equations
#
# A history $h = (a_0, \dots, a_{t-1})$ is what the agent did so far; the policy picks $a \sim \pi(\cdot \mid h)$.
# With deterministic transitions, reward $r(h, a)$ and discount $\gamma$ (1 here):
#
# $$Q(h, a) = r(h, a) + \gamma\, V(h \cdot a), \qquad V(h) = \sum_a \pi(a \mid h)\, Q(h, a), \qquad
#   A(h, a) = Q(h, a) - V(h)$$
#
# with $V = 0$ once the episode has ended. An estimator sees $G$ sampled episodes of one prompt and returns
# $\hat A_{i,t}$ for turn $t$ of episode $i$. Over many groups, for each history-action pair it visits,
#
# $$\mathrm{bias}(h, a) = \mathbb{E}[\hat A \mid h, a] - A(h, a), \qquad
#   \mathrm{var}(h, a) = \mathrm{Var}[\hat A \mid h, a]$$
#
# averaged over visits (pairs the policy plays often weigh more). GRPO's $\hat A_{i,t} = (R_i - \bar R)/\sigma_R$ is
# the same for every turn of an episode, so at turn $t$ its mean is $(Q(h_t, a_t) - V(h_0))/\sigma$: the right
# ranking at the first turn, and a shift by $V(h_t) - V(h_0)$ at every later one. A critic with the exact $V$
# gives the one-step TD error $\delta_t = r_t + V(h_{t+1}) - V(h_t) = A(h_t, a_t)$: no bias, no variance.

# %% tags=["parameters"]
preset = "smoke"     # "smoke": CPU in about a minute; "full": more sampled groups (the numbers in the README)
length = 3           # key-door corridor length (cells from the key to the door)
slack = 1            # spare turns beyond the shortest episode (K, the walk, O)
eps = 0.5            # the policy: (1 - eps) on an optimal action, eps spread by a seeded random softmax
group_size = 8       # episodes per group, as the trainer's G
n_groups = None      # sampled groups for the bias/variance table; None: 30 on smoke, 2000 on full
seed = 0             # the policy's and the samples' seed
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"    # where run folders go (unused here: nothing is trained in sections 1-3)

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import ipywidgets as W
import pandas as pd
import torch
from IPython.display import display

from workbench.advantages import exact as ce
from workbench.viz.credit_comparisons import advantage_heatmaps, bias_variance_figure, table_rows
from workbench.viz.widgets import explorer

torch.set_num_threads(1)
groups_n = n_groups or (30 if preset == "smoke" else 2000)

# %% [markdown]
# ## 1. The exact answer on a key-door problem
#
# A corridor of `length` cells ends at a door. The actions are `K` (pick up the key: only at cell 0), `R` and
# `L` (move), `O` (open: reward 1, and the end, at the door *with* the key). The agent observes its cell only,
# never whether it holds the key, so cell 1 reached with the key and cell 1 reached without it look the same,
# though one is worth a lot and the other nothing. The episode ends after `length + 2 + slack` actions.
#
# The policy is a table over histories: with probability $1 - \epsilon$ an optimal action, otherwise a seeded
# random mix, so it succeeds sometimes, like a warm-started agent.

# %%
mdp = ce.keydoor_mdp(length=length, slack=slack)
policy = ce.noisy_optimal_policy(mdp, eps=eps, seed=seed)
exact = ce.exact_values(mdp, policy)
print(f"{mdp.name}: {len(mdp.histories())} histories, actions {mdp.actions}, horizon {mdp.horizon}")
print(f"success probability V(start) = {exact.V[()]:.3f}")
K, R = mdp.actions.index("K"), mdp.actions.index("R")
first = pd.DataFrame({"π(a | start)": policy[()].tolist(), "Q(start, a)": exact.Q[()],
                      "A(start, a)": [exact.advantage((), a) for a in range(len(mdp.actions))]},
                     index=list(mdp.actions)).round(3)
display(first)
print(f"observation after K,R: {mdp.observation((K, R))}  V = {exact.V[(K, R)]:.3f}")
print(f"observation after R:   {mdp.observation((R,))}  V = {exact.V[(R,)]:.3f}")

# %% [markdown]
# **What to look at:** `K` at the start is the only first action with a positive advantage; every other first
# action forfeits the reward, whatever follows. The two histories that end in cell 1 share an observation (an
# anchor state, for GiGPO) but not a value: that is the context inconsistency HGPO's history-keyed groups are
# about.
#
# ## 2. Every estimator on the same episodes
#
# One group of `group_size` episodes sampled from the policy. Left, the exact advantage of each action taken;
# right, an estimator's, on one colour scale; each cell shows the action. Pick an estimator (and a group) in the
# explorer (it needs a live kernel); the static figures below show three of them.

# %%
labels = {e.label: e for e in ce.ESTIMATORS}
shown = next(g for g in range(seed, seed + 100)  # the first group with a success and a failure: a signal to credit
             if len({sum(e.rewards) for e in ce.sample_groups(mdp, policy, n_groups=1, group_size=group_size,
                                                              seed=g)[0]}) > 1)


def show_group(estimator, group_seed):
    episodes = ce.sample_groups(mdp, policy, n_groups=1, group_size=group_size, seed=int(group_seed))[0]
    return advantage_heatmaps(mdp, policy, episodes, labels[estimator], exact)


explorer({"estimator": W.Dropdown(options=list(labels), value="grpo", description="estimator"),
          "group_seed": W.IntSlider(value=shown, min=0, max=seed + 100, description="group", continuous_update=False)},
         show_group)

# %%
episodes = ce.sample_groups(mdp, policy, n_groups=1, group_size=group_size, seed=shown)[0]
for label in ("grpo", "rloo", "gae λ=0, exact V"):
    advantage_heatmaps(mdp, policy, episodes, labels[label], exact).show()

# %% [markdown]
# **What to look at:** GRPO and RLOO paint each row in one colour: every action of a successful episode is
# credited, the wasted `L` as much as the decisive `K`, and every action of a failed one blamed, the `K` that was
# right included. The TD error with the exact critic matches the left panel cell for cell. A learned critic sits
# between the two, as close to the right as its values are to the exact $V$.
#
# ## 3. Bias and variance of every estimator
#
# `groups_n` groups sampled from the same policy; each estimator sees the same groups. For every (history,
# action) pair visited, the mean and the spread of its $\hat A$ against the exact $A$:

# %%
rows = ce.bias_variance(mdp, policy, n_groups=groups_n, group_size=group_size, seed=seed)
display(pd.DataFrame(table_rows(rows)).set_index("estimator"))
bias_variance_figure(rows).show()

# %% [markdown]
# **What to look at:** normalised estimators (GRPO, GiGPO, HGPO with their std) divide by a group std smaller
# than 1, so their scale alone is a bias; their correlation with the exact advantage says how well they *rank*
# actions, which is what a policy gradient needs most. Episode-level baselines (GRPO, RLOO, Flow-GRPO) correlate
# about as well as one another; anchor-state groups (GiGPO, HGPO) do not help here, because the observation
# hides the key, the one thing that matters. Every estimator with the exact critic (GAE, VL-DAC, POAD, HiPER)
# has almost no bias, and the one-step ones (TD, SPO with a cut before every turn) none at all. ProAct's critic
# is exact too, but for the *uniform random* policy: it ranks the actions well (the highest correlation after the
# exact ones) while being biased for the policy we sample from.
#
# The `full` preset samples 2000 groups (the table in the README; `python -m workbench.advantages.exact` prints
# it). Not every estimator of the family runs on a tabular problem; those that do not, and why:

# %%
display(pd.DataFrame({"why not here": ce.NOT_HERE}))

# %% [markdown]
# ## 4. Does finer credit make a policy learn faster?
#
# Less bias and variance is a means; the claims are about success. The stored comparisons
# (`python -m workbench.results.stored_runs f4-keydoor f4-screen f4-search f4-calculator f4-countdown`, 3 seeds each;
# `workbench/results/stored_runs.py` says why each setting) train every credit recipe from the same warm start as GRPO,
# as its paper's script does (its own clip, KL term and loss aggregation):
#
# - `f4-keydoor`: the key-door corridor (take the key in the first two turns, walk 3-5 rooms, open the door;
#   5-7 turns), warm-started to greedy 0.99 but sampled success 0.48, 40 steps of 4 corridors x 8 episodes;
# - `f4-screen`: the text form (click a field, type its value, for 2 fields, then submit), warm-started to sampled
#   success 0.565; the GUI and device keys;
# - `f4-search`: 3-hop search (three searches, then the answer), warm-started to sampled success 0.54 with most
#   groups all right or all wrong: IGPO's and InfoPO's setting;
# - `f4-calculator`: 5-operand arithmetic by 4 tool calls and an answer, after the default warm start; CM2's
#   checklist of intermediate results;
# - `f4-countdown`: the one-turn keys (group reshaping, one sample per prompt, segment Monte Carlo values,
#   value-based objectives) in the setting of notebook 10.
#
# One panel per method: its held-out sampled success (pass@1 of 4 samples at temperature 1 on 100 held-out
# episodes; countdown: of 8 samples) against GRPO's in grey, the band the min-max over seeds. A healthy curve
# rises from the warm start's level at step -1; a method that helps lies above the grey band, not inside it.

# %%
from IPython.display import HTML

from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.results.stored_runs import load, made_by
from workbench.viz.credit_comparisons import against_baseline_grid
from workbench.viz.run_curves import with_start
from workbench.viz.tables import before_after_table, claims_html

for name in ("f4-keydoor", "f4-screen", "f4-search", "f4-calculator", "f4-countdown"):
    stored = load(name)
    if stored is None:
        print(f"no stored comparison {name} yet: make it with `python -m workbench.results.stored_runs {name}`")
        continue
    meta, groups, summaries = stored
    print(made_by(meta))
    against_baseline_grid(with_start(groups, summaries), key="eval/pass@1",
                          title=f"{name}: held-out pass@1 against grpo (grey)<br><sup>colour: the method; lines: mean "
                                "over seeds, bands: min–max; step -1: the warm start</sup>").show()
    before_after_table(summaries, title=f"{name}: held-out before → after (mean ± std over seeds)").show()

# %% [markdown]
# **What the stored runs show** (3 seeds each; the numbers are the tables above). On the key-door corridor GRPO lifts
# sampled success from 0.46 to 0.81 in 40 steps. Two recipes beat it beyond seed noise, and neither gain can be
# credited to the credit assignment alone: SeeUPO (0.91) also takes one optimizer step per turn, several times more
# steps a batch, and ends sharper; Flow-GRPO (0.85) has its script's looser clip and weaker KL term. Grouping steps
# by what the agent sees does not help where the observation hides the key (GiGPO 0.81, HGPO 0.72), as the low
# correlations of section 3 predicted. The critics only match GRPO (VL-DAC, POAD, HiPER): 40 steps teach a critic
# little. The uniform random policy's values hurt (ProAct MC-GRPO 0.71) or collapse the run (MC-PPO 0.32), and
# SPA-RL's bonus for every executed action outweighs the outcome (0.17). On the text screen, where SFT already
# imitates the expert, no GUI or device recipe beats GRPO's 0.88.
#
# On one-turn countdown only SPO's single-sample tracked baseline does as well as GRPO or better (at equal samples a
# step); segment values change little on answers of 4-8 tokens, ROVER lowers pass@8, and B-Coder's token Q
# regression diverges at this learning rate (empty answers on every seed).
#
# On search, where most groups have all-equal outcomes, IGPO's information-gain turn rewards do act (the belief in
# the answer rises turn by turn), but in 40 steps neither GRPO nor IGPO nor InfoPO moves held-out sampled success.
# A healthy credit method here would lift the coloured curve above the grey band early, before GRPO catches up.
# On the calculator CM2's checklist gives nearly every group a reward spread where the 0/1 outcome leaves most groups
# flat, yet both it and GRPO lower held-out success in 40 steps: more signal is not better signal.
#
# ## 5. Claim vs what we see
#
# Each credit method's central claim as we read it, and what its comparison shows over seeds (the same rows as the
# book's claims page); where the mechanism cannot act here, the row says why.

# %%
print(VERDICT_RULE)  # the credit family's rows, and GiGPO's (family F1, the anchor-state baseline of HGPO)
display(HTML(claims_html([row for row in claims_table() if row["family"] == "credit" or row["recipe"] == "gigpo"])))

# %% [markdown]
# ## Exercises
#
# All three on the two-level tree of `ce.two_level_tree()`: actions a and b, two turns, leaves aa = 1, ab = 0,
# ba = 1, bb = 1; π(a | start) = 0.25, π(a | a) = 0.5, π(a | b) = 0.8.
#
# 1. What is the exact advantage A(start, a) of playing a first?
# 2. RLOO broadcasts one number to every turn of an episode. What is the expectation of RLOO's advantage on the
#    second turn of the episodes that played a, then a (its mean over infinitely many groups)?
# 3. A critic that knows the exact V gives the second action the one-step TD error δ = r + V(next) − V(h). What is δ
#    for b played after a (no reward before the leaf; V = 0 after the end)?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
first_advantage = None   # 1: a float
rloo_second = None       # 2: a float
td_second = None         # 3: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    V_a, V_b = 0.5 * 1 + 0.5 * 0, 0.8 * 1 + 0.2 * 1     # 0.5 and 1
    V_start = 0.25 * V_a + 0.75 * V_b                    # 0.875
    first_advantage = V_a - V_start                      # Q(start, a) = V(a): -0.375
    rloo_second = 1 - V_start                            # E[R_i - mean of the others] = Q((a,), a) - V(start)
    td_second = 0 + 0 - V_a                              # leaf ab pays 0, nothing after it: -0.5 = A((a,), b)

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb13_credit_assignment import (check_credit_first_advantage, check_credit_rloo_second,
                                                        check_credit_td_second)

check_answers([(1, first_advantage, check_credit_first_advantage),
               (2, rloo_second, check_credit_rloo_second),
               (3, td_second, check_credit_td_second)])
