"""GHPO: a group whose G samples all fail is sampled again with the start of its solution as a hint, more each stage.

    for omega in (0.25, 0.5, 0.75):
        failed = groups whose verifier scores are all <= 0
        re-roll each failed group (G samples) on  prompt + hint sentence + solution[:round(omega * len(solution))]
        the hinted samples replace the group's rows (prompt included: GRPO trains on the hinted prompt)

A prompt the policy cannot solve alone contributes nothing to GRPO (all rewards equal, A = 0); a hint long enough
to let one sample succeed turns it into a learning signal, and the shortest such hint is found by escalation (a
self-paced curriculum: as the policy improves, fewer prompts need hints, and shorter ones).

Reference: hkgc-1/GHPO `src/ghpo/ghpo_trainer.py::_generate_and_score_completions` (commit af0a7dd; the stages
"add 25/50/75 hint", the hint sentence, `round(len(solution_hint) * omega)` characters). Two things of the reference
not reproduced (REFERENCES-AGENTS.md): when a later stage re-rolls any group it re-encodes every other row's prompt
from the plain one, so a group solved at 25 % trains on its hinted samples under the plain prompt (here a group
keeps the prompt it was sampled with, as the paper describes; tests/anchors/test_ghpo.py shows the difference);
and under several processes, one with no all-wrong group while another has one re-generates its first group
without a hint (one process never does). `hint_ratio` of the reference's config is unused by
its trainer (the fractions are hard-coded), so it has no counterpart.

At toy scale the solution is the task's exact one (`Task.expert_actions`: the target answer, or the expert's
actions joined), not a worked derivation.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import replace_groups
from workbench.tasks.guidance import (GHPO_TEMPLATE, HintedTask, check_fraction, check_template, solution_actions,
                                      solution_hint)

GHPO_TITLE = "GHPO: Adaptive Guidance for Stable and Efficient LLM Reinforcement Learning"
GHPO_FRACTIONS = (0.25, 0.5, 0.75)

GHPO_LOGS = {
    "ghpo/hinted_groups": ("GHPO: share of the step's groups re-sampled with a hint (all G samples failed without).",
                           "Falls over training as the policy solves more prompts alone. Stuck at 1: even hinted, "
                           "nothing is learnt; 0 from the start: no prompt needed help (plain GRPO)."),
    "ghpo/hint_fraction": ("GHPO: mean hint length (fraction of the solution) the step's groups were trained with, "
                           "0 for unhinted groups.",
                           "Falls with ghpo/hinted_groups; a rise means prompts got harder to solve alone."),
    "ghpo/unsolved_groups": ("GHPO: share of groups still all-wrong after the longest hint.",
                             "Below ghpo/hinted_groups: hints rescue some groups. Equal to it: hints never help "
                             "(the model ignores them, or the hint is too short)."),
}


def check_ghpo(*, fractions=GHPO_FRACTIONS, template=GHPO_TEMPLATE, start_step=0, **_) -> None:
    """Fractions in [0, 1] and increasing (escalation), a template with {prompt} and {hint}, start_step >= 0."""
    values = [check_fraction("fractions", f) for f in fractions]
    if not values or values != sorted(set(values)):
        raise ValueError(f"fractions={tuple(fractions)!r} are the hint stages: give increasing fractions in [0, 1], "
                         "e.g. (0.25, 0.5, 0.75)")
    check_template(template)
    if start_step < 0:
        raise ValueError(f"start_step={start_step} is the first step that hints: give a step >= 0")


def all_wrong_groups(scores: torch.Tensor, group: torch.Tensor) -> list[int]:
    """Ids (ascending) of the groups whose scores [B] are all <= 0 (the reference's `accuracy_reward <= 0`)."""
    ids = group.unique()
    return [int(g) for g in ids if bool((scores[group == g] <= 0).all())]


@registry.group_transform(
    "ghpo", title=GHPO_TITLE,
    summary="Groups whose samples all fail are re-sampled with the first 25 %, then 50 %, then 75 % of the "
            "solution's characters appended to the prompt; the hinted samples replace the group.",
    equation=r"x' = x \oplus \text{hint} \oplus y^\star_{1:\mathrm{round}(\omega |y^\star|)},\quad "
             r"\omega \in \{0.25, 0.5, 0.75\}\ \text{while}\ \max_i R_i \le 0",
    reads=("scores", "group"), needs=("solution",), logs=GHPO_LOGS, check=check_ghpo)
def ghpo(batch, ctx, *, fractions=GHPO_FRACTIONS, template=GHPO_TEMPLATE, start_step=0):
    """Reads the verifier's `scores` [B] and `group`; re-samples through `ctx.rollout(..., task=HintedTask,
    rewarded=True)`, so hinted rows are rewarded as the batch's own. fractions: the hint stages (the reference's
    0.25 / 0.5 / 0.75); template: where the hint goes (`{prompt}`, `{hint}`; default the reference's sentence);
    start_step: steps before it are plain GRPO (the reference's `start_hint_step`, 0 in its config).
    Logs ghpo/hinted_groups, ghpo/hint_fraction and ghpo/unsolved_groups (shares of the step's groups)."""
    n_groups = len(batch.group.unique())
    used = dict.fromkeys(batch.group.unique().tolist(), 0.0)  # group -> hint fraction it was last sampled with
    failed = all_wrong_groups(batch.scores, batch.group) if ctx.step >= start_step else []
    for fraction in fractions:
        if not failed:
            break
        examples = [ctx.examples[g] for g in failed]
        task = HintedTask(ctx.task, lambda e, f=fraction: solution_hint(solution_actions(ctx.task, e), f), template)
        hinted = ctx.rollout(examples, group_size=ctx.group_size, task=task, rewarded=True)
        hinted.group = torch.tensor(failed)[hinted.group]  # back to the batch's group ids
        batch = replace_groups(batch, hinted, pad_id=ctx.pad_id)
        used.update(dict.fromkeys(failed, fraction))
        failed = all_wrong_groups(batch.scores, batch.group)
    hinted_groups = [g for g, f in used.items() if f > 0]
    ctx.metrics.update({"ghpo/hinted_groups": len(hinted_groups) / n_groups,
                        "ghpo/hint_fraction": sum(used.values()) / n_groups,
                        "ghpo/unsolved_groups": len([g for g in hinted_groups if g in failed]) / n_groups})
    return batch
