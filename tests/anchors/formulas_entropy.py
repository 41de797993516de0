"""Re-derivations of the F3 entropy-control anchors (EPO, SAFE, LLDS, discrete SAC), for tests/anchors/test_epo.py,
tests/anchors/test_safe.py, tests/anchors/test_llds.py and tests/anchors/test_cleanrl.py.

None of these repositories is installable as a library (their math lives in trainer / actor methods needing a model,
ray workers or an environment), so each function transcribes one block, keeping the source's variable names and
order of operations; logging, printing and device moves are dropped. Sources (commit SHA as fetched):

  WujiangXu/EPO                 5b6fa98e034639b95afbfb24f98d1cb1e5197542
      verl/workers/actor/dp_actor.py: `_calculate_epoch_based_entropy_weight`, `generate_entropy_penalty`,
      `update_policy` (entropy_loss / entropy_penalty_loss lines); verl/trainer/ppo/ray_trainer.py: `fit`
      (step_entropy_list padding, `np.mean(np.array(self.entropy_history), axis=0)`)
  ryyzn9/SAFE                   183daf7af95d7ea612d6fea53e2c8efaa1c47ee2
      safe/controllers/pid.py: `PIDController`, `PhaseDetector`; safe/controllers/entropy_aware.py:
      `EntropyAwarePredictiveController.compute_penalty`; safe/models/critic.py: `DoubleCritic.soft_min`;
      safe/trainers/safe.py: `train_step` (kl, value_loss)
  vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1
                                c19a0942218e9a6d4ce7893a1cff3475a7c8b8c9
      verl/workers/actor/dp_actor.py: `chunk_sums_vectorized`, `expand_chunk_mask`, `update_policy` (loss_noreduce)
  vwxyzjn/cleanrl              fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
      cleanrl/sac_atari.py: the `autotune` alpha_loss
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


# ------------------------------------------------------------------------------------------------------------ EPO

def epo_calculate_epoch_based_entropy_weight(current_epoch: int, max_epochs: int) -> float:
    """dp_actor.py `DataParallelPPOActor._calculate_epoch_based_entropy_weight`."""
    if max_epochs <= 0:
        return 1.0
    current_epoch = max(0, min(current_epoch, max_epochs))
    half_epochs = max_epochs // 2
    if current_epoch <= half_epochs:
        if half_epochs == 0:
            return 1.0
        progress = current_epoch / half_epochs
        lambda_slow = 2.0
        weight = 1.0 - 0.2 * (1 - math.exp(-lambda_slow * progress))
    else:
        remaining_epochs = max_epochs - half_epochs
        if remaining_epochs == 0:
            return 0.8
        progress = (current_epoch - half_epochs) / remaining_epochs
        lambda_fast = 3.0
        weight = 0.8 * math.exp(-lambda_fast * progress)
    return weight


def epo_generate_entropy_penalty(entropy_history, entropy, rollout_step, mask_mode, min_ratio=0.8, max_ratio=1.2,
                                 out_range_penalty=0.1):
    """dp_actor.py `DataParallelPPOActor.generate_entropy_penalty` (non-empty history): (entropy_mask, ratio).
    One row is one environment turn, `rollout_step` [B] its index."""
    rollout_step_int = rollout_step.astype(np.int32)
    avg_entropy_per_sample = entropy_history[rollout_step_int]
    avg_entropy_per_sample = torch.tensor(avg_entropy_per_sample, device=entropy.device, dtype=entropy.dtype)
    if mask_mode == "token":
        token_avg_entropy = entropy
        avg_entropy_per_sample = avg_entropy_per_sample.unsqueeze(-1).expand_as(token_avg_entropy)
        lower_bound = avg_entropy_per_sample * min_ratio
        upper_bound = avg_entropy_per_sample * max_ratio
        within_range = (token_avg_entropy > lower_bound) & (token_avg_entropy < upper_bound)
        sample_mask = torch.where(within_range, 0, out_range_penalty)
        num_within_range = within_range.sum().item()
        total_tokens = within_range.numel()
        entropy_mask = sample_mask
        entropy_mask_ratio = num_within_range / total_tokens
    elif mask_mode == "seq":
        seq_avg_entropy = entropy.mean(dim=-1)
        lower_bound = avg_entropy_per_sample * min_ratio
        upper_bound = avg_entropy_per_sample * max_ratio
        within_range = (seq_avg_entropy > lower_bound) & (seq_avg_entropy < upper_bound)
        entropy_mask = torch.where(within_range, 0, out_range_penalty)
        entropy_mask = entropy_mask.unsqueeze(-1).expand_as(entropy)
        num_within_range = within_range.sum().item()
        total_samples = within_range.numel()
        entropy_mask_ratio = num_within_range / total_samples
    else:
        raise ValueError(mask_mode)
    return entropy_mask, entropy_mask_ratio


def verl_agg_loss(loss_mat, loss_mask, loss_agg_mode):
    """verl `core_algos.agg_loss` for the two modes the EPO test uses (token-mean, seq-mean-token-mean)."""
    if loss_agg_mode == "token-mean":
        return (loss_mat * loss_mask).sum() / loss_mask.sum()
    if loss_agg_mode == "seq-mean-token-mean":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1)
        return torch.mean(seq_losses)
    raise ValueError(loss_agg_mode)


def epo_entropy_loss_terms(entropy, response_mask, entropy_history, rollout_step, *, entropy_coeff,
                           entropy_smooth_coeff, mask_mode="token", min_ratio=0.8, max_ratio=1.2, out_range_penalty=0.1, max_steps=50,
                           enable_smooth_weights=False, trainer_epoch=0, max_epochs=150, loss_agg_mode="token-mean"):
    """The entropy part of dp_actor.py `update_policy`: policy_loss = pg_loss - entropy_loss * entropy_coeff, so
    this returns -entropy_loss * entropy_coeff (the term added to pg_loss) with `entropy_smooth=True`."""
    should_apply_entropy_smooth = np.any(rollout_step >= max_steps // 2)
    if should_apply_entropy_smooth:
        entropy_mask, _ = epo_generate_entropy_penalty(entropy_history, entropy, rollout_step, mask_mode, min_ratio,
                                                       max_ratio, out_range_penalty)
        if enable_smooth_weights:
            epoch_weight = epo_calculate_epoch_based_entropy_weight(trainer_epoch, max_epochs)
            entropy_mask = entropy_mask * epoch_weight
    else:
        entropy_mask = torch.zeros_like(entropy)
    entropy_loss = verl_agg_loss(loss_mat=entropy, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    entropy_penalty_loss = verl_agg_loss(loss_mat=entropy_mask, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    entropy_loss = entropy_loss - entropy_penalty_loss * entropy_smooth_coeff
    return -entropy_loss * entropy_coeff


def epo_entropy_history(step_entropy_lists, max_steps):
    """ray_trainer.py `fit`: each step's list cut / left-padded to max_steps, appended, then averaged position-wise."""
    entropy_history = []
    for step_entropy_list in step_entropy_lists:
        if len(step_entropy_list) > max_steps:
            step_entropy_list = step_entropy_list[-max_steps:]
        elif len(step_entropy_list) < max_steps:
            step_entropy_list = [0.0] * (max_steps - len(step_entropy_list)) + step_entropy_list
        entropy_history.append(step_entropy_list)
    return np.mean(np.array(entropy_history.copy()), axis=0)


# ----------------------------------------------------------------------------------------------------------- SAFE

class SafePIDController:
    """safe/controllers/pid.py `PIDController`."""

    def __init__(self, kp: float = 0.3, ki: float = 0.01, kd: float = 0.05):
        self.kp, self.ki, self.kd = kp, ki, kd
        self.integral = 0.0
        self.prev_error = 0.0
        self.reward_ema = None

    def update(self, reward: float) -> float:
        if self.reward_ema is None:
            self.reward_ema = reward
            return 0.0
        old_ema = self.reward_ema
        self.reward_ema = 0.95 * self.reward_ema + 0.05 * reward
        velocity = self.reward_ema - old_ema
        target_velocity = 0.001
        error = velocity - target_velocity
        p_out = self.kp * error
        self.integral = max(-1.0, min(1.0, self.integral + error))
        i_out = self.ki * self.integral
        d_out = self.kd * (error - self.prev_error)
        self.prev_error = error
        return p_out + i_out + d_out


class SafePhaseDetector:
    """safe/controllers/pid.py `PhaseDetector`."""

    def __init__(self):
        self.reward_history = []
        self.phase = "WARMUP"

    def update(self, reward: float):
        self.reward_history.append(reward)
        if len(self.reward_history) < 50:
            self.phase = "WARMUP"
            return
        recent = self.reward_history[-50:]
        old = self.reward_history[-100:-50] if len(self.reward_history) >= 100 else recent
        recent_mean = sum(recent) / len(recent)
        old_mean = sum(old) / len(old)
        recent_std = np.std(recent)
        if recent_mean > old_mean + 0.01:
            self.phase = "CLIMBING"
        elif recent_std < 0.02 and recent_mean > 0.7:
            self.phase = "CONVERGED"
        else:
            self.phase = "PLATEAU"

    def get_threshold_multiplier(self) -> float:
        return {"WARMUP": 1.5, "CLIMBING": 1.2, "PLATEAU": 0.8, "CONVERGED": 1.0}[self.phase]


class SafeEntropyAwarePredictiveController:
    """safe/controllers/entropy_aware.py `EntropyAwarePredictiveController` (compute_penalty)."""

    def __init__(self, base_threshold=0.3, entropy_floor=2.0, max_preview_kl=0.5, pid_kp=0.3, pid_ki=0.01,
                 pid_kd=0.05):
        self.kl_short = 0.0
        self.kl_long = 0.0
        self.pid = SafePIDController(kp=pid_kp, ki=pid_ki, kd=pid_kd)
        self.phase_detector = SafePhaseDetector()
        self.base_threshold = base_threshold
        self.entropy_floor = entropy_floor
        self.max_preview_kl = max_preview_kl

    def compute_penalty(self, kl, **kwargs):
        entropy = kwargs.get("entropy", self.entropy_floor)
        reward = kwargs.get("reward", 0.0)
        self.kl_short = 0.9 * self.kl_short + 0.1 * kl
        self.kl_long = 0.99 * self.kl_long + 0.01 * kl
        self.phase_detector.update(reward)
        pid_adjustment = self.pid.update(reward)
        phase_mult = self.phase_detector.get_threshold_multiplier()
        threshold = (self.base_threshold + pid_adjustment) * phase_mult
        threshold = max(0.1, min(0.6, threshold))
        if self.kl_short > threshold:
            base_penalty = 0.1 * (self.kl_short - threshold) ** 2
            entropy_factor = max(0.5, self.entropy_floor / (entropy + 0.1))
            penalty = base_penalty * entropy_factor
            active = True
        else:
            penalty = 0.0
            entropy_factor = 1.0
            active = False
        return {"penalty": penalty, "threshold": threshold, "kl_short": self.kl_short, "kl_long": self.kl_long,
                "entropy_factor": entropy_factor, "phase": self.phase_detector.phase, "active": active}


def safe_soft_min(v1, v2, alpha):
    """safe/models/critic.py `DoubleCritic.soft_min`."""
    stacked = torch.stack([-v1 / alpha, -v2 / alpha], dim=-1)
    return -alpha * (torch.logsumexp(stacked, dim=-1) - math.log(2))


def safe_kl(current_lp, ref_lp, response_mask):
    """safe/trainers/safe.py `train_step`: the KL handed (as kl.item()) to compute_penalty."""
    return ((current_lp - ref_lp.float()) * response_mask).sum() / response_mask.sum().clamp(min=1)


def safe_value_loss(v, old_v, rewards, clip_range_vf=0.2):
    """safe/trainers/safe.py `train_step`: value_loss (before the 0.5 weight in the total loss); v, old_v,
    rewards [B] (one value per sequence)."""
    v_clipped = old_v + torch.clamp(v - old_v, -clip_range_vf, clip_range_vf)
    value_loss = F.huber_loss(v.float(), rewards.float(), delta=0.5)
    value_loss += F.huber_loss(v_clipped.float(), rewards.float(), delta=0.5)
    value_loss = 0.5 * value_loss
    return value_loss


# ----------------------------------------------------------------------------------------------------------- LLDS

def llds_expand_chunk_mask(chunk_mask, chunk_id):
    """dp_actor.py `expand_chunk_mask`."""
    B, N = chunk_id.shape
    padded_mask = torch.cat([torch.zeros(B, 1, dtype=chunk_mask.dtype, device=chunk_mask.device), chunk_mask], dim=1)
    original_mask = padded_mask.gather(1, chunk_id)
    return original_mask


def llds_chunk_sums_vectorized(mask, values, return_chunk_id=True):
    """dp_actor.py `chunk_sums_vectorized`."""
    B, N = mask.shape
    mask = mask.bool()
    prev = F.pad(mask[:, :-1], (1, 0), value=False)
    starts = mask & ~prev
    chunk_id = starts.cumsum(dim=1).to(torch.long) * mask.to(torch.long)
    lengths = chunk_id.max(dim=1).values
    Kmax = int(lengths.max().item())
    if Kmax == 0:
        return values.new_zeros((B, 0)), lengths, (chunk_id if return_chunk_id else None)
    out = values.new_zeros((B, Kmax + 1))
    out.scatter_add_(1, chunk_id.clamp_max(Kmax), values * mask)
    sums_padded = out[:, 1:]
    return sums_padded, lengths, (chunk_id if return_chunk_id else None)


def llds_loss_noreduce(log_prob, old_log_prob, advantages, response_mask, *, no_reduce_lambda, chunk_noreduce):
    """dp_actor.py `update_policy`: loss_noreduce with mask_answer=False (coeff_map = no_reduce_lambda everywhere)."""
    positive_advantage_mask = (advantages >= 0).float()
    penalty_term = old_log_prob.detach() - log_prob
    answer_mask = torch.ones_like(response_mask, dtype=response_mask.dtype)
    coeff_map = torch.where(answer_mask.bool(), no_reduce_lambda, 0.0)  # answer_mask is all ones here
    diff_log_prob = old_log_prob.detach() - log_prob
    base_penalty_term = torch.maximum(torch.zeros_like(log_prob), diff_log_prob)
    if chunk_noreduce:
        masked_response_mask = response_mask * positive_advantage_mask
        sum_val, length, chunk_ids = llds_chunk_sums_vectorized(masked_response_mask, penalty_term)
        chunk_mask = (sum_val > 0).to(torch.long)
        original_token_mask = llds_expand_chunk_mask(chunk_mask, chunk_ids)
        valid_penalty_tokens = original_token_mask.detach() * base_penalty_term
    else:
        masked_response_mask = response_mask * positive_advantage_mask
        current_penalty_term = diff_log_prob * positive_advantage_mask
        penalty_sentence = (current_penalty_term * masked_response_mask).sum(axis=-1)  # verl_F.masked_sum
        penalty_sentence = torch.maximum(torch.zeros_like(penalty_sentence), penalty_sentence)
        penalty_sentence[penalty_sentence > 0] = 1.0
        valid_penalty_tokens = penalty_sentence.unsqueeze(-1) * base_penalty_term * positive_advantage_mask
    weighted_penalty = valid_penalty_tokens * coeff_map
    loss_noreduce = (weighted_penalty * response_mask).sum() / response_mask.sum()  # verl_F.masked_mean
    return loss_noreduce


# ------------------------------------------------------------------------------------------------------------ SAC

def cleanrl_sac_atari_alpha_loss(log_alpha, action_probs, log_pi, target_entropy):
    """cleanrl/sac_atari.py, `if args.autotune:`; action_probs, log_pi [B, |A|]; target_entropy is the target in nats
    (cleanrl: 0.89 log|A|), our Hbar. The `.mean()` runs over actions too, so this is J / |A|."""
    return (action_probs.detach() * (-log_alpha.exp() * (log_pi + target_entropy).detach())).mean()
