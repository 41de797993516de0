"""The book's catalog page: a card per registered component, with its equation, defaults, notebook sections and
tests."""
from __future__ import annotations

from workbench import registry
from workbench.book.catalog_page import catalog_markdown, files_and_tests


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
    missing = registry.missing_keys()  # none since issue 27: the whole catalog is implemented
    assert all(f"| `{key}` |" in text for key in missing)
    assert f"{len(missing)} catalog entries not yet implemented" in text
    assert text.count("````{card}") == text.count("\n````\n") == len(registry.entries())


def test_tests_are_listed_once_per_file():
    assert files_and_tests(["tests/a.py::test_x", "tests/b.py::T::test_y", "tests/a.py::test_z[grpo]"]) == [
        "- `tests/a.py`: test_x, test_z[grpo]", "- `tests/b.py`: T::test_y"]
