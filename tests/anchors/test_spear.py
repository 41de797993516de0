"""Agreement with SPEAR's tool-call reward (tests/anchors/formulas_spear.py, TencentYoutuResearch/SPEAR @ 7e84315):
values, float64, 1e-12, on random episodes and training steps.

    default_compute_score_enforce_toolcall_posneg_decay        res + `spear-tool-reward` (count="tool_turns")
    default_compute_score_enforce_toolcall_posneg_decay_qwen3  res + `spear-tool-reward` (on_correct="any")
    EpisodeRewardManager (verl-agent)                          R + `spear-tool-reward` (count="episode_length")

SPEAR's "cosine" is our mode="decay"; its max_toolcall_steps is ours; its global_steps is our `step`.
"""
from __future__ import annotations

import random

import pytest

from tests.anchors import formulas_spear as ref
from workbench.rewards.tools import spear_tool_reward

pytestmark = pytest.mark.covers("spear-tool-reward")
TOL = 1e-12
MODES = {"cosine": "decay", "constant": "constant"}


def messages(rng: random.Random, n_calls: int) -> list[dict]:
    """An agent transcript with n_calls assistant tool calls, other assistant turns and tool results."""
    out = []
    for _ in range(n_calls):
        out += [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "python"}}]},
                {"role": "tool", "content": "42"}]
        if rng.random() < 0.3:
            out.append({"role": "assistant", "content": "thinking", "tool_calls": None})
    return out + [{"role": "assistant", "content": "\\boxed{42}"}]


@pytest.mark.parametrize("variant", ["qwen2", "qwen3"])
def test_tool_call_reward_matches_spear_reward_py(variant):
    rng = random.Random(0)
    fn = (ref.default_compute_score_enforce_toolcall_posneg_decay if variant == "qwen2"
          else ref.default_compute_score_enforce_toolcall_posneg_decay_qwen3)
    checked = set()
    for _ in range(400):
        n, res = rng.randrange(0, 14), float(rng.random() < 0.5)
        steps, horizon, mode = rng.randrange(0, 260), rng.choice([100, 200]), rng.choice(list(MODES))
        msgs = messages(rng, n)
        theirs = fn(res, tools=[{"name": "python"}], messages=msgs, global_steps=steps, use_toolcall_reward=mode,
                    max_toolcall_steps=horizon)
        ours = res + spear_tool_reward([msgs], step=steps, max_toolcall_steps=horizon, mode=MODES[mode],
                                       scores=[res], on_correct="count" if variant == "qwen2" else "any")[0]
        assert ours == pytest.approx(theirs, abs=TOL), (n, res, steps, horizon, mode)
        checked.add((n > 10, steps > horizon, res > 0))
    assert len(checked) == 8  # capped and uncapped, before and after T_tool, right and wrong answers


def test_episode_length_reward_matches_verl_agent_episode_manager():
    rng = random.Random(1)
    for _ in range(300):
        length, episode_reward = rng.randrange(1, 15), rng.choice([0.0, 1.0, 10.0])
        steps, horizon, mode = rng.randrange(0, 260), rng.choice([100, 200]), rng.choice(list(MODES))
        turn_info = [[{"state": s, "tool_error": None, "action": f"[q{s}]"} for s in range(length)]]
        theirs = ref.episode_score(episode_reward, length, mode, horizon, steps)
        ours = episode_reward + spear_tool_reward(["..."], turn_info=turn_info, count="episode_length", step=steps,
                                                  max_toolcall_steps=horizon, mode=MODES[mode])[0]
        assert ours == pytest.approx(theirs, abs=TOL), (length, steps, horizon, mode)
