"""RLVMR's verifiable meta-reasoning step rewards (the advantage that consumes them: `workbench.advantages.rlvmr`).

Each step's output carries one meta-reasoning tag; only valid actions earn (invalid steps get tag "none", 0):

    <planning>     +planning_reward     if the episode succeeds
    <explore>      +exploration_reward  if its action repeats no earlier valid action
    <reflection>   +reflection_reward   if the previous step was invalid or unavailable and this action differs
    otherwise 0; and the invalid-action penalty -0.1 per invalid step (on that step's episode score)

Transcribed from zzjweb/digitalhuman `RLVMR/code/rlvmr/core_rlvmr.py::process_trajectory_rlvmr_rewards` (tag
priority planning > explore > reflection, `<action>...</action>` comparison) and
`verl/trainer/ppo/ray_trainer.py::apply_invalid_action_penalty` (coefficient 0.1 in the run scripts). On our
environments a step is invalid when the environment reports a `tool_error` (a malformed calculator call, a
gridworld turn without a move); `action_available` (ALFWorld's admissible-command check) defaults to True.
"""
from __future__ import annotations

from workbench import registry
from workbench.rewards import base, tools

KEY = "rlvmr"
TAGS = ("<planning>", "<explore>", "<reflection>")  # checked in this order, as the reference's elif chain
NONE = "none"


def tag_of(output: str) -> str:
    """The step's meta-reasoning tag: the first of TAGS (in that order) the output contains, else "none"."""
    return next((tag for tag in TAGS if tag in output), NONE)


def action_of(output: str) -> tuple[str, ...]:
    """What the step did: the contents of its `<action>...</action>` blocks (the reference's
    `re.findall(r'<action>(.*?)</action>')`: shortest, no newline inside), or, when it has none, its text after
    the last closing meta tag with opening tags removed (our environments' actions carry no action tags).
    A linear scan, so adversarial text cannot make it quadratic."""
    found, pos, close, newline = [], 0, -1, -1
    while True:
        start = output.find("<action>", pos)
        if start < 0:
            break
        begin = start + len("<action>")
        if close < begin:
            close = output.find("</action>", begin)
        if close < 0:
            break
        if newline < begin:
            newline = output.find("\n", begin)
            newline = len(output) if newline < 0 else newline
        if newline < close:   # '.' does not cross a newline: this opening fails, try the next one
            pos = start + 1
            continue
        found.append(output[begin:close])
        pos, close = close + len("</action>"), -1
    if found or "<action>" in output:
        return tuple(found)
    text = output
    last = max(text.rfind(f"</{tag[1:]}") for tag in TAGS)
    if last >= 0:
        text = text[text.find(">", last) + 1:]
    for tag in TAGS:
        text = text.replace(tag, "")
    return (text.strip(),)


def meta_rewards(outputs: list[str], valid: list[bool], available: list[bool] | None = None, success=False, *,
                 planning_reward=1.0, exploration_reward=1.0, reflection_reward=1.0,
                 reference_bug=False) -> tuple[list[float], list[str]]:
    """(step rewards, tags) of one trajectory.

    reference_bug: the reference compares the previous action "" (a string) with the current one (a list) at step
    0, so a reflection at the first step, with nothing to reflect on, always earns; True reproduces that, False
    (default) gives it 0.
    """
    n = len(outputs)
    available = [True] * n if available is None else available
    if not len(valid) == len(available) == n:
        raise ValueError(f"{KEY}: outputs, valid and available need one entry per step, got {n}, {len(valid)}, "
                         f"{len(available)}")
    actions = [action_of(o) for o in outputs]
    rewards, tags = [], []
    for s, output in enumerate(outputs):
        tag = tag_of(output) if valid[s] else NONE
        reward = 0.0
        if tag == "<planning>":
            reward = planning_reward if success else 0.0
        elif tag == "<explore>":
            repeated = any(actions[p] == actions[s] and valid[p] for p in range(s))
            reward = 0.0 if repeated else exploration_reward
        elif tag == "<reflection>":
            if s > 0:
                earns = not (valid[s - 1] and available[s - 1]) and actions[s - 1] != actions[s]
            else:
                earns = reference_bug
            reward = reflection_reward if earns else 0.0
        rewards.append(float(reward))
        tags.append(tag)
    return rewards, tags


def steps_of(completions, turn_info=None) -> list[tuple[list[str], list[bool], list[bool]]]:
    """Per row (outputs, valid, available) of its steps (`tools.steps_of`): from `turn_info` (valid: no
    `tool_error`; available: `action_available`, default True), or, without it, the completion as one valid
    step."""
    out = []
    for steps in tools.steps_of(completions, turn_info):
        out.append(([action for action, _ in steps], [info.get("tool_error") is None for _, info in steps],
                    [bool(info.get("action_available", True)) for _, info in steps]))
    return out


RLVMR_LOGS = {
    "rewards/rlvmr/planning_frac": ("RLVMR: share of steps tagged <planning>.",
                                    "Settles where planning pays (successful episodes). 0 on untagged toy runs: the "
                                    "policy writes no tags."),
    "rewards/rlvmr/explore_frac": ("RLVMR: share of steps tagged <explore>.",
                                   "Part of the tag mix; 0 on untagged toy runs. Towards 1 with redundant_frac "
                                   "rising: exploration without new actions."),
    "rewards/rlvmr/reflection_frac": ("RLVMR: share of steps tagged <reflection>.",
                                      "Small; rises after invalid steps. 0 on untagged toy runs."),
    "rewards/rlvmr/invalid_frac": ("RLVMR: share of invalid steps (a tool_error), each 0.1 off its episode score.",
                                   "Falling towards 0 as the policy learns valid actions. Rising: the format of the "
                                   "actions is being lost."),
    "rewards/rlvmr/redundant_frac": ("RLVMR: share of <explore> steps that earned nothing: their action repeats an "
                                     "earlier valid one.",
                                     "Low and falling. Rising: the agent repeats actions (the looping RLVMR targets)."),
}


@registry.reward(
    KEY, title="RLVMR: Reinforcement Learning with Verifiable Meta-Reasoning Rewards for Robust Long-Horizon Agents",
    summary="Meta-reasoning step rewards from tagged actions: planning pays in successful episodes, exploration when "
            "the action is new, reflection when it changes an invalid previous action; -0.1 per invalid action. "
            "Summed per trajectory here; advantage:rlvmr normalizes them per (task, tag).",
    equation=r"r_s = [\text{valid}_s]\big([\texttt{plan}]\,[\text{success}] + [\texttt{explore}]\,"
             r"[a_s \notin \{a_{s'}\}_{s'<s}] + [\texttt{reflect}]\,[\lnot\text{valid}_{s-1}]\,[a_s \ne a_{s-1}]\big)"
             r" - 0.1\,[\lnot\text{valid}_s]", logs=RLVMR_LOGS, choices={"verifier": base.CORRECTNESS_VERIFIERS})
def rlvmr_reward(completions, *, planning_reward=1.0, exploration_reward=1.0, reflection_reward=1.0,
                 invalid_penalty=0.1, reference_bug=False, verifier="auto", **columns) -> list[float | None]:
    """Per row, sum_s r_s - invalid_penalty * #invalid steps: the trajectory-level form of RLVMR's step rewards,
    for trainers without a step advantage (TRL's GRPOTrainer); None when success is unknown.

    Reads `turn_info` (each step's action and `tool_error`; without it the completion is one valid step) and
    `scores` or `answer` (success, `base.correctness`; verifier: how it is judged without `scores`, as TRL calls
    it: "auto" the dependency-free exact verifier, which reads the toy's "A:26", "math" math-verify; the
    reference's success is an episode reward > 0, ALFWorld's 10 or 0). Defaults: the 1.0 rewards of the reference's
    ppo_trainer.yaml, invalid_penalty 0.1 (`invalid_action_penalty_coef` of the run scripts). In the paper the
    meta rewards reach the policy only through A_step (`advantage:rlvmr`, which recomputes them per step), so the
    `rlvmr` recipe gives this reward weight 0 and logs it. Logs the share of steps tagged planning / explore /
    reflection, of explore steps repeating an earlier valid action (`redundant_frac`) and of invalid steps.
    """
    if invalid_penalty < 0:
        raise ValueError(f"{KEY}: invalid_penalty must be >= 0, got {invalid_penalty}")
    success = base.correctness(completions, reward=KEY, verifier=verifier, **columns)
    counts = dict.fromkeys(("steps", "invalid", "explore", "redundant", *TAGS), 0)
    out = []
    for ok, (outputs, valid, available) in zip(success, steps_of(completions, columns.get("turn_info")),
                                               strict=True):
        if ok is None:
            out.append(None)
            continue
        rewards, tags = meta_rewards(outputs, valid, available, ok, planning_reward=planning_reward,
                                     exploration_reward=exploration_reward, reflection_reward=reflection_reward,
                                     reference_bug=reference_bug)
        invalid = sum(not v for v in valid)
        out.append(sum(rewards) - invalid_penalty * invalid)
        counts["steps"] += len(tags)
        counts["invalid"] += invalid
        for tag, reward in zip(tags, rewards):
            counts[tag] = counts.get(tag, 0) + 1
            counts["redundant"] += tag == "<explore>" and reward == 0
    if counts["steps"]:
        for tag, name in zip(TAGS, ("planning_frac", "explore_frac", "reflection_frac")):
            base.log(columns, name, counts[tag] / counts["steps"])
        base.log(columns, "invalid_frac", counts["invalid"] / counts["steps"])
        if counts["<explore>"]:
            base.log(columns, "redundant_frac", counts["redundant"] / counts["<explore>"])
    return out
