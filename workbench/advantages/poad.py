"""POAD: token-level credit inside multi-token actions (Bellman backup with Action Decomposition, BAD).

An action a = (w_1 .. w_n) of step s is decomposed into its tokens; V_j = the token-level critic's value before
token w_j (the head's value at that token: V_1 = V(s), V_j = V(s, w_{<j})). Inside an action there is no reward
and no discount; the last token backs up the step's reward and the discounted value of the next action's first
token:

    delta_j = V_{j+1} - V_j                                  j < n   (gamma_intra = 1, no reward)
    delta_n = r_s + gamma V_1(s_{s+1}) - V_n                         (V = 0 after the episode's last action)
    A_j     = delta_j + gamma_j lam A_{j+1},  gamma_j = 1 (j < n), gamma (j = n)     R_j = A_j + V_j

i.e. `gae_and_returns` with a per-token discount: 1 inside an action, gamma at its last token (observation
tokens are skipped as in `gae`). The intra-action deltas telescope: sum_j delta_j over an action = r_s +
gamma V(s_{s+1}) - V(s), the action-level TD error. With one-token actions it is per-step GAE. Whitened over the
batch's policy tokens (as `gae`). The critic is token-level: `value_mask` = every policy token.

Reading (the paper's equations are `unverified`; the card's reading): lam inside actions = lam between them
(the code's `gae = delta + gae_lambda * gae` inside, `gamma * gae_lambda` at the last token). Step rewards:
`step_critic.step_rewards` (turn rewards, a reward function's outcome term on the last step, summed token
rewards), placed on each action's last token. Defaults gamma 0.95, lam 0.95: morning9393/ADRL `mappo/config.py`.

Reference: morning9393/ADRL @ 5ec1aa5 `mappo/utils/language_buffer.py` `LanguageBuffer.batch_process_tppo`
(the "POAD" branch; "NTPO", naive token-level PPO, discounts gamma per token: `gae` on the same rewards).
The code z-scores the advantages per minibatch, over the tokens whose advantage is not exactly 0, with the
population std (`llm_trainer_tppo.py` `ppo_update`); here the batch's policy tokens with the Bessel std (`gae`).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import check_discounts
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.step_critic import step_rewards, turn_spans, write_steps
from workbench.batch import RolloutBatch


def action_discounts(batch: RolloutBatch, gamma: float) -> torch.Tensor:
    """[B, T] gamma_t: gamma at each action's last policy token, 1 at every other position."""
    _, last, valid = turn_spans(batch)
    at_last = write_steps(valid.double(), last, valid, batch.mask.shape[1])
    return 1.0 + (gamma - 1.0) * at_last


def action_end_rewards(batch: RolloutBatch) -> torch.Tensor:
    """[B, T] float64: each step's reward r_s on its action's last token, 0 elsewhere (no reward inside)."""
    _, last, valid = turn_spans(batch)
    return write_steps(step_rewards(batch, valid.shape[1]), last, valid, batch.mask.shape[1])


def poad_gae(batch: RolloutBatch, gamma: float, lam: float):
    """(A [B, T], R [B, T]) of the decomposed Bellman backup (module docstring), before whitening."""
    batch.require("values")
    mask = batch.mask.double()
    return gae_and_returns(action_end_rewards(batch), batch.values.double() * mask, mask,
                           action_discounts(batch, gamma), lam)


def poad_targets(batch: RolloutBatch, *, gamma=0.95, lam=0.95, whiten=True):
    """(returns [B, T], value_mask [B, T]): R_j on every policy token (a token-level critic)."""
    _, returns = poad_gae(batch, gamma, lam)
    return returns.to(batch.mask.dtype), batch.mask


@registry.advantage(
    "poad", title="Reinforcing Language Agents via Policy Optimization with Action Decomposition",
    summary="Token-level GAE inside multi-token actions: no reward and no discount between an action's tokens, "
            "the step reward and gamma V(next action's first token) at its last token.",
    equation=r"\delta_j = V_{j+1} - V_j\ (j<n),\ \delta_n = r + \gamma V(s'_1) - V_n,\ "
             r"A_j = \delta_j + \gamma_j\lambda A_{j+1}",
    reads=("values", "turn"), needs=("multi_turn",), targets=poad_targets, check=check_discounts)
def poad(batch: RolloutBatch, *, gamma=0.95, lam=0.95, whiten=True):
    """POAD advantage [B, T]. Reads `values` (token-level critic at rollout time), `turn`, `mask`, `rewards`,
    `turn_rewards`, `token_rewards`."""
    adv, _ = poad_gae(batch, gamma, lam)
    mask = batch.mask.double()
    adv = ops.masked_whiten(adv, mask) if whiten else adv
    return adv.to(batch.mask.dtype)
