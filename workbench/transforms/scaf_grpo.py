"""Scaf-GRPO: after a warm-up, a prompt the policy never solves gets tiered hints; the least hint that works lends
one sample to the group.

    from step W on, a "learning cliff" group (all G verifier scores 0) is sampled once at every hint level:
        level k of a tier = "<tier label>: " + the tier's first k parts (k = 1 .. 4); tiers in order of specificity
    the lowest level with a correct sample wins, and that sample replaces the group's first row
    GRPO then sees one success among G - 1 failures: a non-zero advantage where the group had none

The hint is scaffolding, not the answer to imitate: the least specific level that lets the policy solve the
problem keeps most of the solution its own. A group no level solves is left as it is (all A = 0, as GRPO).

Reference: dvlab-research/Scaf-GRPO @ 1085db539b929ea6fed5ec3b71e3ea4c48c27612, `hint_mix_grpo/trainer/ray_trainer.py`:
`fit` (L1467-1660: `global_steps > warmup_steps`, cliff = `(uid_rewards == 0).all()`, solved = `(uid_rewards ==
1).any()`, `min_hint_level` over rewards > 0, the first row of the group replaced, `replace_num`,
`replace_hint_prompt`) and `build_new_message` (L2136-2240: 'Question: {q}\\n{label}: {" ".join(parts[:k])}', four
cumulative levels per tier, one sample per level); `sh/hint_mix_grpo/bs256_6k_mix.sh` (warmup_steps 50,
replace_hint_prompt False, replace_num 1, GRPO, no KL). Their global steps count from 1, ours from 0: their
`global_steps > 50` is our `step >= 50`.

Tiers here. The reference's hints come from a dataset annotated with knowledge components, a planning skeleton and
a solution breakdown; its code runs two tiers (knowledge, then solution; planning is commented out although its
docstring says 12 levels). Our tasks carry a solution only, so the tiers are: knowledge hints when the task offers
them (`task.knowledge_hints(example)`, a list of sentences; none of the built-in tasks does), then the solution
in four parts (`solution_parts`: its actions, or its answer's characters, in four runs), re-joined as they were
(the reference joins sentences with spaces; our parts are pieces of one text). At toy scale the solution is the
task's exact one, not a worked derivation.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import concat, replace_rows
from workbench.tasks.guidance import check_template, hinted_copies, solution_actions, solution_parts

SCAF_TITLE = "Scaf-GRPO: Scaffolded Group Relative Policy Optimization for Enhancing LLM Reasoning"
SCAF_TEMPLATE = "Question: {prompt}\n{hint}"  # build_new_message: f'Question: {q}\n{hint_label}: {hints}'
PARTS_PER_TIER = 4

SCAF_LOGS = {
    "scaf/cliff_groups": ("Scaf-GRPO: share of the step's groups at a learning cliff (every sample scored 0) after "
                          "the warm-up.",
                          "Falls over training. 0 before the warm-up ends; stuck high: the prompts are too hard."),
    "scaf/rescued_groups": ("Scaf-GRPO: share of groups where a hinted sample succeeded and replaced a failure.",
                            "Close to scaf/cliff_groups: hints rescue most cliffs. 0 while cliffs exist: the policy "
                            "cannot use the hints."),
    "scaf/hint_level": ("Scaf-GRPO: mean lowest solving hint level over the rescued groups (1 = least specific), "
                        "0 when none was rescued.",
                        "Falls as the policy needs less help; at the top level: only near-complete solutions help."),
}


def check_scaf(*, warmup_steps=50, replace_num=1, plain_prompt=False, template=SCAF_TEMPLATE, **_) -> None:
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps}: the steps before hints start must be >= 0")
    if replace_num not in (1, 2):
        raise ValueError(f"replace_num={replace_num}: the reference replaces 1 row (or 2: one under the plain prompt, "
                         "one under the hinted one); give 1 or 2")
    check_template(template)


def hint_tiers(task, example) -> list[tuple[str, list[str], str]]:
    """(label, parts, separator) of each tier, least specific first (see the module docstring)."""
    tiers = []
    knowledge = getattr(task, "knowledge_hints", None)
    if callable(knowledge) and knowledge(example):
        tiers.append(("Knowledge Hints", list(knowledge(example))[:PARTS_PER_TIER], " "))
    tiers.append(("Solution Hints", solution_parts(solution_actions(task, example), PARTS_PER_TIER), ""))
    return tiers


def hint_levels(task, example) -> list[str]:
    """The hint text of every level, least specific first: each tier's label and its first k parts, k = 1 ..."""
    return [f"{label}: {sep.join(parts[:k])}" for label, parts, sep in hint_tiers(task, example)
            for k in range(1, len(parts) + 1)]


def cliff_groups(scores: torch.Tensor, group: torch.Tensor) -> list[int]:
    """Groups whose scores [B] are all exactly 0 (the reference's `(uid_rewards == 0).all()`)."""
    return [int(g) for g in group.unique() if bool((scores[group == g] == 0).all())]


def lowest_solving_level(scores: list[float]) -> int | None:
    """Index of the lowest hint level whose sample scored > 0, if any scored exactly 1 (the reference's test)."""
    if not any(s == 1 for s in scores):
        return None
    return min(i for i, s in enumerate(scores) if s > 0)


@registry.group_transform(
    "scaf-grpo", title=SCAF_TITLE,
    summary="After a warm-up, groups whose samples all score 0 are sampled once per tiered hint level; the lowest "
            "level with a correct sample replaces the group's first row.",
    equation=r"k^\star = \min\{k : R(y_k) = 1\},\ y_k \sim \pi_\theta(\cdot \mid x \oplus h_{1:k}),\quad "
             r"y_{g,1} \leftarrow y_{k^\star}",
    reads=("scores", "group"), needs=("solution",), logs=SCAF_LOGS, check=check_scaf)
def scaf_grpo(batch, ctx, *, warmup_steps=50, replace_num=1, plain_prompt=False, template=SCAF_TEMPLATE):
    """Reads the verifier's `scores` and `group`; samples hinted rows through `ctx.rollout(..., group_size=1,
    task=hinted copies, rewarded=True)`, one call per level. warmup_steps: steps of plain GRPO first (the reference's
    script: 50); replace_num: rows replaced by the winning sample (1; 2 = the reference's "6+1+1" strategy, the
    first under the plain prompt, the second under the hinted one); plain_prompt: with replace_num 1, train the
    hinted sample under the plain prompt (the reference's `replace_hint_prompt`, False in its script). The sample's
    behaviour log-probs stay those of the hinted prompt: don't combine plain_prompt with rollout importance
    correction. Logs scaf/cliff_groups, scaf/rescued_groups, scaf/hint_level."""
    n_groups = len(batch.group.unique())
    cliffs = cliff_groups(batch.scores, batch.group) if ctx.step >= warmup_steps else []
    levels = {g: hint_levels(ctx.task, ctx.examples[g]) for g in cliffs}
    tried = {g: [] for g in cliffs}  # group -> [1-row batch per level]
    for k in range(max((len(v) for v in levels.values()), default=0)):
        groups = [g for g in cliffs if k < len(levels[g])]
        task, copies = hinted_copies(ctx.task, [ctx.examples[g] for g in groups], [levels[g][k] for g in groups],
                                     template)
        sampled = ctx.rollout(copies, group_size=1, task=task, rewarded=True)
        for i, g in enumerate(groups):
            tried[g].append(sampled.select(torch.tensor([i])))
    rescued = {g: k for g in cliffs if (k := lowest_solving_level([float(b.scores[0]) for b in tried[g]])) is not None}
    for g, k in rescued.items():
        rows = torch.nonzero(batch.group == g).flatten()[:replace_num].tolist()
        winners = [winning_row(tried[g][k], batch, row, plain=plain_prompt or (replace_num == 2 and j == 0))
                   for j, row in enumerate(rows)]
        batch = replace_rows(batch, rows, concat(winners, pad_id=ctx.pad_id), pad_id=ctx.pad_id)
    ctx.metrics.update({"scaf/cliff_groups": len(cliffs) / n_groups, "scaf/rescued_groups": len(rescued) / n_groups,
                        "scaf/hint_level": sum(k + 1 for k in rescued.values()) / len(rescued) if rescued else 0.0})
    return batch


def winning_row(sample, batch, row: int, plain: bool):
    """The winning 1-row sample in the place of `row`: its group id, and (plain) the row's own plain prompt."""
    sample = sample.select(torch.tensor([0]))  # a copy: the same sample may fill two rows
    sample.group = batch.group[row:row + 1].clone()
    if plain:
        sample.prompt_ids, sample.prompt_mask = batch.prompt_ids[row:row + 1], batch.prompt_mask[row:row + 1]
        sample.prompts = [batch.prompts[row]]
    return sample
