"""String-keyed registries for every catalog component, one kind per pipeline slot.

    @advantage("grpo", title="DeepSeekMath ...", summary="group z-score", equation=r"A_i = ...")
    def grpo(batch, *, unbiased=True, eps=1e-6): ...

The kind of an entry fixes its signature (`SIGNATURES`). An entry declares what it reads (batch fields,
forward outputs such as `entropy` or `values`) and provides, and, where it keeps state across steps, how that
state starts (`state`): the pipeline checks a recipe's parts against these declarations before anything runs.
`defaults` are read from the function's keyword defaults, so they cannot drift from the code.
An entry also declares the metrics it logs (`logs`: name -> (what it measures, its healthy range or shape and what a
bad curve means)); the glossary (`workbench.train.glossary`) gathers them, so a new component edits no central list.
`family` and `confidence` come from the project's copy of the catalog (`data/catalog.tsv`).
"""
from __future__ import annotations

import csv
import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench import stages
from workbench.paths import data_file

# One signature per kind, in pipeline order (`workbench.stages`, where the order is written).
SIGNATURES = {k.kind: k.signature for k in stages.KINDS}
KINDS = tuple(SIGNATURES)
# How a preference loss takes an item's K responses, best first ([N, K] summed log-probs s and reference r):
LAYOUTS = {"pair": "fn(s[:, 0], s[:, -1], r[:, 0], r[:, -1])   the best against the worst (K >= 2)",
           "list": "fn(s, None, r, None)                      the whole ranked list",
           "one": "fn(s[:, 0], r[:, 0])                        one response per item (a step and its advantage)"}

# What a component may need of the task it trains on, beyond batch fields. `workbench.train.pipeline.Pipeline.check_task`
# refuses a recipe whose task lacks one, before anything trains, naming the registered tasks that offer it.
NEEDS = {
    "multi_turn": "episodes of several turns (an environment whose max_turns > 1)",
    "env_copy": "environments whose state can be copied (`Env.copy()`, for Monte Carlo continuations and branches)",
    "env_actions": "an enumerable action set in every state (`Env.actions()`, for random-policy rollouts)",
    "expert": "an expert trajectory per example (`Task.expert_actions`) to follow or patch from",
    "subgoals": "subgoal windows reported by the environment (`info['subgoal']` each step, `Env.subgoals`)",
    "proposer": "episodes that pose questions for a solver task (`solver`, `question(completion, opening)`: "
                "search-propose)",
    "phases": "turns labelled by the game's phase (`env.phases`, info['phase'] every step: the spy game's clue / vote)",
    "agents": "several agents taking turns (a multi-agent game, `envs.multiagent.MultiAgentEnv`: kuhn, tictactoe, ...)",
    "solution": "a solution per example to hint from or prefix with (`Task.expert_actions`: a target or an expert "
                "trajectory)",
}
# What a component may need of the rollout engine (`Entry.needs` too), checked against `config.engine` at start
ENGINE_NEEDS = {
    "topk_logprobs": "the rollout engine's top-k log-probs of every sampled token (`Generation.topk_logp`)",
}
# Run-level coefficients, one name each: the config field, the CLI's --set NAME=X and the logged metric when a
# controller drives it. A component declares which of its parameters is one (`Entry.coefficients`).
COEFFICIENTS = {
    "kl_coef": "weight of the KL-to-reference term: in the loss or in the reward (beta), or a preference loss's beta",
    "entropy_coef": "weight of the entropy bonus in the loss (c_H)",
}
METRIC_PLACEHOLDER = re.compile(r"<[a-z_]+>")  # "rewards/<name>/mean": <...> stands for one path segment


@dataclass(frozen=True)
class Metric:
    """A metric a component (or the loop) logs: what it measures, in one line, and the healthy range or shape of its
    curve with what a bad one means. A name may hold placeholders ("rewards/<name>/mean") for metrics whose names
    depend on a parameter: each stands for one path segment (anything but "/")."""

    name: str
    measures: str
    healthy: str

    def matches(self, logged: str) -> bool:
        parts = METRIC_PLACEHOLDER.split(self.name)
        return re.fullmatch("[^/]+".join(re.escape(p) for p in parts), logged) is not None


def metrics(table: dict, owner: str = "metrics") -> tuple[Metric, ...]:
    """Declarations {name: (measures, healthy)} of `owner` (a component, a loop table) -> Metrics, each text checked
    to be one non-empty line."""
    out = []
    for name, texts in (table or {}).items():
        if not (isinstance(name, str) and name):
            raise ValueError(f"{owner}: a metric name must be a non-empty string, got {name!r}")
        if not (isinstance(texts, tuple) and len(texts) == 2):
            raise ValueError(f"{owner}: logs[{name!r}] must be a pair (what it measures, its healthy "
                             f"range and what a bad curve means), got {texts!r}")
        for text in texts:
            if not (isinstance(text, str) and text.strip() == text and text and "\n" not in text):
                raise ValueError(f"{owner}: logs[{name!r}] holds {text!r}; each text is one non-empty "
                                 "line without leading or trailing spaces")
        out.append(Metric(name, *texts))
    return tuple(out)


STATEFUL = {"sampler": ("init", "select", "update"), "buffer": ("init", "add", "draw"),
            "controller": ("init", "update", "value")}  # kinds registered as a class of static methods


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
    reads: tuple | Callable = ()     # batch fields / forward outputs the component needs; or reads(**hp) -> tuple
    #                                  when they depend on its parameters (`Entry.reads_with`)
    provides: tuple = ()             # batch fields it fills
    state: Callable | None = None    # state(**hp) -> initial state kept by the pipeline (checkpointed)
    targets: Callable | None = None  # advantage: targets(batch, **hp) -> (returns, value_mask) for a critic
    needs: tuple = ()                # what the task (`NEEDS`: multi-turn, copyable envs, ...) or engine must offer
    plan: Callable | None = None     # objective: plan(batch, **hp) -> [B, T] masks, one optimizer step each, in
    #                                  order, gradient through the mask's tokens only (None: one step, every token)
    whole_groups: bool = False       # objective: its loss reads a group's rows together (a preference pair), so
    #                                  minibatches split the batch between groups, never inside one
    layout: str = ""                 # preference: how a loss takes an item's K ranked responses (`LAYOUTS`)
    moves: Callable | None = None    # reference: moves(anchors, policy, step, **hp) after each step (iterated
    #                                  preference methods move their anchors to the policy every few steps)
    keeps: tuple = ()                # reference: the anchors it moves, each a frozen copy of its own ("ref", "prev")
    coefficients: dict = field(default_factory=dict)  # {run coefficient (`COEFFICIENTS`): the parameter that is
    #                                  it}: the run's --set kl_coef=X sets kl-penalty's beta, a preference loss's beta
    kl_estimator: str = ""           # a KL term (in the loss or the reward): the parameter naming its estimator, which
    #                                  the step's logged `kl` (and an adaptive KL controller reading it) uses
    observe: Callable | None = None  # observe(state, batch, ctx, **hp) -> state after each step: a stateful
    #                                  component learns from the finished step (HAPO's sampler keeps its entropy stats)
    choices: dict = field(default_factory=dict)  # {parameter: the values it takes}, for a setting with a few named
    #                                  options (checked when the recipe is built, with the closest option on a typo)
    check: Callable | None = None    # check(**hp) raises ValueError on parameters it cannot take, for a component
    #                                  whose signature cannot say (one that passes keywords on to another)
    logs: tuple = ()                 # the Metrics it logs (`Metric`): what each measures, its healthy curve

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def reads_with(self, kw: dict) -> tuple:
        """What the component reads with parameters `kw` (a preference loss's inputs decide its fields)."""
        return tuple(self.reads(**kw)) if callable(self.reads) else self.reads

    def declares(self, metric: str) -> bool:
        """Whether `metric` is one of the metrics this component declares it logs (a placeholder name matches)."""
        return any(m.matches(metric) for m in self.logs)

    def as_dict(self) -> dict:
        return {
            "key": self.key, "kind": self.kind, "family": self.family, "title": self.title,
            "confidence": self.confidence, "summary": self.summary, "equation": self.equation,
            "defaults": {k: _jsonable(v) for k, v in self.defaults.items()},
            "reads": list(self.reads_with({})), "provides": list(self.provides), "needs": list(self.needs),
            "logs": [m.name for m in self.logs],
            "module": getattr(self.fn, "__module__", ""),
        }


_REGISTRY: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}


@functools.lru_cache(maxsize=1)
def catalog() -> dict[str, dict]:
    """Rows of data/catalog.tsv keyed by catalog key."""
    with open(data_file("catalog.tsv"), newline="") as f:
        return {row["key"]: row for row in csv.DictReader(f, delimiter="\t")}


def catalog_labels(key: str, family: str | None = None, confidence: str | None = None) -> tuple[str, str]:
    """(family, confidence) of a registration: those it gives, else its catalog row's (confidence "exact" when the
    catalog has none)."""
    row = catalog().get(key, {})
    return family or row.get("family", ""), confidence or row.get("confidence", "exact")


def keyword_defaults(fn: Callable) -> dict:
    """The keyword-only parameters with defaults: a component's hyperparameters (`ctx`, the step context the
    pipeline passes a rollout, is not one)."""
    fn = fn.init if inspect.isclass(fn) and hasattr(fn, "init") else fn
    return {
        name: p.default for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty and p.kind is inspect.Parameter.KEYWORD_ONLY and name != "ctx"
    }


def hyperparameters(fn: Callable, reads) -> dict:
    """A component's keyword defaults less the batch fields it reads (an objective gets `group` or `turn` as a
    keyword, but it is an input, not a setting)."""
    defaults = keyword_defaults(fn)
    read = set(reads(**defaults) if callable(reads) else reads)
    return {k: v for k, v in defaults.items() if k not in read}


def register(kind: str, key: str, *, title: str, summary: str, equation: str = "",
             defaults: dict | None = None, confidence: str | None = None, family: str | None = None,
             reads: tuple = (), provides: tuple = (), state: Callable | None = None,
             targets: Callable | None = None, needs: tuple = (), plan: Callable | None = None,
             whole_groups: bool = False, layout: str = "", moves: Callable | None = None, keeps: tuple = (),
             check: Callable | None = None, coefficients: dict | None = None, kl_estimator: str = "",
             logs: dict | None = None, observe: Callable | None = None, choices: dict | None = None):
    """Decorator registering `fn` under (kind, key) with what it reads, provides, keeps and needs of the task, the
    metrics it logs ({name: (measures, healthy)}, `Metric`) and (an objective) the update schedule it asks of the
    trainer (`plan`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; kinds are {KINDS}")
    if plan is not None and kind != "objective":
        raise ValueError(f"{kind} {key!r}: only an objective can declare an update plan")
    if (whole_groups and kind != "objective") or ((moves or keeps) and kind != "reference"):
        raise ValueError(f"{kind} {key!r}: whole_groups is an objective's, moves and keeps a reference's")
    if kind == "preference" and (layout or "pair") not in LAYOUTS:
        raise ValueError(f"preference {key!r}: layout {layout!r} is not one of {sorted(LAYOUTS)}")
    if observe is not None and state is None:
        raise ValueError(f"{kind} {key!r}: observe(state, batch, ctx) updates a state; declare state= too")
    bad = sorted(set(coefficients or {}) - set(COEFFICIENTS))
    if bad:
        raise ValueError(f"{kind} {key!r} declares coefficients {bad}; run coefficients are {sorted(COEFFICIENTS)}")
    declared = metrics(logs, f"{kind} {key!r}")
    unknown = sorted(set(needs) - set(NEEDS) - set(ENGINE_NEEDS))
    if unknown:
        raise ValueError(f"{kind} {key!r} needs {unknown}, which are not task or engine capabilities; known: "
                         f"{sorted(NEEDS) + sorted(ENGINE_NEEDS)}")
    family, confidence = catalog_labels(key, family, confidence)

    def wrap(fn):
        if key in _REGISTRY[kind]:
            raise ValueError(f"{kind} {key!r} is registered twice ({_REGISTRY[kind][key].fn} and {fn})")
        missing = [m for m in STATEFUL.get(kind, ()) if not callable(getattr(fn, m, None))]
        if missing:
            raise TypeError(f"{kind} {key!r} must define {list(STATEFUL[kind])}; {fn} lacks {missing}")
        _REGISTRY[kind][key] = Entry(
            key=key, kind=kind, fn=fn, title=title, summary=summary, equation=equation,
            defaults=defaults if defaults is not None else hyperparameters(fn, reads),
            family=family, confidence=confidence,
            reads=reads if callable(reads) else tuple(reads), provides=tuple(provides), state=state, targets=targets,
            needs=tuple(needs),
            plan=plan, whole_groups=whole_groups, layout=(layout or "pair") if kind == "preference" else layout,
            moves=moves, keeps=tuple(keeps), check=check, coefficients=dict(coefficients or {}),
            kl_estimator=kl_estimator, logs=declared, observe=observe, choices=dict(choices or {}),
        )
        return fn

    return wrap


def _decorator(kind: str):
    return functools.partial(register, kind)


reward = _decorator("reward")
reward_shaping = _decorator("reward_shaping")
group_transform = _decorator("group_transform")
advantage = _decorator("advantage")
token_mask = _decorator("token_mask")
objective = _decorator("objective")
loss_weight = _decorator("loss_weight")
aggregation = _decorator("aggregation")
regularizer = _decorator("regularizer")
value = _decorator("value")
kl = _decorator("kl")
rollout = _decorator("rollout")
env = _decorator("env")
sampler = _decorator("sampler")
buffer = _decorator("buffer")
controller = _decorator("controller")
schedule = _decorator("schedule")
reference = _decorator("reference")
preference = _decorator("preference")


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
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; kinds are {', '.join(KINDS)}")
    kinds = [kind] if kind else list(KINDS)
    return [e for k in kinds for e in sorted(_REGISTRY[k].values(), key=lambda e: e.key)]


def registered_keys() -> set[str]:
    return {e.key for e in entries()}


def missing_keys(registered: set[str] | None = None) -> list[str]:
    """Catalog keys with no registered component yet (`registered`: the registered keys, when the caller has them
    without importing every component, as `workbench list` does)."""
    have = registered_keys() if registered is None else registered
    return [key for key in catalog() if key not in have]


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def import_submodules(package: str) -> None:
    """Import every module of `package` (a slot's folder): a component registers itself at import, so adding a
    method adds a file and edits no list (`_load_all` does it for every slot package)."""
    path = importlib.import_module(package).__path__
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        importlib.import_module(f"{package}.{info.name}")


# The modules of `workbench` that register components: each slot package (every module in it) and two modules.
REGISTERING = ("advantages", "kl", "objectives", "ops", "preference", "regularizers", "rewards", "masks", "values",
               "weights", "transforms", "controllers", "schedules", "samplers", "buffers", "references", "rollout",
               "tasks", "envs", "recipes")


@functools.cache
def _load_all() -> None:
    """Import every module that registers components (registration happens at import): each slot package and every
    module in it. Packages do not import their own modules (importing one component imports only what it uses).
    Once per process: scanning the folders again took 8 ms a call (cProfile), a dozen times a training step."""
    for module in REGISTERING:
        package = importlib.import_module(f"workbench.{module}")
        if hasattr(package, "__path__"):
            import_submodules(package.__name__)
