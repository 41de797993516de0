"""ICPO's in-context steered rollouts: a few of a group's samples are drawn with solved demonstrations in the prompt,
then trained as if the plain prompt had produced them (Implicit Expert Forcing).

    y_1 .. y_{G-n}   ~ pi(. | x)                                       on-policy
    y_{G-n+1} .. y_G ~ pi(. | "Question: d_q\\nAnswer: d_a" ... "Question: x\\nAnswer:")   steered by n_demo solved
                                                                       examples (d_q, d_a) of the same task
    every row is trained under the plain prompt x; the steered rows' tokens are marked in offpolicy_mask, so
    objective:policy-shaping trains them through -A f(pi_theta), f(p) = p / (p + 0.1), with no ratio: their log-probs
    are the demo-free policy's, never those of the prompt that sampled them

The demonstrations make the policy an "implicit expert": it imitates a solved example in context, which reaches
answers it would not sample alone, and the update moves the plain-prompt policy towards them. The expert bonus
(`reward_shaping:icpo`, `workbench/rewards/icpo_bonus.py`) pays correct steered samples more early on.

Reference: Celine-hxy/ICPO @ 287ac4849e8f79cd44033eee638474e6c69e1eb2, `verl/recipe/icpo/trainer/icpo_trainer.py`:
the fit loop (n_on_policy = n - n_off_policy samples plus `process_off_policy_batch` on n_off_policy repeats),
`process_off_policy_batch` (one demonstration per sample from the demo cache, `demo_match_strategy="random"`),
`_reorganize_batch` / `_refill_on_batch_to_off_batch` (the steered rows take an on-policy row's prompt, flag
`hinted = 1`); `verl/recipe/icpo/utils/prompt_builder.py::ICLPromptBuilder.construct_n_shot_prompt` (w_prefix:
"Question: ...\\nAnswer: ...", demonstrations joined by "\\n\\n\\n"); scripts `ICPO_qwen3-1.7b_math-demo-icpo*.sh`
(n_rollout 8, n_off_policy 1, n_demo 1).

Differences. The reference's demo cache is a dataset of solved problems (a cold-start pickle of MATH solutions);
here the demonstrations are other examples of the run's task, drawn from its training distribution with this
component's seeded stream, answered by the task's solution (`Task.expert_actions`, joined). The reference builds
the prompt as one string and then drops its last character (`final_prompt[:-1]`: the space after "Answer:", or on
its chat-template path the template's last character); here the template ends at "Answer:" and a chat template
renders the message as it does every prompt. The steered rows come after the group's on-policy rows (the
reference concatenates all on-policy rows, then all steered rows; GRPO groups by uid either way).
"""
from __future__ import annotations

import random
from dataclasses import replace

import torch

from workbench import registry
from workbench.rewards.icpo_bonus import ICPO_TITLE
from workbench.batch import concat
from workbench.rollout.turns import TURNS_PROVIDES, turns
from workbench.tasks.guidance import HintedTask, solution_actions

ICL_TEMPLATE = "{hint}\n\n\nQuestion: {prompt}\nAnswer:"  # ICLPromptBuilder(w_inst=False, w_prefix=True)


def demonstration(task, example) -> str:
    """One solved example in the reference's format: "Question: {question}\\nAnswer: {answer}"."""
    return f"Question: {example.prompt}\nAnswer: {''.join(solution_actions(task, example))}"


def check_icpo(*, n_off_policy=1, n_demo=1, group_size=None, **_) -> None:
    if n_off_policy < 0 or n_demo < 1:
        raise ValueError(f"n_off_policy={n_off_policy}, n_demo={n_demo}: give n_off_policy >= 0 steered samples per "
                         "group and n_demo >= 1 demonstrations each")
    if group_size is not None and n_off_policy >= group_size:
        raise ValueError(f"n_off_policy={n_off_policy} steered samples leave no on-policy sample in a group of "
                         f"{group_size} (the steered rows take an on-policy row's prompt): set n_off_policy < "
                         "group_size")


@registry.rollout(
    "icpo", title=ICPO_TITLE,
    summary="G - n samples per prompt on-policy and n with solved demonstrations of the task in the prompt; the "
            "steered rows are trained under the plain prompt and marked in offpolicy_mask.",
    equation=r"y_{G-n+1..G} \sim \pi_\theta(\cdot \mid \mathrm{demo} \oplus x),\quad "
             r"\text{trained as } \pi_\theta(y \mid x)\ \text{with}\ m^{\mathrm{off}} = m",
    reads=(), provides=TURNS_PROVIDES + ("offpolicy_mask",), needs=("solution",), check=check_icpo)
def icpo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, n_off_policy=1, n_demo=1):
    """Rows grouped per example: G - n_off_policy samples of the `turns` rollout, then n_off_policy steered ones,
    each with its own n_demo demonstrations drawn from the task (`ctx.rng()`: seeded by run, step and component).
    `offpolicy_mask` [B, T] is 1 on the steered rows' policy tokens. Their `mu_logp` stay the steering prompt's
    (the engine's): policy-shaping uses no ratio there. Greedy rollouts (evaluation, baselines) are plain `turns`."""
    check_icpo(n_off_policy=n_off_policy, n_demo=n_demo, group_size=None if sampling.greedy else group_size)
    n_off = 0 if sampling.greedy else n_off_policy
    plain = turns(engine, task, examples, group_size=group_size - n_off, sampling=sampling)
    plain = replace(plain, offpolicy_mask=torch.zeros_like(plain.mask))
    if n_off == 0:
        return plain
    rng = ctx.rng() if ctx is not None else random.Random(0)
    steered = [steered_samples(engine, task, examples, plain, sampling, rng, n_demo) for _ in range(n_off)]
    both = concat([plain, *steered], pad_id=engine.tokenizer.pad_token_id)
    return both.select(torch.argsort(both.group, stable=True))  # each group's rows together, the steered last


def demonstrations(task, example, n: int, rng: random.Random) -> str:
    """n solved examples of the task drawn from `rng`, joined as one in-context hint; never the example itself (its
    own solution would be the answer, not a demonstration). ICPO's demonstrations and XRPO's exemplars."""
    others = [d for d in task.sample(n + 1, rng) if d.prompt != example.prompt][:n]
    return "\n\n\n".join(demonstration(task, d) for d in others)


def steered_samples(engine, task, examples, plain, sampling, rng: random.Random, n_demo: int):
    """One sample per example with n_demo demonstrations before it, under the group's plain prompt afterwards."""
    demos = {}
    for example in examples:
        demos.setdefault(example, demonstrations(task, example, n_demo, rng))
    out = turns(engine, HintedTask(task, demos.__getitem__, ICL_TEMPLATE), examples, group_size=1, sampling=sampling)
    first = [int(torch.nonzero(plain.group == g)[0]) for g in out.group.tolist()]  # an on-policy row of each group
    return replace(out, prompt_ids=plain.prompt_ids[first], prompt_mask=plain.prompt_mask[first],
                   prompts=[plain.prompts[i] for i in first], offpolicy_mask=out.mask.clone())
