"""Resumable checkpoints: model, optimizer, controller state, step; written atomically."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / "checkpoints" / f"step_{step:06d}"


def save_checkpoint(out: Path, step: int, state: dict, keep: int = 2) -> Path:
    """Save `state` (a dict of state_dicts and plain values) as the checkpoint reached after `step` steps."""
    final = checkpoint_dir(out, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(state, tmp / "state.pt")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)  # a half-written checkpoint never carries the final name
    for old in sorted(out.glob("checkpoints/step_*[0-9]"))[:-keep]:
        shutil.rmtree(old)
    return final


def latest_checkpoint(out: Path) -> Path | None:
    done = sorted(p for p in out.glob("checkpoints/step_*[0-9]") if (p / "state.pt").exists())
    return done[-1] if done else None


def load_checkpoint(path: Path) -> dict:
    return torch.load(path / "state.pt", weights_only=False)


def prepare_run_folder(out: Path, config_json: str, defaults_json: str = "{}") -> None:
    """Create the run folder, or check that an existing one holds this same config (then it resumes).

    A different config is an error: nothing a user ran is overwritten. Fields added to the config since
    the folder was written count as their defaults (`defaults_json`), so an upgrade does not orphan runs.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    if path.exists():
        saved, mine = {**json.loads(defaults_json), **json.loads(path.read_text())}, json.loads(config_json)
        if saved != mine:
            diff = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
            raise ValueError(f"{out} holds a run with a different config (differs in {diff}); "
                             "choose another --out, or delete the folder to start over")
    else:
        path.write_text(config_json)
