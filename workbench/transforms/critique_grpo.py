"""Critique-GRPO: every sampled response gets a critique and a refinement conditioned on it; the best refinement joins
the group, trained under the plain question through -A p/(p + 0.1).

    y_1 .. y_n ~ pi(. | q)                    the group as sampled, scored by the verifier: R(y_i)
    c_i = "The generated solution is {correct if R(y_i) > 0 else incorrect}, the ground truth is {y*}."
    z_i ~ pi(. | refine(q, y_i, c_i))          one refinement per initial response, scored by the same verifier
    z*  = the first z_i with R(z_i) = 1, else the first argmax_i R(z_i)        (one per group)
    the group's first n_refine rows <- z*, trained as pi(z* | q): the plain question, tokens in offpolicy_mask
    A_i = R_i - mean_group R                                                    no std (advantage:grpo, scale="none")
    l_t = max(-A r_t, -A clip(r_t, 1 - eps, max(clip_upper_bound, 1 + eps)))   initial tokens
    l_t = -A f(pi_theta(z_t)),  f(p) = p / (p + 0.1)                            refinement tokens: no ratio, no clip
    token mean over the batch                                                   (objective:policy-shaping)

A scalar reward says that a response failed, not why; a critique says more, and a policy that cannot solve a
problem alone often can after reading one. Training the refinement under the plain question moves pi(. | q) towards
what the critique made reachable; f(p) = p / (p + 0.1) keeps a large gradient on its low-probability tokens, the
ones the policy would not have sampled (gradient weight 0.1 p (1 - p) / (p + 0.1)^2 per logit).

The critique. The reference's code knows three types (`critique_prompts.py`; the repository's figure
Three_types_of_critique.png): "simple" (indicative: correct or incorrect), "simple_gt" (the same plus the ground-truth
answer) and "text" (a chain-of-thought critique by GPT-4o comparing the response with the reference solution; the
released checkpoint's name, "..._self_critique_1", says the policy critiqued itself there). The one released training
script uses "simple_gt" (`CRITIQUE_TYPE`, L46), the default here; `critique="simple"` is the indicative one. Both are
computed from the verifier's score and the example, without a critique model; a chain-of-thought critique needs one
and is not provided. What a critique reveals: whether the response is correct (score > 0, the reference's test) and,
with ground truth, the task's solution (`Task.expert_actions` joined: a one-turn task's target, e.g. "146" for
"49+97=", the reference answer the reference's critique quotes); never where the response went wrong.

Reference: zhangxy-2019/critique-GRPO @ e8f03a20b49511e10e71f361c70e46aae3ae8753, `verl/verl/critique_grpo/`:
`critique_prompts.py::generate_critique` (L85-135, "simple_gt" / "simple"), `refinement_prompts.py::refine_prompt`
(L17-30, the refinement prompt, wrapped in a chat template with the system prompt "You are a helpful assistant." by
`generate_refinement` L33-50), `critique_vllm_rollout_spmd.py::CRITIQUEvLLMRollout.generate_sequences` (L252-640:
a critique and one refinement, n = 1, for each of the n initial responses, L350-446; `process_refinement_groups`
L61-97 picks one per group; the first `n_prefix` rows of the group take it, L560-605, with `prefix_mask` on its
tokens and the group's plain prompt `idx`), `critique_core_algos.py::compute_grpo_outcome_advantage` (L113-167) and
`compute_token_on_off_policy_loss` (L504-692, the `prefix_mask` tokens trained by `off_policy_reshape="p_div_p_0.1"`);
script `verl/examples/grpo_trainer/run_open_r1_math4k-qwen3-8b-base-critique_simple_gt_online.sh` (n = 8, clip 0.2,
entropy 0.001, no KL, `grpo_use_std=False`). tests/anchors/formulas_critique_grpo.py transcribes them.

Differences, and quirks of the reference:
- n_refine = 1 refinement per group (7 initial responses + 1, the run's name "rollout7_critique_1" and the released
  model's). The released config leaves `n_prefix = -1`, whose branch (L570-571) gives every row of the group the
  selected refinement: all n rows identical, all advantages 0. With n_refine > 1 the reference, and this, put the
  same selected refinement in n_refine rows.
- The reference decodes the refinement, re-tokenizes it and appends EOS (L523-556), so a refinement cut at the
  length limit gets an EOS it never sampled; here the sampled tokens are kept as they are.
- Advantage: the script's `algorithm.grpo_use_std=False` is read by nothing; the trainer passes
  `norm_adv_by_std_in_grpo` (default True, critique_ray_trainer.py L1025), so the released run divides by the group
  std. This follows the paper and the script's intent (no std), as the catalog does.
- Loss: the script also sets `loss_remove_clip=True` (no clip on initial tokens) and `loss_remove_token_mean=True`
  (sum over the micro-batch / response length); the catalog's (and the function's default) clipped token mean is
  used here.
- Scores: the reference scores initial responses and refinements for the critique and the selection with math-verify
  and trains on its reward function's scores; here both are the task's verifier (`scores`), and the refinement's
  reward is the recipe's (`ctx.rollout(..., rewarded=True)`).
- The reference's rollout module imports its prompts from `verl.mix_src`, which the repository does not ship; the
  `critique_grpo/` copies are the ones transcribed.
- Template: the component's default is the reference's prompt verbatim (`REFINE_TEMPLATE`, about 420 characters of
  instructions); the recipe uses `COMPACT_TEMPLATE` (the same fields and labels, the question last, where the tiny
  character model's answer follows it as in the plain prompt), since the tiny model's 256 positions cannot hold
  the reference's.

Why a group transform and not a rollout: the critique is a function of the verifier's score of each initial
response and the selection of each refinement's, which a group transform reads after the reward stage (`scores`),
and `ctx.rollout(..., rewarded=True)` samples the refinements with the recipe's own rollout and rewards them as the
batch's rows are; a rollout sees neither the reward stage nor, through `ctx.rollout`, anything but itself.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import concat, replace_rows
from workbench.tasks.guidance import check_template, hinted_copies, solution_actions
from workbench.transforms.scaf_grpo import winning_row

CRITIQUE_GRPO_TITLE = "Critique-GRPO: Advancing LLM Reasoning with Natural Language and Numerical Feedback"

# critique_prompts.py::generate_critique, (incorrect, correct) by critique type
CRITIQUES = {
    "simple_gt": ("The generated solution is incorrect, the ground truth is {answer}.",
                  "The generated solution is correct, the ground truth is {answer}."),
    "simple": ("The generated solution is incorrect.", "The generated solution is correct."),
}
# refinement_prompts.py::refine_prompt verbatim (its f-string's indentation included), question as {prompt} and the
# "**Previous Solution**" / "**Critique**" lines as {hint} (`FEEDBACK`)
REFINE_TEMPLATE = ("Given the following inputs:\n"
                   "        **Question**: {prompt}\n"
                   "        {hint}\n"
                   "\n"
                   "        Please re-answer by:\n"
                   "        - Correcting potential errors identified in the critique, if they exist.\n"
                   "        - Providing clear, step-by-step reasoning.\n"
                   "        - Formatting the final answer as `\\boxed{{answer}}`.\n"
                   "\n"
                   "        Ensure the revised solution addresses all issues raised in the critique.")
FEEDBACK = "**Previous Solution**: {response}\n{indent}**Critique**: {critique}"
COMPACT_TEMPLATE = "{hint}\n**Question**: {prompt}"  # the reference's fields and labels, the question last

CRITIQUE_LOGS = {
    "critique/initial_correct": ("Critique-GRPO: share of the initial responses the verifier scores correct (> 0).",
                                 "Rises over training as GRPO would; compare with critique/refined_correct."),
    "critique/refined_correct": ("Critique-GRPO: share of the sampled refinements (one per initial response) scored "
                                 "correct; 0 when none is sampled.",
                                 "Above critique/initial_correct: critiques help. With the ground truth in the "
                                 "critique it should near 1 once the policy copies it; at or below the initial "
                                 "share: the policy ignores the critique."),
    "critique/fixed": ("Critique-GRPO: share of the wrong initial responses whose refinement is correct (0 without a "
                       "wrong one).",
                       "The critique's rescue rate: rises early; stuck at 0: refinements never recover a failure."),
    "critique/selected_correct": ("Critique-GRPO: share of groups whose selected refinement (the one trained on) is "
                                  "correct; 0 when none is sampled.",
                                  "Near 1 once any of a group's refinements succeeds; low: the groups mostly train "
                                  "on a wrong refinement with a negative advantage."),
}


def check_critique_grpo(*, critique="simple_gt", n_refine=1, template=REFINE_TEMPLATE, group_size=None, **_) -> None:
    """A known critique type, 0 <= n_refine < group_size (an initial response must stay: with every row the same
    refinement all advantages are 0), and a template with {prompt} and {hint}."""
    if critique not in CRITIQUES:
        raise ValueError(f"critique={critique!r}: give one of {sorted(CRITIQUES)} (the reference's critique types "
                         "computed from the verifier)")
    if not isinstance(n_refine, int) or isinstance(n_refine, bool) or n_refine < 0:
        raise ValueError(f"n_refine={n_refine!r}: give the number of rows per group the selected refinement takes, "
                         "a whole number >= 0 (1: the reference's n_prefix; 0: plain GRPO)")
    if group_size is not None and n_refine >= group_size:
        raise ValueError(f"n_refine={n_refine} refinement rows leave no initial response in a group of {group_size} "
                         "(every row the same refinement: all advantages 0): set n_refine < group_size")
    check_template(template)


def critique_text(score: float, solution: str, critique: str) -> str:
    """The critique of a response the verifier scored `score`: correct iff score > 0 (`generate_critique`), with the
    ground truth `solution` when the type quotes it."""
    return CRITIQUES[critique][int(score > 0)].format(answer=solution)


def feedback_text(response: str, critique: str, template: str) -> str:
    """The "**Previous Solution**" and "**Critique**" lines, the second indented as the template's {hint} line (the
    reference's prompt indents all its lines by 8 spaces)."""
    line = template.split("{hint}")[0].rsplit("\n", 1)[-1]
    return FEEDBACK.format(response=response, critique=critique, indent=line if not line.strip() else "")


def select_refinement(scores: list[float]) -> int:
    """Index of the refinement that joins the group: the first scoring exactly 1, else the first of the highest
    (`process_refinement_groups`)."""
    perfect = [i for i, s in enumerate(scores) if s == 1.0]
    return perfect[0] if perfect else max(range(len(scores)), key=scores.__getitem__)


@registry.group_transform(
    "critique-grpo", title=CRITIQUE_GRPO_TITLE,
    summary="Each sampled response gets a critique from the verifier (correct or not, and the ground truth) and one "
            "refinement conditioned on question, response and critique; the first correct refinement of a group "
            "replaces its first row, trained under the plain question and marked in offpolicy_mask.",
    equation=r"z_i \sim \pi_\theta(\cdot \mid q, y_i, c_i),\quad z^\star = \mathrm{first}\,\arg\max_i R(z_i),\quad "
             r"y_{g,1} \leftarrow z^\star\ \text{trained as}\ \pi_\theta(z^\star \mid q),\ m^{\mathrm{off}} = m",
    reads=("scores", "group"), provides=("offpolicy_mask",), needs=("solution",), logs=CRITIQUE_LOGS,
    check=check_critique_grpo, choices={"critique": tuple(CRITIQUES)})
def critique_grpo(batch, ctx, *, critique="simple_gt", n_refine=1, template=REFINE_TEMPLATE):
    """Reads the verifier's `scores` [B] and `group`; samples one refinement per row through `ctx.rollout(copies,
    group_size=1, task=HintedTask, rewarded=True)` (one call for the batch; a copy of the example per row so that each
    opens with its own response and critique), rewarded as the batch's own rows. critique: "simple_gt" (with the
    ground truth, the released script's) or "simple"; n_refine: rows per group the selected refinement takes (the
    reference's n_prefix, 1; 0 samples nothing: plain GRPO); template: where the question ({prompt}) and the
    response-and-critique lines ({hint}) go, the reference's prompt by default. Returns the batch with
    `offpolicy_mask` [B, T]: 0 on initial rows (kept if a rollout set it), the policy mask on refinement rows, whose
    prompt is the group's plain one. Their `mu_logp` stay the refinement prompt's: policy-shaping uses no ratio there,
    so don't combine with rollout importance correction. Logs critique/initial_correct, refined_correct, fixed,
    selected_correct."""
    check_critique_grpo(critique=critique, n_refine=n_refine, template=template)
    if batch.offpolicy_mask is None:
        batch = replace(batch, offpolicy_mask=torch.zeros_like(batch.mask))
    if n_refine == 0:
        ctx.metrics.update(refinement_metrics(batch.scores))
        return batch
    refined = sample_refinements(batch, ctx, critique, template)  # row i refines row i
    groups = [torch.nonzero(batch.group == g).flatten() for g in batch.group.unique().tolist()]  # each group's rows
    chosen = torch.stack([rows[select_refinement(refined.scores[rows].tolist())] for rows in groups])  # [n_groups]
    places = [(int(k), row) for rows, k in zip(groups, chosen) for row in rows[:n_refine].tolist()]  # (z*, row)
    new = concat([refinement_row(refined, k, batch, row) for k, row in places], pad_id=ctx.pad_id)
    ctx.metrics.update(refinement_metrics(batch.scores, refined.scores, chosen))
    return replace_rows(batch, [row for _, row in places], new, pad_id=ctx.pad_id)


def refinement_metrics(initial: torch.Tensor, refined: torch.Tensor | None = None,
                       chosen: torch.Tensor | None = None) -> dict[str, float]:
    """The logged shares from the initial responses' scores [B], their refinements' [B] (None: none sampled) and the
    selected refinements' rows [n_groups]."""
    none = refined is None
    return {"critique/initial_correct": share(initial > 0),
            "critique/refined_correct": 0.0 if none else share(refined > 0),
            "critique/fixed": 0.0 if none else share(refined[initial <= 0] > 0),
            "critique/selected_correct": 0.0 if none else share(refined[chosen] > 0)}


def share(flags: torch.Tensor) -> float:
    """Fraction of True in `flags`, 0 when empty."""
    return float(flags.float().mean()) if flags.numel() else 0.0


def sample_refinements(batch, ctx, critique: str, template: str):
    """One refinement per row of `batch` (row i of the result refines row i), sampled under the refinement prompt of
    the row's question, response and critique, and rewarded by the recipe's reward stage."""
    examples = [ctx.examples[g] for g in batch.group.tolist()]
    solutions = {id(e): "".join(solution_actions(ctx.task, e)) for e in ctx.examples}
    hints = [feedback_text(response, critique_text(float(s), solutions[id(e)], critique), template)
             for response, s, e in zip(batch.completions, batch.scores.tolist(), examples)]
    task, copies = hinted_copies(ctx.task, examples, hints, template)
    return ctx.rollout(copies, group_size=1, task=task, rewarded=True)


def refinement_row(refined, k: int, batch, row: int):
    """Refinement k in the place of `row`: the row's group and plain prompt (the reference's `idx`), every policy
    token marked off-policy (the reference's `prefix_mask`)."""
    out = winning_row(refined.select(torch.tensor([k])), batch, row, plain=True)
    return replace(out, offpolicy_mask=out.mask.clone())
