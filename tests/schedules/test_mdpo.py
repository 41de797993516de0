"""MDPO's inverse-temperature schedule."""
import pytest
import torch

from tests.helpers import D
from workbench.objectives.mirror import mdpo_surrogate
from workbench.schedules.mdpo import mdpo_inv_t
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


@pytest.mark.covers("mdpo")
def test_mdpo_inv_t_schedule_matches_reference_and_is_guarded():
    K = 10
    # reference: lr_now = 1 - (iters_so_far - 1) / n_updates, iters_so_far = 0, 1, ...
    assert mdpo_inv_t(0, K) == pytest.approx(1 / (1 + 1 / K))
    assert mdpo_inv_t(K - 1, K) == pytest.approx(K / 2)
    seq = [mdpo_inv_t(k, K) for k in range(K)]
    assert all(a < b for a, b in zip(seq, seq[1:]))
    assert mdpo_inv_t(0, K, offset=0) == 1.0 and mdpo_inv_t(K - 1, K, offset=0) == pytest.approx(K)
    assert mdpo_inv_t(K, K, offset=0) == pytest.approx(K) and mdpo_inv_t(5 * K, K) == pytest.approx(K)
    with pytest.raises(ValueError):
        mdpo_inv_t(-1, K)
    with pytest.raises(ValueError):
        mdpo_surrogate(torch.zeros(1, 1, dtype=D), torch.zeros(1, 1, dtype=D), torch.ones(1, 1, dtype=D),
                       torch.ones(1, 1, dtype=D), inv_t=-1.0)


def test_a_floor_that_is_not_positive_is_refused_when_the_recipe_is_built():
    """t_min was checked after the step and the run's length, i.e. at the first step that evaluated the schedule."""
    with pytest.raises(ValueError, match=r"schedule 'mdpo-inv-t': t_min must be > 0, got 0"):
        Pipeline(with_overrides(get_recipe("mdpo"), {"schedules:mdpo-inv-t": {"t_min": 0}}))
