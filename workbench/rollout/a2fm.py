"""A^2FM's mode-stratified sampling: every group holds rollouts in each execution mode, forced by a mode prefix.

APO samples, per query, rollouts forced into each of the instant / reasoning / agentic modes, so every group can
compare the modes on the same question. The official inference code forces a mode by writing a classification,
"<classification>\\nreasoning_agent\\n</classification>\\n" (default_agent = instant, toolcalling_agent = agentic),
at the start of the response (OPPO-PersonalAI/Adaptive_Agent_Foundation_Models 6bf1c4e5, infer/infer_main.py);
the paper leaves such injected tokens out of the loss. Here the tag (`rewards.a2fm.mode_tag`, e.g. "<reasoning>")
is prepended to the prompt: it conditions the response and is never trained on, as in the paper, and the reward
(`rewards.a2fm`) reads the mode back from the prompt.

A group of G rows is split into len(modes) subgroups of near-equal size (the first G mod M modes get one more);
each subgroup is an ordinary `turns` rollout of the mode-tagged examples, and the rows are put back in group order
with the original group ids, so the advantage compares all of a question's modes. The paper also draws adaptive
rollouts (the model picks its mode); not here: every row is forced.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import concat
from workbench.rewards.a2fm import MODES, TITLE, mode_tag
from workbench.rollout.group import subgroup_sizes
from workbench.rollout.turns import TURNS_PROVIDES, turns


def mode_split(group_size: int, modes=MODES) -> list[int]:
    """Rows per mode: G split as evenly as possible, every mode at least one row."""
    return subgroup_sizes(group_size, len(modes), who="apo-a2fm", what=f"one per mode of {tuple(modes)}")


def check_modes(modes) -> tuple[str, ...]:
    modes = tuple(modes)
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown or len(set(modes)) != len(modes):
        raise ValueError(f"apo-a2fm: modes must be distinct names from {MODES}, got {modes}")
    return modes


@registry.rollout(
    "apo-a2fm", title=TITLE,
    summary="Mode-stratified groups: each group's rows are split among the instant / reasoning / agentic modes, "
            "each forced by a mode tag prepended to the prompt; rows keep their question's group id.",
    equation=r"G = \sum_{m \in \{\mathrm{inst}, \mathrm{reas}, \mathrm{agent}\}} n_m,\ n_m \ge 1,\ "
             r"y \sim \pi(\cdot \mid \langle m\rangle\, x)",
    reads=(), provides=TURNS_PROVIDES)
def a2fm_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, modes=MODES, max_turns=None,
                 max_total_tokens=None):
    """`turns` per mode on the examples with the mode's tag before their prompt (`mode_split` rows each), merged
    into one batch ordered by group (modes in `modes` order inside a group), group ids = the examples' indices."""
    modes = check_modes(modes)
    parts = []
    for mode, rows in zip(modes, mode_split(group_size, modes)):
        tagged = [replace(e, prompt=mode_tag(mode) + e.prompt) for e in examples]
        parts.append(turns(engine, task, tagged, group_size=rows, sampling=sampling, max_turns=max_turns,
                           max_total_tokens=max_total_tokens))
    batch = concat(parts, pad_id=engine.tokenizer.pad_token_id)
    order = torch.sort(batch.group.cpu(), stable=True).indices  # modes were concatenated: regroup the rows
    return batch.select(order.to(batch.group.device))
