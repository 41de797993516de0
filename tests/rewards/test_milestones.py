"""RL4MLE milestones: partial credit from the expert's intermediate results reached, below any success."""
import itertools

import pytest

from workbench.rewards.milestones import (milestone_reward, milestone_values, milestones_reward, prompt_text,
                                          reached_milestones, solution_steps, transcript_steps)

pytestmark = pytest.mark.covers("rl4mle-milestones")


def episode(*actions):
    return [{"action": a, "tool_error": None} for a in actions]


def test_values_are_the_catalogs_for_three_milestones_and_sum_to_the_total():
    assert milestone_values(3) == pytest.approx([0.1, 0.2, 0.3])
    for k in range(1, 8):
        values = milestone_values(k, total=0.5)
        assert sum(values) == pytest.approx(0.5) and values == sorted(values) and min(values) > 0


def test_monotone_in_milestones_reached_and_zero_without_any():
    for k in range(1, 6):
        for reached in itertools.product([False, True], repeat=k):
            r = milestone_reward(False, 0.0, list(reached))
            for j in range(k):  # reaching one more milestone never lowers the reward
                assert milestone_reward(False, 0.0, [*reached[:j], True, *reached[j + 1:]]) >= r
        assert milestone_reward(False, 0.0, [False] * k) == 0.0
    assert milestone_reward(False, 0.0, []) == 0.0


def test_any_success_outranks_any_partial_run():
    best_partial = max(milestone_reward(False, 0.0, [True] * k, total=t)
                       for k in range(1, 10) for t in (0.3, 0.6, 0.99))
    assert best_partial < 1.0 <= milestone_reward(True, 1.0, [False] * 3)
    with pytest.raises(ValueError, match="total"):
        milestones_reward(["x"], prompts=["1+2="], scores=[0.0], total=1.0)


def test_calculator_milestones_from_tool_calls():
    prompts = ["2*3+4*5="] * 5
    assert [v for v, _ in solution_steps(prompts[0])] == [6, 20, 26]
    turn_info = [episode("[2*3]", "[4*5]", "[6+20]", "A:26"),   # solved: the score
                 episode("[2*3]", "[4*5]", "A:25"),            # milestones 1, 2
                 episode("[4*5]", "A:7"),                      # milestone 2 only
                 episode("[2*", "A:1"),                        # a malformed call produces nothing
                 episode("A:26")]                              # right answer, no calls: still a success
    logged = {}
    out = milestones_reward(["t"] * 5, prompts=prompts, scores=[1.0, 0.0, 0.0, 0.0, 1.0], turn_info=turn_info,
                            log_metric=logged.__setitem__)
    assert out == pytest.approx([1.0, 0.3, 0.2, 0.0, 1.0])
    assert logged["reached_frac"] == pytest.approx((3 + 2 + 1 + 0 + 0) / 15)
    # "3+4" has one milestone (7), but a one-turn episode makes no tool call and reaches none; "3?" has none:
    # either way the reward is the score
    assert [v for v, _ in solution_steps("3+4")] == [7] and solution_steps("3?") == []
    assert milestones_reward(["7", "x"], prompts=["3+4", "3?"], scores=[0.0, 1.0]) == [0.0, 1.0]
    assert reached_milestones(["7"], "3+4", inline=False) == [False]


def test_transcripts_without_turn_info_are_cut_at_each_call():
    assert transcript_steps("[2*3]6\n[4*5]20\nA:25") == ["[2*3]", "6\n[4*5]", "20\nA:25"]
    assert transcript_steps("") == [""] and transcript_steps("[1+1]") == ["[1+1]"]
    out = milestones_reward(["[2*3]6\n[4*5]20\nA:25"], prompts=["2*3+4*5="], scores=[0.0])
    assert out == pytest.approx([0.3])
    assert milestones_reward(["x"], prompts=["1+2="], scores=[float("nan")]) == [None]


def test_as_trl_calls_it_conversational_prompts_and_no_scores():
    """The question is the last user message; without `scores` success is the exact verifier's verdict on the
    toy's "A:26" (math-verify reads no such answer: under verifier="math" nothing is ever solved)."""
    prompt = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "2*3+4*5="}]
    assert prompt_text(prompt) == "2*3+4*5=" and prompt_text([{"role": "system", "content": "x"}]) is None
    assert [v for v, _ in solution_steps(prompt)] == [6, 20, 26]
    chat = [[{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
             {"role": "assistant", "content": "A:26"}],
            [{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
             {"role": "assistant", "content": "[4*5]"}, {"role": "tool", "content": "20"},
             {"role": "assistant", "content": "A:25"}]]
    assert milestones_reward(chat, prompts=[prompt] * 2, solution=["26"] * 2) == pytest.approx([1.0, 0.3])
    assert milestones_reward(chat, prompts=[prompt] * 2, solution=["26"] * 2, verifier="math") == \
        pytest.approx([0.1, 0.3])
    calls = [[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "mul"}}]},
              {"role": "assistant", "content": "A:26"}]]
    with pytest.raises(ValueError, match=r"'rl4mle-milestones'.*structured tool_calls"):
        milestones_reward(calls, prompts=[prompt], solution=["26"])
