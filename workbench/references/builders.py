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


# ------------------------------------------------------------------------------------ anchors that move

def check_every(*, every=5) -> None:
    """Refuse, when the recipe is checked, an iteration that is not a whole number of steps >= 1."""
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every must be an int >= 1 (steps per iteration), got {every!r}")


def iteration_ends(step: int, every: int) -> bool:
    """Step `step` (0-based) finishes an iteration of `every` steps."""
    if every < 1:
        raise ValueError(f"an iteration needs every >= 1 steps, got {every}")
    return (step + 1) % every == 0


def reference_to_policy(anchors: dict, policy, step: int, *, every=5):
    if iteration_ends(step, every):
        anchors["ref"].load_state_dict(policy.state_dict())


def previous_to_policy(anchors: dict, policy, step: int, *, every=5):
    if iteration_ends(step, every):
        anchors["prev"].load_state_dict(policy.state_dict())


def momentum_to_policy(anchors: dict, policy, step: int, *, every=5):
    if iteration_ends(step, every):
        anchors["prev"].load_state_dict(anchors["ref"].state_dict())
        anchors["ref"].load_state_dict(policy.state_dict())


@registry.reference(
    "iterate", title="Self-Play Preference Optimization for Language Model Alignment", family="canonical",
    keeps=("ref",), moves=reference_to_policy, check=check_every,
    summary="Iterated preference training: the reference starts at the warm start and becomes the policy every "
            "`every` steps (pi_ref <- pi_t; SPPO, iterative DPO).",
    equation=r"\pi_{ref} \leftarrow \pi_\theta \text{ every } k \text{ steps}")
def iterate(model, ctx, *, every=5):
    return model


@registry.reference(
    "previous-iterate", title="Iterative Nash Policy Optimization: Aligning LLMs with General Preferences via "
                              "No-Regret Learning", family="canonical", keeps=("prev",), moves=previous_to_policy,
    check=check_every,
    summary="A fixed reference and a previous iterate pi_t that becomes the policy every `every` steps (INPO, "
            "Nash-MP read its log-probs as prev_logp).",
    equation=r"\pi_t \leftarrow \pi_\theta \text{ every } k \text{ steps},\ \pi_{ref} \text{ fixed}")
def previous_iterate(model, ctx, *, every=5):
    return model


@registry.reference(
    "momentum", title="Accelerated Preference Optimization for Large Language Model Alignment", family="canonical",
    keeps=("ref", "prev"), moves=momentum_to_policy, check=check_every,
    summary="Nesterov-style anchors: every `every` steps the previous reference is kept as prev and the reference "
            "becomes the policy (APO's pi_hat_{t-1} <- pi_hat_t <- pi_t).",
    equation=r"\hat\pi_{t-1} \leftarrow \pi_{ref} \leftarrow \pi_\theta \text{ every } k \text{ steps}")
def momentum(model, ctx, *, every=5):
    return model
