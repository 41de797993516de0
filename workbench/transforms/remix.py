"""ReMix's mix-policy batch: each step's fresh groups plus groups of the last k steps, each with its behaviour mu.

    B_t = fresh groups of step t  (share 1 - p of the batch's groups)
        + round(p / (1 - p) |fresh groups|) groups drawn at random from the rows of steps t - k .. t - 1 (share p)
    every row keeps mu_logp, the log-probs of the policy that sampled it (objectives/remix.py clips pi / mu)
    steps >= s_r (policy reincarnation, references/remix.py): p = 0 and the buffer is emptied: fully on-policy

Groups are stored and replayed whole (their rows share a new group id), so the group baseline of a replayed group is
recomputed on the same rewards it had: a replayed group has the advantages it had when sampled. Replayed rows drop what
the current policy derives again (old/ref log-probs, advantages: `buffers.replay.DERIVED`) and keep `mu_logp`. The
buffer (`buffers.replay.ReplayBuffer` with max_age = k, every rank's rows) and the prompts' examples are this
component's state: checkpointed, and a resumed run draws the same groups (`ctx.rng`).

Decisions (the paper's abstract gives no numbers; the card's constants): k = 2 steps, p = 0.5, reincarnation half-way.
The off-policy groups are added to the fresh ones, not taken out of them: the step samples as many rollouts as GRPO's,
and its batch is 1 / (1 - p) times larger (with p = 0.5, twice); the rollouts each row is trained on grow with the
update-to-data ratio (objectives/remix.py) and the replay. Fewer than the wanted groups are drawn when the buffer
holds fewer (the first step replays nothing). The step's fresh groups are stored after the draw. Under data
parallelism every rank draws the same groups from the same buffer (the context names no rank to split them by).
The reward/accuracy metrics of the step's row are over the mixed batch.

Reference: none located (arXiv 2507.06892, abstract only).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import concat
from workbench.buffers.replay import ReplayBuffer, check_buffer, entries_of, rows_of
from workbench.objectives.remix import REMIX_TITLE
from workbench.references.remix import check_at, reincarnated

REMIX_LOGS = {
    "remix/offpolicy_frac": ("ReMix: share of the step's rows replayed from the last k steps' rollouts.",
                             "0 at step 0, then p (0.5) while the buffer holds enough groups; 0 from the "
                             "reincarnation step on (fully on-policy)."),
    "remix/replay_age": ("ReMix: mean age in steps of the replayed rows (0 when none).",
                         "Between 1 and k (1.5 for k = 2 with uniform draws)."),
    "remix/buffer_rows": ("ReMix: rows held in the buffer after the step's fresh rows were added.",
                          "(k + 1) x (rows per step) once warm (this step's and the k before: the next step draws from "
                          "the last k); 0 after the reincarnation."),
}


def check_remix(*, k=2, p=0.5, reincarnate_at=0.5, capacity=4096, **_) -> None:
    check_buffer(capacity=capacity, max_age=k)
    if k < 1:
        raise ValueError(f"k={k}: the number of past steps to replay from must be >= 1 (the card's 2)")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ValueError(f"p={p!r}: the off-policy share of the batch must be in [0, 1) (the card's 0.5; 0 is "
                         "on-policy PPO/GRPO)")
    check_at(at=reincarnate_at)


def offpolicy_groups(p: float, fresh: int) -> int:
    """Groups to replay so that they make a share p of the batch's groups: round(p / (1 - p) * fresh)."""
    return int(round(p / (1 - p) * fresh))


def stored_groups(buffer: ReplayBuffer) -> list[list]:
    """The buffer's entries grouped as they were sampled, by (step, group id at that step, prompt), oldest first (a
    prompt drawn twice in one step is two groups)."""
    groups: dict = {}
    for e in buffer.entries:
        groups.setdefault((e.step, int(e.row.group[0]), e.key), []).append(e)
    return list(groups.values())


@registry.group_transform(
    "remix", title=REMIX_TITLE,
    summary="Mix-policy batch: the step's fresh groups plus, at share p = 0.5 of the batch, whole groups replayed "
            "from the last k = 2 steps with their behaviour log-probs mu; fully on-policy (p = 0, buffer emptied) "
            "from the reincarnation step (half-way) on.",
    equation=r"\mathcal{B}_t = \mathcal{D}_t \cup \{g \sim \mathcal{D}_{t-k..t-1}\},\quad "
             r"\tfrac{|\text{replayed}|}{|\mathcal{B}_t|} = p;\quad p = 0 \text{ for } t \ge s_r",
    reads=("rewards", "group", "prompts", "mu_logp"), logs=REMIX_LOGS, check=check_remix, state=dict)
def remix(batch, ctx, *, k=2, p=0.5, reincarnate_at=0.5, capacity=4096):
    """Append replayed groups (new group ids past the step's examples, whose examples are appended to
    `ctx.examples`), then store the step's fresh rows, or, from the reincarnation step on, empty the buffer."""
    check_remix(k=k, p=p, reincarnate_at=reincarnate_at, capacity=capacity)
    buffer: ReplayBuffer = ctx.state.setdefault("buffer", ReplayBuffer(capacity=capacity, max_age=k))
    examples: dict = ctx.state.setdefault("examples", {})
    if reincarnated(ctx.step, ctx.total_steps, reincarnate_at):
        buffer.evicted += len(buffer.entries)
        buffer.entries = []
        examples.clear()
        ctx.metrics.update({"remix/offpolicy_frac": 0.0, "remix/replay_age": 0.0, "remix/buffer_rows": 0.0})
        return batch
    buffer.evict(ctx.step)  # only the last k steps' rows
    groups = stored_groups(buffer)
    fresh = int(torch.unique(batch.group).numel())
    drawn = ctx.rng(ctx.round).sample(groups, min(offpolicy_groups(p, fresh), len(groups)))
    first = len(ctx.examples)
    ctx.examples.extend(examples[g[0].key] for g in drawn)  # group id first + j answers its example
    # the fresh rows and their examples, every rank's, so that every rank keeps the same buffer
    buffer.add(ctx.gather_objects(entries_of(batch, range(batch.size), ctx.step)), ctx.step)
    examples.update(ctx.gather_objects([(str(batch.prompts[i]), ctx.examples[int(batch.group[i])])
                                        for i in range(batch.size)]))
    for key in set(examples) - {e.key for e in buffer.entries}:
        del examples[key]
    replayed = [rows_of(g, first + j, ctx.pad_id) for j, g in enumerate(drawn)]
    out = batch if not replayed else concat([batch, *replayed], pad_id=ctx.pad_id)
    ages = [ctx.step - e.step for g in drawn for e in g]
    ctx.metrics.update({"remix/offpolicy_frac": len(ages) / out.size,
                        "remix/replay_age": sum(ages) / len(ages) if ages else 0.0,
                        "remix/buffer_rows": float(len(buffer))})
    return out
