"""SPEAR's tool-call reward: the cosine schedule, the cap, what counts as a tool turn in our environments; and the
one tool-call detector the family shares (`tools.action_calls` / `tools.calls`), read the same way by every reward
that counts calls."""
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from workbench.envs.calculator import CalculatorTask
from workbench.envs.search import SearchTask
from workbench.rollout.engine import plain_text
from workbench.rollout.turns import Episode
from workbench.rewards import base
from workbench.rewards.a2fm import a2fm_reward
from workbench.rewards.adasearch import adasearch_reward
from workbench.rewards.prs import format_scores
from workbench.rewards.retroagent import reached
from workbench.rewards.tools import (action_calls, calls, episode_lengths, spear_tool_reward, tool_reward, tool_turns,
                                     toolcall_coefficient, written_calls)
from workbench.tasks import Example

pytestmark = pytest.mark.covers("spear-tool-reward")

CALC = CalculatorTask()
EXAMPLE = Example(prompt="37*48+19=", answer="1795", target="A:1795")


def episode(env, example, actions):
    """(completion, turn_info) of replaying `actions` through `env` as the multi-turn rollout records them."""
    _, state_info = env.reset(example, 0)
    ep = Episode()
    for action in actions:
        ep.act([], action)
        observations, reward, done, info = env.step(action)
        ep.record(reward, state_info, info)
        state_info = info
        if done:
            break
        ep.observe([], plain_text(observations))
    return ep.completion, ep.info


def rows(*episodes):
    """(completions, turn_info) of several (completion, turn_info) episodes."""
    return [c for c, _ in episodes], [info for _, info in episodes]


def test_cosine_schedule_is_one_at_start_zero_from_t_tool_and_monotone_between():
    T = 200
    c = [toolcall_coefficient(t, max_toolcall_steps=T) for t in range(0, 260)]
    assert c[0] == 1.0 and c[T] == pytest.approx(0.0, abs=1e-15) and all(v == 0.0 for v in c[T + 1:])
    assert all(a >= b for a, b in zip(c, c[1:])) and c[T // 2] == pytest.approx(0.5)
    assert all(toolcall_coefficient(t, max_toolcall_steps=T, mode="constant") == 1.0 for t in (0, 150, 10_000))
    with pytest.raises(ValueError, match="mode"):
        toolcall_coefficient(0, max_toolcall_steps=T, mode="cosine")
    with pytest.raises(ValueError, match="max_toolcall_steps"):
        toolcall_coefficient(0, max_toolcall_steps=0)


def test_tool_reward_is_a_tenth_per_turn_capped_at_one():
    assert [tool_reward(n, 1.0) for n in range(13)] == pytest.approx([min(0.1 * n, 1.0) for n in range(13)])
    assert max(tool_reward(n, c) for n in range(50) for c in np.linspace(0, 1, 11)) <= 1.0


def test_tool_call_syntax_of_our_environments():
    for call in ("[37*48]", "[Bov]", "x [Bov]", "<tool_call>add(2, 3)</tool_call>",
                 '<tool_call>{"name": "f"}</tool_call>', "<search>Bov</search>"):
        assert written_calls(call) == 1 and action_calls(call, {"tool_error": None}) == 1, call
    for answer in ("A:1795", "12]", "[3] then ]", "", "caf\udce9", "<tool_call>add(2, 3)", "</search><search>x",
                   " [3*4] "):
        assert written_calls(answer) == 0, answer
    # a one-turn transcript may write several calls; a call the environment rejected ran nothing
    assert written_calls("<search>q1</search> info <search>q2</search> <answer>a</answer>") == 2
    assert written_calls("<tool_call>f()</tool_call><tool_call>g()</tool_call>[Bov]") == 3
    assert action_calls("[37*48*2]", {"tool_error": "malformed call"}) == 0 and action_calls("[37*48*2]") == 1


def test_calls_read_turn_info_trl_messages_and_text_alike():
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "search"}}]}
    two = {**call, "tool_calls": call["tool_calls"] * 2}
    tool, answer = {"role": "tool", "content": "Bov>Kel"}, {"role": "assistant", "content": "A:Kel"}
    written = {"role": "assistant", "content": "<tool_call>search('Bov')</tool_call>"}  # no structured field
    completions = ["A:Zar", "<search>Bov</search>", [call, tool, answer], [two, tool, written, tool, answer]]
    assert calls(completions) == [0, 1, 1, 3]
    assert tool_turns(completions) == [0, 1, 1, 2]
    searched, direct = [{"action": "[Bov]", "tool_error": None}, {"action": "A:Zar"}], [{"action": "A:Zar"}]
    rejected = [{"action": "[Bov Kel]", "tool_error": "malformed search: [name]"}, {"action": "A:Zar"}]
    assert calls(["ignored"] * 3, turn_info=[searched, direct, rejected]) == [1, 0, 0]


def test_calculator_episode_counts_the_calls_that_ran():
    solved = episode(CALC.make_env(), EXAMPLE, ["[37*48]", "[1776+19]", "A:1795"])
    malformed = episode(CALC.make_env(), EXAMPLE, ["[37*48*2]", "[37*48]", "A:7"])  # the first call is an error
    direct = episode(CALC.make_env(), EXAMPLE, ["A:1795"])
    completions, turn_info = rows(solved, malformed, direct)
    assert turn_info[1][0]["tool_error"] and tool_turns(completions, turn_info) == [2, 1, 0]
    assert episode_lengths(completions, turn_info) == [3, 3, 1]
    out = spear_tool_reward(completions, turn_info=turn_info, step=0)
    assert out == pytest.approx([0.2, 0.1, 0.0])
    out = spear_tool_reward(completions, turn_info=turn_info, step=0, count="episode_length")
    assert out == pytest.approx([0.3, 0.3, 0.1])


def test_search_episode_counts_searches():
    task = SearchTask()
    example = task.make_example(random.Random(0))
    actions = task.expert_actions(example)
    completions, turn_info = rows(episode(task.make_env(), example, actions))
    assert tool_turns(completions, turn_info) == [len(actions) - 1] == [task.hops]


def test_no_tool_calls_give_zero_under_tool_turns():
    one_turn = ["46", "A:46", "", "x" * 1000, "12]"]
    assert spear_tool_reward(one_turn, step=0) == [0.0] * len(one_turn)
    info = [[{"state": "12+34=", "tool_error": None, "action": c}] for c in one_turn]  # TaskEnv's step info
    assert spear_tool_reward(one_turn, turn_info=info, step=5) == [0.0] * len(one_turn)


def test_conversational_completions_count_assistant_tool_calls_as_spear():
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add"}}]}
    answer = {"role": "assistant", "content": "5"}
    tool = {"role": "tool", "content": "5"}
    completions = [[call, tool, call, tool, answer], [answer], [{**call, "tool_calls": []}, tool, answer]]
    # SPEAR counts `tool_calls is not None`, an empty list included; ours counts calls, and [] calls nothing
    assert tool_turns(completions) == [2, 0, 0]
    assert episode_lengths(completions) == [3, 1, 2]


def test_schedule_from_our_step_or_trl_trainer_state_and_as_a_fraction_of_the_run():
    completions, turn_info = rows(episode(CALC.make_env(), EXAMPLE, ["[37*48]", "[1776+19]", "A:1795"]))
    half = 0.2 * (math.cos(math.pi / 2) + 1) / 2
    assert spear_tool_reward(completions, turn_info=turn_info, step=100) == pytest.approx([half])
    state = SimpleNamespace(global_step=100, max_steps=400)
    assert spear_tool_reward(completions, turn_info=turn_info, trainer_state=state) == pytest.approx([half])
    assert spear_tool_reward(completions, turn_info=turn_info, step=10, total_steps=40,
                             max_toolcall_frac=0.5) == pytest.approx([half])
    assert spear_tool_reward(completions, turn_info=turn_info, step=25, total_steps=40,
                             max_toolcall_frac=0.5) == [0.0]
    assert spear_tool_reward(completions, turn_info=turn_info, step=10_000, mode="constant") == pytest.approx([0.2])
    with pytest.raises(ValueError, match="total_steps"):
        spear_tool_reward(completions, turn_info=turn_info, step=3, max_toolcall_frac=0.5)
    # one reading of (t, T) for every reward: ours, TRL's, or neither
    assert base.training_step({"step": 10, "total_steps": 40}) == (10, 40)
    assert base.training_step({"trainer_state": state}) == (100, 400) and base.training_step({}) == (0, None)
    assert base.training_progress(trainer_state=state) == 0.25 and base.training_progress(step=7) == 0.0


def test_on_correct_any_gives_correct_rows_the_indicator():
    completions, turn_info = rows(*(episode(CALC.make_env(), EXAMPLE, ["[37*48]", "[1776+19]", a])
                                    for a in ("A:1795", "A:1")))
    count = spear_tool_reward(completions, turn_info=turn_info, step=0, scores=[1.0, 0.0])
    any_ = spear_tool_reward(completions, turn_info=turn_info, step=0, scores=[1.0, 0.0], on_correct="any")
    assert count == pytest.approx([0.2, 0.2]) and any_ == pytest.approx([1.0, 0.2])
    direct = spear_tool_reward(["A:1795"], step=0, scores=[1.0], on_correct="any")
    assert direct == [0.0]  # correct without a tool call: [n > 0] = 0


def test_logs_and_bad_parameters():
    logged = {}
    spear_tool_reward(["[1*2]", "A:2"], step=0, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged == {"tool_calls": 0.5, "coef": 1.0}
    for bad in (dict(count="calls"), dict(on_correct="all"), dict(mode="cosine"), dict(max_toolcall_steps=-1),
                dict(max_toolcall_frac=0.0, total_steps=10)):
        with pytest.raises(ValueError, match="spear-tool-reward"):
            spear_tool_reward(["A:1"], step=0, **bad)


@pytest.mark.covers("spear-tool-reward", "adasearch", "apo-a2fm", "prs", "retroagent")
def test_every_reward_of_the_family_reads_a_rejected_call_as_no_call():
    """One episode, a malformed call (tool_error), then a direct answer; against the same episode with the call
    well formed. SPEAR does not count it, AdaSearch's decision is 'no search', A^2FM charges no call, PRS marks
    the step malformed, RetroAgent's reflector reaches nothing with it."""
    bad = episode(CALC.make_env(), EXAMPLE, ["[37*48*2]", "A:1795"])
    good = episode(CALC.make_env(), EXAMPLE, ["[37*48]", "A:1795"])
    completions, turn_info = rows(bad, good)
    assert turn_info[0][0]["tool_error"] and not turn_info[1][0]["tool_error"]
    assert calls(completions, turn_info) == [0, 1]
    assert spear_tool_reward(completions, turn_info=turn_info, step=0) == pytest.approx([0.0, 0.1])
    assert adasearch_reward(completions, turn_info=turn_info, scores=[1.0, 1.0],
                            parametric_correct=[True, True]) == [2.0, 1.0]  # solvable: skipping search is right
    ids = [[0] * 10, [0] * 10]
    assert a2fm_reward(completions, turn_info=turn_info, scores=[1.0, 1.0], completion_ids=ids,
                       cost_max=100.0) == pytest.approx([1 - 0.1 * 10 / 100, 1 - 0.1 * 20 / 100])
    assert [f for f, _ in format_scores(completions, turn_info)] == [0.5, 1.0]
    assert reached(turn_info[0]) == set() and reached(turn_info[1]) == {"1776"}
