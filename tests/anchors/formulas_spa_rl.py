"""SPA-RL transcribed by hand from WangHanLinHenry/SPA-RL-Agent @ ed200874d726ef25d52851bd47f12f2b1408b545 (used
by tests/anchors/test_spa_rl.py):

    prm/train_our_progress_model.py   prm_model.forward: the turn ends (last token of each run of unmasked
                                      labels), the summed per-turn outputs, nn.MSELoss against the labels
    prm/rl_data_org.py                the grounding values (0.5 unless the next user message says "Nothing
                                      happens"; the last step 0.5) added to the per-turn values
    ppo/step_ppotrainer.py            StepPPOTrainer.compute_rewards: each step's score onto the last token of its
                                      run of mask 1, times (len(score) - idx - 1), plus -kl_coef * KL per token

The estimator's `self.LN(logits)` is replaced by a given per-position scalar (`outputs[i, t]`, what the Linear
layer returns there); TRL's `_kl_penalty` is its "kl" mode (logprob - ref_logprob). Variable names and the order
of operations are the code's.
"""
from __future__ import annotations

import torch


def prm_forward(outputs, gpt_unmask, labels):
    """prm_model.forward after the backbone: outputs [B, T] scalars, gpt_unmask [B, T] (-100 off the agent's tokens),
    labels [B] -> (loss, predictions)."""
    batch_predictions = []
    for i in range(outputs.size(0)):
        sample_labels = gpt_unmask[i]
        valid_indices = torch.where(sample_labels != -100)[0]
        if len(valid_indices) == 0:
            batch_predictions.append(torch.zeros(1, device=outputs.device, dtype=outputs.dtype))
            continue
        turn_end_indices = []
        for j in range(1, len(valid_indices)):
            if valid_indices[j] - valid_indices[j - 1] > 1:
                turn_end_indices.append(valid_indices[j - 1])
        turn_end_indices.append(valid_indices[-1])
        turn_values = torch.stack([outputs[i, idx] for idx in turn_end_indices])
        sample_prediction = turn_values.sum()
        batch_predictions.append(sample_prediction.unsqueeze(0))
    value_outputs = torch.cat(batch_predictions)
    loss_fct = torch.nn.MSELoss()
    loss = loss_fct(value_outputs, labels)
    return loss, value_outputs


def grounded_rewards(each_conversations, turn_values):
    """rl_data_org.py's per-trajectory loop: conversations alternate user (observation) and agent messages."""
    each_reward = turn_values
    grounding_values = []
    for j in range(1, len(each_conversations) // 2):
        if 'Nothing happens' not in each_conversations[2 * j]['value']:
            grounding_values.append(0.5)
        else:
            grounding_values.append(0.0)
    grounding_values.append(0.5)
    each_reward = [each_reward[j] + grounding_values[j] for j in range(len(each_reward))]
    return each_reward


def compute_rewards(scores, logprobs, ref_logprobs, masks, kl_coef):
    """StepPPOTrainer.compute_rewards with TRL's "kl" penalty -> (rewards, non_score_rewards, kls), stacked."""
    rewards, non_score_rewards, kls = [], [], []
    for score, logprob, ref_logprob, mask in zip(scores, logprobs, ref_logprobs, masks):
        kl = logprob - ref_logprob
        kls.append(kl)
        non_score_reward = -kl_coef * kl
        non_score_rewards.append(non_score_reward)
        reward = non_score_reward.clone()
        last_mask = mask.clone()
        for score_idx in reversed(range(len(score))):
            if len(last_mask.nonzero()) == 0:
                break
            last_1_index = last_mask.nonzero()[-1]
            reward[last_1_index] += score[score_idx] * (len(score) - score_idx - 1)
            last_mask = last_mask[:last_1_index + 1]
            if len((last_mask == 0).nonzero()) == 0:
                break
            last_0_index = (last_mask == 0).nonzero()[-1]
            last_mask = last_mask[:last_0_index + 1]
        rewards.append(reward)
    return torch.stack(rewards), torch.stack(non_score_rewards), torch.stack(kls)
