"""Re-derivation of DART-GUI's policy loss with its truncated importance weight, for tests/anchors/test_dart.py.

Transcribed from Computer-use-agents/dart-gui @ e0e606d3082c8ebec296c4dd4b8e01ecde94edd0,
`verl/trainer/ppo/core_algos.py::compute_policy_loss` (the TIS weight `w = torch.clamp(ratio_iv, max=1.0)`, the
all-zero-row fallback to old_log_prob, the SFT sequence gate `ratio_iv_seq < 0.2`), `agg_loss` ("token-mean",
"seq-mean-token-mean") and `verl/utils/torch_functional.py::masked_mean`; variable names and order of operations
kept; the print and the unused `pg_loss_no_old` removed. `traj_entropy_topk` transcribes the commented-out
`entropy_filter` block of `verl/trainer/ppo/ray_trainer_async.py`.
"""
from __future__ import annotations

import torch


def masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def agg_loss(loss_mat, loss_mask, loss_agg_mode):
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    if loss_agg_mode == "seq-mean-token-mean":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1)
        return torch.mean(seq_losses)
    raise ValueError(loss_agg_mode)


def tis_weight(old_log_prob, vllm_log_prob):
    """The weight block of compute_policy_loss: w = clamp(exp(old - vllm), max=1), all-zero vllm rows -> old."""
    zero_rows = torch.all(vllm_log_prob.abs() < 1e-9, dim=-1)
    vllm_log_prob = torch.where(zero_rows.unsqueeze(-1), old_log_prob, vllm_log_prob)
    ratio_iv = torch.exp(old_log_prob - vllm_log_prob)
    return torch.clamp(ratio_iv, max=1.0)


def compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, vllm_log_prob=None, cliprange=None,
                        cliprange_low=None, cliprange_high=None, clip_ratio_c=3.0, loss_agg_mode="token-mean"):
    """(pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower) of the reference, without the SFT branch."""
    assert clip_ratio_c > 1.0
    negative_approx_kl = log_prob - old_log_prob
    negative_approx_kl = torch.clamp(negative_approx_kl, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    if cliprange_low is None:
        cliprange_low = cliprange
    if cliprange_high is None:
        cliprange_high = cliprange
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if vllm_log_prob is not None:
        w = tis_weight(old_log_prob, vllm_log_prob)
        pg_losses = w * pg_losses
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def sft_gate(old_log_prob, vllm_log_prob, reward):
    """The rows the reference's optional SFT loss trains on: exp(sum_t (old - vllm)) < 0.2 and reward == 1."""
    ratio_iv_seq = torch.exp(torch.sum(old_log_prob - vllm_log_prob, dim=-1))
    return (ratio_iv_seq < 0.2).float() * (reward == 1).float()


def traj_entropy_topk(entropys, entropy_ratio):
    """The commented-out entropy_filter block: [B, 1] bool mask of the top int(ratio * B) rows by entropys.mean(1)."""
    traj_entropy = entropys.mean(dim=1)
    k = int(entropy_ratio * traj_entropy.size(0))
    topk_values, topk_idx = torch.topk(traj_entropy, k)
    entropy_mask = torch.zeros_like(traj_entropy, dtype=torch.bool)
    entropy_mask[topk_idx] = True
    return entropy_mask.unsqueeze(1)
