"""Flow-GRPO (AgentFlow): the trajectory's outcome broadcast to every planner turn, one "turn-sample" per turn.

    n_i     = number of turns (actions) of trajectory i; each turn is a turn-sample carrying R_i
    pool="turn"        mean, std over the sum_i n_i turn-samples of the prompt group's G trajectories
    pool="trajectory"  mean, std over the G trajectories (= `grpo`)
    A_{i,t} = (R_i - mean) / (std + eps)      the same on every policy token of every turn of trajectory i

AgentFlow trains only its planner: each planner turn becomes its own sample (prompt = the memory at that turn,
response = the planner's output), the trajectory's verifiable outcome R(tau_i) sits on every turn's last token,
and verl's GRPO runs over all turn-samples of the query (`uid = data_id`). Pooling turn-samples makes a trajectory
with more turns weigh more in the group's mean and std, so the per-trajectory mean advantage is not 0 when turn
counts differ (`pool="turn"`, the authors' code and the default); `pool="trajectory"` takes one sample per
trajectory. One turn per trajectory makes both exactly `grpo`. The computation is GiGPO's episode term
(`gigpo.episode_advantage`, episode_stats "steps" or "trajectory": verl-agent's compute_mean_std_cross_steps).

Here a row is a whole trajectory (the multi-turn rollout `turns`); every action is the planner's, and its turns are
the distinct step ids (`batch.turn`) of its policy tokens. Splitting rows into per-turn sequences would change only
the loss aggregation over sequences; with token-mean aggregation (verl's default, AgentFlow's) the update is the same.

Authors' code: lupantech/AgentFlow @ b940064 `agentflow/verl/daemon.py` (L640-760: one sample per planner turn,
the trajectory reward on each; empty turns skipped) and `agentflow/verl/trainer.py` (L208: `uid = data_id_list`, then
verl's `compute_advantage` -> `compute_grpo_outcome_advantage`: Bessel std, eps 1e-6). `train/config.yaml`: grpo,
n = 8, 32 queries, clip 0.2 / 0.3, KL loss 0.001, temperature 0.7. Not reproduced: the scores are stored in bfloat16
(exact for 0/1 rewards, lossy otherwise), and turn-samples whose prompt exceeds max_prompt_length are dropped after
the advantage (they still shape the group's statistics).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast
from workbench.advantages.gigpo import episode_advantage
from workbench.batch import RolloutBatch

POOLS = ("turn", "trajectory")


def turn_counts(turn: torch.Tensor, mask: torch.Tensor) -> list[int]:
    """n_i: the number of distinct step ids among each row's policy tokens (an error for a row without any)."""
    counts = [int(torch.unique(t[m > 0]).numel()) for t, m in zip(turn.long(), mask)]
    empty = [i for i, n in enumerate(counts) if n == 0]
    if empty:
        raise ValueError(f"flow-grpo: rows {empty[:10]} have no policy token, so no turn to broadcast to")
    bad = [i for i, (t, m) in enumerate(zip(turn.long(), mask)) if bool((t[m > 0] < 0).any())]
    if bad:
        raise ValueError(f"flow-grpo: rows {bad[:10]} have policy tokens with turn id -1 (padding's id)")
    return counts


@registry.advantage(
    "flow-grpo", title="In-the-Flow Agentic System Optimization for Effective Planning and Tool Use",
    summary="AgentFlow's Flow-GRPO: every turn of a trajectory is a sample carrying the trajectory's outcome; "
            "the group z-score pools all turn-samples of the prompt's rollouts (longer trajectories weigh more).",
    equation=r"A_{i,t} = \frac{R_i - \mathrm{mean}_{(j,k)} R_j}{\mathrm{std}_{(j,k)} R_j + \epsilon},\quad "
             r"(j, k):\ \text{turn } k \text{ of rollout } j \text{ of the query}",
    reads=("turn",), needs=("multi_turn",), choices={"pool": POOLS})
def flow_grpo(batch: RolloutBatch, *, pool="turn", eps=1e-6, allow_singletons=False):
    """A [B, T] (module docstring). Reads `rewards` (+ summed `token_rewards`), `group`, `mask`, `turn`.

    pool: "turn" (AgentFlow: statistics over turn-samples) or "trajectory" (one sample per trajectory, `grpo`).
    eps: verl's 1e-6 (Bessel std). allow_singletons: a prompt with one trajectory is refused unless True (A = 0)
    or "keep" (AgentFlow's verl GRPO: a pool of one sample has mean 0, std 1, so A = R / (1 + eps); with
    pool="turn" a lone trajectory of n >= 2 turns is a pool of n equal samples and gets A = 0).
    """
    if pool not in POOLS:
        raise ValueError(f"flow-grpo: pool must be one of {POOLS}, got {pool!r}")
    batch.require("turn")
    n_turns = turn_counts(batch.turn, batch.mask)
    stats = "steps" if pool == "turn" else "trajectory"  # gigpo's episode term: one sample per step, or per row
    A = episode_advantage(batch, n_turns, eps=eps, episode_stats=stats, allow_singletons=allow_singletons)  # [B]
    return broadcast(A, batch.mask)
