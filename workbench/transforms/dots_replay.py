"""DOTS's rollout replay: a step's k fresh groups are filled up to n groups with whole groups of earlier steps.

    B          FIFO of at most `groups` (512) whole groups, one per question (a question's newer group replaces its
               older one: "dedup, keep the latest"), oldest first
    step t:    R = n - (fresh groups of the step, all ranks)          (0 in the sampler's first round: k = n)
               draw min(R, |B'|) groups of B' uniformly at random without replacement,
               B' = B less the questions fresh in this step
               then add the step's fresh groups (every rank's) to B, evict by question, then the oldest past `groups`

A replayed row keeps the log-probs of the policy that sampled it (`mu_logp`, the behaviour policy); the trainer
recomputes old_logp (pi_old) for it as for a fresh row, and the recipe's objective `dots-rr-clip` clips pi/pi_old
and weights by the detached pi_old/mu. Its rewards are kept (the verifier is fixed); GRPO's advantage is computed
again within the group (the group is replayed whole, so that is the group's original advantage).

Decisions, with the reference's code as the authority where the paper is silent:
- Zero-variance groups are replayed: the reference's `select_buffer` has its "remove all-0 or all-1 groups" step
  commented out, so its buffer keeps them and they are drawn like any other (their advantage is 0).
- The pick is uniform (`replay_strategy="random"`; "teacher" raises NotImplementedError in the reference).
- Order of operations: the reference dedups the buffer (keep each question's latest group), draws, trims to
  buffer_size - sigma*B groups, then appends the fresh groups (dedup against them happens at the next step). We add
  the fresh groups and then evict (`buffers.replay.ReplayBuffer`, per_key = G: the latest group of a question; then
  the oldest rows past groups*G). Both hold at most `groups` distinct questions, newest first; they differ only when
  the buffer is full and a fresh question is still in it (the reference then trims one more old group, and holds
  fewer than buffer_size after the next dedup). The reference also appends the fresh batch twice in its replay
  branch (L1051 and L1067); the next dedup removes the copy, so nothing follows from it.
- Questions fresh in this step are not replayed (the reference allows it and logs `replay_batch/num_overlap`): the
  older group would be evicted by the fresh one at once, and the sampler's difficulty of a question must come from
  its fresh group only (its update sees the step's rows by prompt text).
- Under data parallelism every rank's fresh groups are added (`ctx.gather_objects`, in rank order) so all ranks keep
  the same buffer; the replayed groups are drawn once for the whole step (the same stream on every rank) and dealt
  out so that each rank fills its own share up to n / world groups.
- The examples of the replayed groups join `ctx.examples` (group id = their position there), as the batch's `group`
  indexes the step's examples; the buffer's examples are kept in the state next to it.
- At our scale the pool holds 64 prompts, so the buffer never reaches 512 groups: every pooled question seen is held
  once, and replay draws among them.

Reference: ASTRAL-Group/data-efficient-llm-rl @ 59df9187b7786c0058316f886b77c13c8608c533,
`rl_training/verl/verl/trainer/ppo/ray_trainer_teacher_replay.py::select_buffer` (L57-148) and its use at L1043-1077,
`rl_training/run_bash/final_ds_teacher_replay.sh` (BUFFER_SIZE=512, SIGMA=0.5, REPLAY_STRATEGY=random,
use_temp_log_prob=True).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.group import group_index
from workbench.batch import concat
from workbench.buffers.replay import ReplayBuffer, entries_of, rows_of
from workbench.samplers.dots import DOTS_TITLE

DOTS_REPLAY_LOGS = {
    "replay/replayed_share": ("Share of the step's groups (all ranks) replayed from the buffer instead of sampled.",
                              "0 in the first selection round, then 1 - fresh (0.5) once the buffer holds enough."),
    "replay/buffer_groups": ("Groups (distinct questions) held in the replay buffer after this step's were added.",
                             "Grows to min(pool size, 512) and stays there."),
    "replay/replayed_age": ("Mean age in steps of the replayed groups (0 when none was replayed).",
                            "A few steps to tens of steps; growing steadily means stale rollouts dominate."),
}


def check_dots_replay(*, groups=512, **_):
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"groups must be an integer >= 1 (the replay buffer's size in prompt groups; the paper's "
                         f"512), got {groups!r}")


def group_rows(batch) -> list[list[int]]:
    """The batch's groups as row lists, in order of first appearance."""
    dense, counts = group_index(batch.group)
    return [torch.nonzero(dense == g).flatten().tolist() for g in range(len(counts))]


def buffer_groups(buffer: ReplayBuffer) -> list[str]:
    """The questions held, oldest first (each is one whole group)."""
    return list(dict.fromkeys(e.key for e in buffer.entries))


def deal(wants: list[int], drawn: list, rank: int) -> list:
    """Rank `rank`'s slice of the step's drawn groups: the ranks take theirs in rank order, `wants[r]` each."""
    start = sum(wants[:rank])
    return drawn[start:start + wants[rank]]


@registry.group_transform(
    "dots-rr", title=DOTS_TITLE,
    summary="Rollout replay: the step's fresh groups are filled up to prompts_per_step groups with whole groups drawn "
            "at random from a FIFO buffer of 512 groups (one per question, the latest), each keeping its behaviour "
            "log-probs mu; then the step's fresh groups are stored.",
    equation=r"\mathcal B_t = \mathrm{FIFO}_{512}\big(\mathrm{latest}_q(\mathcal B_{t-1} \cup \mathcal F_t)\big),\quad "
             r"\mathcal R_t \sim \mathrm{U}(\mathcal B_{t-1} \setminus q(\mathcal F_t)),\ |\mathcal R_t| = "
             r"n - |\mathcal F_t|",
    reads=("group", "prompts", "rewards"), logs=DOTS_REPLAY_LOGS, check=check_dots_replay, state=dict)
def dots_replay(batch, ctx, *, groups=512):
    """Append replayed groups so that the step holds prompts_per_step groups, then store the step's fresh groups."""
    G = ctx.group_size
    buffer: ReplayBuffer = ctx.state.setdefault("buffer", ReplayBuffer(capacity=groups * G, per_key=G))
    examples: dict = ctx.state.setdefault("examples", {})  # question -> its Example, for the groups held
    fresh = group_rows(batch)
    if any(len(rows) != G for rows in fresh):
        raise ValueError(f"dots-rr stores whole groups of group_size={G} rows; this step has groups of "
                         f"{sorted({len(r) for r in fresh})} rows (a transform before it changed them)")
    mine = tuple(str(batch.prompts[rows[0]]) for rows in fresh)
    shares = ctx.gather_objects([mine])  # one tuple of fresh questions per rank, in rank order
    rank, per_rank = shares.index(mine), ctx.prompts_per_step // len(shares)
    wants = [max(0, per_rank - len(s)) for s in shares]
    taken = {q for s in shares for q in s}
    eligible = [q for q in buffer_groups(buffer) if q not in taken]
    drawn = ctx.rng(ctx.round).sample(eligible, min(sum(wants), len(eligible)))  # the same draw on every rank
    replayed = [buffer.of_key(q) for q in deal(wants, drawn, rank)]
    ages = [ctx.step - entries[0].step for entries in replayed]
    # after the draw: every rank's fresh groups and their examples, so that the ranks keep equal states
    fresh_examples = [example_of(ctx, int(batch.group[rows[0]])) for rows in fresh]
    examples.update(zip(ctx.gather_objects(list(mine)), ctx.gather_objects(fresh_examples)))
    buffer.add(ctx.gather_objects([e for rows in fresh for e in entries_of(batch, rows, ctx.step)]), ctx.step)
    held = buffer_groups(buffer)
    out = batch
    if replayed:
        first = int(batch.group.max()) + 1
        out = concat([batch, *(rows_of(entries, first + j, ctx.pad_id) for j, entries in enumerate(replayed))],
                     pad_id=ctx.pad_id)
        if len(ctx.examples) == first:  # group g answers ctx.examples[g] (in place: the step's list, as pope's)
            ctx.examples.extend(examples[entries[0].key] for entries in replayed)
    ctx.state["examples"] = {q: examples[q] for q in held}
    ctx.metrics.update({"replay/replayed_share": len(drawn) / (len(taken) + len(drawn)),
                        "replay/buffer_groups": float(len(held)),
                        "replay/replayed_age": sum(ctx.gather_objects([float(sum(ages))])) / max(len(drawn), 1)})
    return out


def example_of(ctx, group: int):
    """The step's example that group `group` answers (None in a context without examples)."""
    return ctx.examples[group] if group < len(ctx.examples) else None
