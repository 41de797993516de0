"""The tables: the compact claims table (recipe, claim, verdict; the numbers and reasons one click away), a family's
key equations with every cell whole and every wrapped line valid LaTeX, and held-out before → after as means over
seeds."""
from __future__ import annotations

import re

import numpy as np
import pytest

from workbench import registry
from workbench.viz.tables import (PREFERENCE_BEFORE_AFTER, before_after_rows, before_after_table, claims_html,
                                  equation_lines, equations_markdown, family_entries)


# ----------------------------------------------------------------------------------------------------
# Claims


def row(verdict, **kw):
    return {"recipe": "a<b", "family": "canonical", "claim": "x & y", "comparison": "f1-countdown", "seen": "",
            "reading": "", "verdict": verdict, **kw}


def test_three_columns_with_the_verdict_as_a_badge_and_its_details_on_demand():
    text = claims_html([row("reproduced", seen="accuracy_after: 0.5 vs grpo 0.4", reading="r < s"),
                        row("not testable here: the toy task has no tags")])
    assert re.findall(r"<th>(.*?)</th>", text) == ["recipe", "claim", "verdict"]
    assert "<code>a&lt;b</code>" in text and "x &amp; y" in text  # escaped
    assert '<span class="workbench-verdict wb-reproduced">reproduced</span><details><summary>the numbers</summary>' \
           "accuracy_after: 0.5 vs grpo 0.4, in <code>f1-countdown</code>. What explains it: r &lt; s</details>" in text
    assert '<span class="workbench-verdict wb-not-testable">not testable here</span><details><summary>why</summary>' \
           "the toy task has no tags</details>" in text
    assert 'data-verdict="not-testable"' in text and "table-layout: fixed" in text


def test_no_worse_keeps_its_words_and_links_are_optional():
    text = claims_html([row("reproduced (no worse)", seen="s")],
                       links=lambda key: ("catalog.html#c", [("n.html#s", "01 › s")]))
    assert ">reproduced (no worse)</span>" in text and '<a href="catalog.html#c" title="catalog card">' in text
    assert '<small><a href="n.html#s">01 › s</a></small>' in text


# ----------------------------------------------------------------------------------------------------
# Key equations


def squeezed(equation: str) -> str:
    """An equation with what the table may add or change taken out (the wrapping array and its line breaks, the
    spaces and separators a line break replaces, | written as \vert), to check that nothing of it is lost."""
    return re.sub(r"\\begin\{array\}\{l\}|\\end\{array\}|\\\\|\\[vV]ert|\\\||\||\\ |\\quad|[\s;,]", "", equation)


# the three tables the notebooks show: F2 (notebook 10), F3 and the entropy bonus (11), F6 (12)
FAMILY_TABLES = {"surrogate": ((), {"bapo", "gbpo", "hapo", "vspo", "gui-libra", "r2vpo"}),
                 "entropy": ((("regularizer", "entropy-bonus"),),
                             {"clip_cov", "kl_cov", "epo", "dcpo", "aepo-arbitrary", "safe", "llds", "sac-temperature",
                              "hapo-temperature", "entropy-bonus"}),
                 "rewards": ((), {k for k, v in registry.catalog().items() if v.get("family") == "rewards"}
                             | {"length-bias"})}  # the 23 F6 methods of the catalog and the teaching proxy


@pytest.mark.parametrize("family", list(FAMILY_TABLES))
def test_equations_table_has_a_whole_row_per_component(family):
    extra, expected_keys = FAMILY_TABLES[family]
    entries = family_entries(family, extra)
    own = [e for e in registry.entries() if e.family == family and e.kind != "recipe"]
    assert sorted((e.kind, e.key) for e in entries) == sorted([(e.kind, e.key) for e in own] + list(extra))
    assert expected_keys <= {e.key for e in entries} and len(expected_keys) >= (24 if family == "rewards" else 6)
    text = equations_markdown(family, extra)
    lines = text.strip().splitlines()
    assert lines[0] == "| component (kind) | what it does, and its equation |" and len(lines) == 2 + len(entries)
    for e, line in zip(entries, lines[2:]):
        assert line.startswith(f"| `{e.key}`<br>({e.kind}) | ")
        cells = line.replace(r"\|", "").split("|")  # an escaped pipe does not split a cell
        assert len(cells) == 4, line  # '', key (kind), summary <br> equation, ''
        summary, _, math = cells[2].strip().partition("<br>")
        assert summary.replace(r"\*", "*").split() == e.summary.replace("|", "").split()
        assert bool(math) == bool(e.equation.strip())
        if math:
            assert math.startswith("$") and math.endswith("$") and squeezed(math[1:-1]) == squeezed(e.equation)
        for part in equation_lines(e.equation):  # a long equation wraps only where each line stays valid LaTeX
            unescaped = re.sub(r"\\[{}]", "", part)
            assert unescaped.count("{") == unescaped.count("}"), part
            assert len(re.findall(r"\\left(?![a-zA-Z])", part)) == len(re.findall(r"\\right(?![a-zA-Z])", part))
            assert part.count(r"\begin") == part.count(r"\end"), part
    assert r"\vert" in text  # F2's |A|, kl_cov's |logp - old|, ...
    assert len(equation_lines(registry.get("objective", "hapo").equation)) > 2


# ----------------------------------------------------------------------------------------------------
# Before → after


SUMMARIES = [
    {"recipe": "grpo", "seed": 0, "accuracy_before": 0.3, "accuracy_after": 0.4, "pass_k": 8, "pass@1_before": 0.3,
     "pass@1_after": 0.42, "pass@k_before": 0.75, "pass@k_after": 0.7, "entropy_before": 0.52, "entropy_after": 0.36},
    {"recipe": "grpo", "seed": 1, "accuracy_before": 0.3, "accuracy_after": 0.5, "pass_k": 8, "pass@1_before": 0.3,
     "pass@1_after": 0.44, "pass@k_before": 0.75, "pass@k_after": 0.72, "entropy_before": 0.52, "entropy_after": 0.34},
    {"recipe": "clip_cov", "seed": 0, "accuracy_before": 0.3, "accuracy_after": 0.38},
]


def test_before_after_rows_are_means_over_seeds():
    rows = before_after_rows(SUMMARIES)
    assert [r["recipe"] for r in rows] == ["grpo", "clip_cov"]
    grpo, clip = rows
    assert grpo["seeds"] == 2 and grpo["pass_k"] == 8
    assert grpo["accuracy_after"] == pytest.approx(0.45) and grpo["accuracy_after_std"] == pytest.approx(
        np.std([0.4, 0.5], ddof=1))
    assert grpo["pass@k_after"] == pytest.approx(0.71) and grpo["entropy_before"] == pytest.approx(0.52)
    assert clip["pass@1_after"] is None and clip["accuracy_after"] == pytest.approx(0.38)
    table = before_after_table(SUMMARIES).data[0]
    assert list(table.header.values[:3]) == ["recipe", "seeds", "greedy accuracy"]
    assert "pass@8" in table.header.values
    assert table.cells.values[2][0] == f"0.300 → 0.450 ± {np.std([0.4, 0.5], ddof=1):.3f}"
    assert table.cells.values[3][1] == "–"


def test_a_preference_table_shows_preference_and_task_accuracy_with_a_dash_where_missing():
    summaries = [{"recipe": "dpo", "preference_accuracy_before": 0.9, "preference_accuracy_after": 0.875,
                  "accuracy_before": 0.5, "accuracy_after": 0.25},
                 {"recipe": "kto", "preference_accuracy_before": 0.9, "preference_accuracy_after": 1.0,
                  "accuracy_before": 0.5, "accuracy_after": None}]
    cells = before_after_table(summaries, metrics=PREFERENCE_BEFORE_AFTER).data[0].cells.values
    assert list(cells[0]) == ["dpo", "kto"]
    assert list(cells[2]) == ["0.900 → 0.875", "0.900 → 1.000"] and list(cells[3]) == ["0.500 → 0.250", "–"]
