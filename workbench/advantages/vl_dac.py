"""VL-DAC: one critic value per environment step, GAE over steps, every token of an action shares its step's A.

    V_s       = V(s_s)  the head's value at the first policy token of turn s (the state the action is taken from)
    delta_s   = r_s + gamma V_{s+1} - V_s                    (V = 0 after the episode's last step)
    A_s       = delta_s + gamma lam A_{s+1}                  GAE over environment steps, gamma 0.99, lam 0.95
    R_s       = A_s + V_s                                    the critic's target, one per step
    A_s      <- (A_s - mean A) / (std A + 1e-8)              over every step of the batch (Bessel std)
    A_{i,t}   = A_{turn(t)}                                  on every policy token of the action

The policy loss is token-level PPO with eps = 0.1 (`workbench.objectives.vl_dac`, with the authors' ratio guard);
the critic is the clipped value loss at the steps' value tokens (the recipe's `value-loss`, coef 1.0 with its 1/2
= the code's 0.5, clip 0.1: the code clips values with the policy's clip_param), k3 KL to the reference, beta 0.04.

Reading. The code's critic (`a2c_ppo_acktr/model.py`) reads the last hidden state of the prompt before the action;
the head's value at the action's first token reads that same position (`advantages.step_critic`), so one value per
environment step is the value at each turn's first policy token, and `value_mask` is 1 there only (number of value
targets = number of environment steps). Step rewards: `step_critic.step_rewards` (the environment's turn rewards,
a reward function's extra outcome term on the last step, each turn's summed token rewards on its step).

Reference: corl-team/VL-DAC @ 5da2783 (files unchanged since a3a5457) `a2c_ppo_acktr/storage.py`
`RolloutStorage.compute_returns` (use_gae, use_proper_time_limits), `a2c_ppo_acktr/algo/ppo.py` `PPO.update`
(A = returns - values, z-score over the whole storage with `.std() + 1e-8`), `configs/alfworld_qwen2vl.yaml`
(gamma 0.99, gae_lambda 0.95, clip_param 0.1, value_loss_coef 0.5, kl_beta 0.04, ppo_epoch 4, lr 1e-6).
Not ported: the storage's `bad_masks` (GAE zeroed at a time-limit step: here every episode end is terminal, as
`gae` treats it), the two value-only warm-up updates (`value_warmup`), LoRA r = 16.
"""
from __future__ import annotations

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.step_critic import broadcast_steps, step_gae, step_rewards, step_targets, step_values, zscore
from workbench.batch import RolloutBatch

VL_DAC_TITLE = ("Enhancing Vision-Language Model Training with Reinforcement Learning in Synthetic Worlds for "
                "Real-World Success")


def vl_dac_steps(batch: RolloutBatch, gamma: float, lam: float):
    """(A [B, S], R [B, S], first [B, S], valid [B, S]): step GAE on the values at each turn's first token."""
    V, first, _, valid = step_values(batch)
    adv, returns = step_gae(step_rewards(batch, V.shape[1]), V, valid, gamma, lam)
    return adv, returns, first, valid


def vl_dac_targets(batch: RolloutBatch, *, gamma=0.99, lam=0.95, whiten=True, eps=1e-8):
    """(returns [B, T], value_mask [B, T]): R_s at the first policy token of each step, and 1 there only."""
    _, returns, first, valid = vl_dac_steps(batch, gamma, lam)
    return step_targets(returns, first, valid, batch)


@registry.advantage(
    "vl-dac", title=VL_DAC_TITLE,
    summary="One critic value per environment step (at the action's first token), GAE over steps (gamma 0.99, "
            "lam 0.95), z-scored over the batch's steps; every token of an action gets its step's advantage.",
    equation=r"A_s = \sum_k (\gamma\lambda)^k \delta_{s+k},\ \delta_s = r_s + \gamma V(s_{s+1}) - V(s_s),\ "
             r"A_{i,t} = \hat A_{\mathrm{turn}(t)}",
    reads=("values", "turn"), needs=("multi_turn",), targets=vl_dac_targets, check=check_discounts)
def vl_dac(batch: RolloutBatch, *, gamma=0.99, lam=0.95, whiten=True, eps=1e-8):
    """VL-DAC advantage [B, T]. Reads `values` (the critic at rollout time), `turn`, `mask`, `rewards`,
    `turn_rewards`, `token_rewards`. whiten: z-score over the batch's steps (each step counts once, as the code's
    storage), `eps` added to the std. gamma = lam = 1 with V = 0 gives the return-to-go of each step."""
    adv, _, _, valid = vl_dac_steps(batch, gamma, lam)
    adv = zscore(adv, valid, eps) if whiten else adv
    return broadcast_steps(adv, batch).to(batch.mask.dtype)
