"""DAPO dynamic sampling: drop the all-equal groups, sample until the target is filled."""
import pytest
import torch

from tests.helpers import group_batch
from workbench import registry
from workbench.advantages.group import group_stats
from workbench.rollout.fill_groups import fill_groups, keep_informative_groups


def assert_all_groups_informative(b):
    _, std, _ = group_stats(b.rewards, b.group)
    assert torch.all(std > 0)


@pytest.mark.covers("dynamic-sampling")
def test_keep_informative_groups_drops_exactly_the_all_equal_groups():
    b = group_batch([1.0, 1.0, 0.1, 0.1, 0.1, 0.0, 1.0, 0.5], [0, 0, 1, 1, 1, 2, 2, 3])
    out = keep_informative_groups(b)
    assert out.group.tolist() == [2, 2] and out.completions == ["c5", "c6"]
    assert_all_groups_informative(out)
    assert "rewards" in registry.get("group_transform", "dynamic-sampling").reads


@pytest.mark.covers("dynamic-sampling")
def test_dynamic_sampling_is_a_no_op_without_degenerate_groups():
    b = group_batch([1.0, 0.0, 0.2, 0.4], [5, 5, 9, 9])
    assert keep_informative_groups(b) is b
    out, info = fill_groups(lambda r: b, target_groups=2)
    assert info == {"rounds": 1, "groups": 2, "target_groups": 2, "shortfall": 0, "candidate_groups": 2,
                    "dropped_groups": 0}
    assert out.group.tolist() == [0, 0, 1, 1]  # renumbered densely, order kept
    assert torch.equal(out.rewards, b.rewards) and torch.equal(out.mask, b.mask) and out.completions == b.completions


def rounds_sampler(G=4, groups_per_round=4):
    """Round r: `groups_per_round` prompts (ids 0..K-1 every round), half of them all-equal; T grows with r."""
    def sample(r):
        g = torch.Generator().manual_seed(r)
        rewards, groups = [], []
        for k in range(groups_per_round):
            if k % 2 == 0:
                rewards += [float(r % 2)] * G
            else:
                rewards += (torch.rand(G, generator=g) > 0.5).double().tolist()
                rewards[-1], rewards[-2] = 1.0, 0.0
            groups += [k] * G
        lengths = torch.randint(1, 3 + r, (len(rewards),), generator=g)
        lengths[0] = 2 + r
        b = group_batch(rewards, groups, lengths)
        b.response_ids = torch.where(b.mask > 0, 7, 0)
        return b
    return sample


@pytest.mark.covers("dynamic-sampling")
def test_fill_groups_reaches_exactly_the_target():
    calls = []
    sample = rounds_sampler()

    def counted(r):
        calls.append(r)
        return sample(r)

    out, info = fill_groups(counted, target_groups=5, max_rounds=10)
    assert calls == [0, 1, 2]  # 2 informative groups per round
    assert info["groups"] == 5 and info["shortfall"] == 0 and info["rounds"] == 3
    assert info["candidate_groups"] == 12 and info["dropped_groups"] == 6
    assert out.size == 5 * 4 and sorted(out.group.unique().tolist()) == [0, 1, 2, 3, 4]
    assert torch.bincount(out.group).tolist() == [4] * 5
    assert_all_groups_informative(out)
    assert out.mask.shape[1] == 4  # padded to the widest round kept
    assert torch.all(out.response_ids[out.mask == 0] == 0) and torch.all(out.response_ids[out.mask > 0] == 7)


@pytest.mark.covers("dynamic-sampling")
def test_fill_groups_reports_the_shortfall_at_max_rounds():
    out, info = fill_groups(rounds_sampler(), target_groups=10, max_rounds=3)
    assert info["rounds"] == 3 and info["groups"] == 6 and info["shortfall"] == 4
    assert out.size == 24
    assert_all_groups_informative(out)
    degenerate = group_batch([1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1])
    out, info = fill_groups(lambda r: degenerate, target_groups=3, max_rounds=2)
    assert out.size == 0 and info["shortfall"] == 3 and info["dropped_groups"] == 4
    with pytest.raises(ValueError, match=">= 1"):
        fill_groups(lambda r: degenerate, target_groups=3, max_rounds=0)
