"""Build the workbench book: executed notebooks + catalog, method finder and claims pages generated from the code.

    python -m workbench.book build [--executed DIR] [--out DIR]
    python -m workbench.book check [--html DIR] [--width PX]   # what a learner would trip over (book_check.py)

Steps, each printed as it runs:

1. every ``notebooks/*.py`` (percent-format Jupytext, the source of truth) is converted and executed
   headless with papermill at ``preset="smoke"`` into ``book/notebooks/<stem>.ipynb``; with
   ``--executed DIR`` the already-executed ``DIR/<stem>.ipynb`` are copied instead;
2. ``book/catalog.md`` and the method finder ``book/finder.md`` are generated from the registry, the
   notebooks and the ``@pytest.mark.covers`` marks in ``tests/**/*.py``, ``book/claims.md`` from the stored
   reference runs (``workbench.claims``); ``book/_toc.yml`` lists intro, every notebook (sorted by name),
   the finder, the claims and the catalog;
3. MathJax 3 is installed from npm into ``book/node_modules`` (once) and copied next to the book's
   static files, so that math renders offline;
4. ``jupyter-book build`` (1.x) runs with every Sphinx warning an error; the HTML lands in
   ``<out>/_build/html`` (``out`` defaults to ``book/``).

Generated files (``book/notebooks/``, ``book/catalog.md``, ``book/finder.md``, ``book/claims.md``,
``book/_toc.yml``, ``book/_vendor/``) are git-ignored: ``book/_config.yml``, ``book/intro.md``,
``book/workbench.css`` and ``book/package.json`` are the sources.
"""
from __future__ import annotations

import argparse
import ast
import html
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from workbench.book_claims import claims_markdown
from workbench.book_finder import finder_markdown, notebook_sections, section_links, short_label
from workbench.book_outputs import static_notebook
from workbench.paths import ROOT

BOOK_DIR = ROOT / "book"
NOTEBOOKS_DIR = ROOT / "notebooks"
TESTS_DIR = ROOT / "tests"
PRESET = "smoke"
KERNEL = "python3"

# Third-party JavaScript served by the book (MathJax, plotly.js) is copied into book/_vendor, which
# _config.yml adds to Sphinx's html_static_path, so it lands in <html>/_static/. Not book/_static:
# Jupyter Book 1.x adds a <script> tag to every page for each *.js under book/_static (all ~100
# MathJax files would load on every page). `mathjax_path: mathjax/tex-chtml.js` is relative to
# _static, i.e. <html>/_static/mathjax/tex-chtml.js.
VENDOR = "_vendor"
PLOTLY_JS = "plotly.min.js"          # -> <html>/_static/plotly.min.js
NPM_INSTALL = ("npm", "install", "--no-audit", "--no-fund", "--prefix")

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


class BookError(RuntimeError):
    """A build step failed; the message says which and how to reproduce it."""


def _log(msg: str) -> None:
    print(f"[book] {msg}", flush=True)


# ----------------------------------------------------------------------------------------- notebooks

def notebook_sources(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The Jupytext sources, sorted by name (the book's chapter order)."""
    return sorted(Path(notebooks_dir).glob("*.py"))


def execute_notebook(source: Path, output: Path, *, preset: str = PRESET, kernel: str = KERNEL,
                     cwd: Path | None = None, parameters: dict | None = None) -> Path:
    """Convert one percent-format notebook with jupytext and run it headless with papermill.

    The kernel runs in ``cwd`` (default: the notebook's folder) with ``parameters={"preset": preset}`` plus
    any other ``parameters`` (names of the notebook's parameters cell).
    Raises BookError naming the notebook (the partially executed notebook is kept at ``output``).
    """
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source, output = Path(source), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="workbench-nb-") as tmp:
        ipynb = Path(tmp) / f"{source.stem}.ipynb"
        nb = jupytext.read(source)
        nb.metadata.setdefault("kernelspec", {"name": kernel, "display_name": "Python 3", "language": "python"})
        jupytext.write(nb, ipynb)
        try:
            papermill.execute_notebook(
                str(ipynb), str(output), parameters={"preset": preset, **(parameters or {})}, kernel_name=kernel,
                language="python",
                cwd=str(cwd or source.parent), progress_bar=sys.stderr.isatty(), log_output=False,
                # silence ipykernel's start/stop log lines (cell errors still raise below)
                extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            )
        except PapermillExecutionError as e:
            raise BookError(
                f"notebook {source.name} failed in the cell run as In [{e.exec_count}] ({e.ename}: {e.evalue}); "
                f"the partly executed notebook is {output}"
            ) from e
        except Exception as e:  # kernel died, missing kernel, bad notebook ...
            raise BookError(f"notebook {source.name} could not be executed: {type(e).__name__}: {e}") from e
    return output


def execute_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR, out_dir: Path | None = None, *,
                      preset: str = PRESET, log: Callable[[str], None] = _log) -> list[Path]:
    """Execute every ``notebooks_dir/*.py`` into ``out_dir/<stem>.ipynb`` (one at a time)."""
    out_dir = Path(out_dir if out_dir is not None else BOOK_DIR / "notebooks")
    done = []
    sources = notebook_sources(notebooks_dir)
    for i, source in enumerate(sources, 1):
        log(f"executing {source.name} ({i}/{len(sources)}, preset={preset!r}, cwd={source.parent}) ...")
        t0 = time.perf_counter()
        done.append(execute_notebook(source, out_dir / f"{source.stem}.ipynb", preset=preset))
        log(f"  {source.name} ran in {time.perf_counter() - t0:.1f}s")
    return done


def copy_executed(sources: Iterable[Path], executed_dir: Path, out_dir: Path,
                  log: Callable[[str], None] = _log) -> list[Path]:
    """Copy ``executed_dir/<stem>.ipynb`` for every source instead of executing it."""
    done = []
    for source in sources:
        src = Path(executed_dir) / f"{Path(source).stem}.ipynb"
        if not src.is_file():
            raise BookError(f"--executed {executed_dir}: no executed notebook {src.name} for {source}")
        log(f"using executed {src}")
        out_dir.mkdir(parents=True, exist_ok=True)
        done.append(Path(shutil.copy2(src, out_dir / src.name)))
    return done


# ------------------------------------------------------------------------------------- covers marks

def _covers_keys(node: ast.AST) -> list[str]:
    """Keys of every ``pytest.mark.covers(...)`` / ``mark.covers(...)`` call inside ``node``
    (a decorator, or the value of a ``pytestmark =`` assignment, possibly a list of marks)."""
    keys = []
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "covers"):
            continue
        owner = sub.func.value
        if (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
                isinstance(owner, ast.Name) and owner.id == "mark"):
            keys += [a.value for a in sub.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return keys


def _pytestmark_keys(body: list[ast.stmt]) -> list[str]:
    keys = []
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            keys += _covers_keys(stmt.value)
        elif (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
              and stmt.target.id == "pytestmark" and stmt.value is not None):
            keys += _covers_keys(stmt.value)
    return keys


def _decorator_keys(node) -> list[str]:
    return [k for d in node.decorator_list for k in _covers_keys(d)]


def collect_covers(tests_dir: Path = TESTS_DIR) -> dict[str, list[str]]:
    """Map catalog key -> ``["tests/test_x.py::test_y", ...]`` from ``@pytest.mark.covers`` marks.

    Reads ``tests_dir/**/*.py`` with ``ast`` (nothing is imported). A mark applies to the test function
    it decorates, to every test of a class it decorates (or of a class with ``pytestmark = ...``),
    and to every test of a module with ``pytestmark = pytest.mark.covers(...)`` (or a list of marks).
    """
    tests_dir = Path(tests_dir)
    found: dict[str, list[str]] = {}

    def add(keys, test_id):
        for key in keys:
            ids = found.setdefault(key, [])
            if test_id not in ids:
                ids.append(test_id)

    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for path in sorted(tests_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        prefix = f"{tests_dir.name}/{path.relative_to(tests_dir).as_posix()}"
        module_keys = _pytestmark_keys(tree.body)
        for node in tree.body:
            if isinstance(node, funcs) and node.name.startswith("test"):
                add(module_keys + _decorator_keys(node), f"{prefix}::{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                class_keys = module_keys + _decorator_keys(node) + _pytestmark_keys(node.body)
                for item in node.body:
                    if isinstance(item, funcs) and item.name.startswith("test"):
                        add(class_keys + _decorator_keys(item), f"{prefix}::{node.name}::{item.name}")
    return found


# ------------------------------------------------------------------------------------- catalog page

RECIPE_TESTS = "tests/recipes/"  # a recipe shares its key with a component ("grpo"): these files test recipes
EVERY_RECIPE_TESTS = {  # parametrized over every recipe of a kind (tests/test_book.py checks they exist)
    "rl": ["tests/train/test_pipeline.py::test_every_recipe_trains_end_to_end_and_resumes_exactly"],
    "preference": ["tests/train/test_pipeline.py::test_every_preference_recipe_resumes_exactly"],
}


def card_tests(entry, covers: dict[str, list[str]]) -> list[str]:
    """The tests a card lists: a recipe's own (tests/recipes/ marked with its key, and the tests every recipe of
    its kind runs, as `id[key]`); a component's, never those of the recipe with the same key."""
    marked = covers.get(entry.key, [])
    if entry.kind != "recipe":
        return [t for t in marked if not t.startswith(RECIPE_TESTS)]
    kind = "preference" if entry.fn.objective.key == "preference" else "rl"  # a recipe entry holds the recipe
    every = [f"{t}[{entry.key}]" for t in EVERY_RECIPE_TESTS[kind]]
    return [t for t in marked if t.startswith(RECIPE_TESTS)] + every

def _assignment(name: str, value) -> str:
    """`name=value` as inline code (one line of the card per parameter would make the page twice as tall)."""
    text = f"{name}={value!r}"
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def files_and_tests(tests: list[str]) -> list[str]:
    """Markdown bullets, one per test file: "`tests/x.py`: test_a, test_b" (ids keep their class and params)."""
    files: dict[str, list[str]] = {}
    for test_id in tests:
        path, _, name = test_id.partition("::")
        files.setdefault(path, []).append(name)
    return [f"- `{path}`: " + ", ".join(names) for path, names in files.items()]  # plain names: light pages


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
    # recipes carry their own key/title/summary among their fields: shown above already
    defaults = {k: v for k, v in entry.defaults.items()
                if not (k in ("key", "title", "summary") and v == getattr(entry, k))}
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
                lines += _card(entry, card_tests(entry, covers), section_links(sections.get(entry.key, [])))
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


def toc_yaml(notebook_stems: Iterable[str]) -> str:
    """_toc.yml (jb-book format): intro, the notebooks in order, the method finder, the claims table, the
    catalog."""
    stems = list(notebook_stems)
    lines = ["# Generated by `python -m workbench.book build` from notebooks/*.py; do not edit.",
             "format: jb-book", "root: intro", "parts:"]
    if stems:
        lines += ["  - caption: Notebooks", "    chapters:"] + [f"      - file: notebooks/{s}" for s in stems]
    lines += ["  - caption: Reference", "    chapters:", "      - file: finder", "      - file: claims",
              "      - file: catalog"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- MathJax

def ensure_mathjax(book_dir: Path = BOOK_DIR, log: Callable[[str], None] = _log) -> Path:
    """Install MathJax 3 from npm (book/package.json) if needed; copy its es5 build where Sphinx
    serves it. Returns the copied entry script (book/_vendor/mathjax/tex-chtml.js)."""
    book_dir = Path(book_dir)
    package = book_dir / "node_modules" / "mathjax"
    if not (package / "es5" / "tex-chtml.js").is_file():
        cmd = [*NPM_INSTALL, str(book_dir)]
        log(f"installing MathJax for offline math: {' '.join(cmd)}")
        npm = shutil.which("npm")
        if npm is None:
            raise BookError(f"npm is not installed; the book serves MathJax from npm. Install Node.js/npm "
                            f"and run: {' '.join(cmd)}")
        proc = subprocess.run([npm, *cmd[1:]], capture_output=True, text=True)
        if proc.returncode != 0 or not (package / "es5" / "tex-chtml.js").is_file():
            raise BookError(f"npm could not install MathJax (exit {proc.returncode}); run it by hand: "
                            f"{' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    dest = book_dir / VENDOR / "mathjax"
    stamp = dest / ".version"
    version = (package / "package.json").read_text(encoding="utf-8")
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != version:
        log(f"copying {package / 'es5'} -> {dest}")
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(package / "es5", dest)
        stamp.write_text(version, encoding="utf-8")
    return dest / "tex-chtml.js"


def copy_stylesheet(book_dir: Path = BOOK_DIR) -> Path:
    """book/workbench.css -> book/_vendor/, where Sphinx serves it (workbench/book_sphinx.py links it)."""
    from workbench.book_sphinx import STYLESHEET

    dest = Path(book_dir) / VENDOR / STYLESHEET
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(book_dir) / STYLESHEET, dest)
    return dest


def ensure_plotly_js(book_dir: Path = BOOK_DIR) -> Path:
    """Copy the plotly.js bundled with the plotly package to book/_vendor (for workbench.book_outputs)."""
    from plotly.offline import get_plotlyjs

    dest = Path(book_dir) / VENDOR / PLOTLY_JS
    js = get_plotlyjs()
    if not dest.is_file() or dest.read_text(encoding="utf-8") != js:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(js, encoding="utf-8")
    return dest


# --------------------------------------------------------------------------------------------- build

def prepare(*, book_dir: Path = BOOK_DIR, notebooks_dir: Path = NOTEBOOKS_DIR, tests_dir: Path = TESTS_DIR,
            executed: Path | None = None, log: Callable[[str], None] = _log) -> list[str]:
    """Write the generated sources into ``book_dir``; returns the notebook stems."""
    book_dir = Path(book_dir)
    sources = notebook_sources(notebooks_dir)
    nb_dir = book_dir / "notebooks"
    shutil.rmtree(nb_dir, ignore_errors=True)  # generated: drop pages of deleted/renamed notebooks
    nb_dir.mkdir(parents=True)
    if not sources:
        log(f"no notebooks in {notebooks_dir}")
    elif executed is not None:
        copy_executed(sources, Path(executed), nb_dir, log=log)
    else:
        execute_notebooks(notebooks_dir, nb_dir, log=log)
    for ipynb in sorted(nb_dir.glob("*.ipynb")):
        counts = static_notebook(ipynb, plotly_src=f"../_static/{PLOTLY_JS}")
        log(f"{ipynb.name}: {counts['figures']} figure(s) as static HTML, {counts['widgets']} explorer(s) as "
            f"static stand-ins")
    log("writing catalog.md, finder.md, claims.md and _toc.yml")
    (book_dir / "catalog.md").write_text(catalog_markdown(tests_dir, notebooks_dir), encoding="utf-8")
    from workbench import registry

    (book_dir / "finder.md").write_text(finder_markdown(registry.entries(), collect_covers(tests_dir), notebooks_dir),
                                        encoding="utf-8")
    (book_dir / "claims.md").write_text(claims_markdown(), encoding="utf-8")  # from data/reference_runs/
    stems = [s.stem for s in sources]
    (book_dir / "_toc.yml").write_text(toc_yaml(stems), encoding="utf-8")
    ensure_mathjax(book_dir, log=log)
    ensure_plotly_js(book_dir)
    copy_stylesheet(book_dir)
    return stems


def build(*, book_dir: Path = BOOK_DIR, notebooks_dir: Path = NOTEBOOKS_DIR, tests_dir: Path = TESTS_DIR,
          executed: Path | None = None, out: Path | None = None,
          log: Callable[[str], None] = _log) -> Path:
    """Prepare the sources and run ``jupyter-book build``; any Sphinx warning fails the build.
    Returns the HTML folder (``<out>/_build/html``)."""
    book_dir = Path(book_dir).resolve()
    out = Path(out).resolve() if out is not None else book_dir
    t0 = time.perf_counter()
    prepare(book_dir=book_dir, notebooks_dir=notebooks_dir, tests_dir=tests_dir, executed=executed, log=log)
    # --all: a full rebuild each time, so warnings of unchanged pages are never skipped.
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(book_dir),
           "--path-output", str(out), "--warningiserror", "--keep-going", "--all"]
    if not Path(cmd[0]).is_file():
        cmd[0] = shutil.which("jupyter-book") or "jupyter-book"
    log(f"running {' '.join(cmd)}")
    t1 = time.perf_counter()
    proc = subprocess.run(cmd)
    html = out / "_build" / "html"
    if proc.returncode != 0:
        raise BookError(f"jupyter-book build failed (exit {proc.returncode}); Sphinx warnings are errors, "
                        "see the messages above")
    log(f"built {html / 'index.html'} in {time.perf_counter() - t0:.1f}s "
        f"(jupyter-book {time.perf_counter() - t1:.1f}s)")
    return html


def check(html: Path, width: int) -> int:
    """`python -m workbench.book check`: print every page's defects; 1 if there are any."""
    from workbench.book_check import CHECKS, check_book, report

    if not (Path(html) / "intro.html").is_file():
        print(f"[book] error: no built book at {html} (intro.html missing); build it first: make book", file=sys.stderr)
        return 2
    try:
        found = check_book(Path(html), width=width, log=_log)
    except RuntimeError as e:  # no chromium
        print(f"[book] error: {e}", file=sys.stderr)
        return 2
    if found:
        print(report(found))
        counts = {name: sum(d["check"] == name for d in found) for name in CHECKS}
        _log(f"{len(found)} defect(s): " + ", ".join(f"{n} {name}" for name, n in counts.items() if n))
        return 1
    _log(f"no defects on any page of {html}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.book", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="execute the notebooks and build the HTML book")
    b.add_argument("--executed", type=Path, metavar="DIR", help="copy already-executed <stem>.ipynb from DIR instead of running")
    b.add_argument("--out", type=Path, metavar="DIR", help="output root: HTML goes to DIR/_build/html (default: book/)")
    b.add_argument("--notebooks", type=Path, default=NOTEBOOKS_DIR, help=argparse.SUPPRESS)
    c = sub.add_parser("check", help="read the built book in headless chromium and list what a learner would trip "
                                     "over (workbench/book_check.py)")
    c.add_argument("--html", type=Path, default=BOOK_DIR / "_build" / "html",
                   help="the built book (default: %(default)s)")
    c.add_argument("--width", type=int, default=1400, help="browser window width in px (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.command == "check":
        if not 320 <= args.width <= 7680:
            parser.error(f"--width {args.width}: a browser window from 320 to 7680 px wide (the book's default is 1400)")
        return check(args.html, args.width)
    for var, value in (("OMP_NUM_THREADS", "1"), ("HF_HUB_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(var, value)  # inherited by the notebook kernels
    try:
        build(notebooks_dir=args.notebooks, executed=args.executed, out=args.out)
    except BookError as e:
        print(f"[book] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
