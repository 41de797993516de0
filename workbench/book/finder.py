"""The method finder page: every registered component in one table that filters in the browser (by kind, family,
confidence, "has a notebook section", "cross-checked against" the anchors' code), each row linking to its catalog
card, the notebook sections that discuss it and its source. Generated from the registry, the notebooks and the
tests' `covers` marks; the filter is a few lines of inline JavaScript, so the page works offline."""
from __future__ import annotations

import html
import re
from pathlib import Path

from workbench import registrations

ANCHOR_TESTS = "tests/anchors/"  # agreement tests with the anchors' (authors', TRL's, verl's ...) code
ANCHOR_NAMES = {"trl": "TRL", "trl_dpo": "TRL", "verl": "verl", "openrlhf": "OpenRLHF"}  # by test file
BACKTICKED = re.compile(r"`([^`\s]+)`")
QUOTED = re.compile(r"[\"']([\w.+-]+)[\"']")
HEADING = re.compile(r"^(#{2,4})\s+(.*)$")


def section_id(heading: str) -> str:
    """The anchor Sphinx gives a section (docutils' ids: "2. Dr.GRPO's fix" -> "dr-grpo-s-fix")."""
    from docutils.nodes import make_id

    return make_id(heading)


GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "theta": "θ", "lambda": "λ",
         "mu": "μ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ",
         "mathrm": "", "text": "", "mathtt": "", "mathbf": "", "operatorname": ""}  # fonts: their argument stays


def plain_math(text: str) -> str:
    """A heading's inline TeX as plain text for a link label, which MathJax does not typeset ("$\\pi_{ref}$" ->
    "π_ref")."""
    def plain(match):
        tex = re.sub(r"\\([A-Za-z]+)", lambda m: GREEK.get(m.group(1), m.group(1)), match.group(1))
        return tex.replace("{", "").replace("}", "")

    return re.sub(r"\$([^$]+)\$", plain, text)


def notebook_sections(notebooks_dir: Path, keys: set[str]) -> dict[str, list[tuple[str, str, str]]]:
    """key -> [(notebook stem, section anchor, "notebook title › section")] of the sections that name the key: in
    backticks in their text, or as a string in their code (`registry.get("kl", "k3")`, `recipe="dr_grpo"`)."""
    import jupytext

    found: dict[str, list[tuple[str, str, str]]] = {}
    for source in sorted(Path(notebooks_dir).glob("*.py")):
        heading, title = None, source.stem
        for cell in jupytext.read(source).cells:
            names = BACKTICKED if cell.cell_type == "markdown" else QUOTED
            for line in cell.source.splitlines():
                if cell.cell_type == "markdown" and line.startswith("# ") and title == source.stem:
                    title = f"{source.stem.split('_')[0]} {line[2:].strip()}"  # "01 GRPO end to end"
                    continue
                if cell.cell_type == "markdown" and (match := HEADING.match(line)):
                    heading = match.group(2).strip()
                    continue
                for key in set(names.findall(line)) & keys:
                    label = plain_math(f"{title} › {heading}" if heading else title)
                    place = (source.stem, section_id(heading) if heading else "", label)
                    if place not in found.setdefault(key, []):
                        found[key].append(place)
    return found


def section_links(places: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """[(href from the book's root, label)] of `notebook_sections` places."""
    return [(f"notebooks/{stem}.html" + (f"#{anchor}" if anchor else ""), label) for stem, anchor, label in places]


def short_label(label: str) -> str:
    """"01 GRPO end to end › 2. Rewards" -> "01 › 2. Rewards": beside a key, the notebook's number is enough."""
    return f"{label.split(' ', 1)[0]} › {label.split(' › ', 1)[-1]}" if " › " in label else label


def card_href(kind: str, key: str) -> str:
    """The catalog card of a registered component, from the book's root."""
    return f"catalog.html#{section_id(f'catalog-{kind}-{key}')}"


def anchor_names(tests: list[str]) -> list[str]:
    """The public implementations a key's anchor tests compare against ("TRL", "verl", ...)."""
    stems = {t.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py").removeprefix("test_")
             for t in tests if t.startswith(ANCHOR_TESTS)}
    return sorted({ANCHOR_NAMES.get(stem, stem) for stem in stems})


def finder_rows(entries, covers: dict[str, list[str]], sections: dict) -> list[dict]:
    sources = {(r.kind, r.key): r.source for r in registrations.read()}  # "workbench/advantages/group.py:48"
    return [{"key": e.key, "kind": e.kind, "family": e.family or "", "confidence": e.confidence or "unknown",
             "title": " ".join(e.title.split()), "card": card_href(e.kind, e.key),
             "sections": [{"href": href, "label": label} for href, label in section_links(sections.get(e.key, []))],
             "anchors": anchor_names(covers.get(e.key, [])), "source": sources.get((e.kind, e.key), "")}
            for e in entries]


def select(name: str, values) -> str:
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in sorted(set(values)))
    return f'<label>{name} <select data-filter="{name}"><option value="">all</option>{options}</select></label>'


def row_html(r: dict) -> str:
    sections = "<br>".join(f'<a href="{html.escape(s["href"])}">{html.escape(s["label"])}</a>' for s in r["sections"])
    attrs = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in (
        ("kind", r["kind"]), ("family", r["family"]), ("confidence", r["confidence"]),
        ("notebook", "yes" if r["sections"] else "no"), ("anchor", " ".join(r["anchors"]))))
    method = (f'<a href="{r["card"]}"><code>{html.escape(r["key"])}</code></a><br><small>{html.escape(r["title"])}'
              f'</small>' + (f'<br><small><code>{html.escape(r["source"])}</code></small>' if r["source"] else ""))
    return (f'<tr {attrs}><td>{method}</td><td>{r["kind"]}</td><td>{html.escape(r["family"])}</td>'
            f'<td>{r["confidence"]}</td><td><small>{sections or "&ndash;"}</small></td>'
            f'<td>{", ".join(r["anchors"]) or "&ndash;"}</td></tr>')


def filter_script(table_id: str) -> str:
    """Inline JavaScript that shows only the rows of `table_id` whose data-<name> holds every chosen value of the
    page's `[data-filter=name]` controls (a select, or a checkbox's value when checked; a row attribute may list
    several values separated by spaces), writes the count into #<table_id>-count and says so when nothing matches."""
    return f"""
<script>
(function () {{
  const table = document.getElementById("{table_id}");
  const controls = document.querySelectorAll("[data-filter]");
  const none = document.getElementById("{table_id}-none");
  function apply() {{
    let shown = 0;
    for (const row of table.tBodies[0].rows) {{
      let ok = true;
      for (const c of controls) {{
        const want = c.type === "checkbox" ? (c.checked ? c.value : "") : c.value;
        if (want && !(row.dataset[c.dataset.filter] || "").split(" ").includes(want)) ok = false;
      }}
      row.hidden = !ok;
      shown += ok;
    }}
    document.getElementById("{table_id}-count").textContent = shown;
    none.hidden = shown > 0;
  }}
  controls.forEach(c => c.addEventListener("change", apply));
  apply();
}})();
</script>
"""


def no_match(table_id: str, what: str) -> str:
    """The sentence shown instead of an empty table."""
    return (f'<p id="{table_id}-none" hidden><em>No {what} matches these filters: set one of them back to '
            f'"all".</em></p>')


def finder_markdown(entries, covers: dict[str, list[str]], notebooks_dir: Path) -> str:
    """The page (MyST Markdown with one raw HTML block)."""
    rows = finder_rows(entries, covers, notebook_sections(notebooks_dir, {e.key for e in entries}))
    anchors = sorted({name for r in rows for name in r["anchors"]})
    controls = " ".join([select("kind", [r["kind"] for r in rows]), select("family", [r["family"] for r in rows]),
                         select("confidence", [r["confidence"] for r in rows]),
                         select("anchor", anchors),
                         '<label><input type="checkbox" data-filter="notebook" value="yes"> has a notebook section'
                         '</label>'])
    widths = (30, 12, 11, 11, 22, 14)  # % of the column: method, kind, family, confidence, sections, anchors
    table = ('<table id="finder-table" class="table"><colgroup>' + "".join(f'<col style="width: {w}%">' for w in widths)
             + '</colgroup><thead><tr><th>method (paper, source)</th><th>kind</th>'
             '<th>family</th><th>confidence</th><th>notebook sections</th><th>cross-checked against</th></tr></thead>'
             '<tbody>' + "".join(row_html(r) for r in rows) + "</tbody></table>")
    return "\n".join([
        "# Method finder", "",
        f"Every registered component ({len(rows)}): filter by slot (kind), family, confidence, the public code its "
        "values are tested against, or whether a notebook discusses it. Keys link to their catalog card. Generated "
        "by `python -m workbench.book build` from the registry, the notebooks and the tests.", "",
        "```{raw} html",
        f'<div class="workbench-finder">{controls} &middot; <span id="finder-table-count">{len(rows)}</span> shown'
        '</div>', table, no_match("finder-table", "method"), filter_script("finder-table"), "```", ""])
