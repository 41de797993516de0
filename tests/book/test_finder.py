"""The method finder page: rows from the registry, notebook sections found by name, anchor cross-checks."""
from workbench import registry
from workbench.book.finder import anchor_names, finder_markdown, finder_rows, notebook_sections, section_id

NOTEBOOK = '''# %% [markdown]
# # Title
#
# ## 2. Dr.GRPO's fix
#
# `dr_grpo` drops the std.

# %%
x = registry.get("kl", "k3")

# %% [markdown]
# ## Exercises
# Nothing named here.
'''


def test_sections_are_found_by_backticked_names_and_quoted_strings_with_sphinx_anchors(tmp_path):
    (tmp_path / "02_x.py").write_text(NOTEBOOK)
    found = notebook_sections(tmp_path, {"dr_grpo", "k3", "grpo"})
    place = ("02_x", "dr-grpo-s-fix", "02 Title › 2. Dr.GRPO's fix")  # the label names its notebook
    assert found == {"dr_grpo": [place], "k3": [place]}
    assert section_id("4. Gradients: which estimator?") == "gradients-which-estimator"


def test_anchor_names_come_from_the_anchor_test_files():
    tests = ["tests/anchors/test_trl_dpo.py::test_a", "tests/anchors/test_verl.py::test_b",
             "tests/advantages/test_group.py::test_c"]
    assert anchor_names(tests) == ["TRL", "verl"]


def test_every_registered_component_has_a_row_linking_its_card_and_source(tmp_path):
    entries = registry.entries()
    rows = finder_rows(entries, {"grpo": ["tests/anchors/test_trl.py::test_x"]}, {})
    assert len(rows) == len(entries)
    grpo = next(r for r in rows if r["key"] == "grpo" and r["kind"] == "advantage")
    assert grpo["card"] == "catalog.html#catalog-advantage-grpo" and grpo["anchors"] == ["TRL"]
    assert grpo["source"].startswith("workbench/advantages/") and ":" in grpo["source"]
    dr = next(r for r in rows if r["key"] == "dr_grpo")
    assert dr["card"] == "catalog.html#catalog-recipe-dr-grpo"  # docutils ids: "_" becomes "-"
    page = finder_markdown(entries, {}, tmp_path)
    assert page.count("<tr data-kind=") == len(entries) and 'data-filter="notebook"' in page
    assert 'id="finder-table-none" hidden>' in page and "No method matches" in page  # said when nothing matches


def test_a_heading_with_math_makes_a_plain_label():
    from workbench.book.finder import plain_math

    assert plain_math(r"pushes towards $\pi_{ref}$?") == "pushes towards π_ref?"
    assert plain_math(r"$\mathrm{KL}_{k3}$ and $\beta \log x$") == "KL_k3 and β log x"
