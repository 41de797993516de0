"""RAPO's step-level reward on tool calls (Fathom-DeepResearch): each call is classified by its marginal utility.

    r_s = +c_new   the step's tool call returned content the episode has not seen yet       (exploration)
    r_s = -c_red   the call returned nothing new: a repeat of earlier content, or rejected  (redundancy)
    r_s = 0        the step made no tool call (the final answer)
    r_tool(episode) = sum_s r_s                                                    c_new = c_red = 0.1

Decisions (the paper describes a steerable reward that classifies each tool call by cognitive behaviour and marginal
utility; the released code is inference-only):
  - Two classes, novel and redundant, with the card's constants. The paper's third behaviour, verification (a call
    that re-checks an earlier finding), needs a judge of intent that our toy tasks do not have; it is not rewarded
    apart (a verifying call counts as novel or redundant by its content).
  - A call's content is the environment's `info["observation"]` when it reports one, else the call itself (its
    action text, stripped): our tools (calculator, search) are deterministic within an episode, so the same query
    returns the same content. A different query whose result repeats seen facts counts as novel under this proxy.
  - A call the environment rejected (`info["tool_error"]`) returned no content: redundant.
  - The episode's reward is the sum over its steps (no cap): a policy that spams a repeated call loses 0.1 a call.
At our scale: a one-turn task (countdown) has no tool calls, so r_tool = 0 on every row; the `rapo` recipe leaves the
component out there (it would add exact zeros). It acts on multi-turn tool episodes (calculator, search).
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.rewards import base
from workbench.rewards.tools import steps_of, written_calls
from workbench.advantages.rapo import RAPO_TITLE

RAPO_STEP_LOGS = {
    "rewards/rapo/novel_calls": ("RAPO: mean tool calls per row that returned content new to the episode.",
                                 "Rises as the policy learns to use the tool, then settles at what the task needs "
                                 "(search: one per hop); 0 on a one-turn task."),
    "rewards/rapo/redundant_calls": ("RAPO: mean tool calls per row that repeated earlier content or were rejected.",
                                     "Falls towards 0 as the -c_red penalty bites; rising: the policy loops on a "
                                     "query."),
}


def check_rapo_step(*, c_new=0.1, c_red=0.1, **_) -> None:
    for name, value in (("c_new", c_new), ("c_red", c_red)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name}={value!r}: the step reward's magnitude for a "
                             f"{'novel' if name == 'c_new' else 'redundant'} tool call must be a finite number >= 0 "
                             "(the card's 0.1)")


def call_content(action: str, info: dict):
    """What the call returned: the environment's reported observation, else the call itself (deterministic tools)."""
    return info.get("observation", action.strip())


def step_rewards(steps: list[tuple[str, dict]], *, c_new=0.1, c_red=0.1) -> list[float]:
    """Per step of one episode ((action, info) pairs, `tools.steps_of`): +c_new, -c_red or 0 (module docstring)."""
    seen, out = set(), []
    for action, info in steps:
        if written_calls(action) == 0:
            out.append(0.0)
            continue
        content = None if info.get("tool_error") else call_content(action, info)
        novel = content is not None and content not in seen
        seen.add(content)
        out.append(c_new if novel else -c_red)
    return out


@registry.reward(
    "rapo", title=RAPO_TITLE,
    summary="RAPO's step reward on tool calls: +0.1 for a call that returns content the episode has not seen, -0.1 "
            "for a redundant one (a repeated call, or one the tool rejected), summed over the episode; 0 without "
            "tool calls.",
    equation=r"r_{tool} = \sum_s \big(c_{new}[\text{call } s \text{ novel}] - c_{red}[\text{call } s \text{ redundant}]"
             r"\big),\quad c_{new} = c_{red} = 0.1",
    logs=RAPO_STEP_LOGS, check=check_rapo_step)
def rapo_step_reward(completions, *, c_new=0.1, c_red=0.1, **columns) -> list[float]:
    """r_tool per row from each step's action and info (`turn_info`; a completion without it is one step). Logs
    novel_calls and redundant_calls (means per row)."""
    check_rapo_step(c_new=c_new, c_red=c_red)
    per_step = [step_rewards(steps, c_new=1.0, c_red=1.0) for steps in steps_of(completions, columns.get("turn_info"))]
    base.log(columns, "novel_calls", sum(r.count(1.0) for r in per_step) / max(len(per_step), 1))
    base.log(columns, "redundant_calls", sum(r.count(-1.0) for r in per_step) / max(len(per_step), 1))
    return [c_new * row.count(1.0) - c_red * row.count(-1.0) for row in per_step]
