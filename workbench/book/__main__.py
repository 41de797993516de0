"""python -m workbench.book build [--executed DIR] [--out DIR] | check [--html DIR] [--width PX]

`build` executes the notebooks and builds the HTML book (`build.py`); `check` reads the built book in headless
Chromium and lists what a learner would trip over (`check.py`)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workbench.book import BookError, log
from workbench.book.build import BOOK_DIR, build
from workbench.book.notebooks import NOTEBOOKS_DIR


def check(html: Path, width: int) -> int:
    """`python -m workbench.book check`: print every page's defects; 1 if there are any."""
    from workbench.book.check import CHECKS, check_book, report

    if not (Path(html) / "intro.html").is_file():
        print(f"[book] error: no built book at {html} (intro.html missing); build it first: make book", file=sys.stderr)
        return 2
    try:
        found = check_book(Path(html), width=width, log=log)
    except RuntimeError as e:  # no chromium
        print(f"[book] error: {e}", file=sys.stderr)
        return 2
    if found:
        print(report(found))
        counts = {name: sum(d["check"] == name for d in found) for name in CHECKS}
        log(f"{len(found)} defect(s): " + ", ".join(f"{n} {name}" for name, n in counts.items() if n))
        return 1
    log(f"no defects on any page of {html}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.book", description=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="execute the notebooks and build the HTML book")
    b.add_argument("--executed", type=Path, metavar="DIR", help="copy already-executed <stem>.ipynb from DIR instead of running")
    b.add_argument("--out", type=Path, metavar="DIR", help="output root: HTML goes to DIR/_build/html (default: book/)")
    b.add_argument("--notebooks", type=Path, default=NOTEBOOKS_DIR, help=argparse.SUPPRESS)
    c = sub.add_parser("check", help="read the built book in headless chromium and list what a learner would trip "
                                     "over (workbench/book/check.py)")
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
