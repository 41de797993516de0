"""Rollout engines (HF generate, vLLM) and the group sampler that turns prompts into a RolloutBatch."""
from workbench.rollout.engine import Generation, HFEngine, make_engine, policy_forward
from workbench.rollout.group import sample_groups
from workbench.models import merged_state_dict  # the weights a separate engine is given
from workbench.rollout.vllm_engine import VLLMEngine

__all__ = ["Generation", "HFEngine", "VLLMEngine", "make_engine", "merged_state_dict", "policy_forward",
           "sample_groups"]
