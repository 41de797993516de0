"""Re-derivations of DCPO's and AEPO-arbitrary's reference code, which lives inside `RayPPOTrainer.fit`.

Sources (the two repositories carry byte-identical copies of these files):
    597358816/DCPO @ 33f8073e302db6cc04a1e064df89242ba8f236b0
    597358816/AEPO @ b353a05441e9cedaed154d29aa75bcae472a6a27
    verl/trainer/ray_trainer.py   `_select_by_advantage` L166-177, `_compute_bool_reward_by_score` L188-197,
                                  `fit` L730-731 (entropy = 0), branch `alg == "AEPO"` L784-812,
                                  branch `alg == "DCPO"` L813-836, L844-845 (entropy = metrics["actor/entropy_loss"])
    verl/trainer/core_algos.py    `compute_grpo_outcome_advantage` L138-175, `compute_policy_loss` L291-361
    verl/workers/actor/dp_actor.py `_forward_micro_batch` (logits.div_(temperature), then log-probs) and
                                  `update_policy` L322 (entropy_loss = -masked_mean(log_probs))
    verl/trainer/config.py        TrainerConfig: temperature_high 1.2, temperature_low 0.8, entropy_base 0.5,
                                  reinforce_sample_num 60; ActorConfig: clip_ratio_low/high 0.2, clip_ratio_dual 3.0

Variable names and the order of operations are theirs. `DataProto` rows are plain tensors here: `batch[a:b]`
and `DataProto.concat` become index lists, `batch.batch[key]` a tensor, the uid array a list of group ids.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

# ----------------------------------------------------------------------------------------------------
# core_algos.py


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, eps: float = 1e-6):
    """core_algos.py L138-175 (returns only `advantages`; `returns` is the same tensor)."""
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}

    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])

    for idx in id2score:
        assert len(id2score[idx]) > 1, "GRPO needs rollout.n > 1."
        id2mean[idx] = torch.mean(torch.tensor(id2score[idx], dtype=scores.dtype))
        id2std[idx] = torch.std(torch.tensor(id2score[idx], dtype=scores.dtype))

    for i in range(bsz):
        scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + eps)

    returns = scores.unsqueeze(-1) * response_mask
    return returns


def masked_mean(values, mask, dim=None, eps: float = 1e-8):
    """verl/utils/torch_functional.py L84-86 (`VF.masked_mean`)."""
    return (values * mask).sum(dim=dim) / (mask.sum(dim=dim) + eps)


def compute_policy_loss(old_log_probs, log_probs, advantages, response_mask, clip_ratio_low=0.2,
                        clip_ratio_high=0.2, clip_ratio_dual=3.0):
    """core_algos.py L291-361, the final token-mean loss (the clip fractions and ppo_kl dropped)."""
    negative_approx_kl = log_probs - old_log_probs
    ratio = torch.exp(negative_approx_kl)
    clipped_ratio = torch.exp(
        torch.clamp(negative_approx_kl, min=np.log(1.0 - clip_ratio_low), max=np.log(1.0 + clip_ratio_high)))
    pg_loss = -advantages * ratio
    pg_loss2 = -advantages * clipped_ratio
    pg_loss3 = -advantages * clip_ratio_dual
    clipped_pg_loss_higher = torch.max(pg_loss, pg_loss2)
    clipped_pg_loss_lower = torch.min(clipped_pg_loss_higher, pg_loss3)
    final_pg_loss = torch.where(advantages < 0, clipped_pg_loss_lower, clipped_pg_loss_higher)
    final_pg_loss = masked_mean(final_pg_loss, response_mask)
    return final_pg_loss


# ----------------------------------------------------------------------------------------------------
# dp_actor.py


def log_probs_at_temperature(logits, responses, temperature):
    """`_forward_micro_batch`: logits.div_(temperature), then the log-prob of each response token."""
    logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)


def entropy_loss(log_probs, response_mask):
    """`update_policy` L322: the actor entropy the trainer switches on (an estimator: -mean log pi of samples)."""
    return -masked_mean(log_probs, response_mask)


# ----------------------------------------------------------------------------------------------------
# ray_trainer.py


def _select_by_advantage(advantages_2d, threshold=0, absolute=True):
    """L166-177: row ids whose first-token advantage passes the threshold, or None when there are none."""
    advantages = advantages_2d[:, 0]
    if absolute:
        selected_mask = advantages.abs() > threshold
    else:
        selected_mask = advantages > threshold
    selected_indices = selected_mask.nonzero(as_tuple=False).squeeze(-1)
    if len(selected_indices) > 0:
        return selected_indices.tolist()
    else:
        return None


def _compute_bool_reward_by_score(token_level_scores, threshold=0, absolute=True):
    """L188-197: `bool_reward` [B] from the summed token-level scores."""
    values = token_level_scores.sum(dim=1)
    if absolute:
        selected_mask = values.abs() > threshold
    else:
        selected_mask = values > threshold
    bool_tensor = selected_mask.to(torch.bool)
    return bool_tensor


def aepo_temperature(entropy, entropy_base=0.5, temperature_high=1.2, temperature_low=0.8):
    """L785-790."""
    temperature = 1
    if entropy <= entropy_base:
        temperature = temperature_high
    elif entropy > entropy_base:
        temperature = temperature_low
    return temperature


def aepo_entropy_batch(batch_advantages, batch_bak_advantages, entropy, entropy_base=0.5, reinforce_sample_num=60):
    """L802-808 after the re-sampled `batch_bak` has its GRPO advantages: (rows, advantages) of `entropy_batch`.

    rows[i] = ("bak", j) for the j-th re-sampled row, ("batch", j) for the j-th row of the step's batch.
    The reference crashes when nothing is selected (`None.batch`); that case raises here too.
    """
    entropy_controller = _select_by_advantage(batch_bak_advantages, threshold=0.05, absolute=False)
    controller_advantages = torch.ones_like(batch_bak_advantages[entropy_controller])
    if entropy <= entropy_base:
        sample_num = min(reinforce_sample_num, len(entropy_controller))
    elif entropy > entropy_base:
        sample_num = min(reinforce_sample_num, len(entropy_controller)) // 2
    rows = [("bak", j) for j in entropy_controller[:sample_num]] + [
        ("batch", j) for j in range(sample_num, len(batch_advantages))]
    advantages = torch.cat([controller_advantages[:sample_num], batch_advantages[sample_num:]])
    return rows, advantages


def dcpo_advantages(advantages, old_log_probs, old_log_probs_t, token_level_scores, entropy, entropy_base=0.5):
    """L814-833: the target temperature and the mixed advantages (alpha is returned for the tests)."""
    temperature = 1
    if entropy <= entropy_base:
        temperature = 1.2
    elif entropy > entropy_base:
        temperature = 0.8
    entropy_delta = entropy_base - entropy
    bool_reward = _compute_bool_reward_by_score(token_level_scores, threshold=0.05, absolute=False)
    entropy_factor = torch.exp(old_log_probs_t - old_log_probs)
    true_ratio = (bool_reward == 1).sum() / len(bool_reward)
    alpha = entropy_delta
    alpha = abs(alpha)
    alpha = min(alpha, 0.1)
    alpha = alpha / true_ratio
    alpha = alpha / (alpha + 1)
    advantages = (1 - alpha) * advantages + alpha * bool_reward.to(advantages.dtype).unsqueeze(1) * entropy_factor
    return temperature, alpha, advantages
