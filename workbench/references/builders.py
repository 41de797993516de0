"""What the policy starts from and what the KL reference is: the warm start itself, or a soup of several."""
from __future__ import annotations

from workbench import registry
from workbench.preference.proximal import soup_model


@registry.reference(
    "sft", title="Training language models to follow instructions with human feedback", family="canonical",
    summary="The SFT warm start (or the loaded model when there is no SFT) is both the policy's start and the "
            "frozen KL reference.")
def warm_start_reference(model, ctx):
    return model


@registry.reference(
    "salsa", title="SALSA: Soup-based Alignment Learning for Stronger Adaptation in RLHF",
    summary="The policy starts at, and the KL reference is, the uniform weight average of SFT runs with seeds "
            "s, s + 1, ... instead of one SFT model.",
    equation=r"\theta_{ref} = \theta_0 = \tfrac{1}{M}\textstyle\sum_m \theta_{SFT}^{(s+m)}")
def soup_reference(model, ctx, *, runs=2):
    """`model` is the run's SFT model (seed s); `ctx.load_sft(seed)` fine-tunes (or loads from the cache) the same
    SFT with another seed. Without SFT the other ingredients are the model loaded with seed + m: the same
    checkpoint for a pretrained model (the soup is then that model)."""
    if runs < 1:
        raise ValueError(f"salsa needs runs >= 1 SFT models to average, got {runs}")
    others = [ctx.load_sft(ctx.seed + m) for m in range(1, runs)]
    return soup_model([model, *others]).train().requires_grad_(True)
