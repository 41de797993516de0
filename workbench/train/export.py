"""The way out of a run folder: `workbench export` and `workbench eval`.

- `export_run`: a kept checkpoint as a transformers `save_pretrained` folder (model + tokenizer), loadable by
  `AutoModelForCausalLM.from_pretrained`, vLLM or TRL. The policy is rebuilt as the trainer built it (the
  run's SFT warm start, recorded in RUN/warm_start.json, or config.model; the recipe's reference builder; LoRA)
  and the checkpoint's weights are loaded into it. A LoRA run is merged into full weights, or with
  `adapter=True` written as the PEFT adapter folder (`peft.PeftModel.from_pretrained(base, OUT)`), its base
  named in OUT/workbench_export.json and in adapter_config.json.
- `evaluate_model`: the runs' held-out greedy evaluation (`greedy_accuracy` over `task.eval_set(eval_size)`) of
  any `save_pretrained` folder, a PEFT adapter folder written by `export_run`, or "tiny".
"""
from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import torch

from workbench.files import folder_problem, remove_stale_temps, temp_sibling, write_atomic

EXPORT_FILE = "workbench_export.json"  # in an exported folder: where it came from, and the base of an adapter
# what the held-out evaluation depends on
EVAL_FIELDS = ("task_kw", "system_prompt", "answer_format", "eval_size", "max_new_tokens", "stop", "chat_template",
               "dtype", "device", "threads", "engine", "vllm_kv_cache_mb", "vllm_max_model_len")


class ExportError(ValueError):
    """A run folder that cannot be exported as asked (no such checkpoint, OUT not empty, ...)."""


def kept_steps(run: Path) -> dict[int, Path]:
    """{step: checkpoint folder} of the finished checkpoints a run keeps, oldest first."""
    from workbench.train.checkpoint import kept_checkpoints

    return {int(path.name.split("_")[-1]): path for path in kept_checkpoints(run)}


def run_config(run: Path):
    from workbench.train.config import RunConfig

    path = run / "config.json"
    if not path.exists():
        raise ExportError(f"{run} is not a run folder (no config.json)")
    try:
        return RunConfig.from_dict(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise ExportError(f"{path} is not valid JSON ({err})") from None


def check_out(out: Path) -> None:
    """OUT is new or an empty folder, and a folder can be made there (no file on its way)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty folder; nothing was written. Choose another OUT, or "
                          "delete it first")
    problem = folder_problem(out)
    if problem:
        raise ExportError(f"OUT {out} {problem}; nothing was written. Choose another OUT")


def remove_killed_exports(out: Path) -> None:
    """Delete the temporary folders (`OUT.tmp-<pid>-<n>`, model-sized) of exports into `out` whose process is gone:
    killed before their rename. Said on stderr."""
    if out.parent.is_dir():
        for path in remove_stale_temps(out.parent, of=out.name):
            print(f"note: removed {path}, the unfinished folder of an export into {out} that was killed",
                  file=sys.stderr)


def warm_start_folder(run: Path, config, task, progress: bool = True, needed: bool = True) -> Path | None:
    """The SFT folder the run started from: the one RUN/warm_start.json records while it exists, else rebuilt from
    the config (`warm_start`: the cache when the key is there, SFT again otherwise; said on stderr). None when
    the run had no SFT, or when the folder is gone and `needed` is False (a full fine-tuning checkpoint holds
    every weight: config.model gives the architecture and tokenizer)."""
    from workbench.paths import cache_dir
    from workbench.train.sft import WARM_START_FILE, warm_start, warm_start_key

    if config.sft_steps <= 0:
        return None
    record = run / WARM_START_FILE
    try:
        written = json.loads(record.read_text()) if record.exists() else {}
        recorded, key = written.get("path"), written.get("key")
    except (json.JSONDecodeError, AttributeError):
        recorded = key = None
    if recorded and (Path(recorded) / "config.json").exists():
        return Path(recorded)
    current = warm_start_key(config, task)
    if not needed:
        return cache_dir() / "sft" / current if (cache_dir() / "sft" / current / "config.json").exists() else None
    if key and key != current:
        print(f"note: the run's warm start had key {key}, its config gives {current} today (the task's data "
              "changed?): the base below is not the one the run trained on", file=sys.stderr)
    cached = cache_dir() / "sft" / current
    if (cached / "config.json").exists():
        return cached
    where = f"the warm start {recorded} recorded in {record} is gone" if recorded else f"{record} names no warm start"
    print(f"note: {where}; rebuilding it from the run's config ({config.sft_steps} SFT steps, seed {config.seed}): "
          "the same weights when run on the same kind of machine", file=sys.stderr)
    return warm_start(config, task, progress=progress)


def base_name(config, folder: Path | None) -> str | None:
    """A name `from_pretrained` loads the policy's base from: the warm start folder, config.model's folder or
    hub id; None for a model built in code (`IN_CODE_MODELS`: "tiny", "qwen-0.5b-random"), saved into OUT/base."""
    from workbench.models import BUILTIN_MODELS, IN_CODE_MODELS

    if folder is not None:
        return str(Path(folder).resolve())
    if config.model in IN_CODE_MODELS:
        return None
    if config.model in BUILTIN_MODELS:
        return str(BUILTIN_MODELS[config.model]())
    return str(Path(config.model).resolve()) if Path(config.model).exists() else config.model


def rebuild_start(run: Path, config, progress: bool = True):
    """(model, tokenizer, base) as the trainer built its policy before step 0, on the CPU, before LoRA wraps it:
    the warm start (or config.model) and, for a LoRA run, the recipe's reference builder (a full
    fine-tuning checkpoint replaces every weight, so its start only gives the architecture and tokenizer).
    `base` is a name `from_pretrained` loads the same weights from, or None when they exist only in memory (the
    "tiny" model, SALSA's soup)."""
    from workbench.models import load_model
    from workbench.tasks import run_task

    task = run_task(config)
    lora = config.lora_r > 0
    folder = warm_start_folder(run, config, task, progress, needed=lora)
    # on the CPU, all weights in the run's dtype: a 4-bit (QLoRA) base is exported in full precision
    load_kw = {**config.model_kw(), "device": "cpu", "gradient_checkpointing": False, "load_in_4bit": False}
    if lora and config.load_in_4bit:
        print("note: the run trained its adapter on a 4-bit (NF4) base; the export puts it on the full-precision "
              f"base ({config.dtype})", file=sys.stderr)
    torch.set_num_threads(config.threads)
    model, tokenizer = load_model(str(folder) if folder else config.model, **load_kw)
    base = base_name(config, folder)
    if lora:
        from workbench.train.pipeline import Pipeline
        from workbench.train.sft import StartContext
        from workbench.train.trainer import resolve_recipe

        reference = Pipeline(resolve_recipe(config), track_kl=config.track_kl).parts["reference"][0]
        if reference.use.key != "sft":  # the policy starts elsewhere than the warm start (SALSA's soup)
            model = reference.fn(model, StartContext(config, task, load_kw, progress), **reference.use.kw)
            base = None
    return model, tokenizer, base


def export_run(run: str | Path, out: str | Path, step: int | None = None, adapter: bool = False,
               progress: bool = True) -> dict:
    """Write the checkpoint of `step` (the newest kept one by default) of run folder `run` to `out` (a new or
    empty folder, filled through a temporary sibling and one rename). Returns what OUT/workbench_export.json
    records."""
    from workbench.models import add_lora, load_checkpoint_state, save_model
    from workbench.train.checkpoint import load_checkpoint

    run, out = Path(run), Path(out)
    check_out(out)
    config = run_config(run)
    remove_killed_exports(out)
    if adapter and config.lora_r <= 0:
        raise ExportError(f"--adapter writes a LoRA adapter, and {run} fine-tuned all weights (lora_r=0); export it "
                          "without --adapter")
    kept = kept_steps(run)
    if not kept:
        raise ExportError(f"{run} has no finished checkpoint yet (checkpoints/step_NNNNNN/state.pt)")
    if step is None:
        step = max(kept)
    elif step not in kept:
        raise ExportError(f"{run} keeps no checkpoint of step {step}; kept steps: "
                          f"{', '.join(map(str, sorted(kept)))} (keep_checkpoints={config.keep_checkpoints})")
    try:
        state = load_checkpoint(kept[step])
        weights = state["model"]
    except Exception as err:  # a damaged file, or one removed by the run still writing this folder
        raise ExportError(f"checkpoint {kept[step]} cannot be read ({type(err).__name__}: {str(err)[:120]}); "
                          "choose another --step") from None

    model, tokenizer, base = rebuild_start(run, config, progress=progress)
    lora = config.lora_r > 0
    record = {"run": str(run.resolve()), "step": step, "recipe": config.recipe, "task": config.task,
              "model": config.model, "lora_r": config.lora_r,
              "format": "adapter" if adapter else "merged" if lora else "full", "base": base,
              "eval": eval_command(out, config)}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out, hidden=False)  # seen in `ls` beside OUT while it is written, and cleared if killed
    try:
        if adapter and base is None:  # the base exists only in memory: it travels with the adapter, in OUT/base
            save_model(model, tokenizer, tmp / "base")
            record["base"] = str((out / "base").resolve())
        if lora:
            model = add_lora(model, r=config.lora_r, alpha=2 * config.lora_r)
        load_checkpoint_state(model, weights)
        model.eval()
        if adapter:
            config_of_adapter = model.peft_config["default"]
            config_of_adapter.base_model_name_or_path = str(tmp / "base") if base is None else base  # while saving
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            saved = json.loads((tmp / "adapter_config.json").read_text())
            saved["base_model_name_or_path"] = record["base"]  # where the base is once OUT carries its name
            write_atomic(tmp / "adapter_config.json", json.dumps(saved, indent=2, sort_keys=True))
        else:
            plain = model.merge_and_unload() if lora else model
            plain.config.use_cache = True  # gradient checkpointing's setting is not the model's
            save_model(plain, tokenizer, tmp)
        write_atomic(tmp / EXPORT_FILE, json.dumps(record, indent=2))
        check_out(out)  # something may have appeared there meanwhile
        tmp.rename(out)  # replaces an empty folder; a half-written export never carries OUT's name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def eval_command(model: Path | str, config) -> str:
    """The `workbench eval` command that repeats the run's held-out evaluation on an exported folder."""
    from workbench.train.config import make_config

    default = make_config("smoke", task=config.task)
    sets = [f"--set {shlex.quote(f'{name}={as_text(getattr(config, name))}')}" for name in EVAL_FIELDS
            if getattr(config, name) != getattr(default, name)]
    return " ".join(["workbench eval", shlex.quote(str(model)), "--task", shlex.quote(config.task), *sets])


def as_text(value) -> str:
    """A value as `--set` reads it back: strings raw, everything else JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------------- evaluation


def load_for_eval(name: str, config):
    """(model, tokenizer) of a `save_pretrained` folder, hub id or "tiny" (`load_model` with the config's
    keywords), or of a PEFT adapter folder (no config.json, an adapter_config.json naming its base)."""
    from workbench.models import check_model_name, load_model

    path = Path(name)
    if (path / "checkpoints").is_dir() or (path / "metrics.jsonl").exists():
        raise ValueError(f"{path} is a run folder, not a model folder: export it first (workbench export {path} OUT), "
                         "then evaluate OUT")
    if path.is_dir() and not (path / "config.json").exists() and (path / "adapter_config.json").exists():
        from peft import PeftModel

        base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
        if not base:
            raise FileNotFoundError(f"{path}/adapter_config.json names no base model (base_model_name_or_path)")
        model, tokenizer = load_model(base, **config.model_kw())
        return PeftModel.from_pretrained(model, path).eval(), tokenizer
    check_model_name(name, config.chat_template)  # a built-in name, a save_pretrained folder or a cached hub id
    return load_model(name, **config.model_kw())


def evaluate_model(config) -> tuple[float, list[dict]]:
    """(accuracy, records) of config.model on config.task's held-out set: the evaluation a run does before and
    after training (greedy episodes, max_new_tokens and stop from the config)."""
    from workbench.rollout import make_engine
    from workbench.tasks import run_task
    from workbench.train.evaluate import greedy_accuracy
    from workbench.train.sft import check_task_prompts, engine_limit

    torch.set_num_threads(config.threads)
    task = run_task(config)
    model, tokenizer = load_for_eval(config.model, config)
    check_task_prompts(task, model, tokenizer, config.max_new_tokens, engine_limit=engine_limit(config))
    engine = make_engine(config, model, tokenizer)
    return greedy_accuracy(engine, task, task.eval_set(config.eval_size), max_new_tokens=config.max_new_tokens,
                           stop=config.stop)
