"""RL-PLUS's advantage: each group's baseline is the mean reward of the policy's own samples only.

    A_i = R_i - mean_{j in g(i), j on-policy} R_j       every row i of group g(i), on-policy or external
    no division by a std (the script's grpo_use_std=False); broadcast over the response mask -> [B, T]

A group is the G - 1 sampled responses plus the task's reference solution (rollout `policy-shaping`, the external
row carries offpolicy_mask = 1). The external row is trained with this advantage, but it does not enter the baseline:
the baseline estimates what the policy itself earns on the prompt, and a (mostly correct) demonstration would raise
it and push every sampled response's advantage down. Appending the demonstration leaves the sampled rows' advantages
exactly as they were. With no external row at all this is `grpo` with scale="none" (Dr.GRPO's R - mean).

The exploration-based advantage of the external tokens, A^c_t = A (1 - sg(pi_theta(e_t)))^gamma, reads the current
policy's probability of each token, which only the loss sees: it lives in `objective:rl-plus`, as in the reference
(inside `compute_token_on_off_policy_loss`).

Reference: YihongDong/RL-PLUS @ eb4aa4d4e2d7ce206056f9d7740138bfc94fad8f,
`rl_plus/verl/verl/recipe/rlplus_core_alg.py::compute_grpo_outcome_advantage_split` (L12-67), called from
`rlplus_trainer.py::compute_advantage` (branch 'grpo_split', L118-135) with on_policy_mask = ~prefix_mask.any(-1).

Differences from the reference:
  - Which baseline the released run uses. `exp_scripts/train_RL-PLUS.sh` L30 sets `algorithm.adv_estimator=grpo`,
    i.e. verl's `compute_grpo_outcome_advantage` over all n = 8 rows of the prompt, the demonstration included
    (`grpo_split`, the on-policy-only baseline above, exists in the code but the script does not select it). The
    catalog card describes the on-policy-only baseline, which is our default; `baseline_rows="all"` is the script's.
  - A group with one on-policy row: the reference takes its baseline as 0 (A = R for every row of the group). Ours
    refuses it unless `allow_singletons` is True (A = 0) or "keep" (the reference's A = R), as `grpo` does.
  - A group with no on-policy row: the reference never enters it in `id2mean` and fails with a KeyError on its
    external row (its ValueError("no score in prompt index") cannot fire); ours raises a ValueError saying why.
  - The reference scales the advantage by `prefix_reward_weight_alpha` on external tokens and `_beta` on the others
    (`rlplus_trainer.py` L529-537); the script leaves both at 1.0 (L78 and the config default), so no factor here.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import SINGLETONS, group_index, group_mean, grpo
from workbench.batch import RolloutBatch

RL_PLUS_TITLE = ("RL-PLUS: Countering Capability Boundary Collapse of LLMs in Reinforcement Learning with "
                 "Hybrid-policy Optimization")
BASELINE_ROWS = ("on-policy", "all")  # the rows whose mean is the baseline: the card's grpo_split, the script's grpo


def check_rl_plus_advantage(*, allow_singletons=False, **_) -> None:
    if allow_singletons not in SINGLETONS or not isinstance(allow_singletons, (bool, str)):
        raise ValueError(f"allow_singletons must be False (refuse a group with one on-policy sample), True (A = 0 "
                         f"there) or 'keep' (the reference's baseline 0: A = R), got {allow_singletons!r}")


def external_rows(batch: RolloutBatch) -> torch.Tensor:
    """[B] bool: rows holding any external (off-policy) token, the reference's `prefix_mask.any(-1)`."""
    batch.require("offpolicy_mask")
    return (batch.offpolicy_mask > 0).any(-1)


def on_policy_baseline(rewards: torch.Tensor, group: torch.Tensor, on_policy: torch.Tensor):
    """Per-row mean of R over the on-policy rows of its group, and how many there are: ([B], [B]). The mean is
    `group_mean` over the on-policy rows alone, bit for bit what `grpo` computes on a batch without the external
    rows (a mean weighted by the on-policy indicator would shift by the external rows' minimum and round differently).
    A group without on-policy rows gets mean inf (`group_mean` of nothing); `refuse_thin_groups` stops it."""
    dense, counts = group_index(group)
    k = counts.shape[0]
    mean = group_mean(rewards[on_policy], dense[on_policy], k)[dense]                     # [B]
    n_on = torch.bincount(dense[on_policy], minlength=k)[dense]                          # [B]
    return mean, n_on


def refuse_thin_groups(group: torch.Tensor, n_on: torch.Tensor, allow_singletons, *, who: str = "rl-plus",
                       external: str = "external rows",
                       empty_fix: str = "the policy-shaping rollout samples G - 1 responses per prompt, so set "
                                        "group_size >= 3",
                       single_fix: str = "set group_size >= 3 (G - 1 samples + the reference solution), or pass "
                                         "allow_singletons=True (A = 0 there) or 'keep' (the reference's baseline 0: "
                                         "A = R)") -> torch.Tensor:
    """[B] bool, rows whose group has exactly one on-policy row (allowed only with `allow_singletons`); a group with
    none has no baseline at all and is refused whatever the setting. `who`, `external` and the fixes word the
    refusals for the estimator that asks (AMPO: teacher rows)."""
    empty = n_on < 1
    if bool(empty.any()):
        groups = sorted(set(group[empty].tolist()))[:10]
        raise ValueError(f"{who}: groups {groups} hold only {external} (offpolicy_mask = 1): no on-policy sample to "
                         f"take the baseline from; {empty_fix}")
    single = n_on < 2
    if bool(single.any()) and not allow_singletons:
        rows = torch.nonzero(single).flatten().tolist()[:10]
        raise ValueError(f"{who}: rows {rows} are in a group with one on-policy sample, which cannot be its own "
                         f"baseline; {single_fix}")
    return single


@registry.advantage(
    "rl-plus", title=RL_PLUS_TITLE,
    summary="R minus the mean reward of the group's on-policy samples (the external demonstration is trained with "
            "it but is not in the baseline), no std; the exploration weight is the objective's.",
    equation=r"A_i = R_i - \frac{1}{|\mathcal{O}_g|}\sum_{j \in \mathcal{O}_g} R_j,\quad "
             r"\mathcal{O}_g = \{j \in g : m^{\mathrm{off}}_j = 0\}",
    reads=("rewards", "group", "offpolicy_mask"), choices={"baseline_rows": BASELINE_ROWS},
    check=check_rl_plus_advantage)
def rl_plus_advantage(batch: RolloutBatch, *, baseline_rows="on-policy", allow_singletons=False):
    """A [B, T]. Reads `rewards` (+ summed `token_rewards`, as the reference's `token_level_rewards.sum(-1)`), `group`,
    `offpolicy_mask`, `mask`.

    baseline_rows: "on-policy" (the catalog's, the reference's `grpo_split`) or "all" (the released script's
    `adv_estimator=grpo`: the demonstration enters the mean; this is `grpo` with scale="none").
    allow_singletons: a group with one on-policy row: False refuses it, True gives its rows A = 0, "keep" is the
    reference's baseline 0 (A = R).
    """
    if baseline_rows not in BASELINE_ROWS:
        raise ValueError(f"baseline_rows must be one of {BASELINE_ROWS}, got {baseline_rows!r}")
    check_rl_plus_advantage(allow_singletons=allow_singletons)
    if baseline_rows == "all":
        return grpo(batch, scale="none", allow_singletons=allow_singletons)
    rewards = sequence_rewards(batch)                                                   # [B]
    mean, n_on = on_policy_baseline(rewards, batch.group, ~external_rows(batch))
    single = refuse_thin_groups(batch.group, n_on, allow_singletons)  # before `mean` is used: inf where n_on = 0
    if allow_singletons == "keep":
        mean, single = mean.masked_fill(single, 0.0), torch.zeros_like(single)
    return broadcast((rewards - mean).masked_fill(single, 0.0), batch.mask)
