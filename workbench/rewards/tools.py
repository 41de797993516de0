"""Tool-call rewards: SPEAR's decaying intrinsic tool-call reward, and how our environments' tool calls are
recognised in a step's action text (shared with `prs`).

Our environments' tool-call syntax (one call per action turn):

    [37*48]   [Bov]                                   calculator, search: an action ending in "]" is a call,
                                                      any other action is the final answer
    <tool_call>{"name": ..., "arguments": ...}</tool_call>                   TRL-style environments
    <tool_call>add(2, 3)</tool_call>

A step's `turn_info` entry says whether the environment rejected its call (`tool_error`, None when it ran).
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.envs.trl import CLOSE, OPEN
from workbench.rewards import base

SPEAR_TITLE = ("Learn the Ropes, Then Trust the Wins: Self-imitation with Progressive Exploration for Agentic "
               "Reinforcement Learning")
MODES = ("decay", "constant")
COUNTS = ("tool_turns", "episode_length")
ON_CORRECT = ("count", "any")


def is_tool_call(action: str) -> bool:
    """Does the action call a tool in one of our environments' syntaxes? A TRL `<tool_call>...</tool_call>` block,
    or a bracket call `[...]` closing the action (the calculator's and search's rule: an action ending in "]" is
    a call). String scans only (linear time on any input)."""
    if OPEN in action and CLOSE in action:
        return True
    if not action.endswith("]"):
        return False
    return action.rfind("[") > action.rfind("]", 0, len(action) - 1)  # an opening bracket for the final "]"


def steps_of(completions, turn_info=None) -> list[list[tuple[str, dict]]]:
    """Per row, (action text, step info) of every step: `turn_info` when the multi-turn rollout gave it, else the
    completion as one step with no info (TRL, one-turn calls)."""
    actions = base.actions(completions, turn_info=turn_info)
    infos = turn_info if turn_info is not None else [None] * len(actions)
    return [list(zip(acts, info if info else [{}] * len(acts))) for acts, info in zip(actions, infos)]


def assistant_messages(completion) -> list[dict] | None:
    """The assistant messages of a conversational completion (TRL), None for a plain string."""
    if isinstance(completion, (list, tuple)):
        return [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
    return None


def tool_turns(completions, turn_info=None) -> list[int]:
    """n per row: the steps that called a tool and whose call ran (no `tool_error`). A conversational completion
    counts its assistant messages carrying `tool_calls` (SPEAR `reward.py`: `tool_calls is not None`).

    Our reading: SPEAR counts the assistant turns its tool parser turned into calls; ours are text actions, so a call
    the environment rejected (malformed, unknown tool: `tool_error`) does not count, and neither does the final
    answer. The last step of an episode counts when it is a call by syntax (an episode cut at max_turns)."""
    out = []
    for completion, steps in zip(completions, steps_of(completions, turn_info)):
        messages = assistant_messages(completion)
        if messages is not None and turn_info is None:
            out.append(sum(m.get("tool_calls") is not None for m in messages))
        else:
            out.append(sum(is_tool_call(action) and not info.get("tool_error") for action, info in steps))
    return out


def episode_lengths(completions, turn_info=None) -> list[int]:
    """n per row: the number of steps of the episode (verl-agent's `episode_lengths`); a conversational completion
    counts its assistant messages."""
    out = []
    for completion, steps in zip(completions, steps_of(completions, turn_info)):
        messages = assistant_messages(completion)
        out.append(len(messages) if messages is not None and turn_info is None else len(steps))
    return out


def toolcall_coefficient(t: float, *, max_toolcall_steps: float, mode: str = "decay") -> float:
    """c(t) = (cos(pi t / T_tool) + 1) / 2 for t <= T_tool, else 0 (SPEAR's "cosine"); 1 in "constant" mode."""
    if mode not in MODES:
        raise ValueError(f"spear-tool-reward: mode must be one of {MODES}, got {mode!r}")
    if not max_toolcall_steps > 0:
        raise ValueError(f"spear-tool-reward: max_toolcall_steps must be > 0, got {max_toolcall_steps}")
    if mode == "constant":
        return 1.0
    return (math.cos(t / max_toolcall_steps * math.pi) + 1) / 2 if t <= max_toolcall_steps else 0.0


def tool_reward(n: int, c: float) -> float:
    """r_tool = min(1, 0.1 n) c: 0.1 per tool turn, at most 1."""
    return min(0.1 * n, 1.0) * c


def schedule_position(columns: dict, max_toolcall_steps: float, max_toolcall_frac: float | None):
    """(t, T_tool): the training step (ours, or TRL's `trainer_state.global_step`; 0 when neither is given) and the
    horizon, `max_toolcall_steps`, or `max_toolcall_frac` x the run's total steps when that is set."""
    state = columns.get("trainer_state")
    step = columns.get("step")
    if step is None and state is not None:
        step = state.global_step
    if max_toolcall_frac is None:
        return float(step or 0), max_toolcall_steps
    if not max_toolcall_frac > 0:
        raise ValueError(f"spear-tool-reward: max_toolcall_frac must be > 0 (or None), got {max_toolcall_frac}")
    total = columns.get("total_steps") or (state.max_steps if state is not None else None)
    if not total:
        raise ValueError("spear-tool-reward: max_toolcall_frac needs the run's length: a total_steps column (ours) "
                         "or trainer_state.max_steps (TRL); pass max_toolcall_steps instead")
    return float(step or 0), max_toolcall_frac * total


@registry.reward(
    "spear-tool-reward", title=SPEAR_TITLE,
    summary="Intrinsic tool-use reward 0.1 per tool turn (at most 1), scaled by a cosine that decays from 1 to 0 "
            "over the first T_tool steps (or constant): learn the ropes of the tools early, then trust the wins.",
    equation=r"r_{tool} = \min(1, 0.1\,n)\,c(t),\quad c(t) = \begin{cases}\frac{\cos(\pi t/T_{tool}) + 1}{2} & "
             r"t \le T_{tool}\\ 0 & t > T_{tool}\end{cases}")
def spear_tool_reward(completions, *, mode="decay", count="tool_turns", max_toolcall_steps=200,
                      max_toolcall_frac=None, on_correct="count", **columns) -> list[float]:
    """r_tool per row, added to the environment's score (SPEAR: score += r_tool).

    mode: "decay" (SPEAR's `use_toolcall_reward="cosine"`) or "constant" (c = 1).
    count: n is "tool_turns" (`verl/recipe/spear/reward.py`: assistant turns with tool calls; ours: steps whose
        action is a tool call in our envs' syntax and ran without `tool_error`, see `tool_turns`) or
        "episode_length" (`verl-agent/agent_system/reward_manager/episode.py`: the episode's number of steps).
    max_toolcall_steps: T_tool = 200 (the repository's scripts; its README shows 100), in training steps t
        (`step`, or TRL's `trainer_state.global_step`; verl counts from 1, we from 0).
    max_toolcall_frac: our addition. When set, T_tool = max_toolcall_frac x the run's total steps (`total_steps` or
        TRL's `trainer_state.max_steps`): SPEAR's 200 steps assume runs of hundreds of steps; ours are tens.
    on_correct: "count" (SPEAR's Qwen2.5 scripts, `..._posneg_decay`): every row gets min(1, 0.1 n) c; "any" (its
        Qwen3 scripts, `..._posneg_decay_qwen3`): a correct row gets [n > 0] c instead (needs `scores`, or `answer`).
    A one-turn task has no tool calls: r_tool = 0 under count="tool_turns". Logs `tool_calls` (mean n) and `coef`.
    """
    if count not in COUNTS:
        raise ValueError(f"spear-tool-reward: count must be one of {COUNTS}, got {count!r}")
    if on_correct not in ON_CORRECT:
        raise ValueError(f"spear-tool-reward: on_correct must be one of {ON_CORRECT}, got {on_correct!r}")
    t, horizon = schedule_position(columns, max_toolcall_steps, max_toolcall_frac)
    c = toolcall_coefficient(t, max_toolcall_steps=horizon, mode=mode)
    turn_info = columns.get("turn_info")
    n = (tool_turns if count == "tool_turns" else episode_lengths)(completions, turn_info)
    rewards = [tool_reward(k, c) for k in n]
    if on_correct == "any":
        correct = base.correctness(completions, reward="spear-tool-reward", **columns)
        rewards = [float(k > 0) * c if ok else r for k, ok, r in zip(n, correct, rewards)]
    base.log(columns, "tool_calls", sum(n) / max(len(n), 1))
    base.log(columns, "coef", c)
    return rewards
