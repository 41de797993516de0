"""Vision-Zero's phase schedule: it alternates deterministically (decision first, every cycle_length steps), a
one-phase schedule trains one phase every step ('both': every action token through the phase mask, i.e. pure
self-play GRPO), the authors' clue steps that also train the votes, and clear errors."""
from __future__ import annotations

import pytest
import torch

from tests.masks.test_vision_zero import batch
from workbench import registry
from workbench.schedules.vision_zero import vision_zero_phase

pytestmark = pytest.mark.covers("vision-zero")
MASK = registry.get("token_mask", "vision-zero").fn


@pytest.mark.parametrize("cycle, expected", [(1, [1, 0, 1, 0, 1, 0]), (2, [1, 1, 0, 0, 1, 1]),
                                             (3, [1, 1, 1, 0, 0, 0])])
def test_the_phases_alternate_deterministically_decision_first(cycle, expected):
    first = [vision_zero_phase(t, 6, cycle_length=cycle) for t in range(6)]
    assert first == expected
    assert first == [vision_zero_phase(t, 1000, cycle_length=cycle) for t in range(6)]  # the run's length is moot
    long = [vision_zero_phase(t, 100, cycle_length=cycle) for t in range(100)]
    assert all(long[t] == long[t + 2 * cycle] for t in range(100 - 2 * cycle))  # period 2L
    assert sum(long[:2 * cycle * 10]) == cycle * 10  # each phase half of every cycle


def test_a_one_phase_schedule_is_pure_self_play_grpo():
    """'both' every step: the phase mask keeps every action token, so the update is GRPO on the whole game."""
    b = batch()
    for t in range(8):
        phase = vision_zero_phase(t, 8, training_phase="both")
        assert phase == 2.0 and torch.equal(MASK(b, phase=phase), b.mask)
    assert {vision_zero_phase(t, 8, training_phase="clue") for t in range(8)} == {0.0}
    assert {vision_zero_phase(t, 8, training_phase="decision") for t in range(8)} == {1.0}


def test_the_authors_clue_steps_also_train_the_votes():
    assert [vision_zero_phase(t, 4, clue_steps_train_votes=True) for t in range(4)] == [1.0, 2.0, 1.0, 2.0]


def test_the_schedule_drives_the_mask_step_by_step():
    b = batch()
    masks = [MASK(b, phase=vision_zero_phase(t, 4)) for t in range(4)]
    assert torch.equal(masks[0], masks[2]) and torch.equal(masks[1], masks[3])
    assert torch.equal(masks[0] + masks[1], b.mask)


@pytest.mark.parametrize("kw, message", [
    ({"cycle_length": 0}, r"cycle_length=0: .* integer >= 1"),
    ({"cycle_length": 1.5}, r"cycle_length=1.5"),
    ({"training_phase": "interactiv"}, r"training_phase='interactiv' is not one of"),
    ({"clue_steps_train_votes": 1}, r"must be True or False"),
])
def test_bad_settings_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        vision_zero_phase(0, 4, **kw)
    with pytest.raises(ValueError, match="step must be >= 0"):
        vision_zero_phase(-1, 4)
