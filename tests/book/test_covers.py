"""The `covers` marks read from the tests' source, and the tests listed for an entry (catalog cards, `workbench
show`)."""
from __future__ import annotations

import textwrap

from workbench import registry
from workbench.book.covers import EVERY_RECIPE_TESTS, collect_covers, entry_tests
from workbench.paths import ROOT


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


def test_recipe_cards_list_recipe_tests_and_component_cards_do_not():
    covers = {"grpo": ["tests/advantages/test_group.py::test_grpo_values", "tests/recipes/test_canonical.py::test_x"]}
    recipe, advantage = registry.get("recipe", "grpo"), registry.get("advantage", "grpo")
    assert entry_tests(advantage, covers) == ["tests/advantages/test_group.py::test_grpo_values"]
    listed = entry_tests(recipe, covers)
    assert listed[0] == "tests/recipes/test_canonical.py::test_x" and "tests/advantages" not in " ".join(listed)
    assert "tests/train/test_pipeline.py::test_every_recipe_trains_end_to_end_and_resumes_exactly[grpo]" in listed
    assert any("test_every_preference_recipe_resumes_exactly[dpo]" in t for t in entry_tests(registry.get("recipe", "dpo"), {}))
    for test_id in sum(EVERY_RECIPE_TESTS.values(), []):  # the parametrized tests the cards name exist
        path, name = test_id.split("::")
        assert f"def {name}(recipe" in (ROOT / path).read_text(), test_id
