"""EPO's entropy history controller: per-turn means over past steps, driving regularizer:epo.history."""
import math

import pytest
import torch

from tests.helpers import D, batch_with_mask, step_context
from workbench import registry
from workbench.controllers.epo import EPOEntropyHistory, step_turn_entropies
from workbench.recipes import get_recipe
from workbench.train.pipeline import Pipeline


def turn_batch(entropy_rows, turn_rows):
    """A batch whose rows have the given per-token entropies and turn ids (-1: padding, mask 0)."""
    T = max(len(r) for r in entropy_rows)
    entropy = torch.zeros(len(entropy_rows), T, dtype=D)
    turn = torch.full((len(entropy_rows), T), -1, dtype=torch.long)
    for i, (h, t) in enumerate(zip(entropy_rows, turn_rows)):
        entropy[i, :len(h)], turn[i, :len(t)] = torch.tensor(h, dtype=D), torch.tensor(t)
    mask = (turn >= 0).to(D)
    return batch_with_mask([0.0] * len(entropy_rows), list(range(len(entropy_rows))), mask, entropy=entropy, turn=turn)


@pytest.mark.covers("epo")
def test_step_means_are_token_means_of_each_turn_index_over_the_batch():
    b = turn_batch([[1.0, 3.0, 2.0, 4.0], [5.0, 7.0]], [[0, 0, 1, 1], [0, 1]])
    assert step_turn_entropies(b.entropy, b.mask, b.turn) == pytest.approx([3.0, 13 / 3])
    b.mask[0, 2] = 0.0  # a masked (observation) token does not count
    assert step_turn_entropies(b.entropy, b.mask, b.turn) == pytest.approx([3.0, 5.5])
    assert step_turn_entropies(b.entropy, b.mask, None) == pytest.approx([float(b.entropy[b.mask > 0].mean())])


@pytest.mark.covers("epo")
def test_history_averages_each_turn_over_the_steps_that_reached_it():
    ctl = registry.get("controller", "epo").fn
    state = ctl.init(initial=())
    assert ctl.value(state) == []
    steps = [turn_batch([[1.0, 1.0], [3.0]], [[0, 1], [0]]),      # turn means 2.0, 1.0
             turn_batch([[4.0, 2.0, 6.0]], [[0, 1, 2]]),           # 4.0, 2.0, 6.0
             turn_batch([[0.5]], [[0]])]                           # 0.5
    for b in steps:
        state = ctl.update(state, b, {})
    assert ctl.value(state) == pytest.approx([(2.0 + 4.0 + 0.5) / 3, (1.0 + 2.0) / 2, 6.0])
    # a turn index no step reached yet (a hole: turn 1 fully masked) is NaN, i.e. unknown to the regularizer
    state = ctl.update(ctl.init(initial=()), turn_batch([[1.0, 9.0, 2.0]], [[0, 1, 2]]), {})
    hole = turn_batch([[1.0, 9.0, 2.0]], [[0, 1, 2]])
    hole.mask[0, 1] = 0.0
    fresh = ctl.update(ctl.init(initial=()), hole, {})
    assert ctl.value(state) == pytest.approx([1.0, 9.0, 2.0])
    assert ctl.value(fresh)[0] == 1.0 and math.isnan(ctl.value(fresh)[1]) and ctl.value(fresh)[2] == 2.0


@pytest.mark.covers("epo")
def test_initial_history_counts_as_one_past_step_and_bad_horizon_is_refused():
    ctl = EPOEntropyHistory
    state = ctl.update(ctl.init(initial=[2.0, 4.0]), turn_batch([[4.0, 0.0]], [[0, 1]]), {})
    assert ctl.value(state) == pytest.approx([3.0, 2.0])
    with pytest.raises(ValueError, match="max_steps"):
        ctl.init(initial=(), max_steps=-1)


@pytest.mark.covers("epo")
def test_the_recipe_drives_the_regularizers_history_and_phase_weight():
    pipe = Pipeline(get_recipe("epo"))
    reg = pipe.find("regularizer:epo")
    assert pipe.kwargs(reg, 0, 10)["history"] == [] and pipe.kwargs(reg, 0, 10)["phase_weight"] == 1.0
    pipe.after_step(turn_batch([[1.0, 2.0]], [[0, 0]]), {"step": 0}, step_context())
    kw = pipe.kwargs(reg, 9, 10)
    assert kw["history"] == pytest.approx([1.5]) and kw["phase_weight"] == pytest.approx(0.8 * math.exp(-3 * 4 / 5))
    assert pipe.driven_metrics(1, 10) == {}  # a list is not logged
