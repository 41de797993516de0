"""A run folder has one writer: the advisory lock (across processes, re-entrant within one) and config.json."""
import json
import subprocess
import sys
import textwrap

import pytest

from workbench.train.folder import FolderLock, RunFolderBusy, prepare_run_folder

HOLD = textwrap.dedent("""
    import sys, time
    from workbench.train.folder import FolderLock
    FolderLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def test_a_second_process_is_refused_with_the_holders_pid_and_gets_the_folder_after_it_exits(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderBusy, match=rf"in use by process {holder.pid}; .*choose another --out"):
            FolderLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = FolderLock(tmp_path).acquire()  # the kernel dropped the killed holder's lock
    assert (tmp_path / ".lock").read_text().strip() == str(__import__("os").getpid())
    lock.release()


def test_the_lock_is_reentrant_within_a_process_and_released_by_the_last_holder(tmp_path):
    first, second = FolderLock(tmp_path).acquire(), FolderLock(tmp_path).acquire()
    first.release()
    check = [sys.executable, "-c", "import sys; from workbench.train.folder import FolderLock; "
             "FolderLock(sys.argv[1]).acquire()", str(tmp_path)]
    assert subprocess.run(check, capture_output=True).returncode != 0  # still held by `second`
    second.release()
    assert subprocess.run(check, capture_output=True).returncode == 0


def test_prepare_run_folder_refuses_another_config_and_a_damaged_config(tmp_path):
    prepare_run_folder(tmp_path, json.dumps({"steps": 3}))
    prepare_run_folder(tmp_path, json.dumps({"steps": 3}))  # the same run: resumes
    with pytest.raises(ValueError, match=r"different config \(differs in \['steps'\]\)"):
        prepare_run_folder(tmp_path, json.dumps({"steps": 4}))
    (tmp_path / "config.json").write_text('{"steps": ')
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        prepare_run_folder(tmp_path, json.dumps({"steps": 3}))


RUN = ["run", "grpo", "--task", "addition", "--quiet", "--set", "steps=1", "--set", "sft_steps=0", "--set",
       "eval_size=4", "--set", "max_new_tokens=4", "--set", "prompts_per_step=2", "--set", "group_size=2"]


def test_a_run_refused_in_its_set_up_leaves_no_config_json_and_the_corrected_command_runs(tmp_path, capsys):
    from workbench import cli

    out = tmp_path / "run"
    assert cli.main([*RUN, "--out", str(out), "--set", "chat_template=true"]) == 2  # refused once the model loads
    assert "has no chat template" in capsys.readouterr().err
    assert not (out / "config.json").exists() and not (out / "warm_start.json").exists()
    assert cli.main([*RUN, "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["chat_template"] is False
