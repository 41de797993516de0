"""InfoPO's signal and fused advantage transcribed from kfq20/InfoPO @ c26e93c26d7ff0b965a9b4e32bc6f298228b59d7
(seen file by file; used by tests/anchors/test_infopo.py):

    verl/trainer/ppo/intrinsic_reward.py  compute_batched_kl_divergence: per task, the mean over the next action's
                                          tokens of log p(with the observation) - log p(observation replaced by
                                          "No information found.", its last token repeated / cut to the same length)
    verl/trainer/ppo/core_algos.py        compute_turn_credits, compute_info_grpo_advantage ("info_grpo"): the
                                          outcome advantage (multi-turn branch with turn credits, or the single-turn
                                          branch), the token-level intrinsic normalization, the magnitude ratio and
                                          the sigmoid variance gate

Variable names and the order of operations are the code's; logging, the statistics dict returned as a third value,
`torch.distributed` (one rank) and the multi-turn branch's fallbacks for malformed histories are dropped.
"""
from __future__ import annotations

import math
from collections import defaultdict

import torch
import torch.nn.functional as F


def compute_batched_kl_divergence(model, input_ids, attention_mask, tasks, tokenizer,
                                  placeholder_text="No information found.", max_batch_size=32):
    if len(tasks) == 0:
        return []
    original_padding_side = tokenizer.padding_side
    if hasattr(model, 'config') and hasattr(model.config, 'model_type'):
        model_type = model.config.model_type.lower()
        if any(name in model_type for name in ['qwen', 'llama', 'mistral', 'gemma']):
            tokenizer.padding_side = 'left'
    placeholder_tokens = tokenizer.encode(placeholder_text, add_special_tokens=False)
    all_kl_values = []
    for batch_start in range(0, len(tasks), max_batch_size):
        batch_end = min(batch_start + max_batch_size, len(tasks))
        batch_tasks = tasks[batch_start:batch_end]
        sequences_with_obs = []
        sequences_without_obs = []
        task_metadata = []
        for i, task in enumerate(batch_tasks):
            batch_idx = task['batch_idx']
            action_start = task['action_start']
            action_end = task['action_end']
            obs_start = task['obs_start']
            obs_end = task['obs_end']
            seq_len = len(input_ids[batch_idx])
            action_end = min(action_end, seq_len)
            action_start = min(action_start, seq_len)
            obs_end = min(obs_end, seq_len)
            obs_start = min(obs_start, seq_len)
            action_len = action_end - action_start
            obs_len = obs_end - obs_start
            if action_len <= 0 or action_start == 0 or obs_len <= 0:
                task_metadata.append({'valid': False, 'action_start': action_start, 'action_end': action_end})
                dummy_seq = torch.zeros(1, dtype=input_ids.dtype, device=input_ids.device)
                sequences_with_obs.append(dummy_seq)
                sequences_without_obs.append(dummy_seq)
                continue
            seq_with_obs = input_ids[batch_idx][:action_end]
            sequences_with_obs.append(seq_with_obs)
            counterfactual_input_ids = input_ids[batch_idx].clone()
            obs_tokens = input_ids[batch_idx][obs_start:obs_end].tolist()
            if len(placeholder_tokens) == len(obs_tokens):
                counterfactual_input_ids[obs_start:obs_end] = torch.tensor(placeholder_tokens, device=input_ids.device)
            elif len(placeholder_tokens) < len(obs_tokens):
                padded_placeholder = placeholder_tokens + [placeholder_tokens[-1]] * (
                    len(obs_tokens) - len(placeholder_tokens))
                counterfactual_input_ids[obs_start:obs_end] = torch.tensor(padded_placeholder, device=input_ids.device)
            else:
                counterfactual_input_ids[obs_start:obs_end] = torch.tensor(
                    placeholder_tokens[:len(obs_tokens)], device=input_ids.device)
            seq_without_obs = counterfactual_input_ids[:action_end]
            sequences_without_obs.append(seq_without_obs)
            task_metadata.append({'valid': True, 'action_start': action_start, 'action_end': action_end,
                                  'batch_idx': batch_idx})

        def left_pad_sequences(sequences, padding_value=0):
            max_len = max(len(seq) for seq in sequences)
            padded = []
            masks = []
            for seq in sequences:
                seq_len = len(seq)
                padding_len = max_len - seq_len
                if padding_len > 0:
                    padded_seq = torch.cat([
                        torch.full((padding_len,), padding_value, dtype=seq.dtype, device=seq.device), seq])
                    mask = torch.cat([torch.zeros(padding_len, dtype=torch.long, device=seq.device),
                                      torch.ones(seq_len, dtype=torch.long, device=seq.device)])
                else:
                    padded_seq = seq
                    mask = torch.ones(seq_len, dtype=torch.long, device=seq.device)
                padded.append(padded_seq)
                masks.append(mask)
            return torch.stack(padded), torch.stack(masks)

        pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        batched_with_obs, batched_masks_with = left_pad_sequences(sequences_with_obs, padding_value=pad_token_id)
        batched_without_obs, batched_masks_without = left_pad_sequences(sequences_without_obs,
                                                                        padding_value=pad_token_id)
        with torch.no_grad():
            try:
                outputs_with = model(input_ids=batched_with_obs, attention_mask=batched_masks_with)
                logits_with = outputs_with.logits
            except Exception:
                logits_with = None
            try:
                outputs_without = model(input_ids=batched_without_obs, attention_mask=batched_masks_without)
                logits_without = outputs_without.logits
            except Exception:
                logits_without = None

        batch_kl_values = []
        for i, (task, metadata) in enumerate(zip(batch_tasks, task_metadata)):
            if not metadata['valid'] or logits_with is None or logits_without is None:
                batch_kl_values.append(0.0)
                continue
            action_start = metadata['action_start']
            action_end = metadata['action_end']
            batch_idx = metadata['batch_idx']
            seq_actual_len = action_end
            max_len = batched_with_obs.shape[1]
            padding_len = max_len - seq_actual_len
            start_pos = padding_len + action_start - 1
            end_pos = padding_len + action_end - 1
            task_logits_with = logits_with[i, start_pos:end_pos, :]
            task_logits_without = logits_without[i, start_pos:end_pos, :]
            target_tokens = input_ids[batch_idx][action_start:action_end]
            actual_len = min(task_logits_with.shape[0], len(target_tokens))
            if task_logits_with.shape[0] != len(target_tokens):
                task_logits_with = task_logits_with[:actual_len]
                task_logits_without = task_logits_without[:actual_len]
                target_tokens = target_tokens[:actual_len]
            if actual_len == 0:
                batch_kl_values.append(0.0)
                continue
            log_probs_with = F.log_softmax(task_logits_with, dim=-1)
            log_probs_without = F.log_softmax(task_logits_without, dim=-1)
            log_p_with = log_probs_with[torch.arange(actual_len), target_tokens]
            log_p_without = log_probs_without[torch.arange(actual_len), target_tokens]
            kl_contributions = (log_p_with - log_p_without).cpu().tolist()
            total_kl = sum(kl_contributions)
            kl_value = total_kl / actual_len if actual_len > 0 else 0.0
            batch_kl_values.append(kl_value)
        all_kl_values.extend(batch_kl_values)
    tokenizer.padding_side = original_padding_side
    return all_kl_values


def compute_turn_credits(conversation_history, gamma=0.8, turn_level_method="Equalized",
                         trajectory_score_method="Sum", intrinsic_rewards_per_turn=None):
    turn_rewards = [step["reward"] for step in conversation_history]
    if trajectory_score_method == "R2G":
        trajectory_score = 0
        for turn_idx, step in enumerate(conversation_history[::-1]):
            if turn_idx == 0:
                trajectory_score = step["reward"]
            else:
                trajectory_score = step["reward"] + gamma * trajectory_score
    elif trajectory_score_method == "Sum":
        trajectory_score = round(sum(turn_rewards), 4) if turn_rewards else 0.0
    else:
        raise ValueError(f"Invalid trajectory_score_method: {trajectory_score_method}")
    if turn_level_method == "Equalized":
        turn_credits = [1.0 for _ in turn_rewards]
    elif turn_level_method == "R2G":
        turn_credits = [0.0] * len(turn_rewards)
        for turn_idx, step in enumerate(conversation_history[::-1]):
            if turn_idx == 0:
                turn_credits[turn_idx] = step["reward"]
            else:
                turn_credits[turn_idx] = step["reward"] + gamma * turn_credits[turn_idx - 1]
        turn_credits = turn_credits[::-1]
    elif turn_level_method == "EM":
        def map_reward(x, k=2.0):
            numerator = 1 - math.exp(-k * x)
            denominator = 1 - math.exp(-k)
            return 0.5 + 0.5 * (numerator / denominator)
        turn_credits = [round(map_reward(r), 4) for r in turn_rewards]
    else:
        raise ValueError(f"Invalid turn_level_method: {turn_level_method}")
    return turn_credits, trajectory_score


def compute_info_grpo_advantage(token_level_rewards, token_level_intrinsic_rewards, response_mask, index,
                                epsilon=1e-6, norm_adv_by_std_in_grpo=True, intrinsic_weight=0.1,
                                intrinsic_decay_rate=0.0, current_epoch=0, turn_boundaries=None,
                                conversation_histories=None, data_sources=None, gamma=0.8,
                                turn_level_method="Equalized", trajectory_score_method="Sum", **kwargs):
    if torch.is_tensor(intrinsic_weight):
        intrinsic_weight = intrinsic_weight.mean().item()
    beta_t = intrinsic_weight * math.exp(-intrinsic_decay_rate * current_epoch)

    with torch.no_grad():
        bsz, seq_len = token_level_rewards.shape
        use_multiturn = (turn_boundaries is not None and conversation_histories is not None
                         and len(conversation_histories) > 0)
        if use_multiturn:
            advantages_outcome = torch.zeros_like(token_level_rewards)
            trajectory_scores = []
            for b in range(bsz):
                conv_hist = conversation_histories[b]
                turn_credits, trajectory_score = compute_turn_credits(conv_hist, gamma, turn_level_method,
                                                                      trajectory_score_method)
                trajectory_scores.append(trajectory_score)
                turn_starts = torch.where(turn_boundaries[b] == 1)[0].tolist()
                if not turn_starts:
                    turn_starts = [0]
                turn_starts.append(seq_len)
                for turn_idx in range(len(turn_starts) - 1):
                    turn_start = turn_starts[turn_idx]
                    turn_end = turn_starts[turn_idx + 1]
                    if turn_idx < len(turn_credits):
                        turn_credit = turn_credits[turn_idx]
                        advantages_outcome[b, turn_start:turn_end] = turn_credit
            trajectory_scores = torch.tensor(trajectory_scores, device=advantages_outcome.device)
            advantages_outcome = advantages_outcome * response_mask
            id2score = defaultdict(list)
            id2mean = {}
            id2std = {}
            for i in range(bsz):
                id2score[index[i]].append(trajectory_scores[i])
            for idx in id2score:
                if len(id2score[idx]) == 1:
                    id2mean[idx] = torch.tensor(0.0, device=advantages_outcome.device)
                    id2std[idx] = torch.tensor(1.0, device=advantages_outcome.device)
                elif len(id2score[idx]) > 1:
                    scores_tensor = torch.stack(id2score[idx])
                    id2mean[idx] = torch.mean(scores_tensor)
                    id2std[idx] = torch.std(scores_tensor)
            for b in range(bsz):
                group_idx = index[b]
                if norm_adv_by_std_in_grpo:
                    normalization_factor = (trajectory_scores[b] - id2mean[group_idx]) / (id2std[group_idx] + epsilon)
                else:
                    normalization_factor = trajectory_scores[b] - id2mean[group_idx]
                episode_sum = torch.sum(advantages_outcome[b])
                if episode_sum != 0:
                    num_non_zero = torch.count_nonzero(advantages_outcome[b])
                    scaling_factor = normalization_factor * num_non_zero / episode_sum
                    advantages_outcome[b] *= scaling_factor
                else:
                    advantages_outcome[b] *= 0.0
            adv_outcome_broadcast = advantages_outcome
        else:
            scores_outcome = token_level_rewards.sum(dim=-1)
            id2score_outcome = defaultdict(list)
            id2mean_outcome = {}
            id2std_outcome = {}
            for i in range(bsz):
                id2score_outcome[index[i]].append(scores_outcome[i])
            for idx in id2score_outcome:
                if len(id2score_outcome[idx]) == 1:
                    id2mean_outcome[idx] = torch.tensor(0.0, device=token_level_rewards.device)
                    id2std_outcome[idx] = torch.tensor(1.0, device=token_level_rewards.device)
                elif len(id2score_outcome[idx]) > 1:
                    id2mean_outcome[idx] = torch.mean(torch.stack(id2score_outcome[idx]))
                    id2std_outcome[idx] = torch.std(torch.stack(id2score_outcome[idx]))
                else:
                    raise ValueError(f"no score in prompt index: {idx}")
            adv_outcome = torch.zeros_like(scores_outcome)
            for i in range(bsz):
                if norm_adv_by_std_in_grpo:
                    adv_outcome[i] = (scores_outcome[i] - id2mean_outcome[index[i]]) / (
                        id2std_outcome[index[i]] + epsilon)
                else:
                    adv_outcome[i] = scores_outcome[i] - id2mean_outcome[index[i]]
            adv_outcome_broadcast = adv_outcome.unsqueeze(-1) * response_mask

    normalize_intrinsic = kwargs.get('normalize_intrinsic', True)
    if not normalize_intrinsic:
        adv_intrinsic_token_level = token_level_intrinsic_rewards.clone()
    else:
        id2intrinsic_values = defaultdict(list)
        with torch.no_grad():
            for i in range(bsz):
                group_idx = index[i]
                mask_i = response_mask[i].bool()
                intrinsic_i = token_level_intrinsic_rewards[i][mask_i]
                non_zero_intrinsic = intrinsic_i[intrinsic_i != 0]
                if len(non_zero_intrinsic) > 0:
                    id2intrinsic_values[group_idx].extend(non_zero_intrinsic.tolist())
            id2mean_intrinsic = {}
            id2std_intrinsic = {}
            for idx in id2intrinsic_values:
                if len(id2intrinsic_values[idx]) == 0:
                    id2mean_intrinsic[idx] = 0.0
                    id2std_intrinsic[idx] = 1.0
                elif len(id2intrinsic_values[idx]) == 1:
                    id2mean_intrinsic[idx] = id2intrinsic_values[idx][0]
                    id2std_intrinsic[idx] = 1.0
                else:
                    values_tensor = torch.tensor(id2intrinsic_values[idx], device=token_level_intrinsic_rewards.device)
                    id2mean_intrinsic[idx] = values_tensor.mean().item()
                    id2std_intrinsic[idx] = values_tensor.std().item()
            adv_intrinsic_token_level = torch.zeros_like(token_level_intrinsic_rewards)
            for i in range(bsz):
                group_idx = index[i]
                if group_idx in id2mean_intrinsic:
                    mean_val = id2mean_intrinsic[group_idx]
                    std_val = id2std_intrinsic[group_idx]
                    mask_i = response_mask[i].bool()
                    non_zero_mask = (token_level_intrinsic_rewards[i] != 0) & mask_i
                    if norm_adv_by_std_in_grpo:
                        adv_intrinsic_token_level[i][non_zero_mask] = (
                            (token_level_intrinsic_rewards[i][non_zero_mask] - mean_val) / (std_val + epsilon))
                    else:
                        adv_intrinsic_token_level[i][non_zero_mask] = (
                            token_level_intrinsic_rewards[i][non_zero_mask] - mean_val)

    mask = response_mask.bool()
    outcome_std = adv_outcome_broadcast[mask].std().item() + epsilon
    intrinsic_std_raw = adv_intrinsic_token_level[mask].std().item() + epsilon
    baseline_std = 1.0
    target_intrinsic_std = max(outcome_std, baseline_std)
    magnitude_ratio = min(1.0, target_intrinsic_std / intrinsic_std_raw)
    adv_intrinsic_scaled = adv_intrinsic_token_level * magnitude_ratio

    intrinsic_gate_temperature = kwargs.get('intrinsic_gate_temperature', 0.05)
    gate = torch.ones(bsz, 1, device=adv_outcome_broadcast.device)
    if use_multiturn:
        for i in range(bsz):
            group_idx = index[i]
            group_std = id2std.get(group_idx, torch.tensor(0.0)).item()
            gate_value = torch.sigmoid(torch.tensor(-group_std / intrinsic_gate_temperature))
            gate[i] = gate_value
    else:
        for i in range(bsz):
            group_idx = index[i]
            group_std = id2std_outcome.get(group_idx, torch.tensor(0.0)).item()
            gate_value = torch.sigmoid(torch.tensor(-group_std / intrinsic_gate_temperature))
            gate[i] = gate_value

    use_intrinsic_only = kwargs.get('use_intrinsic_only', False)
    if use_intrinsic_only:
        combined_advantages = adv_intrinsic_scaled
    else:
        combined_advantages = adv_outcome_broadcast + (beta_t * gate) * adv_intrinsic_scaled
    return combined_advantages, combined_advantages
