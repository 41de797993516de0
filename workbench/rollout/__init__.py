"""Rollout engines (HF generate; vLLM later) and the group sampler that turns prompts into a RolloutBatch."""
from workbench.rollout.engine import Generation, HFEngine, policy_forward
from workbench.rollout.group import sample_groups

__all__ = ["Generation", "HFEngine", "policy_forward", "sample_groups"]
