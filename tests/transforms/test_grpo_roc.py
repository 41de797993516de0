"""rStar2-Agent's Resample-on-Correct: G traces kept per prompt out of oversample x G, the ratio of positives and
negatives preserved up to rounding and the minimums, the positives of lowest tool-error + format penalty first."""
import pytest
import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.recipes import get_recipe
from workbench.train.pipeline import Pipeline
from workbench.transforms.grpo_roc import (check_roc, down_sample_group, error_penalty, format_penalty, grpo_roc,
                                           penalties, quotas)

pytestmark = pytest.mark.covers("grpo-roc")
G = 4


def trace_rows(rows, group):
    """A batch of multi-turn traces. Each row: (reward, tool errors as a list of bools (one per tool call), text).
    A tool call is an action token (mask 1) and the environment's answer (mask 0) of the same step; the final
    answer is one more action token."""
    B = len(rows)
    T = 1 + 2 * max(len(r[1]) for r in rows)
    mask = torch.zeros(B, T, dtype=torch.float64)
    turn = torch.full((B, T), -1, dtype=torch.long)
    info = []
    for i, (_, errors, _) in enumerate(rows):
        for s in range(len(errors)):
            mask[i, 2 * s], turn[i, 2 * s], turn[i, 2 * s + 1] = 1.0, s, s
        mask[i, 2 * len(errors)], turn[i, 2 * len(errors)] = 1.0, len(errors)
        info.append([{"state": s, "tool_error": "ERR" if e else None} for s, e in enumerate(errors)]
                    + [{"state": len(errors), "tool_error": None}])
    return RolloutBatch(response_ids=torch.arange(B * T).view(B, T), mask=mask, group=torch.as_tensor(group),
                        rewards=torch.tensor([r[0] for r in rows], dtype=torch.float64), turn=turn,
                        turn_info=info, completions=[r[2] for r in rows], prompts=[f"p{g}" for g in group])


class Extra:
    """ctx.rollout stand-in: for example index k, the rows planned[k] (in order), as a rewarded batch."""

    def __init__(self, planned):
        self.planned, self.calls = planned, []

    def __call__(self, examples, *, group_size, rewarded=False, **_):
        assert rewarded
        self.calls.append((list(examples), group_size))
        rows = [row for e in examples for row in self.planned[e]]
        assert all(len(self.planned[e]) == group_size for e in examples)
        return trace_rows(rows, [k for k, e in enumerate(examples) for _ in self.planned[e]])


def context(planned=None, n=2):
    return StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=n, max_new_tokens=4,
                       examples=list(range(n)), rollout=Extra(planned or {}))


OK, ANS = [False], "<answer>1</answer>"


def test_registered_with_the_references_defaults():
    entry = registry.get("group_transform", "grpo-roc")
    assert entry.defaults == {"oversample": 2, "min_negative": 2, "min_positive": 2, "error_ratio": True,
                              "answer_format": True, "negatives": "penalty"}
    assert entry.title == registry.catalog()["grpo-roc"]["title"] and entry.confidence == "exact"


def test_penalty_terms_known_values():
    assert error_penalty(0, 0) == 0.5  # no tool call
    assert error_penalty(4, 1) == 0.25 and error_penalty(2, 2) == 1.0
    assert format_penalty("<answer>1</answer>", 1) == 0.0
    assert format_penalty("<answer>1</answer> x <answer>2</answer>", 2) == 0.5
    assert format_penalty("<answer>1</answer><answer>2</answer><answer>3</answer>", 1) == 1.0  # capped at 1
    assert format_penalty("no tags", 1) == 1.0 and format_penalty("<answer>1", 1) == 1.0
    assert format_penalty("<answer>1</answer><answer>2", 3) == 1.0  # an unclosed tag: malformed
    assert format_penalty("<answer>1</answer>", 0) == 1.0
    b = trace_rows([(1.0, [True, False], ANS), (1.0, [], "x"), (0.0, [True], ANS + ANS)], [0, 0, 0])
    p, counts = penalties(b)
    # row 0: 1 error of 2 responses + one answer in 3 turns; row 1: no tools 0.5 + no tags 1; row 2: 1/1 + 1/2
    assert p.tolist() == [0.5, 1.5, 1.5] and counts == {"responses": 3, "errors": 2}
    assert penalties(b, answer_format_on=False)[0].tolist() == [0.5, 0.5, 1.0]
    assert penalties(b, error_ratio_on=False, answer_format_on=False)[0].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("n_pos", range(33))
def test_quotas_keep_the_sign_ratio_up_to_rounding_and_the_minimums(n_pos):
    """The script's 32 -> 16: k_pos = round(n_pos / 2), half to even (so k_neg + k_pos = 16 exactly), then raised
    to keep 2 of each sign when available."""
    n_neg = 32 - n_pos
    k_neg, k_pos = quotas(n_neg, n_pos, 16, 2, 2)
    assert k_neg + k_pos == 16 and 0 <= k_pos <= n_pos and 0 <= k_neg <= n_neg
    assert k_pos >= min(2, n_pos) and k_neg >= min(2, n_neg)
    if min(2, n_pos) < k_pos and min(2, n_neg) < k_neg:  # no minimum bound: the ratio, rounded
        assert abs(k_pos - n_pos * 16 / 32) <= 0.5 and k_pos == round(n_pos / 2)
    assert quotas(29, 3, 16, 2, 2) == (14, 2) and quotas(27, 5, 16, 2, 2) == (14, 2)  # 14.5 -> 14, 2.5 -> 2
    assert quotas(31, 1, 16, 2, 2) == (15, 1) and quotas(1, 31, 16, 2, 2) == (1, 15)


def test_kept_positives_have_no_higher_penalty_than_any_dropped_positive():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        rewards = (torch.rand(32, generator=g) < 0.6).double()
        penalty = torch.randint(0, 5, (32,), generator=g).double() / 4  # ties across kept and dropped
        kept = down_sample_group(rewards, penalty, 16)
        assert len(kept) == 16 and kept == sorted(kept)
        pos = set(torch.nonzero(rewards > 0).flatten().tolist())
        kept_pos, dropped_pos = pos & set(kept), pos - set(kept)
        if kept_pos and dropped_pos:
            assert max(penalty[list(kept_pos)]) <= min(penalty[list(dropped_pos)])
        # ties are broken by rollout order: among the positives of the boundary penalty, the first ones stay
        for i in kept_pos:
            assert all(j > i for j in dropped_pos if penalty[j] == penalty[i])


def test_negatives_by_penalty_as_the_code_or_in_rollout_order():
    rewards = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    penalty = torch.tensor([0.9, 0.8, 0.1, 0.0, 0.5, 0.4, 0.3, 0.2])
    assert down_sample_group(rewards, penalty, 4) == [2, 3, 6, 7]
    assert down_sample_group(rewards, penalty, 4, negatives="order") == [0, 1, 6, 7]
    assert down_sample_group(rewards, penalty, 8) == list(range(8))  # n == keep: all kept
    assert down_sample_group(rewards[:3], penalty[:3], 4) == []       # fewer than keep: skipped, as the reference


def test_transform_oversamples_drops_equal_groups_and_keeps_g_per_prompt():
    # group 0: 2 of 4 correct, 2 more of 4 in the extra rollouts; group 1: all wrong (dropped)
    batch = trace_rows([(1.0, [True], ANS), (0.0, OK, ANS), (1.0, OK, ANS), (0.0, [True], ANS),
                        (0.0, OK, ANS), (0.0, OK, ANS), (0.0, OK, ANS), (0.0, OK, ANS)], [0] * 4 + [1] * 4)
    planned = {0: [(1.0, [False, True], ANS), (0.0, OK, "none"), (1.0, OK, ANS + ANS), (0.0, OK, ANS)],
               1: [(0.0, OK, ANS)] * 4}
    ctx = context(planned)
    out = grpo_roc(batch, ctx)
    assert ctx.rollout.calls == [([0, 1], G)]  # (oversample - 1) x G more per prompt
    assert out.group.tolist() == [0] * G  # the all-wrong group is gone, G = 4 of the 8 kept
    # positives (penalties): row 0 1.0, row 2 0.0, extra 0 0.5, extra 2 0.5 + 0.5; 4 of 8 positive -> k_pos = 2
    assert out.rewards.tolist() == [0.0, 1.0, 1.0, 0.0]  # rollout order kept
    kept_text = [(c, r) for c, r in zip(out.completions, out.rewards.tolist())]
    assert kept_text[1:3] == [(ANS, 1.0), (ANS, 1.0)] and out.turn_info[2][1]["tool_error"] == "ERR"
    assert ctx.metrics == {"roc/equal_reward_groups": 0.5, "roc/tool_error_ratio": pytest.approx(3 / 17),
                           "roc/kept_positive_penalty": 0.25, "roc/dropped_positive_penalty": 0.75}


def test_oversample_one_only_drops_equal_groups():
    batch = trace_rows([(1.0, OK, ANS), (0.0, OK, ANS), (1.0, OK, ANS), (1.0, OK, ANS)] + [(1.0, OK, ANS)] * 4,
                       [0] * 4 + [1] * 4)
    ctx = context()
    out = grpo_roc(batch, ctx, oversample=1)
    assert ctx.rollout.calls == [] and out.group.tolist() == [0] * 4
    assert torch.equal(out.response_ids, batch.response_ids[:4])


def test_when_every_group_is_equal_the_groups_are_down_sampled_as_they_are():
    batch = trace_rows([(0.0, OK, ANS)] * 8, [0] * 4 + [1] * 4)
    ctx = context({0: [(0.0, OK, ANS)] * 4, 1: [(0.0, OK, ANS)] * 4})
    out = grpo_roc(batch, ctx)
    assert out.group.tolist() == [0] * G + [1] * G and ctx.metrics["roc/equal_reward_groups"] == 1.0
    assert torch.equal(out.response_ids, batch.response_ids)  # the first G in rollout order


def test_minimums_that_do_not_fit_the_group_are_refused_before_training():
    with pytest.raises(ValueError, match=r"min_negative \+ min_positive = 4 .* group_size=3"):
        check_roc(group_size=3)
    with pytest.raises(ValueError, match=r"recipe 'grpo-roc'.*group_size=3"):
        Pipeline(get_recipe("grpo-roc")).check_group_size(3)
    Pipeline(get_recipe("grpo-roc")).check_group_size(4)
    with pytest.raises(ValueError, match="oversample must be a whole number >= 1"):
        check_roc(oversample=0)
    with pytest.raises(ValueError, match="min_positive must be a whole number >= 0"):
        check_roc(min_positive=-1)
