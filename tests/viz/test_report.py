"""HTML reports and comparisons of run folders, without a browser."""
from __future__ import annotations

import json

import pytest

from workbench.viz import write_comparison, write_report
from workbench.viz.report import read_metrics

PLOTLYJS_BANNER = "* plotly.js v"


def write_run(run_dir, rows, summary=True):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(
        {"recipe": "grpo", "task": "addition", "lr": 1e-5, "advantage_kw": {"scale": "group"}}))
    lines = [json.dumps(r) for r in rows]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 3, "rew')  # torn last line
    if summary:
        (run_dir / "summary.json").write_text(json.dumps({"accuracy_before": 0.1, "accuracy_after": 0.6}))


ROWS = [{"step": s, "reward/mean": 0.1 * s, "entropy": 1.0 - 0.1 * s, "grad_norm": 1.0} for s in range(3)]


def test_write_report(tmp_path):
    write_run(tmp_path / "run", ROWS)
    assert len(read_metrics(tmp_path / "run" / "metrics.jsonl")) == 3
    path = write_report(tmp_path / "run")
    assert path == tmp_path / "run" / "report.html"
    text = path.read_text()
    assert "plotly" in text and "grpo on addition" in text
    for name in ("reward/mean", "entropy", "grad_norm", "advantage_kw.scale"):
        assert name in text
    assert "10.0%" in text and "60.0%" in text
    assert text.count(PLOTLYJS_BANNER) == 1  # two figures, plotly.js inlined once


def test_write_report_without_summary_and_corrupt_metrics(tmp_path):
    write_run(tmp_path / "run", ROWS, summary=False)
    assert "no summary.json" in write_report(tmp_path / "run").read_text()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0}\nnot json\n{"step": 1}\n')
    with pytest.raises(ValueError, match="line 2"):
        write_report(tmp_path / "run")


def test_write_comparison(tmp_path):
    other = [{"step": s, "reward/mean": 0.2 * s} for s in range(3)]
    path = write_comparison({"grpo": ROWS, "rloo": other}, tmp_path / "cmp" / "compare.html", "grpo vs rloo")
    text = path.read_text()
    assert "grpo vs rloo" in text and "reward/mean" in text and "plotly" in text
