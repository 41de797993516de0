"""Reward shaping (`fn(batch, ctx, **hp) -> batch`): running normalization (PPO-max), KL in the reward (PPO,
RLOO), win rates against the group (SPO). Runs after the forward passes, so it may read old/ref log-probs."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from workbench import kl, registry
from workbench.preference.selfplay import SPO_MINIMAX_LOGS, preferences_from_scores, spo_minimax
from workbench.regularizers.kl_penalty import kl_in_reward


@dataclass
class RunningMoments:
    """Running mean and variance of every reward seen so far (Chan et al.'s parallel update)."""

    count: float = 0.0
    mean: float = 0.0
    m2: float = 0.0

    def update(self, x: torch.Tensor) -> None:
        n, mean, var = float(x.numel()), float(x.double().mean()), float(x.double().var(unbiased=False))
        delta, total = mean - self.mean, self.count + n
        self.m2 += var * n + delta ** 2 * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    @property
    def std(self) -> float:
        return (self.m2 / self.count) ** 0.5 if self.count else 1.0


def normalize_and_clip(rewards: torch.Tensor, *, state: RunningMoments, delta=5.0, normalize=True, clip=True,
                       seen: torch.Tensor | None = None):
    """Updates `state` with this batch first (`seen`: the rewards of the whole step when several ranks hold a
    share of it; default `rewards`), then shifts/scales by the running moments and clips.

    delta = 5 (`unverified`: MOSS-RLHF's reward_clip); each of normalize/clip can be switched off.
    """
    if normalize:
        state.update(rewards if seen is None else seen)
        rewards = (rewards - state.mean) / max(state.std, 1e-8)
    return rewards.clamp(-delta, delta) if clip else rewards


@registry.reward_shaping(
    "ppo-max", title="Secrets of RLHF in Large Language Models Part I: PPO",
    summary="PPO-max's reward trick: normalize rewards by running statistics, then clip to [-delta, delta].",
    equation=r"r \leftarrow \mathrm{clip}\Big(\frac{r - \mu_r}{\sigma_r}, -\delta, \delta\Big)",
    reads=("rewards",), provides=("rewards",), state=RunningMoments)
def ppo_max_rewards(batch, ctx, *, delta=5.0, normalize=True, clip=True):
    """`normalize_and_clip` of `rewards` [B] with the run's moments (`ctx.state`, checkpointed), updated with every
    rank's rewards so all ranks keep the same moments."""
    return replace(batch, rewards=normalize_and_clip(batch.rewards, state=ctx.state, delta=delta, normalize=normalize,
                                                     clip=clip, seen=ctx.gather(batch.rewards)))


@registry.reward_shaping(
    "kl-in-reward", title="Fine-Tuning Language Models from Human Preferences", family="canonical",
    summary="The reward placement of `kl-penalty`: -beta * k_t added to every token's reward (TRL PPO/RLOO, "
            "verl use_kl_in_reward).",
    equation=r"r_t \leftarrow r_t - \beta\,k(\log\pi_{old} - \log\pi_{ref})_t",
    reads=("old_logp", "ref_logp"), provides=("token_rewards",), coefficients={"kl_coef": "beta"},
    kl_estimator="estimator", choices={"estimator": kl.KINDS})
def kl_reward(batch, ctx, *, beta=0.05, estimator="k1", value_clamp=None):
    """Sets `token_rewards` [B, T] = `kl_in_reward(old_logp, ref_logp, mask)`; beta = 0 leaves the batch as is."""
    if not beta:
        return batch
    return replace(batch, token_rewards=kl_in_reward(batch.old_logp, batch.ref_logp, batch.mask, beta=beta,
                                                     estimator=estimator, value_clamp=value_clamp))


@registry.reward_shaping(
    "spo-minimax", title="A Minimaximalist Approach to Reinforcement Learning from Human Feedback",
    summary="Self-play reward: each of the G samples of a prompt gets its win rate against the other G - 1 "
            "under a judge (here the verifier's order of the rewards), r_i = mean_{j != i} P(xi_i > xi_j).",
    equation=r"r_i = \frac{1}{N-1}\sum_{j \ne i} \mathcal{P}(\xi_i \succ \xi_j)",
    reads=("rewards", "group"), provides=("rewards",), logs=SPO_MINIMAX_LOGS)
def spo_win_rates(batch, ctx, *, include_self=False):
    """`spo_minimax` of the judgments `preferences_from_scores(rewards)` within each group (rows grouped in blocks
    of `ctx.group_size`); logs spo/reward_mean, spo/reward_std, spo/antisymmetry_gap."""
    judged = preferences_from_scores(batch.rewards.view(-1, ctx.group_size))
    wins, metrics = spo_minimax(judged, include_self=include_self)
    ctx.metrics.update(metrics)
    return replace(batch, rewards=wins.flatten().to(batch.rewards.dtype))
