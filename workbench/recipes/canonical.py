"""F1 recipes: the canonical RL methods (PPO, GRPO, DAPO, RLOO, ...), each built from registered components."""
from workbench.recipes.base import Recipe, define, use

KL_IN_REWARD = use("kl-in-reward", beta=0.05, estimator="k1")  # TRL PPO / RLOO defaults
CRITIC = use("value-loss", coef=0.1)
GAE = use("gae", gamma=1.0, lam=0.95)
CLIP_HIGHER = use("ppo-clip", eps_low=0.2, eps_high=0.28)

GRPO_KL = use("kl-penalty", beta=0.04, estimator="k3")
GRPO = dict(advantage=["grpo"], agg="seq-mean-token-mean", regularizers=[GRPO_KL])  # for recipes built on grpo's

define(Recipe(
    key="grpo", title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="Group z-score advantage, PPO clip, per-sequence token mean, k3 KL in the loss.", **GRPO))

define(Recipe(
    key="dr_grpo", title="Understanding R1-Zero-Like Training: A Critical Perspective",
    summary="GRPO without std scaling and with a constant loss normalizer: no length or difficulty bias.",
    advantage=[use("grpo", scale="none")], agg="seq-mean-token-sum-norm"))

define(Recipe(
    key="dapo", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Clip-higher (0.2/0.28), dynamic sampling of informative groups, token-level loss, soft "
            "overlong punishment, no KL.",
    advantage=["grpo"], objective=CLIP_HIGHER, agg="token-mean", rewards=[use("soft-overlong", buffer=4)],
    group_transforms=[use("dynamic-sampling", max_rounds=3)]))

define(Recipe(
    key="dapo_lite", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="DAPO without dynamic sampling: clip-higher (0.2/0.28), token-level loss, no KL, truncated "
            "responses masked.",
    advantage=["grpo"], objective=CLIP_HIGHER, agg="token-mean", token_masks=["overlong-filter"]))

define(Recipe(
    key="lite-ppo", title="Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning",
    summary="Group-mean advantage with batch-level std, PPO clip 0.2, token-level loss, no critic.",
    advantage=[use("grpo", scale="batch")], agg="token-mean"))

define(Recipe(
    key="gspo", title="Group Sequence Policy Optimization",
    summary="GRPO advantages with GSPO's length-normalized sequence ratio, clipped at 3e-4 / 4e-4.",
    advantage=["grpo"], objective="gspo", agg="seq-mean-token-mean"))

define(Recipe(
    key="gmpo", title="Geometric-Mean Policy Optimization",
    summary="GRPO advantages with the geometric mean of log-space-clipped token ratios (GMPO).",
    advantage=["grpo"], objective="geo_mean", agg="seq-mean-token-mean"))

define(Recipe(
    key="cispo", title="MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
    summary="REINFORCE with a clipped, stop-gradient IS weight min(r, 5) (TRL convention), token-level loss.",
    advantage=["grpo"], objective="cispo", agg="token-mean"))

define(Recipe(
    key="sapo", title="Soft Adaptive Policy Optimization",
    summary="A smooth sigmoid gate on the ratio instead of a hard clip (tau 1.0 / 1.05).",
    advantage=["grpo"], objective="sapo", agg="seq-mean-token-mean"))

define(Recipe(
    key="reinforce_plus_plus",
    title="REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
    summary="Token returns with k1 KL in the reward, whitened over the batch; PPO clip; no critic, no groups.",
    advantage=["reinforce_plus_plus"], agg="token-mean",
    reward_shaping=[use("kl-in-reward", beta=0.01, estimator="k1")]))

define(Recipe(
    key="remax", title="ReMax: A Simple, Effective, and Efficient Reinforcement Learning Method for Aligning "
                       "Large Language Models",
    summary="The reward of one greedy rollout per prompt is the baseline.",
    advantage=["remax"], agg="token-mean", group_transforms=["greedy-baseline"]))

define(Recipe(
    key="opo", title="On-Policy RL with Optimal Reward Baseline",
    summary="Length-weighted group-mean baseline (the variance-optimal baseline for sequence rewards).",
    advantage=["opo"], agg="token-mean"))

define(Recipe(
    key="gpg", title="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning",
    summary="Plain policy gradient -A log pi (no ratio, no clip) with the group-mean baseline rescaled "
            "for degenerate groups.",
    advantage=["gpg"], objective="gpg", agg="token-mean"))

define(Recipe(
    key="loop", title="Reinforcement Learning for Long-Horizon Interactive LLM Agents",
    summary="Leave-one-out advantage, rollouts with |A| < 0.01 dropped, PPO clip symmetric in log space "
            "[1/1.1, 1.1], no KL.",
    advantage=["rloo"], objective=use("ppo-clip", eps_low=1 - 1 / 1.1, eps_high=0.1), agg="seq-mean-token-mean",
    token_masks=[use("min-abs-advantage", threshold=0.01)]))

define(Recipe(
    key="mdpo", title="Mirror Descent Policy Optimization",
    summary="No clipping: the ratio surrogate with a KL(pi || pi_old) proximity term whose weight 1/t_k grows "
            "over training; meant for several optimizer steps per batch (--set ppo_epochs=4).",
    advantage=["grpo"], objective="mdpo", agg="token-mean",
    schedules=[use("mdpo-inv-t", into="objective:mdpo.inv_t")]))

define(Recipe(
    key="minirl", title="Stabilizing Reinforcement Learning with LLMs: Formulation and Practices",
    summary="Group-mean baseline, token IS weight against the rollout engine's log-probs (mu), staleness mask "
            "past the clip band; per-sequence token mean.",
    advantage=[use("grpo", scale="none")], objective="minirl", agg="seq-mean-token-mean"))

define(Recipe(
    key="t-ppo", title="Truncated Proximal Policy Optimization",
    summary="PPO with a critic whose GAE bootstraps responses cut at the budget (EGAE) and whose value loss "
            "uses finished responses only; windowed generation itself is not modelled (HF generate).",
    advantage=[use("t-ppo", gamma=1.0, lam=0.95)], agg="token-mean", reward_shaping=[KL_IN_REWARD], value=CRITIC))

define(Recipe(
    key="ppo-max", title="Secrets of RLHF in Large Language Models Part I: PPO",
    summary="PPO with the PPO-max stabilizers: running reward normalization and clipping, k1 KL per token in "
            "the reward, clipped value loss, whitened GAE, global gradient clipping.",
    advantage=[use("gae", gamma=1.0, lam=0.95, whiten=True)], agg="token-mean",
    reward_shaping=[use("ppo-max", delta=5.0), KL_IN_REWARD], value=CRITIC))

define(Recipe(
    key="m-grpo", title="WebAgent-R1: Training Web Agents via End-to-End Multi-Turn Reinforcement Learning",
    summary="Multi-turn GRPO: group z-score with eps 1e-4, observation tokens masked, PPO clip averaged per "
            "action then per trajectory (single-turn tasks: one action per response).",
    advantage=[use("grpo", eps=1e-4)], objective="m-grpo", agg="seq-mean-token-mean"))

define(Recipe(
    key="rloo",
    title="Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    summary="Leave-one-out baseline; k1 KL subtracted from the reward (TRL RLOO, beta 0.05).",
    advantage=["rloo"], agg="token-mean", reward_shaping=[KL_IN_REWARD]))

define(Recipe(
    key="spo-minimax", title="A Minimaximalist Approach to Reinforcement Learning from Human Feedback",
    summary="Self-play with a preference judge: each of the G samples is rewarded with its win rate against the "
            "other G - 1 (judge: the verifier's order), centred at 1/2; PPO clip, no reward model, no KL.",
    advantage=[use("grpo", scale="none")], reward_shaping=["spo-minimax"]))

define(Recipe(
    key="salsa", title="SALSA: Soup-based Alignment Learning for Stronger Adaptation in RLHF",
    summary="PPO whose policy starts at, and whose KL-in-reward reference is, the weight average of two SFT runs "
            "(seeds s and s + 1) instead of one SFT model.",
    advantage=[GAE], agg="token-mean", reward_shaping=[KL_IN_REWARD], value=CRITIC, reference="salsa"))

define(Recipe(
    key="ppo", title="Proximal Policy Optimization Algorithms",
    summary="Critic + GAE advantages, PPO clip, k1 KL per token in the reward (TRL PPO defaults).",
    advantage=[GAE], agg="token-mean", reward_shaping=[KL_IN_REWARD], value=CRITIC))

# Two one-knob variants of GRPO: the entropy baselines of the stored F3 comparison "f3-entropy" (results/stored_runs.py).
define(Recipe(
    key="clip-higher", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="GRPO with DAPO's clip-higher alone (eps_high 0.28): low-probability tokens with A > 0 may grow more, "
            "which keeps entropy up; everything else as grpo.",
    advantage=["grpo"], objective=CLIP_HIGHER, agg="seq-mean-token-mean",
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3")]))

define(Recipe(
    key="entropy-bonus", title="Asynchronous Methods for Deep Reinforcement Learning",
    summary="GRPO plus an entropy bonus c_H = 0.01 (verl's default 0.001 barely moves a policy of this size); "
            "everything else as grpo.",
    advantage=["grpo"], agg="seq-mean-token-mean",
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3"), use("entropy-bonus", coef=0.01)]))
