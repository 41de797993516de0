"""Component parameters: the type each one takes and the range its math allows, checked when a recipe is built, before
anything is trained or written.

A parameter's type is its default's (bool, int, float, str, a list for a tuple default), or the alternatives
`ALTERNATIVES[name]` lists for the names that take more than one (types and literal values). A default of None
means "off": the type it takes when set is `OPTIONAL_TYPES[name]`, and a parameter not listed there takes any value
(a callable, a mapping; its component checks it). Ranges are those of the names below wherever they occur, tested against
every registered default (tests/test_params.py); a component adds its own with `check=` in its registration.

    check_value("ppo-clip", "eps_high", -5, 0.2)   ->  ValueError: eps_high=-5 is out of range: the clip width ...
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

OPTIONAL_TYPES = {  # parameters whose default None turns them off, and the type they take when on
    "logr_clamp": float, "dual_clip_c": float, "value_clamp": float, "low": float, "eps_low": float,
    "eps_high": float, "clip_low": float, "clip_high": float, "max_len": int, "max_turns": int,
    "max_total_tokens": int, "max_tokens": int, "max_length": int, "max_completion_len": int, "max_epochs": int,
    "cost_max": float, "max_toolcall_frac": float, "t_min": float, "exceed_reward": float, "truncated_score": float,
    "coefficient": float, "baseline": float, "language": str, "stage": int, "stop": list, "budgets": list,
    "reasoning_delimiters": list, "checklist": list, "mode_costs": dict, "offline_values": dict,
    "n_drafts": int, "initial_rollouts": int, "global_rollouts": int,  # None: the method sets them from the group
    "reincarnate_step": int, "max_replay_loss_frac": float,  # None: the schedule sets them from the run's length
    "cap": float,  # dots-rr-clip's optional truncation of its behaviour weight (None: untruncated, the paper's)
    "swap_every": int,  # separate policies swap roles every k steps (None: never; CORY's T)
    # Python objects a recipe's code passes (a judge, a scorer, a random generator): never a JSON value
    **dict.fromkeys(("oracle", "judge", "detector", "scorer", "reflector", "count_tokens", "generator"), callable),
}
# keywords through which a component takes data its batch normally supplies (tests and advanced callers pass them):
# never a recipe setting
NOT_SETTINGS = ("states", "step_rewards", "matches", "rows", "turns")

ALTERNATIVES = {  # parameters that take more than one type: each a type or a literal value
    "allow_singletons": (bool, "keep"),  # a group of one: refuse (False), A = 0 (True) or A = R ("keep", verl's)
    "max_len": (int, None),               # a length scale; None: the run's max_new_tokens
    "bias_correction": (None, "token", "sequence"),  # TRL's KL bias correction, per token or per sequence
    "is_cap": (float, None),              # R²VPO's cap on pi_old / mu; None: no stale-sample weight
    "cap_abs": (float, None),             # CISPO's absolute cap on r; None: the relative eps_low / eps_high convention
    "gamma_beta_ratio": (float, None),    # SimPO's margin as gamma / beta; None: the absolute gamma convention
    "prob_threshold": (float, None),      # SPO's probability mask; None: no mask (the advantage and the token mask)
    "guard": (str, None),                 # VL-DAC's ratio guard scope; None: plain PPO clip
    "seat": (None, int, str),             # the multi-agent rollout's seat for the policy: drawn per episode, an id or role
}


@dataclass(frozen=True)
class Range:
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False     # low itself excluded
    meaning: str = ""          # what the parameter is, for the message

    def holds(self, v: float) -> bool:
        return (v > self.low if self.low_open else v >= self.low) and v <= self.high

    def words(self) -> str:
        low = "" if self.low == -math.inf else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = "" if self.high == math.inf else f"<= {self.high:g}"
        return " and ".join(w for w in (low, high) if w)


RANGES = {  # by name, wherever the name occurs
    "eps_low": Range(0, meaning="the clip width below 1"),
    "eps_high": Range(0, meaning="the clip width above 1"),
    "dual_clip_c": Range(1, low_open=True, meaning="dual-clip's bound on the ratio for A < 0 (c > 1)"),
    "logr_clamp": Range(0, low_open=True, meaning="the clamp on the log-ratio"),
    "value_clamp": Range(0, low_open=True, meaning="the clamp on the KL value"),
    "temperature": Range(0, low_open=True, meaning="a softmax temperature"),
    "eps": Range(0, low_open=True, meaning="a small constant or clip width"),
    "label_smoothing": Range(0, 0.5, meaning="the share of flipped preference labels"),
    "cap": Range(0, low_open=True, meaning="an upper cap on a weight"),
    "max_len": Range(1, meaning="a length limit"), "max_turns": Range(1, meaning="a turn limit"),
    "max_total_tokens": Range(1, meaning="a token limit"),
}


def kind_of(default, name: str):
    """The type a parameter takes: ALTERNATIVES', its default's, OPTIONAL_TYPES' for a None default, None when
    untyped."""
    if name in ALTERNATIVES:
        return ALTERNATIVES[name]
    if default is None:
        return OPTIONAL_TYPES.get(name)
    return list if isinstance(default, (tuple, list)) else type(default)


def type_error(value, kind) -> str | None:
    """Why `value` is not a `kind` (bool, int, float, str, list), or None when it is. A bool is not a number here,
    an int is a float, and a number must be finite. A tuple of alternatives takes any of them."""
    if isinstance(kind, tuple):
        if any(value is alt or (not isinstance(alt, type) and value == alt and type(value) is type(alt))
               or (isinstance(alt, type) and type_error(value, alt) is None) for alt in kind):
            return None
        return "needs one of " + ", ".join(alt.__name__ if isinstance(alt, type) else repr(alt) for alt in kind)
    if kind is bool:
        return None if isinstance(value, bool) else "needs true or false"
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "needs a whole number"
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "needs a number"
        return None if math.isfinite(value) else "needs a finite number"
    if kind is str:
        return None if isinstance(value, str) else "needs a string"
    if kind is list:
        return None if isinstance(value, (list, tuple)) else "needs a list"
    if kind is dict:
        return None if isinstance(value, dict) else "needs a mapping"
    if kind is callable:
        return None if callable(value) else "needs a Python callable, which a recipe's code passes (no JSON value is one)"
    return None


def check_value(component: str, name: str, value, default) -> None:
    """Refuse `value` for parameter `name` of `component` (default `default`) of the wrong type or out of range."""
    if name in NOT_SETTINGS:
        raise ValueError(f"{component}: {name} is data the batch supplies (a keyword for tests and callers in code), "
                         "not a setting")
    kind = kind_of(default, name)
    if value is None and default is None:
        return  # "off", as the default
    why = type_error(value, kind)
    if why:
        raise ValueError(f"{component}: {name}={value!r} {why} (default {default!r})")
    bound = RANGES.get(name)
    if bound is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and not bound.holds(value):
        raise ValueError(f"{component}: {name}={value!r} is out of range: {bound.meaning} must be {bound.words()}")


def check_choice(component: str, name: str, value, choices: tuple) -> None:
    """Refuse a value that is not one of a setting's named options, offering the closest."""
    if not any(value == c and type(value) is type(c) for c in choices):
        close = did_you_mean(value, [c for c in choices if isinstance(c, str)]) if isinstance(value, str) else ""
        raise ValueError(f"{component}: {name}={value!r} is not one of {list(choices)}{close}")


def did_you_mean(name: str, known, n: int = 1) -> str:
    """' (did you mean X?)' ('X or Y' for n = 2) for the closest of `known`, or ''."""
    close = difflib.get_close_matches(name, list(known), n=n, cutoff=0.6)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
