"""F6 recipes for length-aware rewards: the cosine length-scaled reward, ARLCP's reflection and length penalty, and
HBPO's budget-conditioned reward with its budget rollout."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rewards.arlcp import ARLCP_TITLE
from workbench.rewards.hbpo import HBPO_TITLE
from workbench.rewards.length import DEMYSTIFY_TITLE


define(Recipe(
    key="cosine-length", title=DEMYSTIFY_TITLE,
    summary="GRPO on the cosine length-scaled reward alone (it holds the accuracy term: correct 1.0 -> 0.5, wrong "
            "-1.0 -> -0.5 as |y| grows to L_max = max_new_tokens, demystify-long-cot's choice of L_max).",
    **GRPO,
    rewards=[use("cosine-length", weight=1.0, max_len=None)], task_reward=0.0))

define(Recipe(
    key="arlcp", title=ARLCP_TITLE,
    summary="RLOO (verl, token-mean loss) on the verifier's reward minus ARLCP's reflection and length penalty for "
            "correct responses, with k1 KL in the reward (beta 0.001), as scripts/run_ARLCP_1.5b.sh (n = 16 there).",
    advantage=["rloo"], agg="token-mean",
    reward_shaping=[use("arlcp"), use("kl-in-reward", beta=0.001, estimator="k1")]))

# The budget sentence before the question: the warm start ends every prompt it saw with the question's cue
# (countdown's ":"), and a sentence after it leaves the policy off its training distribution at step 0.
BUDGET_FIRST = "I will answer the question within {budget} tokens.\n{prompt}"

define(Recipe(
    key="hbpo-reward", title=HBPO_TITLE,
    summary="GRPO over groups split into budget subgroups (prompts open with b = 1/8, 1/4, 1/2, 5/8 of "
            "max_new_tokens = L_max), rewarded by HBPO's budget-aware piecewise cosine alone (0 when wrong); "
            "hbpo-advantage not used.",
    rollout=use("hbpo-reward", template=BUDGET_FIRST), **GRPO,
    rewards=[use("hbpo-reward", weight=1.0)], task_reward=0.0))
