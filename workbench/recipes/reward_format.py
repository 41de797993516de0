"""F6 recipes for answer, format and reflection rewards: DeepSeek-R1's accuracy and format rewards, the n-gram
repetition penalty, SRPO's and ReflexiCoder's reflection rewards, and EmotionThinker's trust-weighted reasoning reward.

`task_reward` is the environment verifier's weight. It is 0 where the recipe's reward already holds the
correctness term (accuracy-reward, srpo-reflection), so that correctness is not counted twice.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rewards.accuracy import R1_TITLE
from workbench.rewards.grpo_ptr import PTR_TITLE
from workbench.rewards.length import DEMYSTIFY_TITLE
from workbench.rewards.reflection import REFLEXICODER_TITLE, SRPO_TITLE


define(Recipe(
    key="accuracy-reward", title=R1_TITLE,
    summary="GRPO on the accuracy reward alone: 1 for a verified final answer, else 0 (the environment's verdict in "
            "our pipeline, math-verify under TRL).",
    **GRPO,
    rewards=[use("accuracy-reward", weight=1.0)], task_reward=0.0))

define(Recipe(
    key="format-reward", title=R1_TITLE,
    summary="GRPO on the verifier's reward plus 0.1 x the <think> format reward (TRL think_format_reward; the "
            "Countdown/TinyZero weight).",
    **GRPO,
    rewards=[use("format-reward", weight=0.1)]))

define(Recipe(
    key="repetition-penalty", title=DEMYSTIFY_TITLE,
    summary="GRPO on the verifier's reward plus the token 3-gram repetition penalty in [-1, 0] (TRL 1.16; the "
            "paper penalizes repeated tokens).",
    **GRPO,
    rewards=[use("repetition-penalty", weight=1.0, unit="tokens")]))

define(Recipe(
    key="srpo-reflection", title=SRPO_TITLE,
    summary="GRPO (OpenRLHF group_norm, no KL, as run_7b_sft_srpo_*.sh) on SRPO's reward alone: first -> last "
            "answer transition + format + length bell; a completion without answer tags is verified whole.",
    advantage=["grpo"], agg="seq-mean-token-mean",
    rewards=[use("srpo-reflection", weight=1.0)], task_reward=0.0))

define(Recipe(
    key="reflexicoder", title=REFLEXICODER_TITLE,
    summary="GRPO with k3 KL beta = 0.01 (config_grpo.yaml) on the verifier's reward plus ReflexiCoder's "
            "F + 0.5 P R_traj + P E; the verifier's reward stays because F, P and E are 0 until the policy "
            "emits the think/answer/reflection structure.",
    advantage=["grpo"], agg="seq-mean-token-mean", regularizers=[use("kl-penalty", beta=0.01, estimator="k3")],
    rewards=[use("reflexicoder", weight=1.0)]))

define(Recipe(
    key="grpo-ptr", title=PTR_TITLE,
    summary="GRPO on outcome + <think>/<answer> format + lambda(t) gamma_g R_reason (toy stand-in: rule-based "
            "reasoning judge), lambda ramped 0 -> 0.5 over the first 30% of training.",
    **GRPO,
    rewards=[use("format-reward", weight=1.0, tags=("think", "answer"), strip=True)],
    reward_shaping=[use("grpo-ptr")]))
