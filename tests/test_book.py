"""The book: catalog generation (fast) and a full Jupyter Book build from executed notebooks (slow)."""
from __future__ import annotations

import re
import textwrap

import pytest

from workbench import registry
from workbench.paths import ROOT
from workbench.book import catalog_markdown, collect_covers, notebook_sources, files_and_tests, toc_yaml


def test_collect_covers(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(textwrap.dedent('''
        import pytest
        from pytest import mark

        @pytest.mark.covers("grpo", "rloo")
        def test_one(): ...

        @pytest.mark.slow
        @mark.covers("k3")
        def test_two(): ...

        @pytest.mark.covers("helper-not-a-test")
        def helper(): ...

        def test_unmarked(): ...

        @pytest.mark.covers("ppo-clip")
        class TestClip:
            pytestmark = pytest.mark.covers("dual-clip")

            @pytest.mark.covers("k1")
            def test_a(self): ...

            def test_b(self): ...
    '''))
    (tests / "test_b.py").write_text(textwrap.dedent('''
        import pytest
        pytestmark = [pytest.mark.slow, pytest.mark.covers("gae")]

        def test_x(): ...

        @pytest.mark.covers("grpo")
        async def test_y(): ...
    '''))
    (tests / "conftest.py").write_text("import pytest\npytestmark = pytest.mark.covers('nothing')\n")
    (tests / "notes.txt").write_text("@pytest.mark.covers('ignored')")

    assert collect_covers(tests) == {
        "grpo": ["tests/test_a.py::test_one", "tests/test_b.py::test_y"],
        "rloo": ["tests/test_a.py::test_one"],
        "k3": ["tests/test_a.py::test_two"],
        "ppo-clip": ["tests/test_a.py::TestClip::test_a", "tests/test_a.py::TestClip::test_b"],
        "dual-clip": ["tests/test_a.py::TestClip::test_a", "tests/test_a.py::TestClip::test_b"],
        "k1": ["tests/test_a.py::TestClip::test_a"],
        "gae": ["tests/test_b.py::test_x", "tests/test_b.py::test_y"],
    }


def test_catalog_markdown_lists_every_entry_with_its_equation(tmp_path):
    (tmp_path / "test_cov.py").write_text(
        "import pytest\n\n@pytest.mark.covers('grpo')\ndef test_g(): ...\n")
    text = catalog_markdown(tmp_path)
    for entry in registry.entries():
        assert f"### `{entry.key}`" in text, entry.key
        if entry.equation:
            assert f"$$\n{entry.equation.strip()}\n$$" in text, entry.key
    assert f":::{{dropdown}} Checked by 1 test in 1 file\n- `{tmp_path.name}/test_cov.py`: test_g\n:::" in text
    assert '<a href="notebooks/01_grpo.html#' in text  # cards link the notebook sections that teach them
    clip = registry.get("objective", "ppo-clip")  # defaults on one line of inline code, read from the code
    assert "Defaults: " + ", ".join(f"`{k}={v!r}`" for k, v in clip.defaults.items()) in text
    missing = registry.missing_keys()
    assert missing and all(f"| `{key}` |" in text for key in missing)
    assert text.count("````{card}") == text.count("\n````\n") == len(registry.entries())


def test_tests_are_listed_once_per_file():
    assert files_and_tests(["tests/a.py::test_x", "tests/b.py::T::test_y", "tests/a.py::test_z[grpo]"]) == [
        "- `tests/a.py`: test_x, test_z[grpo]", "- `tests/b.py`: T::test_y"]


def test_the_intro_suggests_an_order_through_every_notebook():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for source in notebook_sources():
        assert f"](notebooks/{source.stem}.ipynb)" in intro, f"book/intro.md does not list {source.stem}"


def test_toc_lists_notebooks_in_order():
    toc = toc_yaml(["01_grpo", "02_ppo"])
    assert toc.index("file: notebooks/01_grpo") < toc.index("file: notebooks/02_ppo") < toc.index("file: catalog")
    assert "root: intro" in toc and "Notebooks" not in toc_yaml([])


@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    html, log = built_book
    assert "build succeeded" in log and "WARNING" not in log, log[-6000:]
    catalog = (html / "catalog.html").read_text(encoding="utf-8")
    for entry in registry.entries():
        assert f'<span class="pre">{entry.key}</span></code><a class="headerlink"' in catalog, entry.key
    for key in registry.missing_keys():
        assert f'<span class="pre">{key}</span>' in catalog, key

    # math is typeset by the MathJax copy shipped in the book, not a CDN
    mathjax = html / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file() and (html / "_static" / "mathjax" / "output" / "chtml" / "fonts").is_dir()
    pages = [html / "intro.html", html / "catalog.html"]
    pages += [html / "notebooks" / f"{source.stem}.html" for source in notebook_sources()]
    assert all(page.is_file() for page in pages), pages
    for page in html.rglob("*.html"):  # Sphinx adds MathJax only to pages with math
        text = page.read_text(encoding="utf-8")
        prefix = "../" * (len(page.relative_to(html).parts) - 1)
        if 'class="math' in text or page.name == "catalog.html":
            assert f'src="{prefix}_static/mathjax/tex-chtml.js' in text, page
        assert "cdn.jsdelivr.net/npm/mathjax" not in text and "cdnjs.cloudflare.com/ajax/libs/mathjax" not in text
    for page in html.rglob("*.html"):  # offline, and light: no widget state, plotly.js served once from _static
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size < 3_000_000, (page, page.stat().st_size)
        assert not re.search(r'<script[^>]+src="https?://', text), page
        assert "require.min.js" not in text and "html-manager" not in text and "unpkg.com" not in text, page


def test_recipe_cards_list_recipe_tests_and_component_cards_do_not():
    from workbench.book import EVERY_RECIPE_TESTS, card_tests

    covers = {"grpo": ["tests/advantages/test_group.py::test_grpo_values", "tests/recipes/test_canonical.py::test_x"]}
    recipe, advantage = registry.get("recipe", "grpo"), registry.get("advantage", "grpo")
    assert card_tests(advantage, covers) == ["tests/advantages/test_group.py::test_grpo_values"]
    listed = card_tests(recipe, covers)
    assert listed[0] == "tests/recipes/test_canonical.py::test_x" and "tests/advantages" not in " ".join(listed)
    assert "tests/train/test_pipeline.py::test_every_recipe_trains_end_to_end_and_resumes_exactly[grpo]" in listed
    assert any("test_every_preference_recipe_trains[dpo]" in t for t in card_tests(registry.get("recipe", "dpo"), {}))
    for test_id in sum(EVERY_RECIPE_TESTS.values(), []):  # the parametrized tests the cards name exist
        path, name = test_id.split("::")
        assert f"def {name}(recipe" in (ROOT / path).read_text(), test_id


def test_book_check_refuses_an_impossible_window_and_a_missing_book(tmp_path, capsys):
    from workbench.book import main

    with pytest.raises(SystemExit) as exit_:
        main(["check", "--html", str(tmp_path), "--width", "0"])
    assert exit_.value.code == 2 and "--width 0" in capsys.readouterr().err
    assert main(["check", "--html", str(tmp_path / "nothing")]) == 2
    assert "no built book" in capsys.readouterr().err
