"""The semi-online rollout of UI-S1: the policy acts along the example's expert trajectory; mismatches are patched.

At every turn the policy samples its action from its own history (`turns.play`, unchanged). The action is compared
with the expert's action for that step (`task.expert_actions(example)`):

    match       the policy's action is executed; r_s = 1; its tokens stay in the history
    mismatch    the Patch Module executes the expert's action instead (at most `patch_threshold` times per episode;
                -1: always); r_s = 0; the episode then stops once the patches are spent
    row layout  ... action_s (policy, mask 1) | patch_s (the expert's action, mask 0) obs_s (mask 0) | action_{s+1} ...

The policy's own tokens are always trained on (mask 1) with their step's reward, as the authors' every step sample
is; the patched expert action is never trained on (mask 0: the policy did not sample it) but conditions every later
turn, like an observation. Where the authors' code differs: it re-renders each step's prompt from text, so a later
turn sees only the patched action in that step's place; one row per trajectory here keeps the rejected sample in
front of it (it must stay in the row to be trained on). The patch is rendered as an assistant message (the plain
text of the action, or the chat template's assistant turn) followed by the environment's observation of it.

Which actions match: for an environment with an enumerable action set (`Env.actions()`: gridworld, keydoor, screen)
the action from that set the text ends with (what those environments execute, e.g. gridworld's move letter), so
"xR" matches "R"; otherwise (calculator, search) the text after `strip()`.

Authors' code: X-PLUG/MobileAgent @ 11cea57 `UI-S1/verl/utils/dataset/universal_multiround.py` (`MultiRoundGenerator`:
`apply_response` patches with the ground-truth response while `error_num < patch_threshold` (or
`patch_threshold == -1`) and otherwise marks the trajectory finished), `UI-S1/verl/utils/reward_score/gui_traj.py`
(the step score, `extract_match`), `scripts/train_example.sh` (PATCH_THRESHOLD=2).
"""
from __future__ import annotations

from workbench import registry
from workbench.envs.base import Env
from workbench.rollout.engine import Sampling
from workbench.rollout.turns import TURNS_PROVIDES, episode_batch, play

TITLE = "UI-S1: Advancing GUI Automation via Semi-online Reinforcement Learning"


def executed_action(env: Env, text: str):
    """What `env` executes for an action text: the element of `env.actions()` the text ends with (the longest; None
    if none), or, for an environment without an enumerable action set, the text after strip()."""
    actions = getattr(env, "actions", None)
    if not callable(actions):
        return text.strip()
    return max((a for a in actions() if text.endswith(a)), key=len, default=None)


def same_action(env: Env, policy_text: str, expert_text: str) -> bool:
    expert = executed_action(env, expert_text)
    if expert is None:
        raise ValueError(f"the expert's action {expert_text!r} is not one of the environment's actions")
    return executed_action(env, policy_text) == expert


def check_patch_threshold(*, patch_threshold=2, **_) -> None:
    if patch_threshold < -1 or int(patch_threshold) != patch_threshold:
        raise ValueError(f"patch_threshold must be an integer >= 0, or -1 for no limit; got {patch_threshold}")


class PatchedEnv(Env):
    """`env` driven along the expert's trajectory of the example: see the module docstring.

    step() returns reward 1.0 for a matching action, 0.0 otherwise, and adds to the info "expert_match" (bool) and
    "patched" (the expert's action was executed in the policy's place)."""

    def __init__(self, env: Env, task, patch_threshold: int = 2):
        check_patch_threshold(patch_threshold=patch_threshold)
        self.env, self.task, self.patch_threshold = env, task, int(patch_threshold)
        self.stop, self.max_turns, self.copyable = env.stop, env.max_turns, env.copyable
        self.expert: list[str] = []
        self.patches = self.t = 0

    def reset(self, example, seed: int | None = None):
        self.expert = list(self.task.expert_actions(example))
        self.patches = self.t = 0
        return self.env.reset(example, seed)

    def can_patch(self) -> bool:
        return self.patch_threshold == -1 or self.patches < self.patch_threshold

    def step(self, action: str):
        if self.t >= len(self.expert):  # the expert's episode ended before the environment's: nothing to follow
            return [], 0.0, True, {"state": None, "expert_match": False, "patched": False}
        expert = self.expert[self.t]
        self.t += 1
        if same_action(self.env, action, expert):
            observations, _, done, info = self.env.step(action)
            return observations, 1.0, done, {**info, "expert_match": True, "patched": False}
        if not self.can_patch():  # patches spent: the episode stops here (MultiRoundGenerator `finished`)
            return [], 0.0, True, {"state": None, "expert_match": False, "patched": False}
        self.patches += 1
        observations, _, done, info = self.env.step(expert)
        patch = {"role": "assistant", "content": expert}
        return [patch, *observations], 0.0, done, {**info, "expert_match": False, "patched": True}


class SemiOnlineTask:
    """The task as `turns.play` sees it: each episode's environment is patched along the expert's trajectory."""

    def __init__(self, task, patch_threshold: int):
        self.task, self.patch_threshold = task, patch_threshold
        self.name = getattr(task, "name", "")

    def make_env(self) -> PatchedEnv:
        return PatchedEnv(self.task.make_env(), self.task, self.patch_threshold)


@registry.rollout(
    "ui-s1", title=TITLE,
    summary="Semi-online rollout: the policy acts along the example's expert trajectory with its own actions in "
            "the history; a mismatch is replaced by the expert's action (at most patch_threshold times, then the "
            "episode stops); step reward = action match.",
    provides=TURNS_PROVIDES, needs=("multi_turn", "expert"), check=check_patch_threshold)
def semi_online(engine, task, examples, *, group_size: int, sampling: Sampling, ctx=None, patch_threshold: int = 2,
                max_turns: int | None = None, max_total_tokens: int | None = None):
    """Episodes of `task` patched along `task.expert_actions(example)` (see the module docstring), as the `turns`
    rollout lays them out: rewards [B] = matched steps per episode, turn_rewards [B, S] = 1 per matched step,
    turn_info[i][s] with "expert_match" and "patched". patch_threshold = 2 (the authors' script; -1: no limit)."""
    played = play(engine, SemiOnlineTask(task, patch_threshold), examples, group_size=group_size, sampling=sampling,
                  max_turns=max_turns, max_total_tokens=max_total_tokens)
    return episode_batch(played, group_size, engine.tokenizer.pad_token_id)
