"""POPE: a hard problem (no success in its G samples) gets a guided copy whose prompt carries the shortest prefix of
an oracle solution that lets the policy succeed; both versions train.

    hard = groups whose G verifier scores are all <= 0 (on-policy pass@G = 0)
    for f in (0.25, 0.5, 0.75):                 shortest first
        sample G times on  x ⊕ instruction ⊕ y*_{1:round(f |y*|)}   for the hard problems not yet guided
        the first f with >= 1 success gives the problem's guided group (those G samples, their own group)
    the batch keeps the unguided groups and gains the guided ones: a 50/50 mixture of the hard problems' versions

The oracle's tokens sit in the prompt: they condition the policy and are never a loss target (no SFT, no off-policy
term), so the update is on-policy RL on the guided problem. A problem no prefix rescues adds nothing.

Reference: the official code (CMU-AIRe/POPE) was not available (REFERENCES-AGENTS.md); the paper's abstract and
secondary summaries give the method, not its constants. This follows the catalog's reading: fractions {0.25, 0.5,
0.75} (0 is the unguided problem itself), the shortest with >= 1 success in k = G samples, one guided copy per hard
problem (50/50 guided / unguided). The instruction's wording is ours (the paper's is not known), and at toy scale the
oracle solution is the task's exact one (`Task.expert_actions`), not a human-written derivation.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import concat
from workbench.tasks.guidance import HintedTask, check_fraction, check_template, solution_actions, solution_hint
from workbench.transforms.ghpo import all_wrong_groups

POPE_TITLE = "POPE: Learning to Reason on Hard Problems via Privileged On-Policy Exploration"
POPE_TEMPLATE = "{prompt}\nHere is the beginning of a solution. Continue it to solve the problem:\n{hint}"
POPE_FRACTIONS = (0.25, 0.5, 0.75)

POPE_LOGS = {
    "pope/hard_groups": ("POPE: share of the step's groups with no success in their G samples (hard problems).",
                         "Falls over training; stuck at 1: the problems are out of reach even for the warm start."),
    "pope/guided_groups": ("POPE: guided copies added, as a share of the step's groups.",
                           "Up to pope/hard_groups; well below it: even the longest prefix rarely helps."),
    "pope/prefix_fraction": ("POPE: mean oracle-prefix length (fraction of the solution) of the guided copies.",
                             "Falls as the policy needs shorter prefixes; 0 when no copy was added."),
}


def check_pope(*, fractions=POPE_FRACTIONS, template=POPE_TEMPLATE, **_) -> None:
    values = [check_fraction("fractions", f) for f in fractions]
    if values != sorted(set(values)) or (values and values[0] == 0):
        raise ValueError(f"fractions={tuple(fractions)!r} are the prefixes tried, shortest first: give increasing "
                         "fractions in (0, 1] (the unguided problem is always kept)")
    check_template(template)


def shortest_solving(successes: dict[float, bool], fractions) -> float | None:
    """The smallest fraction whose guided samples had a success (None: none had)."""
    return next((f for f in fractions if successes.get(f)), None)


@registry.group_transform(
    "pope", title=POPE_TITLE,
    summary="Each hard problem (no success in G samples) gets a guided copy: the shortest oracle-solution prefix "
            "(25 / 50 / 75 %) in the prompt with which a sample succeeds; guided and unguided groups both train.",
    equation=r"f^\star = \min\{f : \max_i R(y_i) > 0,\ y_i \sim \pi_\theta(\cdot \mid x \oplus y^\star_{1:f|y^\star|})\}",
    reads=("scores", "group"), needs=("solution",), logs=POPE_LOGS, check=check_pope)
def pope(batch, ctx, *, fractions=POPE_FRACTIONS, template=POPE_TEMPLATE):
    """Reads the verifier's `scores` and `group`; samples guided groups with `ctx.rollout(..., task=HintedTask,
    rewarded=True)`, one call per fraction over the problems still unguided. The guided groups are appended with
    new group ids (after the batch's): the batch grows by G rows per guided problem. fractions = () is GRPO.
    Logs pope/hard_groups, pope/guided_groups, pope/prefix_fraction."""
    n_groups = len(batch.group.unique())
    hard = all_wrong_groups(batch.scores, batch.group)
    searching, guided = list(hard), {}  # group -> (fraction, its G guided samples)
    for fraction in fractions:
        if not searching:
            break
        task = HintedTask(ctx.task, lambda e, f=fraction: solution_hint(solution_actions(ctx.task, e), f), template)
        sampled = ctx.rollout([ctx.examples[g] for g in searching], group_size=ctx.group_size, task=task,
                              rewarded=True)
        for i, g in enumerate(searching):
            rows = sampled.select(torch.nonzero(sampled.group == i).flatten())
            if bool((rows.scores > 0).any()):
                guided[g] = fraction, rows
        searching = [g for g in searching if g not in guided]
    ctx.metrics.update({"pope/hard_groups": len(hard) / n_groups, "pope/guided_groups": len(guided) / n_groups,
                        "pope/prefix_fraction": (sum(f for f, _ in guided.values()) / len(guided) if guided else 0.0)})
    if not guided:
        return batch
    first_new = int(batch.group.max()) + 1
    if first_new == len(ctx.examples):  # group g answers ctx.examples[g]: the copies answer their problem's example
        ctx.examples.extend(ctx.examples[g] for g in guided)
    copies = []
    for i, (_, rows) in enumerate(guided.values()):
        rows.group = torch.full_like(rows.group, first_new + i)
        copies.append(rows)
    return concat([batch, *copies], pad_id=ctx.pad_id)
