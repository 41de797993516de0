"""Re-derivation of MARS's self-play advantages, for tests/anchors/test_mars.py.

Transcribed from thu-nics/MARS @ 5979f75c8fa5354356a461805ed0a984cf3b2dfd, `roll/utils/functionals.py`:
`masked_mean` (L263), `masked_var` (L273), `masked_whiten` (L324), `compute_reinforce_return` (L376),
`normalize_unique_values` (L461), `normalize_unique_values_by_player` (L513), `score_normalize`,
`reward_normalize_by_player` (L796), `reward_postprocess_agentic` (L879; the use_turn_scores branch, without
reward_clip and token-level KL, which the self-play configuration leaves off) and `compute_advantage` (L993-1045;
the "reinforce" estimator, no advantage_clip); and the advantage block of
`roll/pipeline/agentic/agentic_pipeline.py` (L225-285: rewards post-processed per `reward_normalization.grouping`,
concatenated back in order, advantages over the whole batch) as `pipeline_advantages`.
Variable names and order of operations kept; Timer, metrics and the debug dump removed; the Chinese comments
translated. `DataProto` is a stub holding the `batch` and `non_tensor_batch` dicts the functions read; `split_players`
is the player parsing both *_by_player functions repeat, written once.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch


class DataProto:
    def __init__(self, batch: dict, non_tensor_batch: dict):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch


def masked_mean(tensor, mask, dim=None):
    if dim is not None:
        mask_sum = mask.sum(axis=dim)
        return torch.where(mask_sum > 0, (tensor * mask).sum(axis=dim) / (mask_sum + 1e-8), torch.zeros_like(mask_sum))
    else:
        return (
            (tensor * mask).sum() / (mask.sum() + 1e-8) if mask.sum() > 0 else torch.tensor(0.0, device=tensor.device)
        )


def masked_var(values, mask, unbiased=True):
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values, mask, shift_mean=True):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


def compute_reinforce_return(token_level_rewards, gamma, lambd):
    with torch.no_grad():
        advantages_reversed = []
        gen_len = token_level_rewards.shape[-1]
        cumulative_reward = 0
        for t in reversed(range(gen_len)):
            local_reward = token_level_rewards[:, t] if t < gen_len else 0.0
            cumulative_reward = local_reward + gamma * cumulative_reward
            advantages_reversed.append(cumulative_reward)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        returns = advantages
    return advantages, returns


def normalize_unique_values(tensor, mode="mean"):
    """Normalize the distinct values of the tensor: [1, 1, 1, 2, 2, 3, 3, 3, 3] -> [1, 2, 3] normalized to
    [-1, 0, 1] -> [-1, -1, -1, 0, 0, 1, 1, 1, 1]."""
    with torch.no_grad():
        unique_values = torch.unique(tensor)
        if len(unique_values) == 1:
            return torch.zeros_like(tensor)
        unique_mean = unique_values.mean()
        unique_std = unique_values.std()
        if unique_std == 0:
            return torch.zeros_like(tensor)
        if mode == "mean_std":
            normalized_unique = (unique_values - unique_mean) / (unique_std + 1e-6)
        elif mode == "mean":
            normalized_unique = unique_values - unique_mean
        else:
            raise ValueError(f"Invalid normalization mode: {mode}")
        value_mapping = {}
        for i, original_val in enumerate(unique_values):
            value_mapping[original_val.item()] = normalized_unique[i].item()
        result = torch.zeros_like(tensor)
        for original_val, normalized_val in value_mapping.items():
            mask = (tensor == original_val)
            result[mask] = normalized_val
        return result


def split_players(group_ids):
    """The player parsing shared by the two *_by_player functions."""
    player_0_indices = []
    player_1_indices = []
    for i, group_id in enumerate(group_ids):
        if isinstance(group_id, str) and "_p" in group_id:
            player_id = group_id.split("_p")[-1]
            if player_id == "0":
                player_0_indices.append(i)
            elif player_id == "1":
                player_1_indices.append(i)
        else:
            player_0_indices.append(i)
    return player_0_indices, player_1_indices


def normalize_unique_values_by_player(tensor, data, mode="mean"):
    group_ids = data.non_tensor_batch.get("group_ids", [])
    if len(group_ids) == 0:
        return normalize_unique_values(tensor, mode=mode)
    player_0_indices, player_1_indices = split_players(group_ids)
    if len(player_0_indices) == 0 and len(player_1_indices) == 0:
        return normalize_unique_values(tensor, mode=mode)
    normalized_tensor = tensor.clone()
    if len(player_0_indices) > 0:
        player_0_indices_tensor = torch.tensor(player_0_indices, dtype=torch.long)
        player_0_tensor = tensor[player_0_indices_tensor]
        player_0_normalized = normalize_unique_values(player_0_tensor, mode=mode)
        normalized_tensor[player_0_indices_tensor] = player_0_normalized
    if len(player_1_indices) > 0:
        player_1_indices_tensor = torch.tensor(player_1_indices, dtype=torch.long)
        player_1_tensor = tensor[player_1_indices_tensor]
        player_1_normalized = normalize_unique_values(player_1_tensor, mode=mode)
        normalized_tensor[player_1_indices_tensor] = player_1_normalized
    return normalized_tensor


def score_normalize(x, rn_cfg, running_ctrl=None, mask=None):
    grouping, method = rn_cfg.grouping, rn_cfg.method
    if method == "identity" or method == "none":
        return x
    else:
        if mask is None:
            mean = x.mean()
            std = x.std()
        else:
            mean = masked_mean(x, mask)
            var = masked_var(x, mask)
            std = torch.sqrt(var)
    if method == "mean":
        x_norm = (x - mean)
    elif method == "mean_std":
        x_norm = (
            (x - mean) / (std + 1e-6)
            if std.abs().max() > 1e-6
            else torch.zeros_like(x)
        )
    else:
        raise ValueError(f"Invalid normalization method: {method}")
    if mask is not None:
        x_norm = x_norm * mask
    return x_norm


def reward_normalize_by_player(data, rewards, rn_cfg, running_ctrl=None, mask=None):
    group_ids = data.non_tensor_batch.get("group_ids", [])
    if len(group_ids) == 0:
        return score_normalize(rewards, rn_cfg=rn_cfg, running_ctrl=running_ctrl, mask=mask)
    player_0_indices, player_1_indices = split_players(group_ids)
    if len(player_0_indices) == 0 and len(player_1_indices) == 0:
        return score_normalize(rewards, rn_cfg=rn_cfg, running_ctrl=running_ctrl, mask=mask)
    player_0_ctrl = running_ctrl
    player_1_ctrl = running_ctrl
    normalized_rewards = rewards.clone()
    if len(player_0_indices) > 0:
        player_0_indices_tensor = torch.tensor(player_0_indices, dtype=torch.long)
        player_0_rewards = rewards[player_0_indices_tensor]
        player_0_mask = mask[player_0_indices_tensor] if mask is not None else None
        player_0_normalized = score_normalize(player_0_rewards, rn_cfg=rn_cfg, running_ctrl=player_0_ctrl,
                                              mask=player_0_mask)
        normalized_rewards[player_0_indices_tensor] = player_0_normalized
    if len(player_1_indices) > 0:
        player_1_indices_tensor = torch.tensor(player_1_indices, dtype=torch.long)
        player_1_rewards = rewards[player_1_indices_tensor]
        player_1_mask = mask[player_1_indices_tensor] if mask is not None else None
        player_1_normalized = score_normalize(player_1_rewards, rn_cfg=rn_cfg, running_ctrl=player_1_ctrl,
                                              mask=player_1_mask)
        normalized_rewards[player_1_indices_tensor] = player_1_normalized
    return normalized_rewards


def reward_postprocess_agentic(data, pipeline_config, running_ctrl=None):
    if pipeline_config.use_turn_scores:
        rewards = data.batch["token_level_rewards"].clone().detach()
        mask = data.batch["turn_end_positions"]
    else:
        rewards = data.batch["response_level_rewards"].clone().detach()
        mask = None
    if pipeline_config.reward_normalization.separate_norm_for_selfplay:
        rewards = reward_normalize_by_player(data=data, rewards=rewards, rn_cfg=pipeline_config.reward_normalization,
                                             running_ctrl=running_ctrl, mask=mask)
    else:
        rewards = score_normalize(rewards, rn_cfg=pipeline_config.reward_normalization, running_ctrl=running_ctrl,
                                  mask=mask)
    data.batch["token_level_rewards"] = rewards[:, 1:]
    return data


def compute_advantage(data, gamma, lambd, adv_estimator, advantage_clip=None, whiten_advantages=False,
                      whiten_rewards=False, advantage_norm=None, response_mask=None):
    if response_mask is None:
        response_mask = data.batch["response_mask"][:, 1:]
    token_level_rewards = data.batch["token_level_rewards"].float()
    if whiten_rewards:
        token_level_rewards = masked_whiten(values=token_level_rewards, mask=response_mask)
    token_level_rewards = token_level_rewards * response_mask
    data.batch["token_level_rewards"] = token_level_rewards
    if adv_estimator in ("reinforce", "grpo"):
        advantages, returns = compute_reinforce_return(token_level_rewards=token_level_rewards, gamma=gamma,
                                                       lambd=lambd)
    else:
        raise NotImplementedError
    data.batch["raw_advantages"] = advantages
    if advantage_norm:
        advantages = normalize_unique_values_by_player(advantages, data, mode=advantage_norm)
    if whiten_advantages:
        advantages = masked_whiten(values=advantages, mask=response_mask)
    advantages = advantages * response_mask
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns
    return data


def select(data, index):
    return DataProto({k: v[index] for k, v in data.batch.items()},
                     {k: [v[i] for i in index.tolist()] for k, v in data.non_tensor_batch.items()})


def pipeline_advantages(data, *, grouping="tags", method="mean", separate_norm_for_selfplay=True, whiten_rewards=True,
                        advantage_norm="mean", whiten_advantages=True, gamma=1.0, lambd=0.95):
    """agentic_pipeline.py L225-285 with the self-play configuration's settings as defaults: scores as
    token_level_rewards, post-processed per grouping key (DataProto.group_by), concatenated and put back in order
    (prompt_id), then compute_advantage on the whole batch. Returns the advantages [bs, L - 1]."""
    config = SimpleNamespace(use_turn_scores=True, reward_normalization=SimpleNamespace(
        grouping=grouping, method=method, separate_norm_for_selfplay=separate_norm_for_selfplay))
    bs = data.batch["scores"].shape[0]
    data.batch["prompt_id"] = torch.arange(bs)
    keys = data.non_tensor_batch[grouping] if grouping != "batch" else ["default"] * bs
    parts = []
    for name in dict.fromkeys(keys):
        group_batch = select(data, torch.tensor([i for i, k in enumerate(keys) if k == name]))
        group_batch.batch["token_level_rewards"] = group_batch.batch["scores"].clone()
        parts.append(reward_postprocess_agentic(group_batch, config))
    batch = DataProto({k: torch.cat([p.batch[k] for p in parts]) for k in parts[0].batch},
                      {k: [x for p in parts for x in p.non_tensor_batch[k]] for k in parts[0].non_tensor_batch})
    order = torch.argsort(batch.batch["prompt_id"])
    batch = select(batch, order)
    batch = compute_advantage(batch, gamma=gamma, lambd=lambd, adv_estimator="reinforce",
                              whiten_advantages=whiten_advantages, whiten_rewards=whiten_rewards,
                              advantage_norm=advantage_norm)
    return batch.batch["advantages"]
