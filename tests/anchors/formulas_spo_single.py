"""SPO's tracker transcribed from verl-project/verl-recipe @ 48ea0a797fa29867ea0ad92aff7d284eec7d4be3 (read at
550d42f53169e41b36921faef86336fdfc558820, whose SPO code is the same) `spo/spo_ray_trainer.py` (used by
tests/anchors/test_spo_single.py):

    RayPPOTrainer.fit           L355-395 offline init (prompt2alpha / prompt2beta) and the sampling weights
                                (prompt2phat / prompt2weight); L530-555 the advantage; L658-670 the update
    RayPPOTrainer._get_spo_rho  L240-305, the "kl" branch from D on: D = masked_mean(|old - cur|), rho clamped

Kept: the code's names and order of operations. Dropped: Ray calls, metrics, DataProto plumbing; the log-probs
(`old_log_probs`, `cur_log_probs`) and `response_mask` are inputs. `masked_mean` is verl.utils.torch_functional's
(sum(values * mask) / (mask.sum() + 1e-8)).
"""
from __future__ import annotations

import random

import torch


def offline_init(prompt2scores: dict, Neff: int, clip_lower: float):
    """fit, L355-372: binarize (> 0), subsample to Neff, then N_init-scaled Beta pseudo-counts."""
    prompt2scores = {k: [int(_ > 0) for _ in v] for k, v in prompt2scores.items()}
    full_prompts = list(prompt2scores.keys())
    if Neff == 0:
        prompt2alpha = {k: 0.5 for k in full_prompts}
        prompt2beta = {k: 0.5 for k in full_prompts}
    else:
        for k, v in prompt2scores.items():
            if len(v) > Neff:
                prompt2scores[k] = random.sample(v, Neff)
        N_init = 1 / (1 - clip_lower)
        prompt2alpha = {k: N_init * (sum(prompt2scores[k]) + 0.5) / (Neff + 1) for k in full_prompts}
        prompt2beta = {k: N_init * (Neff - sum(prompt2scores[k]) + 0.5) / (Neff + 1) for k in full_prompts}
    return prompt2alpha, prompt2beta


def sampling_weights(prompt2alpha: dict, prompt2beta: dict, full_prompts: list):
    """fit, L381-388."""
    EXPLORATION_EPSILON = 0.05
    prompt2phat = {
        k: float(prompt2alpha[k]) / float(prompt2alpha[k] + prompt2beta[k]) for k in full_prompts
    }
    prompt2weight = {
        k: ((prompt2phat[k] * (1.0 - prompt2phat[k])) ** 0.5) + EXPLORATION_EPSILON
        for k in full_prompts
    }
    return prompt2weight


def advantages(prompt2alpha: dict, prompt2beta: dict, micro_prompts: list, sum_reward_tensor: torch.Tensor,
               response_mask: torch.Tensor):
    """fit, L530-559 -> (advantages [bs, L], alpha, beta) with the alpha, beta read before the update."""
    alpha = [prompt2alpha[_] for _ in micro_prompts]
    beta = [prompt2beta[_] for _ in micro_prompts]
    r = sum_reward_tensor
    alpha = torch.tensor(alpha, dtype=torch.float).to(r)
    beta = torch.tensor(beta, dtype=torch.float).to(r)
    Neff = alpha + beta
    p_hats = alpha / Neff
    advantages = r - p_hats
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    advantages = advantages.unsqueeze(-1) * response_mask
    return advantages, alpha, beta


def masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def rho_kl(old_log_probs: torch.Tensor, cur_log_probs: torch.Tensor, response_mask: torch.Tensor,
           clip_lower: float):
    """_get_spo_rho, the "kl" branch from `kl` on -> (rho_clipped, D)."""
    kl = (old_log_probs - cur_log_probs).abs()
    D = masked_mean(kl, response_mask, axis=-1)  # (M,)
    D_half = torch.as_tensor(0.06, dtype=D.dtype, device=D.device)
    rho = torch.pow(2.0, -D / D_half)
    rho_clipped = torch.clamp(rho, min=clip_lower, max=0.96)
    return rho_clipped, D


def update(prompt2alpha: dict, prompt2beta: dict, micro_prompts: list, alpha, beta, r, rho):
    """fit, L658-672: alpha = rho alpha + r, beta = rho beta + (1 - r), written back per prompt (last write wins)."""
    alpha = rho * alpha + r
    beta = rho * beta + (1 - r)
    for i in range(len(alpha)):
        prompt2alpha[micro_prompts[i]] = alpha[i].item()
        prompt2beta[micro_prompts[i]] = beta[i].item()
    return prompt2alpha, prompt2beta
