"""Other critic-free baselines for outcome rewards: REINFORCE++-baseline, ReMax, OPO and GPG.

All four read outcome rewards (plus summed `token_rewards`, as in `grpo`) and return A [B, T], zero
outside the mask. The group mean is computed by `group.grpo(scale="none")` / `group.group_stats`, so
NaN checks, singleton handling and dtype follow the GRPO conventions.

LOOP (apple/ml-loop) needs no estimator of its own: its `leave_one_out` baseline is exactly `rloo`
and its `leave_none_out` baseline is `grpo(scale="none")`.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import TOKEN_REWARD_MODES, broadcast, sequence_rewards, token_rewards
from workbench.advantages.group import check_group_sizes, group_index, group_mean, grpo
from workbench.advantages.reinforce import discounted_returns
from workbench.batch import RolloutBatch


def degenerate_groups(rewards: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """[B] bool: True for rows whose group's rewards are all equal (std exactly 0, singletons included).

    Tested as max == min inside the group, so 0.1 + 0.1 + 0.1 style rounding in a computed std cannot
    turn an all-equal group into an "informative" one.
    """
    dense, counts = group_index(group)
    k = counts.shape[0]
    hi = torch.full((k,), -torch.inf, dtype=rewards.dtype).scatter_reduce(0, dense, rewards, "amax")
    lo = torch.full((k,), torch.inf, dtype=rewards.dtype).scatter_reduce(0, dense, rewards, "amin")
    return (hi == lo)[dense]


@registry.advantage(
    "reinforce_plus_plus_baseline",
    title="REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
    summary="Group-mean-centered outcome reward, then whitened over all valid tokens of the batch.",
    equation=r"\tilde R_i = R_i - \mathrm{mean}_g R,\quad "
             r"A = \mathrm{whiten}_{\text{batch tokens}}(\tilde R_i\, m_{i,t})",
    choices={"token_rewards_mode": TOKEN_REWARD_MODES})
def reinforce_plus_plus_baseline(batch: RolloutBatch, *, unbiased=True, eps=1e-8, allow_singletons=False,
                                 token_rewards_mode="in_baseline"):
    """R~_i = R_i - mean_g R broadcast over m, then A = masked_whiten(R~) over every valid token.

    Reads `rewards` (+ summed `token_rewards`, verl's `token_level_rewards.sum(-1)`), `group`, `mask`.
    unbiased: Bessel token variance (verl `reinforce_plus_plus_baseline`) or population variance
    (OpenRLHF `reinforce_baseline`; OpenRLHF clamps var at 1e-8 where this adds eps, identical unless
    var < 1e-8). The whitening is token-weighted: an all-equal group is 0 after centering but becomes
    -mean_tok/std_tok after whitening (not 0 when lengths differ), the documented reference behaviour.
    Singleton groups: allow_singletons=True makes them 0 before whitening, "keep" R_i (verl's mean 0).
    token_rewards_mode="to_go" adds the token reward-to-go after centering (OpenRLHF), see `split_rewards`.
    """
    mask = batch.mask.double()
    centered = grpo(batch, scale="none", allow_singletons=allow_singletons,
                    token_rewards_mode=token_rewards_mode).double()
    return ops.masked_whiten(centered, mask, unbiased=unbiased, eps=eps).to(batch.mask.dtype)


@registry.advantage(
    "remax",
    title="ReMax: A Simple, Effective, and Efficient Reinforcement Learning Method for Aligning Large "
          "Language Models",
    summary="Reward-to-go minus the reward of the greedy response to the same prompt.",
    equation=r"A_t = \sum_{t' \ge t} r_{t'}\, m_{t'} - R_{\text{greedy}}\, m_t",
    reads=("baseline_rewards",))
def remax(batch: RolloutBatch):
    """returns_t = sum_{t'>=t} r_t' m_t' (reverse cumsum, verl `compute_remax_outcome_advantage`);
    A_t = returns_t - R_greedy m_t.

    Reads `rewards` and/or `token_rewards`, `mask`, and `baseline_rewards` [B]: the outcome reward of
    the greedy (do_sample=False) response to the same prompt, filled by the group transform `greedy-baseline`.
    """
    batch.require("baseline_rewards")
    mask = batch.mask.double()
    greedy = batch.baseline_rewards.double()
    if not bool(torch.isfinite(greedy).all()):
        raise ValueError("remax: baseline_rewards (greedy rewards) must be finite")
    returns = discounted_returns(token_rewards(batch), mask, 1.0)
    return (returns - greedy[:, None] * mask).to(batch.mask.dtype)


@registry.advantage(
    "opo", title="On-Policy RL with Optimal Reward Baseline",
    summary="Length-weighted group mean of the rewards as the baseline.",
    equation=r"b_g = \frac{\sum_{i\in g} |y_i| R_i}{\sum_{i\in g} |y_i|},\quad A_i = R_i - b_g")
def opo(batch: RolloutBatch, *, allow_singletons=False):
    """OPO advantage (verl `opo`). Reads `rewards` (+ summed `token_rewards`), `group`, `mask`.

    The weighted mean is `group_mean`'s, exact for equal rewards; a group whose responses are all empty
    (sum |y_i| = 0) gets its minimum as baseline, and A = 0 on every (masked) token anyway.
    Singleton groups: an error unless allow_singletons: True gives A = 0, "keep" verl's baseline 0 (A = R).
    """
    rewards = sequence_rewards(batch)
    dense, counts = group_index(batch.group)
    single = check_group_sizes(counts[dense], "opo", allow_singletons)
    baseline = group_mean(rewards, dense, counts.shape[0], weights=batch.lengths)[dense]
    kept = rewards if allow_singletons == "keep" else torch.zeros_like(rewards)
    return broadcast(torch.where(single, kept, rewards - baseline), batch.mask)


ALPHA_MODES = ("paper", "verl")  # GPG's alpha: B / (B - M) over all-equal groups, or verl's count of nonzero rewards


def check_gpg(*, f_norm=1.0, **_) -> None:
    if not f_norm > 0:
        raise ValueError(f"f_norm (GPG's divisor of the advantage) must be > 0, got {f_norm}")


def gpg_alpha(batch: RolloutBatch, alpha_mode: str = "paper", keep_singletons: bool = False) -> float:
    """GPG's rescaling factor alpha for the batch.

    "paper": alpha = B / (B - M), M = rows in all-equal (zero-std) groups, whose advantage is 0; when
    every group is degenerate (M = B) all advantages are 0 and alpha is defined as 1. A group of one counts in
    M unless `keep_singletons` (allow_singletons="keep": its advantage is R, not 0).
    "verl": alpha = B / max(count_nonzero(R), 1), verl's `compute_gpg_outcome_advantage`, which counts
    nonzero *rewards* (for 0/1 rewards: correct samples), not nonzero advantages.
    """
    rewards = sequence_rewards(batch)
    B = rewards.shape[0]
    if alpha_mode == "paper":
        zero = degenerate_groups(rewards, batch.group)
        if keep_singletons:
            dense, counts = group_index(batch.group)
            zero = zero & (counts[dense] > 1)
        M = int(zero.sum())
        return 1.0 if M == B else B / (B - M)
    if alpha_mode == "verl":
        return B / max(int(torch.count_nonzero(rewards)), 1)
    raise ValueError(f"alpha_mode must be 'paper' or 'verl', got {alpha_mode!r}")


@registry.advantage(
    "gpg", title="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning",
    summary="Group-mean advantage rescaled by B/(B-M) to undo the dilution by all-equal groups.",
    equation=r"A_i = \alpha\,\frac{R_i - \mathrm{mean}_g R}{F_{\text{norm}}},\quad \alpha = \frac{B}{B - M}",
    choices={"alpha_mode": ALPHA_MODES}, check=check_gpg)
def gpg(batch: RolloutBatch, *, alpha_mode="paper", f_norm=1.0, allow_singletons=False):
    """GPG advantage A_i = alpha (R_i - mean_g R) / f_norm. Reads `rewards` (+ `token_rewards`), `group`, `mask`.

    Reading chosen (catalog note "confirm which tensor verl counts"): the default is the paper's
    alpha = B / (B - M) with M = number of samples in all-equal groups (their advantage is exactly 0, so
    alpha restores the per-sample gradient scale of the informative samples); M = B gives alpha = 1
    (every advantage is 0). verl instead computes alpha = B / count_nonzero(scores) on the raw rewards;
    it is available as alpha_mode="verl" (see `gpg_alpha`). Both give alpha = 1 only in their own
    no-op case: "paper" when no group is degenerate, "verl" when no reward is 0.
    Singleton groups: allow_singletons=True gives them A = 0 and counts them in M; "keep" is verl's mean 0
    (A = alpha R / f_norm), and they are not in M.
    The GPG policy loss (-A logp, no ratio, no clip) is a separate objective.
    """
    check_gpg(f_norm=f_norm)
    alpha = gpg_alpha(batch, alpha_mode, keep_singletons=allow_singletons == "keep")
    return grpo(batch, scale="none", allow_singletons=allow_singletons) * (alpha / f_norm)
