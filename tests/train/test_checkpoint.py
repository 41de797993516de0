"""Checkpoints: a damaged one is set aside with a warning and the previous kept one is used."""
import pytest
import torch

from workbench.train.checkpoint import CheckpointError, kept_checkpoints, load_latest_checkpoint, save_checkpoint


def test_a_damaged_checkpoint_falls_back_to_the_previous_kept_one(tmp_path, capsys):
    for step in (2, 4):
        save_checkpoint(tmp_path, step, {"step": step, "w": torch.full((3,), float(step))}, keep=2)
    newest = kept_checkpoints(tmp_path)[-1] / "state.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # a disk error tore it
    state = load_latest_checkpoint(tmp_path)
    assert state["step"] == 2 and torch.equal(state["w"], torch.full((3,), 2.0))
    assert "checkpoint" in capsys.readouterr().err and "damaged" in "".join(p.name for p in
                                                                          (tmp_path / "checkpoints").iterdir())
    assert (tmp_path / "checkpoints" / "step_000004.damaged" / "state.pt").exists()  # kept for inspection
    assert [p.name for p in kept_checkpoints(tmp_path)] == ["step_000002"]


def test_no_readable_checkpoint_is_an_error_that_says_what_to_do(tmp_path):
    save_checkpoint(tmp_path, 2, {"step": 2}, keep=2)
    (kept_checkpoints(tmp_path)[0] / "state.pt").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match="no kept checkpoint .* can be read.*choose another --out"):
        load_latest_checkpoint(tmp_path)
    assert load_latest_checkpoint(tmp_path / "fresh") is None
