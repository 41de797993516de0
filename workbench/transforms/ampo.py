"""AMPO: a group whose G samples all fail gets up to k teacher solutions in place of failed samples, the solutions the
policy best understands first.

    correct_i = score_i > c + 0.5                                    (our 0/1 verifiers: correct iff score_i = 1)
    group g is guided  iff  #correct_g / G < 1 / G                   (no correct sample: the adaptive injection)
    for each teacher solution y of the group's example x, y = its reasoning r, then the answer a:
        scoreB(y) = mean_{t in a} pi_theta(a_t | x, r, a_<t)         the answer after the teacher's reasoning
        scoreA    = mean_{t in a} pi_theta(a_t | x, a_<t)            the answer alone
        score(y)  = (1 - c) max(scoreB - scoreA, 0) + c format(y)    c = format_coefficient = 0.1
    the min(k, #teachers) best replace as many of the group's failed samples (drawn at random); a teacher row's
    reward below 1 is set to 1; its tokens are marked offpolicy_mask = 1 (trained by `objective:policy-shaping`)

Every other row, and every group with a correct sample, is left as it is: AMPO is plain GRPO wherever the policy
solves the prompt alone. Guidance goes only where the group has no learning signal, and among the teachers it prefers
the one whose reasoning raises the policy's probability of the right answer most (comprehension-based selection):
a solution the policy can follow, not merely a correct one. The advantage (`advantage:ampo`) keeps the teacher rows
out of the group's baseline.

Reference: SII-Enigma/AMPO @ b88d365654e03b94d8316226a5a67e0f7b64048f
  - `ampo/verl/verl/adaptive_mix_src/mix_dapo_trainer.py`, `MIXRayDAPOTrainer.mix_off_policy_rollout` (L1272-1671):
    correct = score > format_coefficient + 0.5 (L1384), threshold overwritten to 1 / n (L1390-1392), adaptive
    decision (L1400-1401), effective_k = min(#teachers, n_prefix) (L1371), failed rows drawn by `random.sample`
    (L1442-1446), teachers sorted by score, descending (`_sort_batch_by_scores`, L1760-1762), the first effective_k
    kept (L1547), a teacher reward < 1 set to 1 (L1597-1599), prefix_mask over the teacher's response (L1592).
  - `ampo/verl/verl/workers/reward_manager/prob.py`, `ProbRewardManager`: score = (1 - c) shaping(scoreB - scoreA)
    + c format (L245-255), shaping `threshold_0` (L151-153: x < 0 -> 0), `compute_scoreB` with
    `mean_exp_log_softmax` (L308-334: mean exp(logp) over the ground-truth tokens, 0 when there are none).
  - `exp_scripts/train_ampo.sh`: num_off_policy_targets=2 (L25, k), max_available_targets=4 (L26),
    injection_strategy='adaptive' (L35), target_selection_strategy='best_k' (L36), off_policy_reward_manager='prob'
    (L42), temperature=1.0 (L68), min/max_prefix_ratio=1.0 (L161-162: whole solutions), shaping threshold_0 (L180),
    compute_score_name=mean_exp_log_softmax (L181), format_coefficient=0.1 (L186).

Differences from the reference, and why:
  - Teachers are exact solvers (`workbench/tasks/teachers.py`), not LLMs: at toy scale a teacher is a function
    example -> solution; the pool is named in `teachers`.
  - The answer is `example.answer` (what the verifier checks against) and the reasoning the solution's text without a
    trailing answer (all of it when it does not end with the answer; a multi-turn solution's actions joined, the
    environment's observations left out). Where the solution is the answer itself (addition's "46") the reasoning is
    empty, scoreB = scoreA and every teacher scores c format: the selection falls back to the format term, then to
    the pool's order (the sort is stable; the reference's `torch.argsort` leaves ties in no stated order).
  - Reasoning and answer are tokenized apart (the reference tokenizes the whole text and finds the answer's tokens
    by character offsets): the answer's tokens are then the same in scoreB and scoreA.
  - format: the reference's `format_reward` checks for one <answer>...</answer> pair (format_mode R1_nothink); our
    tasks have no tags, so format(y) = 1 when the verifier accepts the replayed solution (score > c + 0.5), the
    only format a toy verifier reads.
  - scoreA: the reference computes it once before training with the initial policy (`compute_promptgt2scoreA`), and
    only when `reward_model.reward_manager` contains 'prob'; the released script sets 'naive' (L43), so scoreA stays
    at its default 0 (prob.py L352) and teachers are ranked by scoreB: `score_a="zero"`. The default, "policy",
    computes it each step with the current policy, the card's scoreB - scoreA. scoreB is not rounded to bfloat16
    (prob.py L332).
  - A teacher row's reward: the reference scores it with its reward function and sets a total below 1 to 1; here
    `scores` keeps the verifier's score of the replayed solution and `rewards` = max(score, 1) (the recipe's reward
    functions, if any, are not applied to teacher rows). Its mu_logp are the policy's own (LUFFY's
    `reference_batch`: nothing sampled them).
  - Which failed rows take the teachers: the reference assigns teacher `j % len(available)` to selected row j; here
    the best teacher goes to the first (lowest) drawn row. The rows are exchangeable samples; the draw comes from the
    step's seeded stream (`ctx.rng()`), so a resumed run draws the same rows.
  - Only `injection_strategy='adaptive'` (the script's); 'hybrid' and 'always' are not offered.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from workbench import registry
from workbench.advantages.ampo import AMPO_TITLE
from workbench.batch import RolloutBatch, concat, replace_rows
from workbench.rollout.offpolicy_guidance import reference_batch
from workbench.tasks.base import Example, Task, WrappedTask
from workbench.tasks.teachers import DEFAULT_POOL, check_teachers, teacher_solutions
from workbench.transforms.vspo import total

SCORE_A = ("policy", "zero")  # scoreA from the current policy each step (the card's), or 0 (the released script's)

AMPO_LOGS = {
    "ampo/guided_groups": ("AMPO: share of the step's groups with no correct sample, which received teacher solutions.",
                           "Falls over training as the policy solves more prompts alone (1 at the start of a run from "
                           "scratch). Stuck at 1: teachers are not being learnt."),
    "ampo/teacher_rows": ("AMPO: teacher rows in the step's batch (at most k per guided group).",
                          "k per guided group where the pool offers k or more solutions; falls with "
                          "ampo/guided_groups. 0 throughout: plain GRPO, nothing guided."),
    "ampo/teacher/<name>": ("AMPO: rows the named teacher filled this step (its usage).",
                            "Shares between teachers show which ones the policy understands best; one teacher taking "
                            "every row while others have solutions: selection has collapsed onto one style."),
    "ampo/comprehension_gain": ("AMPO: mean scoreB - scoreA of the chosen teacher solutions (how much their reasoning "
                                "raises the policy's probability of the answer); 0 when none was chosen.",
                                "In [-1, 1]; above 0 when reasoning helps. Exactly 0 where solutions are the answer "
                                "itself (addition): the selection then falls back to format and pool order."),
}


def check_ampo(*, k=2, teachers=DEFAULT_POOL, format_coefficient=0.1, score_a="policy", group_size=None, **_) -> None:
    """Settings the transform cannot take, refused with the field's name and the fix; `group_size` (the run's G) when
    the pipeline knows it."""
    if k < 0:
        raise ValueError(f"k={k} is how many teacher solutions a guided group receives: give k >= 0 (0: plain GRPO)")
    if group_size is not None and k >= group_size:
        raise ValueError(f"k={k} teacher rows in a group of group_size={group_size} would leave no on-policy sample "
                         f"for the baseline; give k <= group_size - 1 = {group_size - 1}, or a larger group_size")
    check_teachers(teachers)
    if not 0.0 <= format_coefficient <= 1.0:
        raise ValueError(f"format_coefficient={format_coefficient} weighs the format term against the comprehension "
                         "gain (score = (1 - c) gain + c format): give a number in [0, 1] (the script's 0.1)")
    if score_a not in SCORE_A:
        raise ValueError(f"score_a={score_a!r} must be one of {SCORE_A}")


def correct_rows(scores: torch.Tensor, format_coefficient: float) -> torch.Tensor:
    """[B] bool: score > format_coefficient + 0.5 (the reference's test, L1384; a 0/1 verifier's 1)."""
    return scores > format_coefficient + 0.5


def solved_alone(correct: torch.Tensor) -> bool:
    """The reference's adaptive decision for one group (L1389-1401): success rate #correct / n at least 1 / n."""
    n = correct.numel()
    return int(correct.sum()) / n >= 1 / n


def groups_to_guide(scores: torch.Tensor, group: torch.Tensor, format_coefficient: float) -> list[int]:
    """Group ids (ascending) with no correct sample."""
    correct = correct_rows(scores, format_coefficient)
    return [int(g) for g in group.unique() if not solved_alone(correct[group == g])]


def reasoning_of(actions: list[str], answer: str) -> str:
    """What the solution writes before its answer: its text without a trailing `answer` (all of it otherwise)."""
    text = "".join(actions)
    return text[:-len(answer)] if answer and text.endswith(answer) else text


def mean_answer_probability(logp: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """[N] mean over each row's answer tokens of exp(logp) (`mean_exp_log_softmax`), 0 for a row without any
    (prob.py L309-310). logp, answer_mask [N, T]."""
    n = answer_mask.sum(-1)                                                                 # [N]
    total_p = (torch.exp(logp) * answer_mask).sum(-1)                                       # [N]
    return torch.where(n > 0, total_p / n.clamp(min=1), torch.zeros_like(total_p))


def comprehension_score(score_b: torch.Tensor, score_a: torch.Tensor, format_score: torch.Tensor,
                        format_coefficient: float) -> torch.Tensor:
    """(1 - c) max(scoreB - scoreA, 0) + c format (prob.py L245-255 with the threshold_0 shaping)."""
    return (1 - format_coefficient) * (score_b - score_a).clamp(min=0) + format_coefficient * format_score


def best_k(scores: torch.Tensor, k: int) -> list[int]:
    """Indices of the k highest of `scores` [N], highest first; ties keep their order (a stable sort)."""
    return torch.sort(scores, descending=True, stable=True).indices[:k].tolist()


@dataclass(frozen=True)
class Candidate:
    """One teacher solution for one guided group."""

    group: int           # the batch's group id
    teacher: str
    actions: tuple
    slot: int            # the teacher's place in the named pool (seeds its replay)


class TeacherTask(WrappedTask):
    """`task` whose expert solution of each example is a given teacher's (`solutions`): LUFFY's `reference_batch`
    then replays and encodes it as it does the task's own."""

    def __init__(self, task: Task, solutions: dict[Example, list[str]]):
        super().__init__(task)
        self.solutions = solutions

    def expert_actions(self, example: Example) -> list[str]:
        return list(self.solutions[example])


def teacher_batch(ctx, candidates: list[Candidate], temperature: float) -> RolloutBatch:
    """One row per candidate, in order: its solution replayed through the environment and scored by the verifier
    (`reference_batch`: mu_logp the policy's own, offpolicy_mask = the response mask), `group` the batch's id,
    `scores` the verifier's, `rewards` max(score, 1) (the reference forces a teacher's reward below 1 to 1)."""
    parts, order = [], []
    for slot in sorted({c.slot for c in candidates}):
        mine = [i for i, c in enumerate(candidates) if c.slot == slot]
        examples = [ctx.examples[candidates[i].group] for i in mine]
        task = TeacherTask(ctx.task, {e: candidates[i].actions for e, i in zip(examples, mine)})
        # seed index G + slot: a replay seed no sampled row of the group used
        parts.append(reference_batch(ctx.engine, task, examples, index=ctx.group_size + slot, temperature=temperature))
        order += mine
    rows = concat(parts, pad_id=ctx.pad_id)
    rows = rows.select(torch.argsort(torch.tensor(order)))                   # back to the candidates' order
    rows.group = torch.tensor([c.group for c in candidates], dtype=torch.long, device=rows.group.device)
    rows.scores = rows.rewards.clone()
    rows.rewards = rows.rewards.clamp(min=1.0)
    return rows


def probe_batch(tokenizer, prompt_ids, prompt_mask, probes: list[tuple[str, str]]) -> RolloutBatch:
    """The comprehension probes as responses: each (context, answer) pair's context tokens (mask 0) then its answer
    tokens (mask 1), right-padded, after the prompt prompt_ids / prompt_mask [N, P] (one row each)."""
    rows, masks = [], []
    for context, answer in probes:
        before = tokenizer(context, add_special_tokens=False)["input_ids"] if context else []
        after = tokenizer(answer, add_special_tokens=False)["input_ids"]
        rows.append(before + after)
        masks.append([0.0] * len(before) + [1.0] * len(after))
    width, device = max(len(r) for r in rows), prompt_ids.device
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width)
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, :len(r)], mask[i, :len(m)] = torch.tensor(r, dtype=torch.long), torch.tensor(m)
    return RolloutBatch(response_ids=ids.to(device), mask=mask.to(device), group=torch.arange(len(rows)),
                        prompt_ids=prompt_ids, prompt_mask=prompt_mask)


def answer_probabilities(ctx, batch: RolloutBatch, probes: list[tuple[int, str, str]],
                         temperature: float) -> torch.Tensor:
    """[N] mean probability of each probe's answer tokens under the current policy (`ctx.score`), given the prompt of
    its group g and its context: probes are (g, context, answer). A probe whose answer has no token scores 0."""
    out = torch.zeros(len(probes), dtype=torch.float64)
    tok = ctx.engine.tokenizer
    scored = [i for i, (_, _, answer) in enumerate(probes) if tok(answer, add_special_tokens=False)["input_ids"]]
    if not scored:
        return out
    first = {int(g): int(torch.nonzero(batch.group == g)[0]) for g in {probes[i][0] for i in scored}}
    rows = torch.tensor([first[probes[i][0]] for i in scored], device=batch.prompt_ids.device)
    probe = probe_batch(tok, batch.prompt_ids[rows], batch.prompt_mask[rows], [probes[i][1:] for i in scored])
    room = getattr(ctx.engine, "max_length", None)
    longest = int(probe.prompt_mask.sum(-1).max()) + probe.response_ids.shape[1]
    if room is not None and longest > room:
        raise ValueError(f"ampo: a comprehension probe needs {longest} positions (prompt + teacher reasoning + answer) "
                         f"and the model takes {room}; use teachers with shorter solutions")
    logp = ctx.score(probe, temperature).double().cpu()                                    # [n, T]
    out[scored] = mean_answer_probability(logp, probe.mask.double().cpu())
    return out


def select_teachers(ctx, batch, candidates: list[Candidate], rows: RolloutBatch, *, k: int, format_coefficient: float,
                    score_a: str, temperature: float) -> tuple[list[int], torch.Tensor]:
    """Indices of the chosen candidates (each guided group's best min(k, #teachers), best first, groups in order) and
    every candidate's scoreB - scoreA [N]."""
    guided = sorted({c.group for c in candidates})
    answers = {g: ctx.examples[g].answer for g in guided}
    probes = [(c.group, reasoning_of(list(c.actions), answers[c.group]), answers[c.group]) for c in candidates]
    score_b = answer_probabilities(ctx, batch, probes, temperature)                       # [N]
    alone = (answer_probabilities(ctx, batch, [(g, "", answers[g]) for g in guided], temperature)
             if score_a == "policy" else torch.zeros(len(guided), dtype=torch.float64))  # [groups]: one per example
    a = alone[torch.tensor([guided.index(c.group) for c in candidates])]                 # [N]
    fmt = correct_rows(rows.scores, format_coefficient).double().cpu()                    # [N]
    score = comprehension_score(score_b, a, fmt, format_coefficient)
    chosen = []
    for g in guided:
        mine = [i for i, c in enumerate(candidates) if c.group == g]
        chosen += [mine[j] for j in best_k(score[mine], k)]
    return chosen, score_b - a


@registry.group_transform(
    "ampo", title=AMPO_TITLE,
    summary="Groups with no correct sample get up to k = 2 teacher solutions in place of failed samples, chosen by how "
            "much their reasoning raises the policy's probability of the answer; teacher rewards below 1 are set to "
            "1 and their tokens marked off-policy.",
    equation=r"s(y) = 0.9\,\max\!\big(\overline{\pi_\theta(a \mid x, r_y)} - \overline{\pi_\theta(a \mid x)}, 0\big)"
             r" + 0.1\,\mathrm{fmt}(y),\quad \text{top-}k\ \text{replace failures iff}\ \sum_i \mathbb{1}[R_i = 1] = 0",
    reads=("scores", "group"), provides=("offpolicy_mask",), needs=("solution",), logs=AMPO_LOGS, check=check_ampo,
    choices={"score_a": SCORE_A})
def ampo(batch, ctx, *, k=2, teachers=DEFAULT_POOL, format_coefficient=0.1, score_a="policy", temperature=1.0):
    """Reads the verifier's `scores` [B] and `group`; fills `offpolicy_mask` [B, T] (1 on teacher tokens, 0 elsewhere).
    Uses `ctx.task` (the teachers' solutions), `ctx.engine` (replaying them as responses, tokenizing the probes),
    `ctx.score` (the current policy's log-probs of the probes) and `ctx.rng()` (which failed rows are replaced).

    k: teacher rows per guided group (the script's num_off_policy_targets=2); teachers: the pool, by name
    (`workbench.tasks.teachers.TEACHERS`); format_coefficient: c of the score and of the correctness test (0.1);
    score_a: "policy" (the answer's probability without reasoning, current policy) or "zero" (the released script's,
    where scoreA is never filled); temperature: of the probes and of the teacher rows' mu_logp (the script's 1.0).
    Logs ampo/guided_groups, ampo/teacher_rows, ampo/teacher/<name> per teacher, ampo/comprehension_gain."""
    # the settings before ctx: building the recipe calls this with stand-ins that stop at ctx (`probe_settings`)
    check_ampo(k=k, teachers=teachers, format_coefficient=format_coefficient, score_a=score_a)
    check_ampo(k=k, group_size=ctx.group_size)
    if batch.offpolicy_mask is None:
        batch = replace(batch, offpolicy_mask=torch.zeros_like(batch.mask))
    guided = groups_to_guide(batch.scores, batch.group, format_coefficient) if k > 0 else []
    slots = {name: s for s, name in enumerate(teachers)}
    candidates = [Candidate(g, name, tuple(actions), slots[name]) for g in guided
                  for name, actions in teacher_solutions(ctx.task, ctx.examples[g], teachers)]
    chosen, gain = [], torch.zeros(0, dtype=torch.float64)
    if candidates:
        rows = teacher_batch(ctx, candidates, temperature)
        chosen, gain = select_teachers(ctx, batch, candidates, rows, k=k, format_coefficient=format_coefficient,
                                       score_a=score_a, temperature=temperature)
        batch = replace_rows(batch, replaced_rows(ctx, batch, candidates, chosen, format_coefficient),
                             rows.select(torch.tensor(chosen, dtype=torch.long)), pad_id=ctx.pad_id)
    used = [candidates[i].teacher for i in chosen]
    ctx.metrics.update({
        "ampo/guided_groups": total(ctx, len(guided)) / total(ctx, len(batch.group.unique())),
        "ampo/teacher_rows": total(ctx, len(chosen)),
        "ampo/comprehension_gain": total(ctx, float(gain[chosen].sum())) / max(total(ctx, len(chosen)), 1.0),
        **{f"ampo/teacher/{name}": total(ctx, used.count(name)) for name in teachers}})
    return batch


def replaced_rows(ctx, batch, candidates: list[Candidate], chosen: list[int], format_coefficient: float) -> list[int]:
    """The batch row each chosen candidate replaces: per group, as many of its failed rows as it has chosen
    teachers, drawn at random (the reference's `random.sample(incorrect_positions, ...)`) and taken lowest first,
    the best teacher into the lowest."""
    rng, failed = ctx.rng(), ~correct_rows(batch.scores, format_coefficient)
    out = []
    for g in sorted({candidates[i].group for i in chosen}):
        n = sum(candidates[i].group == g for i in chosen)
        pool = torch.nonzero((batch.group == g) & failed.to(batch.group.device)).flatten().tolist()
        out += sorted(rng.sample(pool, n))
    return out
