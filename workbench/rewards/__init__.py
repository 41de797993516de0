"""The `reward` slot (`fn(completions, **columns) -> list[float | None]`, TRL's signature) and the
`reward_shaping` slot (`fn(batch, ctx, **hp) -> batch`)."""
from workbench.rewards import (  # noqa: F401  (registration)
    a2fm, accuracy, act, adasearch, arlcp, checklist, eapo, fapo, format, grpo_ptr, hbpo, judges, length, milestones,
    prs, proxy, reflection, repetition, retroagent, rlvmr, shaping, ssl, tools)
