"""AgentFlow's turn-sample batch transcribed from lupantech/AgentFlow @ b94006436b8712ab8682846fb0d886a5f174f2d4
(used by tests/anchors/test_flow_grpo.py): `agentflow/verl/daemon.py` (L640-760, the loop over
`finished_id_to_sample_info` that makes one sample per planner turn, each carrying its rollout's reward, and the
token-level scores placed on each sample's last token) and `agentflow/verl/trainer.py` (L208:
`uid = data_id_list`), after which verl's `compute_grpo_outcome_advantage` runs on the turn-samples (imported from
the installed verl in the test; AgentFlow pins verl 0.5.0, whose GRPO function is the same computation).

Kept: the code's names and order. Dropped: padding to max lengths, attention masks, position ids and the prompt
truncation (`is_drop_list`), which do not enter the advantage. `dtype` is the scores' dtype: bfloat16 in the code,
exact for 0/1 rewards; the tests pass float64 (a departure: verl then computes the statistics in float64).
"""
from __future__ import annotations

import torch


def turn_samples(finished_id_to_sample_info: dict, dtype=torch.bfloat16):
    """{rollout_id: {"reward", "trace_list": [{"prompt_ids", "response_ids"}], "data_id"}} -> (token_level_scores
    [n_transition, max_response_length], data_id_list, rollout_id_list, turn_index_list)."""
    reward_list, data_id_list, rollout_id_list, turn_index_list = [], [], [], []
    response_ids_list = []
    for rollout_id, sample_info in finished_id_to_sample_info.items():
        for turn_index, trace in enumerate(sample_info["trace_list"]):

            reward_list.append(sample_info["reward"])
            prompt_ids, response_ids = trace["prompt_ids"], trace["response_ids"]

            if len(prompt_ids) == 0 and len(response_ids) == 0:
                reward_list = reward_list[:-1]
                continue

            response_ids_list.append(response_ids)
            data_id_list.append(sample_info["data_id"])
            rollout_id_list.append(rollout_id)
            turn_index_list.append(turn_index)

    n_transition = len(response_ids_list)
    max_response_length = max(len(r) for r in response_ids_list)
    scores = torch.tensor(reward_list, dtype=dtype)
    # the final reward at each sample's last response token
    token_level_scores = torch.zeros(n_transition, max_response_length, dtype=scores.dtype)
    eos_mask_idx = torch.tensor([len(r) - 1 for r in response_ids_list])
    token_level_scores[torch.arange(n_transition), eos_mask_idx] = scores
    return token_level_scores, data_id_list, rollout_id_list, turn_index_list
