"""Dr. MAS: GRPO whose group is (prompt, agent), so each agent is measured against its own reward distribution.

    A_i = (R_i - mean_{q,k} R) / (std_{q,k} R + eps)     over the samples of agent k = agent(i) for prompt q = group(i)

A global GRPO baseline (one mean and std per prompt over every agent) can sit far from an agent whose rewards live on
another scale; Dr. MAS normalizes every agent separately. Implementation: the GRPO path of `advantages.group` (`grpo`,
`check_group_sizes`, `broadcast`) on the batch with `group` replaced by a dense id of the (group, agent) pair.

Reference: langfengQ/DrMAS @ 19c632bc0f75730b6db98d90b5035ee9bb7f66d1, `verl/trainer/ppo/ray_trainer.py::
compute_advantage` (L269-271: `group_index = f"{uid}_{agent_id}"` when `group_by_agent_id`),
`verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage` (L498-568: Bessel `torch.std`, eps 1e-6,
`norm_adv_by_std_in_grpo`), `examples/drmas_trainer/run_math.sh` (group_size 8, group_by_agent_id=True, agents
"Solver Agent" / "Verifier Agent").

Decisions:
  - What one sample is (`pool`). The authors' batch has one row per agent *invocation* (an agent's one turn), each
    carrying its trajectory's reward, so agent k's (q, k) statistics pool every call of k: an episode in which k
    acted n times counts n times. Our rows are (episode, agent), each holding all of that agent's turns. pool=
    "invocations" (default, the authors') weighs row i by its number of turns n_i (distinct `turn` ids on its policy
    tokens; 1 without `turn`): the GRPO path runs on the rows repeated n_i times, which is the authors' computation
    exactly when each call carries the episode's reward (their `EpisodeRewardManager`). pool="rows" counts each row
    once. The two agree when every row has one turn; only "rows" makes "one agent => grpo" hold for multi-turn rows.
  - Singleton groups (an agent that acted in one episode of the prompt only): allow_singletons="keep" by default, the
    authors' mean 0 / std 1 (A = R / (1 + eps)); False refuses them, True gives A = 0.
  - Vanilla mode (the authors' group_by_agent_id=False, the baseline Dr. MAS is compared against): every invocation
    of a trajectory is averaged into one score, GRPO runs across the prompt's trajectories (each counted once), and
    every row of the episode gets its trajectory's advantage (rows weighted by their calls under pool="invocations",
    as the authors average their per-call rows). Kept as `group_by_agent=False`: it is the ablation the paper and its
    code switch with one flag, and it is not `grpo` on our rows (which counts an episode once per agent and gives the
    agents of one episode different advantages). With zero-sum rewards the average is 0 (pool="rows") or only the
    imbalance of the agents' call counts, so it says nothing about who won: vanilla mode is for cooperative agents.
    It reads `episode` (rows of one game; a batch without it makes each row its own trajectory), not `agent`.
  - A batch without `agent` ids is refused by the (default) agent-grouped mode: one agent would make Dr. MAS plain
    `grpo`. Rewards are GRPO's: the outcome plus summed `token_rewards` ("in_baseline").
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import SINGLETONS, check_group_sizes, group_index, group_mean, grpo
from workbench.advantages.step_critic import turn_spans
from workbench.batch import RolloutBatch

DR_MAS_TITLE = "Dr. MAS: Stable Reinforcement Learning for Multi-Agent LLM Systems"

POOLS = ("invocations", "rows")  # one sample per agent call (the authors' rows) or per (episode, agent) row


def check_dr_mas(*, pool="invocations", norm_by_std=True, group_by_agent=True, allow_singletons="keep", **_) -> None:
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS} (one sample per agent call, the authors', or per row), got "
                         f"{pool!r}")
    for name, value in (("norm_by_std", norm_by_std), ("group_by_agent", group_by_agent)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    if allow_singletons not in SINGLETONS:
        raise ValueError(f"allow_singletons must be one of {SINGLETONS} (refuse a group of one; A = 0; 'keep': the "
                         f"authors' mean 0 / std 1), got {allow_singletons!r}")


def require_agents(batch: RolloutBatch) -> None:
    if batch.agent is None:
        raise ValueError("dr-mas groups by (prompt, agent): the batch has no agent ids; use the multi-agent rollout "
                         "`agents` (or `grpo` for a one-agent task)")


def agent_groups(group: torch.Tensor, agent: torch.Tensor) -> torch.Tensor:
    """[B] dense id of each row's (prompt group, agent) pair: the authors' f"{uid}_{agent_id}"."""
    return torch.unique(torch.stack([group.long(), agent.long()], dim=1), dim=0, return_inverse=True)[1]


def invocations(batch: RolloutBatch) -> torch.Tensor:
    """[B] long n_i: the number of turns (agent calls) of each row; 1 per row without `turn`."""
    if batch.turn is None:
        return torch.ones(batch.size, dtype=torch.long)
    return turn_spans(batch)[2].sum(-1).clamp(min=1)


def per_sample(batch: RolloutBatch, pool: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows of the samples [N], index of each row's first sample [B]): each row once, or n_i times."""
    counts = invocations(batch) if pool == "invocations" else torch.ones(batch.size, dtype=torch.long)
    rows = torch.repeat_interleave(torch.arange(batch.size), counts)
    return rows, counts.cumsum(0) - counts


def sizes(group: torch.Tensor) -> torch.Tensor:
    """[B] the size of each row's group."""
    dense, counts = group_index(group)
    return counts[dense]


def grouped_grpo(batch: RolloutBatch, group: torch.Tensor, pool: str, norm_by_std: bool, eps: float,
                 allow_singletons) -> torch.Tensor:
    """A [B, T]: `grpo` over the samples of `pool` with groups `group` [B], read back at each row's first sample."""
    rows, first = per_sample(batch, pool)
    samples = replace(batch, group=group).select(rows)
    check_group_sizes(sizes(samples.group), "dr-mas", allow_singletons)
    advantages = grpo(samples, scale="group" if norm_by_std else "none", eps=eps, allow_singletons=allow_singletons)
    return advantages[first]


def trajectory_scores(batch: RolloutBatch, pool: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(score [E], prompt group [E], episode index [B]) of each episode: the mean of its samples' rewards (each row
    weighted by its calls under pool="invocations")."""
    episode = batch.episode if batch.episode is not None else torch.arange(batch.size)
    dense, counts = group_index(episode)
    weights = invocations(batch) if pool == "invocations" else torch.ones(batch.size, dtype=torch.long)
    scores = group_mean(sequence_rewards(batch), dense, counts.shape[0], weights=weights)
    group = torch.zeros(counts.shape[0], dtype=torch.long).scatter_(0, dense, batch.group.long())
    return scores, group, dense


def vanilla(batch: RolloutBatch, pool: str, norm_by_std: bool, eps: float, allow_singletons) -> torch.Tensor:
    """A [B, T] of the authors' group_by_agent_id=False: GRPO across the prompt's trajectory scores, broadcast to
    every row of the trajectory."""
    scores, group, dense = trajectory_scores(batch, pool)
    per_episode = RolloutBatch.from_rewards(scores, group)
    check_group_sizes(sizes(group), "dr-mas", allow_singletons)
    a = grpo(per_episode, scale="group" if norm_by_std else "none", eps=eps, allow_singletons=allow_singletons)
    return broadcast(a[:, 0][dense], batch.mask)


@registry.advantage(
    "dr-mas", title=DR_MAS_TITLE, family="multiagent",
    summary="GRPO with one group per (prompt, agent): each agent's rewards are z-scored among that agent's own "
            "samples for the prompt (every call of the agent pooled, as the authors), so agents on different reward "
            "scales keep unit-scale advantages.",
    equation=r"A_i = \frac{R_i - \mu_{q,k}}{\sigma_{q,k} + \epsilon},\quad (q, k) = (\mathrm{group}(i), "
             r"\mathrm{agent}(i))",
    reads=("agent",), needs=("agents",), choices={"pool": POOLS, "allow_singletons": SINGLETONS}, check=check_dr_mas)
def dr_mas(batch: RolloutBatch, *, pool="invocations", norm_by_std=True, eps=1e-6, allow_singletons="keep",
           group_by_agent=True):
    """Dr. MAS advantage [B, T]. Reads `rewards` (+ summed `token_rewards`), `group`, `agent`, `mask`; `turn` to count
    each row's calls (pool="invocations"); `episode` in vanilla mode (group_by_agent=False).

    pool: "invocations" weighs each row by its number of turns (the authors' one row per call), "rows" counts each
    row once. norm_by_std: divide by the (prompt, agent) std + eps (the authors' norm_adv_by_std_in_grpo).
    allow_singletons: "keep" (the authors': A = R / (1 + eps)), True (A = 0), False (refuse).
    group_by_agent: False is the authors' vanilla mode (module docstring)."""
    check_dr_mas(pool=pool, norm_by_std=norm_by_std, group_by_agent=group_by_agent, allow_singletons=allow_singletons)
    if not group_by_agent:
        return vanilla(batch, pool, norm_by_std, eps, allow_singletons).to(batch.mask.dtype)
    require_agents(batch)
    return grouped_grpo(batch, agent_groups(batch.group, batch.agent), pool, norm_by_std, eps,
                        allow_singletons).to(batch.mask.dtype)
