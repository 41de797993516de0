"""SeeUPO's turn-ratio correction and advantages, transcribed from modelscope/AgentEvolver, branch `seeupo`
@ e59dea41e7211f31d04993bbb28c6666bd153e73, beyondagent/module/trainer/ba_ray_trainer.py (used by
tests/anchors/test_seeupo.py):

    update_ratios                          the running correction after a turn's update (sequence-level ratio of the
                                           updated turn's samples, clipped, multiplied in, clipped again)
    compute_grpo_outcome_advantage_local   GRAE per turn sample (`norm_adv_by_std_in_grpo`, `special_norm`)
    compute_advantage(..., ratios=)        advantages x sg(ratios) (the `# This part is for SeeUPO-ALGs` lines)

`config` is replaced by the two clip values (adv_clip_ratio_low / adv_clip_ratio_high); `index` (task uids) by any
hashables. Variable names and the order of operations are the code's.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def update_ratios(ratios, last_agent_log_prob, now_agent_log_prob, response_mask, clip_ratio_low=0.2,
                  clip_ratio_high=0.2):
    negative_approx_kl = now_agent_log_prob - last_agent_log_prob
    seq_lengths = torch.sum(response_mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * response_mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = negative_approx_kl_seq.detach()
    log_seq_importance_ratio = torch.clamp(log_seq_importance_ratio, min=-10.0, max=10.0)
    seq_importance_ratio = torch.exp(log_seq_importance_ratio)
    seq_importance_ratio = torch.clamp(seq_importance_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    updated_ratio = ratios * seq_importance_ratio if ratios is not None else seq_importance_ratio
    updated_ratio = torch.clamp(updated_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    return updated_ratio


def compute_grpo_outcome_advantage_local(token_level_rewards, response_mask, index, epsilon=1e-6,
                                         norm_adv_by_std_in_grpo=True, special_norm=False):
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
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        if special_norm:
            assert not norm_adv_by_std_in_grpo
            if torch.std(scores) > 1e-6:
                scores = (scores - torch.mean(scores)) / (torch.std(scores))
            else:
                scores = (scores - torch.mean(scores))
            scores = torch.clamp(scores, -3, 3)
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def corrected_advantages(advantages, ratios):
    """compute_advantage's SeeUPO lines: advantages [N, T] x sg(ratios [N])."""
    if ratios is not None:
        ratios_expanded = ratios.unsqueeze(-1)
        advantages = advantages * ratios_expanded.detach()
    return advantages
