"""Re-derivation of SSP's proposer reward, for tests/anchors/test_ssp.py.

Transcribed from Alibaba-Quark/SSP @ b4797e1854379ed74bcd9b56bcdcdcbcb4feeeec,
`quarl/trainer/ppo/ssp_ray_trainer.py::SSPRayPPOTrainer._compute_proposer_rewards` (L1317-1451): the tensor math
kept line for line, with `self`'s inputs as arguments (`self.rollout_n`, `self.sp_config.proposer.*`,
`self.current_extraction_success_mask`, `self.generate_problem`) and the DataProto's `responses` / `response_mask` as
a mask tensor; the prints, the debug logging and the data-manager bookkeeping removed.
"""
from __future__ import annotations

import torch


def compute_proposer_rewards(response_mask, solver_rewards, rollout_n, *, reward_type="1-acc", left=0.0, right=1.0,
                             format_penalty=-1, current_extraction_success_mask=None, generate_problem=None):
    """Token-level proposer rewards [B, L] (the value at each row's last response token) from the solver's token-level
    rewards [B * rollout_n, L_s], row i's attempts in rows i * n .. i * n + n - 1."""
    proposer_batch_size = response_mask.shape[0]
    response_length = response_mask.shape[1]

    solver_n_attempts = rollout_n
    solver_batch_size = solver_rewards.size(0)
    assert (
        solver_batch_size == proposer_batch_size * solver_n_attempts
    ), f"Expected {proposer_batch_size * solver_n_attempts} solver samples, got {solver_batch_size}"

    solver_rewards_per_attempt = solver_rewards.sum(-1)

    solver_rewards_grouped = solver_rewards_per_attempt.view(proposer_batch_size, solver_n_attempts)

    success_rates = (solver_rewards_grouped > 0).float().mean(dim=1)

    if reward_type == "intermediate_difficulty":
        proposer_reward_values = torch.zeros_like(success_rates)

        proposer_right = right
        proposer_left = left
        intermediate_mask = (success_rates > 0) & (success_rates < 1)
        proposer_reward_values[intermediate_mask] = (
            4.0
            * (proposer_left + success_rates[intermediate_mask])
            * (proposer_right - success_rates[intermediate_mask])
        )
    elif reward_type == "format_only":
        proposer_reward_values = torch.ones_like(success_rates)
    else:
        proposer_reward_values = 1.0 - success_rates

    extraction_failure_penalty = format_penalty

    if current_extraction_success_mask is not None:
        for i, extraction_success in enumerate(current_extraction_success_mask):
            if not extraction_success:
                proposer_reward_values[i] = extraction_failure_penalty
    elif generate_problem:
        assert len(generate_problem) == len(
            proposer_reward_values
        ), "generate_problem and proposer_reward_values must have the same length"
        for i, problem in enumerate(generate_problem):
            if i < len(proposer_reward_values):
                data_source = problem.get("data_source", "")
                if data_source == "dummy":
                    proposer_reward_values[i] = extraction_failure_penalty

    proposer_rewards = torch.zeros(
        (proposer_batch_size, response_length),
        dtype=torch.float32,
        device=solver_rewards.device,
    )

    if response_mask is not None:
        last_token_positions = response_mask.sum(-1) - 1
        for i in range(proposer_batch_size):
            last_pos = last_token_positions[i].item()
            if 0 <= last_pos < response_length:
                proposer_rewards[i, last_pos] = proposer_reward_values[i].item()
    else:
        proposer_rewards[:, -1] = proposer_reward_values

    return proposer_rewards
