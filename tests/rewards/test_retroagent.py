"""RetroAgent's intrinsic reward: the decaying coefficient, improvement over the best prior attempt, the per-task
baseline kept across steps, the toy reflector on calculator and search episodes, the UCB bonus."""
import copy
import math
import pickle
import random

import pytest
import torch

from tests.helpers import D, make_batch
from tests.rewards.test_tools import EXAMPLE, episode
from workbench.context import StepContext
from workbench.envs.calculator import CalculatorTask
from workbench.envs.search import SearchTask
from workbench.rewards.retroagent import (TaskBaselines, clip_intrinsic, expert_subtasks, improvement,
                                          reflection_coefficient, retroagent_rewards, subtask_completion, ucb_bonus)
from workbench.tasks import Example

pytestmark = pytest.mark.covers("retroagent")


def ctx(state, examples, step=0, total=10) -> StepContext:
    return StepContext(step=step, total_steps=total, seed=0, group_size=2, prompts_per_step=len(examples),
                       max_new_tokens=4, examples=examples, state=state)


def given(text, example, steps, score):
    """A reflector answering the completion fraction written in the completion ("0.5")."""
    return float(text)


def test_coefficient_starts_at_one_never_rises_and_is_zero_after_the_cutoff():
    grid = [k / 200 for k in range(201)]
    for decay in ("exp", "hard_cutoff"):
        c = [reflection_coefficient(p, decay=decay) for p in grid]
        assert c[0] == 1.0 and all(a >= b for a, b in zip(c, c[1:]))
    assert reflection_coefficient(1.0) == pytest.approx(math.exp(-5))
    assert reflection_coefficient(0.1, decay="hard_cutoff") == pytest.approx(math.exp(-6.9))  # ~0.001
    assert all(reflection_coefficient(p, decay="hard_cutoff") == 0.0 for p in grid if p > 0.1)
    assert reflection_coefficient(-3) == 1.0 and reflection_coefficient(7) == pytest.approx(math.exp(-5))
    with pytest.raises(ValueError, match="decay"):
        reflection_coefficient(0.5, decay="linear")


def test_improvement_is_strict_gain_over_the_best_prior():
    c, best = torch.tensor([0.2, 0.5, 0.9, 0.5], dtype=D), torch.tensor([0.5, 0.5, 0.5, 0.0], dtype=D)
    assert improvement(c, best).tolist() == pytest.approx([0.0, 0.0, 0.4, 0.5])


@pytest.mark.parametrize("baseline", ["group_success", "best_completion"])
def test_repeating_the_best_prior_completion_earns_nothing(baseline):
    state, task = TaskBaselines(), [Example("3*4+5=", "17", "A:17")]
    first = make_batch([1.0, 0.0], [0, 0])
    first.scores, first.completions = torch.tensor([1.0, 0.0], dtype=D), ["1.0", "0.5"]
    out = retroagent_rewards(first, ctx(state, task), baseline=baseline, reflector=given)
    assert out.rewards.tolist() == pytest.approx([2.0, 0.5])  # phi = 0 at first sight: r_int = c
    assert state.best == {"3*4+5=": 0.5 if baseline == "group_success" else 1.0}
    best = 0.5 if baseline == "group_success" else 1.0
    again = make_batch([0.0, 0.0], [0, 0])
    again.scores, again.completions = torch.zeros(2, dtype=D), [str(best), str(best / 2)]
    out = retroagent_rewards(again, ctx(state, task), baseline=baseline, reflector=given)
    assert out.rewards.tolist() == [0.0, 0.0]


def test_baseline_only_rises_and_survives_a_checkpoint():
    state, tasks = TaskBaselines(), [Example("a?", "", ""), Example("b?", "", "")]
    history = []
    for step, wins in enumerate([[1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]]):
        batch = make_batch([0.0] * 4, [0, 0, 1, 1])
        batch.scores, batch.completions = torch.tensor(wins, dtype=D), ["0"] * 4
        retroagent_rewards(batch, ctx(state, tasks, step=step), reflector=lambda *a: float(a[3]))
        history.append(dict(state.best))
    assert history == [{"a?": 0.5, "b?": 0.0}, {"a?": 0.5, "b?": 1.0}, {"a?": 1.0, "b?": 1.0}, {"a?": 1.0, "b?": 1.0}]
    restored = pickle.loads(pickle.dumps(copy.deepcopy(state)))  # what the checkpoint holds
    batch = make_batch([0.0] * 4, [0, 0, 1, 1])
    batch.scores, batch.completions = torch.tensor([1.0, 0, 0, 0], dtype=D), ["0"] * 4
    a = retroagent_rewards(batch, ctx(state, tasks, step=4), reflector=lambda *x: float(x[3]))
    b = retroagent_rewards(batch, ctx(restored, tasks, step=4), reflector=lambda *x: float(x[3]))
    assert torch.equal(a.rewards, b.rewards) and state.best == restored.best


def test_coefficient_scales_the_reward_and_group_centering_sums_to_zero():
    tasks = [Example("a?", "", "")]
    batch = make_batch([0.0] * 4, [0] * 4)
    batch.scores, batch.completions = torch.zeros(4, dtype=D), ["0.0", "0.25", "0.5", "1.0"]
    metrics_ctx = ctx(TaskBaselines(), tasks, step=5, total=10)
    out = retroagent_rewards(batch, metrics_ctx, reflector=given)
    assert out.rewards.tolist() == pytest.approx([math.exp(-2.5) * c for c in (0, 0.25, 0.5, 1.0)])
    assert metrics_ctx.metrics["retroagent/coef"] == pytest.approx(math.exp(-2.5))
    assert metrics_ctx.metrics["retroagent/improved_frac"] == 0.75
    centered = retroagent_rewards(batch, ctx(TaskBaselines(), tasks), reflector=given, group_relative=True)
    assert float(centered.rewards.sum()) == pytest.approx(0.0, abs=1e-12)
    fixed = retroagent_rewards(batch, ctx(TaskBaselines(), tasks, step=9), reflector=given, coefficient=1.0)
    assert fixed.rewards.tolist() == pytest.approx([0, 0.25, 0.5, 1.0])
    late = retroagent_rewards(batch, ctx(TaskBaselines(), tasks, step=2), reflector=given, decay="hard_cutoff")
    assert late.rewards.eq(0).all()  # 20% of the run is past the 10% cutoff


def test_toy_reflector_counts_the_expert_subtasks_reached():
    calc = CalculatorTask()
    assert expert_subtasks(EXAMPLE) == ["1776", "1795"]
    for actions, expected in [(["[37*48]", "[1776+19]", "A:1795"], 1.0),   # solved
                              (["[37*48]", "[1776+19]", "A:7"], 2 / 3),    # every call, wrong answer
                              (["[37*48]", "A:7"], 1 / 3), (["[37*48*2]", "A:7"], 0.0), (["A:7"], 0.0)]:
        completion, info = episode(calc.make_env(), EXAMPLE, actions)
        score = calc.score(completion, EXAMPLE)
        assert subtask_completion(completion, EXAMPLE, info, score) == pytest.approx(expected), actions
    search = SearchTask()
    example = search.make_example(random.Random(1))
    actions = search.expert_actions(example)
    assert expert_subtasks(example) == [a[1:-1] for a in actions[:-1]]
    completion, info = episode(search.make_env(), example, actions[:2] + ["A:none"])
    assert subtask_completion(completion, example, info, 0.0) == pytest.approx(2 / (search.hops + 1))
    one_turn = Example("3?", "", "1")  # no subtasks: the verdict alone
    assert expert_subtasks(one_turn) is None and subtask_completion("x", one_turn, [{"action": "x"}], 0.0) == 0.0
    assert subtask_completion("1", one_turn, [{"action": "1"}], 1.0) == 1.0
    addition = Example("12+34=", "46", "46")  # an expression, but answered without tool calls: still the verdict
    assert subtask_completion("45", addition, [{"action": "45"}], 0.0) == 0.0


def test_ucb_bonus_shrinks_as_a_memory_is_retrieved_more():
    bonus = [ucb_bonus(n, 100) for n in range(1, 50)]
    assert all(a > b for a, b in zip(bonus, bonus[1:])) and bonus[0] == pytest.approx(math.sqrt(math.log(100)))
    assert ucb_bonus(0, 100) == ucb_bonus(1, 100) and ucb_bonus(3, 0) == 0.0


def test_clip_bounds_and_bad_parameters():
    r = torch.tensor([-2.0, 0.1, 3.0], dtype=D)
    assert clip_intrinsic(r, clip_high=1.0, clip_low=0.5).tolist() == [-0.5, 0.1, 1.0]
    assert clip_intrinsic(r, clip_high=1.0, reference_bug=True).tolist() == [1.0, 1.0, 1.0]
    batch = make_batch([0.0], [0])
    batch.completions = ["0"]
    with pytest.raises(ValueError, match="baseline"):
        retroagent_rewards(batch, ctx(TaskBaselines(), [Example("a", "", "")]), baseline="ema")
    for bad in (math.nan, math.inf, -math.inf):  # checked before the clamp to [0, 1], which would hide +-inf
        with pytest.raises(ValueError, match="non-finite"):
            retroagent_rewards(batch, ctx(TaskBaselines(), [Example("a", "", "")]), reflector=lambda *a: bad)
