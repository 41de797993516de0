"""What every notebook's exercise tests ask of a check: the right answer is "correct", a wrong one raises "not
quite" with an explanation."""
import pytest


def accepts_right_rejects_wrong(check, right, *wrong) -> None:
    assert check(right) == "correct"
    for bad in wrong:
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


def explains(check, wrong, explanation: str) -> None:
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)
