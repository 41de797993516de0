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
# # GRPO end to end
#
# Group Relative Policy Optimization (DeepSeekMath) trains a language model from a verifier alone:
# sample **G answers per prompt**, score them, and push up the answers that beat their group's average.
# No critic. This notebook runs every piece on a tiny model you can train on a laptop CPU:
#
# 1. group sampling from a warm-started tiny model,
# 2. rewards → advantages (the group z-score),
# 3. the clipped surrogate and its per-token gradient weight,
# 4. token entropy of real rollouts,
# 5. a short training run with live curves.
#
# Everything comes from the `workbench` package, so what you see is the code that trains.
#
# ## Key equations
#
# For a prompt $x$ with answers $y_1..y_G$ and rewards $R_i$:
#
# $$A_i = \frac{R_i - \mathrm{mean}(R_{1..G})}{\mathrm{std}(R_{1..G}) + \epsilon}, \qquad
#   r_{i,t} = \frac{\pi_\theta(y_{i,t}\mid x, y_{i,<t})}{\pi_{old}(y_{i,t}\mid x, y_{i,<t})}$$
#
# $$L = \frac{1}{G}\sum_i \frac{1}{|y_i|}\sum_t -\min\big(r_{i,t} A_i,\ \mathrm{clip}(r_{i,t}, 1-\epsilon, 1+\epsilon) A_i\big)
#   + \beta\, \mathrm{KL}_{k3}(\pi_\theta \,\|\, \pi_{ref})$$
#
# ## Pseudocode
#
# ```text
# for step in 1..N:
#     prompts  <- sample P prompts
#     answers  <- G samples per prompt from pi_old  (= current policy)
#     R        <- verifier(answers);  A <- group z-score of R
#     for epoch in 1..ppo_epochs: for minibatch:
#         loss <- ppo_clip(logp, old_logp, A) aggregated per sequence, + beta * k3(logp, ref_logp)
#         gradient step (clip the global norm)
# ```

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU in about a minute; "small": SmolLM2 on CPU; "full": a GPU run
recipe = "grpo"      # any registered recipe: grpo, dr_grpo, dapo_lite, rloo, ppo
task = None          # None keeps the preset's (countdown on smoke); addition, reasoning_gym:<dataset>, ...
model = None         # None keeps the preset's model ("tiny" on smoke)
steps = None         # None: 40 on smoke, the preset's count on full
seed = 0
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"   # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch

from workbench.rollout import policy_forward
from workbench.train import Trainer, make_config, train
from workbench.viz import (accuracy_bar, advantage_bars, advantage_explorer, clipping_explorer, entropy_heatmap,
                           surrogate_curves, training_curves)
from workbench.viz.widgets import LiveCurves

torch.set_num_threads(1)
overrides = {"recipe": recipe, "seed": seed, **({"task": task} if task else {})}
if model:
    overrides["model"] = model
if steps or preset == "smoke":
    overrides["steps"] = steps or 40
config = make_config(preset, **overrides)
out = Path(runs_dir) / f"01_grpo-{recipe}-{config.task.replace(':', '_')}-{config.short_hash()}"  # one per config
trainer = Trainer(config, out, progress=True).setup()  # SFT warm-start (cached after the first time)
print({k: getattr(config, k) for k in ("recipe", "task", "model", "steps", "prompts_per_step", "group_size", "lr")})

# %% [markdown]
# ## 1. Group sampling
#
# The trainer's first step draws `prompts_per_step` prompts and samples `group_size` answers to each.
# `trainer.make_batch(0)` returns exactly the batch step 0 trains on: response tokens, mask, old and
# reference log-probs, entropy, rewards and advantages, all `[B, T]` or `[B]` tensors.

# %%
batch = trainer.make_batch(0)
G = config.group_size
stds = batch.rewards.view(-1, G).std(-1)
g = int(torch.nonzero(stds > 0).flatten()[0]) if bool((stds > 0).any()) else 0  # a group with signal
for i in range(g * G, (g + 1) * G):
    print(f"{batch.prompts[i]!r:14} -> {batch.completions[i]!r:12} reward {batch.rewards[i]:.0f}  "
          f"A = {batch.advantages[i, 0]:+.2f}")
print(f"\nbatch: {batch.size} responses, mean reward {batch.rewards.mean():.2f}, "
      f"{int((stds == 0).sum())} of {len(stds)} groups have all-equal rewards (no signal)")

# %% [markdown]
# ## 2. Rewards → advantages
#
# Within a group the advantages sum to zero: right answers are pushed up exactly as much as wrong
# ones are pushed down. A group whose answers all score the same carries **no signal** (A = 0),
# which is why DAPO filters such groups. Dividing by the group std gives every group with signal the same
# total push (exercise 3), so a 1-in-8 success is as loud as a 4-in-8 one; Dr.GRPO argues this biases
# training towards too-easy and too-hard prompts.

# %%
rows = slice(g * G, (g + 2) * G)  # the group above and the next one
advantage_bars(batch.rewards[rows].tolist(), batch.group[rows].tolist()).show()

# %% [markdown]
# Move the sliders: change the rewards of one group and toggle the std division and Bessel's correction.

# %%
advantage_explorer((1, 0, 0, 1, 0, 0, 0, 1))

# %% [markdown]
# ## 3. The clipping explorer
#
# The per-token gradient weight of the clipped surrogate is $A\,r$ where the unclipped branch is
# active and **zero** where the clipped branch wins ($A>0, r>1+\epsilon_{high}$ or $A<0, r<1-\epsilon_{low}$).
# On the first minibatch after a rollout $r=1$, so clipping can only act on later minibatches or epochs.

# %%
surrogate_curves("ppo-clip", eps_low=0.2, eps_high=0.28).show()

# %%
clipping_explorer()

# %% [markdown]
# ## 4. Where the model is unsure: token entropy of real rollouts
#
# Each cell is one sampled token, coloured by the full-vocabulary entropy of the policy at that
# position. High-entropy tokens are the "forks" where sampling actually explores.

# %%
rows = list(range(0, min(batch.size, 12)))
tokenizer = trainer.tokenizer
tokens = [[tokenizer.decode([t]) for t in batch.response_ids[i][batch.mask[i] > 0].tolist()] for i in rows]
entropy = batch.entropy
if entropy is None:  # an on-policy step (one epoch, one minibatch) gets it from the training forward: compute it
    with torch.no_grad():
        _, entropy, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                       batch.mask, config.temperature, with_entropy=True)
entropy_heatmap(tokens, entropy[rows], batch.mask[rows], title="token entropy (nats) at step 0").show()

# %% [markdown]
# ## 5. Train, with live curves
#
# Each step appends a row to `metrics.jsonl` in the run folder; re-running this cell resumes from the
# last checkpoint instead of starting over. The glossary of every metric is `workbench.train.glossary.GLOSSARY`.

# %%
from workbench.train.metrics import read_rows

live = LiveCurves(["reward/mean", "entropy", "kl"])  # one point per step as the run logs it
for row in read_rows(out / "metrics.jsonl"):  # a resumed (or finished) run: the steps it already logged
    live.add(row)
trainer.callback = live.add
live.show()  # when the run ends, `finish` leaves the finished curves in place of the live widget
summary = train(config, out, trainer=trainer)
live.finish()
print({k: summary[k] for k in ("accuracy_before", "accuracy_after", "report")})

# %%
training_curves(read_rows(out / "metrics.jsonl")).show()
accuracy_bar(summary).show()

# %% [markdown]
# ## Exercises (checked automatically)
#
# 1. Compute by hand the GRPO advantages of the group with rewards `[1, 0, 0, 0]` (Bessel std, eps = 0).
# 2. Which tokens get zero gradient under PPO-clip with eps = 0.2: ratio 1.3 with A = +1 (`"A=+1"`), or ratio
#    1.3 with A = −1 (`"A=-1"`)?
# 3. The std division sets how hard a group pushes in total. What is $\sum_i A_i^2$ (Bessel std, eps = 0) for
#    the group of 8 with one right answer, `[1, 0, 0, 0, 0, 0, 0, 0]`, and for the group with four,
#    `[1, 1, 1, 1, 0, 0, 0, 0]`? (a pair of numbers)
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
my_advantages = None     # 1: a list of 4 floats
zero_gradient = None     # 2: "A=+1" or "A=-1"
my_sum_squares = None    # 3: a pair of floats (one right answer, four right answers)

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    import statistics

    rewards = [1, 0, 0, 0]
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)   # 0.25 and sqrt(0.75 / 3) = 0.5
    my_advantages = [(r - mean) / std for r in rewards]               # [1.5, -0.5, -0.5, -0.5]
    ratio, eps = 1.3, 0.2
    # min(r A, clip(r) A) takes the clipped, constant branch when A > 0 and r > 1 + eps, or A < 0 and r < 1 - eps
    zero_gradient = "A=+1" if ratio > 1 + eps else "A=-1" if ratio < 1 - eps else "neither"
    # sum_i (R_i - mean)^2 / std^2 and std^2 = sum_i (R_i - mean)^2 / (G - 1): the sum is G - 1 whatever the rewards
    my_sum_squares = tuple(sum(((r - statistics.mean(g)) / statistics.stdev(g)) ** 2 for r in g)
                           for g in ([1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]))   # (7.0, 7.0)

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb01_grpo import check_grpo_by_hand, check_grpo_sum_of_squares, check_zero_gradient

check_answers([(1, my_advantages, check_grpo_by_hand),
              (2, zero_gradient, check_zero_gradient),
              (3, my_sum_squares, check_grpo_sum_of_squares)])
