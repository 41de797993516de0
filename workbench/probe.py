"""Run a component's own checks of its settings when the recipe is built, not at its first call mid-run.

Many components check their settings at the top of their function (`if not 0 <= tau < 1: raise ValueError(...)`),
before they read any input. `probe_settings` calls the component with stand-ins for all its inputs (the batch, the
step context, the engine, ...): the first use of a stand-in stops the call. A ValueError raised before any stand-in
was used can only come from the settings, so it is raised now, before anything is trained or written; a call that
reaches its inputs has passed those checks. (Checks that need the inputs, or the run's config, stay where they are;
a component states those with `check=` in its registration.)
"""
from __future__ import annotations

import inspect


class InputUsed(Exception):
    """A stand-in input was used: the component got past the checks of its settings."""


class StandIn:
    """Every input of a probed component. Any use (an attribute, an operator, len, iteration, a tensor function)
    records the use and stops the call."""

    def __init__(self, uses: list):
        object.__setattr__(self, "_uses", uses)

    def _stop(self, *args, **kwargs):
        self._uses.append(True)
        raise InputUsed

    def __getattr__(self, name):
        self._stop()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, StandIn):
                a._stop()
        raise InputUsed


for _name in ("__len__", "__iter__", "__getitem__", "__setattr__", "__bool__", "__call__", "__contains__", "__float__",
              "__int__", "__index__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__neg__", "__lt__", "__le__", "__gt__", "__ge__", "__array__", "__eq__",
              "__ne__", "__hash__", "__pow__", "__matmul__", "__and__", "__or__", "__invert__", "__repr__", "__str__",
              "__format__"):
    setattr(StandIn, _name, StandIn._stop)


def probe_settings(fn, settings: dict, fixed: dict | None = None, inputs: tuple = ()) -> None:
    """Call `fn` with `settings` and stand-ins for every parameter without a default and for `inputs` (keywords
    the pipeline always passes, e.g. a reward's columns), and `fixed`'s values where it takes those names; re-raise
    a ValueError (or name any other error) raised before any stand-in was used."""
    uses: list = []
    kwargs, args = {**{name: StandIn(uses) for name in inputs}, **settings}, []
    for name, p in inspect.signature(fn, follow_wrapped=False).parameters.items():
        if name in kwargs:
            continue
        if fixed and name in fixed:
            kwargs[name] = fixed[name]
        elif p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(StandIn(uses))
        elif p.default is inspect.Parameter.empty and p.kind is p.KEYWORD_ONLY:
            kwargs[name] = StandIn(uses)
    try:
        fn(*args, **kwargs)
    except InputUsed:
        return
    except Exception as err:
        if uses:  # it broke on a stand-in: the settings passed every check made before that
            return
        if isinstance(err, ValueError):
            raise
        raise ValueError(f"{type(err).__name__}: {err}") from err  # only its settings can have caused it
