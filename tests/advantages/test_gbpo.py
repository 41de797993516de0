"""GBPO's advantage stage: the GRPO z-score it returns and the median-centred target advantage it provides."""
import pytest
import torch

from tests.helpers import D, make_batch, per_seq
from workbench import registry
from workbench.advantages.gbpo import gbpo, group_median, target_advantage
from workbench.advantages.group import grpo
from workbench.recipes import Recipe
from workbench.train.pipeline import Pipeline

REWARDS = [1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9, 0.1, 0.3]
GROUPS = [0, 0, 0, 0, 1, 1, 1, 1, 1]


@pytest.mark.covers("gbpo")
def test_gbpo_advantage_registered_and_provides_target_adv():
    e = registry.get("advantage", "gbpo")
    assert e.provides == ("target_adv",) and e.defaults == {"temperature": 1.0, "eps": 1e-6, "allow_singletons": False}
    assert e.family == "surrogate" and e.equation and e.fn.__doc__


@pytest.mark.covers("gbpo")
def test_returned_advantage_is_grpo_and_target_is_median_centred_over_std():
    batch = make_batch(REWARDS, GROUPS)
    A = gbpo(batch, temperature=0.5)
    assert torch.equal(A, grpo(make_batch(REWARDS, GROUPS)))
    # by hand: group 0 {1,0,0,1}: median 0.5, Bessel std sqrt(1/3); group 1 {.5,.2,.9,.1,.3}: median 0.3
    std0 = (1 / 3) ** 0.5
    R1 = torch.tensor(REWARDS[4:], dtype=D)
    std1 = float(R1.std())
    expected = [(r - 0.5) / (std0 + 1e-6) / 0.5 for r in REWARDS[:4]] + [(r - 0.3) / (std1 + 1e-6) / 0.5
                                                                          for r in REWARDS[4:]]
    torch.testing.assert_close(per_seq(batch.target_adv), torch.tensor(expected, dtype=D), rtol=1e-12, atol=1e-12)
    assert torch.equal(batch.target_adv, batch.target_adv * batch.mask)  # broadcast over the response mask


@pytest.mark.covers("gbpo")
def test_group_median_interpolates_even_groups_and_a_tie_gives_zero_target():
    x = torch.tensor([3.0, 1.0, 2.0, 10.0, 5.0, 5.0, 5.0], dtype=D)
    g = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    torch.testing.assert_close(group_median(x, g), torch.tensor([2.5] * 4 + [5.0] * 3, dtype=D))
    t = target_advantage(x, g)
    assert torch.all(t[4:] == 0)  # a zero-std group sits on its median
    assert torch.all(t[:4].sign() == torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=D))


@pytest.mark.covers("gbpo")
def test_temperature_scales_the_target_only():
    b1, b2 = make_batch(REWARDS, GROUPS), make_batch(REWARDS, GROUPS)
    A1, A2 = gbpo(b1, temperature=1.0), gbpo(b2, temperature=1e-2)
    assert torch.equal(A1, A2)
    torch.testing.assert_close(b2.target_adv, 100 * b1.target_adv, rtol=1e-12, atol=0)


@pytest.mark.covers("gbpo")
def test_token_rewards_enter_the_rewards_the_median_sees():
    token = torch.zeros(4, 3, dtype=D)
    token[0, 0] = 2.0  # row 0's reward 0 + 2 puts it above the median
    batch = make_batch([0.0, 1.0, 0.5, 0.2], [0, 0, 0, 0], token_rewards=token)
    gbpo(batch)
    plain = make_batch([2.0, 1.0, 0.5, 0.2], [0, 0, 0, 0])
    gbpo(plain)
    torch.testing.assert_close(batch.target_adv, plain.target_adv)


@pytest.mark.covers("gbpo")
def test_singletons_are_refused_unless_allowed_then_zero():
    with pytest.raises(ValueError, match="allow_singletons"):
        gbpo(make_batch([1.0, 0.0, 1.0], [0, 0, 1]))
    batch = make_batch([1.0, 0.0, 1.0], [0, 0, 1])
    A = gbpo(batch, allow_singletons=True)
    assert torch.all(A[2] == 0) and torch.all(batch.target_adv[2] == 0) and batch.target_adv[0, 0] > 0


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_temperature_must_be_positive(temperature):
    with pytest.raises(ValueError, match="temperature"):
        gbpo(make_batch(REWARDS, GROUPS), temperature=temperature)


@pytest.mark.covers("gbpo")
def test_the_pipeline_refuses_the_gbpo_objective_without_the_gbpo_advantage():
    Pipeline(Recipe(key="t", title="t", summary="s", advantage=["gbpo"], objective="gbpo"), track_kl=False)
    with pytest.raises(ValueError, match=r"reads \['target_adv'\].*advantage:gbpo"):
        Pipeline(Recipe(key="t", title="t", summary="s", advantage=["grpo"], objective="gbpo"), track_kl=False)
