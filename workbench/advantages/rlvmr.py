"""RLVMR's advantage: the episode advantage plus w times the meta-reasoning step reward normalized per (task, tag).

    x_{i,s}   = R_i - c [step s of row i invalid]                       (c = invalid-action penalty, 0.1)
    A_E(i,s)  = (x_{i,s} - mean_g x) / (std_g x + eps)  over every step of the prompt group g   (mean_std_norm)
    A_S(i,s)  = (r_{i,s} - mean_k r) / (std_k r + eps)  over the steps of group k = (prompt, tag of the step)
    A_{i,t}   = A_E(i, s_t) + w A_S(i, s_t)   on the policy tokens of step s_t
    ("mean_norm" drops the std division; a group of one sample keeps its value: mean 0, std 1)

Transcribed from zzjweb/digitalhuman `RLVMR/code/rlvmr/core_rlvmr.py` (`compute_rlvmr_outcome_advantage`,
`episode_norm_reward`, `step_norm_reward_by_tag`; one batch row per step there, one per trajectory here) and
`verl/trainer/ppo/ray_trainer.py::apply_invalid_action_penalty` (the penalty lands on the invalid step's episode
score). The step rewards r_{i,s} and tags are `workbench.rewards.rlvmr.meta_rewards` of the multi-turn rollout's
`turn_info` (each step's action and tool_error); success is the verifier's verdict `scores >= 1` (the
reference's: an episode reward > 0, ALFWorld paying 10 or 0; tests/anchors/test_rlvmr.py shows the difference).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.gigpo import EPISODE_STATS, MODES
from workbench.advantages.group import keyed_normalize
from workbench.batch import RolloutBatch


def step_table(batch: RolloutBatch, **meta_kw):
    """Per step of every row: (row, step, invalid, meta reward, tag), from `turn_info`; a batch without it is one
    valid step per row (its completion)."""
    # lazy: workbench.rewards imports the preference and regularizer packages, which import this package
    from workbench.rewards.rlvmr import meta_rewards, steps_of

    success = (batch.scores if batch.scores is not None else batch.rewards) >= 1
    completions = batch.completions or [""] * batch.size
    rows = []
    for i, (outputs, valid, available) in enumerate(steps_of(completions, batch.turn_info or None)):
        rewards, tags = meta_rewards(outputs, valid, available, bool(success[i]), **meta_kw)
        rows += [(i, s, not valid[s], rewards[s], tags[s]) for s in range(len(outputs))]
    return rows


@registry.advantage(
    "rlvmr",
    title="RLVMR: Reinforcement Learning with Verifiable Meta-Reasoning Rewards for Robust Long-Horizon Agents",
    summary="Group-normalized episode return (minus 0.1 on invalid steps) plus w x the meta-reasoning step reward "
            "(planning / explore / reflection) normalized within (task, tag) groups, on each step's tokens.",
    equation=r"A_{i,t} = \frac{x_{i,s} - \mathrm{mean}_g x}{\mathrm{std}_g x} + w\,"
             r"\frac{r_{i,s} - \mathrm{mean}_{(g,\tau_{i,s})} r}{\mathrm{std}_{(g,\tau_{i,s})} r},\ "
             r"x_{i,s} = R_i - 0.1\,[\lnot\text{valid}_{i,s}]",
    reads=("turn", "turn_info", "scores"), choices={"mode": MODES, "episode_stats": EPISODE_STATS})
def rlvmr(batch: RolloutBatch, *, w=1.0, mode="mean_std_norm", eps=1e-6, invalid_penalty=0.1, episode_stats="steps",
          planning_reward=1.0, exploration_reward=1.0, reflection_reward=1.0, reference_bug=False):
    """RLVMR advantage [B, T]. Reads `rewards` (+ summed `token_rewards`) R_i, `group`, `mask`, `turn`, `turn_info`
    (each step's action, tool_error) and `scores` (success >= 1, for the planning reward).

    Defaults: w (`step_advantage_w`) 1.0 and invalid_penalty 0.1 from examples/rlvmr_trainer/run_alfworld.sh;
    mode "mean_std_norm" from verl/trainer/config/ppo_trainer.yaml (the run script keeps it; the yaml's w is 0.5);
    eps 1e-6; the step rewards' defaults and `reference_bug` as `workbench.rewards.rlvmr.meta_rewards`.
    episode_stats: "steps" (the reference: every step is a sample, so longer trajectories weigh more in the group
    statistics, and the penalty hits only the invalid step) or "trajectory" (one sample per row,
    x_i = R_i - c #invalid_i, = `grpo` when c = 0 and no group is a singleton). w = 0 leaves A_E alone.
    """
    if episode_stats not in EPISODE_STATS:
        raise ValueError(f"rlvmr: episode_stats must be one of {EPISODE_STATS}, got {episode_stats!r}")
    if mode not in MODES:
        raise ValueError(f"rlvmr: mode must be one of {MODES}, got {mode!r}")
    batch.require("turn")
    R = sequence_rewards(batch)                                        # [B] float64
    table = step_table(batch, planning_reward=planning_reward, exploration_reward=exploration_reward,
                       reflection_reward=reflection_reward, reference_bug=reference_bug)
    row, step = torch.tensor([r[0] for r in table]), torch.tensor([r[1] for r in table])
    invalid = torch.tensor([float(r[2]) for r in table], dtype=torch.float64)
    group = batch.group[row].tolist()
    # the reference's id2mean / id2std: Bessel std, a key with one sample keeps its value (mean 0, std 1)
    norm = dict(scale=mode == "mean_std_norm", eps=eps, singletons="keep")
    if episode_stats == "steps":
        a_episode = keyed_normalize(R[row] - invalid_penalty * invalid, group, **norm)
    else:
        per_row = R - invalid_penalty * torch.zeros_like(R).index_add_(0, row, invalid)
        a_episode = keyed_normalize(per_row, batch.group.tolist(), **norm)[row]
    meta = torch.tensor([r[3] for r in table], dtype=torch.float64)
    a_step = keyed_normalize(meta, [(g, r[4]) for g, r in zip(group, table)], **norm)
    n_steps = torch.bincount(row, minlength=batch.size)
    S = int(n_steps.max())
    per_step = torch.zeros(batch.size, S, dtype=torch.float64)
    per_step[row, step] = a_episode + w * a_step
    turn = batch.turn.long()
    bad = (batch.mask > 0) & ((turn < 0) | (turn >= n_steps[:, None]))
    if bool(bad.any()):
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()[:10]
        raise ValueError(f"rlvmr: rows {rows} have policy tokens whose turn id is outside [0, steps in turn_info)")
    return per_step.gather(1, turn.clamp(0, S - 1)).to(batch.mask.dtype) * batch.mask
