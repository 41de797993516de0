"""`execute_notebook` (through `workbench notebook`): the executed notebook is replaced only by one that ran to the end;
a failed run keeps its partial notebook as NAME.failed.ipynb, a killed one's running copy is cleared by the next run.
Real papermill on a three-cell notebook (a few seconds a run)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from workbench import cli

SOURCE = textwrap.dedent('''\
    # %% tags=["parameters"]
    preset = "smoke"
    runs_dir = "runs"
    fail = False
    sleep = 0

    # %%
    import time
    time.sleep(sleep)
    print("ran at", preset)

    # %%
    if fail:
        raise RuntimeError("the cell raised")
    print("done")
''')


@pytest.fixture
def notebook(tmp_path):
    source = tmp_path / "tiny.py"
    source.write_text(SOURCE)
    return source


def outputs(path) -> str:
    """The text every cell of an executed notebook printed or raised."""
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(o.get("text", "")) + o.get("evalue", "") for c in cells for o in c.get("outputs", []))


def test_a_failing_rerun_keeps_the_good_notebook_and_sets_its_partial_one_aside(notebook, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["notebook", str(notebook), "--out", str(out)]) == 0
    good = (out / "tiny.ipynb").read_bytes()
    assert "done" in outputs(out / "tiny.ipynb")
    assert cli.main(["notebook", str(notebook), "--out", str(out), "-p", "fail=true"]) == 2
    err = capsys.readouterr().err
    assert "the cell raised" in err and f"partly executed notebook is {out / 'tiny.failed.ipynb'}" in err
    assert f"{out / 'tiny.ipynb'}, from an earlier run, is kept as it was" in err
    assert (out / "tiny.ipynb").read_bytes() == good
    assert "the cell raised" in outputs(out / "tiny.failed.ipynb")
    assert sorted(p.name for p in out.iterdir()) == ["tiny.failed.ipynb", "tiny.ipynb"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_rerun_leaves_the_good_notebook_and_the_next_run_clears_its_running_copy(notebook, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["notebook", str(notebook), "--out", str(out)]) == 0
    good = (out / "tiny.ipynb").read_bytes()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "notebook", str(notebook), "--out", str(out),
                             "-p", "sleep=60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        deadline = time.time() + 60
        while not list(out.glob("tiny.running-*.ipynb")) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(1.0)  # into the sleeping cell
        proc.kill()  # SIGKILL: nothing of the command runs after it
        proc.wait()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the kernel it started, if it outlived it
        except ProcessLookupError:
            pass
    assert (out / "tiny.ipynb").read_bytes() == good
    left = list(out.glob("tiny.running-*.ipynb"))
    assert len(left) == 1
    assert cli.main(["notebook", str(notebook), "--out", str(out), "-p", "sleep=0"]) == 0
    assert not left[0].exists() and sorted(p.name for p in out.iterdir()) == ["tiny.ipynb"]
    assert "sleep = 0" in (out / "tiny.ipynb").read_text()  # this run's notebook replaced the earlier one


def test_out_naming_a_file_is_refused_before_the_notebook_runs(notebook, tmp_path, capsys):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    assert cli.main(["notebook", str(notebook), "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {taken} is a file") and "nothing was run" in err
    assert taken.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "tiny.py"]
