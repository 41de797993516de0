"""ExIt's start states: learnability p(1 - p) ranks the partial histories (0 for all-pass / all-fail groups), PLR rank
sampling at temperature 0.3 draws them, a derived start state is scored by its prompt's own verifier, and with buffer
probability 0 the sampler is the pool sampler draw for draw (GRPO's batches)."""
import copy
import random

import pytest

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.samplers.exit import (EXIT_TEMPLATE, ExIt, History, add_history, check_exit, draw_entries,
                                     learnability, observe_histories, rank_weights, start_state)
from workbench.samplers.pool import PromptPool
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("exit")
G = 4


def finish(state, examples, outcomes, step, sampler=ExIt):
    """A finished step: group i answers examples[i] with scores outcomes[i] (answers "a{i}.{j}"); the sampler's
    update (pass rates) then, for ExIt, its observe (histories), as the pipeline's after-step runs them."""
    scores = [s for rs in outcomes for s in rs]
    batch = group_batch(scores, [g for g, rs in enumerate(outcomes) for _ in rs])
    batch.scores = batch.rewards.clone()
    batch.prompts = [e.prompt for e, rs in zip(examples, outcomes) for _ in rs]
    batch.completions = [f"a{g}.{j}" for g, rs in enumerate(outcomes) for j in range(len(rs))]
    state = sampler.update(state, batch)
    if sampler is ExIt:
        state = observe_histories(state, batch, step_context(step=step))
    return state


def test_learnability_is_largest_at_one_half_and_zero_for_groups_that_all_pass_or_all_fail():
    grid = [i / 100 for i in range(101)]
    values = [learnability(p) for p in grid]
    assert max(values) == learnability(0.5) == 0.25 and values.index(0.25) == 50
    assert learnability(0.0) == learnability(1.0) == 0.0 and learnability(0.25) == learnability(0.75) == 0.1875
    # through the sampler: only the mixed group enters the buffer, with S = 1/4
    task, state = get_task("countdown"), ExIt.init(size=8)
    examples = ExIt.select(state, task, 3, random.Random(0))
    state = finish(state, examples, [[1.0] * G, [0.0] * G, [1.0, 0.0, 1.0, 0.0]], step=0)
    assert [(h.key, h.priority, h.depth) for h in state.histories] == [(examples[2].prompt, 0.25, 0)]
    assert state.histories[0].attempts == ("a2.0", "a2.1", "a2.2", "a2.3")


def test_buffer_probability_zero_gives_the_pool_samplers_batches_step_for_step():
    task = get_task("countdown")
    exit_state, pool_state = ExIt.init(size=8, buffer_prob=0.0), PromptPool.init(size=8)
    for step in range(6):
        ours = ExIt.select(exit_state, task, 3, random.Random(f"0-{step}-0"))
        theirs = PromptPool.select(pool_state, task, 3, random.Random(f"0-{step}-0"))
        assert ours == theirs
        outcomes = [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [1.0] * G]  # learnable groups: the buffer fills
        exit_state = finish(exit_state, ours, outcomes, step)
        pool_state = finish(pool_state, theirs, outcomes, step, sampler=PromptPool)
    assert len(exit_state.histories) > 0 and exit_state.chosen == pool_state.chosen
    assert exit_state.pass_rates == pool_state.pass_rates


def test_rank_weights_by_hand_at_temperature_0_3():
    h = [1.0, 2 ** (-1 / 0.3), 3 ** (-1 / 0.3)]  # ranks 1, 2, 3 of S = 0.25, 0.1875, 0.09
    expected = [x / sum(h) for x in h]
    assert rank_weights([0.1875, 0.25, 0.09], 0.3) == pytest.approx([expected[1], expected[0], expected[2]])
    tied = rank_weights([0.25, 0.25], 0.3)  # a tie goes to the earlier entry
    assert tied[0] > tied[1] and tied[0] == pytest.approx(1 / (1 + 2 ** (-1 / 0.3)))
    flat = rank_weights([0.25, 0.1, 0.05], 1e6)  # a high temperature is uniform over the buffer
    assert flat == pytest.approx([1 / 3] * 3, abs=1e-5)


def test_draws_follow_the_rank_weights_and_are_distinct():
    histories = [History(f"s{i}", 0, 0, ("y",), 0.5, s, 0) for i, s in enumerate([0.09, 0.25, 0.1875])]
    rng, counts = random.Random(0), {"s0": 0, "s1": 0, "s2": 0}
    for _ in range(20000):
        counts[draw_entries(histories, 1, 0.3, rng)[0].key] += 1
    weights = rank_weights([0.09, 0.25, 0.1875], 0.3)
    assert [counts[f"s{i}"] / 20000 for i in range(3)] == pytest.approx(weights, abs=0.01)
    both = draw_entries(histories, 5, 0.3, random.Random(1))
    assert sorted(h.key for h in both) == ["s0", "s1", "s2"]  # k > size: every entry once


def test_a_derived_start_state_is_scored_by_its_prompts_own_verifier():
    task = get_task("countdown")
    x = task.sample(1, random.Random(3))[0]
    s = start_state(x, "1+2", EXIT_TEMPLATE)
    assert s.prompt == f"Previous attempt: 1+2\n{x.prompt}" and (s.answer, s.target) == (x.answer, x.target)
    assert task.score(x.target, s) == task.score(x.target, x) == 1.0
    assert task.score("1+2", s) == task.score("1+2", x) == 0.0


def test_histories_grow_a_task_tree_from_pooled_prompts_only_and_are_replayed_with_depth():
    task = get_task("countdown")
    state, held_out = ExIt.init(size=8, buffer_prob=1.0), task.held_out_prompts()
    first = ExIt.select(state, task, 2, random.Random(0))  # empty buffer: every start state is fresh
    assert all(e in state.examples for e in first) and state.depths[-1] == (0, [0, 0])
    state = finish(state, first, [[1.0, 0.0, 0.0, 0.0], [0.0] * G], step=0)
    second = ExIt.select(state, task, 2, random.Random(1))  # one history: one derived start state, one fresh prompt
    derived = second[-1]
    base = state.examples[state.histories[0].base]
    assert derived.prompt in {start_state(base, a, EXIT_TEMPLATE).prompt for a in ("a0.0", "a0.1", "a0.2", "a0.3")}
    assert derived.answer == base.answer and base.prompt not in held_out and state.depths[-1] == (1, [0, 1])
    state = finish(state, second, [[0.0] * G, [1.0, 1.0, 0.0, 0.0]], step=1)
    child = next(h for h in state.histories if h.key == derived.prompt)
    assert (child.base, child.depth, child.priority, child.step) == (state.histories[0].base, 1, 0.25, 1)
    assert state.pending == {}
    # the derived prompt is outside the pool's index: the pool's pass rates hold pooled prompts only
    assert set(state.pass_rates) <= set(range(8))


def test_a_remeasured_start_state_replaces_its_entry_and_the_lowest_priority_leaves_a_full_buffer():
    state = ExIt.init(size=8, capacity=2)
    add_history(state, History("a", 0, 0, ("y",), 0.5, 0.25, 0))
    add_history(state, History("b", 1, 0, ("y",), 0.25, 0.1875, 0))
    add_history(state, History("c", 2, 0, ("y",), 0.25, 0.1875, 1))  # full: the older of the tied lowest leaves
    assert [h.key for h in state.histories] == ["a", "c"]
    add_history(state, History("a", 0, 0, ("z",), 1.0, 0.0, 2))  # a now all pass: nothing left to learn there
    assert [h.key for h in state.histories] == ["c"]


def test_the_same_state_and_stream_select_the_same_start_states():
    task, state = get_task("countdown"), ExIt.init(size=8)
    for step in range(3):
        examples = ExIt.select(state, task, 3, random.Random(step))
        state = finish(state, examples, [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]], step)
    a, b = copy.deepcopy(state), copy.deepcopy(state)
    assert ExIt.select(a, task, 3, random.Random(9)) == ExIt.select(b, task, 3, random.Random(9))
    assert a == b


def test_registration_and_bad_settings():
    entry = registry.get("sampler", "exit")
    assert entry.observe is observe_histories and entry.title == "Bootstrapping Task Spaces for Self-Improvement"
    for kw, match in [({"buffer_prob": 1.5}, "buffer_prob must be a probability in"),
                      ({"buffer_prob": -0.1}, "buffer_prob must be a probability in"),
                      ({"temperature": 0}, "temperature must be a number > 0"),
                      ({"capacity": 0}, "capacity must be an integer >= 1"),
                      ({"template": "{prompt} only"}, "must contain both"),
                      ({"size": 0}, "size must be an integer >= 1")]:
        with pytest.raises(ValueError, match=match):
            check_exit(**kw)
        with pytest.raises(ValueError, match=match):
            ExIt.init(**kw)


def test_the_exit_recipe_at_buffer_probability_zero_and_kappa_zero_trains_as_grpo_on_the_pool(tmp_path):
    """The card's reduction end to end: the same batches, rewards, losses and gradients as the grpo recipe with the
    pool sampler, row for row (the bonus's own metrics aside)."""
    import workbench.recipes.data_self_training  # noqa: F401  (registers the recipe)
    from tests.helpers import TINY, DigitFirst, metric_rows, run_task
    from workbench.train import make_config

    exit_run = make_config("smoke", recipe="exit", **TINY, recipe_overrides={
        "sampler": {"size": 8, "buffer_prob": 0.0}, "reward_shaping": {"kappa": 0.0}})
    grpo_run = make_config("smoke", recipe="grpo", **TINY, recipe_overrides={"sampler": ["pool", {"size": 8}]})
    run_task(exit_run, tmp_path / "exit", DigitFirst())
    run_task(grpo_run, tmp_path / "grpo", DigitFirst())
    ours = [{k: v for k, v in r.items() if not k.startswith("exit/")} for r in metric_rows(tmp_path / "exit")]
    assert ours == metric_rows(tmp_path / "grpo") and len(ours) == TINY["steps"]
    assert all(r["exit/diversity_factor"] == 1.0 for r in metric_rows(tmp_path / "exit"))
