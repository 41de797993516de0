"""Length rewards: DAPO's soft overlong punishment and the cosine length-scaled correctness reward."""
import math

import pytest
import torch

from workbench import registry
from workbench.rewards.length import cosine_length_reward, cosine_scaled, soft_overlong, soft_overlong_reward
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

D = torch.float64


@pytest.mark.covers("soft-overlong")
def test_soft_overlong_is_zero_then_linear_then_minus_one():
    lengths = torch.arange(0, 13)
    out = soft_overlong(torch.zeros(13, dtype=torch.float64), lengths, max_len=10, buffer=4)
    assert torch.all(out[:7] == 0)                                 # |y| <= L - C = 6
    assert torch.allclose(out[7:11], -torch.arange(1, 5, dtype=torch.float64) / 4)  # linear, -1 at L
    assert torch.all(out[11:] == -1)                               # beyond L
    with pytest.raises(ValueError, match="buffer"):
        soft_overlong(torch.zeros(1), torch.ones(1), max_len=4, buffer=8)


@pytest.mark.covers("soft-overlong")
def test_soft_overlong_is_continuous_at_the_start_of_the_buffer():
    L, C = 100, 20
    x = torch.tensor([L - C - 1e-9, L - C, L - C + 1e-9], dtype=D)
    out = soft_overlong(torch.zeros(3, dtype=D), x, max_len=L, buffer=C)
    assert out.abs().max() < 1e-9


@pytest.mark.covers("soft-overlong")
def test_soft_overlong_reward_takes_its_budget_from_the_run_or_from_trl_style_arguments():
    ids = [[1] * n for n in (4, 7, 8, 9)]
    from_run = soft_overlong_reward(["a"] * 4, ids, buffer=2, max_new_tokens=8)
    as_trl = soft_overlong_reward(["a"] * 4, ids, buffer=2, max_completion_len=8)  # TRL gives no max_new_tokens
    assert from_run == as_trl == [0.0, -0.5, -1.0, -1.0]
    with pytest.raises(ValueError, match="max_completion_len"):
        soft_overlong_reward(["a"], [[1]], buffer=2)
    with pytest.raises(ValueError, match="completion_ids has 1 rows for 2 completions"):
        soft_overlong_reward(["a", "b"], [[1]], buffer=2, max_new_tokens=8)


@pytest.mark.covers("soft-overlong")
def test_soft_overlong_without_a_buffer_is_zero_up_to_the_budget_then_minus_one():
    """TRL's soft_punish_cache=0: no ramp (and no division by the zero buffer)."""
    out = soft_overlong(torch.zeros(4, dtype=D), torch.tensor([0.0, 9.0, 10.0, 11.0], dtype=D), max_len=10, buffer=0)
    assert out.tolist() == [0.0, 0.0, 0.0, -1.0]
    with pytest.raises(ValueError, match="0 <= buffer <= max_len"):
        soft_overlong(torch.zeros(1), torch.ones(1), max_len=4, buffer=-1)


# ----------------------------------------------------------------------------------------------- cosine length

def curve(correct: bool, L=100, **hp):
    lengths = torch.arange(0, L + 1, dtype=D)
    return cosine_scaled(lengths, torch.full((L + 1,), correct), max_len=L, **hp)


@pytest.mark.covers("cosine-length")
def test_correct_answers_decrease_with_length_from_one_to_one_half():
    r = curve(True)
    assert r[0] == pytest.approx(1.0) and r[-1] == pytest.approx(0.5)
    assert bool((r[1:] < r[:-1]).all())                            # strictly decreasing on [0, L]


@pytest.mark.covers("cosine-length")
def test_wrong_answers_increase_with_length_from_minus_one_to_minus_one_half():
    r = curve(False)
    assert r[0] == pytest.approx(-1.0) and r[-1] == pytest.approx(-0.5)
    assert bool((r[1:] > r[:-1]).all())


@pytest.mark.covers("cosine-length")
def test_every_correct_answer_scores_above_every_wrong_one_at_any_length():
    lengths = torch.arange(0, 3001, dtype=D)  # far past L: clamped at the long-length bounds
    right = cosine_scaled(lengths, torch.ones(3001, dtype=torch.bool), max_len=1000)
    wrong = cosine_scaled(lengths, torch.zeros(3001, dtype=torch.bool), max_len=1000)
    assert float(right.min()) == pytest.approx(0.5) and float(wrong.max()) == pytest.approx(-0.5)
    assert float(right.min()) > float(wrong.max())


@pytest.mark.covers("cosine-length")
def test_known_values_and_the_cosine_shape():
    # TRL's docstring: L = 100, |y| = 50 -> 0.75 correct, -0.75 wrong
    out = cosine_length_reward(["r", "w"], [[1] * 50, [1] * 50], max_len=100, scores=[1.0, 0.0])
    assert out == pytest.approx([0.75, -0.75])
    u = 0.3  # r = lo + (hi - lo)(1 + cos(pi u)) / 2
    r = cosine_scaled(torch.tensor([30.0], dtype=D), torch.tensor([True]), max_len=100)
    assert float(r) == pytest.approx(0.5 + 0.25 * (1 + math.cos(math.pi * u)))


@pytest.mark.covers("cosine-length")
def test_clamp_keeps_long_answers_at_the_bound_and_without_it_the_cosine_comes_back():
    lengths = torch.tensor([100.0, 150.0, 200.0], dtype=D)
    right = torch.ones(3, dtype=torch.bool)
    assert cosine_scaled(lengths, right, max_len=100).tolist() == pytest.approx([0.5, 0.5, 0.5])
    periodic = cosine_scaled(lengths, right, max_len=100, clamp=False)
    assert periodic.tolist() == pytest.approx([0.5, 0.75, 1.0])   # open-r1 / demystify: length pays again


@pytest.mark.covers("cosine-length")
def test_exceed_rule_replaces_the_reward_near_the_budget():
    lengths = torch.tensor([10.0, 83.0, 84.0, 120.0], dtype=D)
    out = cosine_scaled(lengths, torch.tensor([True, True, True, False]), max_len=100, exceed_reward=-10.0,
                        exceed_margin=16)
    assert out[0] > 0.9 and out[1] > 0.5 and out[2:].tolist() == [-10.0, -10.0]   # 84 + 16 >= 100
    with pytest.raises(ValueError, match="exceed_margin"):
        cosine_length_reward(["a"], [[1]], max_len=10, exceed_reward=-1.0, exceed_margin=10, scores=[1.0])


@pytest.mark.covers("cosine-length")
def test_cosine_length_reads_l_max_from_the_run_when_max_len_is_none():
    ids = [[1] * 3, [1] * 6]
    from_run = cosine_length_reward(["a", "b"], ids, max_len=None, max_new_tokens=6, scores=[1.0, 1.0])
    assert from_run == pytest.approx([0.75, 0.5])
    assert from_run == cosine_length_reward(["a", "b"], ids, max_len=6, scores=[1.0, 1.0])
    with pytest.raises(ValueError, match="max_len"):
        cosine_length_reward(["a"], [[1]], max_len=None, scores=[1.0])      # TRL passes no max_new_tokens
    with pytest.raises(ValueError, match="max_len"):
        cosine_length_reward(["a"], [[1]], max_len=0, scores=[1.0])


@pytest.mark.covers("cosine-length")
def test_rows_without_a_verdict_are_not_applicable_unless_reproducing_open_r1():
    ids = [[1] * 10] * 3
    assert cosine_length_reward(["a"] * 3, ids, scores=[1.0, None, 0.0])[1] is None
    assert cosine_length_reward(["a"] * 3, ids, scores=[1.0, None, 0.0], reference_bug=True)[1] == 1.0


@pytest.mark.covers("cosine-length")
def test_cosine_length_takes_trl_conversational_completions_and_is_registered_with_trl_defaults():
    entry = registry.get("reward", "cosine-length")
    assert entry.defaults["max_len"] == 1000 and entry.defaults["clamp"] is True
    chat = [[{"role": "assistant", "content": "42"}], [{"role": "assistant", "content": "41"}]]
    out = entry.fn(completions=chat, completion_ids=[[1] * 500, [1] * 500], scores=[1.0, 0.0])
    assert out == pytest.approx([0.75, -0.75])


@pytest.mark.covers("cosine-length")
def test_cosine_length_is_finite_on_degenerate_completions():
    """Empty, non-UTF-8 and a million characters (its time per size: bench/bench_parsers.py)."""
    texts = ["", "caf\udce9", "x" * 1_000_000]
    out = cosine_length_reward(texts, [[], [1] * 5, [1] * 1_000_000], scores=[0.0, 1.0, 1.0])
    assert all(math.isfinite(v) for v in out) and out == pytest.approx([-1.0, 0.5 + 0.25 * (1 + math.cos(
        math.pi * 0.005)), 0.5])


@pytest.mark.covers("cosine-length")
def test_completion_ids_must_match_the_completions():
    with pytest.raises(ValueError, match="completion_ids"):
        cosine_length_reward(["a", "b"], [[1]], scores=[1.0, 0.0])


def test_a_negative_buffer_is_refused_when_the_recipe_is_built():
    """A buffer above the run's max_new_tokens is refused when the reward first runs (it needs the run's budget)."""
    with pytest.raises(ValueError, match=r"reward 'soft-overlong': soft-overlong needs 0 <= buffer <= max_len, got "
                                         r"buffer=-1"):
        Pipeline(with_overrides(get_recipe("dapo"), {"rewards:soft-overlong": {"buffer": -1}}))
    with pytest.raises(ValueError, match=r"got buffer=8, max_completion_len=6"):
        Pipeline(with_overrides(get_recipe("dapo"), {"rewards:soft-overlong": {"buffer": 8, "max_completion_len": 6}}))
