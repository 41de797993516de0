"""ROLL's chunk ("segment") ratio, chunk returns and segment loss, transcribed from alibaba/ROLL
@ 8eb27cc2dc34c4d1310b169d9b86d339004d811a (used by tests/anchors/test_ipa.py):

    roll/pipeline/agentic/utils.py              compute_segment_masked_mean, compute_agentic_reinforce_return
    roll/pipeline/agentic/agentic_actor_worker.py  ActorWorker.loss_func: `ratio_type == "segment"`, the PPO clip and
                                                the dual clip (pg_loss only: KL, entropy and the train/infer correction
                                                are dropped)
    roll/utils/functionals.py                   agg_loss ("token-mean", "seq-mean-token-mean"), masked_mean, masked_sum

Variable names and the order of operations are the code's (comments translated). ROLL names no function "IPA"; these
are the pieces its README's "IPA" maps to (the chunk-level ratio and the chunk-level discounted return).
"""
from __future__ import annotations

import torch


def compute_segment_masked_mean(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean over each run of consecutive 1s of `mask`, written on that run's positions."""
    batch_size, seq_len = mask.shape
    device = mask.device
    result = torch.zeros_like(tensor)
    for b in range(batch_size):
        sample_mask = mask[b]
        sample_tensor = tensor[b]
        diff = torch.diff(sample_mask, prepend=torch.tensor([0], device=device))
        segment_starts = torch.where(diff == 1)[0]
        segment_ends = torch.where(diff == -1)[0]
        if sample_mask[-1] == 1:
            segment_ends = torch.cat([segment_ends, torch.tensor([seq_len], device=device)])
        if len(segment_starts) != len(segment_ends):
            min_len = min(len(segment_starts), len(segment_ends))
            segment_starts = segment_starts[:min_len]
            segment_ends = segment_ends[:min_len]
        for start, end in zip(segment_starts, segment_ends):
            segment_indices = torch.arange(start, end, device=device)
            segment_mask = sample_mask[segment_indices]
            segment_tensor = sample_tensor[segment_indices]
            if segment_mask.sum() > 0:
                segment_mean = (segment_tensor * segment_mask).sum() / (segment_mask.sum() + 1e-8)
                result[b, segment_indices] = segment_mean * segment_mask
    return result


def compute_agentic_reinforce_return(token_level_rewards: torch.Tensor, gamma, lambd, mask=None):
    """Per run of mask == 1: the discounted sum over runs (from the last) of the reward at each run's last
    position, written on the whole run. Returns (advantages, returns), equal."""
    with torch.no_grad():
        batch_size, gen_len = token_level_rewards.shape
        device = token_level_rewards.device
        returns = torch.zeros_like(token_level_rewards, dtype=torch.float32)
        if mask is None:
            mask = torch.ones_like(token_level_rewards)
        gamma_val = gamma.item() if torch.is_tensor(gamma) else gamma
        for b in range(batch_size):
            sample_mask = mask[b]
            sample_rewards = token_level_rewards[b]
            diff = torch.diff(sample_mask.float(), prepend=torch.tensor([0.0], device=device))
            segment_starts = torch.where(diff == 1)[0]
            segment_ends = torch.where(diff == -1)[0]
            if len(sample_mask) > 0 and sample_mask[-1] == 1:
                segment_ends = torch.cat([segment_ends, torch.tensor([gen_len], device=device)])
            cumulative_return = 0.0
            for start, end in zip(segment_starts.flip(-1), segment_ends.flip(-1)):
                start_idx = start.item()
                end_idx = end.item()
                cumulative_return = sample_rewards[end_idx - 1].item() + gamma_val * cumulative_return
                returns[b, start_idx:end_idx] = cumulative_return
        advantages = returns
    return advantages, returns


def masked_mean(tensor, mask, dim=None):
    if dim is not None:
        mask_sum = mask.sum(axis=dim)
        return torch.where(mask_sum > 0, (tensor * mask).sum(axis=dim) / (mask_sum + 1e-8), torch.zeros_like(mask_sum))
    return (tensor * mask).sum() / (mask.sum() + 1e-8)


def agg_loss(loss_mat, loss_mask, loss_agg_mode, batch_num_tokens=None, global_valid_samples=None):
    """The two modes used here ("token-mean" sums loss_mat unmasked: ROLL's pg_loss is 0 off the mask)."""
    if batch_num_tokens is None:
        batch_num_tokens = loss_mask.sum()
    if global_valid_samples is None:
        global_valid_samples = loss_mat.size(0)
    weights = torch.ones(loss_mask.shape[0], device=loss_mask.device, dtype=loss_mat.dtype)
    if loss_agg_mode == "token-mean":
        return (loss_mat * weights.unsqueeze(-1)).sum() / batch_num_tokens
    if loss_agg_mode == "seq-mean-token-mean":
        seq_losses = masked_mean(loss_mat, loss_mask, dim=-1)
        valid_samples = torch.any(loss_mask > 0, dim=-1).to(loss_mat.dtype)
        return (seq_losses * weights * valid_samples).sum() / (global_valid_samples + 1e-8)
    raise NotImplementedError(loss_agg_mode)


def segment_pg_loss(log_probs, old_log_probs, advantages, response_mask, *, pg_clip=0.2, pg_clip_low=None,
                    pg_clip_high=None, dual_clip_loss=False, loss_agg_mode="seq-mean-token-mean"):
    """ActorWorker.loss_func's policy-gradient part with ratio_type == "segment" (use_pg_clip_range when
    pg_clip_low/high are given). `advantages` are ROLL's, already multiplied by the response mask."""
    log_ratio = log_probs - old_log_probs
    masked_log_ratio = compute_segment_masked_mean(log_ratio, response_mask)
    ratio = masked_log_ratio.exp()
    pg_clip_low = pg_clip if pg_clip_low is None else pg_clip_low
    pg_clip_high = pg_clip if pg_clip_high is None else pg_clip_high
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - pg_clip_low, 1 + pg_clip_high) * advantages
    pg_loss = -torch.min(surr1, surr2)
    if dual_clip_loss:
        dual_clip_loss = -torch.max(-pg_loss, (1 + pg_clip * 2) * advantages)
        pg_loss = torch.where(advantages < 0, dual_clip_loss, pg_loss)
    return agg_loss(loss_mat=pg_loss, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
