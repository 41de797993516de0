"""The tables notebooks and the book show: the "claim vs what we see" table (HTML, one function for the book's claims
page and the notebooks' claims sections), a family's key equations from the registry (Markdown with inline math, so
new methods appear by themselves) and held-out accuracy before → after training per recipe (a plotly table, mean
± std over seeds).

    from workbench.results.claims import claims_table
    from workbench.viz.tables import claims_html, equations_markdown, before_after_table
    display(HTML(claims_html(claims_table(recipes=["grpo", "dapo"]))))
"""
from __future__ import annotations

import html
import re
import statistics
from collections.abc import Callable, Mapping, Sequence

import plotly.graph_objects as go

from workbench import registry
from workbench.results.claims import VERDICT_KINDS, verdict_kind

# ----------------------------------------------------------------------------------------------------
# Claims: recipe, claim and verdict fit the text column; the numbers behind a verdict, the reference run and what
# explains it (or why a claim is not testable here) open on a click


# Scoped to the table's class, so it can sit in a notebook output as well as on a book page. Fixed layout: the
# columns share the column's width (long recipe keys wrap) instead of pushing the verdict out of sight.
CLAIMS_STYLE = """<style>
table.workbench-claims {table-layout: fixed; width: 100%; font-size: 0.85em; border-collapse: collapse; margin: 0}
table.workbench-claims th, table.workbench-claims td {vertical-align: top; overflow-wrap: anywhere; text-align: left;
  padding: 0.35em 0.45em; border-bottom: 1px solid #d9d9d9; white-space: normal}
table.workbench-claims col.wb-recipe {width: 23%} table.workbench-claims col.wb-claim {width: 47%}
table.workbench-claims col.wb-verdict {width: 30%}
.workbench-verdict {display: inline-block; font-weight: 600; padding: 0 0.35em; border-radius: 0.25em}
.wb-reproduced {background: #d8f0de; color: #14532d} .wb-contradicted {background: #fadcdc; color: #7f1d1d}
.wb-no-difference {background: #e4e7eb; color: #1f2937} .wb-not-testable {background: #fdf2c8; color: #5a4500}
.wb-not-run {background: #fde2c8; color: #6b3000}
table.workbench-claims details {margin-top: 0.2em} table.workbench-claims summary {cursor: pointer; color: #555}
</style>"""
BADGE = {slug: words for words, slug in reversed(VERDICT_KINDS.items())}  # slug -> the first words that give it


def details(row: Mapping) -> tuple[str, str]:
    """(summary, HTML) of what opens under a verdict: the numbers, the run and what explains them; or the reason."""
    said = str(row.get("verdict") or "")
    if verdict_kind(said) == "not-testable":
        return "why", html.escape(said.split(":", 1)[-1].strip())
    if not row.get("seen"):  # not run yet, no data: the verdict says what is missing
        return "why", html.escape(said)
    body = html.escape(row["seen"])
    if row.get("comparison"):
        body += f", in <code>{html.escape(row['comparison'])}</code>"
    if row.get("reading"):
        body += f". What explains it: {html.escape(row['reading'])}"
    return "the numbers", body


def verdict_html(row: Mapping) -> str:
    """The verdict as a coloured badge, then (on a click) `details`."""
    said = str(row.get("verdict") or "")
    kind = verdict_kind(said)
    badge = "reproduced (no worse)" if said.startswith("reproduced (no worse)") else BADGE[kind]
    summary, body = details(row)
    return (f'<span class="workbench-verdict wb-{kind}">{html.escape(badge)}</span>'
            f"<details><summary>{summary}</summary>{body}</details>")


def recipe_html(row: Mapping, links: Callable[[str], tuple[str, list[tuple[str, str]]]] | None) -> str:
    """The recipe's key, linked (on the book's page) to its catalog card and the notebook sections that teach it."""
    key = f"<code>{html.escape(row['recipe'])}</code>"
    if links is None:
        return key
    card, sections = links(row["recipe"])
    where = "".join(f'<br><small><a href="{html.escape(href)}">{html.escape(label)}</a></small>'
                    for href, label in sections)
    return f'<a href="{html.escape(card)}" title="catalog card">{key}</a>{where}'


def claims_html(rows: Sequence[Mapping], links=None, table_id: str = "") -> str:
    """`workbench.results.claims.claims_table` rows as one compact table (recipe, claim, verdict). `links(key)` returns
    (catalog card href, [(notebook section href, label)]) to link each recipe; rows carry `data-family` and
    `data-verdict` for the book's filters."""
    body = "".join(
        f'<tr data-family="{html.escape(str(r.get("family") or ""))}" '
        f'data-verdict="{verdict_kind(str(r.get("verdict") or ""))}"><td>{recipe_html(r, links)}</td>'
        f"<td>{html.escape(str(r['claim']))}</td><td>{verdict_html(r)}</td></tr>" for r in rows)
    ident = f' id="{table_id}"' if table_id else ""
    return (f'{CLAIMS_STYLE}<table class="workbench-claims"{ident}><colgroup><col class="wb-recipe">'
            '<col class="wb-claim"><col class="wb-verdict"></colgroup><thead><tr><th>recipe</th><th>claim</th>'
            f"<th>verdict</th></tr></thead><tbody>{body}</tbody></table>")


# ----------------------------------------------------------------------------------------------------
# Key equations, from the registry


def family_entries(family: str, extra: Sequence[tuple[str, str]] = ()) -> list:
    """Registry entries of `family` (every kind but recipes) sorted by key, the kinds of one key in registry order (a
    stable sort), then the (kind, key) entries of `extra`."""
    entries = sorted((e for e in registry.entries() if e.family == family and e.kind != "recipe"), key=lambda e: e.key)
    return entries + [registry.get(kind, key) for kind, key in extra]


def latex(equation: str) -> str:
    """An equation for inline math inside a Markdown table cell: one line, |...| as \\vert (a table row splits on
    every | before the math is read)."""
    return " ".join(equation.replace(r"\|", r"\Vert ").replace("|", r"\vert ").split())


LINE_BREAKS = (";", r"\quad", r",\ ")  # where a long equation may wrap (outside braces and environments)


def equation_lines(equation: str, width: int = 80) -> list[str]:
    """A registered equation cut into lines of about `width` characters of LaTeX, only at a top-level ";", "\\quad"
    or ",\\ " (never inside {...}, \\begin...\\end or \\left...\\right), so each line is valid LaTeX on its own."""
    text = " ".join(equation.split())
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        escaped = i > 0 and text[i - 1] == "\\"
        if re.match(r"\\(begin|left)(?![a-zA-Z])", text[i:]):
            depth += 1
        elif re.match(r"\\(end|right)(?![a-zA-Z])", text[i:]):
            depth -= 1
        elif text[i] == "{" and not escaped:
            depth += 1
        elif text[i] == "}" and not escaped:
            depth -= 1
        elif depth == 0 and not escaped:
            sep = next((s for s in LINE_BREAKS if text.startswith(s, i)), None)
            if sep is not None:
                keep = 0 if sep == r"\quad" else 1  # ";" and "," stay at the end of their line
                parts.append(text[start:i + keep].strip())
                start = i + len(sep)
                i += len(sep)
                continue
        i += 1
    parts.append(text[start:].strip())
    parts = [re.sub(r"^(\\ |\\quad|\s)+", "", part) for part in parts]  # no leading spaces on a new line
    lines: list[str] = []
    for part in filter(None, parts):
        if lines and len(lines[-1]) + len(part) + 1 <= width:
            lines[-1] = f"{lines[-1]}\\ {part}"
        else:
            lines.append(part)
    return lines


def table_text(text: str) -> str:
    """Plain text safe in a Markdown table cell: one line, | and * escaped."""
    return " ".join(text.split()).replace("|", r"\|").replace("*", r"\*")


def table_math(equation: str, width: int = 70) -> str:
    """Inline math for a table cell: the equation's `equation_lines` stacked left-aligned, | as \\vert."""
    if not equation.strip():
        return "&ndash;"
    lines = [latex(line) for line in equation_lines(equation, width)]
    body = lines[0] if len(lines) == 1 else r"\begin{array}{l} " + r" \\ ".join(lines) + r" \end{array}"
    return f"${body}$"


def equations_markdown(family: str, extra: Sequence[tuple[str, str]] = ()) -> str:
    """One Markdown table, a row per registered component of `family` (`family_entries`, with `extra`): its key over
    its kind, and its summary with its equation under it (one cell, so the summary wraps to the equation's width
    instead of being squeezed beside it, and rows stay short in the book's narrow text column). A long equation
    wraps (`table_math`); `|` becomes `\\vert` (math) or `\\|` (text), so it cannot split a table cell. Display
    it with IPython's Markdown (the notebook's cell asks myst-nb to read it as MyST, which has tables and $math$)."""
    lines = ["| component (kind) | what it does, and its equation |", "| --- | --- |"]
    for e in family_entries(family, extra):
        equation = f"<br>{table_math(e.equation)}" if e.equation.strip() else ""
        lines.append(f"| `{e.key}`<br>({e.kind}) | {table_text(e.summary)}{equation} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------
# Held-out before → after training, per recipe


BEFORE_AFTER = (("accuracy", "greedy accuracy"), ("pass@1", "pass@1"), ("pass@k", "pass@k"),
                ("entropy", "entropy (nats)"))
PREFERENCE_BEFORE_AFTER = (("preference_accuracy", "preference accuracy"), ("accuracy", "greedy accuracy"))


def before_after_rows(summaries: Sequence[Mapping], metrics: Sequence[tuple[str, str]] = BEFORE_AFTER) -> list[dict]:
    """One row per recipe (first-seen order) from run summaries (each with "recipe" and *_before / *_after keys):
    seeds, pass_k, and for each of `metrics` (default accuracy, pass@1, pass@k, entropy) the mean before, mean after
    and the std of the after values over seeds (None where the runs do not report it)."""
    recipes: dict[str, list[Mapping]] = {}
    for s in summaries:
        recipes.setdefault(s["recipe"], []).append(s)
    rows = []
    for recipe, seeds in recipes.items():
        row = {"recipe": recipe, "seeds": len(seeds), "pass_k": seeds[0].get("pass_k")}
        for key, _ in metrics:
            before = [s[f"{key}_before"] for s in seeds if s.get(f"{key}_before") is not None]
            after = [s[f"{key}_after"] for s in seeds if s.get(f"{key}_after") is not None]
            row[f"{key}_before"] = statistics.fmean(before) if before else None
            row[f"{key}_after"] = statistics.fmean(after) if after else None
            row[f"{key}_after_std"] = statistics.stdev(after) if len(after) > 1 else (0.0 if after else None)
        rows.append(row)
    return rows


def before_after_table(summaries: Sequence[Mapping], title: str | None = None,
                       metrics: Sequence[tuple[str, str]] = BEFORE_AFTER) -> go.Figure:
    """`before_after_rows` as a table: "before → after ± std over seeds" for each (key, label) of `metrics`."""
    rows = before_after_rows(summaries, metrics)

    def cell(row, key):
        if row[f"{key}_after"] is None:
            return "–"
        before = f"{row[f'{key}_before']:.3f} → " if row[f"{key}_before"] is not None else ""
        spread = f" ± {row[f'{key}_after_std']:.3f}" if row["seeds"] > 1 else ""
        return f"{before}{row[f'{key}_after']:.3f}{spread}"

    ks = {row["pass_k"] for row in rows if row["pass_k"]}
    labels = [label.replace("pass@k", f"pass@{ks.pop()}") if key == "pass@k" and len(ks) == 1 else label
              for key, label in metrics]
    cells = [[r["recipe"] for r in rows], [str(r["seeds"]) for r in rows]]
    cells += [[cell(r, key) for r in rows] for key, _ in metrics]
    fig = go.Figure(go.Table(header=dict(values=["recipe", "seeds", *labels], fill_color="#e8eef7", align="left"),
                             cells=dict(values=cells, align="left"), columnwidth=[1.6, 0.6, *[2] * len(metrics)]))
    fig.update_layout(title=title or "held-out before → after training (mean ± std over seeds)",
                      # "before → after ± std" wraps to two lines in the book's column: room for both
                      template="plotly_white", height=100 + 44 * len(rows), margin=dict(t=50, b=10, l=10, r=10))
    return fig
