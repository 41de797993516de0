"""CORY's collective reward: the pioneer and the observer are both paid the pair's total task reward.

    R_e = r(x, y_P) + w * sum_{o observer of e} r(x, y_o)         given to every row of episode e      (w = 1)

CORY (Ma et al., 2024) duplicates the LLM into a pioneer pi_P, y_P ~ pi_P(.|x), and an observer pi_O,
y_O ~ pi_O(.|x, y_P), and trains both with PPO on r_CORY = r(x, y_P) + r(x, y_O); each agent then subtracts its own
KL penalty to the reference, -beta KL(pi_i || pi_ref) per token of its own response (in the recipe: `kl-in-reward`
on each row, the rows of one agent being one policy's). Roles swap every T iterations (the rollout's `swap_every`),
so each policy is trained as both and either can be deployed alone.

Here r is each row's reward as the environment gave it (`rewards` [B]: the agent's own return), `agent` [B] says
which role the row played (the pioneer is agent `pioneer`, 0; every other agent of the episode is an observer) and
rows of one episode share `episode` [B]. `observer_weight` w scales the observers' share: w = 1 is CORY's sum; w = 0
pays every row the pioneer's own reward r(x, y_P), so with roles never swapping the pioneer's policy is trained by
PPO on its own reward alone (the card's "zero observer reward and no swaps => PPO on the pioneer"; the observer's
rows, if kept, then carry the pioneer's reward, which moves only the observer's own adapter).

`turn_rewards` [B, S] (a row's reward per step, when the rollout gives them) follow: the row's last step gets
R_e - r_i added, so each row's steps still sum to its (new) return.

Decisions (no reference implementation located; the paper's text only):
  - The collective reward is a reward shaping, not the environment's: the environment keeps per-agent rewards (MARFT's
    setting reads them), and the shaping reads only `rewards`, `agent`, `episode` (any multi-agent game).
  - An episode whose pioneer row is missing (the pioneer was a Python player, or never acted) sums the rows it has:
    R = w * sum of its observers' rewards; a pioneer-only batch (the control `cory-ppo`) gets R = r_P.
  - Logged per step (over every rank's rows): each role's mean own reward, the mean collective reward per episode,
    and which policy played the pioneer (`batch.policy`, when the batch says) so the swap points show in the curves.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch

CORY_TITLE = ("Coevolving with the Other You: Fine-Tuning LLM with Sequential Cooperative Multi-Agent Reinforcement "
              "Learning")

CORY_LOGS = {
    "cory/reward_pioneer": ("CORY: mean own reward r(x, y_P) of the pioneer rows (before the collective sum).",
                            "Rises as the pioneer improves; it is what either policy earns deployed alone."),
    "cory/reward_observer": ("CORY: mean own reward r(x, y_O) of the observer rows (before the collective sum).",
                             "At or above the pioneer's once the observer uses the hint; below it: the observer "
                             "ignores or garbles its partner's answer."),
    "cory/collective": ("CORY: mean collective reward R = r_P + w * r_O per episode (what every row is paid).",
                        "Rises; with w = 1 and rewards in [0, 1] it lies in [0, 2]."),
    "cory/pioneer_policy": ("CORY: the policy (LoRA adapter) that played the pioneer this step (mean over its rows).",
                            "A square wave between 0 and 1 with period 2T (roles swap every T steps); flat: no swaps "
                            "(swap_every None, or one shared policy)."),
}


def check_cory(*, observer_weight=1.0, pioneer=0, **_) -> None:
    if isinstance(observer_weight, bool) or not isinstance(observer_weight, (int, float)) \
            or not math.isfinite(observer_weight) or observer_weight < 0:
        raise ValueError(f"observer_weight={observer_weight!r}: the observers' share of the collective reward must be "
                         "a finite number >= 0 (CORY's 1: R = r_P + r_O; 0: the pioneer's reward alone)")
    if isinstance(pioneer, bool) or not isinstance(pioneer, int) or pioneer < 0:
        raise ValueError(f"pioneer={pioneer!r}: the pioneer is an agent id >= 0 (0: the agent that moves first in "
                         "plan-act)")


def collective_rewards(rewards: torch.Tensor, agent: torch.Tensor, episode: torch.Tensor, *, pioneer: int = 0,
                       observer_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(R [B] float64, each row's episode total; totals [E]; dense episode index [B]): R_e = sum over e's rows of
    w_i r_i, w_i = 1 for the pioneer's row and observer_weight for the others."""
    r = rewards.double()
    weight = torch.where(agent == pioneer, torch.ones_like(r), torch.full_like(r, float(observer_weight)))  # [B]
    _, dense = torch.unique(episode, return_inverse=True)
    totals = torch.zeros(int(dense.max()) + 1 if dense.numel() else 0, dtype=torch.float64)
    totals = totals.index_add_(0, dense, weight * r)                                                         # [E]
    return totals[dense], totals, dense


def last_steps(batch: RolloutBatch) -> torch.Tensor:
    """[B] index of each row's last step (its largest turn id on the response; 0 for a row with none)."""
    if batch.turn is None:
        return torch.zeros(batch.size, dtype=torch.long)
    return batch.turn.long().max(dim=-1).values.clamp(min=0)


def role_means(ctx, r: torch.Tensor, is_pioneer: torch.Tensor) -> dict:
    out = {}
    for name, rows in (("cory/reward_pioneer", is_pioneer), ("cory/reward_observer", ~is_pioneer)):
        seen = ctx.gather(r[rows])
        if seen.numel():
            out[name] = float(seen.mean())
    return out


@registry.reward_shaping(
    "cory", title=CORY_TITLE,
    summary="CORY's collective reward: every row of an episode is paid the sum of its agents' own rewards, the "
            "pioneer's plus observer_weight times the observers' (1: R = r_P + r_O; 0: the pioneer's alone); "
            "logs each role's reward and which policy played the pioneer (roles swap every T steps).",
    equation=r"R_e = r(x, y_P) + w \sum_{o} r(x, y_o),\quad y_P \sim \pi_P(\cdot|x),\ y_O \sim \pi_O(\cdot|x, y_P)",
    reads=("rewards", "agent", "episode", "policy"), provides=("rewards", "turn_rewards"), needs=("agents",),
    logs=CORY_LOGS, check=check_cory)
def cory_rewards(batch: RolloutBatch, ctx, *, observer_weight=1.0, pioneer=0):
    """rewards [B] <- R of the row's episode (`collective_rewards`); turn_rewards [B, S] (when present): R - r added
    on the row's last step. Logs the roles' own mean rewards, the mean collective reward per episode and the policy
    playing the pioneer (`CORY_LOGS`)."""
    check_cory(observer_weight=observer_weight, pioneer=pioneer)
    if batch.agent is None or batch.episode is None:
        raise ValueError("cory sums the rewards of an episode's agents: the batch has no agent / episode ids; use the "
                         "multi-agent rollout `agents` on a game such as plan-act")
    r = batch.rewards.double()                                                             # [B]
    collective, totals, _ = collective_rewards(r, batch.agent, batch.episode, pioneer=pioneer,
                                               observer_weight=observer_weight)
    is_pioneer = batch.agent == pioneer
    ctx.metrics.update(role_means(ctx, r, is_pioneer))
    ctx.metrics["cory/collective"] = float(ctx.gather(totals).mean()) if totals.numel() else 0.0
    if batch.policy is not None:
        played = ctx.gather(batch.policy[is_pioneer].double())
        if played.numel():
            ctx.metrics["cory/pioneer_policy"] = float(played.mean())
    turn_rewards = batch.turn_rewards
    if turn_rewards is not None:
        turn_rewards = turn_rewards.clone()
        rows = torch.arange(batch.size)
        last = last_steps(batch).clamp(max=turn_rewards.shape[1] - 1)
        turn_rewards[rows, last] += (collective - r).to(turn_rewards.dtype)
    return replace(batch, rewards=collective.to(batch.rewards.dtype), turn_rewards=turn_rewards)
