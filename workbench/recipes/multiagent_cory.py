"""F8 recipe, CORY: the LLM duplicated into a pioneer and an observer, trained together on their collective reward,
swapping roles every T steps (`--task plan-act --set lora_r=8`).

    cory      two policies (LoRA adapters on the one frozen base: `policies="separate"`) play every game, policy k the
              agent (k + step // T) mod 2 (rollout `agents`, swap_every T = 10); every row of a game is paid
              R = r(x, y_P) + r(x, y_O) (reward shaping `cory`), then its own per-token KL penalty to the
              reference, -beta k1 (`kl-in-reward`, beta 0.05: the workbench's PPO, TRL's); advantages are
              group baselines per (prompt, role) (`dr-mas` over rows); PPO clip 0.2, token mean.
    cory-ppo  the control: one policy plays the pioneer only (seat 0; the observer seat is the task's Python solver,
              whose row is not kept), same KL, advantage and loss: single-agent PPO on the pioneer's task (the
              paper's PPO baseline). Run both with the same lora_r.

Decisions (no reference implementation located; the paper's text):
  - PPO's critic -> group baselines. CORY trains each agent with PPO and its own value head; the trainer has one value
    head, shared by separate policies (MARFT's), which would mix the two agents. At our scale each agent is
    measured against its own samples instead: `dr-mas` with pool="rows" is GRPO's z-score within (prompt, agent),
    and within a step agent and policy are one-to-one, so it is per (prompt, policy). Both rows of a game carry the
    same collective reward, so the two agents' baselines differ only through their own KL terms.
  - KL: in the reward (TRL's PPO, which CORY builds on), k1 per token on each row: each agent's own KL to the
    reference. The reference is the adapter-disabled base (LoRA), shared by both agents: the duplicated initial LLM.
  - T = 10 steps between swaps (the paper's period is not stated in what we read); --set recipe_overrides.rollout.
    swap_every=... changes it, None never swaps.
  - The control is the one-agent run, not CORY with the observer's reward zeroed: with observer_weight 0 and no swaps
    the pioneer's rows get exactly the rewards, KL and advantages of PPO on the pioneer (tests/recipes/
    test_multiagent_cory.py checks it), but the observer would still be sampled and trained on the pioneer's reward.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import KL_IN_REWARD
from workbench.rewards.cory import CORY_TITLE

SWAP_EVERY = 10  # T, steps between role swaps

CORY = dict(advantage=[use("dr-mas", pool="rows")], objective=use("ppo-clip"), agg="token-mean",
            reward_shaping=[use("cory", observer_weight=1.0), KL_IN_REWARD])

define(Recipe(
    key="cory", title=CORY_TITLE,
    summary="Pioneer and observer: two LoRA policies on one base play every game (the observer sees the pioneer's "
            "answer), swap roles every 10 steps, and are both paid R = r_P + r_O minus their own k1 KL (0.05) in the "
            "reward; GRPO-style baselines per (prompt, role) instead of PPO's critic; PPO clip, token mean.",
    rollout=use("agents", opponent="self", swap_every=SWAP_EVERY), policies="separate", **CORY))

define(Recipe(
    key="cory-ppo", title=CORY_TITLE,
    summary="CORY's control: one policy plays the pioneer only (the observer seat is the Python solver, its row not "
            "kept), with cory's KL, advantage and loss: single-agent PPO on the pioneer's task.",
    rollout=use("agents", opponent="solver", seat=0),
    **{**CORY, "reward_shaping": [use("cory", observer_weight=0.0), KL_IN_REWARD]}))
