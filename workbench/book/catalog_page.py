"""The book's catalog page: one card per registered component (kind, confidence, family, paper, summary, equation,
what it reads and provides, defaults read from the code, the notebook sections that teach it, the tests that
check it), grouped by kind and family, then the catalog keys with no implementation yet."""
from __future__ import annotations

import html
from pathlib import Path

from workbench.book.covers import TESTS_DIR, collect_covers, entry_tests, tests_by_file
from workbench.book.finder import notebook_sections, section_links, short_label
from workbench.book.notebooks import NOTEBOOKS_DIR

KIND_TITLES = {  # the registry's kinds in pipeline order (workbench/train/pipeline.py)
    "reward": "Rewards",
    "reward_shaping": "Reward shaping",
    "group_transform": "Group transforms",
    "advantage": "Advantage estimators",
    "token_mask": "Token masks",
    "objective": "Policy objectives",
    "aggregation": "Loss aggregation",
    "regularizer": "Regularizers",
    "value": "Value losses (critics)",
    "kl": "KL estimators",
    "rollout": "Rollout strategies",
    "env": "Environments",
    "sampler": "Samplers",
    "buffer": "Replay buffers",
    "controller": "Controllers",
    "schedule": "Schedules",
    "reference": "Reference builders",
    "preference": "Preference losses",
    "recipe": "Recipes",
}
CONFIDENCE_BADGE = {"exact": "success", "partial": "warning", "approximate": "warning"}


def _assignment(name: str, value) -> str:
    """`name=value` as inline code (one line of the card per parameter would make the page twice as tall)."""
    text = f"{name}={value!r}"
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def files_and_tests(tests: list[str]) -> list[str]:
    """Markdown bullets, one per test file: "`tests/x.py`: test_a, test_b" (ids keep their class and params; plain
    names, not links: light pages)."""
    return [f"- `{path}`: " + ", ".join(names) for path, names in tests_by_file(tests).items()]


def shown_defaults(entry) -> dict:
    """The defaults a card (and `workbench show`) lists: a recipe's fields less its key, title and summary, which
    are shown above them already."""
    return {k: v for k, v in entry.defaults.items()
            if not (k in ("key", "title", "summary") and v == getattr(entry, k))}


def _card(entry, tests: list[str], taught: list[tuple[str, str]] = ()) -> list[str]:
    badge = CONFIDENCE_BADGE.get(entry.confidence, "secondary")
    lines = [
        f"(catalog-{entry.kind}-{entry.key})=",
        f"### `{entry.key}`",
        "",
        "````{card}",
        f"{{bdg-primary-line}}`{entry.kind}` {{bdg-{badge}}}`{entry.confidence or 'unknown'}` "
        f"{{bdg-secondary-line}}`{entry.family or 'no family'}`",
        "",
        f"**{entry.title.strip()}**" if entry.title.strip() else "*(no paper title)*",
        "",
        " ".join(entry.summary.split()) or "*(no summary)*",
        "",
    ]
    if entry.equation.strip():
        lines += ["$$", entry.equation.strip(), "$$", ""]
    if entry.reads or entry.provides:
        reads = ", ".join(f"`{f}`" for f in entry.reads) or "nothing beyond its signature"
        lines += [f"Reads {reads}" + (f"; provides {', '.join(f'`{f}`' for f in entry.provides)}."
                                       if entry.provides else "."), ""]
    defaults = shown_defaults(entry)
    if defaults:
        lines += ["Defaults: " + ", ".join(_assignment(name, value) for name, value in defaults.items()), ""]
    if taught:  # inline HTML: the notebooks' pages are not Sphinx documents MyST can link by name with an anchor
        lines += ["Taught in: " + "; ".join(f'<a href="{html.escape(href)}">{html.escape(short_label(label))}</a>'
                                            for href, label in taught), ""]
    if tests:  # folded: the test ids are for whoever checks a card, and would make the page 250,000 px tall
        files = len({t.split("::")[0] for t in tests})
        lines += [f":::{{dropdown}} Checked by {len(tests)} test{'s' * (len(tests) > 1)} in {files} "
                  f"file{'s' * (files > 1)}", *files_and_tests(tests), ":::"]
    else:
        lines.append("Checked by: *no test marked `covers` this key yet.*")
    lines += ["````", ""]
    return lines


def catalog_markdown(tests_dir: Path = TESTS_DIR, notebooks_dir: Path = NOTEBOOKS_DIR) -> str:
    """The catalog page (MyST Markdown): one card per registered component, grouped by kind and
    family, each linking the notebook sections that teach it, then the catalog keys that have no implementation yet."""
    from workbench import registry

    entries = registry.entries()
    covers = collect_covers(tests_dir)
    sections = notebook_sections(notebooks_dir, {e.key for e in entries})
    missing = registry.missing_keys()
    rows = registry.catalog()
    lines = [
        "# Catalog",
        "",
        f"{len(entries)} registered components and {len(missing)} catalog entries not yet implemented. "
        "This page is generated by `python -m workbench.book build` from the registry "
        "(`workbench.registry`), the paper catalog (`data/catalog.tsv`) and the "
        "`@pytest.mark.covers(...)` marks in `tests/`. Defaults are read from the code. Each card links the notebook "
        "sections that teach it; its tests open on a click.",
        "",
    ]
    for kind in registry.KINDS:
        of_kind = [e for e in entries if e.kind == kind]
        if not of_kind:
            continue
        lines += [f"## {KIND_TITLES.get(kind, kind.title())}", ""]
        families = sorted({e.family for e in of_kind}, key=lambda f: (f != "canonical", f))
        for family in families:
            if len(families) > 1:
                lines += [f"**Family: {family or 'unassigned'}**", ""]
            for entry in (e for e in of_kind if e.family == family):
                lines += _card(entry, entry_tests(entry, covers), section_links(sections.get(entry.key, [])))
    lines += ["## Not yet implemented", ""]
    if missing:
        lines += [f"{len(missing)} catalog entries have no registered component yet.", "",
                  "| key | kind | family | paper |", "| --- | --- | --- | --- |"]
        for key in missing:
            row = rows.get(key, {})
            title = " ".join(row.get("title", "").split()).replace("|", "\\|")
            lines.append(f"| `{key}` | {row.get('kind', '')} | {row.get('family', '')} | {title} |")
    else:
        lines.append("Every catalog entry is implemented.")
    return "\n".join(lines) + "\n"
