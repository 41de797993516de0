"""String-keyed registries for every catalog component, one decorator per kind.

    @advantage("grpo", title="DeepSeekMath ...", summary="group z-score", equation=r"A_i = ...")
    def grpo(batch, *, unbiased=True, eps=1e-6): ...

`defaults` are read from the function's keyword defaults, so they cannot drift from the code.
`family` and `confidence` come from the project's copy of the catalog (`data/catalog.tsv`).
"""
from __future__ import annotations

import csv
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.paths import data_file  # noqa: F401  (re-exported for tests and tools)

KINDS = (
    "advantage",    # batch -> A[B, T]
    "objective",    # (logp, old_logp, A, mask, *, agg, denom, **hp) -> (loss, metrics)
    "aggregation",  # (per_token, mask, denom) -> scalar
    "regularizer",  # additive loss terms and KL estimators
    "preference",   # (chosen, rejected, ref_chosen, ref_rejected, **hp) -> (loss, metrics)
    "reward",       # (completions, **fields) -> list[float]
    "rollout",      # generation strategies
    "data",         # token masks and group filters
    "recipe",       # named compositions of the above
)


@dataclass(frozen=True)
class Entry:
    key: str
    kind: str
    fn: Any
    title: str
    summary: str
    equation: str = ""
    defaults: dict = field(default_factory=dict)
    family: str = ""
    confidence: str = ""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def as_dict(self) -> dict:
        return {
            "key": self.key, "kind": self.kind, "family": self.family, "title": self.title,
            "confidence": self.confidence, "summary": self.summary, "equation": self.equation,
            "defaults": {k: _jsonable(v) for k, v in self.defaults.items()},
            "module": getattr(self.fn, "__module__", ""),
        }


_REGISTRY: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}


@functools.lru_cache(maxsize=1)
def catalog() -> dict[str, dict]:
    """Rows of data/catalog.tsv keyed by catalog key."""
    with open(data_file("catalog.tsv"), newline="") as f:
        return {row["key"]: row for row in csv.DictReader(f, delimiter="\t")}


def keyword_defaults(fn: Callable) -> dict:
    return {
        name: p.default for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty and p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def register(kind: str, key: str, *, title: str, summary: str, equation: str = "",
             defaults: dict | None = None, confidence: str | None = None, family: str | None = None):
    """Decorator registering `fn` under (kind, key)."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; kinds are {KINDS}")

    def wrap(fn):
        if key in _REGISTRY[kind]:
            raise ValueError(f"{kind} {key!r} is registered twice ({_REGISTRY[kind][key].fn} and {fn})")
        row = catalog().get(key, {})
        _REGISTRY[kind][key] = Entry(
            key=key, kind=kind, fn=fn, title=title, summary=summary, equation=equation,
            defaults=defaults if defaults is not None else keyword_defaults(fn),
            family=family or row.get("family", ""),
            confidence=confidence or row.get("confidence", "exact"),
        )
        return fn

    return wrap


advantage = functools.partial(register, "advantage")
objective = functools.partial(register, "objective")
aggregation = functools.partial(register, "aggregation")
regularizer = functools.partial(register, "regularizer")
preference = functools.partial(register, "preference")
reward = functools.partial(register, "reward")
rollout = functools.partial(register, "rollout")
data = functools.partial(register, "data")


def get(kind: str, key: str) -> Entry:
    _load_all()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown registry kind {kind!r}; kinds are {KINDS}")
    try:
        return _REGISTRY[kind][key]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY[kind])) or "(none)"
        raise KeyError(f"no {kind} named {key!r}; registered {kind}s: {known}") from None


def entries(kind: str | None = None) -> list[Entry]:
    _load_all()
    kinds = [kind] if kind else list(KINDS)
    return [e for k in kinds for e in sorted(_REGISTRY[k].values(), key=lambda e: e.key)]


def registered_keys() -> set[str]:
    return {e.key for e in entries()}


def missing_keys() -> list[str]:
    """Catalog keys with no registered component yet."""
    have = registered_keys()
    return [key for key in catalog() if key not in have]


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _load_all() -> None:
    """Import every module that registers components (registration happens at import)."""
    import workbench.advantages  # noqa: F401
    import workbench.kl  # noqa: F401
    import workbench.objectives  # noqa: F401
    import workbench.ops  # noqa: F401
    import workbench.preference  # noqa: F401
    import workbench.recipes  # noqa: F401
    import workbench.regularizers  # noqa: F401
    import workbench.rewards  # noqa: F401
