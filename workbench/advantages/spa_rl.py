"""SPA-RL: a learned progress estimator splits the outcome into per-step rewards, then step-level PPO.

    c_t      = the head's value at the last policy token of turn t      (the progress estimator's reading)
    L_prog   = mean_i (sum_t c_{i,t} - R_i)^2                           trains the estimator (`values.spa_rl`)
    g_t      = 0.5 if step t's action ran (turn_info[i][t]["tool_error"] is None) else 0; the last step always 0.5
    r_t      = c_t + g_t (+ the turn's summed token rewards, e.g. -beta KL)    the step reward (stop-gradient c_t)
    V(s_t)   = the head's value at the first policy token of turn t    (the PPO critic, one value per step)
    A_t      = GAE over steps of r_t with V (gamma 1, lam 0.95), whitened over the batch's steps, on turn t's tokens

With g = 0, sum_t r_t = sum_t c_t, which the estimator fits to R: the redistributed rewards keep the return. The
critic's targets R_t = A_t + V(s_t) sit at each turn's first token (`value_mask`), the estimator's at its last.

Reading. The paper's estimator is a separate model (the SFT backbone + Linear(vocab -> 1) on the logits at each
turn's last token, trained offline on exploration rollouts, then frozen) and its PPO critic is TRL's token-level
value head. The workbench has one head: it is read at a turn's last policy token as c_t and at its first as
V(s_t), two positions that see different states (after most of the action vs before it), and both are trained
online, each on its own tokens. A one-token turn has one position: it is read as c_t, and its V(s_t) is 0 (no
critic target there). The code places each r_t on the turn's last token and runs TRL's token-level GAE; here GAE
runs over steps (one critic value per step). Paper weights alpha c_t + beta g_t: the code's alpha 1, beta 0.5.
Defaults gamma 1, lam 0.95, whitened advantages: TRL 0.x `PPOConfig` (what `ppo/step_ppo.py` runs).

Reference: WangHanLinHenry/SPA-RL-Agent @ ed20087 `prm/train_our_progress_model.py` `prm_model.forward` (turn
ends = last tokens of runs of unmasked labels, summed Linear outputs, MSELoss), `prm/rl_data_org.py` (grounding
0.5 unless the next observation says "Nothing happens", 0.5 on the last step), `ppo/step_ppotrainer.py`
`StepPPOTrainer.compute_rewards`. `reference_bug=True` reproduces compute_rewards' weighting
`score[idx] * (len(score) - idx - 1)`: step t's reward times its distance from the last step (the last step's
reward is multiplied by 0). The WebShop `rl_data_org.py` also overwrites every c_t by R - mean(other rollouts of
the task): not ported (an ablation; the paper's c_t is the estimator's).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.step_critic import (broadcast_steps, read_steps, step_gae, step_targets, step_values,
                                              turn_spans, turn_token_rewards, zscore)
from workbench.batch import RolloutBatch

SPA_TITLE = "SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution"


def progress_readings(values: torch.Tensor, batch: RolloutBatch) -> torch.Tensor:
    """[B, S] c_t: `values` [B, T] at the last policy token of each turn (0 past a row's turns)."""
    _, last, valid = turn_spans(batch)
    return read_steps(values, last, valid)


def grounding(batch: RolloutBatch, valid: torch.Tensor, bonus: float = 0.5) -> torch.Tensor:
    """[B, S] g_t = bonus where step t's tool_error is None, and on each row's last step (the code's final 0.5)."""
    if not batch.turn_info:
        raise ValueError("spa-rl's grounding reads turn_info[i][s]['tool_error']; sample with the multi-turn "
                         "rollout (`turns`), whose environments report it")
    B, S = valid.shape
    ran = torch.zeros(B, S, dtype=torch.float64)
    for i, row in enumerate(batch.turn_info):
        for s, info in enumerate(row[:S]):
            ran[i, s] = float(info.get("tool_error") is None)
    ran = ran.to(valid.device)
    steps = torch.arange(S, device=valid.device)[None, :]
    is_last = steps == (valid.long() * steps).amax(-1, keepdim=True)
    return bonus * torch.where(is_last, torch.ones_like(ran), ran) * valid


def spa_step_rewards(c: torch.Tensor, g: torch.Tensor, valid: torch.Tensor, reference_bug=False) -> torch.Tensor:
    """[B, S] r_t = c_t + g_t; reference_bug: times (n_i - t - 1), the code's distance-to-the-end weight."""
    r = (c + g) * valid
    if reference_bug:
        n = valid.sum(-1, keepdim=True)
        r = r * (n - 1 - torch.arange(valid.shape[1], device=valid.device)[None, :]).clamp(min=0)
    return r


def spa_rl_steps(batch: RolloutBatch, gamma, lam, bonus, reference_bug):
    """(A [B, S], R [B, S], first, valid, critic [B, S] bool: steps whose critic reading is apart from c_t)."""
    V, first, last, valid = step_values(batch)
    critic = valid & (first != last)
    c = progress_readings(batch.values.double(), batch)
    r = spa_step_rewards(c, grounding(batch, valid, bonus), valid, reference_bug)
    r = r + turn_token_rewards(batch, c.shape[1])
    adv, returns = step_gae(r, V * critic, valid, gamma, lam)
    return adv, returns, first, valid, critic


def spa_rl_targets(batch: RolloutBatch, *, gamma=1.0, lam=0.95, grounding_bonus=0.5, whiten=True, eps=1e-8,
                   reference_bug=False):
    """(returns [B, T], value_mask [B, T]): the critic's R_t at each turn's first policy token (turns of two or
    more tokens; the estimator's loss reads the turn ends itself)."""
    _, returns, first, _, critic = spa_rl_steps(batch, gamma, lam, grounding_bonus, reference_bug)
    return step_targets(returns, first, critic, batch)


@registry.advantage(
    "spa-rl", title=SPA_TITLE,
    summary="Step rewards = the progress estimator's per-turn contribution c_t (its sum fits the outcome) + 0.5 "
            "for an executed action; step-level GAE with a per-step critic.",
    equation=r"r_t = c_t + g_t,\ \textstyle\sum_t c_t \approx R,\ A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}",
    reads=("values", "turn", "turn_info"), needs=("multi_turn",), targets=spa_rl_targets, check=check_discounts)
def spa_rl(batch: RolloutBatch, *, gamma=1.0, lam=0.95, grounding_bonus=0.5, whiten=True, eps=1e-8,
           reference_bug=False):
    """SPA-RL advantage [B, T]. Reads `values` (estimator readings at turn ends, critic at turn starts, rollout
    time), `turn`, `turn_info` ("tool_error"), `mask`. The outcome `rewards` enter only through the estimator's
    loss (`values.spa_rl`), not the step rewards."""
    adv, _, _, valid, _ = spa_rl_steps(batch, gamma, lam, grounding_bonus, reference_bug)
    adv = zscore(adv, valid, eps) if whiten else adv
    return broadcast_steps(adv, batch).to(batch.mask.dtype)
