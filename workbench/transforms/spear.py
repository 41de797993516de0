"""SPEAR's self-imitation replay buffer (SPEAR: "Learn the Ropes, Then Trust the Wins"), with its advantage
recalibration.

Every step, after the update's batch is formed (the reference's order: replay first, then store the step):

    history  H = per-group reward means m_g and stds s_g of the last steps (at most `baseline_buffer_size` groups)
    b = p50(m over H),  s = p50(s over H)                                   (np.percentile 50: the median)
    replayable = #{stored rows with R > b}
    replayable > `trigger` * `capacity`  ->  every stored row gets  A = R - b  (or (R - b) / (s + 1e-6) when
        `norm_by_std`, verl's norm_adv_by_std_in_grpo); rows with A <= 0 are dropped; a random 2^k of the rest
        (the largest power of two <= their number, at most `capacity`; none when one row is left) is appended
        to the batch as replayed rows; the buffer is emptied
    then  H += this step's groups (the oldest steps leave first while H holds more than `baseline_buffer_size`
        groups, checked before adding: H may exceed it by one step), and the step's rows with
        A = R - mean_g (/ std_g when `norm_by_std`) > `threshold` (and, with `require_tool_call`, at least one
        tool call) are stored; stored rows more than `tolerate_steps` steps older than the previous step are
        evicted (the reference's `remove_old`, see Age below).

Replayed rows are marked for the later stages: `offpolicy_mask` = their response mask (sampled by an earlier policy),
`baseline_rewards` = R - A (the effective baseline: b itself without std normalization), so that `advantage:spear`
sets A = R - baseline_rewards on them and GRPO's on the fresh rows, and `loss_weight:spear` weighs their loss by the
rising coefficient c_SIL(t) (`schedule:spear`). They form one extra group (id above the step's), which no fresh
row's baseline sees. Fresh rows get offpolicy_mask 0 and baseline_rewards 0 (not read).

Reference: TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
`verl/verl/trainer/ppo/ray_trainer_hybrid.py`: `TrajectoryBufferBatch` (L149: buffer_size 2048, baseline_buffer_size
10240, tolerate_steps min(., 10)), `maintain_reward_statistics` (L191-243: the p50s), `prepare_for_selection`
(L245-303: weight_decay_trajectory_replay = -1, the shipped scripts' value: `compute_grpo_outcome_advantage` with
custom mean/std, keep advantages.mean(-1) > 0), `get_buffer` (L305-418: the power-of-two draw), `update_batch`
(L421-496: the history, A > 0 and >= 1 tool call), `get_buffer_size` (L505-527: rows with R > p50),
`is_full_capacity` (L184: more than 1.5 x buffer_size), `critic_warmup` (L744-790: the order, reset after a replay);
`verl-agent/examples/gigpo_trainer/run_alfworld_spear.sh` (tolerate_steps 5, TRAIN_BUFFERSIZE 2048,
norm_adv_by_std_in_grpo False).

Decisions and differences:
  - The tool-call requirement is a parameter, off by default: a one-turn task (countdown) has no tool calls and would
    store nothing. On a multi-turn tool task the recipe can set require_tool_call=True (the reference's batch path).
  - `capacity` is the reference's buffer_size; at our scale (tens of positive rows a step, 5-10 steps kept) 2048 never
    fills 1.5 x 2048, so the recipe sets a small one (module `recipes.data_self_imitation`).
  - Age: the reference's `remove_old` runs just before a step's rows are stored and keeps the entries within
    tolerate_steps of the newest stored step, the previous one: at step t, entries of step s stay while
    (t - 1) - s <= tolerate_steps, so a replay at step t draws rows at most tolerate_steps + 1 steps old. Ours is
    ReplayBuffer(max_age=tolerate_steps + 1), evicting at the store of step t by the current step: the same whenever
    the previous step stored a row (the reference then keeps rows longer, measured from its newest entry). Values
    above 10 are refused: the reference silently caps them at 10.
  - Old log-probs. The reference trains replayed rows against the log-probs stored at sampling time; here the forward
    pass after this transform computes every row's old log-probs with the current policy (a stored row keeps only its
    behaviour log-probs `mu_logp`), so the replay term's ratio starts at 1 (the proximal-policy reading). The reference
    also takes the replay loss in a separate optimizer pass; here replayed rows share the step's minibatches with a
    per-row loss weight. Both are noted in the report as a proposed shared change.
  - The advantage-decay mode (weight_decay_trajectory_replay in (0, 1]: A <- lambda A_old) is not implemented: the
    shipped scripts use the p50 recalibration, and a stored row does not keep its old advantage.
  - Data parallelism: every rank keeps the same buffer and history (`ctx.gather_objects`) and appends the same
    replayed rows, so a replayed row is trained once per rank (single-process runs: once).
  - Logged training reward / accuracy include the replayed rows on the steps that replay (as arpo-gui's injections).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from workbench import registry
from workbench.advantages.group import group_stats
from workbench.batch import concat
from workbench.buffers.replay import ReplayBuffer, check_buffer, entries_of, rows_of
from workbench.rewards.tools import SPEAR_TITLE, calls

MAX_TOLERATE = 10   # TrajectoryBufferBatch: self.tolerate_steps = min(tolerate_steps, 10)
HOLD = 8            # stored rows at most HOLD x capacity (a memory bound; the age rule keeps it from binding)
EPS = 1e-6          # compute_grpo_outcome_advantage's epsilon

SPEAR_BUFFER_LOGS = {
    "spear/buffer_rows": ("SPEAR: rows held in the self-imitation buffer after the step's positive rows were stored.",
                          "Grows for a few steps, drops to the step's own rows after a replay empties it; 0 "
                          "throughout: no row beats its group mean (or none has a tool call when required)."),
    "spear/replayable": ("SPEAR: stored rows whose reward beats the baseline b, before the step (the replay trigger "
                         "counts them against trigger x capacity).",
                         "Climbs to trigger x capacity, then resets after a replay; stuck low: the baseline b has "
                         "risen above what the policy's successes earn."),
    "spear/replayed_rows": ("SPEAR: rows appended to the step's batch from the buffer (recalibrated A > 0).",
                            "0 on most steps, a power of two on the steps that replay (every few steps)."),
    "spear/baseline": ("SPEAR: b, the median of the recent group mean rewards (the replayed rows' baseline).",
                       "Follows the training reward upwards, smoothed over baseline_buffer_size groups."),
}


def check_spear_buffer(*, capacity=2048, tolerate_steps=5, baseline_buffer_size=10240, threshold=0.0,
                       norm_by_std=False, require_tool_call=False, trigger=1.5, **_) -> None:
    check_buffer(capacity=capacity, max_age=tolerate_steps)
    if tolerate_steps > MAX_TOLERATE:
        raise ValueError(f"tolerate_steps={tolerate_steps}: the reference caps trajectory_tolerate_steps at "
                         f"{MAX_TOLERATE} (min(tolerate_steps, 10)); give 0..{MAX_TOLERATE} (its scripts: 5)")
    if isinstance(baseline_buffer_size, bool) or not isinstance(baseline_buffer_size, int) or baseline_buffer_size < 1:
        raise ValueError(f"baseline_buffer_size must be an integer >= 1 (group means kept for the p50 baseline, the "
                         f"reference's 10240), got {baseline_buffer_size!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number (a row is stored when its advantage exceeds it; the "
                         f"batch path's 0), got {threshold!r}")
    if isinstance(trigger, bool) or not isinstance(trigger, (int, float)) or not trigger > 0:
        raise ValueError(f"trigger must be a number > 0 (replay when more than trigger x capacity rows beat the "
                         f"baseline; the reference's 1.5), got {trigger!r}")
    for name, value in (("norm_by_std", norm_by_std), ("require_tool_call", require_tool_call)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")


# ------------------------------------------------------------------------------------------------ the p50 baseline

def push_history(history: list, step: int, values: list[float], size: int) -> list:
    """[(step, [values of its groups])]: the oldest steps leave while more than `size` values are held (checked before
    adding, as update_batch L438-444), then this step's are added."""
    history = list(history)
    while sum(len(v) for _, v in history) > size and history:
        history.pop(0)
    return history + [(step, list(values))]


def p50(history: list) -> float:
    """np.percentile(flattened values, 50) (maintain_reward_statistics L213-214)."""
    return float(np.percentile([x for _, v in history for x in v], 50))


def recalibrated(rewards: torch.Tensor, b: float, s: float | None) -> torch.Tensor:
    """[N] A = R - b, or (R - b) / (s + 1e-6) when `s` is given (custom_reward_mean_std in
    compute_grpo_outcome_advantage)."""
    centred = rewards.double() - b
    return centred if s is None else centred / (s + EPS)


def lower_power_of_two(n: int) -> int:
    """get_buffer's nearest_lower_power_of_2: 0 for n <= 1, else the largest 2^k <= n."""
    return 0 if n <= 1 else 1 << (n.bit_length() - 1)


def group_moments(batch) -> tuple[torch.Tensor, list[float], list[float]]:
    """(A_i = R_i - mean_g [B], group means, group stds (Bessel, torch.std as update_batch L435-436)) of the
    step's rows."""
    r = batch.rewards.double()
    mean, std, _ = group_stats(r, batch.group, unbiased=True)
    firsts = sorted({int(g): i for i, g in reversed(list(enumerate(batch.group.tolist())))}.values())
    return r - mean, [float(mean[i]) for i in firsts], [float(std[i]) for i in firsts]


# ------------------------------------------------------------------------------------------------ the transform

def replay(buffer: ReplayBuffer, b: float, s: float | None, capacity: int, rng) -> tuple[list, torch.Tensor]:
    """(entries drawn, their recalibrated A [k]): every stored row recalibrated, A <= 0 dropped, a random
    `lower_power_of_two` of the rest (at most capacity)."""
    rewards = torch.tensor([e.reward for e in buffer.entries], dtype=torch.float64)
    advantages = recalibrated(rewards, b, s)
    positive = [i for i in range(len(buffer)) if float(advantages[i]) > 0]
    chosen = sorted(rng.sample(positive, min(lower_power_of_two(len(positive)), capacity)))
    return [buffer.entries[i] for i in chosen], advantages[chosen]


def mark(batch, replayed: bool, baseline: torch.Tensor | None = None):
    """`batch` with `offpolicy_mask` (the mask on replayed rows, else 0) and `baseline_rewards` (R - A on replayed
    rows, else 0)."""
    return replace(batch, offpolicy_mask=batch.mask.clone() if replayed else torch.zeros_like(batch.mask),
                   baseline_rewards=baseline.to(batch.rewards.dtype) if replayed else torch.zeros_like(batch.rewards))


@registry.group_transform(
    "spear", title=SPEAR_TITLE,
    summary="SPEAR's self-imitation buffer: rows that beat their group mean are stored for tolerate_steps steps; when "
            "more than 1.5 x capacity of them beat b = the median of recent group mean rewards, they are appended "
            "with A = R - b (A <= 0 dropped, a power of two at most capacity) for the replay loss, and the buffer "
            "is emptied.",
    equation=r"A^{\mathrm{SIL}}_i = R_i - \mathrm{p50}\{\bar r_g\}_{g \in H},\quad "
             r"\text{replayed iff } A^{\mathrm{SIL}}_i > 0,\quad t - t_i \le T_{tol}",
    reads=("rewards", "group"), provides=("offpolicy_mask", "baseline_rewards"), logs=SPEAR_BUFFER_LOGS,
    check=check_spear_buffer, state=dict)
def spear_buffer(batch, ctx, *, capacity=2048, tolerate_steps=5, baseline_buffer_size=10240, threshold=0.0,
                 norm_by_std=False, require_tool_call=False, trigger=1.5):
    """Append the replayed rows (if the buffer triggers), then store the step's history and positive rows. Reads
    `rewards`, `group`, `mask` (and `completions`, `turn_info` with require_tool_call); fills `offpolicy_mask`,
    `baseline_rewards`. Logs spear/buffer_rows, spear/replayable, spear/replayed_rows, spear/baseline."""
    check_spear_buffer(capacity=capacity, tolerate_steps=tolerate_steps, baseline_buffer_size=baseline_buffer_size,
                       threshold=threshold, trigger=trigger, norm_by_std=norm_by_std,
                       require_tool_call=require_tool_call)
    state = ctx.state
    buffer: ReplayBuffer = state.setdefault("buffer", ReplayBuffer(capacity=HOLD * capacity,
                                                                   max_age=tolerate_steps + 1))  # (docstring: Age)
    means, stds = state.setdefault("means", []), state.setdefault("stds", [])
    fresh = mark(batch, replayed=False)
    out, drawn, b = fresh, [], None
    ctx.metrics["spear/replayable"] = 0.0
    if means and len(buffer):
        b, s = p50(means), (p50(stds) if norm_by_std else None)
        replayable = sum(e.reward > b for e in buffer.entries)
        ctx.metrics["spear/replayable"] = float(replayable)
        if replayable > trigger * capacity:
            drawn, advantages = replay(buffer, b, s, capacity, ctx.rng(ctx.round))
            buffer.entries = []  # reset_buffer after a replay
            if drawn:
                rows = rows_of(drawn, int(fresh.group.max()) + 1, ctx.pad_id)
                rows = mark(rows, replayed=True, baseline=rows.rewards.double() - advantages)
                out = concat([fresh, rows], pad_id=ctx.pad_id)
    # the step's own groups and positive rows, every rank's (the state stays the same on all of them)
    a, group_means, group_stds = group_moments(fresh)
    if norm_by_std:
        a = a / (group_stats(fresh.rewards.double(), fresh.group)[1] + EPS)
    keep = a > threshold
    if require_tool_call:
        keep &= torch.tensor([n > 0 for n in calls(fresh.completions, fresh.turn_info or None)])
    state["means"] = push_history(means, ctx.step, ctx.gather_objects(group_means), baseline_buffer_size)
    state["stds"] = push_history(stds, ctx.step, ctx.gather_objects(group_stds), baseline_buffer_size)
    buffer.add(ctx.gather_objects(entries_of(fresh, torch.nonzero(keep).flatten(), ctx.step)), ctx.step)
    ctx.metrics.update({"spear/buffer_rows": float(len(buffer)), "spear/replayed_rows": float(len(drawn))})
    if b is not None:
        ctx.metrics["spear/baseline"] = b
    return out
