"""SPEAR's self-imitation coefficient: the weight of the replay loss rises along a half cosine, then stays.

    c_SIL(t) = c (1 - cos(pi t / T)) / 2     for t <= T
    c_SIL(t) = c                             for t > T            c = replay_loss_coef = 1

0 at t = 0, c/2 at T/2, c at T and after: early training learns from its own fresh rollouts ("learn the ropes"), the
replay of past successes weighs in later ("trust the wins"), while `spear-tool-reward`'s bonus decays along the mirror
cosine. It drives the replayed rows' loss weight: `use("spear", into="loss_weight:spear.coef")`.

Reference: TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
`verl/verl/workers/actor/dp_actor.py` L583-591 (`loss *= replay_loss_coef * (-cos(global_steps / max_replay_loss_steps
* pi) + 1) / 2` while global_steps <= max_replay_loss_steps, else `loss *= replay_loss_coef`);
`verl-agent/examples/gigpo_trainer/run_alfworld_spear.sh` (replay_loss_coef 1, max_replay_loss_ascending_steps 100;
the card's default 200).

Decisions: t is our 0-based step (verl's global_steps counts from 1, so ours is the reference's curve one step later:
c_SIL(0) = 0 exactly). `max_replay_loss_frac` (ours, as spear-tool-reward's max_toolcall_frac) sets T as a fraction of
the run's total steps, for runs of tens of steps where the reference's 100-300 would never reach c.
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.rewards.tools import SPEAR_TITLE


def check_sil_coefficient(*, coef=1.0, max_replay_loss_steps=200, max_replay_loss_frac=None, **_) -> None:
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) or coef < 0:
        raise ValueError(f"coef={coef!r} is the replay loss's final weight (replay_loss_coef): give a finite number "
                         ">= 0 (the reference's 1)")
    if isinstance(max_replay_loss_steps, bool) or not isinstance(max_replay_loss_steps, (int, float)) \
            or not max_replay_loss_steps > 0:
        raise ValueError(f"max_replay_loss_steps={max_replay_loss_steps!r}: the steps the coefficient takes to rise "
                         "must be > 0 (the reference's scripts: 100)")
    if max_replay_loss_frac is not None and (isinstance(max_replay_loss_frac, bool)
                                             or not isinstance(max_replay_loss_frac, (int, float))
                                             or not max_replay_loss_frac > 0):
        raise ValueError(f"max_replay_loss_frac={max_replay_loss_frac!r}: T as a fraction of the run's steps must be "
                         "> 0 (or None to use max_replay_loss_steps)")


def sil_coefficient(step: float, *, coef: float = 1.0, horizon: float = 200) -> float:
    """c_SIL(t): c (1 - cos(pi t / T)) / 2 up to T, c after."""
    if step <= horizon:
        return coef * (1.0 - math.cos(math.pi * step / horizon)) / 2.0
    return float(coef)


@registry.schedule(
    "spear", title=SPEAR_TITLE,
    summary="SPEAR's self-imitation coefficient: the replay loss's weight rises from 0 to replay_loss_coef along a "
            "half cosine over the first T steps (the reference's 100-200; or a fraction of the run), then stays there.",
    equation=r"c_{SIL}(t) = \begin{cases} c\,\frac{1 - \cos(\pi t/T)}{2} & t \le T\\ c & t > T\end{cases}",
    check=check_sil_coefficient)
def spear_sil(step: int, total: int, *, coef=1.0, max_replay_loss_steps=200, max_replay_loss_frac=None) -> float:
    """c_SIL at `step` of a run of `total` steps; T = max_replay_loss_frac x total when set, else
    max_replay_loss_steps."""
    check_sil_coefficient(coef=coef, max_replay_loss_steps=max_replay_loss_steps,
                          max_replay_loss_frac=max_replay_loss_frac)
    horizon = max_replay_loss_steps if max_replay_loss_frac is None else max(max_replay_loss_frac * total, 1e-12)
    return sil_coefficient(step, coef=coef, horizon=horizon)
