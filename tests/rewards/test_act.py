"""ACT: the judge reward, the answer parsing, and the pairs (random order, a' = a* filtered out)."""
import random

import pytest

from workbench import registry
from workbench.rewards.act import CriticPair, act_reward, critic_pairs, parse_choice, present

pytestmark = pytest.mark.covers("act")

PAIRS = [CriticPair(f"s{i}", expert, alt) for i, (expert, alt) in
         enumerate([("U", "D"), ("[3*4]", "[3*5]"), ("A:12", "A:13"), ("L", "R"), ("[Bov]", "[Kel]")])]


def logged():
    out = {}
    return out, lambda name, value: out.__setitem__(name, value)


def test_registered_as_a_reward_with_catalog_metadata():
    entry = registry.get("reward", "act")
    assert entry.defaults == {"labels": ("A", "B")} and entry.confidence == "partial"
    assert entry.family == "rewards" and entry.equation and entry.fn.__doc__


@pytest.mark.parametrize("text, choice", [
    ("A", "A"), ("B", "B"), (" B\n", "B"), ("Answer: B", "B"), ("the answer is (A).", "A"),
    ("A looks safe but B reaches the goal. Answer: B", "B"), ("**Answer:** A. B hits a wall", "A"),
    ("**Answer:** **B**", "B"), ("Answer: B\nbecause A hits a wall", "B"), ("ANSWER:B", "B"),
    ("I pick B. A wall blocks the up move.", "B"),          # the article "A" is no choice
    ("Answer: moving up. A wall blocks it.", None),          # nor after the marker
    ("B is wrong, A is right", None), ("so the better move is\nA", "A"),
    ("Apple", None), ("", None), ("answer: none of them", None), ("A1 B2", None), ("caf\udce9 B", "B")])
def test_parse_choice(text, choice):
    assert parse_choice(text) == choice


def test_reward_is_one_iff_the_choice_is_the_experts_label():
    out = act_reward(["A", "Answer: B", "B", "", "A"], answer=["A", "A", "B", "B", "no label"])
    assert out == [1.0, 0.0, 1.0, 0.0, None]
    assert act_reward(["1"], solution=["1"], labels=("1", "2")) == [1.0]  # TRL's name; other labels


def test_a_random_judge_earns_one_half():
    """Catalog test (1): about 1/2 for a judge flipping coins over randomly presented pairs."""
    rng = random.Random(0)
    presented = [present(PAIRS[i % len(PAIRS)], rng) for i in range(4000)]
    choices = [rng.choice("AB") for _ in presented]
    rewards = act_reward(choices, answer=[label for _, label in presented])
    assert sum(rewards) / len(rewards) == pytest.approx(0.5, abs=0.03)  # 4 sd of a binomial mean
    assert 0.45 < sum(label == "A" for _, label in presented) / len(presented) < 0.55  # the order is a fair coin


def judge_by_content(prefers):
    """A judge that reads the candidates, not their positions: it names whichever candidate `prefers`."""
    return lambda state, first, second: "A" if prefers(state, first, second) == first else "B"


def rewards_both_orders(judge, pair):
    out = []
    for (first, second), label in (((pair.expert, pair.alternative), "A"), ((pair.alternative, pair.expert), "B")):
        out.append(act_reward([judge(pair.state, first, second)], answer=[label])[0])
    return out


def test_an_order_consistent_judge_gets_the_same_reward_in_both_orders():
    """Catalog test (2); a judge with a position bias does not (so the check can fail)."""
    experts = {p.state: p.expert for p in PAIRS}
    right = judge_by_content(lambda s, a, b: a if a == experts[s] else b)
    shortest = judge_by_content(lambda s, a, b: min(a, b))  # consistent, sometimes wrong
    for pair in PAIRS:
        assert rewards_both_orders(right, pair) == [1.0, 1.0]
        first, second = rewards_both_orders(shortest, pair)
        assert first == second == float(min(pair.expert, pair.alternative) == pair.expert)
        assert rewards_both_orders(lambda s, a, b: "A", pair) == [1.0, 0.0]


def test_pairs_whose_alternative_is_the_experts_action_are_filtered_out():
    """Catalog test (3)."""
    pairs = critic_pairs(["s0", "s1", "s2", "s3"], ["U", "[3*4]", "A:12", "L"], ["D", "[3*4]", " A:12 ", "L"])
    assert pairs == [CriticPair("s0", "U", "D")]
    with pytest.raises(ValueError, match="2 states, 1 expert actions"):
        critic_pairs(["a", "b"], ["U"], ["D"])


def test_logs_parsed_share_and_position_bias():
    metrics, log = logged()
    act_reward(["A", "B", "A", "?", "A"], answer=["A", "A", "B", "B", "x"], log_metric=log)
    assert metrics == {"parsed": 0.75, "first_label": 2 / 3}


def test_bad_labels_and_missing_gold_are_clear_errors():
    with pytest.raises(ValueError, match="labels must be two distinct"):
        act_reward(["A"], answer=["A"], labels=("A", "A"))
    with pytest.raises(ValueError, match="'act' needs a 'answer' or 'solution' column"):
        act_reward(["A"])


def test_robust_to_empty_surrogate_and_huge_completions():
    texts = ["", "caf\udce9", "A B " * 250_000, "answer" * 200_000, "x" * 1_000_000]
    out = act_reward(texts, answer=["A"] * len(texts))
    assert out == [0.0, 0.0, 0.0, 0.0, 0.0]  # "A B A B ... B " closes on B
