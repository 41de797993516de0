"""SSP's self-play step as a group transform: every valid proposal is solved n times, and the proposer is paid by the
solver's failures (the reward's math: workbench/rewards/ssp.py).

    in:   proposer rows (agent 0): P prompts x G proposals of the run's task, scores = its RAG check (1 valid, 0 not)
    for each valid proposal j: its question x_j = task.question(row)      (the solver task's format, same corpus)
    solver rows: ctx.rollout([x_j], group_size=n, task=task.solver, rewarded=True)          n attempts per question
    p_j = mean_i [R_solve(j, i) > 0]                   r_j = ssp reward of p_j (format_penalty if j is invalid)
    out:  proposer rows (rewards r_j, agent 0, their groups as they were), then solver rows (agent 1, one group per
          question, numbered after the proposer groups); `episode` e_j is shared by proposal j and its n solver rows

GRPO then normalizes each proposer group (the G proposals of one answer) and each solver group (the n attempts at one
question) on its own: the advantage of either role is the reference's, which computes them in two separate batches.

The run's task is the proposer's (`--task search-propose`): it offers `solver` (the task the questions are asked in,
`search`) and `question(completion, opening)` (the solver's example a proposing row poses, from its transcript and
its opening info, turn_info[row][0]). Its rollout's group size G is the proposer's group size; n is the solver's.

Reward-based dynamic sampling (the reference's `reward_dynamic_sampling`, off in its script): with dynamic_rounds =
k > 0 the transform `dynamic-sampling` runs on the proposer rows, its resampled rounds each played through this step
(proposals -> solver -> rewards), and keeps proposer groups whose proposer rewards differ, with their solver rows.
Composed inside because `dynamic-sampling` listed after `ssp` in a recipe would resample rounds through the sampling
stages only (sampler -> rollout -> rewards: proposals without solvers or proposer rewards), and would count the
solver groups against the step's prompts_per_step.

Decisions (reference: Alibaba-Quark/SSP @ b4797e1, `quarl/trainer/ppo/ssp_ray_trainer.py`, `fit` and
`_extract_and_assemble_solver_data`, `_generate_solver_trajectories`, `_apply_reward_dynamic_sampling`):
  - One update on the joined batch (the reference's `combine_update=True`; its script updates the proposer's batch,
    then the solver's, as two optimizer passes).
  - An invalid proposal gets no solver rows. The reference fills its slot with a problem reused from a pool of
    earlier ones (strategy "reuse") or a dummy problem, on which the solver also trains; here the solver trains
    only on the step's valid questions.
  - The proposer rows' rewards are replaced (the environment's validity and any reward function of the recipe):
    the reference's proposer reward is the solver-based one alone. `scores` keep the validity.
  - Solver attempts are sampled at the run's temperature (the reference samples the proposer at 0.8, the solver at
    0.7 to 1: a temperature other than the one log-probs are trained at makes the rows off-policy).
  - Dynamic sampling: DAPO's `keep_informative_groups` drops a group of one, which the reference keeps; with G = 1
    (the script's proposer.n = 1) nothing could be filtered, so the rounds are skipped. Groups beyond prompts_per_step
    are dropped, not carried to the next step as the reference's leftovers are.
  - Under data parallelism each rank solves its own proposals; the logged shares and means are over all ranks.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch, concat
from workbench.rewards.ssp import REWARD_TYPES, SSP_TITLE, check_ssp, proposer_rewards, success_rate
from workbench.transforms.dynamic_sampling import dynamic_sampling

PROPOSER, SOLVER = 0, 1  # batch.agent of each role

SSP_LOGS = {
    "ssp/valid_share": ("SSP: share of the step's proposals whose question passed the RAG check (the documents the "
                        "proposer retrieved answer it), the others getting format_penalty.",
                        "Near 1 after the warm start and staying there; falling: the proposer trades validity for "
                        "reward (e.g. posing unverifiable questions)."),
    "ssp/solver_success": ("SSP: mean solver success rate p over the step's valid questions (share of the n attempts "
                           "with reward > 0); None when no proposal was valid.",
                           "The self-play's balance: strictly between 0 and 1. Falling to 0: questions outrun the "
                           "solver; stuck at 1: the proposer finds nothing hard."),
    "ssp/proposer_reward": ("SSP: mean proposer reward over the step's proposals (1 - p, the intermediate-difficulty "
                            "parabola, or the penalty).",
                            "With 1-acc it moves opposite to ssp/solver_success while most proposals are valid."),
    "ssp/question_hops": ("SSP: mean hops of the step's valid questions (as the proposer environment reports them, "
                          "info['hops']); None when none is valid or the environment does not report them.",
                          "The difficulty drift of generated questions: rising, the proposer asks longer chains."),
}


def check_ssp_transform(*, n=5, reward_type="1-acc", left=0.0, right=1.0, format_penalty=0.0, dynamic_rounds=0,
                        **_) -> None:
    check_ssp(reward_type=reward_type, left=left, right=right, format_penalty=format_penalty)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r} is the solver's attempts per question: give an integer >= 1 (the reference's 5)")
    if isinstance(dynamic_rounds, bool) or not isinstance(dynamic_rounds, int) or dynamic_rounds < 0:
        raise ValueError(f"dynamic_rounds={dynamic_rounds!r} is the rounds of reward-based dynamic sampling: give an "
                         "integer >= 0 (0: off, the reference's script)")


def proposer_task(task):
    """The run's task if it is a proposer task (it offers `solver` and `question`), else a ValueError naming the fix."""
    if getattr(task, "solver", None) is None or not callable(getattr(task, "question", None)):
        raise ValueError(f"group transform ssp needs a proposer task, whose episodes pose questions for a solver "
                         f"(`solver`, `question`); task {getattr(task, 'name', task)!r} is not one: train on "
                         "--task search-propose")
    return task


def posed_questions(task, proposers: RolloutBatch) -> list[tuple[int, object]]:
    """(row, the solver's example) of every valid proposal (scores >= 1: the RAG check passed), in row order."""
    valid = torch.nonzero(proposers.scores >= 1).flatten().tolist()
    out = [(i, task.question(proposers.completions[i], proposers.turn_info[i][0])) for i in valid]
    return [(i, question) for i, question in out if question is not None]


def question_hops(proposers: RolloutBatch, rows: list[int]) -> list[float]:
    """The hops the environment reported for these rows' questions (info["hops"] of the last step), where it did."""
    hops = [proposers.turn_info[i][-1].get("hops") for i in rows]
    return [float(h) for h in hops if h is not None]


def self_play_round(proposers: RolloutBatch, ctx, task, episodes, *, n: int, **reward_kw):
    """One round: the solver's n attempts at each valid proposal, then the proposer rewards.
    Returns (proposer rows with rewards, agent 0 and fresh episode ids from `episodes`; their solver rows, agent 1,
    group = the question's index, or None without a valid proposal; stats {valid [B], p [V], rewards [B], hops})."""
    B = proposers.size
    ids = torch.tensor([next(episodes) for _ in range(B)], dtype=torch.long)
    posed = posed_questions(task, proposers)
    rows = [i for i, _ in posed]
    valid = torch.zeros(B, dtype=torch.bool)
    valid[torch.tensor(rows, dtype=torch.long)] = True
    p = torch.zeros(B, dtype=torch.float64)
    solver = None
    if posed:
        solver = ctx.rollout([q for _, q in posed], group_size=n, task=task.solver, rewarded=True)
        p[rows] = success_rate(solver.rewards.view(len(posed), n))  # row i answers question i // n
        solver = replace(solver, agent=torch.full((solver.size,), SOLVER, dtype=torch.long),
                         episode=ids[rows].repeat_interleave(n))
    r = proposer_rewards(p, valid, **reward_kw)  # [B] float64
    proposers = replace(proposers, rewards=r.to(proposers.rewards.dtype),
                        agent=torch.full((B,), PROPOSER, dtype=torch.long), episode=ids)
    return proposers, solver, {"valid": valid, "p": p[valid], "rewards": r, "hops": question_hops(proposers, rows)}


def joined(proposers: RolloutBatch, solvers: list[RolloutBatch], pad_id: int) -> RolloutBatch:
    """The proposer rows, then the solver rows of the proposals kept among them: one group per question, numbered
    after the proposer groups in the order of the questions."""
    if not solvers:
        return proposers
    solver = concat(solvers, pad_id=pad_id)
    solver = solver.select(torch.nonzero(torch.isin(solver.episode, proposers.episode)).flatten())
    if solver.size == 0:
        return proposers
    _, question = torch.unique_consecutive(solver.episode, return_inverse=True)  # a question's n rows are adjacent
    offset = int(proposers.group.max()) + 1 if proposers.size else 0
    return concat([proposers, replace(solver, group=offset + question)], pad_id=pad_id)


def mean_over_ranks(ctx, values) -> float | None:
    """The mean of `values` over every rank's rows (None when there are none); ranks may hold different counts."""
    values = torch.as_tensor(values, dtype=torch.float64).flatten()
    mine = torch.tensor([float(values.sum()), float(values.numel())], dtype=torch.float64)
    total, count = ctx.gather(mine).view(-1, 2).sum(0)
    return float(total / count) if count > 0 else None


@registry.group_transform(
    "ssp", title=SSP_TITLE, family="multiagent",
    summary="Search self-play's step: each valid proposal's question (the RAG check passed) is solved n = 5 times by "
            "the same policy; the proposer rows get 1 - p (p the solver's success rate) or the intermediate-"
            "difficulty reward, invalid ones format_penalty; the solver rows (agent 1, a group per question) are "
            "appended for GRPO on their outcome.",
    equation=r"p_j = \tfrac{1}{n}\textstyle\sum_{i=1}^{n} [R^{solve}_{j,i} > 0],\quad "
             r"r_j = \mathrm{valid}_j\,(1 - p_j) + (1 - \mathrm{valid}_j)\,\text{format penalty}",
    needs=("proposer",), reads=("scores", "group", "completions", "turn_info"), provides=("rewards", "agent", "episode"),
    logs=SSP_LOGS, check=check_ssp_transform, choices={"reward_type": REWARD_TYPES})
def ssp(batch, ctx, *, n=5, reward_type="1-acc", left=0.0, right=1.0, format_penalty=0.0, dynamic_rounds=0):
    """Reads the proposer rows' `scores` (validity), `completions`, `turn_info` and `group`; samples the solver through
    `ctx.rollout` (and, with dynamic_rounds > 0, more proposer rounds through `ctx.resample`); uses `ctx.task` (the
    proposer task), `ctx.group_size` (the proposer's group size), `ctx.pad_id`. n: solver attempts per question (the
    reference's rollout_n, 5); reward_type, left, right, format_penalty: the proposer reward (workbench.rewards.ssp);
    dynamic_rounds: rounds of reward-based dynamic sampling (0: off). Logs ssp/valid_share, ssp/solver_success,
    ssp/proposer_reward, ssp/question_hops (over every proposal played this step)."""
    check_ssp_transform(n=n, reward_type=reward_type, left=left, right=right, format_penalty=format_penalty,
                        dynamic_rounds=dynamic_rounds)
    task = proposer_task(ctx.task)
    reward_kw = dict(reward_type=reward_type, left=left, right=right, format_penalty=format_penalty)
    episodes, solvers, stats = itertools.count(), [], []

    def play(proposers: RolloutBatch) -> RolloutBatch:
        proposers, solver, round_stats = self_play_round(proposers, ctx, task, episodes, n=n, **reward_kw)
        solvers.extend([solver] if solver is not None else [])
        stats.append(round_stats)
        return proposers

    proposers = play(batch)
    if dynamic_rounds > 0 and ctx.group_size > 1:  # a group of one has nothing to filter (the reference keeps it)
        proposers = dynamic_sampling(proposers, replace(ctx, resample=lambda r: play(ctx.resample(r))),
                                     max_rounds=dynamic_rounds)
    ctx.metrics.update({
        "ssp/valid_share": mean_over_ranks(ctx, torch.cat([s["valid"] for s in stats]).double()),
        "ssp/solver_success": mean_over_ranks(ctx, torch.cat([s["p"] for s in stats])),
        "ssp/proposer_reward": mean_over_ranks(ctx, torch.cat([s["rewards"] for s in stats])),
        "ssp/question_hops": mean_over_ranks(ctx, [h for s in stats for h in s["hops"]]),
    })
    return joined(proposers, solvers, ctx.pad_id)
