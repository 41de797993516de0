"""The exercises of notebook 06_metric_glossary (metric glossary): each answer is checked against the library's own
math."""
from __future__ import annotations

import torch


def k3_old(ratios=(0.5, 1.0, 2.0)) -> float:
    """The logged kl/k3_old = mean((r - 1) - log r) over tokens with these ratios (library's clip_metrics)."""
    from workbench.objectives.ppo import clip_metrics

    r = torch.tensor([list(ratios)], dtype=torch.float64)
    return clip_metrics(r, torch.ones_like(r), torch.ones_like(r), 0.2, 0.2)["kl/k3_old"]


def check_k3_old(answer, ratios=(0.5, 1.0, 2.0)) -> str:
    """Exercise: compute kl/k3_old by hand for three tokens."""
    expected = k3_old(ratios)
    if not abs(float(answer) - expected) <= 1e-3:
        raise AssertionError(f"not quite: average (r - 1) - ln r over r in {list(ratios)} (you gave {answer})")
    return "correct"


def check_no_signal_metric(answer: str) -> str:
    """Exercise: the logged metric that says how many groups carry no learning signal (a GLOSSARY key; the
    glossary itself is not imported here, which would pull in the whole trainer)."""
    expected = "frac_zero_std_groups"
    if answer != expected:
        raise AssertionError(f"not quite: {answer!r} measures something else; look for the share of groups whose "
                             "rewards are all equal (their advantages are 0)")
    return "correct"
