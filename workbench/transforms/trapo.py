"""TraPO's pseudo-label reward: unlabeled prompts are scored against their group's majority answer, never the label.

    a(y)      the answer of a completion: its text, stripped of surrounding whitespace ("" = no answer)
    y*_q      the majority answer of q's group: the most frequent non-empty a(y_i); none when the top count is tied
    r_i       = 1[a(y_i) = y*_q]   (0 for every row when q has no majority answer)

For each group whose example the `trapo` sampler marked unlabeled (`samplers.trapo.SemiExample`, found through
`ctx.examples[group]`), the rows' `rewards` AND `scores` are replaced by r_i before any later stage reads them: the
advantage trains on r, and the sampler's pass-rate curve of q (the pool records `scores`) is its pass rate against
y*_q, as the reference's `unlabel_passrate_list`. The verifier's scores of those rows are read only for the logged
pseudo-label accuracy (the reference logs `majority_is_right` the same way). Groups marked `train=False` (unlabeled
prompts not selected, or before warm-up) keep their rows for the curves but train on nothing: mask 0, as if removed
(the reference drops them from the batch). Labeled groups are left as the verifier scored them.

Decisions: our tasks answer with the final answer alone (no reasoning to parse), so a(y) is the completion's text;
the reference parses a final answer with math_verify and merges equivalent ones (`verify`), which on countdown would
merge equal-valued expressions; here different correct expressions of a countdown target are different answers, so
the majority vote is stricter than the verifier. An empty completion is no answer: it never becomes y*_q, and its
reward is 0 (the reference's unparseable responses join no other answer). Tie: no pseudo-label, reward 0 for the
whole group (the reference's `__NoMajorityAnswer__`), so GRPO gives the group no signal.

Reference: ShenzhiYang2000/TRAPO @ 2cc9ef81fb90382377dbc6e79d6eb501d9ab2d53,
`Weakly_Supervised/Research/Semi_RL/semi_ray_trainer.py` (`_generate_pseudo_labels_and_update_passrate` L567-713).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.group import group_index
from workbench.samplers.trapo import TRAPO_TITLE, SemiExample


def answer_of(completion: str) -> str:
    return completion.strip()


def majority_answer(answers: list[str]) -> str | None:
    """The unique most frequent non-empty answer; None when there is none or the top count is shared."""
    counts = Counter(a for a in answers if a)
    if not counts:
        return None
    top = max(counts.values())
    leaders = [a for a, c in counts.items() if c == top]
    return leaders[0] if len(leaders) == 1 else None


def pseudo_rewards(completions: list[str]) -> tuple[torch.Tensor, str | None]:
    """([n] r_i = 1[a(y_i) = y*], y*) of one group's completions."""
    answers = [answer_of(c) for c in completions]
    label = majority_answer(answers)
    return torch.tensor([float(label is not None and a == label) for a in answers], dtype=torch.float64), label


def unlabeled_metrics(groups: list[tuple], n_groups: int) -> dict:
    """The logged shares (`TRAPO_LOGS`) of the step's unlabeled groups, each (trains, has a pseudo-label, pseudo pass
    rate, pseudo-label verified); a share over no group is not logged."""
    trained = [g for g in groups if g[0]]
    out = {"trapo/unlabeled_groups": len(groups) / max(n_groups, 1)}
    if groups:
        out.update({"trapo/trained_unlabeled": len(trained) / len(groups),
                    "trapo/no_majority": sum(not g[1] for g in groups) / len(groups),
                    "trapo/pseudo_pass_rate": sum(g[2] for g in groups) / len(groups),
                    "trapo/pseudo_label_accuracy": sum(g[3] for g in groups) / len(groups)})
    if trained:
        out["trapo/trained_label_accuracy"] = sum(g[3] for g in trained) / len(trained)
    return out


TRAPO_LOGS = {
    "trapo/unlabeled_groups": ("Share of the step's groups whose prompt is unlabeled (rolled out either way).",
                               "About 1 - labeled (0.5) on average; it varies with the epoch order."),
    "trapo/trained_unlabeled": ("Share of the step's unlabeled groups that train (selected by their trajectory).",
                                "0 before warm_up, then at least top-k's share; rising as curves converge."),
    "trapo/no_majority": ("Share of the step's unlabeled groups whose top answer count is tied (no pseudo-label).",
                          "Falls as the policy's answers agree; near 1: the group's answers are all different."),
    "trapo/pseudo_pass_rate": ("Mean share of an unlabeled group's rows that give its majority answer.",
                               "Rises towards 1 as the policy sharpens; a rise with falling accuracy is collapse."),
    "trapo/pseudo_label_accuracy": ("Share of the step's unlabeled groups whose majority answer the verifier accepts "
                                    "(diagnostic only: never a training signal).",
                                    "Rises with training; far below accuracy: majority votes are unreliable."),
    "trapo/trained_label_accuracy": ("The same accuracy over the unlabeled groups that train.",
                                     "Above trapo/pseudo_label_accuracy if the trajectory selection works."),
}


@registry.group_transform(
    "trapo", title=TRAPO_TITLE,
    summary="Majority-vote rewards for the groups of unlabeled prompts (1 for rows giving the group's unique most "
            "frequent answer, 0 for all when it is tied), written over their rewards and scores so that no label of "
            "an unlabeled prompt trains or enters its curve; unlabeled groups the `trapo` sampler did not select "
            "are masked out of the update.",
    equation=r"r_i = \mathbb{1}\big[a(y_i) = \arg\max_a \#\{j : a(y_j) = a\}\big]\ \text{(unique max, else 0)}",
    reads=("rewards", "scores", "completions", "group"), logs=TRAPO_LOGS)
def trapo(batch, ctx):
    """Pseudo-label rewards for unlabeled groups; untrained groups masked; labeled groups untouched."""
    batch.require("rewards", "scores")
    if len(batch.completions) != batch.size:
        raise ValueError(f"trapo votes on the completions' answers: batch.completions has {len(batch.completions)} "
                         f"entries for {batch.size} rows")
    rewards, scores, keep = batch.rewards.clone(), batch.scores.clone(), torch.ones(batch.size, dtype=torch.bool)
    dense, counts = group_index(batch.group)
    unlabeled = []  # per unlabeled group: (trains, has a pseudo-label, pseudo pass rate, pseudo-label verified)
    for g in range(len(counts)):
        rows = torch.nonzero(dense == g).flatten()
        example = ctx.examples[int(batch.group[rows[0]])]
        if not isinstance(example, SemiExample) or example.labeled:
            continue
        r, label = pseudo_rewards([batch.completions[i] for i in rows.tolist()])
        verified = label is not None and bool(batch.scores[rows][r > 0].min() >= 1.0)  # logged, never trained on
        rewards[rows], scores[rows], keep[rows] = r.to(rewards.dtype), r.to(scores.dtype), example.train
        unlabeled.append((example.train, label is not None, float(r.mean()), verified))
    ctx.metrics.update(unlabeled_metrics(unlabeled, len(counts)))
    return replace(batch, rewards=rewards, scores=scores, mask=batch.mask * keep.to(batch.mask.dtype)[:, None])
