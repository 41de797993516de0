"""RAPO's step reward on tool calls: +c_new for a call that returns unseen content, -c_red for a repeated or rejected
one, 0 for the answer; summed per episode."""
import pytest

from workbench import registry
from workbench.rewards.rapo import check_rapo_step, rapo_step_reward, step_rewards

pytestmark = pytest.mark.covers("rapo")


def steps(*actions, **infos):
    return [(a, infos.get(f"s{i}", {"tool_error": None})) for i, a in enumerate(actions)]


def test_redundant_tool_calls_get_lower_step_reward_than_novel_ones():
    """Card test 3, on a toy search episode: the repeated query is penalised, the new ones rewarded."""
    r = step_rewards(steps("[Bov]", "[Bov]", "[Kel]", "A:Zar"))
    assert r == [0.1, -0.1, 0.1, 0.0]
    assert r[1] < r[0] and r[1] < r[2]


def test_reported_observations_decide_novelty_and_rejected_calls_are_redundant():
    episode = steps("[Bov]", "[Kel]", "[Mip]", "[oops", s0={"observation": "Bov>Kel"}, s1={"observation": "Bov>Kel"},
                    s2={"tool_error": "malformed search: [name]"})
    assert step_rewards(episode, c_new=0.2, c_red=0.3) == [0.2, -0.3, -0.3, 0.0]


def test_the_episode_reward_is_the_sum_and_one_turn_answers_get_zero():
    turn_info = [[{"action": "[Bov]"}, {"action": "[Bov]"}, {"action": "[Bov]"}, {"action": "A:Zar"}],
                 [{"action": "[Bov]"}, {"action": "[Kel]"}, {"action": "A:Zar"}]]
    logged = {}
    out = rapo_step_reward(["", ""], turn_info=turn_info, log_metric=lambda k, v: logged.update({k: v}))
    assert out == pytest.approx([0.1 - 0.2, 0.2])
    assert logged == {"novel_calls": 1.5, "redundant_calls": 1.0}
    assert rapo_step_reward(["3+4*5", "12"]) == [0.0, 0.0]  # countdown: no tool calls


def test_registration_and_bad_settings():
    entry = registry.get("reward", "rapo")
    assert entry.defaults == {"c_new": 0.1, "c_red": 0.1}
    for bad in ({"c_new": -0.1}, {"c_red": float("nan")}, {"c_new": True}):
        with pytest.raises(ValueError, match="must be a finite number >= 0"):
            check_rapo_step(**bad)
