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
# # Multi-turn agents with tools
#
# An agent does not answer in one go: it acts, the environment answers (a tool's result, a new position), it
# acts again, and only the end of the episode says whether it succeeded. Training it with RL changes three
# things compared with one-turn tasks, and this notebook shows each on the tiny model:
#
# 1. **the environment protocol**: `reset` opens an episode with chat messages, `step(action)` returns the
#    observation, a reward and whether it is done, shown on the calculator tool;
# 2. **one episode, token by token**: the response interleaves the policy's actions with the environment's
#    observations; only action tokens are trained, yet the observations condition every later action;
# 3. **per-turn rewards and advantages**: GRPO gives every action of an episode the same advantage; GiGPO adds
#    a step-level term that compares steps taken from the *same state* across the group's episodes;
# 4. **GiGPO vs GRPO on a grid world**, with everything but the advantage held equal.
#
# The rollout is `workbench.rollout.turns` (the same function the trainer calls), the advantages the registered
# `grpo` and `gigpo` estimators, the runs `workbench.train.compare.compare`.
#
# ## Key equations
#
# A group $g$ holds the episodes $i$ of one prompt; episode $i$ takes steps $s = 0..n_i-1$, step $s$ acts from
# the environment state $\sigma_{i,s}$ and gets the reward $r_{i,s}$; $R_i = \sum_s r_{i,s}$.
#
# $$A_E(i) = \frac{R_i - \mathrm{mean}_{j\in g} R_j}{\mathrm{std}_{j\in g} R_j}
#   \qquad\text{(GRPO's advantage: one number per episode)}$$
#
# $$G_{i,s} = \sum_{k \ge 0} \gamma^k\, r_{i,s+k}$$
#
# $$\mathcal{A}(i,s) = \{(j,u) : j \in g,\ \sigma_{j,u} = \sigma_{i,s}\}\ \text{(the anchor group of the state)}$$
#
# $$A_S(i,s) = \frac{G_{i,s} - \mathrm{mean}_{\mathcal{A}(i,s)} G}{\mathrm{std}_{\mathcal{A}(i,s)} G}
#   \ \ (0 \text{ when } |\mathcal{A}(i,s)| = 1)$$
#
# $$A_{i,t} = A_E(i) + \omega\, A_S\big(i, s(t)\big)$$
#
# on every action token $t$ of step $s(t)$ (GiGPO, Feng et al. 2025; $\omega = 1$, $\gamma = 0.95$, Bessel std).
# The loss only sees the tokens the policy sampled: with $m_{i,t} = 1$ on action tokens and $0$ on observation
# tokens (and padding),
#
# $$L = \frac{\sum_{i,t} m_{i,t}\,\ell_{i,t}}{\sum_{i,t} m_{i,t}}, \qquad
#   \ell_{i,t} = -\min\big(\rho_{i,t} A_{i,t},\ \mathrm{clip}(\rho_{i,t}, 1\pm\epsilon) A_{i,t}\big)$$
#
# $$\rho_{i,t} = \frac{\pi_\theta(y_{i,t} \mid x, y_{i,<t})}{\pi_{old}(y_{i,t} \mid x, y_{i,<t})}$$
#
# while every $\pi(y_{i,t} \mid x, y_{i,<t})$ conditions on all earlier tokens, observations included.

# %% tags=["parameters"]
preset = "smoke"     # "smoke": tiny model on CPU in about two minutes; "full": the preset's GPU configuration
task_kw = {}         # grid world knobs (size, walls, slack, ...); {} keeps get_task("gridworld")'s defaults
steps = None         # RL steps per run; None: 30 on smoke, the preset's count on full
seeds = None         # the comparison trains seeds 0..seeds-1 per recipe; None: 1 on smoke, 3 on full
seed = 0             # the seed of the batch inspected in sections 2 and 3
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"    # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import hashlib
import json
import math
import os
import statistics
from itertools import groupby
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from IPython.display import HTML, display
from transformers.utils import logging as hf_logging

from workbench import registry
from workbench.advantages.gigpo import anchor_groups, step_advantages, step_returns
from workbench.models import char_tokenizer
from workbench.rollout.turns import encode_expert
from workbench.tasks import get_task
from workbench.train import Trainer, apply_sets, make_config
from workbench.train.compare import compare
from workbench.train.metrics import read_rows
from workbench.viz.agent_episodes import episode_tokens, expert_episode, success_curves, turn_advantages, window_means
from workbench.viz.report import seed_table

torch.set_num_threads(1)
hf_logging.disable_progress_bar()
torch.manual_seed(seed)
for key in ("grpo", "gigpo"):
    entry = registry.get("advantage", key)
    print(f"{key:6} {entry.confidence:8} defaults {entry.defaults}")

# %% [markdown]
# ## 1. The environment protocol, on the calculator
#
# Every environment (`workbench/envs/`) speaks the protocol of SkyRL-gym's `BaseTextEnv`, rLLM's `BaseEnv` and
# gymnasium:
#
# ```text
# messages, info = env.reset(example, seed)            # chat messages that open the episode
# observations, reward, done, info = env.step(action)  # action: the text of one policy turn
# ```
#
# `info["state"]` is a hashable key of the state the next action is taken from (GiGPO's anchor), and
# `env.stop` lists the strings that end an action turn. The calculator evaluates `+ - *` expressions with a tool
# that does one operation per call, `[a op b]`; the final answer is `A:<value>`. Here is its expert (the
# demonstrations of the SFT warm start) playing one held-out example:

# %%
calc = get_task("calculator")
example = calc.eval_set(1)[0]
env = calc.make_env()
messages, info = env.reset(example, seed=0)
print(f"env.stop = {env.stop}, env.max_turns = {env.max_turns}")
print(f"reset -> messages {messages}\n         info {info}")
for action in calc.expert_actions(example):
    observations, reward, done, info = env.step(action)
    print(f"step({action!r:12}) -> observations {observations}, reward {reward}, done {done}, "
          f"state {info['state']}")

# %% [markdown]
# A malformed call is not an exception: the tool answers `ERR` and says why in `info["tool_error"]`, and the
# episode goes on (the policy can recover within its turn budget). A final answer that is not a tool call ends
# the episode and is scored by the exact verifier.

# %%
env.reset(example, seed=0)
print(env.step(example.prompt.rstrip("=").join("[]")))  # the whole expression in one call
print(env.step("A:0"))                                   # a wrong final answer

# %% [markdown]
# The multi-turn rollout turns such an episode into one response of token ids: each action is sampled from the
# ids so far, the observation's ids are **appended** (never re-tokenized, so the trainer scores exactly the
# sampled tokens), and two `[T]` rows go with it: `mask` (1 on the policy's tokens) and `turn` (the step id, shared
# by an action and the observation that answers it). With the tiny model's character tokenizer:

# %%
tok = char_tokenizer()
_, episode = encode_expert(tok, calc.make_env(), example, calc.expert_actions(example))
for (turn_id, m), run in groupby(zip(episode.turn, episode.mask, episode.ids), key=lambda x: x[:2]):
    ids = [i for *_, i in run]
    print(f"turn {turn_id}  {'action     ' if m else 'observation'}  mask {m:.0f}  {len(ids):2} tokens  "
          f"{tok.decode(ids)!r}")
print(f"trained tokens: {int(sum(episode.mask))} of {len(episode.ids)}")

# %% [markdown]
# A tool call ends at its stop string `]` (kept in the action, no EOS); the final answer ends with EOS, which
# the policy sampled and is trained on. The same episode as a figure: every cell is a token, coloured by its
# role; a black frame marks the tokens the update trains on (mask 1); each turn's line ends with the turn's reward
# $r$ (here 1 on the final answer only) and its advantage $A$ (none yet: no group, no estimator). Hover a cell for
# its position, mask, turn id and advantage.

# %%
episode_tokens(expert_episode(calc, example, tok), tok, 0).show()

# %% [markdown]
# **What to look at:** blue (action) cells are exactly the framed ones; orange (observation) cells, the tool's
# results, are never framed. A healthy multi-turn batch always looks like this; an observation cell with a frame
# would mean the policy is trained to *predict the tool's output*, a common bug in home-made agent loops.
#
# ## 2. One episode of the grid world, token by token
#
# The grid world is the task the rest of this notebook trains on. The agent sees the goal's position and its own
# cell's neighbours (`#` wall, `.` free, `G` goal) and moves one step per turn (`U D L R`, each a stop string);
# the map itself is hidden, and the episode pays 1 on reaching the goal within a budget of moves. Positions
# recur, within an episode and across a group, which is what GiGPO exploits.
#
# We build the GiGPO trainer of section 4 (seed `seed`): the tiny model after its SFT warm start on the expert's
# episodes (cached after the first run), and `trainer.make_batch(0)`, the exact batch its step 0 trains on,
# through every pipeline stage before the update (rollout, rewards, forward passes, advantages).

# %%
grid = get_task("gridworld", **task_kw)
print(grid)
if preset == "smoke":  # small enough for a CPU in about two minutes for the whole notebook
    sizes = {"sft_steps": 100, "steps": steps or 30, "prompts_per_step": 4, "eval_size": 50}
else:                  # the preset's real sizes
    sizes = {"steps": steps} if steps else {}
n_seeds = seeds or (1 if preset == "smoke" else 3)
sets = [f"{k}={v}" for k, v in sizes.items()] + [f"task_kw.{k}={json.dumps(v)}" for k, v in task_kw.items()]
# grpo as registered averages per sequence with KL beta 0.04; gigpo (verl-agent's setting) takes a token mean with
# beta 0.01. Giving both recipes gigpo's loss leaves the advantage as the only difference (verl-agent's GRPO
# baseline does the same): the grpo run is then exactly gigpo with omega = 0.
sets += ["recipe_overrides.agg=token-mean", "kl_coef=0.01"]
tag = hashlib.sha256("|".join(sorted(sets)).encode()).hexdigest()[:8]
out = Path(runs_dir) / f"09_agents-gridworld-{preset}-{tag}"
config = apply_sets(make_config(preset, recipe="gigpo", task="gridworld", seed=seed), sets)
trainer = Trainer(config, out / f"batch-s{seed}", progress=False).setup()
print({k: getattr(config, k) for k in ("model", "sft_steps", "steps", "prompts_per_step", "group_size",
                                       "max_new_tokens", "lr")})
batch = trainer.make_batch(0)
G = config.group_size
returns = batch.rewards.view(-1, G)
print(f"{batch.size} episodes of {returns.shape[0]} maps, success rate {batch.rewards.mean():.2f}; "
      f"turns per episode {(batch.turn.max(-1).values + 1).float().mean():.1f}; response width {batch.mask.shape[1]}")

# %% [markdown]
# The longest successful episode (if any) of a group whose episodes do not all agree, so that the group has a
# learning signal:

# %%
spread = returns.std(-1) > 0
g = int(torch.nonzero(spread).flatten()[0]) if bool(spread.any()) else 0  # a group with signal
rows = list(range(g * G, (g + 1) * G))
row = max(rows, key=lambda i: (float(batch.rewards[i]), int(batch.turn[i].max())))  # a success, the longest
print(f"map of group {g}: {batch.prompts[row]!r} -> {batch.completions[row]!r}")
episode_tokens(batch, trainer.tokenizer, row).show()

# %% [markdown]
# **What to look at:** one framed (trained) cell per turn, the move letter; the rest of each line is the
# observation `"\n" + row col + neighbours` (mask 0), and the last turn has no observation (nothing follows the
# move that reached the goal, or the last move of the budget). The turn reward is 1 on the final step of a
# successful episode and 0 elsewhere; the advantages are GiGPO's (step 0 of the pipeline), so they differ from
# turn to turn.
#
# **Masked, yet conditioning.** Observation tokens are excluded from the loss (their log-probabilities are never
# pushed up or down; the environment, not the policy, wrote them) but they sit in the context of every later
# action. Flip the walls and free cells of the first observation and ask the model for its next move:

# %%
first_obs = (batch.turn[row] == 0) & (batch.mask[row] == 0)
cut = int(torch.nonzero(batch.turn[row] == 1)[0])            # the second action's position
prompt = batch.prompt_ids[row][batch.prompt_mask[row] > 0]
history = batch.response_ids[row][:cut]
obs_text = trainer.tokenizer.decode(history[first_obs[:cut]])
flipped = obs_text.translate(str.maketrans(".#", "#."))
flipped_ids = torch.tensor(trainer.tokenizer(flipped, add_special_tokens=False)["input_ids"], dtype=torch.long)
edited = torch.cat([history[~first_obs[:cut]], flipped_ids])   # the first action, then the flipped observation
move_ids = [trainer.tokenizer(m, add_special_tokens=False)["input_ids"][0] for m in "UDLR"]


@torch.no_grad()
def next_move_probs(response):
    ids = torch.cat([prompt, response])[None]
    probs = torch.softmax(trainer.model(input_ids=ids).logits[0, -1].float(), -1)
    return {m: round(float(probs[i]), 3) for m, i in zip("UDLR", move_ids)}


print(f"first observation {obs_text!r:14} -> P(next move) {next_move_probs(history)}")
print(f"flipped           {flipped!r:14} -> P(next move) {next_move_probs(edited)}")

# %% [markdown]
# The next move's distribution follows the observation, although no gradient ever reaches the observation
# tokens' own log-probabilities. (For a chat model the observation is a `tool` turn of the chat template; the
# template's markers are observation tokens too.)
#
# ## 3. Per-turn rewards and advantages
#
# The same group under two estimators, on the same batch: GRPO's advantage (computed here by the registered
# `grpo`, the episode term $A_E$) and GiGPO's (the batch's own advantages). The top panel shows each turn's reward
# and, in each cell, the position the turn acted from (row, column).

# %%
grpo_adv = registry.get("advantage", "grpo").fn(batch)
turn_advantages(batch, row, {"GRPO": grpo_adv, "GiGPO": batch.advantages}).show()

# %% [markdown]
# **What to look at:** each GRPO row is one colour: every step of a successful episode is pushed up equally,
# detours and bumps into walls included, and every step of a failed one pushed down equally. GiGPO's rows change
# colour along the episode: each step is compared with the other steps of the group that acted from the **same
# position**, by the discounted return that followed ($G = \gamma^{\text{steps left to the goal}}$ here, since
# only the goal pays). Among them, the step that reached the goal soonest gets the largest $A_S$, and a step from
# that position that never got there (a failed episode's) a negative one: it missed a move that works. Where every
# step from a position had the same return (all failed, say), or only one step acted from it, there is no step term
# ($A_S = 0$, its cell equals GRPO's). The anchor groups behind it:

# %%
states = [[info["state"] for info in r] for r in batch.turn_info]
gamma = trainer.recipe.advantage[0].kw["gamma"]   # the recipe's gigpo(omega=1, gamma=0.95)
G_ret = step_returns(batch.turn_rewards, [len(s) for s in states], gamma)
A_S = step_advantages(G_ret, states, batch.group)
shared = [(key[1], members) for key, members in anchor_groups(states, batch.group).items()
          if key[0] == int(batch.group[row]) and len(members) > 1]
print(f"group {g}: {len(shared)} positions acted from by more than one step")
differs = lambda members: len({round(float(G_ret[i, s]), 6) for i, s in members}) > 1  # noqa: E731
for state, members in sorted(shared, key=lambda x: (not differs(x[1]), -len(x[1])))[:6]:
    shown = sorted(members, key=lambda m: -float(G_ret[m]))[:8]   # the best returns first
    print(f"  state {state}: {len(members):2} steps (row, turn) {shown}{' ...' if len(members) > 8 else ''}\n"
          f"      returns G {[round(float(G_ret[i, s]), 2) for i, s in shown]}\n"
          f"      A_S       {[round(float(A_S[i, s]), 2) for i, s in shown]}")
check = (registry.get("advantage", "gigpo").fn(batch) - grpo_adv - A_S.gather(1, batch.turn.clamp(min=0)) * batch.mask)
print(f"GiGPO - GRPO - omega * A_S on the action tokens: max |difference| {check.abs().max():.1e}")

# %% [markdown]
# ## 4. GiGPO vs GRPO on the grid world
#
# Both recipes start from the same warm start, see the same maps in the same order (same seed), and share the
# loss (token mean, PPO clip, k3 KL with β = 0.01): the only difference is the advantage. `compare` trains each
# (recipe, seed) into its own resumable folder; re-running this cell only finishes what is missing.

# %%
result = compare(["grpo", "gigpo"], task="gridworld", preset=preset, seeds=n_seeds, out=out, sets=sets,
                 progress=False)
groups = {key: [read_rows(out / f"{key}-s{s}" / "metrics.jsonl") for s in range(n_seeds)] for key in ("grpo", "gigpo")}
display(HTML(seed_table(result)))

# %% [markdown]
# The sampled success rate of every step (the share of the step's episodes that reached the goal) and its
# trailing 10-step mean, then the usual health signals.
#
# **What to look at:** a healthy run's trailing mean rises or holds while the entropy falls slowly and the KL to
# the warm start grows smoothly; an entropy collapse with a flat success rate means the policy is locking into
# its own habits. The raw per-step curve jumps by whole episodes: with `prompts_per_step` maps × G episodes per
# step, one step's success rate is an average over few maps.

# %%
success_curves(groups).show()

# %%
claim = ("GiGPO's step-level advantage gives finer credit than GRPO's episode advantage and reaches higher "
         "success on agent tasks with recurring states (Feng et al. 2025: ALFWorld, WebShop).")
eval_n = config.eval_size
after = {k: result["recipes"][k]["accuracy_after"] for k in ("grpo", "gigpo")}
before = {k: result["recipes"][k]["accuracy_before"] for k in ("grpo", "gigpo")}
sampled = {k: [window_means(rows) for rows in groups[k]] for k in groups}
early_late = {k: (statistics.fmean(a for a, _ in v), statistics.fmean(b for _, b in v)) for k, v in sampled.items()}
gap = after["gigpo"] - after["grpo"]
noise = 2 * math.sqrt(2 * 0.25 / (eval_n * n_seeds))  # two standard errors of a difference of held-out accuracies
print(f"claim: {claim}")
print(f"what we see ({n_seeds} seed(s), {config.steps} steps, {config.prompts_per_step} maps x G={G} per step, "
      f"{eval_n} held-out maps): greedy success GRPO {before['grpo']:.2f} -> {after['grpo']:.2f}, "
      f"GiGPO {before['gigpo']:.2f} -> {after['gigpo']:.2f} (difference {gap:+.2f}); sampled success, first vs last "
      f"10 steps: GRPO {early_late['grpo'][0]:.2f} -> {early_late['grpo'][1]:.2f}, "
      f"GiGPO {early_late['gigpo'][0]:.2f} -> {early_late['gigpo'][1]:.2f}.")
reasons = ([f"the gap {gap:+.2f} is within the noise (about ±{noise:.2f} for two held-out accuracies here)"]
           * (abs(gap) < noise) + [f"{n_seeds} seed(s) is fewer than 3"] * (n_seeds < 3))
if reasons:
    print(f"verdict: none ({'; '.join(reasons)}): this scale can neither support nor refute the claim.")
else:
    print(f"verdict: {'GiGPO' if gap > 0 else 'GRPO'} ahead by more than the noise (±{noise:.2f}) over {n_seeds} "
          "seeds, at this scale and on this task.")

# %% [markdown]
# At `preset="smoke"` the comparison is a test of the pipeline, not of the method: one seed, a few dozen steps on
# a 0.5M-parameter model, a held-out set of 50 maps. Run `workbench notebook 09_agents --preset full` (a GPU) or
# `-p seeds=5 -p steps=200` on a CPU (about 0.5 s per step here: roughly 20 minutes for the ten runs) before
# reading anything into the gap.
#
# ## Exercises (checked automatically)
#
# 1. In the calculator episode `37*48+19=` with the actions `[37*48]`, `[1776+19]`, `A:1795` and the tool's answers
#    `1776\n`, `1795\n`, how many tokens does the update train on (character tokenizer: one token per character,
#    EOS is one token)?
#
# A group of four grid-world episodes (goal at 1,2; the reward 1 comes on the step that reaches it, the last one);
# the states each step acted from:
#
# | episode | states acted from | R |
# | --- | --- | --- |
# | 0 | (0,0) (0,1) (1,1) | 1 |
# | 1 | (0,0) (1,0) (1,1) (0,1) (0,2) | 1 |
# | 2 | (0,0) (0,0) (0,1) (0,2) (0,2) | 0 |
# | 3 | (0,0) (1,0) (2,0) (3,0) (3,0) | 0 |
#
# 2. With $\gamma = 0.95$, what is the step-level advantage $A_S$ of episode 0's first step (state (0,0))?
# 3. What is GiGPO's advantage ($\omega = 1$) on the action of episode 3's step 2 (state (2,0))?
# 4. What is $A_S$ of episode 0's step 2 (state (1,1))? Would it change if episode 1 had needed 10 more steps
#    after (1,1)?
#
# Write your answers below (they start as `None`) and run the check cell.

# %%
my_trained_tokens = None   # 1: an int
my_start_step = None       # 2: a float
my_unshared_step = None    # 3: a float
my_two_step = None         # 4: a float

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    my_trained_tokens = len("[37*48]") + len("[1776+19]") + len("A:1795") + 1   # every action character + final EOS
    start_returns = [0.95 ** 2, 0.95 ** 4, 0.0, 0.0, 0.0]   # the 5 steps acting from (0,0): G = gamma^(n-1-s) R
    my_start_step = (start_returns[0] - statistics.mean(start_returns)) / statistics.stdev(start_returns)
    my_unshared_step = (0 - statistics.mean([1, 1, 0, 0])) / statistics.stdev([1, 1, 0, 0])  # A_S = 0: A_E alone
    my_two_step = 1 / math.sqrt(2)   # two members: (a - (a+b)/2) / (|a-b|/sqrt 2), whatever the gap

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb09_agents import (check_anchor_step_advantage, check_trained_tokens, check_two_step_anchor,
                                             check_unshared_step_advantage)

check_answers([(1, my_trained_tokens, check_trained_tokens),
              (2, my_start_step, check_anchor_step_advantage),
              (3, my_unshared_step, check_unshared_step_advantage),
              (4, my_two_step, check_two_step_anchor)])
