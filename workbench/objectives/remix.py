"""ReMix's mix-policy proximal policy gradient: each row clipped to its own behaviour policy, updated UTD times.

    r_t = pi_theta(y_t | s_t) / mu(y_t | s_t)      mu: the policy that sampled the row (its stored `mu_logp`)
    l_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))
    each minibatch takes `utd` optimizer steps (update-to-data ratio; 1 is PPO's one step per minibatch)

For a fresh row mu is the rollout policy, pi_old up to the engine's rounding, so the loss is PPO-clip; for a row
replayed from k steps back (transforms/remix.py) the ratio and its clip band are around the policy that generated it,
not around pi_old. This differs from `dots-rr-clip` (objectives/decoupled.py), which clips pi / pi_old and weights by pi_old / mu.
No existing objective clips pi / mu (`minirl` weights by pi / mu unclipped, `hispo` masks by it).

The update-to-data ratio is this objective's update plan (`registry.Entry.plan`): `utd` optimizer steps on each
minibatch, every token moving in each, so a recipe carries it (the run's `ppo_epochs` would instead pass over the whole
batch again, reshuffled). utd = 1 with mu = pi_old is exactly `ppo-clip`.

Decisions (the paper's abstract gives no numbers): utd = 2 and eps = 0.2 on both sides (the card's, and verl's
clip_ratio); the clip metrics (`clip/*`, `ratio/*`) are those of r = pi / mu.

Reference: none located (arXiv 2507.06892, abstract only).
"""
from __future__ import annotations

from workbench import registry
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, ppo_clip

REMIX_TITLE = ("Squeeze the Soaked Sponge: Efficient Off-policy Reinforcement Finetuning for Large Language Model")


def check_utd(*, utd=2, **_) -> None:
    if isinstance(utd, bool) or not isinstance(utd, int) or utd < 1:
        raise ValueError(f"utd={utd!r}: the update-to-data ratio (optimizer steps per minibatch) must be a whole "
                         "number >= 1 (the card's 2; 1 is PPO's one step)")


def utd_plan(batch, *, utd=2, **_) -> list:
    """`utd` optimizer steps on the minibatch, each moving every token (None: the whole mask)."""
    check_utd(utd=utd)
    return [None] * utd


@registry.objective(
    "remix", title=REMIX_TITLE,
    summary="PPO-clip of each row's ratio to its own behaviour policy pi / mu (fresh rows: mu = pi_old; replayed rows: "
            "the policy that sampled them), with utd = 2 optimizer steps per minibatch.",
    equation=r"\ell = \max\big(-A\tfrac{\pi_\theta}{\mu},\ -A\,\mathrm{clip}(\tfrac{\pi_\theta}{\mu}, 1-\epsilon, "
             r"1+\epsilon)\big),\quad \text{UTD steps per minibatch}",
    reads=("mu_logp",), plan=utd_plan, logs={**CLIP_LOGS, **DUAL_CLIP_LOGS}, check=check_utd)
def remix_objective(logp, old_logp, advantages, mask, *, mu_logp, agg="token-mean", denom=None, utd=2, eps_low=0.2,
                    eps_high=0.2, dual_clip_c=None, logr_clamp=None):
    """`ppo_clip` with the behaviour log-probs `mu_logp` [B, T] (detached) in the place of old_logp; old_logp is not
    read by the loss (it is the precedent policy of the KL-Convex term, regularizers/kl_convex.py). `utd` is read by
    the plan only."""
    if mu_logp.shape != logp.shape:
        raise ValueError(f"mu_logp has shape {tuple(mu_logp.shape)} but logp has shape {tuple(logp.shape)}")
    return ppo_clip(logp, mu_logp.detach(), advantages, mask, agg=agg, denom=denom, eps_low=eps_low,
                    eps_high=eps_high, dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
