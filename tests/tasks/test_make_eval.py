"""The shipped held-out files are exactly what `make_eval` writes."""
from __future__ import annotations

from workbench.paths import DATA_DIR
from workbench.tasks import get_task, task_names
from workbench.tasks.base import EVAL_SIZE
from workbench.tasks.make_eval import main as make_eval_main


def test_shipped_eval_files(tmp_path):
    make_eval_main(["--out", str(tmp_path)])
    files = {name: get_task(name).eval_file for name in task_names()}
    assert {name for name, file in files.items() if file is None} == {"kuhn", "plan-act", "spy", "tictactoe",
                                                                     "werewolf"}  # games: played, not held out
    for name in (name for name, file in files.items() if file):
        task = get_task(name)
        shipped = DATA_DIR / "eval" / task.eval_file
        assert (tmp_path / task.eval_file).read_bytes() == shipped.read_bytes(), name
        assert len(task.eval_set()) == EVAL_SIZE
        assert len(task.eval_set(10)) == 10
