"""The one batch type every component reads: a rollout of B sequences over T response tokens."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch


@dataclass
class RolloutBatch:
    """Tensors are [B, T] over response tokens (right-padded) unless marked [B] or [B, P].

    Optional fields are None when unused; each component documents which fields it reads.
    """

    response_ids: torch.Tensor                   # [B, T] sampled tokens (pad after EOS)
    mask: torch.Tensor                           # [B, T] float, 1 where the policy produced the token
    group: torch.Tensor                          # [B] long, which prompt the sample answers
    rewards: torch.Tensor | None = None          # [B] outcome reward (after any shaping)
    scores: torch.Tensor | None = None           # [B] raw verifier scores, before reward shaping
    prompt_ids: torch.Tensor | None = None       # [B, P] left-padded prompt tokens
    prompt_mask: torch.Tensor | None = None      # [B, P] 1 on real prompt tokens
    logp: torch.Tensor | None = None             # [B, T] current policy log-probs
    old_logp: torch.Tensor | None = None         # [B, T] trainer log-probs of the policy that sampled
    mu_logp: torch.Tensor | None = None          # [B, T] rollout-engine (behaviour) log-probs
    ref_logp: torch.Tensor | None = None         # [B, T] frozen reference log-probs
    entropy: torch.Tensor | None = None          # [B, T] full-vocabulary entropy
    token_rewards: torch.Tensor | None = None    # [B, T] per-token rewards (e.g. KL-in-reward)
    values: torch.Tensor | None = None           # [B, T] critic values V(s_t)
    old_values: torch.Tensor | None = None       # [B, T] critic values at rollout time
    baseline_rewards: torch.Tensor | None = None  # [B] reward of a baseline rollout (ReMax greedy)
    advantages: torch.Tensor | None = None       # [B, T] filled by the advantage estimator
    returns: torch.Tensor | None = None          # [B, T] value targets (critic methods)
    value_mask: torch.Tensor | None = None       # [B, T] tokens the value loss trains on (critic methods)
    truncated: torch.Tensor | None = None        # [B] bool, no EOS within max_new_tokens
    turn: torch.Tensor | None = None             # [B, T] turn ids (multi-turn methods)
    segment: torch.Tensor | None = None          # [B, T] segment ids (segment methods)
    completions: list[str] = field(default_factory=list)  # decoded responses, len B
    prompts: list[str] = field(default_factory=list)      # prompt text per row, len B

    def __post_init__(self):
        B, T = self.response_ids.shape
        if self.mask.shape != (B, T):
            raise ValueError(f"mask {tuple(self.mask.shape)} does not match response_ids {(B, T)}")
        if self.group.shape != (B,):
            raise ValueError(f"group must have shape [B]={B}, got {tuple(self.group.shape)}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] != B:
                raise ValueError(f"{f.name} has {value.shape[0]} rows but the batch has {B}")

    @staticmethod
    def from_rewards(rewards, group=None, lengths=None) -> "RolloutBatch":
        """Outcome rewards [B] (one group unless `group` [B] is given) over responses of `lengths` tokens
        (default 1): the smallest batch an advantage estimator can read, for plots, exercises and tests."""
        rewards = torch.as_tensor(rewards, dtype=torch.float64).flatten()
        n = rewards.shape[0]
        group = torch.zeros(n, dtype=torch.long) if group is None else torch.as_tensor(group).long().flatten()
        lengths = torch.ones(n, dtype=torch.long) if lengths is None else torch.as_tensor(lengths).long()
        mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).double()
        return RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask, group=group,
                            rewards=rewards)

    @property
    def size(self) -> int:
        return self.response_ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """[B] number of policy tokens per sequence, |y_i|."""
        return self.mask.sum(-1)

    def require(self, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"this component needs batch fields {missing}, which are None")

    def select(self, index: torch.Tensor) -> "RolloutBatch":
        """Rows `index` of every per-row field (tensors and lists)."""
        updates = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and value.dim() >= 1:
                updates[f.name] = value[index]
            elif isinstance(value, list) and value:
                updates[f.name] = [value[i] for i in index.tolist()]
        return replace(self, **updates)
