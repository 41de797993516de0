"""HAPO's formulas transcribed from its repository (used by tests/anchors/test_hapo.py).

Source: starriver030515/HAPO at commit 7671dde3e268779a949954ec75ed3edda45f7e0a, a fork of verl whose HAPO
additions cannot be imported (the fork is not installed, and its vLLM sampler patch lives inside vLLM):

    verl/trainer/ppo/core_algos.py   torch_quantile, compute_entropy_h, ada_clip, ada_advantage,
                                     compute_hapo_outcome_advantage, compute_grpo_outcome_advantage,
                                     compute_policy_loss (the HAPO version), agg_loss
    verl/utils/torch_functional.py   masked_mean
    vllm/v1/sample/sampler.py        Sampler.sample.compute_entropy_based_temperature (the adaptive temperature)

Variable names and the order of operations are the code's; only the registry decorators, logging and the
length statistics that `compute_policy_loss` returns besides the loss are dropped. `compute_entropy_h` keeps
the bug the catalog documents (h <= 0 times 1 / min(h < 0), a negative scale).
"""
from __future__ import annotations

from collections import defaultdict
from math import ceil, floor

import torch


def masked_mean(values, mask, axis=None):
    """verl/utils/torch_functional.py::masked_mean."""
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def torch_quantile(tensor, q, dim=None, *, keepdim=False, interpolation="linear", out=None):
    """core_algos.py::torch_quantile (input checks kept)."""
    q_float = float(q)
    if not 0 <= q_float <= 1:
        raise ValueError(f"Only values 0<=q<=1 are supported (got {q_float!r})")
    if dim_was_none := dim is None:
        dim = 0
        tensor = tensor.reshape((-1, *(1,) * (tensor.ndim - 1)))
    idx_float = q_float * (tensor.shape[dim] - 1)
    if interpolation == "nearest":
        idxs = [round(idx_float)]
    elif interpolation == "lower":
        idxs = [floor(idx_float)]
    elif interpolation == "higher":
        idxs = [ceil(idx_float)]
    elif interpolation in {"linear", "midpoint"}:
        low = floor(idx_float)
        idxs = [low] if idx_float == low else [low, low + 1]
        weight = idx_float - low if interpolation == "linear" else 0.5
    else:
        raise ValueError(f"unsupported interpolation {interpolation!r}")
    if out is not None:
        raise ValueError(f"Only None value is currently supported for out (got {out!r})")
    outs = [torch.kthvalue(tensor, idx + 1, dim, keepdim=True)[0] for idx in idxs]
    out = outs[0] if len(outs) == 1 else outs[0].lerp(outs[1], weight)
    if keepdim:
        return out
    return out.squeeze() if dim_was_none else out.squeeze(dim)


def compute_entropy_h(entropy, eps=1e-8, response_mask=None, entropy_pivot=0.5):
    """core_algos.py::compute_entropy_h: (h_hat, (median, std, scale_pos, scale_neg)). Bug kept: scale_neg < 0."""
    if entropy is None:
        return None, None
    if response_mask is None:
        response_mask = (entropy > 0).bool()
    else:
        response_mask = response_mask.bool()
    entropy = torch.log(entropy.clamp_min(eps))
    median = torch_quantile(entropy[response_mask], entropy_pivot, dim=None, interpolation="nearest")
    median = median.nan_to_num(0.0)
    h = entropy - median
    N = response_mask.sum().clamp_min(1.0)
    var = (h.pow(2).masked_fill(~response_mask, 0.0).sum() / N).clamp_min(eps)
    std = var.sqrt()
    h = h / std
    pos_max = h.masked_fill(~(response_mask & (h > 0)), 0.0).max().clamp_min(eps)
    neg_min = h.masked_fill(~(response_mask & (h < 0)), 0.0).min().clamp_max(-eps)
    scale_pos = 1.0 / pos_max
    scale_neg = 1.0 / neg_min
    h_hat = torch.where(h > 0, h * scale_pos, torch.where(h <= 0, h * scale_neg, torch.zeros_like(h)))
    return h_hat, (median, std, scale_pos, scale_neg)


def ada_clip(cliprange_low=0.2, cliprange_high=0.2, h_hat=None, clip_alpha=1.0):
    """core_algos.py::ada_clip."""
    cliprange_low = torch.full_like(h_hat, cliprange_low)
    cliprange_high = torch.full_like(h_hat, cliprange_high)
    cliprange_low_ent = cliprange_low * (1 - h_hat * clip_alpha)
    cliprange_high_ent = cliprange_high * (1 + h_hat * clip_alpha)
    low_entropy_mask = h_hat <= 0
    high_entropy_mask = h_hat > 0
    cliprange_low[low_entropy_mask] = cliprange_low_ent[low_entropy_mask]
    cliprange_high[high_entropy_mask] = cliprange_high_ent[high_entropy_mask]
    return cliprange_low, cliprange_high


def ada_advantage(advantages, h_hat, ratio, cliprange_low, cliprange_high, adv_beta=1.0):
    """core_algos.py::ada_advantage."""
    advantages_ent = advantages * (1 + adv_beta * h_hat)
    neutral_left, neutral_right = 1.0 - cliprange_low / 2, 1.0 + cliprange_high / 2
    pos_adv = torch.where((ratio > neutral_left) & (ratio < neutral_right), advantages, advantages_ent)
    neg_adv = torch.where((ratio > neutral_left) & (ratio < neutral_right), advantages_ent, advantages)
    advantages = torch.where(h_hat > 0, pos_adv, neg_adv)
    return advantages


def agg_loss(loss_mat, loss_mask, loss_agg_mode):
    """core_algos.py::agg_loss (the modes HAPO's fork has)."""
    if loss_agg_mode == "token-mean":
        loss = masked_mean(loss_mat, loss_mask)
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        loss = torch.mean(seq_losses)
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1)
        loss = torch.mean(seq_losses)
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")
    return loss


def compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, cliprange=None, cliprange_low=None,
                        cliprange_high=None, clip_ratio_c=3.0, loss_agg_mode="token-mean", entropy_pivot=0.0,
                        adaptive_clip=False, clip_alpha=1.0, adaptive_advantage=False, adv_beta=1.0, entropy=None):
    """core_algos.py::compute_policy_loss (HAPO version): (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower)."""
    assert clip_ratio_c > 1.0
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    if cliprange_low is None:
        cliprange_low = cliprange
    if cliprange_high is None:
        cliprange_high = cliprange
    with torch.no_grad():
        h_hat, _ = compute_entropy_h(entropy, response_mask=response_mask, entropy_pivot=entropy_pivot)
        if adaptive_clip:
            cliprange_low, cliprange_high = ada_clip(cliprange_low, cliprange_high, h_hat, clip_alpha)
        if adaptive_advantage:
            advantages = ada_advantage(advantages, h_hat, ratio, cliprange_low, cliprange_high, adv_beta)
    clip_low, clip_high = 1.0 - cliprange_low, 1.0 + cliprange_high
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, clip_low, clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True):
    """core_algos.py::compute_grpo_outcome_advantage (the fork's version)."""
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def compute_hapo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True, entropys=None):
    """core_algos.py::compute_hapo_outcome_advantage: token-level group average with the GRPO fallback."""
    scores_grpo, _ = compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon,
                                                    norm_adv_by_std_in_grpo)
    scores = token_level_rewards.sum(dim=-1)
    scores = scores.unsqueeze(-1) * response_mask
    id2score = defaultdict(list)
    id2entropy = defaultdict(list)
    id2mask = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
            id2entropy[index[i]].append(entropys[i])
            id2mask[index[i]].append(response_mask[i])
        for idx in id2score:
            id2score[idx], masks = torch.stack(id2score[idx]), torch.stack(id2mask[idx])
            valid_vals = id2score[idx].masked_select(masks.bool())
            id2mean[idx] = valid_vals.mean()
            id2std[idx] = valid_vals.std(unbiased=False)
        for idx in id2score:
            group_idx = [i for i, x in enumerate(index) if x == idx]
            grp_scores = scores[group_idx]
            if norm_adv_by_std_in_grpo:
                normed = (grp_scores - id2mean[idx]) / (id2std[idx] + epsilon)
            else:
                normed = grp_scores - id2mean[idx]
            if torch.any(torch.abs(normed) >= 5):
                scores[group_idx] = scores_grpo[group_idx]
            else:
                scores[group_idx] = normed
    return scores, scores


def compute_entropy_based_temperature(logits, input_temperature, adaptive_temperature=False, temperature_tau=0.05,
                                      norm_entropys=None, eps=1e-6):
    """vllm/v1/sample/sampler.py::Sampler.sample.compute_entropy_based_temperature: T_t [B]."""
    if adaptive_temperature and norm_entropys is not None:
        median, std, scale_pos, scale_neg = norm_entropys
        logits = logits.to(torch.float)
        probs = torch.softmax(logits, dim=-1)
        log_probs = torch.log_softmax(logits, dim=-1)
        entropy = -(probs * log_probs).sum(dim=-1)
        entropy = torch.log(entropy.clamp_min(eps))
        h = (entropy - median) / (std + eps)
        h_hat = torch.where(h > 0, h * scale_pos, torch.where(h <= 0, h * scale_neg, torch.zeros_like(h))).clamp(-1, 1)
        dynamic_temperature = input_temperature * (1.0 + h_hat * temperature_tau)
        return dynamic_temperature
    return input_temperature
