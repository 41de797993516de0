"""ARLCP: reflection and length penalties of correct responses against their group's correct responses."""
import math

import pytest
import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.rewards.arlcp import (arlcp_penalty, arlcp_rewards, correct_stats, reflection_count,
                                     reflection_weight)

pytestmark = pytest.mark.covers("arlcp")
D = torch.float64


def shaped(scores, group, lengths, texts, **hp):
    """(rewards after ARLCP, metrics) with the verifier's score as the whole reward."""
    batch = RolloutBatch.from_rewards(scores, group, lengths)
    batch.scores, batch.completions = batch.rewards.clone(), list(texts)
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=len(scores), prompts_per_step=1, max_new_tokens=64)
    out = arlcp_rewards(batch, ctx, **hp)
    return out.rewards, ctx.metrics


def words(n: int) -> str:
    return " ".join(["wait"] * n) + " so 7"


def test_reflection_words_count_whole_words_in_any_case():
    assert reflection_count("Wait, but... HMM. hold on: another thought; double-check, then verify") == 7
    assert reflection_count("butter rebut checking ohm hmmm waiting") == 0   # word boundaries
    assert reflection_count("double-check") == 1                             # not also its "check"
    assert reflection_count("alternatively, an alternative") == 2
    assert reflection_count("") == 0


def test_incorrect_rows_get_zero_and_correct_rows_lie_in_point_eight_to_one():
    g = torch.Generator().manual_seed(0)
    B = 32
    scores = (torch.rand(B, generator=g) < 0.6).double().tolist()
    counts = torch.randint(0, 120, (B,), generator=g).tolist()
    lengths = torch.randint(1, 60, (B,), generator=g).tolist()
    group = torch.arange(4).repeat_interleave(8)
    r, _ = shaped(scores, group, lengths, [words(c) for c in counts])
    right = torch.tensor(scores) > 0
    assert bool((r[~right] == 0).all())
    assert bool((r[right] > 0.8).all() and (r[right] < 1.0).all())


def test_reward_is_non_increasing_in_length_within_a_group():
    lengths = [3, 9, 4, 20, 7, 1]
    r, _ = shaped([1.0] * 6, [0] * 6, lengths, [words(5)] * 6)      # same reflection count
    order = sorted(range(6), key=lambda i: lengths[i])
    assert all(r[order[k]] >= r[order[k + 1]] for k in range(5))
    assert len(set(r.tolist())) == 6                                  # strictly, here


def test_reward_is_non_increasing_in_reflections_within_one_bracket():
    counts = [0, 12, 3, 40, 25]                                       # all in c <= 40: w1 = 0.05
    r, _ = shaped([1.0] * 5, [0] * 5, [10] * 5, [words(c) for c in counts])
    order = sorted(range(5), key=lambda i: counts[i])
    assert all(r[order[k]] > r[order[k + 1]] for k in range(4))


def test_w1_plus_w2_is_point_two_and_a_response_at_the_group_means_gets_point_nine():
    counts = torch.tensor([0.0, 40.0, 41.0, 80.0, 81.0, 500.0], dtype=D)
    w1 = reflection_weight(counts)
    assert w1.tolist() == [0.05, 0.05, 0.10, 0.10, 0.15, 0.15]
    # each row alone in its group sits at its own means (z_c = z_L = 0): w1/2 + w2/2 = total_weight / 2 in every
    # bracket, so w2 = total_weight - w1
    alone, right = torch.arange(6), torch.ones(6, dtype=torch.bool)
    lengths = torch.tensor([3.0, 50, 7, 900, 1, 20], dtype=D)
    assert arlcp_penalty(counts, lengths, right, alone).tolist() == pytest.approx([0.1] * 6)
    assert arlcp_penalty(counts, lengths, right, alone, total_weight=0.3).tolist() == pytest.approx([0.15] * 6)
    # middle row sits at both means (c: 2, 4, 6; L: 5, 10, 15) in either bracket of w1
    for base in (0, 60, 100):
        r, _ = shaped([1.0, 1.0, 1.0], [0, 0, 0], [5, 10, 15], [words(base + c) for c in (2, 4, 6)])
        assert float(r[1]) == pytest.approx(0.9)


def test_penalty_known_value_and_the_bracket_switch():
    # two correct rows: c = (40, 41) straddles the bracket; L = (10, 10)
    pen = arlcp_penalty(torch.tensor([40.0, 41.0]), torch.tensor([10.0, 10.0]), torch.tensor([True, True]),
                        torch.tensor([0, 0]))
    z = (40 - 40.5) / (math.sqrt(0.5) + 1e-6)
    sig = 1 / (1 + math.exp(-z))
    assert float(pen[0]) == pytest.approx(0.05 * sig + 0.15 * 0.5)
    assert float(pen[1]) == pytest.approx(0.10 * (1 - sig) + 0.10 * 0.5)


def test_group_statistics_use_only_correct_rows_with_arlcp_defaults_for_small_groups():
    x = torch.tensor([1.0, 5.0, 9.0, 100.0, 7.0, 3.0], dtype=D)
    correct = torch.tensor([True, True, True, False, True, False])
    group = torch.tensor([0, 0, 0, 0, 1, 2])
    mean, std = correct_stats(x, correct, group)
    assert mean[:3].tolist() == [5.0, 5.0, 5.0] and std[:3].tolist() == pytest.approx([4.0] * 3)  # wrong row ignored
    assert mean[4] == 7.0 and std[4] == 1.0      # one correct response: std 1
    assert mean[5] == 0.0 and std[5] == 1.0      # none: mean 0, std 1
    r, _ = shaped([1.0], [0], [37], [words(3)])
    assert float(r) == pytest.approx(0.9)        # a lone correct answer is at its own means


def test_group_statistics_stay_inside_each_group():
    lengths = [2, 4, 6, 100, 200, 300]
    r, _ = shaped([1.0] * 6, [0, 0, 0, 1, 1, 1], lengths, [words(1)] * 6)
    torch.testing.assert_close(r[:3], r[3:])     # same z-scores in both groups


def test_require_think_zeroes_badly_formatted_answers_and_reference_bug_keeps_them_in_the_statistics():
    texts = ["a</think>7", "b wait</think>7", "no tags 7", "<think>c</think>7"]
    scores, lengths = [1.0, 1.0, 1.0, 1.0], [3, 5, 40, 9]
    plain, _ = shaped(scores, [0] * 4, lengths, texts)
    think, _ = shaped(scores, [0] * 4, lengths, texts, require_think=True)
    buggy, _ = shaped(scores, [0] * 4, lengths, texts, require_think=True, reference_bug=True)
    assert bool((plain > 0.8).all())
    assert think[2:].tolist() == [0.0, 0.0] and buggy[2:].tolist() == [0.0, 0.0]
    # fixed: statistics over the well-formatted rows 0-1 only (c: 0, 1; L: 3, 5)
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    expected = 1 - 0.05 * sig(-0.5 / (math.sqrt(0.5) + 1e-6)) - 0.15 * sig(-1 / (math.sqrt(2) + 1e-6))
    assert float(think[0]) == pytest.approx(expected)
    # reference: over every right answer, the malformed rows 2-3 included (c: 0, 1, 0, 0; L: 3, 5, 40, 9)
    c, L = torch.tensor([0.0, 1, 0, 0], dtype=D), torch.tensor([3.0, 5, 40, 9], dtype=D)
    reference = 1 - 0.05 * sig(float((0 - c.mean()) / (c.std() + 1e-6))) \
        - 0.15 * sig(float((3 - L.mean()) / (L.std() + 1e-6)))
    assert float(buggy[0]) == pytest.approx(reference) and reference != pytest.approx(expected)


def test_other_reward_terms_are_kept_and_metrics_are_logged():
    batch = RolloutBatch.from_rewards([1.3, 0.3], [0, 0], [4, 4])
    batch.scores = torch.tensor([1.0, 0.0], dtype=D)                 # + 0.3 from another reward function
    batch.completions = ["wait 7", "hmm oh 3"]
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=1, max_new_tokens=8)
    out = arlcp_rewards(batch, ctx)
    assert out.rewards.tolist() == pytest.approx([1.3 - 0.1, 0.3])
    assert ctx.metrics == {"arlcp/reflections": 1.5, "arlcp/penalty": pytest.approx(0.1)}


def test_bad_parameters_are_refused():
    for hp in (dict(weights=(0.05, 0.1)), dict(weights=(0.05, 0.1, 0.3)), dict(brackets=(80, 40)), dict(eps=0.0)):
        with pytest.raises(ValueError, match="arlcp"):
            shaped([1.0], [0], [3], ["x"], **hp)


def test_a_batch_without_scores_or_completions_is_refused():
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=1, max_new_tokens=8)
    batch = RolloutBatch.from_rewards([1.0, 0.0], [0, 0], [4, 4])
    batch.completions = ["wait 7", "3"]
    with pytest.raises(ValueError, match="batch.scores"):
        arlcp_rewards(batch, ctx)                                      # scores None
    batch.scores, batch.completions = batch.rewards.clone(), []
    with pytest.raises(ValueError, match="batch.completions"):
        arlcp_rewards(batch, ctx)


def test_registered_as_reward_shaping_with_arlcp_defaults():
    entry = registry.get("reward_shaping", "arlcp")
    assert entry.defaults["total_weight"] == 0.2 and tuple(entry.defaults["weights"]) == (0.05, 0.10, 0.15)
    assert set(entry.reads) >= {"scores", "group", "completions"} and entry.provides == ("rewards",)


def test_the_recipe_follows_the_papers_training_setup():
    from workbench.recipes import get_recipe

    recipe = get_recipe("arlcp")
    assert [u.key for u in recipe.advantage] == ["rloo"] and recipe.regularizers == () and recipe.task_reward == 1.0
    assert [(u.key, u.kw) for u in recipe.reward_shaping] == [("arlcp", {}),
                                                              ("kl-in-reward", {"beta": 0.001, "estimator": "k1"})]
