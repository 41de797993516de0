"""Transcriptions of R3L's amplified advantages, OPMD loss, k2 KL loss and pivot mask.

Source: shiweijiezero/R3L @ d503f6c6b0725a4e8a39311e6f9b71de6bb2f64b
    trinity/algorithm/advantage_fn/opmd_advantage.py   `OPMDReweightAdvGroupAdvantage.calculate_group_advantage`
                                                      L162-190 (`opmd_reweight_adv`)
    trinity/algorithm/advantage_fn/grpo_advantage.py   `GRPOReweightAdvGroupAdvantage.calculate_group_advantage`
                                                      L262-298 (`grpo_reweight_adv`)
    trinity/algorithm/policy_loss_fn/opmd_policy_loss.py  `OPMDPolicyLossFn.__call__` L20-30
    trinity/algorithm/utils.py                         `masked_loss` L9-49 (token-mean and seq-mean-token-mean
                                                      branches), `masked_sum` L52-54, `masked_mean` L57-59
    trinity/algorithm/kl_fn/kl_fn.py                   `KLFn.calculate_kl_loss` L79-92, `K2Fn.calculate_kl` L143-144
    trinity/common/workflows/envs/R3L/alfworld/R3L_workflow.py  `_adjust_action_mask_for_retry` L149-188

Names and the order of operations are theirs. The `Experience` objects become plain lists: a group's rewards
(`exp.reward`) and action masks (`exp.action_mask`, 1-D tensors); each function returns the group's advantages
(`exp.advantages`, which the reference also copies into `exp.returns`) and its metrics. `group_by(exps,
id_type="task")` is `group_by_task` below: the workflow's task ids are "<task>_explore" for the base and distill rows
and "<task>_retry_<i>" (one row each) for a verified correction. `self.` attributes are keyword arguments; the
`torch.no_grad()` blocks are kept. `_adjust_action_mask_for_retry` edits the mask in place, as theirs.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def group_by_task(task_ids: list[str]) -> dict[str, list[int]]:
    """`group_by(exps, id_type="task")`: row indices per task id, in first-seen order."""
    groups = defaultdict(list)
    for i, task in enumerate(task_ids):
        groups[task].append(i)
    return dict(groups)


def opmd_reweight_adv(rewards: list[float], action_masks: list[torch.Tensor], opmd_baseline: str = "mean",
                      tau: float = 1.0):
    """OPMDReweightAdvGroupAdvantage.calculate_group_advantage, L165-190."""
    with torch.no_grad():
        if len(rewards) == 1:
            group_baseline = torch.tensor(0.0)
            group_rewards = torch.tensor([rewards[0]], dtype=torch.float32)
        else:
            group_rewards = torch.tensor([reward for reward in rewards], dtype=torch.float32)
            if opmd_baseline == "mean":
                group_baseline = torch.mean(group_rewards)
            else:
                group_baseline = tau * (
                    torch.logsumexp(group_rewards / tau, dim=-1)
                    - torch.log(torch.tensor(len(rewards)))
                )
        advantages = []
        for reward, action_mask in zip(rewards, action_masks):
            score = reward - group_baseline
            if reward >= 1.0:
                score = 1.0
            elif score >= 0:
                score = score * 3
            advantages.append(score * action_mask)
        metrics = {
            "group_baseline": group_baseline.item(),
            "reward_mean": torch.mean(group_rewards).item(),
        }
    return advantages, metrics


def grpo_reweight_adv(rewards: list[float], action_masks: list[torch.Tensor], epsilon: float = 1e-6,
                      std_cal_level: str = "group", precomputed_std: torch.Tensor | None = None):
    """GRPOReweightAdvGroupAdvantage.calculate_group_advantage, L268-298."""
    with torch.no_grad():
        if len(rewards) == 1:
            group_reward_mean = torch.tensor(0.0)
            group_reward_std = torch.tensor(1.0)
        else:
            rewards_t = torch.tensor([reward for reward in rewards], dtype=torch.float32)
            group_reward_mean = torch.mean(rewards_t)
            group_reward_std = torch.std(rewards_t)

        advantages = []
        for reward, action_mask in zip(rewards, action_masks):
            if std_cal_level == "batch" and precomputed_std is not None:
                score = (reward - group_reward_mean) / (precomputed_std + epsilon)
            else:
                score = (reward - group_reward_mean) / (group_reward_std + epsilon)

            # Reweighting logic
            if reward >= 1.0:
                score = 1.0
            elif score >= 0:
                score = score * 3
            # Negative scores remain unchanged

            advantages.append(score * action_mask)

        metrics = {
            "reward_mean": group_reward_mean.item(),
            "reward_std": group_reward_std.item(),
        }

    return advantages, metrics


def masked_sum(values, mask, axis=None):
    """utils.py L52-54."""
    return (values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    """utils.py L57-59."""
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def masked_loss(values, mask, loss_agg_mode="token-mean", normalizer=None):
    """utils.py L9-49 (the two branches R3L's settings reach)."""
    if loss_agg_mode == "token-mean":
        return masked_mean(values, mask)

    elif loss_agg_mode == "seq-mean-token-mean":
        # Mean over tokens per sequence, then mean over sequences
        seq_losses = masked_mean(values, mask, axis=-1)  # [batch]
        return seq_losses.mean()

    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}.")


def opmd_policy_loss(logprob, action_mask, advantages, tau: float = 1.0, loss_agg_mode: str = "token-mean"):
    """OPMDPolicyLossFn.__call__, L20-30."""
    pg_losses = -advantages * logprob
    opmd_loss = masked_loss(pg_losses, action_mask, loss_agg_mode=loss_agg_mode)
    opmd_loss = opmd_loss / (1.0 + tau)  # for regularization (w.r.t. current pi_theta)
    return opmd_loss, {"opmd_loss": opmd_loss.detach().item()}


def k2_calculate_kl(logprob, ref_logprob):
    """K2Fn.calculate_kl, L143-144."""
    return (logprob - ref_logprob).square() * 0.5


def calculate_kl_loss(logprob, ref_logprob, response_mask, kl_coef: float = 0.001):
    """KLFn.calculate_kl_loss, L79-92, with K2Fn's estimator."""
    kl = k2_calculate_kl(logprob, ref_logprob)
    kl_loss = masked_mean(kl, response_mask)
    metrics = {
        "kl_loss": kl_loss.detach().item(),
        "kl_coef": kl_coef,
    }
    return kl_loss * kl_coef, metrics


def _adjust_action_mask_for_retry(action_mask: torch.Tensor, retry_step: int):
    """R3LAlfworldWorkflow._adjust_action_mask_for_retry, L149-188: the first `retry_step` assistant segments (runs of
    1) of the action mask set to 0, in place."""
    if retry_step <= 0:
        return

    # Find all assistant response regions and mark the first 'retry_step' as non-trainable
    if torch.any(action_mask == 1):
        # Find all segments where action_mask == 1 (assistant responses)
        assistant_segments = []
        in_segment = False
        segment_start = 0

        for i, mask_val in enumerate(action_mask):
            if mask_val == 1 and not in_segment:
                # Start of a new segment
                segment_start = i
                in_segment = True
            elif mask_val == 0 and in_segment:
                # End of current segment
                assistant_segments.append((segment_start, i))
                in_segment = False

        # Handle case where sequence ends with assistant response
        if in_segment:
            assistant_segments.append((segment_start, len(action_mask)))

        # Set the first 'retry_step' assistant segments to 0 (non-trainable)
        for i in range(min(retry_step, len(assistant_segments))):
            start, end = assistant_segments[i]
            action_mask[start:end] = 0
