"""ReMix's policy reincarnation: mid-training the base (KL reference) becomes the current policy.

    s_r = round(at * total)                        the reincarnation step (at = 0.5: half-way)
    after step s_r - 1:  pi_base <- pi_theta       (a frozen copy of the policy's weights)
    steps >= s_r: fully on-policy (the mix transform replays nothing, `transforms/remix.py`)

The reference keeps its own frozen copy (`keeps=("ref",)`, checkpointed with the run and restored on resume) and moves
it once, after the step before s_r, so the first reincarnated step sees pi_base = pi_old: KL(pi || pi_base) = 0 there.
The reference's move is called with its parameters but not the run's length, so the step s_r is driven into it by the
`remix` schedule (s_r from (step, total)); the recipe uses both with the same `at`.

Decisions (the paper's abstract gives no numbers): at = 0.5 (the card's); the optimizer's state is kept across the
reincarnation (the abstract says training "restarts" from the current policy; resetting Adam's moments is not stated).

Reference: none located (arXiv 2507.06892, abstract and project page only).
"""
from __future__ import annotations

from workbench import registry
from workbench.objectives.remix import REMIX_TITLE



def reincarnation_step(total: int, at: float | None) -> int | None:
    """s_r = round(at * total), the first step trained against the reincarnated base; None without reincarnation."""
    return None if at is None else int(round(at * total))


def check_at(*, at=0.5, **_) -> None:
    if at is not None and (isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 < at < 1):
        raise ValueError(f"at={at!r}: the share of training after which the base becomes the policy must be in (0, 1) "
                         "(the card's 0.5), or None for no reincarnation")


def reincarnated(step: int, total: int, at: float | None) -> bool:
    """Step `step` trains after the reincarnation (s_r <= step)."""
    s_r = reincarnation_step(total, at)
    return s_r is not None and step >= s_r


def reincarnate(anchors: dict, policy, step: int, *, reincarnate_step=None) -> None:
    """After step s_r - 1: the base takes the policy's weights (nothing at any other step, nor without s_r)."""
    if reincarnate_step is not None and step + 1 == int(reincarnate_step):
        anchors["ref"].load_state_dict(policy.state_dict())


@registry.reference(
    "remix", title=REMIX_TITLE, keeps=("ref",), moves=reincarnate,
    summary="The warm start is the policy's start and the base of the KL; once, at the reincarnation step s_r "
            "(driven by schedule:remix, half-way), the base becomes a frozen copy of the current policy.",
    equation=r"\pi_{base} \leftarrow \pi_\theta \text{ after step } s_r - 1,\quad s_r = \mathrm{round}(0.5\,T)")
def remix_reference(model, ctx, *, reincarnate_step=None):
    """The warm start itself (its frozen copy is the base until s_r); `reincarnate_step` is the schedule's to set."""
    return model


@registry.schedule(
    "remix", title=REMIX_TITLE,
    summary="ReMix's reincarnation step s_r = round(at x total) (at = 0.5), driven into reference:remix."
            "reincarnate_step.",
    equation=r"s_r = \mathrm{round}(a\,T)", check=check_at)
def remix_reincarnation(step, total, *, at=0.5):
    """s_r for a run of `total` steps (constant over the run); -1 (never) for at=None."""
    check_at(at=at)
    s_r = reincarnation_step(int(total), at)
    return -1 if s_r is None else s_r
