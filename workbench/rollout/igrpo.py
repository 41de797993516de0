"""iGRPO: a few exploratory drafts per prompt, the best of them appended to the prompt, and GRPO on the refinements
sampled from that draft-conditioned prompt.

    stage 1: d_1 .. d_{N_d} ~ pi(. | x),  scored by the reward: r(d_j)       drafts: never in the batch, no gradient
             d* = d_{j*},  j* = first argmax_j r(d_j)
    stage 2: x' = x + "\\nPrevious attempt: " + d* + "\\nImprove it."
             y_1 .. y_{G - N_d} ~ pi(. | x'),  trained by GRPO under x'      the group's baseline is over these only
    budget: N_d + (G - N_d) = G samples per prompt, GRPO's; N_d = G / 2 by default

Conditioning on its own best attempt lets the policy start from what it already got right; training the refinements
under the draft-conditioned prompt teaches it to improve a given attempt (the paper conditions the refinement on the
draft, so the prompt the refinements are trained under holds it). With N_d = 0 there is no draft and no appended
text: the rollout is GRPO's `turns`, sample for sample.

Reference: none located (paper arXiv 2602.09000; REFERENCES-AGENTS.md: the "IGRPO" repositories found are other
methods). The split of the budget and the refinement template are not given; this follows the catalog's reading:
N_d = G / 2 drafts and G - N_d refinements, the template "Previous attempt: ... Improve it." appended after the
prompt, drafts excluded from the loss (not in the batch at all, so they also leave the group's baseline alone).

Our choices. The drafts are scored by the task's verifier, the environment's reward (what the recipe trains on when
it adds no reward function, as recipe `igrpo` does not): a rollout runs before the reward stage and cannot call the
recipe's rollout (itself) to be rewarded. Ties go to the first draft. An empty best draft (an answer that is only
EOS) leaves the prompt plain (`HintedTask`: no hint, no text). Greedy rollouts (evaluation, baselines) are plain
`turns`: the draft stage is a training-time exploration.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.rollout.turns import TURNS_PROVIDES, turns
from workbench.tasks.guidance import check_template, hinted_copies

IGRPO_TITLE = "iGRPO: Self-Feedback-Driven LLM Reasoning"
IGRPO_TEMPLATE = "{prompt}\nPrevious attempt: {hint}\nImprove it."  # the catalog's reading

IGRPO_LOGS = {
    "igrpo/draft_reward": ("iGRPO: mean verifier reward of the stage-1 drafts (all N_d per prompt).",
                           "Rises over training as the policy improves; it is GRPO's sample accuracy."),
    "igrpo/best_draft_reward": ("iGRPO: mean verifier reward of the best draft d* of each prompt, the one appended "
                                "to the prompt.",
                                "At or above igrpo/draft_reward (a max); equal to it: the drafts of a prompt agree."),
    "igrpo/refined_reward": ("iGRPO: mean verifier reward of the stage-2 refinements GRPO trains on.",
                             "Above igrpo/best_draft_reward once the policy learns to improve a draft; below it: the "
                             "appended draft confuses the policy."),
}


def draft_count(group_size: int, n_drafts: int | None) -> int:
    """N_d: n_drafts, or half the group (rounded down) when None."""
    return group_size // 2 if n_drafts is None else n_drafts


def check_igrpo(*, n_drafts=None, template=IGRPO_TEMPLATE, group_size=None, **_) -> None:
    """n_drafts None (G / 2) or a whole number >= 0 leaving at least 2 refinements (GRPO's group) in the group size;
    a template with {prompt} and {hint} (the best draft)."""
    if n_drafts is not None and (not isinstance(n_drafts, int) or isinstance(n_drafts, bool) or n_drafts < 0):
        raise ValueError(f"n_drafts={n_drafts!r}: give the number of stage-1 drafts per prompt, a whole number >= 0 "
                         "(0: plain GRPO), or null for half the group")
    if group_size is not None and draft_count(group_size, n_drafts) > 0:
        left = group_size - draft_count(group_size, n_drafts)
        if left < 2:
            raise ValueError(f"n_drafts={draft_count(group_size, n_drafts)} drafts leave {left} refinement(s) in a "
                             f"group of {group_size} (drafts + refinements = group_size); GRPO's baseline needs at "
                             "least 2: lower n_drafts or raise group_size")
    check_template(template)


def best_drafts(rewards: torch.Tensor, n_drafts: int) -> torch.Tensor:
    """Row of each prompt's best draft [n] from rewards [n * N_d] (rows grouped per prompt): the first argmax."""
    per_prompt = rewards.view(-1, n_drafts)  # [n, N_d]
    return torch.arange(per_prompt.shape[0]) * n_drafts + per_prompt.argmax(-1)  # torch.argmax returns the first


@registry.rollout(
    "igrpo", title=IGRPO_TITLE,
    summary="N_d drafts per prompt (half the group) scored by the verifier; the best is appended to the prompt "
            "('Previous attempt: ... Improve it.') and the other G - N_d samples, drawn from that prompt, are the "
            "GRPO group; drafts never enter the batch.",
    equation=r"d^\star = \arg\max_{j \le N_d} r(d_j),\ d_j \sim \pi_\theta(\cdot \mid x);\quad "
             r"y_{1..G-N_d} \sim \pi_\theta(\cdot \mid x \oplus d^\star)\ \text{trained by GRPO}",
    reads=(), provides=TURNS_PROVIDES, logs=IGRPO_LOGS, check=check_igrpo)
def igrpo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, n_drafts=None,
                  template=IGRPO_TEMPLATE):
    """G - N_d rows per example (row i answers examples[i // (G - N_d)]), each sampled from the example's prompt with
    its best of N_d drafts appended by `template` ({prompt}, {hint} = the draft's text); `prompt_ids` are that
    prompt's, so the refinements are trained under it. n_drafts: N_d (None: G // 2; 0: the plain `turns` rollout).
    Logs igrpo/draft_reward, best_draft_reward, refined_reward when given a ctx."""
    check_igrpo(n_drafts=n_drafts, template=template, group_size=None if sampling.greedy else group_size)
    n_d = 0 if sampling.greedy else draft_count(group_size, n_drafts)
    if n_d == 0:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    drafts = turns(engine, task, examples, group_size=n_d, sampling=sampling)  # [n * N_d] rows, grouped per prompt
    best = best_drafts(drafts.rewards, n_d)  # [n]
    conditioned, copies = hinted_copies(task, examples, [drafts.completions[i] for i in best.tolist()], template)
    refined = turns(engine, conditioned, copies, group_size=group_size - n_d, sampling=sampling)
    if ctx is not None:
        ctx.metrics.update({"igrpo/draft_reward": float(drafts.rewards.mean()),
                            "igrpo/best_draft_reward": float(drafts.rewards[best].mean()),
                            "igrpo/refined_reward": float(refined.rewards.mean())})
    return refined
