"""What every registered advantage estimator shares: the uniform `fn(batch, **hp) -> A [B, T]` signature."""
import pytest
import torch

from tests.helpers import critic_batch
from workbench import registry


@pytest.mark.filterwarnings("ignore:gigpo called without anchor")
def test_every_registered_advantage_has_the_uniform_signature():
    b = critic_batch()
    b.rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    b.group = torch.tensor([0, 0])
    b.baseline_rewards = torch.tensor([0.5, 0.5], dtype=torch.float64)  # ReMax's greedy-rollout reward
    b.truncated = torch.tensor([False, True])  # T-PPO's unfinished rows
    # what chain entries read from earlier stages: the previous advantage, the sampling policy's forward pass, ...
    b.advantages = registry.get("advantage", "grpo").fn(b)
    b.scores, b.old_logp = b.rewards.clone(), -0.5 * b.mask
    b.entropy, b.temp_logp = 0.7 * b.mask, -0.6 * b.mask  # DCPO's log-probs at another temperature
    b.resampled = torch.tensor([True, False])  # AEPO's re-sampled rows
    b.offpolicy_mask = torch.zeros_like(b.mask)  # RL-PLUS's and AMPO's external / teacher rows (none here)
    b.parent, b.branch_turn = torch.tensor([-1, -1]), torch.tensor([0, 0])  # ARPO's branches (roots here)
    b.turn = torch.where(b.mask > 0, 0, -1).long()  # one-turn episodes (RLVMR's step advantage reads turns)
    # ... and what the credit methods' rollouts and reward shaping put in turn_info and the per-turn fields
    b.turn_info = [[{"action": "<explore>go</explore>", "tool_error": None, "state": "s", "subgoal": 0,
                     "expert_match": True, "q_moves": {"a": 1.0, "b": 0.0}}]] * 2
    b.completions, b.prompts = ["12+3=", "1"], ["I will answer the question within 8 tokens.\n1+2+3="] * 2
    b.turn_rewards, b.turn_q = b.rewards[:, None].clone(), b.rewards[:, None].clone()
    b.turn_values = torch.zeros(2, 1, dtype=torch.float64)
    b.segment = torch.where(b.mask > 0, 0, -1).long()  # one segment per response (SPO)
    b.segment_values = torch.full((2, 1), float("nan"), dtype=torch.float64)
    b.agent, b.episode = torch.tensor([0, 1]), torch.tensor([0, 0])  # two agents of one game (multiagent's)
    # hbpo's L_max has no default; igpo's information gains come from its reward shaping, left out here
    needs = {"hbpo-advantage": {"max_len": 64}, "igpo": {"info_gain": False}}
    for entry in registry.entries("advantage"):
        A = entry.fn(b, **needs.get(entry.key, {}))
        assert A.shape == b.mask.shape and torch.all(A[b.mask == 0] == 0), entry.key
