"""Notebook 03's exercise checks accept the right answer and reject a wrong one; the answers follow the library."""
import pytest

from workbench.exercises import nb03_kl_estimators as ex


def test_kl_exercises():
    assert ex.check_k1_sign("negative") == "correct"
    assert ex.check_k1_sign("positive", p=0.5, p_ref=0.2) == "correct"
    with pytest.raises(AssertionError):
        ex.check_k1_sign("positive")
    assert ex.check_nonnegative_estimators(["k3", "abs", "k2"]) == "correct"
    for wrong in (["k3"], ["k1", "k2", "k3", "abs"]):
        with pytest.raises(AssertionError):
            ex.check_nonnegative_estimators(wrong)
    assert ex.check_reverse_kl_gradient(["k1 + k2", "k2 - k1"]) == "correct"
    assert ex.check_reverse_kl_gradient(("k2-k1", "k2 + k1")) == "correct"  # spelled another way
    for wrong in ("k1 + k2", ["k1 + k2"], ["k1 + k2", "k2 - k1", "k3 - k1"], "k2", ["k4"], 3):
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_reverse_kl_gradient(wrong)
    # the single estimators: only k2's expected gradient is the reverse KL's (k1: none, k3: the forward KL's)
    assert ex.reverse_kl_gradient_estimators(("k1", "k2", "k3", "abs")) == {"k2"}
    assert ex.reverse_kl_gradient_estimators(("2 * k2", "k2 + abs - abs", "-k1 + k2")) == {"k2 + abs - abs",
                                                                                            "-k1 + k2"}
    assert ex.kl_combination("k2 - k1") == {"k2": 1.0, "k1": -1.0}
    for bad in ("k3+", "k1 k2", "", "k2 * 2"):
        with pytest.raises(ValueError):
            ex.kl_combination(bad)
