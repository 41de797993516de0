"""AMPO's advantage: each group's mean and std come from the policy's own samples only, and apply to every row.

    mu_g, sigma_g = mean, std (Bessel) of R over the on-policy rows of group g      sigma_g = 0 -> 1
    A_i = (R_i - mu_g(i)) / (sigma_g(i) + eps)          every row i, teacher rows included      eps = 1e-6
    A_{i,t} = (alpha m^off_{i,t} + beta (1 - m^off_{i,t})) A_i  over the response mask     alpha = beta = 1

Teacher rows (`group_transform:ampo`, offpolicy_mask = 1) are trained with this advantage but do not enter the
baseline: the baseline measures what the policy earns on the prompt alone. A guided group has no correct sample, so
its on-policy rewards are all equal: sigma = 0 is read as 1 (else the teachers' A would be 1/eps), its on-policy rows
get A = 0 and each teacher row A = R_teacher - mu. A group without teacher rows is GRPO's.

Reference: SII-Enigma/AMPO @ b88d365654e03b94d8316226a5a67e0f7b64048f
  - `ampo/verl/verl/adaptive_mix_src/mix_core_alg.py::compute_grpo_outcome_advantage_split` (L16-72): the on-policy
    rows' mean and std (`torch.std`, Bessel), a group with one on-policy row mean 0 std 1 (L53-55), std 0 -> 1
    (L62-64), `norm_adv_by_std_in_grpo` (L66-69); on_policy_mask = ~prefix_mask.any(-1) (`mix_dapo_trainer.py`
    `compute_advantage`, L113-124).
  - `mix_dapo_trainer.py` L1151-1159: the advantage times prefix_reward_weight_alpha on prefix (teacher) tokens and
    prefix_reward_weight_beta on the others; `exp_scripts/train_ampo.sh` L163 alpha = 1.0, beta the config's 1.0
    (`config/mix_dapo_trainer.yaml` L124).

Differences from the reference:
  - Which estimator the released run uses. `train_ampo.sh` sets `algorithm.adv_estimator=grpo` (L46, L95), verl's
    `compute_grpo_outcome_advantage` over all the prompt's rows (teachers in the baseline, no std 0 -> 1), and
    `norm_adv_by_std_in_grpo=False` (L113): R - mean over all rows. The catalog card describes `grpo_split` with
    the std, our default; `baseline_rows="all"` with `norm_by_std=False` is the script's.
  - A group with one on-policy row (k = G - 1): the reference's mean 0, std 1 (A = R / (1 + eps)) is our default
    allow_singletons="keep"; True gives its rows A = 0, False refuses it.
  - A group with no on-policy row: the reference fails with a KeyError (it never enters `id2mean`); ours raises a
    ValueError saying why (the transform refuses k >= G, so it cannot happen in a run).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import SINGLETONS, group_index, group_stats, grpo
from workbench.advantages.rl_plus import BASELINE_ROWS, external_rows, on_policy_baseline, refuse_thin_groups
from workbench.batch import RolloutBatch

AMPO_TITLE = "More Than One Teacher: Adaptive Multi-Guidance Policy Optimization for Diverse Exploration"


def check_ampo_advantage(*, allow_singletons="keep", **_) -> None:
    if allow_singletons not in SINGLETONS or not isinstance(allow_singletons, (bool, str)):
        raise ValueError(f"allow_singletons must be 'keep' (the reference's mean 0, std 1 for a group with one "
                         f"on-policy sample), True (A = 0 there) or False (refuse it), got {allow_singletons!r}")


def on_policy_std(rewards: torch.Tensor, group: torch.Tensor, on_policy: torch.Tensor) -> torch.Tensor:
    """[B] Bessel std of R over the on-policy rows of each row's group (`group_stats` of those rows alone), 0 -> 1
    (L62-64: a group whose own samples all earned the same reward is scaled by 1, not by 1 / eps). A group without
    on-policy rows gets 1 (`refuse_thin_groups` stops it)."""
    dense, counts = group_index(group)
    _, std_on, _ = group_stats(rewards[on_policy], dense[on_policy])                       # [B_on]
    std = torch.ones(counts.shape[0], dtype=rewards.dtype, device=rewards.device)            # [K]
    std = std.index_copy_(0, dense[on_policy], std_on)  # a group's rows all hold its std: any one of them will do
    return torch.where(std == 0, torch.ones_like(std), std)[dense]


def prefix_weights(offpolicy_mask: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """[B, T] alpha on off-policy (teacher) tokens, beta on the others (mix_dapo_trainer.py L1156-1158)."""
    off = (offpolicy_mask > 0).to(offpolicy_mask.dtype)
    return alpha * off + beta * (1 - off)


@registry.advantage(
    "ampo", title=AMPO_TITLE,
    summary="Group z-score whose mean and std come from the on-policy samples only (std 0 read as 1), applied to "
            "every row, teacher rows included; times alpha on teacher tokens and beta on the others.",
    equation=r"A_i = \frac{R_i - \mu_{\mathcal{O}_g}}{\sigma_{\mathcal{O}_g} + \epsilon},\quad "
             r"\mathcal{O}_g = \{j \in g : m^{\mathrm{off}}_j = 0\},\ \sigma = 0 \mapsto 1",
    reads=("rewards", "group", "offpolicy_mask"), choices={"baseline_rows": BASELINE_ROWS},
    check=check_ampo_advantage)
def ampo_advantage(batch: RolloutBatch, *, baseline_rows="on-policy", norm_by_std=True, eps=1e-6, alpha=1.0, beta=1.0,
                   allow_singletons="keep"):
    """A [B, T]. Reads `rewards` (+ summed `token_rewards`), `group`, `offpolicy_mask`, `mask`.

    baseline_rows: "on-policy" (the card's, the reference's `grpo_split`) or "all" (the released script's
    `adv_estimator=grpo`: verl's GRPO over every row, teachers included); norm_by_std: divide by the std + eps (the
    reference's `norm_adv_by_std_in_grpo`; the script's False); alpha / beta: weights on teacher / other tokens
    (`prefix_reward_weight_alpha` / `_beta`, 1.0 both); allow_singletons: a group with one on-policy row: "keep"
    (the reference's mean 0, std 1), True (A = 0), False (refused).
    """
    if baseline_rows not in BASELINE_ROWS:
        raise ValueError(f"baseline_rows must be one of {BASELINE_ROWS}, got {baseline_rows!r}")
    check_ampo_advantage(allow_singletons=allow_singletons)
    weights = prefix_weights(batch.offpolicy_mask, alpha, beta)                           # [B, T]
    if baseline_rows == "all":
        return weights * grpo(batch, scale="group" if norm_by_std else "none", eps=eps,
                              allow_singletons=allow_singletons)
    rewards = sequence_rewards(batch)                                                     # [B]
    on_policy = ~external_rows(batch)                                                     # [B]
    mean, n_on = on_policy_baseline(rewards, batch.group, on_policy)                      # [B], [B]
    single = refuse_thin_groups(batch.group, n_on, allow_singletons, who="ampo", external="teacher rows",
                                empty_fix="the ampo transform's k must stay below group_size",
                                single_fix="give the transform k <= group_size - 2, or pass allow_singletons='keep' "
                                           "(the reference's mean 0, std 1) or True (A = 0 there)")
    std = on_policy_std(rewards, batch.group, on_policy)                                  # [B]
    if allow_singletons == "keep":
        mean, std, single = mean.masked_fill(single, 0.0), std.masked_fill(single, 1.0), torch.zeros_like(single)
    centered = rewards - mean
    advantage = centered / (std + eps) if norm_by_std else centered
    return weights * broadcast(advantage.masked_fill(single, 0.0), batch.mask)
