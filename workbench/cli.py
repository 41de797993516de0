"""Command line: `workbench run`, `compare`, `notebook`, `report`, `export`, `eval`, `list`, `show`.

Each command imports what it needs when it runs: `workbench --help` and `workbench list` import no torch (`list`
reads the registrations from the source, `workbench.registrations`); bench/bench_cli.py times them."""
from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
import threading
from pathlib import Path


def cmd_run(args) -> int:
    from workbench.files import check_folder_path
    from workbench.train import apply_sets, make_config, train

    overrides = {"recipe": args.recipe, "task": args.task or preset_task(args.preset)}
    if args.seed is not None:
        overrides["seed"] = args.seed
    config = apply_sets(make_config(args.preset, **overrides), args.set or [])
    out = check_folder_path(args.out or f"runs/{config.recipe}-{config.task.replace(':', '_')}-{config.preset}-"
                                        f"s{config.seed}")
    print(f"run folder: {out}")
    summary = train(config, out, progress=not args.quiet)
    what = summary.get("accuracy_is") or f"greedy accuracy on {summary['eval_size']} held-out prompts"  # a game's own
    print(f"{what}: before {summary['accuracy_before']:.3f} -> after {summary['accuracy_after']:.3f}")
    if "report" in summary:  # rank 0 only in a data-parallel run
        print(f"report: {summary['report']}")
    return 0


def cmd_compare(args) -> int:
    from workbench.files import check_folder_path
    from workbench.train.compare import compare

    task = args.task or preset_task(args.preset)
    out = check_folder_path(args.out or f"runs/compare-{task.replace(':', '_')}-{args.preset}")
    print(f"comparison folder: {out}")
    result = compare(args.recipes, task=task, preset=args.preset, seeds=args.seeds, out=out,
                     sets=args.set or [], target=args.target, progress=not args.quiet)
    print(f"{'recipe':22s} {'acc before':>12s} {'acc after':>16s}   steps to sampled acc {result['target_accuracy']}")
    for recipe, row in result["recipes"].items():
        steps = ", ".join("never" if s is None else str(s) for s in row["steps_to_target"])
        passed = (f"   pass@{row['pass_k']} {row['pass@k_after']:.3f} ± {row['pass@k_after_std']:.3f}"
                  if "pass@k_after" in row else "")
        print(f"{recipe:22s} {row['accuracy_before']:12.3f} {row['accuracy_after']:9.3f} ± "
              f"{row['accuracy_after_std']:.3f}   {steps}{passed}")
    print(f"report: {result['report']}")
    return 0


def cmd_report(args) -> int:
    from workbench.viz.report import write_report

    run_dir = Path(args.dir)
    if not (run_dir / "config.json").exists():
        print(f"error: {run_dir} is not a run folder (no config.json)", file=sys.stderr)
        return 2
    print(write_report(run_dir))
    return 0


def cmd_inspect(args) -> int:
    from workbench.train.inspection import format_inspection, inspect_run

    if args.rows < 1:
        print(f"error: --rows {args.rows}: show at least 1 entry per component (--rows 10 is the default; --json "
              "prints everything)", file=sys.stderr)
        return 2
    info = inspect_run(args.run, step=args.step)
    print(json.dumps(info, indent=1) if args.json else format_inspection(info, rows=args.rows))
    return 0


def cmd_export(args) -> int:
    from workbench.train.export import export_run

    record = export_run(args.run, args.out, step=args.step, adapter=args.adapter, progress=not args.quiet)
    what = {"full": "weights", "merged": "LoRA merged into full weights", "adapter": "PEFT adapter"}[record["format"]]
    print(f"exported step {record['step']} of {args.run} ({what}) to {args.out}")
    if record["format"] == "adapter":
        print(f"load it: peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained({record['base']!r}), "
              f"{args.out!r})")
    else:
        print(f"load it: transformers.AutoModelForCausalLM.from_pretrained({args.out!r})")
    print(f"score it: {record['eval']}")
    return 0


def cmd_eval(args) -> int:
    from workbench.files import check_new_file, write_atomic
    from workbench.train import apply_sets, make_config
    from workbench.train.export import evaluate_model

    task = args.task or preset_task("smoke")
    config = apply_sets(make_config("smoke", task=task, model=args.model), args.set or [])
    if args.out:  # before evaluating: the records are never computed only to be lost
        check_new_file(args.out)
    accuracy, records = evaluate_model(config)
    print(f"greedy accuracy of {config.model} on {len(records)} held-out prompts of {config.task}: {accuracy:.4f}")
    if args.out:
        write_atomic(args.out, "".join(json.dumps(r) + "\n" for r in records))
        print(f"records: {args.out}")
    return 0


def cmd_list(args) -> int:
    from workbench import registrations, registry

    check_kind(args.kind)
    everything = registrations.read()
    missing = registry.missing_keys({r.key for r in everything})
    if args.missing:
        rows = registry.catalog()
        for key in missing:
            print(f"{key:32s} {rows[key]['family']:11s} {rows[key]['kind']:12s} {rows[key]['title']}")
        return 0
    if args.json:  # every field of an entry (defaults, equation ...): the registry itself, with its imports
        sources = {(r.kind, r.key): r.source for r in everything}
        print(json.dumps([{**e.as_dict(), "source": sources.get((e.kind, e.key), "")}
                          for e in registry.entries(args.kind)], indent=2))
        return 0
    found = [r for r in everything if args.kind in (None, r.kind)]
    width = max((len(r.source) for r in found), default=0)
    for r in found:
        print(f"{r.kind:15s} {r.key:28s} {r.family:10s} {r.confidence:13s} {r.source:{width}s} {r.summary}")
    print(f"\n{len(found)} registered; {len(missing)} catalog keys not yet implemented (workbench list --missing)")
    return 0


def check_kind(kind: str | None) -> None:
    from workbench.registry import KINDS

    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds are {', '.join(KINDS)}")


def cmd_show(args) -> int:
    """A component's (or recipe's) card in the terminal: what the catalog page shows, and the claims about it."""
    from workbench import registrations

    check_kind(args.kind)
    everything = registrations.read()
    found = [r for r in everything if r.key == args.key and args.kind in (None, r.kind)]
    if not found:
        raise KeyError(unknown_key(args.key, args.kind, everything))
    from workbench import registry
    from workbench.book.covers import collect_covers

    covers = collect_covers()
    print("\n\n".join("\n".join(card_lines(registry.get(r.kind, r.key), r.source, covers)) for r in found))
    return 0


def unknown_key(key: str, kind: str | None, everything) -> str:
    """The error for a key `show` does not find (of `kind`, if given): the kinds that have it, or close keys."""
    kinds = sorted({r.kind for r in everything if r.key == key})
    if kinds:
        return f"no {kind} named {key!r}; {key!r} is registered as: {', '.join(kinds)}"
    close = difflib.get_close_matches(key, sorted({r.key for r in everything}), n=5, cutoff=0.6)
    return (f"no {kind or 'component or recipe'} named {key!r}; "
            + (f"close matches: {', '.join(close)}" if close else "nothing close")
            + " (workbench list shows every key)")


def card_lines(entry, source: str, covers: dict[str, list[str]]) -> list[str]:
    """What `workbench show` prints of one entry: the catalog card's fields, the recipes using a component (or a
    recipe's components), the tests marked as covering it and, for a recipe, its claim rows."""
    from workbench import registry
    from workbench.book.catalog_page import shown_defaults
    from workbench.book.covers import entry_tests, tests_by_file

    lines = [f"{entry.kind} {entry.key}: {' '.join(entry.title.split())}",
             f"  family {entry.family or '-'}, confidence {entry.confidence or '-'}, source {source}",
             f"  summary     {' '.join(entry.summary.split())}"]
    if entry.equation.strip():
        lines.append(f"  equation    {' '.join(entry.equation.split())}")
    defaults = shown_defaults(entry)
    lines.append("  defaults    " + (", ".join(f"{k}={v!r}" for k, v in defaults.items()) or "none"))
    if entry.kind == "recipe":
        lines.append("  components  " + ", ".join(f"{kind} {key}" for kind, key in entry.fn.components()))
    else:
        reads, provides = ", ".join(entry.reads_with({})) or "-", ", ".join(entry.provides) or "-"
        lines.append(f"  reads       {reads}; provides {provides}")
        users = [e.key for e in registry.entries("recipe") if (entry.kind, entry.key) in e.fn.components()]
        lines.append(f"  recipes     {', '.join(users) or 'none'}" + (f" ({len(users)})" if users else ""))
    tests = entry_tests(entry, covers)
    files = tests_by_file(tests)
    lines.append(f"  tests       {len(tests)} in {len(files)} file(s), from the tests' @pytest.mark.covers marks")
    lines += [f"    {path}: {', '.join(names)}" for path, names in files.items()]
    if entry.kind == "recipe":
        lines += claim_lines(entry.key)
    return lines


def claim_lines(recipe: str) -> list[str]:
    """The recipe's rows of the claims table (workbench.results.claims): each claim and its verdict."""
    from workbench.results.claims import claims_table

    lines = []
    for row in claims_table(recipes=[recipe]):
        lines += [f"  claim       {row['claim']}",
                  f"    verdict   {row['verdict']}" + (f" ({row['comparison']})" if row["comparison"] else "")]
        lines += [f"    seen      {row['seen']}"] if row["seen"] else []
    return lines


def cmd_notebook(args) -> int:
    """Execute a notebook headless (papermill) with its run folders inside one folder; re-running resumes."""
    from workbench.book.notebooks import NOTEBOOKS_DIR, execute_notebook
    from workbench.files import check_folder_path
    from workbench.train.config import parse_value

    source = Path(args.notebook)
    if not source.suffix:
        matches = sorted(NOTEBOOKS_DIR.glob(f"{args.notebook}*.py"))
        if len(matches) != 1:
            names = ", ".join(p.stem for p in sorted(NOTEBOOKS_DIR.glob("*.py")))
            raise ValueError(f"notebook {args.notebook!r} names {len(matches)} notebooks; choose one of {names}")
        source = matches[0]
    if not source.is_file():
        raise FileNotFoundError(f"no notebook {source}")
    out = check_folder_path(Path(args.out or Path("runs") / f"{source.stem}-{args.preset}").resolve())
    params = {"runs_dir": str(out)}
    for item in args.param or []:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"-p expects name=value, got {item!r}")
        params[key.strip()] = parse_value(raw)
    executed = execute_notebook(source, out / f"{source.stem}.ipynb", preset=args.preset, parameters=params)
    print(f"executed notebook: {executed}")
    for summary in sorted(out.glob("**/summary.json")):
        print(f"run folder: {summary.parent}")
    return 0


def preset(name: str) -> str:
    """A --preset value: a key of PRESETS (workbench/train/config.py), imported only when a command that trains is
    parsed (`--help` imports no trainer)."""
    from workbench.train.config import PRESETS

    if name not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return name


def preset_task(name: str) -> str:
    """The task a preset trains on when --task is not given (countdown on smoke, 1-digit products on small)."""
    from workbench.train.config import make_config

    return make_config(name).task


TASK_HELP = "task name (addition, countdown, reasoning_gym:<name>, ...); default: the preset's (countdown on smoke)"
PRESET_HELP = ("smoke (the default: CPU, minutes), small (SmolLM2 on CPU) or another preset of "
               "workbench/train/config.py's PRESETS")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train RECIPE on a task; writes a run folder (resumes if it exists)")
    run.add_argument("recipe", help="recipe key, e.g. grpo, dr_grpo, dapo_lite, rloo, ppo")
    run.add_argument("--task", help=TASK_HELP)
    run.add_argument("--preset", default="smoke", type=preset, help=PRESET_HELP)
    run.add_argument("--out", help="run folder (default runs/RECIPE-TASK-PRESET-sSEED)")
    run.add_argument("--seed", type=int)
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a config field, e.g. --set steps=20 --set kl_coef=0")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(fn=cmd_run)

    cmp = sub.add_parser("compare", help="run several recipes on the same task and seeds; one report")
    cmp.add_argument("recipes", nargs="+", help="recipe keys, e.g. grpo dr_grpo dapo rloo")
    cmp.add_argument("--task", help=TASK_HELP)
    cmp.add_argument("--preset", default="smoke", type=preset, help=PRESET_HELP)
    cmp.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 for every recipe")
    cmp.add_argument("--out", help="folder for the runs and compare.html (default runs/compare-TASK-PRESET)")
    cmp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field for every run")
    cmp.add_argument("--target", type=float, help="sampled accuracy for 'steps to target' (default: start + 0.05)")
    cmp.add_argument("--quiet", action="store_true", help="no progress bars")
    cmp.set_defaults(fn=cmd_compare)

    nb = sub.add_parser("notebook", help="execute a notebook headless with papermill (e.g. 01_grpo --preset full); "
                                         "the executed notebook and its run folders go to one folder")
    nb.add_argument("notebook", help="a notebook name or prefix (01, 01_grpo) or a path to its .py source")
    nb.add_argument("--preset", default="smoke", type=preset, help=PRESET_HELP)
    nb.add_argument("--out", help="folder for the executed notebook and its runs (default runs/NOTEBOOK-PRESET)")
    nb.add_argument("-p", "--param", action="append", metavar="NAME=VALUE",
                    help="a notebook parameter, e.g. -p recipe=dr_grpo -p steps=20")
    nb.set_defaults(fn=cmd_notebook)

    report = sub.add_parser("report", help="(re)write DIR/report.html from a run folder")
    report.add_argument("dir")
    report.set_defaults(fn=cmd_report)

    insp = sub.add_parser("inspect", help="what a run's replay buffers and prompt samplers hold at a kept checkpoint: "
                                          "buffer entries (age, reward, prompt), pass rates per prompt, choices")
    insp.add_argument("run", help="run folder")
    insp.add_argument("--step", type=int, help="a kept checkpoint's step (default: the newest)")
    insp.add_argument("--rows", type=int, default=10, help="entries, prompts and steps shown per component")
    insp.add_argument("--json", action="store_true", help="everything, as JSON")
    insp.set_defaults(fn=cmd_inspect)

    export = sub.add_parser("export", help="write a run's checkpoint as a transformers save_pretrained folder (model "
                                           "+ tokenizer; LoRA merged), or with --adapter a PEFT adapter folder")
    export.add_argument("run", help="run folder")
    export.add_argument("out", help="new (or empty) folder to write")
    export.add_argument("--step", type=int, help="a kept checkpoint's step (default: the newest)")
    export.add_argument("--adapter", action="store_true",
                        help="LoRA runs: the adapter alone (peft.PeftModel.from_pretrained(base, OUT)), not merged")
    export.add_argument("--quiet", action="store_true", help="no progress bars (an SFT warm start rebuilt)")
    export.set_defaults(fn=cmd_export)

    ev = sub.add_parser("eval", help="greedy accuracy of a model folder (or 'tiny') on a task's held-out set, "
                                     "the evaluation runs do before and after training")
    ev.add_argument("model", help="a save_pretrained folder (e.g. from workbench export), a PEFT adapter folder "
                                  "from export --adapter, a hub id, or tiny")
    ev.add_argument("--task", help="task name (addition, countdown, reasoning_gym:<name>, ...); default: countdown")
    ev.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="a config field of the evaluation, e.g. --set eval_size=200 --set max_new_tokens=10")
    ev.add_argument("--out", help="also write the per-prompt records to this JSONL file")
    ev.set_defaults(fn=cmd_eval)

    lst = sub.add_parser("list", help="registered components and recipes, each with the file and line registering it")
    lst.add_argument("--json", action="store_true", help="machine-readable list of objects (every field; slower: "
                                                          "imports every component)")
    lst.add_argument("--kind", help="only this kind: one per pipeline slot (reward, reward_shaping, group_transform, "
                                    "advantage, token_mask, objective, regularizer, value, rollout, env, sampler, "
                                    "buffer, controller, schedule, reference), plus aggregation, kl, preference, recipe")
    lst.add_argument("--missing", action="store_true", help="catalog keys not yet registered")
    lst.set_defaults(fn=cmd_list)

    show = sub.add_parser("show", help="a component's or recipe's equation, summary, defaults, reads and provides, "
                                       "source, the recipes using it, the tests covering it and its claims")
    show.add_argument("key", help="a registered key, e.g. grpo, k3, ppo-clip, dr_grpo")
    show.add_argument("--kind", help="only the entry of this kind (grpo is an advantage and a recipe)")
    show.set_defaults(fn=cmd_show)
    return p


def terminate_as_interrupt(signum, frame):
    """SIGTERM (a scheduler, `kill`) ends a run as Ctrl-C does: cleanly, with the resume hint."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


# Errors a command reports in one line instead of a traceback: (module, class, exit status), the first match wins.
# Bad input (2) trains nothing; a stopped run (1) resumes from its last checkpoint, as after any other OS error (a
# full disk). A class is looked up only if the command imported its module (`raised`): parsing the command line
# imports no trainer, and an error can only come from a module it ran.
REPORTED = (("builtins", "ValueError", 2), ("builtins", "KeyError", 2), ("builtins", "FileNotFoundError", 2),
            ("builtins", "FileExistsError", 2), ("builtins", "IsADirectoryError", 2),
            ("builtins", "NotADirectoryError", 2), ("builtins", "PermissionError", 2),
            ("workbench.book", "BookError", 2), ("workbench.train.metrics", "TensorBoardMissing", 2),
            ("workbench.train.guards", "NonFiniteError", 1), ("workbench.train.guards", "NoGradientError", 1),
            ("builtins", "OSError", 1))


def raised(error: BaseException, module: str, name: str) -> bool:
    return module in sys.modules and isinstance(error, getattr(sys.modules[module], name))


def error_message(error: BaseException, status: int) -> str:
    """What `main` prints of a reported error: an OS error in words with its path ("No such file or directory:
    runs/x.jsonl", never its bare errno); bad input's message (a KeyError's without the quotes str() adds)."""
    if isinstance(error, OSError) and error.strerror:
        paths = " -> ".join(str(p) for p in (error.filename, error.filename2) if p is not None)
        return f"{error.strerror}: {paths}" if paths else error.strerror
    return str(error.args[0] if status == 2 and error.args else error)


def exit_status(error: BaseException) -> int | None:
    """The status `main` returns for `error` after printing it, or None for an error it does not report (a bug)."""
    status = next((status for module, name, status in REPORTED if raised(error, module, name)), None)
    if status is not None:
        print(f"error: {error_message(error, status)}", file=sys.stderr)
    elif raised(error, "workbench.train.steps", "Interrupted"):
        print(f"\n{error}", file=sys.stderr)
        status = 130
    elif isinstance(error, KeyboardInterrupt):  # before or after the step loop (SFT, evaluation)
        print("\ninterrupted before the step loop or after it; run the same command to resume", file=sys.stderr)
        status = 130
    return status


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = parser().parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    previous = signal.signal(signal.SIGTERM, terminate_as_interrupt) if main_thread else None
    try:
        return args.fn(args)
    except BaseException as error:
        status = exit_status(error)
        if status is None:
            raise
        return status
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
