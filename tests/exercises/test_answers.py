"""`check_answers` prints one verdict per exercise; every notebook's exercises start unsolved and its solutions
pass."""
from __future__ import annotations

import pytest

from workbench.paths import ROOT


FAMILY_NOTEBOOKS = ("01_grpo", "02_loss_aggregation", "03_kl_estimators", "04_clipping_zoo",
                    "05_advantage_estimators", "08_preference", "11_entropy",
                    "10_beyond_the_clip", "12_reward_design", "13_credit_assignment",
                    "14_rollouts_and_guidance", "15_data_and_replay", "16_many_agents")  # three exercises or more


def exercise_cells(stem: str) -> tuple[str, str]:
    """(parameters cell, answers + folded solutions + check cell) of a notebook, as its source code."""
    import jupytext

    cells = [c for c in jupytext.read(ROOT / "notebooks" / f"{stem}.py").cells if c.cell_type == "code"]
    tagged = {tag: i for i, c in enumerate(cells) for tag in c.metadata.get("tags", [])}
    solved = tagged["hide-input"]  # the answers cell comes just before it, the check cell just after
    return cells[tagged["parameters"]].source, "\n".join(c.source for c in cells[solved - 1:solved + 2])


@pytest.mark.parametrize("stem", FAMILY_NOTEBOOKS + ("06_metric_glossary", "07_compare"))
def test_notebook_exercises_start_unsolved_and_their_solutions_pass(stem, capsys):
    from workbench.recipes import get_recipe

    params, exercise = exercise_cells(stem)
    assert "solutions = False" in params
    for solutions, verdict in ((False, "no answer yet"), (True, "correct")):
        namespace = {"get_recipe": get_recipe}  # the one notebook import a solution uses (07)
        exec(params, namespace)
        exec(exercise, {**namespace, "solutions": solutions})
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) >= (3 if stem in FAMILY_NOTEBOOKS else 1), lines
        assert [line.split(":")[0] for line in lines] == [f"exercise {n}" for n in range(1, len(lines) + 1)]
        assert all(line.split(": ", 1)[1].startswith(verdict) for line in lines), lines
