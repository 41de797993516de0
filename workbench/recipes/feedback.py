"""F5 recipes, learning from feedback: refinements after a critique or a previous attempt, retries from a pivot."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rollout.igrpo import IGRPO_TITLE
from workbench.rollout.r3l import R3L_TITLE
from workbench.transforms.critique_grpo import COMPACT_TEMPLATE, CRITIQUE_GRPO_TITLE
from workbench.tasks.guidance import TOY_CRITIQUE

define(Recipe(
    key="critique-grpo", title=CRITIQUE_GRPO_TITLE,
    summary="Each sampled response gets a critique with the ground truth and one refinement conditioned on it; the "
            "first correct refinement replaces the group's first row, trained under the plain question through "
            "-A p/(p + 0.1); initial responses by PPO-clip 0.2; A = R - mean, no std; token mean; entropy bonus "
            "0.001, no KL." + TOY_CRITIQUE,
    # zhangxy-2019/critique-GRPO @ e8f03a2, script verl/examples/grpo_trainer/
    # run_open_r1_math4k-qwen3-8b-base-critique_simple_gt_online.sh (line numbers below are its):
    # CRITIQUE_TYPE="simple_gt" (L46); one refinement per group (n_prefix 1: the run's name "rollout7_critique_1");
    # the compact template: the tiny model's 256 positions cannot hold refine_prompt's ~420 characters
    group_transforms=[use("critique-grpo", critique="simple_gt", n_refine=1, template=COMPACT_TEMPLATE)],
    # algorithm.adv_estimator=grpo with algorithm.grpo_use_std=False (L126; the released trainer ignores it: see
    # workbench/transforms/critique_grpo.py), the catalog's A = R - mean
    advantage=[use("grpo", scale="none")],
    # use_off_policy_loss=True, off_policy_reshape="p_div_p_0.1" (L122-124); CLIP_RATIO=0.2 (L29) and the config's
    # clip_upper_bound 1.0: upper bound max(1.0, 1 + 0.2) = 1.2; the catalog keeps the clip the script removes
    # (loss_remove_clip=True, L128)
    objective=use("policy-shaping", gamma=0.1, eps_low=0.2, eps_high=0.2),
    # the catalog's token mean (the script's loss_remove_token_mean=True, L127, sums over the micro-batch instead)
    agg="token-mean",
    # ENTROPY_COEFFIENT=0.001 (L31); use_kl_loss=False (L121), kl_coef 0: no KL
    regularizers=[use("entropy-bonus", coef=0.001)]))

define(Recipe(
    key="igrpo", title=IGRPO_TITLE,
    summary="Half of each group's budget drafts; the best draft (by the verifier) is appended to the prompt and the "
            "other half, sampled from that prompt, is a GRPO group (z-score advantage, PPO clip, k3 KL 0.04); "
            "drafts get no gradient.",
    # the catalog's decide: N_d = G / 2 drafts (n_drafts=None), the template "Previous attempt: ... Improve it."
    rollout=use("igrpo"),
    # "a GRPO update on draft-conditioned refinements" (the card): the project's grpo recipe (recipes/canonical.py)
    **GRPO))

define(Recipe(
    key="r3l", title=R3L_TITLE,
    summary="Half of each group's budget samples base episodes; each failure is diagnosed by the verifier, replayed "
            "up to its pivot turn and retried with the diagnosis in the prompt, then trained under the plain prompt "
            "(turns before the pivot masked in both); verified corrections also train under the guided prompt with "
            "A = 1. OPMD advantage R - mean, successes 1.0, other positives x3; -A log pi / 2, token mean, k2 KL "
            "0.001. The runs: N = 8, lr 1e-6 (--set group_size=8 lr=1e-6)." + TOY_CRITIQUE,
    # shiweijiezero/R3L @ d503f6c, examples/R3L/alfworld/opmd_R3L_1.5B.yaml: workflow R3L_alfworld_workflow (L39),
    # repeat_times 8 (L6, the run setting N = group_size), optimizer lr 1e-6 (L8, a run setting); the workflow's
    # n // 2 base rollouts, retries and D_retry rows: workbench/rollout/r3l.py
    rollout=use("r3l", retry_sft=True),
    # algorithm_type opmd_reweight_adv (L5): advantage_fn opmd_reweight_adv (trinity/algorithm/algorithm.py L212),
    # opmd_baseline "mean" (opmd_advantage.py L193-194), x3 and 1.0 literal in the code; the paper's mode and
    # GRPO's z-score are mode="paper", baseline="grpo"
    advantage=[use("r3l", mode="code", baseline="opmd", alpha=3.0, r_max=1.0)],
    # _adjust_action_mask_for_retry on the retry and its first attempt (R3L_workflow.py L272-278)
    token_masks=["r3l"],
    # policy_loss_fn opmd (algorithm.py L214) at its default tau 1.0, loss_agg_mode token-mean (opmd_policy_loss.py
    # L32-34); the paper's loss is tau=0 with agg seq-mean-token-mean and no KL
    objective=use("r3l", tau=1.0), agg="token-mean",
    # kl_loss_fn k2 (algorithm.py L216) at its default kl_coef 0.001 (kl_fn/kl_fn.py L101), token mean;
    # entropy_loss_fn "default" at entropy_coef 0.0 (entropy_loss_fn.py L40): no entropy bonus
    regularizers=[use("kl-penalty", beta=0.001, estimator="k2")]))
