"""SRPO's routes and self-teacher: which rows distil, and the teacher's next-token distribution on their own tokens.

    c_i   = 1[score_i >= threshold]                         correct (the verifier's score; threshold 1)
    j(i)  = the first correct row of i's group, in batch order (none: m_i = 0)
    route_i = 0 if c_i;  1 if not c_i and j(i) exists (z_i = 1);  2 otherwise (GRPO fallback)
    x'_i  = template(prompt = x_i, hint = y_{j(i)})          the same prompt with the correct sibling's text in it
    q_t   = softmax(f_theta_old(x'_i, y_{i,<t}) / temperature)  [V] at every response position t of row i, no gradient
    teacher_logp_i,t = log q_t (the whole vocabulary, or its top K), teacher_entropy_i,t = H(q_t)

The objective `srpo-route` (`workbench/objectives/srpo_route.py`) trains route-1 rows towards q by the forward KL and
the others by GRPO. This transform runs after the reward stage (it reads the verifier's `scores`) and before the
update, where the policy is still the one that sampled: `ctx.vocab_logp` (the trainer's `vocab_logp`) scores the
teacher rows with it, in chunks of CHUNK_ROWS rows, so one call holds CHUNK_ROWS x T x V floats at most.

Source: huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8, `trl/experimental/sdpo/sdpo_trainer.py`,
`SuccessfulRolloutTeacherContextBuilder.build` (a row's teacher is the first successful row of its group,
`successful[0]`, success meaning reward >= `success_reward_threshold` = 1.0; the teacher input is the reprompt
followed by the row's own completion ids) and `sdpo_config.py`: TEACHER_TEMPLATE is `reprompt_template`
("{prompt}{solution}{feedback}" + a last line "Correctly solve the original question.") with `solution_template`
("Correct solution:" and the successful attempt, between blank lines) in {solution}, the sibling's text as {hint},
and no environment feedback (`include_environment_feedback=False`, TRL's default).

Choices, and why:
- Only failed rows get a teacher (z_i = (1 - c_i) m_i): a correct row is GRPO's whatever its siblings. TRL's
  `dont_reprompt_on_self_success` skips a row as its own demonstration; a failed row never is one.
- Correct is the verifier's `scores` >= threshold, not the shaped `rewards`: routing is by correctness, as the
  trainer's `accuracy` counts it (scores >= 1).
- The teacher prompt is `HintedTask(task, sibling, template).opening(example)`: the task's opening for the row's
  example, its last user message filled into the template (a chat model's system prompt and template are kept), then
  encoded as the rollout encodes prompts (`encode_prompts`). For a multi-turn environment whose opening depends on
  the episode's seed, the teacher sees the example's opening (`Task.opening`).
- A teacher prompt whose tokens with the row's T response positions exceed the model's positions
  (`engine.max_length`) is not cut (a cut context is another teacher): that row falls back to GRPO, counted in
  srpo/teacher_cut. TRL keeps the last `max_reprompt_len` tokens instead.
- Storage: `topk` = 0 keeps the whole vocabulary (K = V, the exact forward KL; memory in the objective's docstring);
  topk = K > 0 keeps the teacher's K most likely ids (`teacher_ids`) for a large vocabulary. The entropy is always
  the whole vocabulary's, taken before the cut. A batch with no teacher row stores K = 0 columns.
- Any rollout engine works: the teacher pass is the trainer's own forward (`ctx.vocab_logp`), not the engine's.
  Under data parallelism every rank runs as many teacher forwards as the busiest one (FSDP's forward is a
  collective), a rank with nothing left scoring one row and discarding it.
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.objectives.srpo_route import GRPO_CORRECT, GRPO_FALLBACK, SDPO, SRPO_TITLE
from workbench.rollout.engine import encode_prompts
from workbench.tasks.guidance import HintedTask, check_template

# sdpo_config.py `reprompt_template` with `solution_template` in {solution} (the sibling as {hint}), no feedback
TEACHER_TEMPLATE = "{prompt}\nCorrect solution:\n\n{hint}\n\n\n\nCorrectly solve the original question.\n"
CHUNK_ROWS = 8  # teacher rows per forward: 8 x T x V floats (400 MB on SmolLM2 at T = 256)

TEACHER_LOGS = {
    "srpo/route_correct": ("SRPO: share of rows routed to GRPO because the verifier accepts them.",
                           "The sampled accuracy; rises with training."),
    "srpo/route_distill": ("SRPO: share of rows routed to self-distillation (failed, with a correct sibling as "
                           "teacher).",
                           "Largest while the policy solves some samples of a prompt but not all; 0 when no group "
                           "mixes right and wrong answers (a task far too hard or already solved)."),
    "srpo/route_fallback": ("SRPO: share of rows routed to the GRPO fallback (failed, no correct sibling or a teacher "
                            "context too long).",
                            "The failed rows of all-wrong groups: falls as the task is learnt."),
    "srpo/teacher_cut": ("SRPO: share of rows that had a correct sibling but whose teacher prompt with the response "
                         "exceeds the model's positions (routed to the fallback).",
                         "0. Above 0: shorten the template or max_new_tokens."),
}


def check_teacher(*, template=TEACHER_TEMPLATE, topk=0, threshold=1.0, **_) -> None:
    """A template with {prompt} and {hint}, a whole topk >= 0 and a finite threshold."""
    check_template(template)
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 0:
        raise ValueError(f"topk={topk!r}: give how many of the teacher's most likely ids to keep per position, a whole "
                         "number >= 0 (0: the whole vocabulary, the exact forward KL)")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"threshold={threshold!r}: give the verifier score from which a sample is correct, a finite "
                         "number (1.0)")


def routes(correct: torch.Tensor, group: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(route [B] long, sibling [B] long) from `correct` [B] bool and `group` [B]: route 0 for a correct row, 1 for a
    failed row whose group has a correct row (sibling: the first, in batch order), 2 for the others (sibling -1)."""
    sibling = torch.full_like(group, -1)
    for g in group.unique().tolist():
        rows = torch.nonzero(group == g).flatten()
        right = rows[correct[rows]]
        if len(right):
            sibling[rows[~correct[rows]]] = right[0]
    route = torch.where(correct, GRPO_CORRECT, torch.where(sibling >= 0, SDPO, GRPO_FALLBACK))
    return route.long(), sibling


def teacher_prompts(task, examples: list, batch: RolloutBatch, rows: list[int], sibling: torch.Tensor,
                    template: str) -> list:
    """Each row's prompt with its correct sibling's text as the hint (a string or chat messages, as the task opens)."""
    out = []
    for i in rows:
        text = batch.completions[int(sibling[i])]
        out.append(HintedTask(task, lambda _example, hint=text: hint, template).opening(examples[int(batch.group[i])]))
    return out


def teacher_rows(batch: RolloutBatch, rows: list[int], prompt_ids, prompt_mask) -> RolloutBatch:
    """Rows `rows` of the batch, their own response tokens and mask, under the teacher's prompts [n, P']."""
    index = torch.tensor(rows, dtype=torch.long, device=batch.response_ids.device)
    return RolloutBatch(response_ids=batch.response_ids[index], mask=batch.mask[index], group=batch.group[index],
                        prompt_ids=prompt_ids, prompt_mask=prompt_mask)


def fits(prompt_mask: torch.Tensor, width: int, limit: int | None) -> torch.Tensor:
    """[n] bool: the teacher prompt's tokens plus the `width` response positions fit the model's `limit`."""
    if limit is None:
        return torch.ones(prompt_mask.shape[0], dtype=torch.bool, device=prompt_mask.device)
    return prompt_mask.sum(-1) + width <= limit


def lockstep(ctx, rounds: int, device) -> tuple[int, int]:
    """(ranks, the most teacher rounds any rank runs): under data parallelism every rank joins each round."""
    counts = ctx.gather(torch.tensor([rounds], device=device))              # [world]
    return len(counts), int(counts.max())


def teacher_chunk(ctx, batch: RolloutBatch, rows: list[int], sibling: torch.Tensor, template: str):
    """(rows kept, their teacher batch or None, rows cut): `rows` under their teacher prompts, encoded as the rollout
    encodes a prompt; a row whose teacher prompt and T response positions exceed the model's positions is cut."""
    if not rows:
        return [], None, []
    prompts = teacher_prompts(ctx.task, ctx.examples, batch, rows, sibling, template)
    prompt_ids, prompt_mask = encode_prompts(ctx.engine.tokenizer, prompts, batch.response_ids.device)
    room = fits(prompt_mask, batch.mask.shape[1], getattr(ctx.engine, "max_length", None))
    kept = [r for r, ok in zip(rows, room.tolist()) if ok]
    cut = [r for r, ok in zip(rows, room.tolist()) if not ok]
    return kept, teacher_rows(batch, kept, prompt_ids[room], prompt_mask[room]) if kept else None, cut


def teacher_distribution(logp: torch.Tensor, mask: torch.Tensor, topk: int):
    """(log-probs [n, T, K], ids [n, T, K] or None, entropy [n, T]) of the teacher's log-probs `logp` [n, T, V]: the
    whole vocabulary (topk = 0 or >= V) or its top K; 0 off the mask."""
    entropy = ops.entropy_from_logits(logp) * mask                            # H of softmax(log q) = H(q)
    if not 0 < topk < logp.shape[-1]:
        return logp, None, entropy
    top, ids = logp.topk(topk, dim=-1)
    return top * mask[..., None], ids, entropy


@registry.group_transform(
    "srpo-route", title=SRPO_TITLE,
    summary="Routes each row (correct: GRPO; failed with a correct sibling: self-distillation; failed without: GRPO) "
            "and scores the self-distilled rows' own tokens with the policy before the update, its prompt holding "
            "the first correct sibling's text: the teacher's next-token log-probs and entropy at every position.",
    equation=r"z_i = (1 - c_i)\,m_i,\quad q_{i,t} = \mathrm{sg}\,\pi_{\theta_{\mathrm{old}}}(\cdot \mid "
             r"\mathrm{template}(x_i, y_{j(i)}),\, y_{i,<t})",
    reads=("scores", "completions"), provides=("route", "teacher_logp", "teacher_ids", "teacher_entropy"),
    logs=TEACHER_LOGS, check=check_teacher)
def srpo_teacher(batch: RolloutBatch, ctx, *, template=TEACHER_TEMPLATE, topk=0, threshold=1.0):
    """Reads the verifier's `scores` [B], `group`, `completions` and the step's examples; fills `route` [B],
    `teacher_logp` [B, T, K], `teacher_ids` (None for the whole vocabulary) and `teacher_entropy` [B, T] (0 on rows
    that do not distil). template: where the prompt ({prompt}) and the sibling's text ({hint}) go, TRL's SDPO
    reprompt by default; topk: 0 keeps the whole vocabulary, K > 0 the teacher's K most likely ids; threshold: the
    score from which a row is correct. Logs the routes' shares and srpo/teacher_cut."""
    check_teacher(template=template, topk=topk, threshold=threshold)
    if ctx.vocab_logp is None or ctx.engine is None:
        raise ValueError("srpo-route's teacher pass needs the trainer's step context (ctx.vocab_logp scores the "
                         "teacher rows, ctx.engine.tokenizer encodes their prompts): run it in a recipe")
    route, sibling = routes(batch.scores >= threshold, batch.group)
    B, T = batch.mask.shape
    cut = torch.zeros(B, dtype=torch.bool, device=route.device)             # [B] teacher context too long
    logp, ids, entropy = None, None, torch.zeros(B, T, device=batch.mask.device)
    wanted = torch.nonzero(route == SDPO).flatten().tolist()
    chunks = [wanted[s:s + CHUNK_ROWS] for s in range(0, len(wanted), CHUNK_ROWS)]
    world, rounds = lockstep(ctx, len(chunks), batch.mask.device)
    for k in range(rounds):
        kept, chunk, too_long = teacher_chunk(ctx, batch, chunks[k] if k < len(chunks) else [], sibling, template)
        cut[too_long] = True
        if chunk is None:
            if world > 1 and B:  # FSDP's forward is a collective: every rank runs one per round, this one on row 0
                ctx.vocab_logp(batch.select(torch.zeros(1, dtype=torch.long, device=batch.mask.device)))
            continue
        top, top_ids, H = teacher_distribution(ctx.vocab_logp(chunk), chunk.mask, topk)
        if logp is None:  # K is known once the first chunk is scored (V is the model's output size)
            logp = torch.zeros(B, T, top.shape[-1], dtype=top.dtype, device=top.device)
            ids = None if top_ids is None else torch.zeros(B, T, top.shape[-1], dtype=torch.long, device=top.device)
        logp[kept], entropy[kept] = top, H.to(entropy.dtype)
        if ids is not None:
            ids[kept] = top_ids
    route[cut] = GRPO_FALLBACK
    if logp is None:
        logp = torch.zeros(B, T, 0, device=batch.mask.device)  # no row distils: K = 0 columns
    shares = ctx.gather(torch.nn.functional.one_hot(route, 3).double())    # [B_all, 3] over every rank's rows
    ctx.metrics.update({"srpo/route_correct": float(shares[:, GRPO_CORRECT].mean()),
                        "srpo/route_distill": float(shares[:, SDPO].mean()),
                        "srpo/route_fallback": float(shares[:, GRPO_FALLBACK].mean()),
                        "srpo/teacher_cut": float(ctx.gather(cut.double()).mean())})
    batch.route, batch.teacher_logp, batch.teacher_ids, batch.teacher_entropy = route, logp, ids, entropy
    return batch
