"""Rollout engines (HF generate, vLLM) and the group sampler that turns prompts into a RolloutBatch."""
from workbench.rollout.engine import Generation, HFEngine, make_engine, policy_forward
from workbench.rollout.group import sample_groups
from workbench.rollout.vllm_engine import VLLMEngine, merged_state_dict

__all__ = ["Generation", "HFEngine", "VLLMEngine", "make_engine", "merged_state_dict", "policy_forward",
           "sample_groups"]
