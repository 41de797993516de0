"""MDPO's proximity weight 1/t_k as a function of training progress."""
from __future__ import annotations

from workbench import registry


def check_mdpo_inv_t(*, t_min=None, **_) -> None:
    if t_min is not None and not t_min > 0:
        raise ValueError(f"t_min must be > 0, got {t_min}")


@registry.schedule(
    "mdpo-inv-t", title="Mirror Descent Policy Optimization",
    summary="1/t_k with t_k = 1 - (k - 1)/K: the KL-to-pi_k weight grows from about 1 to K/2 over K steps.",
    equation=r"\frac{1}{t_k},\quad t_k = \max\big(1 - \tfrac{k - \mathrm{offset}}{K},\ t_{min}\big)",
    family="canonical", check=check_mdpo_inv_t)
def mdpo_inv_t(step: int, total: int, *, offset: float = 1.0, t_min: float | None = None) -> float:
    """1/t_k with t_k = 1 - (step - offset)/total, floored at t_min (default 1/total).

    offset=1 (default) is the reference code (`lr_now = 1 - (iters_so_far - 1)/n_updates`, 0-based
    iterations, so t_0 = 1 + 1/K and the last iteration K-1 has t = 2/K); offset=0 gives
    t_k = 1 - k/K (t_0 = 1). The floor guards t <= 0 (offset=0 at step = total, or steps past `total`):
    1/t never exceeds 1/t_min.
    """
    if total < 1:
        raise ValueError(f"total must be >= 1, got {total}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    check_mdpo_inv_t(t_min=t_min)
    t_min = 1.0 / total if t_min is None else t_min
    return 1.0 / max(1.0 - (step - offset) / total, t_min)
