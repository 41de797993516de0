"""Resumable checkpoints: model, optimizer, controller state, step; written atomically, read with fallback.

A checkpoint folder holds `state.pt` (everything) and, apart, `pipeline.pt`: the components' state (samplers,
buffers, controllers, running statistics), small and readable without the model (`workbench inspect`). A checkpoint
is read whole or not at all: a damaged `pipeline.pt` sets it aside like a damaged `state.pt`."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

from workbench.files import save_atomic


class CheckpointError(ValueError):
    """No kept checkpoint of a run folder can be read."""


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / "checkpoints" / f"step_{step:06d}"


def save_checkpoint(out: Path, step: int, state: dict, keep: int = 2) -> Path:
    """Save `state` (a dict of state_dicts and plain values) as the checkpoint reached after `step` steps."""
    final = checkpoint_dir(out, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if "pipeline" in state:
        state = dict(state)
        save_atomic(state.pop("pipeline"), tmp / PIPELINE_FILE)
    save_atomic(state, tmp / "state.pt")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)  # a half-written checkpoint never carries the final name
    rotate_checkpoints(out, keep)
    return final


def rotate_checkpoints(out: Path, keep: int) -> list[Path]:
    """Delete the finished checkpoints before the newest `keep`: after each save, and when a run starts (one
    killed between a save's rename and this left one more)."""
    old = kept_checkpoints(out)[:-keep]
    for path in old:
        shutil.rmtree(path)
    return old


def kept_checkpoints(out: Path) -> list[Path]:
    """Finished checkpoints, oldest first."""
    return sorted(p for p in out.glob("checkpoints/step_*[0-9]") if (p / "state.pt").exists())


def latest_checkpoint(out: Path) -> Path | None:
    done = kept_checkpoints(out)
    return done[-1] if done else None


PIPELINE_FILE = "pipeline.pt"


def load_checkpoint(path: Path) -> dict:
    state = torch.load(path / "state.pt", weights_only=False)
    if (path / PIPELINE_FILE).exists():  # checkpoints before session 15 hold it inside state.pt
        state["pipeline"] = load_pipeline_state(path)
    return state


def load_pipeline_state(path: Path) -> dict:
    """The components' state {"slot:key": state} of the checkpoint folder `path` (not the model's)."""
    state = torch.load(path / PIPELINE_FILE, weights_only=False)
    if not isinstance(state, dict):
        raise ValueError(f"{path / PIPELINE_FILE} is not a pipeline state (a dict of component states)")
    return state


def load_latest_checkpoint(out: Path) -> dict | None:
    """The newest checkpoint that reads; a damaged one is renamed `*.damaged` (kept for inspection) with a
    warning, and the one before it is tried. None when there is none; CheckpointError when none reads."""
    damaged = []
    for path in reversed(kept_checkpoints(out)):
        try:
            state = load_checkpoint(path)
            if not isinstance(state, dict) or "step" not in state:
                raise ValueError("not a workbench checkpoint (no step)")
            return state
        except Exception as err:  # any unreadable file: torn zip, bad pickle, wrong content
            aside = path.with_name(path.name + ".damaged")
            shutil.rmtree(aside, ignore_errors=True)
            path.rename(aside)
            damaged.append(f"{aside.name} ({type(err).__name__}: {str(err)[:120]})")
            print(f"warning: checkpoint {path} is damaged ({type(err).__name__}: {str(err)[:120]}); moved it to "
                  f"{aside.name} and falling back to the previous kept checkpoint", file=sys.stderr)
    if damaged:
        raise CheckpointError(f"no kept checkpoint of {out} can be read: {'; '.join(damaged)}. Move "
                              f"{out / 'checkpoints'} aside to train from the start, or choose another --out")
    return None
