"""Run configuration: one dataclass, presets, and `--set key=value` overrides."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields

from workbench.rollout.engine import check_stop_strings

ENGINES = ("hf", "vllm")  # rollout engines (workbench.rollout.make_engine)


@dataclass
class RunConfig:
    recipe: str = "grpo"              # registered recipe key (see `workbench list --kind recipe`)
    task: str = "countdown"           # task name, or "reasoning_gym:<dataset>"
    task_kw: dict = field(default_factory=dict)  # task constructor arguments, e.g. {"digits": 3}
    model: str = "tiny"               # "tiny" (built in code) or a local folder / hub id
    preset: str = "smoke"             # the preset these values started from
    seed: int = 0                     # seeds prompts, sampling, init and minibatch order
    steps: int = 200                  # RL steps (one rollout batch each)
    prompts_per_step: int = 16        # distinct prompts per step
    group_size: int = 8               # G: samples per prompt
    max_new_tokens: int = 10          # response budget L_max (truncated beyond)
    temperature: float = 1.0          # sampling temperature (log-probs use the same)
    top_p: float = 1.0                # nucleus sampling
    stop: list[str] = field(default_factory=list)  # stop strings: a response ends after the first (kept in its text)
    lr: float = 1e-4                  # AdamW learning rate for RL
    weight_decay: float = 0.0         # AdamW weight decay
    ppo_epochs: int = 1               # passes over each rollout batch
    minibatches: int = 2              # optimizer steps per epoch (the batch is split this many ways)
    grad_clip: float = 1.0            # max global gradient norm
    kl_coef: float | None = None      # beta; None keeps the recipe's
    entropy_coef: float | None = None  # c_H; None keeps the recipe's
    recipe_overrides: dict = field(default_factory=dict)  # per slot, e.g. {"objective": {"eps_high": 0.28}}
    pairs: int = 512                  # preference recipes: offline pairs built from the task's verifier
    data_path: str = ""               # preference recipes: a local JSONL of prompt/chosen/rejected instead
    sft_steps: int = 600              # SFT warm-start steps before RL (0 = none); cached by config hash
    sft_lr: float = 3e-3              # SFT learning rate
    sft_batch: int = 64               # SFT examples per step
    eval_size: int = 200              # held-out prompts for greedy accuracy before/after
    eval_every: int = 0               # also evaluate every k steps (0 = only before/after)
    checkpoint_every: int = 10        # save a resumable checkpoint every k steps
    keep_checkpoints: int = 2         # how many checkpoints to keep
    track_kl: bool = True             # keep a frozen reference to log KL even when the recipe has no KL term
    lora_r: int = 0                   # LoRA rank (0 = full fine-tuning)
    load_in_4bit: bool = False        # QLoRA: the frozen base in 4-bit NF4 (bitsandbytes); needs lora_r > 0
    chat_template: bool = False       # wrap prompts in the tokenizer's chat template (instruct models)
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% slower
    distributed: str = "none"         # "ddp": data parallel over the ranks `accelerate launch` / torchrun starts
    device: str = "cpu"               # "cpu" or "cuda"
    dtype: str = "float32"            # float32 | bfloat16
    threads: int = 1                  # torch CPU threads (1 when anything else runs beside)
    engine: str = "hf"                # rollout engine: "hf" (generate on the training model) or "vllm"
    vllm_kv_cache_mb: int = 128       # engine="vllm": KV-cache memory (MiB) reserved by the vLLM engine
    vllm_max_model_len: int = 256     # engine="vllm": longest prompt + response the vLLM engine accepts

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        for name in ("vllm_kv_cache_mb", "vllm_max_model_len"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        check_stop_strings(self.stop)
        if self.load_in_4bit and (self.lora_r <= 0 or self.engine == "vllm"):
            raise ValueError("load_in_4bit (QLoRA) trains through a LoRA adapter only: set lora_r > 0, and use "
                             "engine='hf' (vLLM cannot load the merged 4-bit weights)")

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
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; valid keys: {sorted(names)}")
        return RunConfig(**d)


PRESETS: dict[str, dict] = {
    # CPU, a few minutes with the tiny model.
    "smoke": {},
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
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}")
    return RunConfig.from_dict({**PRESETS[preset], "preset": preset, **overrides})


def parse_value(text: str):
    """JSON when it parses ("3", "0.1", "true", "null", "{...}"), else the raw string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_sets(config: RunConfig, assignments: list[str]) -> RunConfig:
    """Apply "key=value" strings; dotted keys reach into dict fields ("recipe_overrides.kl_coef=0")."""
    d = dataclasses.asdict(config)
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, raw = item.split("=", 1)
        head, *rest = key.strip().split(".")
        if head not in d:
            raise ValueError(f"unknown config key {head!r} in --set {item!r}; valid keys: {sorted(d)}")
        if rest and not isinstance(d[head], dict):
            raise ValueError(f"config key {head!r} is not a dict; cannot set {key!r}")
        target = d
        path = [head, *rest]
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = _coerce(config, head, parse_value(raw)) if not rest else parse_value(raw)
    return RunConfig.from_dict(d)


def _coerce(config: RunConfig, key: str, value):
    current = getattr(config, key)
    if isinstance(current, bool) or value is None:
        return value
    if isinstance(current, (int, float)) and isinstance(value, (int, float)):
        return type(current)(value)
    if isinstance(current, str) and not isinstance(value, str):
        return str(value)
    return value
