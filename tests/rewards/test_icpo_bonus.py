"""ICPO's annealed expert bonus: known values, exactly 0 from step T on (catalog test 2), and beta = 0 is the plain
0/1 reward (with no steered sample, catalog test 1: GRPO)."""
import pytest
import torch

from tests.helpers import group_batch
from workbench import registry
from workbench.context import StepContext
from workbench.rewards.icpo_bonus import icpo_bonus, linear_decay

pytestmark = pytest.mark.covers("icpo")


def steered_batch():
    """Two groups of 4; the last row of each steered; scores 1, 0, 1, 1 | 0, 0, 1, 0."""
    batch = group_batch([1.0, 0, 1, 1, 0, 0, 1, 0], [0] * 4 + [1] * 4, [2] * 8)
    batch.scores = batch.rewards.clone()
    batch.offpolicy_mask = torch.zeros_like(batch.mask)
    batch.offpolicy_mask[[3, 7]] = batch.mask[[3, 7]]
    return batch


def ctx(step):
    return StepContext(step=step, total_steps=1000, seed=0, group_size=4, prompts_per_step=2, max_new_tokens=3)


def test_registered_with_the_references_beta_and_horizon():
    entry = registry.get("reward_shaping", "icpo")
    assert entry.defaults == {"beta": 1.0, "horizon": 400} and entry.reads == ("scores", "offpolicy_mask")


def test_known_values():
    c = ctx(100)
    out = icpo_bonus(steered_batch(), c)
    assert out.rewards.tolist() == [1, 0, 1, 1.75, 0, 0, 1, 0]  # row 3: correct and steered, 1 + (1 - 100/400)
    assert c.metrics == {"icpo/bonus": 0.75, "icpo/steered_correct": 0.5}


@pytest.mark.parametrize("step", [400, 401, 10_000])
def test_the_bonus_is_exactly_zero_from_step_T(step):
    assert linear_decay(step, 400) == 0.0
    assert icpo_bonus(steered_batch(), ctx(step)).rewards.tolist() == steered_batch().scores.tolist()


def test_beta_zero_or_no_steered_row_is_the_plain_reward():
    assert icpo_bonus(steered_batch(), ctx(0), beta=0.0).rewards.tolist() == steered_batch().scores.tolist()
    plain = steered_batch()
    plain.offpolicy_mask = torch.zeros_like(plain.mask)
    assert icpo_bonus(plain, ctx(0)).rewards.tolist() == plain.scores.tolist()


def test_bad_settings_are_refused():
    from workbench.rewards.icpo_bonus import check_bonus

    for kw in (dict(beta=-1.0), dict(horizon=0)):
        with pytest.raises(ValueError, match="beta >= 0 and horizon T >= 1"):
            check_bonus(**kw)
