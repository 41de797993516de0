"""DigiRL's step critic: a success classifier trained by binary cross-entropy on [Monte Carlo return > 0].

    y_s = 1[G_s > 0]      (G_s: the `digirl` advantage's targets, `returns` at each step's first policy token)
    L_V = c * mean_s BCE(sigmoid(V(s_s)), y_s) = c * mean_s softplus(V) - y_s V

The head's output is the success logit; the code's critic has two logits per state and a 2-class cross-entropy,
which is this loss with the logit difference (CE([0, z], y) = BCE(sigmoid(z), y)). The code trains two critics
(V1, V2) and also fits the next state's logits to the same label (`critic_loss`: nv1_loss + nv2_loss); one head
here, each state trained once with its own label.

Reference: DigiRL-agent/digirl @ c74ec34 `digirl/algorithms/digirl/trainer.py` `DigiRLTrainer.critic_loss`;
critic_lr 1e-4 in `scripts/config/main/default.yaml` (the workbench trains the head with the policy's optimizer).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench import ops, registry
from workbench.advantages.digirl import DIGIRL_TITLE
from workbench.values.loss import VALUE_LOGS


def success_bce(logits, returns, mask, *, agg="token-mean", denom=None):
    """(loss, accuracy): BCE of sigmoid(logits) against 1[returns > 0] over `mask`, and the 0.5-threshold accuracy."""
    labels = (returns > 0).to(logits.dtype)
    per_token = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
    loss = ops.aggregate(per_token, mask, agg, denom)
    with torch.no_grad():
        acc = ops.masked_mean(((logits > 0).to(labels.dtype) == labels).to(mask.dtype), mask)
    return loss, acc


DIGIRL_VALUE_LOGS = {
    "value/acc": ("DigiRL: accuracy of the success classifier (sigmoid(V) > 0.5 vs Monte Carlo return > 0) at the "
                  "steps' value tokens.",
                  "Rises above the share of the majority label; stuck at it: the critic predicts one class only."),
}


@registry.value(
    "digirl", title=DIGIRL_TITLE,
    summary="Step critic as a success classifier: binary cross-entropy of sigmoid(V) against [Monte Carlo "
            "return > 0] at every step's value token.",
    equation=r"L_V = c\,\mathrm{BCE}\big(\sigma(V(s_h)),\ \mathbb{1}[G_h > 0]\big)",
    reads=("returns", "value_mask"),
    logs={**{k: VALUE_LOGS[k] for k in ("value/loss", "value/mean")}, **DIGIRL_VALUE_LOGS})
def digirl_value(values, batch, *, agg="token-mean", denom=None, coef=1.0):
    """coef x `success_bce` of the head's logits [B, T] on the advantage's targets (`returns`, `value_mask`); 0 with
    no gradient when the minibatch has no value token. Metrics: value/loss, value/acc, value/mean (mean success
    probability)."""
    if batch.value_mask.sum() == 0:
        return values.sum() * 0, {}
    loss, acc = success_bce(values, batch.returns, batch.value_mask, agg=agg, denom=denom)
    with torch.no_grad():
        metrics = {"value/loss": float(loss), "value/acc": float(acc),
                   "value/mean": float(ops.masked_mean(torch.sigmoid(values), batch.value_mask))}
    return coef * loss, metrics
