"""CGPO: a mixture of judges, CRPG's calibrated reward, and the CRRAFT / CODPO data selections."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.rewards.judges import (calibrated_rewards, cgpo, codpo_pairs, copy_judge, crraft_select, format_judge,
                                      length_judge)

pytestmark = pytest.mark.covers("cgpo")


def ctx(max_new_tokens=8):
    return StepContext(step=0, total_steps=1, seed=0, group_size=4, prompts_per_step=2, max_new_tokens=max_new_tokens)


def judged_batch():
    """Two prompts x four samples: lengths, truncation and texts chosen so each judge flags known rows."""
    b = make_batch([1.0, 0.0, 1.0, 0.0, 0.5, 0.0, 1.0, 0.25], [0, 0, 0, 0, 1, 1, 1, 1], [2, 3, 8, 1, 2, 7, 3, 4])
    b.truncated = torch.tensor([False, False, True, False, False, False, False, False])
    b.prompts = ["12+30="] * 4 + ["8*9="] * 4
    b.completions = ["42", "41", "12+30=42 12+30=42", "4", "72", "77777", "8*9=72", "12+30="]
    return b


def test_builtin_judges_flag_their_violations():
    b = judged_batch()
    assert format_judge(b, ctx()).tolist() == [False, False, True, False, False, False, False, False]
    assert length_judge(b, ctx(), max_fraction=0.75).tolist() == [False, False, True, False, False, True, False,
                                                                   False]
    assert copy_judge(b, ctx()).tolist() == [False, False, True, False, False, False, True, False]  # its own prompt
    b.turn = torch.where(b.mask > 0, torch.arange(b.mask.shape[1]) // 4, -1)  # actions of up to 4 tokens
    assert not length_judge(b, ctx(), max_fraction=0.75).any()                  # each within 0.75 x 8 tokens
    b.prompts, b.completions[0] = ["7?"] * 8, "7?8"
    assert not copy_judge(b, ctx()).any()                      # a prompt shorter than min_chars is never "copied"
    assert copy_judge(b, ctx(), min_chars=2).tolist()[0]


def test_flagged_samples_never_get_a_positive_advantage():
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        rewards = torch.randn(12, generator=g, dtype=D)
        group = torch.arange(3).repeat_interleave(4)
        flagged = torch.rand(12, generator=g) < 0.4
        shaped = calibrated_rewards(rewards, group, flagged)
        A = grpo(make_batch(shaped.tolist(), group.tolist()))
        assert bool((A[flagged] <= 0).all())
        assert bool((shaped[flagged] == -1).all()) and bool(((shaped[~flagged] > 0) & (shaped[~flagged] < 1)).all())


def test_without_judges_it_is_calibrated_reward_pg():
    b = judged_batch()
    context = ctx()
    out = cgpo(b, context, judges=())
    mean = torch.tensor([0.5] * 4 + [0.4375] * 4, dtype=D)
    torch.testing.assert_close(out.rewards, torch.sigmoid(b.rewards - mean))
    assert context.metrics == {"cgpo/violation_rate": 0.0}
    fixed = cgpo(judged_batch(), ctx(), judges=(), baseline=0.25)  # a given baseline reward r(x, y-bar)
    torch.testing.assert_close(fixed.rewards, torch.sigmoid(b.rewards - 0.25))


def test_the_judge_mixture_sets_minus_one_and_logs_each_judge():
    b, context = judged_batch(), ctx()
    out = cgpo(b, context)
    flagged = torch.tensor([False, False, True, False, False, True, True, False])
    assert bool((out.rewards[flagged] == -1).all()) and bool((out.rewards[~flagged] > 0).all())
    assert context.metrics == pytest.approx({"cgpo/violation_rate": 3 / 8, "cgpo/violation/format": 1 / 8,
                                             "cgpo/violation/length": 2 / 8, "cgpo/violation/copy": 2 / 8})
    model_judge = lambda batch, ctx: torch.tensor([c.startswith("4") for c in batch.completions])  # noqa: E731
    custom = cgpo(judged_batch(), ctx(), judges=(model_judge,))
    assert (custom.rewards == -1).tolist() == [True, True, False, True, False, False, False, False]
    with pytest.raises(ValueError, match="judges"):
        cgpo(judged_batch(), ctx(), judges=("safety",))
    with pytest.raises(ValueError, match="flags"):
        cgpo(judged_batch(), ctx(), judges=(lambda batch, ctx: torch.ones(3, dtype=torch.bool),))


def test_codpo_pairs_have_a_feasible_chosen_and_a_violating_rejected_response():
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        rewards = torch.randn(12, generator=g, dtype=D)
        group = torch.arange(3).repeat_interleave(4)
        flagged = torch.rand(12, generator=g) < 0.5
        for chosen, rejected in codpo_pairs(rewards, group, flagged):
            assert not flagged[chosen] and flagged[rejected] and group[chosen] == group[rejected]
            peers = (group == group[chosen]) & ~flagged
            assert rewards[chosen] == rewards[peers].max()  # the best feasible response of its prompt
        for i in crraft_select(rewards, group, flagged, k=2):
            assert not flagged[i]
            peers = (group == group[i]) & ~flagged
            assert int((rewards[peers] > rewards[i]).sum()) < 2  # among the top 2 feasible of its prompt
    assert crraft_select(torch.tensor([0.1, 0.9, 0.5]), torch.zeros(3), torch.tensor([False, True, False])) == [2]


def test_registered_as_reward_shaping_with_our_reading():
    e = registry.get("reward_shaping", "cgpo")
    assert e.defaults == {"judges": ("format", "length", "copy"), "baseline": None, "max_length_fraction": 0.75}
    assert e.confidence == "abstract-only" and e.provides == ("rewards",)
    with pytest.raises(ValueError, match="max_length_fraction"):
        cgpo(judged_batch(), ctx(), max_length_fraction=0)
