"""ROVER's loss and reward shaping transcribed from yuxiaooye/ROVER @ ea5ce635ee03621035d6659845a387879cf20878
(used by tests/anchors/test_rover.py):

    Math/verl/utils/torch_functional.py     sum_log_softmax (L188), masked_mean
    Math/verl/trainer/ppo/core_algos.py     compute_rover_loss (L755), compute_rover_outcome_advantage (L333),
                                            compute_grpo_outcome_advantage (the Math recipe's adv_estimator=grpo)
    Math/verl/workers/actor/dp_actor.py     DataParallelROVERActor.update_policy, the "ROVER start/end" block
                                            (L918-1005): next_q, target, logIS, use_rover_clip, the two losses
    Countdown/verl/trainer/ppo/core_algos.py compute_rover_reward (L156): the Countdown r~ (group mean, no std)

The forward pass is replaced by its outputs: `log_prob`, `current_q` (sum_log_softmax of the tempered logits with
gradient), `old_log_prob`, `old_logits` (the rollout pass's sum_log_softmax). Metrics are dropped except the clip
counts. Variable names and the order of operations are the code's; index lists stand in for `uid` arrays.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def masked_mean(values, mask, axis=None):
    s = (values * mask).sum(axis) if axis is not None else (values * mask).sum()
    return s / (mask.sum(axis=axis) + 1e-8)


def sum_log_softmax(x: torch.Tensor, q=False) -> torch.Tensor:
    orig_dtype = x.dtype  # noqa: F841
    x_float = x.float() if x.dtype != torch.float64 else x  # the code's .float(); float64 kept for the comparison
    D = x_float.shape[-1]
    logsumexp_ = torch.logsumexp(x_float, dim=-1)
    mean_x = (x_float / D).sum(dim=-1)
    term = mean_x - logsumexp_
    return term


def compute_rover_loss(q_values, target, eos_mask, step=0, weights=1):
    rover_loss_ = ((q_values - target.detach()) ** 2)
    rover_loss = masked_mean(rover_loss_, eos_mask)
    return rover_loss


def rover_actor_loss(log_prob, old_log_prob, current_q, old_logits, low_var_reward, response_mask, *, rover_t=1.0,
                     next_q_scale_factor=1.0, use_rover_clip=False, clip_ratio=0.2, response_level_rover_loss=False,
                     on_policy=False):
    """The actor's ROVER block -> (rover_loss, clip_high_count, clip_low_count)."""
    if on_policy:
        old_log_prob = log_prob.detach()
    next_q = rover_t * torch.cat([((current_q[:, 1:] - old_logits[:, 1:])) * response_mask[:, 1:],
                                  torch.zeros_like(response_mask[:, :1])], dim=1)
    scaled_next_q = next_q * next_q_scale_factor
    target = low_var_reward + scaled_next_q

    logIS = rover_t * (log_prob - old_log_prob)
    clip_high_count = clip_low_count = None
    if use_rover_clip:
        clip_high = torch.log(torch.tensor(1.0 + clip_ratio, device=logIS.device, dtype=logIS.dtype))
        clip_low = torch.log(torch.tensor(1.0 - clip_ratio, device=logIS.device, dtype=logIS.dtype))
        condition_high = (target > logIS) & (logIS > clip_high)
        condition_low = (target < logIS) & (logIS < clip_low)
        clip_high_count = torch.sum(condition_high & response_mask.bool()).float()
        clip_low_count = torch.sum(condition_low & response_mask.bool()).float()
        clipped_ratio = torch.where(condition_high, clip_high.detach(),
                                    torch.where(condition_low, clip_low.detach(), logIS))
        q_values = clipped_ratio * response_mask
    else:
        q_values = logIS * response_mask

    if response_level_rover_loss:
        rover_loss = (((q_values).sum(dim=-1) / response_mask.sum(dim=-1) - low_var_reward[:, 0].detach()) ** 2).mean()
    else:
        rover_loss = compute_rover_loss(q_values, target, eos_mask=response_mask)
    return rover_loss, clip_high_count, clip_low_count


def compute_rover_outcome_advantage(token_level_rewards, eos_mask, index, epsilon=1e-6, mask_truncated_samples=False):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        scores_copy = scores.clone()
        for i in range(bsz):
            if scores[i] > 0:
                scores[i] = 0 + 5 * ((1 - sum(scores_copy > 0) / bsz))
            else:
                scores[i] = 0 - 2. * ((1 - sum(scores_copy <= 0) / bsz))
        scores = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask
    return scores, scores


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True):
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def compute_rover_reward(token_level_rewards, eos_mask, index, step=0, norm_adv_by_std_in_grpo=False, epsilon=1e-6):
    response_length = token_level_rewards.shape[-1]
    non_zero_mask = (token_level_rewards != 0)
    scores = (token_level_rewards * non_zero_mask).sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}
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
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = (scores[i] - id2mean[index[i]])
        scores = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask
    return scores, scores
