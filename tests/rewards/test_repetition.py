"""repetition-penalty: word n-grams (open-r1) and token-id n-grams (TRL 1.16)."""
import random

import pytest

from workbench import registry
from workbench.rewards.repetition import repeated_fraction, repetition_penalty

pytestmark = pytest.mark.covers("repetition-penalty")


def test_registered_with_catalog_defaults():
    e = registry.get("reward", "repetition-penalty")
    assert e.defaults == {"unit": "words", "n": 3, "max_penalty": -1.0}


def test_no_repeated_ngram_is_zero():
    """Catalog test (1), also below n units and on the empty completion."""
    texts = ["the quick brown fox jumps over", "a b", "", "a a b a a c"]  # "a a b a a c": 3-grams all distinct
    assert repetition_penalty(texts) == [0.0] * 4
    assert repetition_penalty(["x"] * 3, unit="tokens", completion_ids=[[1, 2, 3, 4], [5, 5], []]) == [0.0] * 3


def test_fully_repeated_text_approaches_max_penalty():
    """Catalog test (2): N copies of one word give 1 - 1/(N - 2) of p_max."""
    values = [repetition_penalty([" ".join(["go"] * n)], max_penalty=-0.5)[0] for n in (3, 4, 12, 1002)]
    assert values == pytest.approx([-0.5 * (1 - 1 / (n - 2)) for n in (3, 4, 12, 1002)])
    assert values[-1] == pytest.approx(-0.5, abs=1e-3) and values == sorted(values, reverse=True)


def test_penalty_stays_in_range():
    """Catalog test (3): r in [p_max, 0] on random texts and token ids."""
    rng = random.Random(0)
    for _ in range(200):
        p_max, n = -rng.uniform(0, 3), rng.randint(1, 5)
        words = [" ".join(rng.choice("ab cd") for _ in range(rng.randint(0, 40)))]
        ids = [[rng.randint(0, 3) for _ in range(rng.randint(0, 40))]]
        for unit in ("words", "tokens"):
            (r,) = repetition_penalty(words, unit=unit, n=n, max_penalty=p_max, completion_ids=ids)
            assert p_max <= r <= 0.0


def test_known_values():
    """TRL's docstring example (n = 2) and a hand count on words: lower-cased, split on any whitespace."""
    ids = [[1, 2, 3, 4], [5, 5, 5, 5, 5]]
    assert repetition_penalty(["", ""], unit="tokens", n=2, completion_ids=ids) == [0.0, -0.75]
    # 3-grams of "The cat The\ncat THE cat": (the cat the) (cat the cat) (the cat the) (cat the cat): 2 unique of 4
    assert repetition_penalty(["The cat The\ncat THE cat"]) == [-0.5]
    assert repeated_fraction(["a", "b", "a", "b"], 1) == 0.5


def test_token_unit_reads_completion_ids_and_names_them_when_missing():
    with pytest.raises(ValueError, match="repetition-penalty.*'completion_ids'"):
        repetition_penalty(["a a a a"], unit="tokens")


def test_bad_options_are_refused():
    for kw, match in [({"unit": "chars"}, "unit"), ({"n": 0}, "n must"), ({"n": 2.5}, "n must"),
                      ({"max_penalty": 0.5}, "max_penalty")]:
        with pytest.raises(ValueError, match=match):
            repetition_penalty(["a b c"], **kw)
