"""ARPO (GUI agents)'s experience replay: a stored success of the same task goes into each all-fail group.

    B[q]   FIFO of the last `per_task` (8) rows of prompt q with reward > `success` (0.1)
    group of q dead  <=>  std(r) < 0.05 and mean(r) < 0.2
    dead and B[q] non-empty  ->  the group's first row is replaced by a random row of B[q]
    then this step's successes are pushed into B

A dead group has zero advantage under GRPO; with one stored success in it, that row gets the group's one positive
advantage and the G - 1 failures equal negative ones. The buffer (`buffers.replay.ReplayBuffer`, capacity
`capacity` rows in all) is this component's state: checkpointed, and the same rows are drawn on a resumed run
(`ctx.rng`). A prompt recurs only when the sampler revisits it: the recipe samples a fixed pool (`samplers.pool`),
as ARPO trains on a fixed task list. The paper's pre-filter (tasks the base agent solves sometimes) is not applied.

Reference: dvlab-research/ARPO `verl/trainer/ray_trainer.py::apply_replay`, `verl/trainer/replay_buffer.py`,
`examples/osworld_subset32.sh`.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.group import group_index, group_stats
from workbench.batch import concat
from workbench.buffers.replay import ReplayBuffer, check_buffer, entries_of, rows_of

ARPO_GUI_TITLE = "ARPO:End-to-End Policy Optimization for GUI Agents with Experience Replay"

REPLAY_LOGS = {
    "replay/dead_groups": ("Share of the step's groups that failed throughout (std < 0.05 and mean < 0.2) before any "
                           "replay.", "High early on a hard pool; falls as the policy learns."),
    "replay/injected_groups": ("Share of the step's groups that got a stored success in place of their first row.",
                               "At most replay/dead_groups; 0 until some prompt has succeeded once."),
    "replay/buffer_rows": ("Rows held in the replay buffer after the step's successes were added.",
                           "Grows to per_task x (prompts that ever succeeded), bounded by capacity."),
}


def check_arpo_gui(*, per_task=8, capacity=4096, success=0.1, dead_std=0.05, dead_mean=0.2, **_):
    check_buffer(capacity=capacity, per_key=per_task)
    if not dead_std >= 0 or not isinstance(dead_mean, (int, float)):
        raise ValueError(f"dead_std must be >= 0 and dead_mean a number, got {dead_std!r}, {dead_mean!r}")
    if not isinstance(success, (int, float)) or isinstance(success, bool):
        raise ValueError(f"success must be a reward threshold (a number), got {success!r}")


def dead_rows(rewards: torch.Tensor, group: torch.Tensor, *, dead_std: float, dead_mean: float) -> torch.Tensor:
    """[B] bool: the row's group failed throughout, std(r) < dead_std and mean(r) < dead_mean (ARPO's test; the
    population std, numpy's in the reference)."""
    mean, std, _ = group_stats(rewards.double(), group, unbiased=False)
    return (std < dead_std) & (mean < dead_mean)


@registry.group_transform(
    "arpo-gui", title=ARPO_GUI_TITLE,
    summary="Per-prompt replay of successes: each group that failed throughout gets, in place of its first row, a "
            "random stored success of the same prompt (FIFO of the last 8 with reward > 0.1 per prompt), so GRPO "
            "sees one positive advantage where it would see none; this step's successes are stored after.",
    equation=r"\mathrm{std}_g r < 0.05 \wedge \bar r_g < 0.2 \wedge B[q_g] \neq \emptyset \;\Rightarrow\; "
             r"y_{g,1} \leftarrow \tau \sim B[q_g]",
    reads=("rewards", "group", "prompts"), logs=REPLAY_LOGS, check=check_arpo_gui, state=dict)
def arpo_gui(batch, ctx, *, per_task=8, capacity=4096, success=0.1, dead_std=0.05, dead_mean=0.2):
    """Replace each dead group's first row by a stored success of its prompt, then store the step's successes."""
    # the component's state (checkpointed) holds its buffer, made at the first step with the recipe's bounds
    buffer: ReplayBuffer = ctx.state.setdefault("buffer", ReplayBuffer(capacity=capacity, per_key=per_task))
    dense, counts = group_index(batch.group)
    dead = dead_rows(batch.rewards, batch.group, dead_std=dead_std, dead_mean=dead_mean)
    firsts = [int(torch.nonzero(dense == g)[0]) for g in range(len(counts))]
    rng, order, injected = ctx.rng(ctx.round), list(range(batch.size)), []
    for row in firsts:
        drawn = buffer.draw(1, rng, key=str(batch.prompts[row])) if bool(dead[row]) else []
        if drawn:
            order[row] = batch.size + len(injected)
            injected.append(rows_of(drawn, int(batch.group[row]), ctx.pad_id))
    successes = torch.nonzero(batch.rewards > success).flatten().tolist()
    # after the draws (a dead group has no success of its own to store); every rank's, so the buffers stay equal
    buffer.add(ctx.gather_objects(entries_of(batch, successes, ctx.step)), ctx.step)
    out = batch if not injected else concat([batch, *injected], pad_id=ctx.pad_id).select(torch.tensor(order))
    ctx.metrics.update({"replay/dead_groups": float(dead[firsts].double().mean()),
                        "replay/injected_groups": len(injected) / len(counts), "replay/buffer_rows": float(len(buffer))})
    return out
