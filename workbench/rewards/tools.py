"""Tool-call rewards: SPEAR's decaying intrinsic tool-call reward; and the one reading of "which tool calls did an
action make" that this family's rewards share (`prs`, `adasearch`, `apo-a2fm`, `retroagent`).

Tool-call syntaxes recognised in an action's text:

    [37*48]   [Bov]                                   calculator, search: an action closing with "[...]" is a call
                                                      (the envs' rule: an action ending in "]"), any other action
                                                      is the final answer
    <tool_call>{"name": ..., "arguments": ...}</tool_call>                   TRL-style environments
    <tool_call>add(2, 3)</tool_call>
    <search>query</search>                            Search-R1 / SkyRL transcripts (several in one completion)

and, in TRL's conversational completions, an assistant message's structured `tool_calls`.

Rejected calls: a step's `turn_info` entry says whether the environment rejected its call (`tool_error`: malformed,
unknown tool, a failing tool; None when it ran). Our reading, the same for every reward here: a rejected call is
not a call: it ran nothing (no search result, no milestone value, no tool round trip to pay for), and SPEAR counts
the turns its tool parser turned into calls. `written_calls` is the syntax alone (PRS needs it to judge a call's
format); `action_calls` and `calls` count the calls that ran.
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.rewards import base
from workbench.text.tool_calls import CLOSE, OPEN

SPEAR_TITLE = ("Learn the Ropes, Then Trust the Wins: Self-imitation with Progressive Exploration for Agentic "
               "Reinforcement Learning")
MODES = ("decay", "constant")
COUNTS = ("tool_turns", "episode_length")
ON_CORRECT = ("count", "any")
SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"  # Search-R1 / SkyRL search env tags
TAGS = ((OPEN, CLOSE), (SEARCH_OPEN, SEARCH_CLOSE))


# ----------------------------------------------------------------------------- tool calls

def tagged_calls(text: str, open_tag: str, close_tag: str) -> int:
    """Closed open_tag...close_tag blocks in `text`, in order (one left-to-right scan: linear time)."""
    n, at = 0, 0
    while (start := text.find(open_tag, at)) >= 0:
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            break
        n, at = n + 1, end + len(close_tag)
    return n


def bracket_call(action: str) -> bool:
    """Does the action close with a bracket call "[...]"? The calculator's and search's rule is "an action ending
    in ']' is a call" (a malformed one gets a tool_error); we also ask for the opening bracket, so a text that
    merely ends in "]" on a task without tools ("12]") is an answer."""
    if not action.endswith("]"):
        return False
    return action.rfind("[") > action.rfind("]", 0, len(action) - 1)  # an opening bracket for the final "]"


def written_calls(action: str) -> int:
    """Tool calls written in an action's text, by syntax alone: its closed <tool_call> and <search> blocks, plus 1
    when it closes with a bracket call. String scans only (linear time on any input)."""
    return sum(tagged_calls(action, o, c) for o, c in TAGS) + bracket_call(action)


def action_calls(action: str, info: dict | None = None) -> int:
    """The tool calls of one action that ran: `written_calls`, or 0 when the environment rejected the step's call
    (`info["tool_error"]`, see the module docstring)."""
    return 0 if info and info.get("tool_error") else written_calls(action)


def message_calls(message: dict) -> int:
    """Calls of one assistant message of a conversational completion: its structured `tool_calls` when it has the
    field (TRL parsed them out of its text), else those written in its content."""
    if message.get("tool_calls") is not None:
        return len(message["tool_calls"])
    return written_calls(str(message.get("content") or ""))


def assistant_messages(completion) -> list[dict] | None:
    """The assistant messages of a conversational completion (TRL), None for a plain string."""
    if isinstance(completion, (list, tuple)):
        return [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
    return None


def steps_of(completions, turn_info=None) -> list[list[tuple[str, dict]]]:
    """Per row, (action text, step info) of every step: `turn_info` when the multi-turn rollout gave it, else the
    completion as one step with no info (TRL, one-turn calls)."""
    actions = base.actions(completions, turn_info=turn_info)
    infos = turn_info if turn_info is not None else [None] * len(actions)
    return [list(zip(acts, info if info else [{}] * len(acts))) for acts, info in zip(actions, infos)]


def step_calls(completions, turn_info=None) -> list[list[int]]:
    """Per row, per step, the tool calls that ran (`action_calls`): the steps of `turn_info` (ours); without it, a
    conversational completion's assistant messages (`message_calls`), or the completion as one step."""
    out = []
    for completion, steps in zip(completions, steps_of(completions, turn_info)):
        messages = assistant_messages(completion)
        if messages is not None and turn_info is None:
            out.append([message_calls(m) for m in messages])
        else:
            out.append([action_calls(action, info) for action, info in steps])
    return out


def calls(completions, turn_info=None) -> list[int]:
    """Tool calls that ran, per row (`step_calls` summed)."""
    return [sum(row) for row in step_calls(completions, turn_info)]


def tool_turns(completions, turn_info=None) -> list[int]:
    """n per row: the steps (conversational: assistant messages) that made a tool call that ran (`step_calls`).

    Our reading: SPEAR (`reward.py`) counts the assistant turns whose `tool_calls is not None`, the turns its tool
    parser turned into calls; ours are text actions, so a call the environment rejected does not count, and neither
    does the final answer (nor a message with an empty `tool_calls` list, which calls nothing). The last step of an
    episode counts when it is a call (an episode cut at max_turns)."""
    return [sum(k > 0 for k in row) for row in step_calls(completions, turn_info)]


def episode_lengths(completions, turn_info=None) -> list[int]:
    """n per row: the number of steps of the episode (verl-agent's `episode_lengths`); a conversational completion
    counts its assistant messages."""
    return [len(row) for row in step_calls(completions, turn_info)]


# ----------------------------------------------------------------------------- SPEAR

def check_spear(*, max_toolcall_steps=200, max_toolcall_frac=None, **_) -> None:
    if not max_toolcall_steps > 0:
        raise ValueError(f"spear-tool-reward: max_toolcall_steps must be > 0, got {max_toolcall_steps}")
    if max_toolcall_frac is not None and not max_toolcall_frac > 0:
        raise ValueError(f"spear-tool-reward: max_toolcall_frac must be > 0 (or None), got {max_toolcall_frac}")


def toolcall_coefficient(t: float, *, max_toolcall_steps: float, mode: str = "decay") -> float:
    """c(t) = (cos(pi t / T_tool) + 1) / 2 for t <= T_tool, else 0 (SPEAR's "cosine"); 1 in "constant" mode."""
    if mode not in MODES:
        raise ValueError(f"spear-tool-reward: mode must be one of {MODES}, got {mode!r}")
    check_spear(max_toolcall_steps=max_toolcall_steps)
    if mode == "constant":
        return 1.0
    return (math.cos(t / max_toolcall_steps * math.pi) + 1) / 2 if t <= max_toolcall_steps else 0.0


def tool_reward(n: int, c: float) -> float:
    """r_tool = min(1, 0.1 n) c: 0.1 per tool turn, at most 1."""
    return min(0.1 * n, 1.0) * c


def schedule_position(columns: dict, max_toolcall_steps: float, max_toolcall_frac: float | None):
    """(t, T_tool): the training step (`base.training_step`: ours, or TRL's `trainer_state`; 0 when neither is
    given) and the horizon, `max_toolcall_steps`, or `max_toolcall_frac` x the run's total steps when that is set."""
    step, total = base.training_step(columns)
    if max_toolcall_frac is None:
        return float(step), max_toolcall_steps
    check_spear(max_toolcall_frac=max_toolcall_frac)
    if not total:
        raise ValueError("spear-tool-reward: max_toolcall_frac needs the run's length: a total_steps column (ours) "
                         "or trainer_state.max_steps (TRL); pass max_toolcall_steps instead")
    return float(step), max_toolcall_frac * total


SPEAR_TOOL_LOGS = {
    "rewards/spear-tool-reward/tool_calls": ("SPEAR: mean n per row the tool reward counts (calls that ran, or steps).",
                                             "Rising early as the bonus teaches tool use, then settling at what the "
                                             "task needs (calculator: one call per operator); 0 on a one-turn task."),
    "rewards/spear-tool-reward/coef": ("SPEAR: this step's c(t) = (cos(pi t/T_tool) + 1)/2 (0 after T_tool).",
                                       "1 at step 0, down a half cosine to 0 at T_tool, 0 after ('constant' mode: 1)."),
}


@registry.reward(
    "spear-tool-reward", title=SPEAR_TITLE,
    summary="Intrinsic tool-use reward 0.1 per tool turn (at most 1), scaled by a cosine that decays from 1 to 0 "
            "over the first T_tool steps (or constant): learn the ropes of the tools early, then trust the wins.",
    equation=r"r_{tool} = \min(1, 0.1\,n)\,c(t),\quad c(t) = \begin{cases}\frac{\cos(\pi t/T_{tool}) + 1}{2} & "
             r"t \le T_{tool}\\ 0 & t > T_{tool}\end{cases}", logs=SPEAR_TOOL_LOGS,
    choices={"mode": MODES, "count": COUNTS, "on_correct": ON_CORRECT}, check=check_spear)
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
