"""Step-level critics over multi-turn rows: where a turn's value is read, the step rewards, step GAE.

A multi-turn row (`workbench.rollout.turns`) holds one episode: its actions (mask 1) and observations (mask 0),
every token tagged with its step id (`turn` [B, T], -1 on padding). Turn s of row i is its policy tokens with
turn == s; its first and last policy tokens are `turn_spans`.

Where a step's value is read. The critic's head reads the hidden state *before* each response token (the one
that predicts it, `rollout.engine.policy_forward`), so the value at the first policy token of turn s is the
value of the state the action is taken from -- prompt and history, nothing of the action yet: V(s_t). Step-level
critics (`vl-dac`, `hiper`, `digirl`, `spa-rl`) read and train the head there only (their `value_mask` is 1 at
that token of every step). The value at a turn's last policy token has read all of the action but its final
token (SPA-RL reads its progress estimate there).

Step rewards r_{i,s} (`step_rewards`): the environment's per-turn rewards (`turn_rewards`), plus on each row's
last step whatever the reward stage added to the outcome beyond them (R_i - sum_s turn_rewards, e.g. a reward
function's term), plus each turn's summed per-token rewards (`token_rewards`, e.g. -beta KL). So
sum_s r_{i,s} = R_i + sum_t token_rewards_{i,t}: nothing is lost or counted twice.

Step GAE is `gae_and_returns` on [B, S] step arrays (a step is one "position", invalid steps are skipped).
"""
from __future__ import annotations

import torch

from workbench.advantages.base import check_rewards
from workbench.advantages.gae import gae_and_returns
from workbench.batch import RolloutBatch


def turn_spans(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(first [B, S] long, last [B, S] long, valid [B, S] bool): positions of the first and last policy token of
    each turn s (0 where the turn has none), S = 1 + the largest turn id on a policy token."""
    batch.require("turn")
    if batch.turn.shape != batch.mask.shape:
        raise ValueError(f"turn has shape {tuple(batch.turn.shape)} but mask has shape {tuple(batch.mask.shape)}")
    policy = batch.mask > 0
    turn = batch.turn.long()
    if bool((policy & (turn < 0)).any()):
        raise ValueError("policy tokens (mask 1) with turn id -1: `turn` must give every action token its step id "
                         "(the multi-turn rollout `turns` fills it)")
    S = int(turn[policy].max()) + 1 if bool(policy.any()) else 1
    T = policy.shape[1]
    member = (turn[:, None, :] == torch.arange(S, device=turn.device)[None, :, None]) & policy[:, None, :]  # [B,S,T]
    valid = member.any(-1)
    first = member.long().argmax(-1)
    last = T - 1 - member.flip(-1).long().argmax(-1)
    return first * valid, last * valid, valid


def read_steps(x: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[B, S] x[i, pos[i, s]] on valid steps, 0 elsewhere."""
    return x.gather(1, pos) * valid.to(x.dtype)


def write_steps(x: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, T: int) -> torch.Tensor:
    """[B, T] zeros with x[i, s] written at position pos[i, s] of every valid step."""
    out = torch.zeros(x.shape[0], T, dtype=x.dtype, device=x.device)
    return out.scatter_add(1, pos, x * valid.to(x.dtype))


def mark_steps(pos: torch.Tensor, valid: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[B, T] 1.0 at the position of every valid step (a value mask), dtype of `like`."""
    return write_steps(valid.to(like.dtype), pos, valid, like.shape[1]).clamp(max=1)


def broadcast_steps(x: torch.Tensor, batch: RolloutBatch) -> torch.Tensor:
    """[B, T] every policy token of turn s gets x[i, s] (0 off the policy tokens)."""
    S = x.shape[1]
    turn = batch.turn.long().clamp(0, S - 1)
    return x.gather(1, turn) * (batch.mask > 0).to(x.dtype)


def step_rewards(batch: RolloutBatch, S: int) -> torch.Tensor:
    """[B, S] float64 r_{i,s}: turn rewards, the outcome's remainder on the last step, summed token rewards (module
    docstring); S = the number of step columns (`turn_spans`)."""
    _, _, valid = turn_spans(batch)
    if valid.shape[1] != S:
        raise ValueError(f"step_rewards: S={S} but the batch's turns give {valid.shape[1]} steps")
    B, device = batch.size, batch.mask.device
    n = valid.sum(-1)
    if bool((n == 0).any()):
        raise ValueError(f"rows {torch.nonzero(n == 0).flatten().tolist()[:10]} have no policy token")
    out = torch.zeros(B, S, dtype=torch.float64, device=device)
    if batch.turn_rewards is not None:
        width = min(S, batch.turn_rewards.shape[1])
        out[:, :width] = batch.turn_rewards[:, :width].double()
    if batch.rewards is not None:
        check_rewards(batch.rewards)
        last_step = (valid.long() * torch.arange(S, device=device)[None, :]).amax(-1)  # [B] last valid step
        out[torch.arange(B, device=device), last_step] += batch.rewards.double() - out.sum(-1)
    return (out + turn_token_rewards(batch, S)) * valid


def turn_token_rewards(batch: RolloutBatch, S: int) -> torch.Tensor:
    """[B, S] float64: each turn's summed per-token rewards (`token_rewards`, e.g. -beta KL), 0 without them."""
    out = torch.zeros(batch.size, S, dtype=torch.float64, device=batch.mask.device)
    if batch.token_rewards is None:
        return out
    turn = batch.turn.long().clamp(0, S - 1)
    return out.scatter_add(1, turn, batch.token_rewards.double() * batch.mask.double())


def step_gae(rewards: torch.Tensor, values: torch.Tensor, valid: torch.Tensor, gamma, lam):
    """(A [B, S], R [B, S]) GAE over each row's steps: delta_s = r_s + gamma V_{s+1} - V_s (V = 0 after the last
    step), A_s = delta_s + gamma lam A_{s+1}, R_s = A_s + V_s. `gamma`/`lam` floats or [B, S] per step."""
    return gae_and_returns(rewards, values, valid.to(rewards.dtype), gamma, lam)


def zscore(x: torch.Tensor, valid: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / (std + eps) over the valid entries, Bessel std (VL-DAC `PPO.update`, torch `.std()`); 0 elsewhere.
    One valid entry: x - mean = 0."""
    v = valid.to(x.dtype)
    n = v.sum()
    mean = (x * v).sum() / n.clamp(min=1)
    var = (((x - mean) * v) ** 2).sum() / (n - 1).clamp(min=1)
    return (x - mean) / (var.sqrt() + eps) * v


def step_targets(returns: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, batch: RolloutBatch):
    """(returns [B, T], value_mask [B, T]) of a step critic: R_s written at each valid step's value token `pos`, and
    the value mask 1 there only, in the batch's mask dtype."""
    T = batch.mask.shape[1]
    return write_steps(returns, pos, valid, T).to(batch.mask.dtype), mark_steps(pos, valid, batch.mask)


def step_values(batch: RolloutBatch):
    """(V [B, S] float64 read at each turn's first policy token, first, last, valid): the step critic's inputs."""
    batch.require("values")
    first, last, valid = turn_spans(batch)
    return read_steps(batch.values.double(), first, valid), first, last, valid
