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
# # Loss aggregation
#
# A policy-gradient loss starts as one number per response token, $\ell_{i,t}$ in a `[B, T]` tensor with a
# mask $m_{i,t}$ of the tokens the policy produced. Something has to turn it into one scalar, and the choice
# is not cosmetic: it sets **how much gradient each token gets**. That decides whether long answers are
# favoured or penalised (length bias), and whether splitting a step into micro-batches changes the gradient.
# This notebook measures all of it with autograd through `workbench.ops.aggregate`, the function training
# uses:
#
# 1. the four modes and the weight each one gives a token,
# 2. the 10-token vs 1000-token answer,
# 3. length bias with positive and negative advantages,
# 4. Dr.GRPO's fix: a constant normaliser and no std division,
# 5. micro-batch invariance: local vs global denominators.
#
# No model is trained; everything runs in a few seconds.
#
# ## Key equations
#
# With $|y_i| = \sum_t m_{i,t}$ the length of answer $i$ and $B$ answers in the step:
#
# $$\text{token-mean (DAPO):}\quad L = \frac{\sum_{i,t} m_{i,t}\,\ell_{i,t}}{\sum_{i,t} m_{i,t}}$$
#
# $$\text{seq-mean-token-mean (GRPO):}\quad L = \frac{1}{B}\sum_i \frac{1}{|y_i|}\sum_t m_{i,t}\,\ell_{i,t}$$
#
# $$\text{seq-mean-token-sum (REINFORCE):}\quad L = \frac{1}{B}\sum_i \sum_t m_{i,t}\,\ell_{i,t}$$
#
# $$\text{seq-mean-token-sum-norm (Dr.GRPO):}\quad L = \frac{1}{C}\sum_{i,t} m_{i,t}\,\ell_{i,t},
#   \qquad C = B\,L_{\max}$$
#
# Every mode is linear in $\ell$, so $L = \sum_{i,t} w_{i,t}\,\ell_{i,t}$ and the **per-token weight**
# $w_{i,t} = \partial L / \partial \ell_{i,t}$ says everything about the mode:
#
# $$w^{\text{token-mean}} = \frac{1}{\sum_j |y_j|},\qquad w^{\text{seq-mean-token-mean}}_i = \frac{1}{B\,|y_i|},
#   \qquad w^{\text{seq-mean-token-sum}} = \frac{1}{B},\qquad w^{\text{sum-norm}} = \frac{1}{B\,L_{\max}}$$

# %% tags=["parameters"]
preset = "smoke"            # nothing is trained here; "smoke" and "full" run the same cells
seed = 0
lengths = (10, 1000)        # the two answers of section 2
microbatch_lengths = (12, 300, 40, 25, 800, 60, 150, 5)  # the step split into micro-batches in section 5
solutions = False           # True fills in the exercises' answers (the learner's cells start empty)

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch

from workbench import ops, registry
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.viz.aggregation_weights import (aggregation_example, length_bias_bars, lengths_mask,
                                               microbatch_mismatch, microbatch_weights, sequence_weights, token_push,
                                               toy_gradient, weight_vs_length)

torch.set_num_threads(1)
torch.manual_seed(seed)
for mode in ops.AGG_MODES:
    print(f"{mode:24} {registry.get('aggregation', mode).title}")

# %% [markdown]
# ## 1. One weight per token
#
# The weight is read off by autograd: make the per-token losses a leaf tensor of zeros, aggregate, and ask
# for the gradient. Because the modes are linear, the value of $\ell$ does not matter. Here is a batch of
# three answers with 2, 3 and 5 tokens (padding shown as 0):

# %%
mask = lengths_mask((2, 3, 5))
for mode in ops.AGG_MODES:
    denom = ops.Denominators(norm_constant=3 * 5) if mode == "seq-mean-token-sum-norm" else None
    per_token = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    (w,) = torch.autograd.grad(ops.aggregate(per_token, mask, mode, denom), per_token)
    print(f"{mode}\n{np.round(w.numpy(), 4)}\n")

# %% [markdown]
# ## 2. A 10-token and a 1000-token answer
#
# Two answers in one batch. Under **token-mean** every token of the batch weighs $1/1010$: the long answer
# gets 99% of the gradient. Under **seq-mean-token-mean** each *answer* gets the same share, $1/2$, so a
# token of the short answer weighs $1/20$ and a token of the long one $1/2000$, a factor of 100.
# **seq-mean-token-sum** gives every token $1/B = 1/2$ (the loss grows with length), and
# **seq-mean-token-sum-norm** every token $1/(B L_{\max}) = 1/2000$.

# %%
for mode in ops.AGG_MODES:
    w = sequence_weights(lengths, mode)
    print(f"{mode:24} per-token weight {w[0]:.6f} (short), {w[1]:.6f} (long); "
          f"share of the long answer {lengths[1] * w[1] / (np.asarray(lengths) * w).sum():.1%}")
aggregation_example(lengths).show()

# %% [markdown]
# The same numbers for a batch of eight answers from 5 to 1000 tokens: the per-token weight is flat in
# length for every mode but seq-mean-token-mean, whose weight falls as $1/|y|$. On the right, the weight of
# the whole answer: seq-mean-token-mean is the only mode in which every answer counts the same however long
# it is, the others let long answers dominate.

# %%
weight_vs_length().show()

# %% [markdown]
# ## 3. Length bias
#
# With the on-policy policy-gradient loss $\ell_{i,t} = -A_i \log\pi(y_{i,t})$, the step raises each token's
# log-probability by $A_i\,w_{i,t}$ (the "push"). Take one group of four answers: two correct ($R = 1$) and
# two wrong, one short (20 tokens) and one long (200 tokens) of each.
#
# * **seq-mean-token-mean**, $A > 0$: the short correct answer's tokens are pushed up 10× harder than the
#   long one's, so among correct answers, short ones are preferred.
# * **seq-mean-token-mean**, $A < 0$: the long wrong answer's tokens are pushed down 10× *less*, so
#   among wrong answers, long ones are penalised least. Dr.GRPO argues that this is why response length
#   keeps growing on failed prompts: rambling is the cheapest way to be wrong.
# * **token-mean**, **seq-mean-token-sum**, **sum-norm**: the same push on every token, whatever the
#   answer's length; the long answer's total push (right) is 10× larger simply because it has more tokens.

# %%
group_rewards, group_lengths = (1, 1, 0, 0), (20, 200, 20, 200)
length_bias_bars(group_rewards, group_lengths).show()

# %% [markdown]
# ## 4. Dr.GRPO's fix
#
# "Understanding R1-Zero-Like Training" removes both normalisations that depend on the data:
#
# 1. the $1/|y_i|$ of seq-mean-token-mean, replaced by a constant $C = B\,L_{\max}$ (the generation budget),
#    so every token weighs the same and the weight does not depend on who else is in the batch;
# 2. the division of the advantage by the group std, $A_i = R_i - \mathrm{mean}_g R$ (`grpo(scale="none")`),
#    which otherwise makes a group where 1 answer of 8 succeeds as loud as a group with 4 of 8.
#
# The registered recipe is exactly that:

# %%
recipe = registry.get("recipe", "dr_grpo").fn
advantage = recipe.advantage[0]
print(f"dr_grpo: advantage={advantage.key} {advantage.kw}, agg={recipe.agg}")
groups = {"hard (1 of 8 right)": [1, 0, 0, 0, 0, 0, 0, 0], "medium (4 of 8)": [1, 1, 1, 1, 0, 0, 0, 0],
          "easy (7 of 8)": [1, 1, 1, 1, 1, 1, 1, 0]}
for name, rewards in groups.items():
    batch = RolloutBatch.from_rewards(rewards)
    a_std, a_none = grpo(batch)[:, 0], grpo(batch, scale="none")[:, 0]
    print(f"{name:20} A(correct): GRPO {a_std[0]:+.3f}, Dr.GRPO {a_none[0]:+.3f}   "
          f"A(wrong): GRPO {a_std[-1]:+.3f}, Dr.GRPO {a_none[-1]:+.3f}")
push = token_push(group_rewards, group_lengths, "seq-mean-token-sum-norm", scale="none")
print("\nDr.GRPO per-token push on the group of section 3:", np.round(push, 6))

# %% [markdown]
# ## 5. Micro-batch invariance
#
# A step's batch rarely fits in memory at once: it is split into $k$ micro-batches whose gradients are
# accumulated (or computed on $k$ data-parallel ranks and averaged). If each micro-batch divides by **its
# own** token or sequence count and the loop divides by $k$, a token's weight depends on which micro-batch it
# landed in, and the accumulated gradient is not the full-batch gradient. Passing the step's **global**
# counts, `ops.Denominators.of(full_mask, norm_constant=C)`, to every micro-batch makes the sum of
# micro-batch losses equal to the full-batch loss exactly.
#
# Below, a linear toy model $\ell_{i,t} = x_{i,t}\cdot\theta$ turns weights into a parameter gradient. With
# local denominators:
#
# * token-mean is wrong as soon as micro-batches hold different numbers of tokens (almost always);
# * the seq-mean modes are right when every micro-batch holds the same number of sequences ($k$ divides
#   $B$) and wrong otherwise;
# * sum-norm with a local $C = B_{\text{micro}} \times$ (the micro-batch's padded length) is wrong whenever
#   the padding differs, which is verl's default `loss_scale_factor` behaviour (verl#3741). The workbench
#   passes $C = B\,L_{\max}$ instead.
#
# With global denominators (dashed) the error is zero for every $k$.

# %%
microbatch_mismatch(microbatch_lengths, seed=seed).show()
for mode in ops.AGG_MODES:
    full = toy_gradient(microbatch_lengths, 1, mode, "full", seed=seed)
    worst = max(np.abs(toy_gradient(microbatch_lengths, k, mode, "global", seed=seed) - full).max()
                for k in range(1, len(microbatch_lengths) + 1))
    print(f"{mode:24} max |g_global - g_full| over k = 1..{len(microbatch_lengths)}: {worst:.1e}")

# %% [markdown]
# Per answer, the weights with $k = 3$ micro-batches (sizes 3, 3, 2): local denominators (red) scatter
# around the full-batch weights (grey), global ones (blue) coincide with them.

# %%
microbatch_weights(microbatch_lengths, k=3).show()

# %% [markdown]
# Move the slider to change $k$ (needs a live kernel; the figure above is the static version).

# %%
import ipywidgets as W
import plotly.graph_objects as go

from workbench.viz.widgets import refresh

k_slider = W.IntSlider(value=3, min=1, max=len(microbatch_lengths), description="micro-batches k",
                       continuous_update=False, style={"description_width": "initial"})
k_figure = go.FigureWidget(microbatch_weights(microbatch_lengths, k=k_slider.value))
k_slider.observe(lambda change: refresh(k_figure, microbatch_weights(microbatch_lengths, k=change["new"])),
                 names="value")
W.VBox([k_slider, k_figure])

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. A batch holds three answers of 16, 70 and 400 tokens ($B = 3$). Under seq-mean-token-mean, what is the
#    per-token gradient weight $\partial L/\partial \ell_{i,t}$ of one token of the 70-token answer?
# 2. Two wrong answers from two different prompts share a batch under seq-mean-token-mean: a 30-token one with
#    $A = -0.5$ (its group of four has 1 right answer) and a 120-token one with $A = -1.5$ (its group has 3 right
#    answers). With $\ell_{i,t} = -A_i \log\pi(y_{i,t})$, whose tokens are pushed down harder per token:
#    `"short"`, `"long"` or `"same"`?
# 3. The same two answers under token-mean.
# 4. A step of four answers of 30, 90, 20 and 40 tokens is split into $k = 2$ micro-batches: the 30- and 90-token
#    answers in the first, the 20- and 40-token answers in the second. Each micro-batch takes its **own**
#    token-mean and the accumulation loop divides by $k$ (local denominators). What is the per-token weight of a
#    token of the 20-token answer? Compare it with the weight the whole step's token-mean would give it.
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_weight = None            # 1: a float
harder_seq_mean = None      # 2: "short", "long" or "same"
harder_token_mean = None    # 3: "short", "long" or "same"
my_local_weight = None      # 4: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    B = 3
    my_weight = 1 / (B * 70)   # seq-mean-token-mean: w_i = 1 / (B |y_i|) = 1/210, about 0.00476
    # the push on a token is |A| w: compare |A| w of the short (A = -0.5) and the long (A = -1.5) answer, B = 2
    B, A_short, A_long = 2, 0.5, 1.5
    pushes = {"seq-mean-token-mean": (A_short / (B * 30), A_long / (B * 120)),   # 1/120 vs 1/160: short
              "token-mean": (A_short / 150, A_long / 150)}                       # w = 1 / (30 + 120) for both: long
    harder_seq_mean, harder_token_mean = ("same" if short == long else "short" if short > long else "long"
                                          for short, long in pushes.values())
    k = 2
    my_local_weight = 1 / (20 + 40) / k   # its micro-batch only counts its own 60 tokens, then the loop divides by k
    # = 1/120, against 1/180 = 1 / (30 + 90 + 20 + 40) for the whole step: the micro-batch with fewer tokens weighs
    # each of them 1.5 times more, so the accumulated gradient is not the full-batch one

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb02_loss_aggregation import (check_length_bias, check_local_microbatch_weight,
                                                       check_token_weight)

check_answers([(1, my_weight, check_token_weight),
              (2, harder_seq_mean, check_length_bias),
              (3, harder_token_mean, lambda a: check_length_bias(a, mode="token-mean")),
              (4, my_local_weight, check_local_microbatch_weight)])
