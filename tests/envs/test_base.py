"""The one check of a task's knobs: names and types read off its constructor's signature."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.envs.base import Knob, check_knob_names, check_knob_types, check_knobs, knob_kinds


def make(path: str, *, size: int = 6, rate: float = 0.5, flag: bool = True, ops: str = "+-",
         fraction: float | None = None, where: str | Path | None = None, fn=None):
    """A stand-in constructor: `path` has no default, so it is not a knob."""


def test_knobs_are_the_parameters_with_defaults_and_their_annotations():
    kinds = knob_kinds(make)
    assert list(kinds) == ["size", "rate", "flag", "ops", "fraction", "where", "fn"]
    assert kinds["size"] == Knob((int,), 6) and kinds["rate"] == Knob((int, float), 0.5)
    assert kinds["flag"].types == (bool,) and kinds["ops"].types == (str,)
    assert kinds["fraction"].types == (int, float, type(None)) and kinds["where"].types == (str, Path, type(None))
    assert kinds["fn"].types is None  # unannotated: not checked


@pytest.mark.parametrize("given", [{"size": 6}, {"size": 6, "rate": 1}, {"flag": False}, {"fraction": None},
                                   {"where": Path("x")}, {"where": "x"}, {"fn": print}])
def test_values_of_the_declared_types_pass(given):
    check_knobs("make", given, make)


@pytest.mark.parametrize("given, named", [
    ({"size": "6"}, "size='6' (str; need int)"),
    ({"size": 6.0}, "size=6.0 (float; need int)"),
    ({"size": True}, "size=True (bool; need int)"),          # a bool is not an int here
    ({"flag": "no"}, "flag='no' (str; need bool: true or false)"),
    ({"flag": 0}, "flag=0 (int; need bool"),
    ({"rate": None}, "rate=None (NoneType; need int or float)"),
    ({"ops": 3}, "ops=3 (int; need text)"),
])
def test_a_value_of_another_type_is_refused_naming_knob_value_and_type(given, named):
    with pytest.raises(ValueError, match="make: wrong type for") as err:
        check_knobs("make", given, make)
    assert named in str(err.value) and f"--set task_kw.{next(iter(given))}=" in str(err.value)


def test_an_unknown_knob_is_refused_with_the_near_misses_and_every_knob():
    with pytest.raises(ValueError, match=r"make: unknown task_kw key 'sizee' \(did you mean 'size'\?\); make's knobs: "
                                         r"size, rate, flag, ops, fraction, where, fn"):
        check_knobs("make", {"sizee": 5}, make)
    with pytest.raises(ValueError, match=r"unknown task_kw keys 'foo', 'flg' \(did you mean 'flag'\?\)"):
        check_knob_names("make", ["foo", "flg"], knob_kinds(make))
    with pytest.raises(ValueError, match="make: unknown task_kw key 'path'"):  # no default: not a knob
        check_knobs("make", {"path": "x"}, make)


def test_the_type_check_takes_plain_types_and_ignores_other_locals():
    check_knob_types("t", {"self": object(), "n": 3, "p": 0}, {"n": int, "p": float})
    with pytest.raises(ValueError, match=r"t: wrong type for n=2.5 \(float; need int\)"):
        check_knob_types("t", {"n": 2.5}, {"n": int})
