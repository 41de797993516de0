"""GUI-Libra: success-adaptive scaling of negative advantages after grpo, with a KL trust region in its recipe."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.gui_libra import gui_libra, success_scale
from workbench.recipes import Recipe, get_recipe
from workbench.train.pipeline import Pipeline

# group 0: success 1/4; group 1: 1/2; group 2: partial credit, mean 0.1; group 3: 3/4
REWARDS = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
GROUPS = [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
LENGTHS = [2, 3, 1, 4, 3, 3, 2, 1, 4, 2, 3, 1, 2, 2, 3, 4]


def chained(**kw):
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    b.advantages = grpo(b)
    return b, gui_libra(b, **kw)


@pytest.mark.covers("gui-libra")
def test_registered_after_grpo_with_the_released_defaults():
    e = registry.get("advantage", "gui-libra")
    assert e.defaults == {"base": 0.5, "coef": 1.5} and e.reads == ("advantages",)
    assert e.confidence == "abstract-only" and e.title == registry.catalog()["gui-libra"]["title"]
    assert "outside RL training" in e.summary and e.equation


@pytest.mark.covers("gui-libra", "grpo", "kl-penalty")
def test_unit_scale_is_kl_grpo():
    b, out = chained(base=1.0, coef=0.0)
    assert torch.equal(out, b.advantages)
    recipe = get_recipe("gui-libra")
    assert [u.key for u in recipe.advantage] == ["grpo", "gui-libra"]
    kl = recipe.kl_term()
    assert kl.key == "kl-penalty" and kl.kw["beta"] > 0 and kl.kw["estimator"] == "k3"
    assert recipe.objective.key == "ppo-clip" and recipe.agg == "token-mean"


@pytest.mark.covers("gui-libra")
def test_positive_and_zero_advantages_are_unchanged():
    b, out = chained()
    A = b.advantages
    assert (A > 0).any() and (A < 0).any()
    assert torch.equal(out[A >= 0], A[A >= 0])


@pytest.mark.covers("gui-libra")
def test_negative_advantages_scale_by_clipped_success_rate():
    b, out = chained()
    # s = clip(0.5 + 1.5 p, 0, 1): p = 1/4 -> 0.875, 1/2 -> 1, 0.1 -> 0.65, 3/4 -> 1
    expected = torch.tensor([0.875, 1.0, 0.65, 1.0], dtype=D)[torch.tensor(GROUPS)]
    A = b.advantages
    neg = A < 0
    assert torch.allclose(out[neg], (A * expected[:, None])[neg], rtol=1e-14)
    assert torch.equal(out * b.mask, out)  # stays on the response mask


@pytest.mark.covers("gui-libra")
def test_scale_is_monotone_in_the_success_rate_and_bounded():
    p = torch.linspace(0, 1, 21, dtype=D)
    s = success_scale(p, torch.arange(21))
    assert torch.all(s[1:] >= s[:-1]) and s.min() == 0.5 and s.max() == 1.0
    assert torch.all(s[p >= 1 / 3] == 1.0)
    s2 = success_scale(p, torch.arange(21), base=0.0, coef=1.0)
    assert torch.allclose(s2, p)  # base 0, coef 1: s = p, the catalog's first hypothesis (without its floor)


@pytest.mark.covers("gui-libra")
def test_bad_parameters_and_a_missing_advantage_are_refused():
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    with pytest.raises(ValueError, match=r"\['advantages'\]"):
        gui_libra(b)
    b.advantages = grpo(b)
    with pytest.raises(ValueError, match=r"base must be in \[0, 1\]"):
        gui_libra(b, base=1.5)
    with pytest.raises(ValueError, match="coef must be >= 0"):
        gui_libra(b, coef=-1.0)
    with pytest.raises(ValueError, match=r"advantage:gui-libra reads \['advantages'\]"):
        Pipeline(Recipe(key="t", title="t", summary="s", advantage=["gui-libra"]))
