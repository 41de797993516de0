"""Credit-assignment recipes (family F4): which turn, segment or token of an episode earned its reward.

Most need episodes of several turns (their components declare `needs=("multi_turn",)`, so a one-turn task is
refused at start): train them on `keydoor` (an early action decides a late reward), `screen` (a form filled field by
field), `gridworld`, `calculator` or `search`. `rover` and `b-coder` are value-based objectives over the vocabulary
and train on any task (`countdown`). Notebook 13 puts every estimator beside the exact advantage
(`workbench.advantages.exact`).
"""
from workbench.advantages.adora import ADORA_TITLE
from workbench.advantages.cm2 import CM2_TITLE
from workbench.advantages.spo_single import SPO_TITLE as SPO_SINGLE_TITLE
from workbench.advantages.xrpo import XRPO_TITLE
from workbench.objectives.b_coder import B_CODER_TITLE
from workbench.objectives.rover import ROVER_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import CRITIC, GRPO_KL
from workbench.recipes.reward_length import BUDGET_FIRST
from workbench.rewards.hbpo import HBPO_TITLE

# ----------------------------------------------------------------------------- outcome advantages, reshaped per group

define(Recipe(
    key="adora", title=ADORA_TITLE,
    summary="GRPO whose groups are damped to lambda = 0.1 unless their longest correct response is longer than their "
            "mean untruncated wrong one (ADORA.sh: verl GRPO, singletons kept, k3 KL loss 0.001).",
    advantage=[use("grpo", allow_singletons="keep"), use("adora", lam=0.1)], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.001, estimator="k3")]))

define(Recipe(
    key="xrpo-sharpening", title=XRPO_TITLE,
    summary="GRPO plus XRPO's novelty bonus on correct responses less likely than their group's average "
            "(lambda 1, kappa 0.5: catalog start values; third-party formula).",
    advantage=["grpo", use("xrpo-sharpening", lam=1.0, kappa=0.5)], agg="seq-mean-token-mean",
    regularizers=[GRPO_KL]))

define(Recipe(
    key="hbpo-advantage", title=HBPO_TITLE,
    summary="HBPO: budget subgroups, the budget-aware reward and the intra-budget + inter-group advantage; "
            "L_max = 64 for reward and advantage alike (>= every budget when max_new_tokens <= 64).",
    rollout=use("hbpo-reward", template=BUDGET_FIRST), rewards=[use("hbpo-reward", weight=1.0, max_len=64)],
    task_reward=0.0, advantage=[use("hbpo-advantage", max_len=64)], agg="token-mean"))

define(Recipe(
    key="flow-grpo", title="In-the-Flow Agentic System Optimization for Effective Planning and Tool Use",
    summary="AgentFlow: the episode's outcome on every turn, group z-score over the prompt's turn-samples; PPO clip "
            "0.2 / 0.3, token mean, k3 KL loss 0.001 (train/config.yaml).",
    advantage=[use("flow-grpo", pool="turn")], objective=use("ppo-clip", eps_low=0.2, eps_high=0.3),
    agg="token-mean", regularizers=[use("kl-penalty", beta=0.001, estimator="k3")]))

define(Recipe(
    key="cm2-advantage", title=CM2_TITLE,
    summary="Checklist reward alone (rule judge), step-level checklist advantage (paper); the authors' final recipe "
            "is level='trajectory', f_norm='none' with G = 48.",
    rewards=[use("cm2-checklist", weight=1.0)], task_reward=0.0,
    advantage=[use("cm2-advantage", level="step")], agg="token-mean"))

define(Recipe(
    key="spo-single", title=SPO_SINGLE_TITLE,
    summary="One response per prompt (group_size 1); per-prompt Beta tracker baseline (KL-adaptive rho, 8 offline "
            "samples), batch z-score; no KL, clip 0.2 / 0.28 (spo/train.sh); prompts drawn uniformly.",
    reward_shaping=[use("spo-single")], advantage=["spo-single"], agg="token-mean",
    objective=use("ppo-clip", eps_low=0.2, eps_high=0.28)))

# ----------------------------------------------------------------------------- turn structure: groups, returns, beliefs

define(Recipe(
    key="hgpo", title="Hierarchy-of-Groups Policy Optimization for Long-Horizon Agentic Tasks",
    summary="Step returns normalized in nested groups of steps sharing their last k observations (k = 1..K+1, K = 2) "
            "within the prompt group, averaged with weights (k+1)^alpha over the non-zero levels (authors' ALFWorld "
            "defaults: gamma 0.95, mean_std_norm, alpha 1, no base group); PPO clip, token mean, k3 KL 0.01.",
    advantage=[use("hgpo", history_length=2, length_weight_alpha=1.0, gamma=0.95)], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.01, estimator="k3")]))

define(Recipe(
    key="ui-s1", title="UI-S1: Advancing GUI Automation via Semi-online Reinforcement Learning",
    summary="Semi-online rollouts along the expert's trajectory (mismatches patched with the expert's action, at most "
            "2, then the episode stops; step reward = action match); step returns reset at mismatches (gamma 0.5), "
            "normalized per (prompt, step index), plus the episode group advantage; dynamic sampling.",
    rollout=use("ui-s1", patch_threshold=2), advantage=[use("ui-s1", gamma=0.5)], agg="token-mean",
    group_transforms=[use("dynamic-sampling", max_rounds=3)]))

define(Recipe(
    key="igpo", title="Information Gain-based Policy Optimization: A Simple and Effective Approach for Multi-Turn "
                      "LLM Agents",
    summary="Turn rewards = gain in the policy's teacher-forced belief in the ground-truth answer (outcome on the last "
            "turn), normalized jointly over the prompt group and accumulated turn by turn (gamma 1); KL 0.001.",
    reward_shaping=[use("igpo")], advantage=[use("igpo", gamma=1.0, norm="joint")], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.001, estimator="k3")]))

define(Recipe(
    key="infopo", title="InfoPO: Information-Driven Policy Optimization for User-Centric Agents",
    summary="Outcome GRPO plus a variance-gated (exp(-std/0.1)) group-normalized counterfactual signal per turn: how "
            "much the real observation, against a neutral text, raised the next action's log-prob.",
    reward_shaping=[use("infopo")], advantage=[use("infopo")], agg="token-mean"))

# ----------------------------------------------------------------------------- turn- and chunk-level ratios and updates

define(Recipe(
    key="ipa", title="Let It Flow: Agentic Crafting on Rock and Roll, Building the ROME Model within an Open Agentic "
                     "Learning Ecosystem",
    summary="Interaction-chunk credit and ratio (ROME's IPA): PPO-clip 0.2 (ROLL pg_clip) on each turn's "
            "geometric-mean ratio, the trajectory's group z-score on every chunk, chunk mean then trajectory mean.",
    advantage=[use("ipa")], objective=use("ipa"), agg="seq-mean-token-mean"))

define(Recipe(
    key="seeupo", title="SeeUPO: Sequence-Level Agentic-RL with Convergence Guarantees",
    summary="One optimizer step per turn, last turn first, on turn-level (sequence) ratios; GRAE advantage (no std) "
            "times the stopped ratios of the turns already updated; clip 0.2, k3 KL 0.002 in the loss (AgentEvolver "
            "launcher: low_var_kl 0.002).",
    advantage=[use("seeupo")], objective=use("seeupo"), agg="seq-mean-token-mean",
    regularizers=[use("kl-penalty", beta=0.002, estimator="k3")]))

# ----------------------------------------------------------------------------- Monte Carlo values from copies and prefixes

SPO = "Segment Policy Optimization: Effective Segment-Level Credit Assignment in RL for Large Language Models"
PROACT = "ProAct: Agentic Lookahead in Interactive Environments"

define(Recipe(
    key="spo-segment", title=SPO,
    summary="SPO-chain: cut each response at every 5th token with p < 0.9, V(s) at each cut from 4 Monte Carlo "
            "continuations of the current policy, A = V(s_k) - V(s_{k-1}) on the segment; confident tokens out of "
            "the loss and the whitening; PPO clip 0.2, k3 KL 1e-4 in the loss (the authors' configs).",
    reward_shaping=[use("spo-segment", cutpoint_interval=5, mc_samples=4)],
    advantage=[use("spo-segment")], token_masks=[use("spo-segment")], agg="token-mean",
    regularizers=[use("kl-penalty", beta=1e-4, estimator="k3")]))

define(Recipe(
    key="spo-tree", title=SPO,
    summary="SPO-tree: per prompt a 4x4 tree of 4-token segments (the rest of the budget last), node values from "
            "the leaves below, A = V(child) - V(parent) on each node's tokens, each edge trained once, zero-advantage "
            "edges dropped (the authors' default); probability mask and k3 KL 1e-4 as the chain.",
    rollout=use("spo-segment", branch_factors=(4, 4), segment_tokens=4),
    advantage=[use("spo-segment", drop_zero=True)], token_masks=[use("spo-segment", drop_zero=True)],
    agg="token-mean", regularizers=[use("kl-penalty", beta=1e-4, estimator="k3")]))

define(Recipe(
    key="proact-mc-critic", title=PROACT,
    summary="MC-GRPO: each turn's reward is Q_MC(s, a) from 32 uniformly random rollouts (gamma 0.9) in copies of "
            "the environment, normalized over the turns from the same state (all one action: over every move); "
            "PPO clip 0.4.",
    reward_shaping=[use("proact-mc-critic", num_rollouts=32, max_steps=30)],
    advantage=[use("proact-mc-critic")], objective=use("ppo-clip", eps_low=0.4, eps_high=0.4), agg="token-mean"))

define(Recipe(
    key="proact-mc-ppo", title=PROACT,
    summary="MC-PPO: turn-level GAE (gamma 0.9, lambda 0) on the mixed baseline 0.1 V_phi + 0.9 V_MC, V_MC from 32 "
            "random rollouts; turn advantages z-scored over the batch; PPO clip 0.4, critic on each turn's first token.",
    reward_shaping=[use("proact-mc-critic", mode="ppo", num_rollouts=32, max_steps=30)],
    advantage=[use("proact-mc-critic", mode="ppo")], value=CRITIC,
    objective=use("ppo-clip", eps_low=0.4, eps_high=0.4), agg="token-mean"))

# ----------------------------------------------------------------------------- critics and learned estimators

define(Recipe(
    key="vl-dac", title="Enhancing Vision-Language Model Training with Reinforcement Learning in Synthetic Worlds for "
                        "Real-World Success",
    summary="One critic value per environment step (at the action's first token), GAE over steps (gamma 0.99, lam "
            "0.95) z-scored over the batch's steps; token PPO clip 0.1 with the authors' ratio > 10 guard, k3 KL 0.04, "
            "clipped value loss (0.5, clip 0.1).",
    advantage=[use("vl-dac", gamma=0.99, lam=0.95)], objective=use("vl-dac", eps=0.1), agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3")], value=use("value-loss", coef=1.0, clip_eps=0.1)))

define(Recipe(
    key="poad", title="Reinforcing Language Agents via Policy Optimization with Action Decomposition",
    summary="Token-level critic; GAE with no discount or reward inside an action, the step reward and gamma 0.95 at "
            "its last token (BAD); PPO clip 0.2.",
    advantage=[use("poad", gamma=0.95, lam=0.95)], agg="token-mean", value=CRITIC))

define(Recipe(
    key="hiper", title="HiPER: Hierarchical Reinforcement Learning with Explicit Credit Assignment for Large Language "
                       "Model Agents",
    summary="Subgoal windows from the environment: the window's first step gets its discounted return + bootstrapped "
            "next-window value - baseline, executor steps GAE cut at the window's end; one step critic.",
    advantage=[use("hiper", gamma=0.95, lam=0.95)], agg="token-mean", value=CRITIC,
    regularizers=[use("kl-penalty", beta=0.01, estimator="k3")]))

define(Recipe(
    key="digirl", title="DigiRL: Training In-The-Wild Device-Control Agents with Autonomous Reinforcement Learning",
    summary="Success-classifier step critic (BCE on MC return > 0), doubly-robust step advantage as an AWR weight "
            "(-A log pi, token sums), policy trained on the batch's top 10% of R - V(s_0).",
    advantage=[use("digirl", mode="paper", lam=0.5)], objective=use("gpg"), agg="seq-mean-token-sum",
    value=use("digirl", coef=1.0), token_masks=[use("digirl", quantile=0.9)]))

define(Recipe(
    key="spa-rl", title="SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution",
    summary="Step rewards = progress estimator readings at turn ends (fit so they sum to the outcome) + 0.5 per "
            "executed action; step-level PPO (GAE gamma 1, lam 0.95) with the critic read at turn starts.",
    advantage=[use("spa-rl")], agg="token-mean", value=use("spa-rl", coef=0.1),
    reward_shaping=[use("kl-in-reward", beta=0.05, estimator="k1")]))

# ----------------------------------------------------------------------------- value-based objectives

define(Recipe(
    key="rover", title=ROVER_TITLE,
    summary="Q = rho log(pi/pi_old) regressed on the GRPO z-scored reward plus the uniform-policy value of the next "
            "state (vocabulary-mean log-ratio); token mean, no clip, critic or KL.",
    advantage=[use("grpo")], objective=use("rover"), agg="token-mean"))

define(Recipe(
    key="b-coder", title=B_CODER_TITLE,
    summary="Token Q-learning: Q = V(s) + alpha (log pi - max log pi) regressed on r + gamma Q(s', a*), a* the "
            "reference's greedy token; the critic V is trained on Monte Carlo returns (gae lambda 1).",
    advantage=[use("gae", gamma=1.0, lam=1.0)], value=CRITIC, objective=use("b-coder"),
    agg="token-mean"))
