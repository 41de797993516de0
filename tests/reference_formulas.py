"""Re-derivations of anchor formulas that cannot be imported as functions (used by tests/test_reference_*.py).

TRL keeps its advantage and loss math inside trainer methods that need a model, a dataset and an
accelerator. Each function below transcribes one such block from the installed **trl 1.16.0** source,
cited by file and function, keeping TRL's variable names and operations in the same order. Only the
distributed, logging and vLLM parts are removed, with the values of a single-process run substituted:

    accelerator.num_processes = 1, current_gradient_accumulation_steps = 1, steps_per_generation = 1,
    model.training = True, top_entropy_quantile = 1.0 (no entropy mask), off_policy_mask_threshold = None,
    use_vllm = False (no importance_sampling_ratio), no entropy bonus, no router aux loss.

`call_trl_compute_loss` runs TRL's own (unbound) `_compute_loss` on a stand-in trainer object holding
exactly those values; `tests/test_reference_trl.py` (test_grpo_family_loss_matches_trl,
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
