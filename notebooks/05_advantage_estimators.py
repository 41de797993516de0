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
# # Advantage estimators side by side
#
# Every policy-gradient method for LMs multiplies $\nabla\log\pi$ of each token by an **advantage**: how much
# better than expected this response (or token) was. The estimators differ in the baseline they subtract, in
# how they scale, and in whether they work per sequence or per token. This notebook feeds **every registered
# advantage estimator** (new registrations appear automatically) the same small batch and compares:
#
# 1. the advantages of the same groups: mixed rewards, an all-equal group, unequal response lengths,
# 2. what happens to a group whose answers all score the same,
# 3. what happens to a group of one,
# 4. the magnitude of GRPO's advantage against the group's success rate, for each way of scaling it.
#
# No model is trained: the estimators read a `RolloutBatch` built from rewards, exactly the object the
# trainer hands them.
#
# ## Key equations
#
# For a prompt with $G$ responses, outcome rewards $R_1..R_G$ and lengths $|y_i|$:
#
# $$\text{GRPO:}\ A_i = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R + \epsilon} \qquad
#   \text{RLOO:}\ A_i = R_i - \frac{1}{G-1}\sum_{j\ne i} R_j = \frac{G}{G-1}\big(R_i - \mathrm{mean}_g R\big)$$
#
# $$\text{OPO:}\ A_i = R_i - \frac{\sum_j |y_j| R_j}{\sum_j |y_j|} \qquad
#   \text{GPG:}\ A_i = \frac{B}{B-M}\big(R_i - \mathrm{mean}_g R\big),\ M = \#\text{samples in all-equal groups}$$
#
# $$\text{REINFORCE++(-baseline):}\ A = \mathrm{whiten}_{\text{batch tokens}}(G_t \text{ or } R_i - \mathrm{mean}_g R)
#   \qquad \text{ReMax:}\ A_t = \sum_{t'\ge t} r_{t'} - R_{\text{greedy}}$$
#
# $$\text{GAE:}\ \delta_t = r_t + \gamma V_{t+1} - V_t,\qquad A_t = \sum_k (\gamma\lambda)^k\,\delta_{t+k}
#   \ \text{(then whitened)}$$
#
# The outcome reward sits on the last response token ($r_t = 0$ elsewhere). Sequence-level estimators
# broadcast one number over the response; token-level ones (GAE, REINFORCE++, ReMax) may vary along it.

# %% tags=["parameters"]
preset = "smoke"   # nothing is trained here; "smoke" and "full" run the same cells
seed = 0
G = 8              # group size of section 4
solutions = False  # True fills in the exercises' answers (the learner's cells start empty)

# %%
import dataclasses
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
from IPython.display import HTML, display

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.viz.advantage_comparisons import (advantage_comparison, advantage_table_html, advantage_token_heatmaps,
                                                 advantage_vs_success_rate, success_rate_advantages)

torch.set_num_threads(1)
torch.manual_seed(seed)
MULTI_TURN = {"turn", "turn_info", "turn_rewards"}  # fields only a multi-turn episode has


def one_turn(e) -> bool:
    """Does the estimator score a one-turn batch of one agent? (Credit assignment's turn-level ones: notebook 13; the
    multi-agent ones: notebook 16.)"""
    return not MULTI_TURN & set(e.reads) and "multi_turn" not in e.needs and e.family not in ("credit", "multiagent")


estimators = [e for e in registry.entries("advantage") if one_turn(e)]
for e in estimators:
    print(f"{e.key:30} {e.summary[:90]}")
left_out = [e.key for e in registry.entries("advantage") if not one_turn(e)]
print(f"\nleft out (they score the turns of a multi-turn episode, or belong to F4's credit assignment, notebook 13, "
      f"or to many agents, notebook 16): "
      f"{left_out}")

# %% [markdown]
# ## 1. The same groups through every estimator
#
# Three prompts, four answers each: group 0 has two right answers of different lengths, group 1 is all right
# (every reward equal), group 2 has a single right answer. Lengths differ everywhere. GAE gets a critic that
# predicts $V \equiv 0$ (so its advantages are discounted rewards-to-go, whitened); ReMax gets the reward of
# the greedy answer to each prompt (right for prompt 0, wrong for prompts 1 and 2).
#
# Some estimators are **modifiers**: they read the advantages another estimator wrote and reshape them. They run
# here as they run in a recipe, after `grpo` in the chain, each given the field it reads: token entropies
# (`aepo-agentic-clip` scales by their batch z-score), one row of group 1 marked as re-sampled at another temperature
# (`aepo-arbitrary` sets its advantage to 1), the old policy's log-probs at that temperature (`dcpo` mixes their
# ratio into right answers), nothing more for `gui-libra` (it scales negatives down in groups that mostly fail).
# Estimators of multi-turn episodes (`rlvmr`: steps tagged planning, exploring, reflecting) need turns that a
# one-turn batch does not have, so they are left out here; their catalog cards list the tests that check them.
# `rl-plus` and `ampo` take their baseline from the group's on-policy answers only, leaving out the external or
# teacher answers their rollouts add (`offpolicy_mask`); these groups hold none, so `rl-plus` is GRPO's R - mean
# without the std, and `ampo` GRPO's z-score (notebook 14 shows them with their extra rows).

# %%
rewards = [1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0]
group = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
lengths = [3, 6, 2, 5, 2, 4, 6, 3, 5, 2, 4, 6]
greedy = {0: 1.0, 1: 0.0, 2: 0.0}  # reward of the greedy answer to each prompt (ReMax's baseline)


def make_batch(rewards, group, lengths, greedy):
    batch = RolloutBatch.from_rewards(rewards, group, lengths)
    batch.values = torch.zeros_like(batch.mask)  # a critic that predicts 0 everywhere (GAE)
    batch.baseline_rewards = torch.tensor([greedy[g] for g in group], dtype=torch.float64)  # ReMax
    batch.truncated = torch.zeros(batch.size, dtype=torch.bool)  # T-PPO: every response finished (= GAE)
    batch.scores = batch.rewards.clone()  # the verifier's verdicts (DCPO's "correct")
    steps = torch.arange(batch.mask.shape[1], dtype=torch.float64)
    batch.entropy = (0.3 + 0.2 * torch.cos(steps)[None, :] + 0.1 * batch.group[:, None]) * batch.mask  # AEPO
    batch.old_logp = -1.0 * batch.mask  # DCPO: log pi_old of each sampled token ...
    batch.temp_logp = -0.7 * batch.mask  # ... and at the temperature the row was re-sampled at
    batch.resampled = torch.zeros(batch.size, dtype=torch.bool)
    batch.resampled[(batch.group == 1).nonzero()[:1, 0]] = True  # AEPO: the first answer of group 1 was re-sampled
    batch.offpolicy_mask = torch.zeros_like(batch.mask)  # RL-PLUS, AMPO: no external or teacher answer here
    batch.parent = torch.full((batch.size,), -1)  # ARPO: every answer a root, nothing branched
    batch.branch_turn = torch.zeros(batch.size, dtype=torch.long)
    return batch


def chained(e, batch, **kw):
    """What an estimator reads: a modifier (it reads `advantages`) gets grpo's advantages first, as in a recipe."""
    if "advantages" not in e.reads:
        return batch
    grpo = registry.get("advantage", "grpo")
    return dataclasses.replace(batch, advantages=grpo.fn(batch, **{k: v for k, v in kw.items() if k in grpo.defaults}))


def run_all(batch, **kw):
    """estimator key -> [B, T] advantages, or the error message; kw goes to estimators that take it."""
    out = {}
    for e in estimators:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out[e.key] = e.fn(chained(e, batch, **kw), **{k: v for k, v in kw.items() if k in e.defaults}).double()
            except (ValueError, TypeError, KeyError) as err:
                out[e.key] = f"{type(err).__name__}: {err}"
        for w in caught:
            print(f"{e.key}: note: {str(w.message)[:160]}")
    return out


batch = make_batch(rewards, group, lengths, greedy)
results = run_all(batch)
display(HTML(advantage_table_html(results, batch)))

# %% [markdown]
# The table shows each sample's advantage (`a..b` when it changes along the response). The same numbers as
# bars, with the error bars spanning the values over the response's tokens:

# %%
advantage_comparison(results, batch).show()

# %% [markdown]
# And token by token (blank cells are padding):

# %%
advantage_token_heatmaps(results, batch).show()

# %% [markdown]
# What to notice:
#
# - **GRPO, RLOO, GPG, OPO** differ only in scale inside a group: RLOO $= \frac{G}{G-1}\times$ the mean-centred
#   reward, GRPO divides by the std, GPG multiplies by $B/(B-M)$ to make up for the all-equal group.
#   OPO's baseline weights each reward by its answer's length, so it moves towards the rewards of the long
#   answers: in group 2 the right answer is one of the shorter ones and the baseline drops below the mean.
# - **REINFORCE++** has no groups at all: it whitens the returns over every token of the batch, so the
#   all-right group 1 gets the same positive advantage as any right answer elsewhere.
# - **REINFORCE++-baseline** centres within the group first, but its whitening is **token-weighted**: the
#   token mean is not zero after centring when lengths differ, so the all-equal group is shifted off zero.
# - **GAE** with $V \equiv 0$, $\gamma = 1$, $\lambda = 0.95$ decays the terminal reward backwards:
#   $A_t \propto \lambda^{|y|-1-t} R$, so early tokens get less credit, then everything is whitened.
# - **ReMax** is per prompt: beating the greedy answer counts, not beating the group.

# %% [markdown]
# ## 2. All-equal groups
#
# When every answer to a prompt scores the same there is nothing to prefer; group baselines give $A = 0$
# (and GRPO's $\epsilon$ keeps $0/0$ from becoming NaN). Not every estimator agrees:

# %%
equal_rows = [i for i, g in enumerate(group) if g == 1]
for key, adv in results.items():
    if isinstance(adv, str):
        print(f"{key:30} error: {adv[:100]}")
        continue
    a = adv[equal_rows][batch.mask[equal_rows] > 0]
    print(f"{key:30} advantages on the all-equal group: min {a.min():+.3f}  max {a.max():+.3f}  "
          f"{'(zero: no signal)' if a.abs().max() < 1e-9 else ''}")

# %% [markdown]
# DAPO's dynamic sampling drops such groups and resamples; GPG rescales the others instead. Estimators that
# whiten over the batch, compare with a greedy answer or ask a critic still push an all-equal group: a
# gradient on a prompt about which the group itself says nothing.
#
# ## 3. Groups of one
#
# A group of one has no baseline from its siblings. Estimators that need one refuse by default and explain
# why; `allow_singletons=True` gives such rows $A = 0$ instead. Here prompt 0 has three answers and prompt 1
# only one:

# %% tags=["expected-error"]
single = make_batch([1, 0, 0, 1], [0, 0, 0, 1], [3, 2, 4, 3], {0: 0.0, 1: 0.0})
strict = run_all(single)
for key, adv in strict.items():
    if isinstance(adv, str):
        print(f"{key}:\n    {adv}\n")

# %% [markdown]
# Each refusal above is shown on purpose: it names the rows and the fix. With the option:

# %%
lenient = run_all(single, allow_singletons=True)
display(HTML(advantage_table_html(lenient, single)))

# %% [markdown]
# With `allow_singletons=True` the lone answer (sample 3) gets zero from every group estimator; the
# estimators that do not use groups (REINFORCE++, ReMax, GAE) never needed the option.
#
# ## 4. How large is the advantage, as a function of the success rate?
#
# Take a group of $G$ answers with 0/1 rewards, $k$ of them right, $p = k/G$. Without the std division
# (Dr.GRPO) a right answer gets $1-p$ and a wrong one $p$. Dividing by the group std
# $\sqrt{p(1-p)\,G/(G-1)}$ makes a lone success in a hard group as loud as $\sqrt{(1-p)/p}$: Dr.GRPO's
# argument that the std division over-weights too-hard and too-easy prompts. The batch std (LitePPO,
# TRL's `scale_rewards="batch"`) is one number for the whole batch, here a batch holding one group at every
# $p$, so the curves stay linear. Bessel's correction changes the group std by $\sqrt{G/(G-1)}$
# ($\approx 1.069$ for $G = 8$).

# %%
advantage_vs_success_rate(G).show()

# %%
table = success_rate_advantages(G)
for label in [k for k in table if k != "p"]:
    print(f"{label:24}", "  ".join(f"{x:5.2f}" for x in table[label]["correct"][1:G]))
print(f"{'p = k/G':24}", "  ".join(f"{p:5.2f}" for p in table["p"][1:G]))

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. Compute by hand the RLOO advantages of the group with rewards `[1, 0, 0, 0]`.
# 2. In a group of $G = 8$ answers with 0/1 rewards, at which success rate $p$ (one of 1/8 … 7/8) does a
#    right answer get the **largest** GRPO advantage (group std, Bessel)?
# 3. Compute by hand the OPO advantages of the group with rewards `[1, 0, 0, 0]` whose answers have 2, 6, 4 and 4
#    tokens. Compare with the plain mean-centred rewards: which answers gain, which lose?
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_rloo = None      # 1: a list of 4 floats
largest_at = None   # 2: a float p = k/8
my_opo = None       # 3: a list of 4 floats

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import math

    R = [1, 0, 0, 0]
    my_rloo = [r - (sum(R) - r) / (len(R) - 1) for r in R]   # baseline: the mean of the 3 others -> [1, -1/3, ...]
    # a right answer gets (1 - p) / std, std = sqrt(p (1 - p) G / (G - 1)): sqrt((1 - p) / p) up to a constant,
    # largest at the smallest p
    n = 8   # the group size of the exercise (the parameter G may differ)
    largest_at = max(range(1, n), key=lambda k: (1 - k / n) / math.sqrt(k / n * (1 - k / n) * n / (n - 1))) / n
    opo_lengths = [2, 6, 4, 4]
    b = sum(n_i * r for n_i, r in zip(opo_lengths, R)) / sum(opo_lengths)   # 2 / 16 = 0.125, below the mean 0.25
    my_opo = [r - b for r in R]   # [0.875, -0.125, ...]: the short right answer gains, the wrong ones lose less

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb05_advantage_estimators import (check_largest_advantage_rate, check_opo_by_hand,
                                                           check_rloo_by_hand)

check_answers([(1, my_rloo, check_rloo_by_hand),
              (2, largest_at, check_largest_advantage_rate),
              (3, my_opo, check_opo_by_hand)])
