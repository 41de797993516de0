"""Command line: `workbench run`, `compare`, `notebook`, `report`, `export`, `eval`, `list`."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path


def cmd_run(args) -> int:
    from workbench.train import apply_sets, make_config, train

    overrides = {"recipe": args.recipe, "task": args.task}
    if args.seed is not None:
        overrides["seed"] = args.seed
    config = apply_sets(make_config(args.preset, **overrides), args.set or [])
    out = Path(args.out or f"runs/{config.recipe}-{config.task.replace(':', '_')}-{config.preset}-s{config.seed}")
    print(f"run folder: {out}")
    summary = train(config, out, progress=not args.quiet)
    print(f"greedy accuracy on {summary['eval_size']} held-out prompts: "
          f"before {summary['accuracy_before']:.3f} -> after {summary['accuracy_after']:.3f}")
    if "report" in summary:  # rank 0 only in a data-parallel run
        print(f"report: {summary['report']}")
    return 0


def cmd_compare(args) -> int:
    from workbench.train.compare import compare

    out = Path(args.out or f"runs/compare-{args.task.replace(':', '_')}-{args.preset}")
    print(f"comparison folder: {out}")
    result = compare(args.recipes, task=args.task, preset=args.preset, seeds=args.seeds, out=out,
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
    from workbench.train.export import evaluate_model
    from workbench.files import write_atomic
    from workbench.train import apply_sets, make_config

    config = apply_sets(make_config("smoke", task=args.task, model=args.model), args.set or [])
    accuracy, records = evaluate_model(config)
    print(f"greedy accuracy of {config.model} on {len(records)} held-out prompts of {config.task}: {accuracy:.4f}")
    if args.out:
        write_atomic(args.out, "".join(json.dumps(r) + "\n" for r in records))
        print(f"records: {args.out}")
    return 0


def cmd_list(args) -> int:
    from workbench import registry

    if args.missing:
        rows = registry.catalog()
        for key in registry.missing_keys():
            print(f"{key:32s} {rows[key]['family']:11s} {rows[key]['kind']:12s} {rows[key]['title']}")
        return 0
    entries = registry.entries(args.kind)
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
        return 0
    for e in entries:
        print(f"{e.kind:15s} {e.key:28s} {e.family:10s} {e.confidence:13s} {e.summary}")
    print(f"\n{len(entries)} registered; {len(registry.missing_keys())} catalog keys not yet implemented "
          "(workbench list --missing)")
    return 0


def cmd_notebook(args) -> int:
    """Execute a notebook headless (papermill) with its run folders inside one folder; re-running resumes."""
    from workbench.book.notebooks import NOTEBOOKS_DIR, execute_notebook
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
    out = Path(args.out or Path("runs") / f"{source.stem}-{args.preset}").resolve()
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


def parser() -> argparse.ArgumentParser:
    from workbench.train.config import PRESETS

    p = argparse.ArgumentParser(prog="workbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train RECIPE on a task; writes a run folder (resumes if it exists)")
    run.add_argument("recipe", help="recipe key, e.g. grpo, dr_grpo, dapo_lite, rloo, ppo")
    run.add_argument("--task", default="countdown", help="task name (addition, countdown, reasoning_gym:<name>)")
    run.add_argument("--preset", default="smoke", choices=sorted(PRESETS))
    run.add_argument("--out", help="run folder (default runs/RECIPE-TASK-PRESET-sSEED)")
    run.add_argument("--seed", type=int)
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a config field, e.g. --set steps=20 --set recipe_overrides.kl_coef=0")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(fn=cmd_run)

    cmp = sub.add_parser("compare", help="run several recipes on the same task and seeds; one report")
    cmp.add_argument("recipes", nargs="+", help="recipe keys, e.g. grpo dr_grpo dapo rloo")
    cmp.add_argument("--task", default="countdown")
    cmp.add_argument("--preset", default="smoke", choices=sorted(PRESETS))
    cmp.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 for every recipe")
    cmp.add_argument("--out", help="folder for the runs and compare.html (default runs/compare-TASK-PRESET)")
    cmp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field for every run")
    cmp.add_argument("--target", type=float, help="sampled accuracy for 'steps to target' (default: start + 0.05)")
    cmp.add_argument("--quiet", action="store_true", help="no progress bars")
    cmp.set_defaults(fn=cmd_compare)

    nb = sub.add_parser("notebook", help="execute a notebook headless with papermill (e.g. 01_grpo --preset full); "
                                         "the executed notebook and its run folders go to one folder")
    nb.add_argument("notebook", help="a notebook name or prefix (01, 01_grpo) or a path to its .py source")
    nb.add_argument("--preset", default="smoke", choices=sorted(PRESETS))
    nb.add_argument("--out", help="folder for the executed notebook and its runs (default runs/NOTEBOOK-PRESET)")
    nb.add_argument("-p", "--param", action="append", metavar="NAME=VALUE",
                    help="a notebook parameter, e.g. -p recipe=dr_grpo -p steps=20")
    nb.set_defaults(fn=cmd_notebook)

    report = sub.add_parser("report", help="(re)write DIR/report.html from a run folder")
    report.add_argument("dir")
    report.set_defaults(fn=cmd_report)

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
    ev.add_argument("--task", default="countdown", help="task name (addition, countdown, reasoning_gym:<name>)")
    ev.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="a config field of the evaluation, e.g. --set eval_size=200 --set max_new_tokens=10")
    ev.add_argument("--out", help="also write the per-prompt records to this JSONL file")
    ev.set_defaults(fn=cmd_eval)

    lst = sub.add_parser("list", help="registered components")
    lst.add_argument("--json", action="store_true", help="machine-readable list of objects")
    lst.add_argument("--kind", help="only this kind: one per pipeline slot (reward, reward_shaping, group_transform, "
                                    "advantage, token_mask, objective, regularizer, value, rollout, env, sampler, "
                                    "buffer, controller, schedule, reference), plus aggregation, kl, preference, recipe")
    lst.add_argument("--missing", action="store_true", help="catalog keys not yet registered")
    lst.set_defaults(fn=cmd_list)
    return p


def terminate_as_interrupt(signum, frame):
    """SIGTERM (a scheduler, `kill`) ends a run as Ctrl-C does: cleanly, with the resume hint."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    from workbench.book import BookError
    from workbench.train.guards import NoGradientError, NonFiniteError
    from workbench.train.metrics import TensorBoardMissing
    from workbench.train.steps import Interrupted

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = parser().parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    previous = signal.signal(signal.SIGTERM, terminate_as_interrupt) if main_thread else None
    try:
        return args.fn(args)
    except (ValueError, KeyError, FileNotFoundError, BookError, TensorBoardMissing) as e:  # bad input: none trained
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except (NonFiniteError, NoGradientError) as e:  # the run stopped; its folder resumes from the last checkpoint
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(f"\n{e}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # before or after the step loop (SFT, evaluation)
        print("\ninterrupted before the step loop or after it; run the same command to resume", file=sys.stderr)
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
