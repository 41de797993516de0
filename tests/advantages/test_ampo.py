"""AMPO's advantage: a group z-score whose mean and std come from the on-policy rows only (std 0 read as 1), teacher
rows trained with it but kept out of the baseline, alpha / beta weights on teacher / other tokens. Agreement with the
reference's `compute_grpo_outcome_advantage_split` is in tests/anchors/test_ampo.py."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.ampo import ampo_advantage, on_policy_std
from workbench.advantages.group import grpo
from workbench.transforms.ampo import AMPO_TITLE

pytestmark = pytest.mark.covers("ampo")
EPS = 1e-6


def guided(on_rewards, teacher_rewards, lengths=None):
    """Groups of on-policy rows then teacher rows (offpolicy_mask = the teacher rows' response mask)."""
    rewards, group, teacher = [], [], []
    for g, (on, off) in enumerate(zip(on_rewards, teacher_rewards)):
        rewards += [*on, *off]
        group += [g] * (len(on) + len(off))
        teacher += [False] * len(on) + [True] * len(off)
    batch = make_batch(rewards, group, lengths)
    batch.offpolicy_mask = batch.mask * torch.tensor(teacher, dtype=D)[:, None]
    return batch


def test_registered_with_the_catalog_title_and_the_references_defaults():
    entry = registry.get("advantage", "ampo")
    assert entry.title == AMPO_TITLE == registry.catalog()["ampo"]["title"]
    assert entry.reads == ("rewards", "group", "offpolicy_mask") and entry.equation and entry.fn.__doc__
    assert entry.defaults == {"baseline_rows": "on-policy", "norm_by_std": True, "eps": EPS, "alpha": 1.0, "beta": 1.0,
                              "allow_singletons": "keep"}


def test_std_zero_is_read_as_one_in_a_guided_group():
    """A guided group (no correct on-policy sample): on-policy rewards all 0, std 0 -> 1, so the teachers get
    (1 - 0) / (1 + eps) (not 1 / eps) and the on-policy rows 0."""
    A = ampo_advantage(guided([[0.0] * 4], [[1.0, 1.0]]))[:, 0]
    assert A.tolist() == [0.0] * 4 + [1 / (1 + EPS)] * 2
    assert on_policy_std(torch.tensor([0.0, 0, 0, 0, 1, 1], dtype=D), torch.zeros(6, dtype=torch.long),
                         torch.tensor([True] * 4 + [False] * 2)).tolist() == [1.0] * 6


def test_known_values_mean_and_std_of_the_on_policy_rows():
    """On-policy 1, 0, 0, 1 (mean 1/2, Bessel std sqrt(1/3)) and one teacher row with reward 1: every row is scaled
    by the on-policy std; the teacher's 1 would have moved both the mean and the std."""
    A = ampo_advantage(guided([[1.0, 0.0, 0.0, 1.0]], [[1.0]]))[:, 0]
    s = (1 / 3) ** 0.5
    expected = torch.tensor([0.5, -0.5, -0.5, 0.5, 0.5], dtype=D) / (s + EPS)
    assert torch.allclose(A, expected, atol=1e-15, rtol=0)
    assert torch.allclose(ampo_advantage(guided([[1.0, 0.0, 0.0, 1.0]], [[1.0]]), norm_by_std=False)[:, 0],
                          torch.tensor([0.5, -0.5, -0.5, 0.5, 0.5], dtype=D), atol=1e-15, rtol=0)


@pytest.mark.parametrize("teacher_reward", [0.0, 1.0, 3.0])
def test_appended_teacher_samples_leave_the_on_policy_advantages_unchanged(teacher_reward):
    """Catalog (3): the on-policy rows' advantages are exactly GRPO's on the batch without the teacher rows (a group of
    all-equal on-policy rewards: 0 in both), whatever the teachers earned."""
    on = [[1.0, 0.0, 0.5, 0.0], [0.2, 0.9, 0.1, 0.3], [0.0, 0.0, 0.0, 0.0]]
    batch = guided(on, [[teacher_reward]] * 3)
    A = ampo_advantage(batch)
    alone = grpo(make_batch([r for g in on for r in g], [g for g in range(3) for _ in range(4)]))
    on_rows = batch.offpolicy_mask.sum(-1) == 0
    assert torch.equal(A[on_rows], alone)


def test_groups_without_teachers_are_grpo():
    batch = guided([[1.0, 0.0, 0.0, 1.0], [0.5, 0.2, 0.9, 0.9]], [[], []], lengths=[2, 3, 1, 4, 2, 2, 3, 1])
    assert torch.equal(ampo_advantage(batch), grpo(batch))


def test_alpha_on_teacher_tokens_beta_on_the_others():
    batch = guided([[1.0, 0.0, 0.0]], [[1.0]], lengths=[2, 3, 1, 4])
    plain, weighted = ampo_advantage(batch), ampo_advantage(batch, alpha=0.5, beta=2.0)
    teacher = batch.offpolicy_mask > 0
    assert torch.equal(weighted[teacher], 0.5 * plain[teacher]) and torch.equal(weighted[~teacher], 2 * plain[~teacher])
    assert (weighted[batch.mask == 0] == 0).all()


def test_the_scripts_all_rows_baseline_is_grpo_over_every_row():
    batch = guided([[1.0, 0.0, 0.0]], [[1.0]])
    assert torch.equal(ampo_advantage(batch, baseline_rows="all", norm_by_std=False), grpo(batch, scale="none"))
    assert torch.equal(ampo_advantage(batch, baseline_rows="all"), grpo(batch))


def test_one_on_policy_row_follows_allow_singletons():
    """k = G - 1 leaves one on-policy row: 'keep' is the reference's mean 0, std 1 (A = R / (1 + eps)); True gives the
    group 0; False refuses it."""
    batch = guided([[0.0], [1.0, 0.0]], [[1.0, 1.0], [1.0]])
    keep = ampo_advantage(batch)[:, 0]
    assert keep[:3].tolist() == [0.0, 1 / (1 + EPS), 1 / (1 + EPS)]
    assert ampo_advantage(batch, allow_singletons=True)[:3, 0].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\] are in a group with one on-policy sample"):
        ampo_advantage(batch, allow_singletons=False)


def test_a_group_of_teacher_rows_only_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"groups \[1\] hold only teacher rows .* k must stay below group_size"):
        ampo_advantage(guided([[1.0, 0.0], []], [[1.0], [1.0, 1.0]]))


@pytest.mark.parametrize("kw, match", [(dict(baseline_rows="some"), "baseline_rows must be one of"),
                                       (dict(allow_singletons="zero"), "allow_singletons must be 'keep'")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ampo_advantage(guided([[1.0, 0.0]], [[1.0]]), **kw)
