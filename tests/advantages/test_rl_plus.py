"""RL-PLUS's advantage: R minus the mean reward of the group's on-policy rows, no std, the external row trained with
it but kept out of the baseline. Agreement with the reference's `compute_grpo_outcome_advantage_split` is in
tests/anchors/test_rl_plus.py."""
import pytest
import torch

from tests.helpers import D, batch_with_mask, make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.rl_plus import RL_PLUS_TITLE, rl_plus_advantage
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("rl-plus")


def hybrid(on_rewards, external_rewards, lengths=None):
    """Groups of on-policy rows followed by one external row each (the policy-shaping rollout's layout);
    offpolicy_mask = the external rows' response mask."""
    rewards, group, external = [], [], []
    for g, (on, ext) in enumerate(zip(on_rewards, external_rewards)):
        rewards += [*on, ext]
        group += [g] * (len(on) + 1)
        external += [False] * len(on) + [True]
    batch = make_batch(rewards, group, lengths)
    batch.offpolicy_mask = batch.mask * torch.tensor(external, dtype=batch.mask.dtype)[:, None]
    return batch


def test_registered_with_the_catalog_title_and_what_it_reads():
    entry = registry.get("advantage", "rl-plus")
    assert entry.title == RL_PLUS_TITLE == registry.catalog()["rl-plus"]["title"]
    assert entry.reads == ("rewards", "group", "offpolicy_mask") and entry.equation and entry.fn.__doc__
    assert entry.defaults == {"baseline_rows": "on-policy", "allow_singletons": False}


def test_known_values_on_a_hand_built_batch():
    """Group 0: on-policy 1, 0, 0 (mean 1/3), external 1. Group 1: on-policy 1, 1, 0 (mean 2/3), external 0."""
    batch = hybrid([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], [1.0, 0.0], lengths=[2, 3, 1, 4, 3, 2, 2, 1])
    A = rl_plus_advantage(batch)
    expected = torch.tensor([2 / 3, -1 / 3, -1 / 3, 2 / 3, 1 / 3, 1 / 3, -2 / 3, -2 / 3], dtype=D)
    assert torch.allclose(A[:, 0], expected, atol=1e-15, rtol=0)
    # broadcast over each row's tokens, 0 on padding
    assert torch.allclose(A, expected[:, None] * batch.mask, atol=1e-15, rtol=0)
    # with the demonstration in the baseline (the script's adv_estimator=grpo) both groups' means move
    A_all = rl_plus_advantage(batch, baseline_rows="all")
    assert torch.allclose(A_all[:, 0], torch.tensor([0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -0.5, -0.5], dtype=D))


@pytest.mark.parametrize("external_reward", [0.0, 1.0, 5.0, -3.0])
def test_appending_an_external_sample_leaves_on_policy_advantages_unchanged(external_reward):
    """Catalog test (3): the on-policy rows' advantages are exactly those of their group without the external row
    (GRPO with scale="none"), whatever the external row earned; the external row gets R_ext - mean_on."""
    on = [[1.0, 0.0, 0.5, 0.0], [0.2, 0.9, 0.1, 0.3]]
    batch = hybrid(on, [external_reward, external_reward])
    A = rl_plus_advantage(batch)[:, 0]
    alone = grpo(make_batch([r for g in on for r in g], [0] * 4 + [1] * 4), scale="none")[:, 0]
    on_rows = batch.offpolicy_mask.sum(-1) == 0
    assert torch.equal(A[on_rows], alone)
    means = torch.tensor([sum(g) / len(g) for g in on], dtype=D)
    assert torch.allclose(A[~on_rows], external_reward - means, atol=1e-15, rtol=0)
    if external_reward != means[0]:  # in the baseline, the same row would have moved them
        assert not torch.equal(rl_plus_advantage(batch, baseline_rows="all")[:, 0][on_rows], alone)


def test_without_external_rows_it_is_grpo_without_std():
    batch = make_batch([1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9, 0.1], [0, 0, 0, 0, 1, 1, 1, 1], [2, 5, 3, 4, 1, 6, 2, 3])
    batch.offpolicy_mask = torch.zeros_like(batch.mask)
    for baseline_rows in ("on-policy", "all"):
        assert torch.equal(rl_plus_advantage(batch, baseline_rows=baseline_rows), grpo(batch, scale="none"))


def test_an_all_equal_group_gives_exactly_zero_to_its_on_policy_rows():
    """`group_mean`'s shifted mean: no rounding residue where every sample earned the same."""
    batch = hybrid([[1.6e4] * 3, [0.1] * 5], [1.0, 0.1])
    A = rl_plus_advantage(batch)[:, 0]
    on_rows = batch.offpolicy_mask.sum(-1) == 0
    assert torch.equal(A[on_rows], torch.zeros(8, dtype=D)) and A[3].item() == 1.0 - 1.6e4 and A[-1].item() == 0.0


def test_a_multi_turn_mask_with_holes_is_followed():
    mask = torch.tensor([[1, 1, 0, 0, 1], [1, 1, 1, 0, 0], [1, 0, 0, 1, 1]], dtype=D)
    batch = batch_with_mask([1.0, 0.0, 1.0], [0, 0, 0], mask, offpolicy_mask=mask * torch.tensor([[0], [0], [1.0]]))
    assert torch.equal(rl_plus_advantage(batch), torch.tensor([[0.5], [-0.5], [0.5]], dtype=D) * mask)


def test_groups_without_enough_on_policy_rows():
    only_external = hybrid([[1.0, 0.0], []], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"groups \[1\] hold only external rows .* group_size >= 3"):
        rl_plus_advantage(only_external)
    one = hybrid([[1.0, 0.0], [0.5]], [1.0, 0.0])  # group 1: one sample + the reference (G = 2)
    with pytest.raises(ValueError, match=r"rows \[3, 4\] are in a group with one on-policy sample"):
        rl_plus_advantage(one)
    zero = rl_plus_advantage(one, allow_singletons=True)[:, 0]
    assert zero[3:].tolist() == [0.0, 0.0] and zero[:3].tolist() == [0.5, -0.5, 0.5]
    keep = rl_plus_advantage(one, allow_singletons="keep")[:, 0]  # the reference's baseline 0: A = R
    assert keep[3:].tolist() == [0.5, 0.0] and keep[:3].tolist() == [0.5, -0.5, 0.5]


def test_bad_settings_are_refused_naming_them():
    batch = hybrid([[1.0, 0.0]], [1.0])
    with pytest.raises(ValueError, match="baseline_rows must be one of"):
        rl_plus_advantage(batch, baseline_rows="external")
    with pytest.raises(ValueError, match="allow_singletons must be False"):
        rl_plus_advantage(batch, allow_singletons=2)
    for kw, match in (({"baseline_rows": "on_policy"}, r"baseline_rows='on_policy' is not one of .*'on-policy'"),
                      ({"allow_singletons": "yes"}, "allow_singletons='yes' needs one of bool, 'keep'")):
        with pytest.raises(ValueError, match=match):
            Pipeline(with_overrides(get_recipe("rl-plus"), {"advantage:rl-plus": kw}))
    no_mask = make_batch([1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match=r"needs batch fields \['offpolicy_mask'\]"):
        rl_plus_advantage(no_mask)
