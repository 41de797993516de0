"""RLVMR meta-reasoning step rewards: planning on success, new explorations, reflections after invalid steps."""
import pytest

from workbench.rewards.rlvmr import action_of, meta_rewards, rlvmr_reward, tag_of

pytestmark = pytest.mark.covers("rlvmr")


def test_tags_and_actions_are_read_as_the_reference_does():
    assert tag_of("<planning>go</planning><action>x</action>") == "<planning>"
    assert tag_of("<reflection><explore>") == "<explore>"  # planning > explore > reflection
    assert tag_of("[3*4]") == "none"
    assert action_of("<explore>look</explore><action>go to desk</action>") == ("go to desk",)
    assert action_of("<action>a</action><action>b</action>") == ("a", "b")
    assert action_of("<action>a\nb</action><action>c</action>") == ("c",)  # no newline inside an action
    assert action_of("<action>never closed") == ()
    assert action_of("<explore>try</explore>[3*4]") == ("[3*4]",) == action_of("<explore>[3*4]")


def test_a_repeated_explore_action_gets_zero_and_planning_pays_only_on_success():
    outputs = ["<planning>p</planning>[2*3]", "<explore>[4*5]", "<explore>[4*5]", "<explore>[2*3]"]
    rewards, tags = meta_rewards(outputs, [True] * 4, success=True)
    assert tags == ["<planning>", "<explore>", "<explore>", "<explore>"]
    assert rewards == [1.0, 1.0, 0.0, 0.0]  # steps 2 and 3 repeat earlier valid actions
    assert meta_rewards(outputs, [True] * 4, success=False)[0] == [0.0, 1.0, 0.0, 0.0]
    # repeating an earlier *invalid* action is new exploration
    assert meta_rewards(["<explore>[4*]", "<explore>[4*]"], [False, True])[0] == [0.0, 1.0]


def test_reflection_pays_after_an_invalid_step_with_a_different_action():
    outputs = ["[4*]", "<reflection>[4*5]", "<reflection>[4*6]", "[1+]", "<reflection>[1+]"]
    valid = [False, True, True, False, True]
    rewards, tags = meta_rewards(outputs, valid)
    assert tags == ["none", "<reflection>", "<reflection>", "none", "<reflection>"]
    assert rewards == [0.0, 1.0, 0.0, 0.0, 0.0]  # after a valid step, or repeating the invalid action: 0
    assert meta_rewards(["[1+1]", "<reflection>[2+2]"], [True, True], [False, True])[0] == [0.0, 1.0]  # unavailable
    # the first step has nothing to reflect on; the reference's str-vs-list comparison pays it anyway
    assert meta_rewards(["<reflection>[1+1]"], [True])[0] == [0.0]
    assert meta_rewards(["<reflection>[1+1]"], [True], reference_bug=True)[0] == [1.0]


def test_invalid_steps_earn_nothing_and_cost_the_penalty():
    assert meta_rewards(["<planning>x", "<explore>y"], [False, False], success=True) == ([0.0, 0.0], ["none", "none"])
    turn_info = [[{"action": "<planning>[2*3]", "tool_error": None}, {"action": "<explore>[2*", "tool_error": "bad"},
                  {"action": "<explore>A:6", "tool_error": None}]]
    logged = {}
    out = rlvmr_reward(["t"], turn_info=turn_info, scores=[1.0], log_metric=logged.__setitem__)
    assert out == pytest.approx([1.0 + 1.0 - 0.1])
    assert logged == pytest.approx({"planning_frac": 1 / 3, "explore_frac": 1 / 3, "reflection_frac": 0.0,
                                    "invalid_frac": 1 / 3, "redundant_frac": 0.0})
    assert rlvmr_reward(["<explore>x", "y"], scores=[0.0, float("nan")]) == [1.0, None]  # one step per row
    with pytest.raises(ValueError, match="invalid_penalty"):
        rlvmr_reward(["x"], scores=[1.0], invalid_penalty=-0.1)


def test_without_scores_success_is_the_exact_verdict_on_the_toy_answer():
    """As TRL calls it (no `scores`): the default verifier reads "A:6", so a planning step of a solved episode
    pays; math-verify reads no such answer, and the planning reward would never pay."""
    completions = ["<planning>two steps A:6", "<planning>guess A:7"]
    assert rlvmr_reward(completions, solution=["6", "6"]) == [1.0, 0.0]
    assert rlvmr_reward(completions, solution=["6", "6"], verifier="math") == [0.0, 0.0]
    with pytest.raises(ValueError, match="turn_info has 1 rows for 2 completions"):
        rlvmr_reward(completions, solution=["6", "6"], turn_info=[[{"action": "A:6", "tool_error": None}]])
