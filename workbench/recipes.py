"""Recipes: named, frozen compositions of catalog components. The RL loop only looks these up.

    grpo = advantage "grpo" + objective "ppo-clip" + agg "seq-mean-token-mean" + KL "k3" in the loss
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from workbench import registry


@dataclass(frozen=True)
class Recipe:
    key: str
    title: str                      # the paper the recipe follows
    summary: str
    advantage: str                  # registered advantage key
    objective: str = "ppo-clip"     # registered objective key
    agg: str = "token-mean"         # loss aggregation mode
    kl_placement: str = "none"      # "loss", "reward" or "none"
    kl_estimator: str = "k3"        # k1 | k2 | k3 | abs (+ straight-through suffix)
    kl_coef: float = 0.0            # beta (the starting beta when kl_target is set)
    kl_target: float | None = None  # adapt beta towards this KL per step (Ziegler's controller); None = fixed
    kl_horizon: int = 10000         # the adaptive controller's horizon (samples)
    entropy_coef: float = 0.0       # c_H of the entropy bonus
    critic: bool = False            # train a value head with the clipped value loss
    vf_coef: float = 0.1            # weight of the value loss when critic=True
    token_masks: tuple = ()         # registered data keys applied to the mask, e.g. ("overlong-filter",)
    advantage_kw: dict = field(default_factory=dict)
    objective_kw: dict = field(default_factory=dict)
    objective_inputs: tuple = ()    # batch fields passed to the objective by name, e.g. ("mu_logp",) for tis
    reward_shaping: tuple = ()      # ((registered reward key, kwargs), ...) applied to rewards with lengths
    baseline_rollout: bool = False  # one greedy rollout per prompt fills batch.baseline_rewards (ReMax)
    dynamic_sampling_rounds: int = 0  # > 0: drop all-equal groups and resample up to this many rounds (DAPO)
    min_abs_advantage: float = 0.0  # drop rollouts whose |A| is below this (LOOP: 0.01)
    preference_reward: str = ""     # registered preference key turning in-group judgments into rewards (SPO)
    reference: str = "sft"          # "sft": the warm start; "soup": the average of two SFT runs (SALSA)

    def components(self) -> list[tuple[str, str]]:
        """(kind, key) of every catalog component the recipe uses."""
        out = [("advantage", self.advantage), ("objective", self.objective), ("aggregation", self.agg)]
        if self.kl_placement != "none":
            out += [("regularizer", "kl-penalty"), ("regularizer", self.kl_estimator.rstrip("+"))]
        if self.entropy_coef:
            out.append(("regularizer", "entropy-bonus"))
        if self.critic:
            out.append(("objective", "value-loss"))
        if self.dynamic_sampling_rounds:
            out.append(("data", "dynamic-sampling"))
        out += [("reward", key) for key, _ in self.reward_shaping]
        if self.preference_reward:
            out.append(("preference", self.preference_reward))
        if self.reference == "soup":
            out.append(("preference", "salsa"))
        return out + [("data", key) for key in self.token_masks]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PreferenceRecipe:
    key: str
    title: str                      # the paper the recipe follows
    summary: str
    loss: str                       # registered preference objective key
    loss_kw: dict = field(default_factory=dict)
    loss_inputs: tuple = ()         # extra per-item inputs by name, "kw=source" to rename (e.g. "rewards=list_rewards")
    online: bool = False            # items from the current policy's samples each step (labelled by the verifier)
    data: str = "pairs"             # offline: pairs | lists | degraded | steps; online: pairs | lists | siblings
    iteration_steps: int = 0        # > 0: the anchors move (iteration_update) every this many steps
    iteration_update: str = "ref"   # "ref": π_ref ← π; "prev": π_t ← π (π_ref fixed); "momentum": π̂_{t-1} ← π_ref ← π
    list_size: int = 0              # K responses per prompt for data="lists" (ranked by the verifier)
    degrade_fractions: tuple = (1 / 3, 2 / 3)  # data="degraded": share of the chosen answer's digits removed per copy
    step_chars: int = 0             # step-level data: characters per reasoning step
    rollouts_per_state: int = 4     # step-level data: continuations per state for the Monte Carlo value V̂(s)

    def components(self) -> list[tuple[str, str]]:
        return [("preference", self.loss)]

    def as_dict(self) -> dict:
        return asdict(self)


RECIPES: dict[str, Recipe | PreferenceRecipe] = {}


def define(recipe: Recipe | PreferenceRecipe) -> Recipe | PreferenceRecipe:
    RECIPES[recipe.key] = recipe
    registry.register("recipe", recipe.key, title=recipe.title, summary=recipe.summary,
                      defaults=recipe.as_dict(), family="canonical",
                      confidence=registry.catalog().get(recipe.key, {}).get("confidence", "exact"))(recipe)
    return recipe


def get_recipe(key: str) -> Recipe:
    if key not in RECIPES:
        raise KeyError(f"no recipe named {key!r}; recipes: {', '.join(sorted(RECIPES))}")
    return RECIPES[key]


define(Recipe(
    key="grpo", title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="Group z-score advantage, PPO clip, per-sequence token mean, k3 KL in the loss.",
    advantage="grpo", agg="seq-mean-token-mean", kl_placement="loss", kl_estimator="k3", kl_coef=0.04))

define(Recipe(
    key="dr_grpo", title="Understanding R1-Zero-Like Training: A Critical Perspective",
    summary="GRPO without std scaling and with a constant loss normalizer: no length or difficulty bias.",
    advantage="grpo", advantage_kw={"scale": "none"}, agg="seq-mean-token-sum-norm"))

define(Recipe(
    key="dapo", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Clip-higher (0.2/0.28), dynamic sampling of informative groups, token-level loss, soft "
            "overlong punishment, no KL.",
    advantage="grpo", objective_kw={"eps_low": 0.2, "eps_high": 0.28}, agg="token-mean",
    dynamic_sampling_rounds=3, reward_shaping=(("soft-overlong", {"buffer": 4}),)))

define(Recipe(
    key="dapo_lite", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="DAPO without dynamic sampling: clip-higher (0.2/0.28), token-level loss, no KL, truncated "
            "responses masked.",
    advantage="grpo", objective_kw={"eps_low": 0.2, "eps_high": 0.28}, agg="token-mean",
    token_masks=("overlong-filter",)))

define(Recipe(
    key="lite-ppo", title="Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning",
    summary="Group-mean advantage with batch-level std, PPO clip 0.2, token-level loss, no critic.",
    advantage="grpo", advantage_kw={"scale": "batch"}, agg="token-mean"))

define(Recipe(
    key="gspo", title="Group Sequence Policy Optimization",
    summary="GRPO advantages with GSPO's length-normalized sequence ratio, clipped at 3e-4 / 4e-4.",
    advantage="grpo", objective="gspo", agg="seq-mean-token-mean"))

define(Recipe(
    key="gmpo", title="Geometric-Mean Policy Optimization",
    summary="GRPO advantages with the geometric mean of log-space-clipped token ratios (GMPO).",
    advantage="grpo", objective="geo_mean", agg="seq-mean-token-mean"))

define(Recipe(
    key="cispo", title="MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
    summary="REINFORCE with a clipped, stop-gradient IS weight min(r, 5) (TRL convention), token-level loss.",
    advantage="grpo", objective="cispo", agg="token-mean"))

define(Recipe(
    key="sapo", title="Soft Adaptive Policy Optimization",
    summary="A smooth sigmoid gate on the ratio instead of a hard clip (tau 1.0 / 1.05).",
    advantage="grpo", objective="sapo", agg="seq-mean-token-mean"))

define(Recipe(
    key="reinforce_plus_plus",
    title="REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
    summary="Token returns with k1 KL in the reward, whitened over the batch; PPO clip; no critic, no groups.",
    advantage="reinforce_plus_plus", agg="token-mean", kl_placement="reward", kl_estimator="k1",
    kl_coef=0.01))

define(Recipe(
    key="remax", title="ReMax: A Simple, Effective, and Efficient Reinforcement Learning Method for Aligning "
                       "Large Language Models",
    summary="The reward of one greedy rollout per prompt is the baseline.",
    advantage="remax", agg="token-mean", baseline_rollout=True))

define(Recipe(
    key="opo", title="On-Policy RL with Optimal Reward Baseline",
    summary="Length-weighted group-mean baseline (the variance-optimal baseline for sequence rewards).",
    advantage="opo", agg="token-mean"))

define(Recipe(
    key="gpg", title="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning",
    summary="Plain policy gradient -A log pi (no ratio, no clip) with the group-mean baseline rescaled "
            "for degenerate groups.",
    advantage="gpg", objective="gpg", agg="token-mean"))

define(Recipe(
    key="loop", title="Reinforcement Learning for Long-Horizon Interactive LLM Agents",
    summary="Leave-one-out advantage, rollouts with |A| < 0.01 dropped, PPO clip symmetric in log space "
            "[1/1.1, 1.1], no KL.",
    advantage="rloo", objective_kw={"eps_low": 1 - 1 / 1.1, "eps_high": 0.1}, agg="seq-mean-token-mean",
    min_abs_advantage=0.01))

define(Recipe(
    key="mdpo", title="Mirror Descent Policy Optimization",
    summary="No clipping: the ratio surrogate with a KL(pi || pi_old) proximity term whose weight 1/t_k grows "
            "over training; meant for several optimizer steps per batch (--set ppo_epochs=4).",
    advantage="grpo", objective="mdpo", agg="token-mean"))

define(Recipe(
    key="minirl", title="Stabilizing Reinforcement Learning with LLMs: Formulation and Practices",
    summary="Group-mean baseline, token IS weight against the rollout engine's log-probs (mu), staleness mask "
            "past the clip band; per-sequence token mean.",
    advantage="grpo", advantage_kw={"scale": "none"}, objective="minirl", objective_inputs=("mu_logp",),
    agg="seq-mean-token-mean"))

define(Recipe(
    key="t-ppo", title="Truncated Proximal Policy Optimization",
    summary="PPO with a critic whose GAE bootstraps responses cut at the budget (EGAE) and whose value loss "
            "uses finished responses only; windowed generation itself is not modelled (HF generate).",
    advantage="t-ppo", advantage_kw={"gamma": 1.0, "lam": 0.95}, agg="token-mean", kl_placement="reward",
    kl_estimator="k1", kl_coef=0.05, critic=True))

define(Recipe(
    key="ppo-max", title="Secrets of RLHF in Large Language Models Part I: PPO",
    summary="PPO with the PPO-max stabilizers: running reward normalization and clipping, k1 KL per token in "
            "the reward, clipped value loss, whitened GAE, global gradient clipping.",
    advantage="gae", advantage_kw={"gamma": 1.0, "lam": 0.95, "whiten": True}, agg="token-mean",
    kl_placement="reward", kl_estimator="k1", kl_coef=0.05, critic=True,
    reward_shaping=(("ppo-max", {"delta": 5.0}),)))

define(Recipe(
    key="m-grpo", title="WebAgent-R1: Training Web Agents via End-to-End Multi-Turn Reinforcement Learning",
    summary="Multi-turn GRPO: group z-score with eps 1e-4, observation tokens masked, PPO clip averaged per "
            "action then per trajectory (single-turn tasks: one action per response).",
    advantage="grpo", advantage_kw={"eps": 1e-4}, objective="m-grpo", objective_inputs=("turn",),
    agg="seq-mean-token-mean"))

define(Recipe(
    key="rloo",
    title="Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    summary="Leave-one-out baseline; k1 KL subtracted from the reward (TRL RLOO, beta 0.05).",
    advantage="rloo", agg="token-mean", kl_placement="reward", kl_estimator="k1", kl_coef=0.05))

define(Recipe(
    key="spo-minimax", title="A Minimaximalist Approach to Reinforcement Learning from Human Feedback",
    summary="Self-play with a preference judge: each of the G samples is rewarded with its win rate against the "
            "other G - 1 (judge: the verifier's order), centred at 1/2; PPO clip, no reward model, no KL.",
    advantage="grpo", advantage_kw={"scale": "none"}, preference_reward="spo-minimax"))

define(Recipe(
    key="salsa", title="SALSA: Soup-based Alignment Learning for Stronger Adaptation in RLHF",
    summary="PPO whose policy starts at, and whose KL-in-reward reference is, the weight average of two SFT runs "
            "(seeds s and s + 1) instead of one SFT model.",
    advantage="gae", advantage_kw={"gamma": 1.0, "lam": 0.95}, agg="token-mean", kl_placement="reward",
    kl_estimator="k1", kl_coef=0.05, critic=True, reference="soup"))

define(Recipe(
    key="ppo", title="Proximal Policy Optimization Algorithms",
    summary="Critic + GAE advantages, PPO clip, k1 KL per token in the reward (TRL PPO defaults).",
    advantage="gae", advantage_kw={"gamma": 1.0, "lam": 0.95}, agg="token-mean",
    kl_placement="reward", kl_estimator="k1", kl_coef=0.05, critic=True))


# ----------------------------------------------------------------------------------------------------
# Preference recipes (offline pairs labelled by the task's verifier, or online pairs from the policy)

define(PreferenceRecipe(
    key="dpo", title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    summary="Sigmoid loss on the implicit reward margin beta * (log-ratio of chosen - of rejected).",
    loss="dpo", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="ipo", title="A General Theoretical Paradigm to Understand Learning from Human Preferences",
    summary="Squared regression of the log-ratio margin onto 1/(2 beta): bounded, no overfitting to "
            "deterministic preferences (summed log-probs, the paper's convention).",
    loss="ipo", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="cdpo-robust", title="Provably Robust DPO: Aligning Language Models with Noisy Feedback",
    summary="DPO with label smoothing (cDPO, eps = 0.1) for noisy preference labels.",
    loss="cdpo-robust", loss_kw={"beta": 0.1, "label_smoothing": 0.1}))

define(PreferenceRecipe(
    key="hinge", title="SLiC-HF: Sequence Likelihood Calibration with Human Feedback",
    summary="Hinge loss on the implicit reward margin (TRL's relu(1 - beta * margin)).",
    loss="hinge", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="simpo", title="SimPO: Simple Preference Optimization with a Reference-Free Reward",
    summary="Reference-free: length-averaged log-prob margin beyond gamma = 0.5 beta (beta = 2).",
    loss="simpo", loss_kw={"beta": 2.0, "gamma_beta_ratio": 0.5}, loss_inputs=("chosen_len", "rejected_len")))

define(PreferenceRecipe(
    key="kto", title="KTO: Model Alignment as Prospect Theoretic Optimization",
    summary="Unpaired prospect-theoretic loss: chosen answers as desirable, rejected as undesirable.",
    loss="kto", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="online-dpo", title="Direct Language Model Alignment from Online AI Feedback",
    summary="DPO on pairs sampled from the current policy each step and judged by the verifier.",
    loss="online-dpo", loss_kw={"beta": 0.1}, online=True))

define(PreferenceRecipe(
    key="sppo", title="Self-Play Preference Optimization for Language Model Alignment",
    summary="Iterative self-play: regress each response's log-ratio to the previous iterate onto eta * "
            "(win rate against the policy - 1/2); the reference moves to the policy every iteration.",
    loss="sppo", loss_kw={"beta": 0.1}, loss_inputs=("chosen_winrate", "rejected_winrate"), online=True,
    iteration_steps=5))

define(PreferenceRecipe(
    key="refuel", title="Regressing the Relative Future: Efficient Policy Optimization for Multi-turn RLHF",
    summary="Regress the log-ratio margin onto eta * (reward difference) of the verified pair.",
    loss="refuel", loss_kw={"eta": 1.0}, loss_inputs=("chosen_reward", "rejected_reward")))

define(PreferenceRecipe(
    key="p3o", title="Pairwise Proximal Policy Optimization: Harnessing Relative Feedback for LLM Alignment",
    summary="Pairwise policy gradient on the reward difference with PPO-style clipping, KL-regularized reward.",
    loss="p3o", loss_kw={"beta": 0.1}, loss_inputs=("chosen_reward", "rejected_reward")))

define(PreferenceRecipe(
    key="lipo", title="LiPO: Listwise Preference Optimization through Learning-to-Rank",
    summary="Listwise: K = 4 responses per prompt ranked by the verifier (and length), LambdaLoss-weighted "
            "pairwise logistic terms.",
    loss="lipo", loss_kw={"beta": 0.1}, data="lists", list_size=4))

define(PreferenceRecipe(
    key="inpo",
    title="Iterative Nash Policy Optimization: Aligning LLMs with General Preferences via No-Regret Learning",
    summary="Online mirror descent on the preference game: IPO-style regression anchored at the geometric mixture "
            "of the fixed reference and the previous iterate pi_t, which moves to the policy every 5 steps.",
    loss="inpo", loss_kw={"beta": 0.1, "tau": 0.03}, loss_inputs=("prev_chosen_logp", "prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="prev"))

define(PreferenceRecipe(
    key="nash-mp", title="Accelerating Nash Learning from Human Feedback via Mirror Prox",
    summary="Mirror-prox steps of the regularized preference game: pairs from the moving iterate (the opponent), "
            "prox centre pi^k = the previous iterate, updated every 5 steps; fixed reference.",
    loss="nash-mp", loss_kw={"beta": 0.1, "eta": 5.0}, loss_inputs=("prev_chosen_logp", "prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="prev"))

define(PreferenceRecipe(
    key="apo-accelerated", title="Accelerated Preference Optimization for Large Language Model Alignment",
    summary="Iterative DPO with Nesterov momentum: every 5 steps the reference becomes the policy, and DPO is "
            "taken against (1 + alpha) log pi^_t - alpha log pi^_{t-1} (alpha = 0.3).",
    loss="apo-accelerated", loss_kw={"beta": 0.1, "alpha": 0.3},
    loss_inputs=("prev_ref_chosen_logp=prev_chosen_logp", "prev_ref_rejected_logp=prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="momentum"))

define(PreferenceRecipe(
    key="brain", title="BRAIn: Bayesian Reward-conditioned Amortized Inference for natural language generation "
                       "from feedback",
    summary="K = 4 policy samples per prompt; distil the reward-conditioned posterior pi_ref(y) sigma((r - r0)/beta) "
            "into the policy by self-normalised importance weights (verifier rewards, beta = 0.25).",
    loss="brain", loss_kw={"beta": 0.25}, loss_inputs=("rewards=list_rewards",), online=True, data="lists",
    list_size=4))

define(PreferenceRecipe(
    key="spo-prefdeg", title="Self-supervised Preference Optimization: Enhance Your Language Model with Preference "
                             "Degree Awareness",
    summary="DPO plus a ranking loss over copies of the chosen answer with 1/3 and 2/3 of its digits removed "
            "(the key content), lambda = 0.1.",
    loss="spo-prefdeg", loss_kw={"beta": 0.1, "lam": 0.1}, loss_inputs=("degraded_logp", "ref_degraded_logp"),
    data="degraded"))

define(PreferenceRecipe(
    key="mcts-dpo", title="Monte Carlo Tree Search Boosts Reasoning via Iterative Preference Learning",
    summary="Step-level DPO on sibling steps: from a random step boundary of a sampled answer, G next steps "
            "(2 characters) valued by 4 rollouts each; best vs worst sibling, summed from the branching point. The "
            "values' conservative label smoothing is off: on [0, 1] values it is q_w/(1+q_w), 0.5 (no gradient) "
            "for a surely correct step.",
    loss="mcts-dpo", loss_kw={"beta": 0.1}, online=True, data="siblings", step_chars=2, rollouts_per_state=4))

define(PreferenceRecipe(
    key="direct-advantage-po",
    title="Improving Multi-Step Reasoning Abilities of Large Language Models with Direct Advantage Policy "
          "Optimization",
    summary="Offline step-level regression of beta log(pi/pi_ref) of each 2-character step of a reference sample "
            "onto its advantage V(s+a) - V(s), values from 4 Monte Carlo rollouts per state.",
    loss="direct-advantage-po", loss_kw={"beta": 0.1}, loss_inputs=("advantages",), data="steps", step_chars=2,
    rollouts_per_state=4))
