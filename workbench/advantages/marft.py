"""MARFT: agent-sequential GAE with one shared critic over the agents' actions in their order of play.

Within an episode the agents act in a fixed order each environment step; the actions form one sequence
u = (step 0, agent 0), (step 0, agent 1), ..., (step 1, agent 0), ... and GAE runs along it:

    delta_u = r_u + gamma V_{u+1} - V_u      V_{u+1}: the next agent of the same step, else the first agent of the
                                             next step; 0 after the episode's last action
    A_u     = delta_u + gamma lam A_{u+1}    R_u = A_u + V_u (the critic's target)
    A       <- (A - mean A) / (std A + 1e-8) over the batch's actions (population std), then each action's
               A_u on every policy token of that action

so gamma (and lam) apply between consecutive agents inside a step: a whole step is discounted by gamma^N.

Our layout. The agents of one episode are rows sharing `batch.episode`; row i plays agent k = batch.agent[i]; its
actions are its turns s = 0..n_i-1 (`turn` [B, T], mask 1 on the action's tokens), rewarded `turn_rewards[i, s]`
(`step_critic.step_rewards`: plus the outcome's remainder on its last turn and its summed token rewards). The value
of action (i, s) is the critic's value at the turn's first policy token, the state the agent acts from (its history
with the other agents' earlier actions as observations): the step critics' convention (`advantages.step_critic`).
The critic trains there (`value_mask`), on R_u.

The order (one rule): an episode's actions sorted by (step s, agent id k). Agents are numbered in their order of play
within a step (the games here: agent 0 moves first), and an agent that did not act in a step (the game ended before
its turn) is skipped, so the last action taken ends the sequence. Agents played by a Python opponent have no row: their
moves are part of the environment, and the sequence holds the policy's actions only (one seat => flat step GAE).

Reference: jwliao-ai/MARFT @ 1beacdb5b8facc70638177ed22874cf59e52a6b9, `marft/buffers/action_level_buffer.py::
ActionBuffer.compute_gae_and_returns` (L36-53: the (step, agent) grid, `masks` ending the episode),
`marft/algorithms/appo_trainer.py::
ppo_update` (advantages normalized with np.nanmean / np.nanstd + 1e-8 after setting exact zeros to NaN, clipped value
loss with Huber delta 10), `marft/config.py` (gamma 0.99, gae_lambda 0.95).

Decisions:
  - Normalization: over the batch's actions (our `valid` steps); the authors exclude entries that are exactly 0, their
    marker of unfilled buffer slots; a genuine A = 0 counts here. Population std, + 1e-8, as theirs; per batch, not
    per minibatch.
  - Every episode end is terminal (no bootstrap; the authors bootstrap `next_value` only for an episode cut by
    episode_length while running).
  - Shared objective: the sequence sums every agent's rewards into each earlier agent's return (a team return), as
    the authors' cooperative setting; in a zero-sum game an agent's return then includes its opponent's rewards.
  - Without `agent` and `episode` ids (a one-agent batch) each row is its own episode of one agent: flat step GAE.
    A batch with `agent` but no `episode` (or rows of one episode with the same or no agent) is refused: the order
    of play cannot be read from it.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.step_critic import broadcast_steps, step_rewards, step_targets, step_values
from workbench.batch import RolloutBatch

MARFT_TITLE = "MARFT: Multi-Agent Reinforcement Fine-Tuning"
EPS = 1e-8  # appo_trainer: (A - mean) / (std + 1e-8)


def episodes_and_agents(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """([B] episode id, [B] agent id) of each row; one-agent episodes when the batch has neither (module docstring)."""
    if batch.agent is None and batch.episode is None:
        return torch.arange(batch.size), torch.zeros(batch.size, dtype=torch.long)
    if batch.episode is None:
        raise ValueError("marft orders the agents of an episode: the batch has agent ids but no episode ids (which "
                         "rows played together); use the multi-agent rollout `agents`")
    episode = batch.episode.long()
    agent = torch.zeros(batch.size, dtype=torch.long) if batch.agent is None else batch.agent.long()
    pairs = torch.stack([episode, agent], 1)
    if torch.unique(pairs, dim=0).shape[0] < batch.size:
        e = next(int(e) for e in episode.unique() if int((episode == e).sum()) > agent[episode == e].unique().numel())
        raise ValueError(f"marft: episode {e} has several rows of the same agent"
                         f"{' (the batch has no agent ids)' if batch.agent is None else ''}; one row per (episode, "
                         "agent) is needed to order their actions (the multi-agent rollout `agents` gives it)")
    return episode, agent


def agent_step_order(episode: torch.Tensor, agent: torch.Tensor, valid: torch.Tensor):
    """(index [E, L] of each episode's actions as flat row * S + step positions, in the order (step, agent id);
    filled [E, L] bool). `valid` [B, S]: the rows' actions."""
    B, S = valid.shape
    rows, steps = torch.nonzero(valid, as_tuple=True)
    ep = episode[rows]
    _, ep_dense = torch.unique(ep, return_inverse=True)
    # sort by (episode, step, agent): lexicographic keys combined into one integer
    key = (ep_dense * (S + 1) + steps) * (int(agent.max()) + 1) + agent[rows]
    order = torch.argsort(key)
    ep_sorted = ep_dense[order]
    E = int(ep_dense.max()) + 1
    counts = torch.bincount(ep_sorted, minlength=E)
    start = counts.cumsum(0) - counts
    position = torch.arange(order.numel()) - start[ep_sorted]         # place of each action in its episode
    index = torch.zeros(E, int(counts.max()), dtype=torch.long)
    filled = torch.zeros(E, int(counts.max()), dtype=torch.bool)
    index[ep_sorted, position] = (rows * S + steps)[order]
    filled[ep_sorted, position] = True
    return index, filled


def sequential_gae(r: torch.Tensor, V: torch.Tensor, valid: torch.Tensor, episode: torch.Tensor, agent: torch.Tensor,
                   gamma: float, lam: float):
    """(A [B, S], R [B, S]): `gae_and_returns` along each episode's agent-step sequence, read back per (row, step)."""
    index, filled = agent_step_order(episode, agent, valid)
    f = filled.to(r.dtype)
    seq_r, seq_v = r.flatten()[index] * f, V.flatten()[index] * f       # [E, L]
    seq_a, seq_R = gae_and_returns(seq_r, seq_v, f, gamma, lam)
    A, R = torch.zeros_like(r).flatten(), torch.zeros_like(r).flatten()
    A[index[filled]], R[index[filled]] = seq_a[filled], seq_R[filled]
    return A.view_as(r), R.view_as(r)


def normalize_actions(A: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[B, S] (A - mean) / (std + 1e-8) over the valid actions, population std (np.nanstd); 0 elsewhere."""
    x = A[valid]
    return torch.where(valid, (A - x.mean()) / (x.std(unbiased=False) + EPS), torch.zeros_like(A))


def marft_steps(batch: RolloutBatch, gamma: float, lam: float):
    """(A [B, S], R [B, S], first [B, S], valid [B, S]) of the agent-sequential GAE."""
    V, first, _, valid = step_values(batch)
    episode, agent = episodes_and_agents(batch)
    A, R = sequential_gae(step_rewards(batch, V.shape[1]), V, valid, episode, agent, gamma, lam)
    return A, R, first, valid


def marft_targets(batch: RolloutBatch, *, gamma=0.99, lam=0.95, whiten=True):
    """(returns [B, T], value_mask [B, T]): R_u at the first policy token of each action, and 1 there only."""
    _, R, first, valid = marft_steps(batch, gamma, lam)
    return step_targets(R, first, valid, batch)


@registry.advantage(
    "marft", title=MARFT_TITLE, family="multiagent",
    summary="GAE along each episode's actions in order of play (step, then agent): an agent bootstraps with the "
            "shared critic's value of the next agent's action in the same step, or the first agent's of the next "
            "step (gamma 0.99, lam 0.95); normalized over the batch's actions, broadcast to each action's tokens.",
    equation=r"\delta_{t,k} = r_{t,k} + \gamma V_{\mathrm{next}(t,k)} - V_{t,k},\ \mathrm{next}(t,k) = "
             r"\begin{cases}(t,k+1) & k < N-1\\ (t+1,0) & k = N-1\end{cases},\ A = \sum_j (\gamma\lambda)^j "
             r"\delta_{u+j}",
    reads=("values", "turn"), targets=marft_targets, check=check_discounts)
def marft(batch: RolloutBatch, *, gamma=0.99, lam=0.95, whiten=True):
    """MARFT advantage [B, T]. Reads `values` (the shared critic at rollout time), `turn`, `mask`, `turn_rewards`,
    `rewards` (+ `token_rewards`), `agent` and `episode` (None for both: one-agent rows). whiten: normalize over the
    batch's actions (the authors' APPO update). gamma = lam = 1 with V = 0 gives the reward-to-go along the sequence."""
    A, _, _, valid = marft_steps(batch, gamma, lam)
    A = normalize_actions(A, valid) if whiten else A
    return broadcast_steps(A, batch).to(batch.mask.dtype)
