"""Re-derivations of anchor formulas that cannot be imported as functions (used by tests/anchors/test_*.py).

TRL keeps its advantage and loss math inside trainer methods that need a model, a dataset and an
accelerator. Each function below transcribes one such block from the installed **trl 1.16.0** source,
cited by file and function, keeping TRL's variable names and operations in the same order. Only the
distributed, logging and vLLM parts are removed, with the values of a single-process run substituted:

    accelerator.num_processes = 1, current_gradient_accumulation_steps = 1, steps_per_generation = 1,
    model.training = True, top_entropy_quantile = 1.0 (no entropy mask), off_policy_mask_threshold = None,
    use_vllm = False (no importance_sampling_ratio), no entropy bonus, no router aux loss.

`call_trl_compute_loss` runs TRL's own (unbound) `_compute_loss` on a stand-in trainer object holding
exactly those values; `tests/anchors/test_trl.py` (test_grpo_family_loss_matches_trl,
test_gmpo_loss_matches_trl) checks each loss transcription against it, so they cannot drift from the
installed source unnoticed. The advantage transcriptions are short enough to check by reading.

verl needs no re-derivation here: `verl.trainer.ppo.core_algos` is imported and called directly.
"""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import torch

# ----------------------------------------------------------------------------------------------------
# Advantages


def trl_grpo_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group") -> torch.Tensor:
    """GRPO advantages [B] from rewards [B] laid out as consecutive groups of `num_generations`.

    Source: trl/trainer/grpo_trainer.py, `GRPOTrainer._generate_and_score_completions`, branch
    `multi_objective_aggregation == "sum_then_normalize"` (the default), after the weighted sum of the
    reward functions (`rewards` here; NaN marks an unscorable completion):

        mean_grouped_rewards = nanmean(rewards.view(-1, G), dim=1).repeat_interleave(G)
        std_rewards = nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G)   # "group" / "none"
                    | nanstd(rewards).expand_as(rewards)                          # "batch"
        advantages = rewards - mean_grouped_rewards
        if scale_rewards != "none": advantages = advantages / (std_rewards + 1e-4)
        advantages = nan_to_num(advantages, nan=0.0)

    `nanstd` is TRL's own helper (trl/trainer/utils.py::nanstd, Bessel-corrected).
    """
    from trl.trainer.utils import nanstd

    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        if num_generations > 1:
            std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    else:
        raise ValueError(scale_rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def trl_rloo_advantages(rewards: torch.Tensor, num_generations: int, *, beta: float = 0.0,
                        old_per_token_logps=None, ref_per_token_logps=None, completion_mask=None,
                        normalize_advantages: bool = False) -> torch.Tensor:
    """RLOO advantages [B], with TRL's sequence-summed k1 penalty in the reward when beta != 0.

    Source: trl/trainer/rloo_trainer.py, `RLOOTrainer._generate_and_score_completions`:

        per_token_kl = old_per_token_logps - ref_per_token_logps
        kl = (per_token_kl * completion_mask).sum(-1);  rewards = rewards - beta * kl
        baselines = (nansum(grouped) - grouped) / (scorable_counts - 1);  advantages = rewards - baselines
        if normalize_advantages: advantages = (advantages - nanmean) / (nanstd(advantages) + 1e-4)
        advantages = nan_to_num(advantages, nan=0.0)
    """
    from trl.trainer.utils import nanstd

    if beta != 0.0:
        per_token_kl = old_per_token_logps - ref_per_token_logps
        kl = (per_token_kl * completion_mask).sum(-1)
        rewards = rewards - beta * kl
    grouped_rewards = rewards.view(-1, num_generations)
    scorable_counts = (~torch.isnan(grouped_rewards)).sum(dim=1, keepdim=True)
    grouped_sum = torch.nansum(grouped_rewards, dim=1, keepdim=True)
    if num_generations > 1:
        baselines = ((grouped_sum - grouped_rewards) / (scorable_counts - 1)).view(-1)
        advantages = rewards - baselines
    else:
        advantages = torch.zeros_like(rewards)
    if normalize_advantages:
        advantages = (advantages - torch.nanmean(advantages)) / (nanstd(advantages) + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


# ----------------------------------------------------------------------------------------------------
# Losses


def trl_grpo_loss(per_token_logps, old_per_token_logps, advantages, mask, *, loss_type="dapo",
                  importance_sampling_level="token", epsilon_low=0.2, epsilon_high=0.2, delta=None, beta=0.0,
                  ref_per_token_logps=None, use_bias_correction_kl=False, sapo_temperature_pos=1.0,
                  sapo_temperature_neg=1.05, max_completion_length=None, num_items_in_batch=None):
    """The scalar GRPO-family loss of one micro-batch.

    Source: trl/trainer/grpo_trainer.py, `GRPOTrainer._compute_loss` (loss types grpo, bnpo, dr_grpo,
    dapo, cispo, sapo, luspo; `epsilon_low = args.epsilon`, `epsilon_high = args.epsilon_high or
    args.epsilon` from `GRPOTrainer.__init__`). `advantages` is [B] (one value per completion), as TRL
    stores it. With the single-process values of this module's docstring the normalizers are:
    grpo/sapo/bnpo/dr_grpo/luspo divide by GA = 1; dapo/cispo divide by
    `num_items_in_batch / num_processes * GA / steps_per_generation` = `num_items_in_batch`.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    log_ratio = per_token_logps - old_per_token_logps
    if importance_sampling_level == "token":
        log_importance_weights = log_ratio
    elif importance_sampling_level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)
    else:
        raise ValueError(importance_sampling_level)
    coef_1 = torch.exp(log_importance_weights)

    if beta != 0.0:
        per_token_kl = (torch.exp(ref_per_token_logps - per_token_logps)
                        - (ref_per_token_logps - per_token_logps) - 1)
        if use_bias_correction_kl:
            per_token_kl = per_token_kl * coef_1

    if loss_type == "cispo":
        clamped_ratios = torch.clamp(coef_1, max=epsilon_high).detach()
        per_token_loss = -clamped_ratios * advantages * per_token_logps
    elif loss_type in ["grpo", "bnpo", "dr_grpo", "dapo", "luspo"]:
        coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
        if delta is not None:
            coef_1 = torch.clamp(coef_1, max=delta)
        per_token_loss1 = coef_1 * advantages
        per_token_loss2 = coef_2 * advantages
        per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    elif loss_type == "sapo":
        temperatures = torch.where(advantages > 0, sapo_temperature_pos, sapo_temperature_neg)
        soft_coef_1 = torch.sigmoid(temperatures * (coef_1 - 1)) * 4 / temperatures
        per_token_loss = -soft_coef_1 * advantages
    else:
        raise ValueError(loss_type)

    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl

    if loss_type in ["grpo", "sapo"]:
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type == "bnpo":
        loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        loss = (per_token_loss * mask).sum() / (per_token_loss.size(0) * max_completion_length)
    elif loss_type in ["cispo", "dapo"]:
        normalizer = torch.as_tensor(num_items_in_batch, dtype=per_token_loss.dtype).clamp(min=1.0)
        loss = (per_token_loss * mask).sum() / normalizer
    elif loss_type == "luspo":
        loss = (per_token_loss * mask).sum(-1).mean()
    return loss


def trl_gmpo_loss(per_token_logps, old_per_token_logps, advantages, mask, *, epsilon_low=0.4, epsilon_high=0.4,
                  beta=0.0, ref_per_token_logps=None):
    """GMPO loss (geometric mean of sign-aware log-space-clipped token ratios), advantages [B].

    Source: trl/experimental/gmpo/gmpo_trainer.py, `GMPOTrainer._compute_loss`:

        clamped = clamp(log_ratio, -eps_low, eps_high)
        clipped = where(A > 0, minimum(log_ratio, clamped), maximum(log_ratio, clamped))
        coef = exp(sum(clipped * mask) / mask.sum().clamp(min=1));  loss = mean(-coef * A [+ beta * seq_kl])
    """
    log_ratio = per_token_logps - old_per_token_logps
    clamped_log_ratio = torch.clamp(log_ratio, min=-epsilon_low, max=epsilon_high)
    advantages_col = advantages.unsqueeze(1)
    clipped_log_ratio = torch.where(advantages_col > 0, torch.minimum(log_ratio, clamped_log_ratio),
                                    torch.maximum(log_ratio, clamped_log_ratio))
    log_importance_weights = (clipped_log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    coef = torch.exp(log_importance_weights)
    per_sequence_loss = -coef * advantages
    if beta != 0.0:
        per_token_kl = (torch.exp(ref_per_token_logps - per_token_logps)
                        - (ref_per_token_logps - per_token_logps) - 1)
        per_sequence_loss = per_sequence_loss + beta * (per_token_kl * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_sequence_loss.mean()


# ----------------------------------------------------------------------------------------------------
# Running TRL's own method on a stand-in trainer (checks the transcriptions above)


class _SingleProcessAccelerator:
    num_processes = 1
    sync_gradients = True

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def call_trl_compute_loss(method, per_token_logps, old_per_token_logps, advantages, mask, *, loss_type="dapo",
                          importance_sampling_level="token", epsilon_low=0.2, epsilon_high=0.2, delta=None,
                          beta=0.0, ref_per_token_logps=None, use_bias_correction_kl=False,
                          sapo_temperature_pos=1.0, sapo_temperature_neg=1.05, max_completion_length=None,
                          num_items_in_batch=None):
    """Call TRL's unbound `method` (e.g. `GRPOTrainer._compute_loss`) with a stand-in `self`.

    The stand-in holds the single-process values of this module's docstring; its
    `_get_per_token_logps_and_entropies` returns the given `per_token_logps` (the model forward is the
    only part replaced). Returns TRL's loss tensor, differentiable w.r.t. `per_token_logps`.
    """
    B, T = mask.shape
    args = SimpleNamespace(
        delta=delta, use_bias_correction_kl=use_bias_correction_kl, sapo_temperature_pos=sapo_temperature_pos,
        sapo_temperature_neg=sapo_temperature_neg, steps_per_generation=1)
    trainer = SimpleNamespace(
        args=args, model=SimpleNamespace(training=True), accelerator=_SingleProcessAccelerator(),
        loss_type=loss_type, importance_sampling_level=importance_sampling_level, epsilon_low=epsilon_low,
        epsilon_high=epsilon_high, beta=beta, max_completion_length=max_completion_length,
        current_gradient_accumulation_steps=1, top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        use_vllm=False, vllm_importance_sampling_correction=False, aux_loss_enabled=False,
        _entropy_bonus_enabled=False, _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _get_per_token_logps_and_entropies=lambda *a, **k: (
            per_token_logps, torch.zeros_like(per_token_logps.detach()), None),
    )
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": mask,
        "advantages": advantages, "old_per_token_logps": old_per_token_logps,
    }
    if ref_per_token_logps is not None:
        inputs["ref_per_token_logps"] = ref_per_token_logps
    if num_items_in_batch is not None:
        inputs["num_items_in_batch"] = torch.as_tensor(float(num_items_in_batch), dtype=per_token_logps.dtype)
    return method(trainer, None, inputs)


# ====================================================================================================
# OpenRLHF (OpenRLHF/OpenRLHF), re-derived from its source: it cannot be installed here (deepspeed/CUDA).
#
# Read for the math, written here in float64 with OpenRLHF's variable names and order of operations.
# Files and the commits read (stored copies of the repository):
#   openrlhf/models/loss.py                         f5b3f08a05fd6cbd9a5b712ed931bbb72c24f2c4  PolicyLoss, ValueLoss
#   openrlhf/cli/train_ppo_ray.py                   f5b3f08a05fd6cbd9a5b712ed931bbb72c24f2c4  defaults, G > 1 assert
#   openrlhf/trainer/ray/ppo_actor.py               f5b3f08a05fd6cbd9a5b712ed931bbb72c24f2c4  KL-loss placement
#   openrlhf/models/utils.py                        473f61bd290a1718381e65338316a87b4f722b5a  compute_approx_kl,
#                                                                                             compute_reward,
#                                                                                             masked_mean/normalize
#   openrlhf/trainer/ppo_utils/experience_maker.py  89308a0b768dec168dff240ae746710fc967a49b  compute_advantages_
#                                                                                             and_returns
#   openrlhf/trainer/ppo_utils/kl_controller.py     658ecc348f2a46adc583498284690abaa9e3e7ca  AdaptiveKLController
#   openrlhf/trainer/ppo_utils/length_penalty.py    d3f700b7d236df4f11a99b3c53073dbeccae76f4  apply_overlong_penalty
# Left out: the `.float()` (fp32) casts in compute_approx_kl and in the advantage whitening, Ray/DeepSpeed,
# dynamic batching (its `indices` permutation is the identity without --use_dynamic_batch) and logging.
# ====================================================================================================


def openrlhf_masked_mean(tensor, mask, dim=None):
    """openrlhf/models/utils.py::masked_mean (473f61bd): sum(t * m) / sum(m), no clamp (an empty row is NaN)."""
    if mask is None:
        return tensor.mean(dim=dim)
    return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim)


def openrlhf_masked_normalize(tensor, mask, dim: int = 1, eps: float = 1e-8):
    """openrlhf/models/utils.py::masked_normalize (473f61bd): population-variance whitening,
    (t - mean) * rsqrt(clamp(var, eps)). (Upstream has no keepdim, so it is meaningful on 1-D inputs or
    dim=None; used here on flattened vectors.)"""
    tensor = tensor * mask
    mean = openrlhf_masked_mean(tensor, mask, dim=dim)
    mean_centered = tensor - mean
    var = openrlhf_masked_mean(mean_centered**2, mask, dim=dim)
    return mean_centered * var.clamp(min=eps).rsqrt()


def openrlhf_compute_approx_kl(log_probs, log_probs_base, kl_estimator: str = "k1"):
    """openrlhf/models/utils.py::compute_approx_kl (473f61bd), without the `.float()` casts:

        k1 = logp - base;  k2 = (logp - base)^2 / 2;  k3 = exp(-(logp - base)) - 1 + (logp - base)
        result.clamp(-10, 10)      (every estimator; no clamp on the log-ratio itself)
    """
    if kl_estimator == "k1":
        log_ratio = log_probs - log_probs_base
    if kl_estimator == "k2":
        log_ratio = log_probs - log_probs_base
        log_ratio = log_ratio**2 / 2.0
    if kl_estimator == "k3":
        log_ratio = log_probs - log_probs_base
        log_ratio = -log_ratio
        log_ratio = log_ratio.exp() - 1 - log_ratio
    log_ratio = log_ratio.clamp(min=-10, max=10)
    return log_ratio


def openrlhf_compute_reward(r, kl_coef: float, kl, action_mask, reward_clip_range=(-10.0, 10.0)):
    """openrlhf/models/utils.py::compute_reward (473f61bd): the (already shaped) outcome reward r [B],
    clamped to `reward_clip_range` (train_ppo_ray.py default (-10, 10)), on each row's last action token,
    plus -kl_coef * kl on every position (masked later, in get_cumulative_returns)."""
    if kl_coef <= 0.0:
        kl_coef = 0.0
    if reward_clip_range:
        r = r.clamp(min=reward_clip_range[0], max=reward_clip_range[1])
    kl_reward = -kl_coef * kl
    eos_indices = action_mask.size(1) - 1 - action_mask.long().fliplr().argmax(dim=1, keepdim=True)
    last_reward = torch.zeros_like(kl).scatter_(dim=1, index=eos_indices, src=r.unsqueeze(1).to(kl.dtype))
    return last_reward + kl_reward


def openrlhf_cumulative_returns(rewards, action_mask, gamma: float):
    """experience_maker.py::RemoteExperienceMaker.get_cumulative_returns (89308a0b): G_t = m_t r_t + gamma G_{t+1}
    over every position (the running sum also passes, discounted, through masked positions)."""
    response_length = rewards.size(1)
    returns = torch.zeros_like(rewards)
    cumulative_return = torch.zeros(rewards.size(0), dtype=rewards.dtype)
    if action_mask is not None:
        rewards = action_mask * rewards
    for t in reversed(range(response_length)):
        cumulative_return = rewards[:, t] + gamma * cumulative_return
        returns[:, t] = cumulative_return
    return returns


OPENRLHF_ESTIMATORS = ("reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo")


def openrlhf_advantages(rewards, action_mask, n_samples_per_prompt: int, advantage_estimator: str, *,
                        gamma: float = 1.0, kl=None, kl_coef: float = 0.0, reward_clip_range=(-10.0, 10.0),
                        no_advantage_std_norm: bool = False):
    """Advantages [B, T] of the critic-free estimators: experience_maker.py (89308a0b)
    `RemoteExperienceMaker.compute_advantages_and_returns`, for one experience holding the whole batch
    (the final whitening pools all experiences' tokens, so this is the same statistic).

        rewards = rewards.reshape(-1, n)                    # consecutive groups of n_samples_per_prompt
        rloo:                   rewards - (rewards.sum(-1) - rewards) / (n - 1)
        reinforce_baseline, dr_grpo:  rewards - rewards.mean(-1)
        group_norm:             (rewards - mean) / (rewards.std(-1) + 1e-9)        (torch.std: Bessel)
        reinforce:              rewards unchanged
        reward = compute_reward(rewards, kl_coef, kl, action_mask, reward_clip_range)
        returns = get_cumulative_returns(reward, action_mask, gamma)     (gamma forced to 1 except reinforce)
        advantages = returns
        reinforce, reinforce_baseline (and gae): token whitening over the batch,
            mean = sum(A m) / sum(m);  var = sum((A - mean)^2 m) / sum(m);  A = (A - mean) * rsqrt(clamp(var, 1e-8))
            (applied to every position, padding included; compare on the mask)

    `openrlhf/cli/train_ppo_ray.py` (f5b3f08a) asserts n_samples_per_prompt > 1 for rloo,
    reinforce_baseline and group_norm; the same check is made here.
    """
    if advantage_estimator not in OPENRLHF_ESTIMATORS:
        raise ValueError(advantage_estimator)
    if advantage_estimator in ["rloo", "reinforce_baseline", "group_norm"]:
        assert n_samples_per_prompt > 1, f"{advantage_estimator} requires n_samples_per_prompt > 1"
    if kl is None:
        kl = torch.zeros_like(action_mask, dtype=rewards.dtype)
    rewards = rewards.reshape(-1, n_samples_per_prompt)
    if advantage_estimator == "rloo":
        baseline = (rewards.sum(-1, keepdim=True) - rewards) / (n_samples_per_prompt - 1)
        rewards = rewards - baseline
    elif advantage_estimator in ["reinforce_baseline", "dr_grpo"]:
        rewards = rewards - rewards.mean(-1, keepdim=True)
    elif advantage_estimator == "group_norm":
        rewards = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-9)
    rewards = rewards.reshape(-1)

    reward = openrlhf_compute_reward(rewards, kl_coef, kl, action_mask=action_mask,
                                     reward_clip_range=reward_clip_range)
    if advantage_estimator != "reinforce":
        gamma = 1.0  # "gamma is set to 1.0 for rloo, reinforce_baseline, and group_norm"
    advantages = openrlhf_cumulative_returns(reward, action_mask, gamma)

    if advantage_estimator in ["reinforce", "reinforce_baseline"]:
        advantages_vector = advantages.flatten()
        action_masks_vector = action_mask.flatten()
        num_actions = action_masks_vector.sum()
        mean = (advantages_vector * action_masks_vector).sum() / num_actions
        if not no_advantage_std_norm:
            var = ((advantages_vector - mean).pow(2) * action_masks_vector).sum() / num_actions
            rstd = var.clamp(min=1e-8).rsqrt()
        else:
            rstd = 1
        advantages = (advantages - mean) * rstd
    return advantages


def openrlhf_policy_loss(log_probs, old_log_probs, advantages, action_mask, *, clip_eps_low=0.2, clip_eps_high=0.2,
                         dual_clip=None, token_level_loss=True, policy_loss_type="ppo"):
    """openrlhf/models/loss.py::PolicyLoss.forward (f5b3f08a); returns the loss only.

        ppo:  ratio = exp(logp - old)                                     (no log-ratio clamp at this commit)
        gspo: ratio = exp(sum(m logr) / sum(m)) broadcast * m; token_level_loss forced False
        surr1 = ratio A;  surr2 = clamp(ratio, 1 - eps_low, 1 + eps_high) A
        loss = -min(surr1, surr2)                                         (dual_clip None)
             = -where(A < 0, max(min(surr1, surr2), dual_clip A), min(surr1, surr2))
        token_level_loss: masked_mean(loss, m) (global token mean); else masked_mean(loss, m, -1).mean()
    """
    if policy_loss_type == "gspo":
        token_level_loss = False
    if dual_clip is not None:
        assert dual_clip > 1.0, f"dual_clip must be > 1.0, got {dual_clip}"
    log_ratio = log_probs - old_log_probs
    if policy_loss_type == "ppo":
        ratio = log_ratio.exp()
    elif policy_loss_type == "gspo":
        ratio = (log_ratio * action_mask).sum(dim=-1) / action_mask.sum(dim=-1)
        ratio = ratio.exp().unsqueeze(-1) * action_mask
    else:
        raise ValueError(f"Invalid policy loss type: {policy_loss_type}")
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - clip_eps_low, 1 + clip_eps_high) * advantages
    if dual_clip is None:
        loss = -torch.min(surr1, surr2)
    else:
        clip1 = torch.min(surr1, surr2)
        clip2 = torch.max(clip1, dual_clip * advantages)
        loss = -torch.where(advantages < 0, clip2, clip1)
    return (openrlhf_masked_mean(loss, action_mask, dim=None) if token_level_loss
            else openrlhf_masked_mean(loss, action_mask, dim=-1).mean())


def openrlhf_value_loss(values, old_values, returns, action_mask, *, clip_eps=None, token_level_loss=True):
    """openrlhf/models/loss.py::ValueLoss.forward (f5b3f08a):
    0.5 * agg(max((old + clamp(V - old, +-eps) - R)^2, (V - R)^2)), or 0.5 * agg((V - R)^2) if clip_eps is None.
    (train_ppo_ray.py default --value_clip 0.5.)"""
    if clip_eps is not None:
        values_clipped = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        surr1 = (values_clipped - returns) ** 2
        surr2 = (values - returns) ** 2
        loss = torch.max(surr1, surr2)
    else:
        loss = (values - returns) ** 2
    loss = (openrlhf_masked_mean(loss, action_mask, dim=None) if token_level_loss
            else openrlhf_masked_mean(loss, action_mask, dim=-1).mean())
    return 0.5 * loss


def openrlhf_kl_loss(log_probs, base_action_log_probs, action_mask, kl_coef: float, kl_estimator: str = "k3"):
    """openrlhf/trainer/ray/ppo_actor.py::ActorPPOTrainer.training_step (f5b3f08a), `--use_kl_loss`:
    loss += masked_mean(compute_approx_kl(logp, ref, kl_estimator), action_mask) * kl_ctl.value."""
    kl = openrlhf_compute_approx_kl(log_probs, base_action_log_probs, kl_estimator=kl_estimator)
    return openrlhf_masked_mean(kl, action_mask) * kl_coef


class OpenRLHFAdaptiveKLController:
    """openrlhf/trainer/ppo_utils/kl_controller.py::AdaptiveKLController (658ecc34), np.clip as min/max."""

    def __init__(self, init_kl_coef, target, horizon):
        self.value = init_kl_coef
        self.target = target
        self.horizon = horizon

    def update(self, current, n_steps):
        proportional_error = min(max(current / self.target - 1, -0.2), 0.2)
        mult = 1 + proportional_error * n_steps / self.horizon
        self.value *= mult


def openrlhf_overlong_penalty(rewards, response_lengths, generate_max_len: int, overlong_buffer_len: float,
                              overlong_penalty_factor: float = 1.0):
    """openrlhf/trainer/ppo_utils/length_penalty.py::apply_overlong_penalty (d3f700b7; the same loop is inline in
    experience_maker.py 89308a0b), on a copy of rewards [B]:
        expected_len = generate_max_len - overlong_buffer_len
        exceed_len = min(len - expected_len, overlong_buffer_len)
        if exceed_len > 0: reward += -exceed_len / overlong_buffer_len * overlong_penalty_factor
    """
    assert generate_max_len >= overlong_buffer_len
    rewards = rewards.clone()
    expected_len = generate_max_len - overlong_buffer_len
    for j in range(len(response_lengths)):
        valid_response_length = float(response_lengths[j])
        exceed_len = min(valid_response_length - expected_len, overlong_buffer_len)
        if exceed_len > 0:
            rewards[j] += -exceed_len / overlong_buffer_len * overlong_penalty_factor
    return rewards
