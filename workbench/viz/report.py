"""Self-contained HTML reports of a run directory and of several runs compared.

A run directory holds `config.json`, `metrics.jsonl` (one JSON row per step) and, once the run has
finished, `summary.json`. Reports inline plotly.js once, so they open offline and can be mailed.
"""
from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import plotly.graph_objects as go

from workbench.files import write_atomic
from workbench.train.metrics import resumable_rows
from workbench.viz.run_curves import accuracy_bar, as_runs, present_keys, seed_band_curves, training_curves
from workbench.viz.style import is_number

STYLE = """
body { font-family: system-ui, -apple-system, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } .sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
td, th { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.accuracy { font-size: 1.3rem; margin: 1rem 0; }
"""


def read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_metrics(path: Path) -> list[dict]:
    """Rows of a metrics.jsonl. A torn last line (the run was killed mid-write) is dropped; a bad line
    anywhere else means the file is corrupt and raises (`workbench.train.metrics.resumable_rows`)."""
    return resumable_rows(path, warn=False)


def flatten(config: Mapping, prefix: str = "") -> dict[str, object]:
    """Nested dicts -> dotted keys, so a recipe's `advantage_kw.scale` gets its own table row."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def label(value) -> str:
    """A short name for a config entry that may be a key, or a dict carrying one (e.g. Recipe.as_dict())."""
    if isinstance(value, Mapping):
        for field in ("key", "name"):
            if field in value:
                return str(value[field])
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (str, int, bool)) or value is None:
        return str(value)
    return json.dumps(value)


def table(rows: Mapping[str, object], header: tuple[str, str] = ("key", "value")) -> str:
    body = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td{' class=num' if is_number(v) else ''}>"
        f"{html.escape(format_value(v))}</td></tr>" for k, v in rows.items())
    return f"<table><tr><th>{header[0]}</th><th>{header[1]}</th></tr>{body}</table>"


def figures_html(figures: Sequence[go.Figure]) -> str:
    """The figures as <div>s; plotly.js is inlined with the first one only."""
    return "\n".join(fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"responsive": True})
                     for i, fig in enumerate(figures))


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def accuracy_line(summary: Mapping) -> str:
    if "accuracy_before" in summary and "accuracy_after" in summary:
        before, after = float(summary["accuracy_before"]), float(summary["accuracy_after"])
        return (f"<p class=accuracy>greedy accuracy <b>{before:.1%}</b> &rarr; <b>{after:.1%}</b> "
                f"({100 * (after - before):+.1f} points)</p>")
    return "<p class=accuracy>no before/after accuracy: the run has no summary.json yet (still running or " \
           "stopped early)</p>"


def write_report(run_dir) -> Path:
    """Write `run_dir/report.html` from config.json, metrics.jsonl and summary.json (optional); return its path."""
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path} not found: is {run_dir} a run directory?")
    config = read_json(config_path)
    metrics_path = run_dir / "metrics.jsonl"
    rows = read_metrics(metrics_path) if metrics_path.exists() else []
    summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").exists() else {}

    recipe, task = label(config.get("recipe")), label(config.get("task"))
    title = f"{recipe or 'run'} on {task}" if task else (recipe or run_dir.name)
    figures = []
    if rows:
        figures.append(training_curves(rows, title="training curves"))
    if "accuracy_before" in summary and "accuracy_after" in summary:
        figures.append(accuracy_bar(summary))
    scalars = {k: v for k, v in flatten(summary).items() if is_number(v) or isinstance(v, (str, bool))}
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class=sub>{html.escape(str(run_dir))} &middot; {len(rows)} logged steps</p>",
        accuracy_line(summary),
        "<h2>last logged values</h2>" + final_values({"this run": rows}, present_keys({"run": rows})) if rows else "",
        figures_html(figures) if figures else "<p>no metrics logged yet.</p>",
        "<h2>summary</h2>" + table(scalars) if scalars else "",
        "<h2>config</h2>" + table(flatten(config)),
    ]
    out = run_dir / "report.html"
    write_atomic(out, page(title, "\n".join(body)))
    return out


def final_values(runs: Mapping[str, list[dict]], keys: Sequence[str]) -> str:
    """A table run x metric of each run's last logged value."""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = ""
    for name, rows in runs.items():
        cells = ""
        for key in keys:
            last = next((row[key] for row in reversed(rows) if is_number(row.get(key))), None)
            cells += f"<td class=num>{'' if last is None else f'{last:.4g}'}</td>"
        body += f"<tr><td>{html.escape(name)}</td><td class=num>{len(rows)}</td>{cells}</tr>"
    return f"<table><tr><th>run</th><th>rows</th>{head}</tr>{body}</table>"


def write_comparison(runs: Mapping[str, list[dict]], path, title: str = "run comparison") -> Path:
    """Write one HTML page with the runs' curves overlaid and their final values; return its path.

    runs: run name -> metric rows (as read by `read_metrics`).
    """
    runs = as_runs(runs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = present_keys(runs)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class=sub>{len(runs)} runs: {html.escape(', '.join(runs))}</p>",
        "<h2>final values</h2>" + final_values(runs, keys),
        figures_html([training_curves(runs, keys=keys)]) if keys else "<p>no metrics to plot.</p>",
    ]
    write_atomic(path, page(title, "\n".join(body)))
    return path


def seed_table(result: Mapping) -> str:
    """Recipe x (accuracy before/after mean ± std over seeds, pass@k after when reported, steps to the target
    accuracy per seed)."""
    with_pass = any("pass@k_after" in row for row in result["recipes"].values())
    head = ("<tr><th>recipe</th><th>seeds</th><th>greedy acc. before</th><th>greedy acc. after</th>"
            + ("<th>pass@k after</th>" if with_pass else "")
            + f"<th>steps to sampled acc. {result['target_accuracy']:.3g}</th></tr>")
    body = ""
    for recipe, row in result["recipes"].items():
        steps = ", ".join("never" if s is None else str(s) for s in row["steps_to_target"])
        passed = (f"<td class=num>pass@{row['pass_k']} {row['pass@k_after']:.3f} ± {row['pass@k_after_std']:.3f}</td>"
                  if "pass@k_after" in row else "<td></td>")
        body += (f"<tr><td>{html.escape(recipe)}</td><td class=num>{row['seeds']}</td>"
                 f"<td class=num>{row['accuracy_before']:.3f} ± {row['accuracy_before_std']:.3f}</td>"
                 f"<td class=num>{row['accuracy_after']:.3f} ± {row['accuracy_after_std']:.3f}</td>"
                 + (passed if with_pass else "") + f"<td>{steps}</td></tr>")
    return f"<table>{head}{body}</table>"


def write_seed_comparison(groups: Mapping[str, list[list[dict]]], result: Mapping, path) -> Path:
    """One HTML page: per recipe the mean curve over seeds with a min–max band, and the summary table.

    groups: recipe -> one list of metric rows per seed; result: what `workbench.train.compare` returns.
    """
    path = Path(path)
    title = f"{', '.join(groups)} on {result['task']} ({result['preset']})"
    body = [
        f"<h1>{html.escape(title)}</h1>",
        "<p class=sub>lines: mean over seeds; bands: min to max over seeds</p>",
        "<h2>summary</h2>" + seed_table(result),
        figures_html([seed_band_curves(groups)]),
    ]
    write_atomic(path, page(title, "\n".join(body)))
    return path
