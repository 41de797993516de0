"""Resumable checkpoints: model, optimizer, controller state, step; written atomically."""
from __future__ import annotations

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
