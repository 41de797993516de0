"""Multi-agent recipes: games played by the policy against itself or a fixed opponent (`--task kuhn | tictactoe`).

Every recipe here plays through the rollout `agents` (one row per (episode, agent), the other agents' actions as
observations). `self-play` is the baseline the multiagent methods are compared with: GRPO's group z-score over all
of a prompt group's rows, both players' rows pooled. `self-play-vs-scripted` is the fixed-opponent control: the
policy takes one seeded seat, the game's scripted Python player the other.
"""
from workbench.advantages.dr_mas import DR_MAS_TITLE
from workbench.advantages.marft import MARFT_TITLE
from workbench.advantages.mars import MARS_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rewards.vision_zero import VISION_ZERO_TITLE
from workbench.transforms.role_baseline import SPIRAL_TITLE

SELF_PLAY = {**GRPO, "rollout": use("agents", opponent="self")}
# against an opponent the policy has one row per game, and none where the game ended before its first turn (the
# opponent forfeited): a prompt group may keep a single row, which gets A = 0
VERSUS = {**SELF_PLAY, "advantage": [use("grpo", allow_singletons=True)]}

define(Recipe(
    key="self-play", title="Self-play GRPO over a multi-agent game (the multiagent baseline)",
    summary="The policy plays every seat; GRPO's z-score over each prompt group's rows, all agents pooled; PPO clip, "
            "token mean, k3 KL 0.04 in the loss (GRPO's).", **SELF_PLAY))

define(Recipe(
    key="self-play-vs-scripted", title="GRPO against a fixed scripted opponent (the fixed-opponent control)",
    summary="The policy plays one seat drawn per episode from its seed; the game's scripted Python player plays the "
            "other; GRPO over the policy's rows.", **{**VERSUS, "rollout": use("agents", opponent="scripted")}))

define(Recipe(
    key="self-play-vs-past", title="GRPO against a frozen earlier iterate of the policy (fictitious-play style)",
    summary="The policy plays one seeded seat; the other is the policy as it was up to 10 steps ago (the reference "
            "previous-iterate, moved to the policy every 10 steps), sampled but never trained; the fixed KL reference "
            "is the warm start.",
    **{**VERSUS, "rollout": use("agents", opponent="past"), "reference": use("previous-iterate", every=10)}))

define(Recipe(
    key="self-play-separate", title="Self-play with a separate policy per agent (two LoRA adapters on one base)",
    summary="As self-play, but player k is policy k: its own LoRA adapter on the shared frozen base, trained only on "
            "its rows, with its own optimizer state and gradient clipping (needs lora_r > 0).",
    **SELF_PLAY, policies="separate"))

# ----------------------------------------------------------------------------- the catalog's multiagent methods

define(Recipe(
    key="dr-mas", title=DR_MAS_TITLE,
    summary="GRPO whose group is (prompt, agent): each agent's rows z-scored against its own rewards (every agent "
            "call pooled, as the authors' rows are); PPO clip, token mean, no KL (examples/drmas_trainer).",
    rollout=use("agents", opponent="self"), advantage=[use("dr-mas")], agg="token-mean"))

define(Recipe(
    key="mars", title=MARS_TITLE,
    summary="Turn rewards on turn ends, normalized per player, reward-to-go (gamma 1), advantages centred per player "
            "over distinct values; PPO clip 0.2 with dual clip (c 3), k3 KL 0.2 in the loss, no entropy bonus "
            "(agentic_val_multi_games_selfplay.yaml).",
    rollout=use("agents", opponent="self"), advantage=[use("mars")],
    objective=use("dual-clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0), agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.2, estimator="k3")]))

define(Recipe(
    key="marft", title=MARFT_TITLE,
    summary="Agent-sequential GAE (gamma 0.99, lam 0.95) with one critic shared by the agents; PPO clip on the "
            "action tokens, entropy bonus 0.01; the critic's loss is PPO's clipped squared error (MARFT's Huber with "
            "delta 10 is the squared error at our returns, |V - R| < 10).",
    rollout=use("agents", opponent="self"), advantage=[use("marft")], agg="token-mean",
    regularizers=[use("entropy-bonus", coef=0.01)], value=use("value-loss", coef=0.5)))

define(Recipe(
    key="spiral", title=SPIRAL_TITLE,
    summary="Self-play with SPIRAL's role-conditioned advantage: A = R - b_role, b_role an exponential moving average "
            "(decay 0.95) of each role's returns, kept across steps; PPO clip, token mean, no KL.",
    rollout=use("agents", opponent="self"), group_transforms=[use("role-baseline", decay=0.95)],
    advantage=["remax"], agg="token-mean"))

define(Recipe(
    key="vision-zero", title=VISION_ZERO_TITLE,
    summary="Who-is-the-spy in text (--task spy): clue rewards from the judges' votes, zero-sum across players, minus "
            "a per-role running baseline; the judges' vote reward z-scored per game; the trained phase alternates "
            "clue / vote every step (the authors' interactive mode); PPO clip 0.2, k3 KL 0.04.",
    rollout=use("agents", opponent="self"), reward_shaping=[use("vision-zero", decay=0.9)], advantage=["remax"],
    token_masks=[use("vision-zero")],
    schedules=[use("vision-zero", cycle_length=1, into="token_mask:vision-zero.phase")],
    objective=use("ppo-clip", eps_low=0.2, eps_high=0.2), agg="seq-mean-token-mean",
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3")]))
