"""Rollout engines (HF generate, vLLM), the multi-turn rollout over a task's environment, and the group sampler
(its one-turn call) that turn prompts into a RolloutBatch."""
from workbench.rollout.engine import Generation, HFEngine, Sampling, make_engine, policy_forward
from workbench.rollout.turns import turns
from workbench.rollout.group import sample_groups
from workbench.rollout import a2fm, hapo_temperature, hbpo, offpolicy_guidance  # noqa: F401  (registration at import)
from workbench.models import merged_state_dict  # the weights a separate engine is given
from workbench.rollout.vllm_engine import VLLMEngine

__all__ = ["Generation", "HFEngine", "Sampling", "VLLMEngine", "make_engine", "merged_state_dict", "policy_forward",
           "sample_groups", "turns"]
