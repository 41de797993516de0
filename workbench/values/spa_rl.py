"""SPA-RL's value loss: the progress estimator's fit of the outcome, plus the step critic's clipped value loss.

    L = progress_coef * mean_i (sum_t c_{i,t} - R_i)^2  +  coef * value_loss(V, R^GAE) at the turns' first tokens

c_{i,t} = the head's value at the last policy token of turn t (`advantages.spa_rl.progress_readings`), R_i the
row's outcome (`rewards`). The estimator's loss is zero iff sum_t c_t = R_i on every row. The mean is over the
minibatch's rows (the code's `nn.MSELoss` over a batch of trajectories). The critic term is `value-loss`'s
clipped loss on the `spa-rl` advantage's targets (coef 0.1, clip 0.2: TRL 0.x `PPOConfig` vf_coef, cliprange_value).

Reference: WangHanLinHenry/SPA-RL-Agent @ ed20087 `prm/train_our_progress_model.py` `prm_model.forward`.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.spa_rl import SPA_TITLE, progress_readings
from workbench.values.loss import VALUE_LOGS, value_loss


def progress_loss(values: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean_i (sum_t c_{i,t} - R_i)^2 over rows with a policy token, the predictions sum_t c_{i,t} [B])."""
    batch.require("rewards", "turn")
    predicted = progress_readings(values, batch).sum(-1)
    rows = (batch.mask.sum(-1) > 0).to(values.dtype)
    err = (predicted - batch.rewards.to(values.dtype)) ** 2
    return (err * rows).sum() / rows.sum().clamp(min=1), predicted


SPA_RL_VALUE_LOGS = {
    "value/progress_loss": ("SPA-RL: mean squared error of the progress estimator's summed per-turn readings against "
                            "the episode's outcome.",
                            "Falls towards 0 as the per-turn readings learn to add up to the outcome."),
    "value/progress_mean": ("SPA-RL: mean over rows of the estimator's prediction sum_t c_t of the outcome.",
                            "Tracks reward/mean once the estimator fits."),
}


@registry.value(
    "spa-rl", title=SPA_TITLE,
    summary="Progress estimator: the per-turn readings at each turn's last token must sum to the outcome (MSE); "
            "plus the step critic's clipped value loss at each turn's first token.",
    equation=r"L = \big(\textstyle\sum_t c_t - R\big)^2 + c_V\,\tfrac12\max\big((V-R^{GAE})^2, "
             r"(V_{clip}-R^{GAE})^2\big)",
    reads=("returns", "value_mask", "old_values", "turn", "rewards"), logs={**VALUE_LOGS, **SPA_RL_VALUE_LOGS})
def spa_rl_value(values, batch, *, agg="token-mean", denom=None, coef=0.1, progress_coef=1.0, clip_eps=0.2):
    """progress_coef x `progress_loss` + coef x the clipped critic loss (skipped when no turn has a critic token).
    Metrics: value/progress_loss, value/progress_mean (mean sum_t c_t), and value-loss's when the critic trains."""
    prog, predicted = progress_loss(values, batch)
    total = progress_coef * prog
    metrics = {"value/progress_loss": prog.item(), "value/progress_mean": float(predicted.detach().mean())}
    if batch.value_mask.sum() > 0:
        critic, m = value_loss(values, batch.old_values, batch.returns, batch.value_mask, agg=agg, denom=denom,
                               clip_eps=clip_eps)
        total = total + coef * critic
        metrics.update(m)
    return total, metrics
