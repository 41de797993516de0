"""SeeUPO's advantage: GRAE, the group-relative advantage without std scaling, the same on every turn.

    A_i = R_i - mean_g R                                         on every policy token of row i (every turn)
    special_norm (AgentEvolver's launcher): A_i <- clamp((A_i - mean_B A) / std_B A, -3, 3)  over the batch

The turn-by-turn update and its correction M_k of the later turns' ratios are the objective's
(`workbench.objectives.seeupo`); this is the advantage it multiplies.

Reading (`abstract-only`: arXiv 2602.06554 names GRAE = group-relative advantage estimation and says REINFORCE + GRAE
converges without discounting). The std is not divided (`norm_adv_by_std_in_grpo: False` in the authors' launcher,
commented "should not norm, otherwise not converge"): `grpo(scale="none")`. The launcher also sets
`special_norm: True`, a batch-level standardization (Bessel std; only the centring when std <= 1e-6) clipped to
[-3, 3]: special_norm=True reproduces it (default off: the paper's GRAE).

Authors' code: modelscope/AgentEvolver, branch `seeupo` @ e59dea4
`beyondagent/module/trainer/ba_ray_trainer.py::compute_grpo_outcome_advantage_local` (one sample per (trajectory,
turn), the trajectory's outcome as its reward, grouped by task uid) and
`launcher/qwen3_appworld/qwen3-seeupo-appworld.yaml`. Transcribed in tests/anchors/formulas_seeupo.py.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch

SEEUPO_TITLE = "SeeUPO: Sequence-Level Agentic-RL with Convergence Guarantees"


def batch_standardize(a: torch.Tensor, clip: float = 3.0, eps: float = 1e-6) -> torch.Tensor:
    """[B] AgentEvolver's `special_norm`: (a - mean) / std over the batch (Bessel), only centred when std <= eps,
    then clamped to [-clip, clip]."""
    if a.numel() < 2:
        return (a - a.mean()).clamp(-clip, clip)
    std = a.std()
    out = (a - a.mean()) / std if std > eps else a - a.mean()
    return out.clamp(-clip, clip)


@registry.advantage(
    "seeupo", title=SEEUPO_TITLE,
    summary="GRAE: the outcome reward minus its group mean (no std), on every turn; the objective `seeupo` updates "
            "the turns one by one in reverse order.",
    equation=r"A_i = R_i - \mathrm{mean}_g R", needs=("multi_turn",))
def seeupo(batch: RolloutBatch, *, special_norm=False, norm_clip=3.0, allow_singletons=False):
    """GRAE advantage [B, T]. Reads `rewards` (+ summed `token_rewards`), `group`, `mask`.

    special_norm: AgentEvolver's batch standardization clipped to [-norm_clip, norm_clip] (module docstring).
    allow_singletons: as `grpo` (AgentEvolver's convention for a group of one is "keep": A = R).
    """
    if not special_norm:
        return grpo(batch, scale="none", allow_singletons=allow_singletons)
    one_token = RolloutBatch.from_rewards(sequence_rewards(batch), batch.group)
    per_row = grpo(one_token, scale="none", allow_singletons=allow_singletons)[:, 0]
    return broadcast(batch_standardize(per_row, norm_clip), batch.mask)
