"""The book's "claim vs what we see" page: every recipe's claim and verdict in one compact table (the numbers and
reasons open on a click, `workbench.viz.tables`), filterable by family and verdict, each recipe linked to its catalog
card and to the notebook sections that teach it. Generated from `workbench.results.claims` and the stored runs."""
from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from workbench.book.finder import (card_href, filter_script, no_match, notebook_sections, section_links, select,
                                   short_label)
from workbench.results.claims import VERDICT_RULE, claims_table, verdict_kind
from workbench.paths import ROOT
from workbench.viz.tables import BADGE, claims_html

SECTIONS_SHOWN = 1  # notebook sections linked under a recipe (the first, in the book's order)
NOTEBOOKS = ("07", "08", "10", "11", "12")  # the notebooks that plot the stored runs


def claims_markdown(data_dir=None, notebooks_dir: Path = ROOT / "notebooks") -> str:
    """The page (MyST Markdown with one raw HTML block)."""
    rows = claims_table(data_dir)
    sections = notebook_sections(notebooks_dir, {r["recipe"] for r in rows})

    def links(key: str):
        places = [(href, short_label(label)) for href, label in section_links(sections.get(key, []))]
        return card_href("recipe", key), places[:SECTIONS_SHOWN]

    kinds = Counter(verdict_kind(r["verdict"]) for r in rows)
    tally = ", ".join(f"{n} {BADGE[kind]}" for kind, n in kinds.most_common())
    verdicts = ('<label>verdict <select data-filter="verdict"><option value="">all</option>'
                + "".join(f'<option value="{kind}">{html.escape(BADGE[kind])}</option>' for kind in kinds)
                + "</select></label>")
    controls = f'{select("family", [r["family"] for r in rows])} {verdicts}'
    return "\n".join([
        "# Claim vs what we see", "",
        "Each method's central claim as we read its paper, and the verdict of our stored runs on a 0.5M-parameter "
        "model at toy scale over seeds (`make stored-runs`; plotted in notebooks "
        f"{', '.join(NOTEBOOKS[:-1])} and {NOTEBOOKS[-1]}; `f1-more`, `f7-more` and `f4-gridworld` are read here only, "
        "their tables are in the README). Open a verdict for the numbers behind it, the stored "
        "run and what explains it, or for why a claim cannot be tested here. A verdict is about this setting only: a "
        "claim made at 7B parameters and thousands of steps is not refuted by a tiny model on countdown, and not "
        "confirmed by it either.", "",
        VERDICT_RULE, "",
        f"{len(rows)} claims: {tally}.", "",
        "```{raw} html",
        f'<div class="workbench-finder">{controls} &middot; <span id="claims-table-count">{len(rows)}</span> shown'
        "</div>",
        claims_html(rows, links=links, table_id="claims-table"), no_match("claims-table", "claim"),
        filter_script("claims-table"), "```", ""])
