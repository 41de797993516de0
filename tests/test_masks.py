"""Token masks and group filters: high-entropy (forking-token) mask, DAPO dynamic sampling, batch concat."""
import pytest
import torch

from tests.helpers import make_batch, random_mask
from workbench import registry
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch, concat
from workbench.masks import high_entropy_mask
from workbench.rollout.fill_groups import fill_groups, keep_informative_groups


def entropy_batch(seed=0, B=6, T=20):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=3)
    entropy = torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    entropy[mask == 0] = 100.0  # padding entropy must never be kept
    b = RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                     group=torch.zeros(B, dtype=torch.long), entropy=entropy)
    return b


# ---------------------------------------------------------------- high-entropy-mask

@pytest.mark.covers("high-entropy-mask")
@pytest.mark.parametrize("rho", [0.05, 0.2, 0.5, 0.9])
def test_high_entropy_kept_fraction_is_rho(rho):
    b = entropy_batch()
    kept = high_entropy_mask(b, top_entropy_quantile=rho)
    n = int(b.mask.sum())
    assert abs(float(kept.sum()) - rho * n) <= 1.0  # no ties in continuous entropies: 1/n rounding only
    assert torch.all(kept <= b.mask)
    # threshold equals torch.quantile (TRL's call) on the valid entropies
    tau = torch.quantile(b.entropy[b.mask > 0], 1 - rho)
    assert torch.equal(kept.bool(), (b.entropy >= tau) & (b.mask > 0))


@pytest.mark.covers("high-entropy-mask")
@pytest.mark.parametrize("rho", [0.1, 0.2, 0.7])
def test_high_entropy_min_kept_at_least_max_dropped(rho):
    b = entropy_batch(seed=3)
    kept = high_entropy_mask(b, top_entropy_quantile=rho).bool()
    dropped = (b.mask > 0) & ~kept
    assert kept.any() and dropped.any()
    assert b.entropy[kept].min() >= b.entropy[dropped].max()


@pytest.mark.covers("high-entropy-mask")
def test_high_entropy_rho_one_is_a_no_op_and_ties_are_kept():
    b = entropy_batch()
    assert torch.equal(high_entropy_mask(b), b.mask)
    b.entropy = None  # rho = 1 does not need entropies (TRL skips the computation)
    assert torch.equal(high_entropy_mask(b, top_entropy_quantile=1.0), b.mask)
    b.entropy = torch.ones_like(b.mask)  # all tied: everything is kept
    assert torch.equal(high_entropy_mask(b, top_entropy_quantile=0.2), b.mask)
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        high_entropy_mask(b, top_entropy_quantile=0.0)
    b.entropy = None
    with pytest.raises(ValueError, match="entropy"):
        high_entropy_mask(b, top_entropy_quantile=0.5)
    assert registry.get("token_mask", "high-entropy-mask").defaults == {"top_entropy_quantile": 1.0}


# ---------------------------------------------------------------- dynamic-sampling

def group_batch(rewards, groups, lengths=None, **fields):
    b = make_batch(rewards, groups, lengths)
    b.completions = [f"c{i}" for i in range(len(rewards))]
    for name, value in fields.items():
        setattr(b, name, value)
    return b


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


@pytest.mark.covers("dynamic-sampling")
def test_concat_pads_and_joins_every_field():
    a = group_batch([1.0, 0.0], [0, 0], [2, 1], truncated=torch.tensor([False, True]),
                    prompt_ids=torch.tensor([[0, 5], [4, 5]]), prompt_mask=torch.tensor([[0, 1], [1, 1]]))
    b = group_batch([0.5], [3], [4], truncated=torch.tensor([False]),
                    prompt_ids=torch.tensor([[1, 2, 3]]), prompt_mask=torch.tensor([[1, 1, 1]]))
    a.response_ids = torch.where(a.mask > 0, 7, 9)
    out = concat([a, b], pad_id=9)
    assert out.mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert out.response_ids[:2].tolist() == [[7, 7, 9, 9], [7, 9, 9, 9]]
    assert out.prompt_ids.tolist() == [[9, 0, 5], [9, 4, 5], [1, 2, 3]]  # left-padded
    assert out.prompt_mask.tolist() == [[0, 0, 1], [0, 1, 1], [1, 1, 1]]
    assert out.group.tolist() == [0, 0, 3] and out.truncated.tolist() == [False, True, False]
    assert out.completions == ["c0", "c1", "c0"] and out.entropy is None
    b.truncated = None
    with pytest.raises(ValueError, match="truncated"):
        concat([a, b])
