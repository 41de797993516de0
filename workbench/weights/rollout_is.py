"""Rollout importance correction for every objective (verl's `rollout_is`): weight each token's policy loss by how
much more likely the trainer's policy is than the rollout engine's to have sampled it.

    w_t = exp(old_t - mu_t)  truncated at C or masked outside [low, C], per token or per sequence (`tis_weights`)
    l_t <- sg(w_t) * l_t          the objective's per-token loss only (not a KL term or the value loss)

With the HF engine w = 1 (same model, same kernels); it matters with a separate engine (vLLM) or stale weights.
"""
from __future__ import annotations

from workbench import registry
from workbench.objectives.tis import MISMATCH_LOGS, TIS_MODES, check_tis, correction_metrics, tis_weights_and_drops

ROLLOUT_IS_LOGS = {
    "rollout_is/mean_weight": ("--set rollout_is: mean importance weight exp(old - mu) (truncated or masked) on every "
                               "objective's per-token loss.",
                               "As tis/mean_weight: about 1 with HF generate; far from 1, engine and trainer "
                               "disagree."),
    "rollout_is/masked_frac": ("--set rollout_is: fraction of valid tokens a mask mode dropped (weight 0).",
                               "As tis/masked_frac: 0 with HF generate, small with vLLM; high, much of the batch is "
                               "dropped."),
}


@registry.loss_weight(
    "rollout-is", title="Your Efficient RL Framework Secretly Brings You Off-Policy RL Training",
    family="canonical", reads=("old_logp", "mu_logp"),
    summary="Weight every objective's per-token loss by exp(old - mu), truncated at `cap` or masked outside "
            "[low, cap], per token or per sequence (`mode`), as verl's rollout_is.",
    equation=r"l_t \leftarrow \mathrm{sg}(w_t)\,l_t,\quad w_t = \min\big(e^{\log\pi_{old} - \log\mu}, C\big)",
    logs={**MISMATCH_LOGS, **ROLLOUT_IS_LOGS}, choices={"mode": TIS_MODES}, check=check_tis)
def rollout_is(batch, *, mode="token_truncate", cap=2.0, low=None):
    """(w [B, T], metrics `rollout_is/*` and the mismatch's largest |old - mu|) on a minibatch."""
    w, dropped = tis_weights_and_drops(batch.old_logp, batch.mu_logp, batch.mask, mode=mode, cap=cap, low=low)
    return w, correction_metrics(w, dropped, batch.old_logp, batch.mu_logp, batch.mask, prefix="rollout_is")
