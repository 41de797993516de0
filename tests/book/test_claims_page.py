"""The book's claims page: a row per claim and unclaimed recipe, linked to card and notebook, filterable."""
import json

from workbench import registry
from workbench.book.claims_page import claims_markdown
from workbench.results.claims import CLAIMS


def test_the_page_has_a_linked_filterable_row_per_claim_and_per_unclaimed_recipe(tmp_path):
    lines = [{"meta": {"name": "f1-countdown"}}]
    lines += [{"summary": {"recipe": r, "seed": i, "accuracy_before": 0.3, "accuracy_after": a}}
              for r, xs in {"grpo": [0.4, 0.41, 0.39], "dapo": [0.6, 0.61, 0.59]}.items() for i, a in enumerate(xs)]
    (tmp_path / "f1-countdown.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "07_x.py").write_text("# %% [markdown]\n# # Compare\n#\n# ## 2. DAPO\n#\n# `dapo` clips higher.\n")
    page = claims_markdown(tmp_path, notebooks)
    recipes = {e.key for e in registry.entries("recipe")}
    assert page.count("<tr data-family=") == len(CLAIMS) + len(recipes - {c.key for c in CLAIMS})
    assert all(f"<code>{key}</code>" in page for key in recipes)  # every recipe has a row
    assert '<a href="catalog.html#catalog-recipe-dapo" title="catalog card"><code>dapo</code></a>' in page
    assert '<a href="notebooks/07_x.html#dapo">07 › 2. DAPO</a>' in page
    assert 'data-verdict="reproduced"' in page and 'data-filter="family"' in page and 'data-filter="verdict"' in page
    assert "Verdict rule" in page and 'id="claims-table-none" hidden' in page
