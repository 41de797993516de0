"""SSL sweet-spot tiers: Gaussian distance zones and quantile progress zones."""
import random

import pytest

from workbench.rewards.ssl import answer_distance, distance_tier, progress_tier, ssl

pytestmark = pytest.mark.covers("ssl")


def test_distance_tiers_are_the_decided_values():
    sigma = 0.1
    assert [distance_tier(d, sigma=sigma) for d in (0, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.21, float("inf"))] == \
        [1.0, 0.6, 0.6, 0.3, 0.3, 0.1, 0.1, 0.0, 0.0]


def test_monotone_non_increasing_in_distance_and_non_decreasing_in_progress():
    rng = random.Random(0)
    for K in (1, 2, 3, 4):
        d = sorted(rng.uniform(0, 0.5) for _ in range(300))
        r = [distance_tier(x, sigma=0.1, K=K) for x in d]
        assert all(a >= b for a, b in zip(r, r[1:]))
        p = sorted(rng.random() for _ in range(300)) + [1.0]
        r = [progress_tier(x, K=K) for x in p]
        assert all(a <= b for a, b in zip(r, r[1:]))


def test_one_zone_is_the_binary_reward():
    assert [distance_tier(d, sigma=0.1, K=1) for d in (0.0, 1e-9, 0.05, 3.0)] == [1.0, 0.0, 0.0, 0.0]
    assert [progress_tier(p, K=1) for p in (0.0, 0.5, 0.999, 1.0)] == [0.0, 0.0, 0.0, 1.0]
    assert ssl(["A:45", "A:46"], answer=["46", "46"], scores=[0.0, 1.0], K=1) == [0.0, 1.0]


def test_progress_has_k_plus_one_levels_with_one_reserved_for_done():
    """Our reading (module docstring): floor(K p) / K, so the catalog's quartile values 0.25..1 from the second
    quartile on, 0 for the first, and 1 only at p = 1."""
    grid = [i / 1000 for i in range(1001)]
    assert sorted({progress_tier(p, K=4) for p in grid}) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [p for p in grid if progress_tier(p, K=4) == 1.0] == [1.0]


def test_noise_inside_a_zone_leaves_the_reward_unchanged():
    rng = random.Random(1)
    edges = [0.0, 0.05, 0.1, 0.2]
    for lo, hi in zip(edges, edges[1:] + [1.0]):
        inside = [rng.uniform(lo, hi) for _ in range(50)]
        inside = [x for x in inside if lo < x <= hi]
        assert len({distance_tier(x, sigma=0.1) for x in inside}) == 1
    for q in range(4):
        assert len({progress_tier(q / 4 + rng.uniform(0, 0.2499), K=4) for _ in range(50)}) == 1


def test_toy_distances_for_addition_countdown_and_calculator():
    assert answer_distance("95", "100") == pytest.approx(0.05)
    assert answer_distance("A:90", "100") == pytest.approx(0.1)
    assert answer_distance("3*5+6", "22|3 5 6") == pytest.approx(1 / 22)      # countdown: the expression's value
    assert answer_distance("3*5+7+1", "22|3 5 7") == float("inf")            # not over exactly those numbers
    assert answer_distance("no number", "4") == float("inf")
    assert answer_distance("5", "") is None
    # the exact verifier's reading of the answer (workbench.rewards.accuracy): numbers, not digit runs
    assert answer_distance("10-3", "3") == 0.0                       # the last number is 3, not -3
    assert answer_distance("A:-3", "-3") == 0.0 and answer_distance("x = 0.45", "0.5") == pytest.approx(0.05)
    assert answer_distance("1/2", "0.5") == 0.0 and answer_distance("A:1,050", "1,000") == pytest.approx(0.05)
    assert answer_distance("the answer is 46. Then 12", "46") == 0.0   # the first number after the marker
    assert answer_distance("A:" + "9" * 400, "46") == float("inf")      # past float range: beyond every zone
    out = ssl(["95", "A:90", "81", "046", "x", "46"], answer=["100", "100", "100", "46", "46", "46"],
              scores=[0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    assert out == [0.6, 0.3, 0.1, 0.6, 0.0, 1.0]  # "046" equals 46 but is rejected: kept off the exact tier
    assert ssl(["7", "x"], answer=["", ""], scores=[1.0, 0.0]) == [1.0, 0.0]  # no gold number: the verdict
    assert ssl(["7"], answer=[""]) == [None]


def test_progress_tiers_on_calculator_episodes():
    def episode(*actions):
        return [{"action": a, "tool_error": None} for a in actions]

    turn_info = [episode("[2*3]", "[4*5]", "[6+20]", "A:26"), episode("[2*3]", "[4*5]", "[6+20]", "A:25"),
                 episode("[2*3]", "A:1"), episode("A:3")]
    out = ssl(["t"] * 4, signal="progress", prompts=["2*3+4*5="] * 4, scores=[1.0, 0.0, 0.0, 0.0],
              turn_info=turn_info)
    assert out == [1.0, 0.75, 0.25, 0.0]  # progress 1, 3/4, 1/4, 0: below 1 until solved
    assert ssl(["t", "u"], signal="progress", progress=[0.6, 0.2]) == [0.5, 0.0]


def test_progress_as_trl_calls_it_conversational_prompts_and_no_scores():
    prompt = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "2*3+4*5="}]
    chat = [[{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
             {"role": "assistant", "content": "A:26"}],
            [{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
             {"role": "assistant", "content": "[4*5]"}, {"role": "tool", "content": "20"},
             {"role": "assistant", "content": "A:25"}]]
    kw = dict(signal="progress", prompts=[prompt] * 2, solution=["26"] * 2)
    assert ssl(chat, **kw) == [1.0, 0.5]                      # solved (exact verifier); 2 of 3 intermediates + 0
    assert ssl(chat, verifier="math", **kw) == [0.25, 0.5]    # math-verify reads no "A:26": never solved
    calls = [[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "mul"}}]}]]
    with pytest.raises(ValueError, match=r"'ssl'.*structured tool_calls"):
        ssl(calls, signal="progress", prompts=[prompt], solution=["26"])


def test_bad_tiers_are_refused():
    with pytest.raises(ValueError, match="K"):
        distance_tier(0.1, K=5)
    for K in (4.0, True, 0):
        with pytest.raises(ValueError, match=r"K \(the number of zones\) must be an int"):
            ssl(["1"], answer=["1"], K=K)
        with pytest.raises(ValueError, match=r"K \(the number of zones\) must be an int"):
            ssl(["1"], signal="progress", progress=[0.5], K=K)
    for bad in (1.5, -0.1, float("nan"), "0.5"):
        with pytest.raises(ValueError, match=r"progress column .* row 1 has"):
            ssl(["t", "u"], signal="progress", progress=[0.5, bad])
    with pytest.raises(ValueError, match="sigma"):
        distance_tier(0.1, sigma=0)
    with pytest.raises(ValueError, match="values"):
        ssl(["1"], answer=["1"], values=(1.0, 0.6, 0.6, 0.1))
    with pytest.raises(ValueError, match="signal"):
        ssl(["1"], answer=["1"], signal="speed")
    with pytest.raises(ValueError, match="answer"):
        ssl(["1"])
