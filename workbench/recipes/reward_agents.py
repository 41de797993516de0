"""F6 recipes for agent rewards: SPEAR's tool-call reward, IterResearch's EAPO, RetroAgent's intrinsic reward and
PRS's staged reward. Built for the multi-turn tool tasks (`--task calculator | search`); on a one-turn task they
still train: no tool calls (r_tool = 0), one round per episode (EAPO is GSPO), no subtasks (RetroAgent's
completion is the verifier's verdict), and PRS's format term sees answers cut by the budget.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rewards.eapo import EAPO_TITLE
from workbench.rewards.prs import PRS_TITLE
from workbench.rewards.retroagent import RETRO_TITLE
from workbench.rewards.tools import SPEAR_TITLE


define(Recipe(
    key="spear-tool-reward", title=SPEAR_TITLE,
    summary="GRPO on the verifier's score plus SPEAR's tool-call reward min(1, 0.1 n) c(t), its cosine c(t) "
            "reaching 0 at half the run (T_tool = 0.5 x steps: SPEAR's 200 steps are longer than our runs).",
    rewards=[use("spear-tool-reward", weight=1.0, max_toolcall_frac=0.5)], **GRPO))

define(Recipe(
    key="eapo", title=EAPO_TITLE,
    summary="GSPO over per-round samples (each round of an episode a row, its history as the prompt), the outcome "
            "discounted to gamma^(T-t) R (gamma 0.9, our choice), the sample set cut to a multiple of the "
            "data-parallel size (1 here).",
    advantage=["grpo"], objective="gspo", agg="seq-mean-token-mean",
    group_transforms=[use("eapo", dp_size=1)], reward_shaping=[use("eapo", gamma=0.9)]))

define(Recipe(
    key="retroagent", title=RETRO_TITLE,
    summary="GRPO on the verifier's score plus exp(-5 t/T) max(0, c - phi): c the episode's completed share of the "
            "expert's subtasks (toy stand-in for the hindsight reflection), phi the task's best prior group "
            "success rate; k3 KL 0.01 (the reference's scripts, which fix the coefficient at 1).",
    advantage=["grpo"], agg="seq-mean-token-mean", regularizers=[use("kl-penalty", beta=0.01, estimator="k3")],
    reward_shaping=[use("retroagent", decay="exp")]))

define(Recipe(
    key="prs", title=PRS_TITLE,
    summary="GRPO on PRS's staged reward alone: format (well-formed tool calls and answers) first, then 0.2 format "
            "+ 0.8 answer quality (length-aware BLEU of a span answer such as search's, the verifier's verdict for a "
            "value such as the calculator's), switched at half the run or once 90% of rows are well formed.",
    rewards=[use("prs", weight=1.0, switch_at=0.5)], task_reward=0.0,
    controllers=[use("prs", into="reward:prs.stage", threshold=0.9)], **GRPO))
