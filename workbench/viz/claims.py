"""The "claim vs what we see" table as a reader meets it: recipe, claim and verdict fit the text column; the numbers
behind a verdict, the stored run and what explains it (or why a claim is not testable here) open on a click.
One function for the book's claims page and the notebooks' claims sections (10, 11, 12).

    from workbench.results.claims import claims_table
    from workbench.viz.claims import claims_html
    display(HTML(claims_html(claims_table(recipes=["grpo", "dapo"]))))
"""
from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence

from workbench.results.claims import VERDICT_KINDS, verdict_kind

# Scoped to the table's class, so it can sit in a notebook output as well as on a book page. Fixed layout: the
# columns share the column's width (long recipe keys wrap) instead of pushing the verdict out of sight.
STYLE = """<style>
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
    return (f'{STYLE}<table class="workbench-claims"{ident}><colgroup><col class="wb-recipe"><col class="wb-claim">'
            f'<col class="wb-verdict"></colgroup><thead><tr><th>recipe</th><th>claim</th><th>verdict</th></tr></thead>'
            f"<tbody>{body}</tbody></table>")
