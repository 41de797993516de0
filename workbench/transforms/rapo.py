"""RAPO's replay (Fathom-DeepResearch): the latest successful rollout of a prompt goes into each of its failed groups.

    B[q]   the latest row of prompt q with reward > `success`          (a per-prompt buffer of one row)
    group of q failed  <=>  std(r) < `dead_std` and mean(r) < `dead_mean`     (arpo-gui's test: every row failed)
    failed and B[q] non-empty  ->  the group's first row is replaced by B[q]
    then this step's successes are stored (each replacing its prompt's older one)

A failed group has zero advantage under GRPO; with the stored success in it, its reward std is > 0 and that row gets
the group's one positive advantage. This is `transform:arpo-gui`'s rule with the policy "latest" instead of "a random
one of the last 8": a per-prompt buffer of one entry (`per_key=1`, FIFO) holds exactly the prompt's latest success, so
the component is arpo-gui's code called with per_task=1 (no edit to it; its random draw from one entry is that entry).
Among several successes of the same step, the latest is the last row of the batch (row order).

Decisions (the paper gives the idea only; Fathom-DeepResearch's released code is inference-only): success is a reward
above 0.5 (the 0/1 verifier's "correct"; a shaped reward of a correct row stays above it), the failed-group test and
the buffer's capacity are arpo-gui's (std < 0.05, mean < 0.2; 4096 rows). The prompt must recur for its success to be
replayed: the recipe samples a fixed pool (`sampler:rapo`, which prunes solved prompts).
"""
from __future__ import annotations

from workbench import registry
from workbench.advantages.rapo import RAPO_TITLE
from workbench.transforms.arpo_gui import REPLAY_LOGS, arpo_gui, check_arpo_gui


def check_rapo_replay(*, capacity=4096, success=0.5, dead_std=0.05, dead_mean=0.2, **_) -> None:
    check_arpo_gui(per_task=1, capacity=capacity, success=success, dead_std=dead_std, dead_mean=dead_mean)


@registry.group_transform(
    "rapo", title=RAPO_TITLE,
    summary="RAPO's replay: each group that failed throughout gets, in place of its first row, the latest stored "
            "success of the same prompt (a per-prompt buffer of one row), so GRPO sees one positive advantage where "
            "it would see none; this step's successes then replace the stored ones.",
    equation=r"\mathrm{std}_g r < 0.05 \wedge \bar r_g < 0.2 \wedge B[q_g] \neq \emptyset \;\Rightarrow\; "
             r"y_{g,1} \leftarrow B[q_g],\quad B[q] = \text{latest } y \text{ of } q \text{ with } r > 0.5",
    reads=("rewards", "group", "prompts"), logs=REPLAY_LOGS, check=check_rapo_replay, state=dict)
def rapo_replay(batch, ctx, *, capacity=4096, success=0.5, dead_std=0.05, dead_mean=0.2):
    """`transform:arpo-gui` with one stored success per prompt (the latest). Reads `rewards`, `group`, `prompts`;
    logs replay/dead_groups, replay/injected_groups, replay/buffer_rows."""
    return arpo_gui(batch, ctx, per_task=1, capacity=capacity, success=success, dead_std=dead_std,
                    dead_mean=dead_mean)
