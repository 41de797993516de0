"""Multi-agent recipes: games played by the policy against itself or a fixed opponent (`--task kuhn | tictactoe`).

Every recipe here plays through the rollout `agents` (one row per (episode, agent), the other agents' actions as
observations). `self-play` is the baseline the multiagent methods are compared with: GRPO's group z-score over all
of a prompt group's rows, both players' rows pooled. `self-play-vs-scripted` is the fixed-opponent control: the
policy takes one seeded seat, the game's scripted Python player the other.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO

SELF_PLAY = {**GRPO, "rollout": use("agents", opponent="self")}

define(Recipe(
    key="self-play", title="Self-play GRPO over a multi-agent game (the multiagent baseline)",
    summary="The policy plays every seat; GRPO's z-score over each prompt group's rows, all agents pooled; PPO clip, "
            "token mean, k3 KL 0.04 in the loss (GRPO's).", **SELF_PLAY))

define(Recipe(
    key="self-play-vs-scripted", title="GRPO against a fixed scripted opponent (the fixed-opponent control)",
    summary="The policy plays one seat drawn per episode from its seed; the game's scripted Python player plays the "
            "other; GRPO over the policy's rows.", **{**SELF_PLAY, "rollout": use("agents", opponent="scripted")}))

define(Recipe(
    key="self-play-separate", title="Self-play with a separate policy per agent (two LoRA adapters on one base)",
    summary="As self-play, but player k is policy k: its own LoRA adapter on the shared frozen base, trained only on "
            "its rows, with its own optimizer state and gradient clipping (needs lora_r > 0).",
    **SELF_PLAY, policies="separate"))
