"""Entropy bonus: L -= c_H * agg(H_t), with H_t the full-vocabulary entropy at each response token."""
from __future__ import annotations

from workbench import ops, registry


def entropy_bonus(entropy, mask, *, coef=0.0, agg="token-mean", denom=None):
    """Loss term (to add) -coef * agg(entropy). verl aggregates with the PG mode; TRL uses token mean."""
    if coef == 0:
        return entropy.new_zeros(())
    return -coef * ops.aggregate(entropy, mask, agg, denom)


@registry.regularizer(
    "entropy-bonus", title="Asynchronous Methods for Deep Reinforcement Learning",
    summary="Subtract c_H times the aggregated token entropy from the loss (keeps exploration alive).",
    equation=r"L \mathrel{-}= c_H\,\mathrm{agg}(H_t),\quad H_t = -\sum_v \pi(v)\log\pi(v)",
    reads=("entropy",), coefficients={"entropy_coef": "coef"})
def entropy_regularizer(forward, batch, *, agg="token-mean", denom=None, coef=0.0):
    """`entropy_bonus` of the training forward's entropy [B, T] on `batch.mask`."""
    return entropy_bonus(forward.entropy, batch.mask, coef=coef, agg=agg, denom=denom), {}
