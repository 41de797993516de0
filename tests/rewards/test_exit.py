"""ExIt's diversity bonus R (1 + kappa d / mean d) on rewarded answers: identical answers keep factor 1, wrong answers
are untouched, and the factors of a group average 1 + kappa."""
import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.rewards.exit import centroid_distances, check_exit_bonus, diversity_factor, exit_bonus
from workbench.text.features import prompt_features

pytestmark = pytest.mark.covers("exit")


def shaped(rewards, groups, completions, **kw):
    batch = group_batch(rewards, groups)
    batch.completions = completions
    ctx = step_context()
    return exit_bonus(batch, ctx, **kw), ctx


def test_identical_responses_give_factor_one():
    out, ctx = shaped([1.0, 1.0, 0.0, 1.0], [0, 0, 0, 0], ["3*5+7"] * 4)
    assert out.rewards.tolist() == [1.0, 1.0, 0.0, 1.0]
    assert ctx.metrics == {"exit/diversity_factor": 1.0, "exit/centroid_distance": 0.0}


def test_distances_and_factors_by_hand():
    phi = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1])
    d = centroid_distances(phi, group)  # group 0: centroid (1/2, 1/2), both at sqrt(1/2); group 1: identical
    assert d.tolist() == pytest.approx([0.5 ** 0.5, 0.5 ** 0.5, 0.0, 0.0])
    assert diversity_factor(d, group, 0.2).tolist() == pytest.approx([1.2, 1.2, 1.0, 1.0])
    phi3 = torch.tensor([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0]], dtype=torch.float64)  # centroid (1, 0): d = 1, 1, 2
    factors = diversity_factor(centroid_distances(phi3, torch.zeros(3, dtype=torch.long)), torch.zeros(3).long(), 0.2)
    assert factors.tolist() == pytest.approx([1 + 0.2 * 0.75, 1 + 0.2 * 0.75, 1 + 0.2 * 1.5])


def test_only_rewarded_answers_are_scaled_and_a_groups_factors_average_one_plus_kappa():
    completions = ["3*5+7", "7+3*5", "5*3+7", "22"]
    out, ctx = shaped([1.0, 1.0, 0.0, 0.0], [0] * 4, completions)
    phi = prompt_features(completions)
    d = (phi - phi.mean(0)).norm(dim=1)
    factor = 1 + 0.2 * d / d.mean()
    assert out.rewards.tolist() == pytest.approx([float(factor[0]), float(factor[1]), 0.0, 0.0])
    assert float(factor.mean()) == pytest.approx(1.2)
    assert ctx.metrics["exit/diversity_factor"] == pytest.approx(float(factor[:2].mean()))
    plain, _ = shaped([1.0, 1.0, 0.0, 0.0], [0] * 4, completions, kappa=0.0)  # kappa 0: GRPO's rewards
    assert plain.rewards.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_registration_and_bad_settings():
    entry = registry.get("reward_shaping", "exit")
    assert entry.defaults == {"kappa": 0.2} and "completions" in entry.reads
    with pytest.raises(ValueError, match="kappa must be a number >= 0"):
        check_exit_bonus(kappa=-0.1)
    batch = group_batch([1.0, 0.0], [0, 0])
    batch.completions = ["x"]
    with pytest.raises(ValueError, match="batch.completions has 1 entries for 2 rows"):
        exit_bonus(batch, step_context())
