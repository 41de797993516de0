"""Files replaced whole, stale temporaries of killed writers, JSONL read with line-numbered errors."""
import os
import subprocess
import sys
import time

import pytest
import torch

from workbench.files import read_jsonl, remove_stale_temps, save_atomic, temp_sibling, write_atomic


def test_write_atomic_replaces_whole_or_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    write_atomic(path, "old")
    real_replace = os.replace

    def killed(src, dst):  # the writer dies between writing the temporary and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new" * 1000)
    monkeypatch.setattr(os, "replace", real_replace)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["summary.json"]
    write_atomic(path, "new")
    assert path.read_text() == "new"


def test_save_atomic_round_trips_a_tensor(tmp_path):
    save_atomic({"x": torch.arange(3)}, tmp_path / "ref_logps.pt")
    assert torch.equal(torch.load(tmp_path / "ref_logps.pt")["x"], torch.arange(3))


def test_stale_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale_dir = tmp_path / f".abc.tmp-{dead_pid}-7"
    stale_dir.mkdir()
    (stale_dir / "model.safetensors").write_text("half")
    stale_file = tmp_path / f".summary.json.tmp-{dead_pid}-9"
    stale_file.write_text("x")
    mine = temp_sibling(tmp_path / "abc")
    mine.mkdir()
    legacy_old, legacy_new = tmp_path / "abc.tmp123", tmp_path / "def.tmp456"
    legacy_old.mkdir(), legacy_new.mkdir()
    os.utime(legacy_old, (time.time() - 3 * 86400,) * 2)
    removed = remove_stale_temps(tmp_path)
    assert set(removed) == {stale_dir, stale_file, legacy_old}
    assert mine.exists() and legacy_new.exists()


def test_read_jsonl_names_the_malformed_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n\n{"prompt": "2+2=", "answer": \n[1, 2]\n')
    with pytest.raises(ValueError, match=r"data.jsonl:3: not valid JSON .*fix or delete that line"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"data.jsonl:2: expected a JSON object per line, got list"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
