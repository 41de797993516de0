"""The metric glossary: each metric's logged points in its own panel, its explanation beside it, the table escaped."""
from __future__ import annotations

from workbench.viz.metric_glossary import glossary_html, metric_panels


def test_metric_panels_and_glossary_table():
    rows = [{"step": s, "reward/mean": 0.1 * s, "eval/accuracy": 0.5 if s == 2 else None} for s in range(3)]
    fig = metric_panels(rows, [("reward/mean", "what it is\nHealthy: up"), ("eval/accuracy", "greedy"),
                               ("kl", "not here")], title="t")
    assert [list(t.x) for t in fig.data] == [[0, 1, 2], [2], []]
    texts = [a.text for a in fig.layout.annotations]
    assert "<b>reward/mean</b><br>what it is<br>Healthy: up" == texts[0] and "not logged" in texts[2]
    html_table = glossary_html([("kl", "a < b", "flat", True), ("x", "y", "z", False)])
    assert "a &lt; b" in html_table and html_table.count("<tr>") == 3
