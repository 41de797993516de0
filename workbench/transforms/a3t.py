"""A^3T's accumulated trajectories: every success is kept, and stored successes of earlier rounds join each batch.

    round k's training data  D_k = S_1 u ... u S_k  u  F_k       (S: successes, F: failures of a round)
    here a round is one step:  batch_k = (S_k u F_k, the step's own rows)  u  `replay` rows drawn from B
    B <- B u S_k   after the draw (bounded: `capacity` rows, the oldest leave first)

Successes accumulate over rounds and "supplement" the failures, which count only in the round that produced them
(the binarized loss `advantages.a3t` pushes them down once). The number of stored successes never decreases until
the capacity is reached.

Decisions (the card: abstract only; "buffer keeps all successes, failures from the latest round only"):
- A round is a training step (A^3T's rounds collect then train; ours sample then update once). The latest round's
  failures are the step's own rows, already in the batch, so the buffer stores successes only.
- Appending every stored success to every step would grow the batch without bound: each step appends `replay` (16)
  of them, drawn uniformly without replacement from the component's stream (`ctx.rng`: a resumed run draws the same
  ones), all in one extra group (the binarized advantage has no group baseline). Successes are rows with reward above
  `success` (0.5, the 0/1 verifier's 1), stored as the step sees them (`buffers.replay`: later stages recompute
  old/reference log-probs for the current policy, so a replayed row is trained at ratio 1, no importance weight).
- Under data parallelism every rank adds every rank's successes (`ctx.gather_objects`), so the buffers agree, and
  every rank appends the same draw (the replayed rows weigh once per rank).
- The ActRe agent that writes a rationale for a sampled action (ReAct-style trajectory synthesis) needs a ReAct
  agent with actions and observations: not at our scale (one-turn countdown); the trajectories here are the
  policy's own samples.

Reference: none located (REFERENCES-AGENTS.md).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.a3t import A3T_TITLE
from workbench.batch import concat
from workbench.buffers.replay import ReplayBuffer, check_buffer, entries_of, rows_of

A3T_LOGS = {
    "a3t/replayed_rows": ("A3T: stored successes of earlier rounds appended to the step's batch.",
                          "0 until a first success is stored, then the recipe's replay setting (16) every step."),
    "a3t/stored_successes": ("A3T: successes held in the buffer after the step's were added.",
                             "Never decreases until it reaches capacity; flat at 0: the policy never succeeds."),
    "a3t/step_success": ("A3T: share of the step's own rows (not the replayed ones) that succeeded.",
                         "Rises over rounds as the policy learns (the card's success rate per round)."),
}


def check_a3t(*, capacity=4096, replay=16, success=0.5, **_) -> None:
    check_buffer(capacity=capacity)
    if isinstance(replay, bool) or not isinstance(replay, int) or replay < 0:
        raise ValueError(f"replay must be an integer >= 0 (stored successes appended to each step's batch; 0 "
                         f"stores without replaying), got {replay!r}")
    if isinstance(success, bool) or not isinstance(success, (int, float)):
        raise ValueError(f"success must be a reward threshold (a number; 0.5 for a 0/1 verifier), got {success!r}")


@registry.group_transform(
    "a3t", title=A3T_TITLE,
    summary="Accumulated successes: every successful row is stored (capacity 4096, oldest leave first) and 16 "
            "stored successes of earlier rounds are appended to each step's batch; failures count only in their "
            "own step.",
    equation=r"\mathcal{D}_k = \textstyle\bigcup_{j \le k} S_j \,\cup\, F_k",
    reads=("rewards", "prompts"), logs=A3T_LOGS, check=check_a3t, state=dict)
def a3t(batch, ctx, *, capacity=4096, replay=16, success=0.5):
    """Append `replay` stored successes (one new group), then store the step's own successes."""
    buffer: ReplayBuffer = ctx.state.setdefault("buffer", ReplayBuffer(capacity=capacity))
    drawn = buffer.draw(replay, ctx.rng(ctx.round)) if replay else []
    own = batch.rewards > success
    buffer.add(ctx.gather_objects(entries_of(batch, torch.nonzero(own).flatten().tolist(), ctx.step)), ctx.step)
    ctx.metrics.update({"a3t/replayed_rows": float(len(drawn)), "a3t/stored_successes": float(len(buffer)),
                        "a3t/step_success": float(own.double().mean()) if batch.size else 0.0})
    if not drawn:
        return batch
    group = int(batch.group.max()) + 1 if batch.size else 0
    return concat([batch, rows_of(drawn, group, ctx.pad_id)], pad_id=ctx.pad_id)
