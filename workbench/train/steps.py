"""The step loop every trainer shares: log each row as it comes, checkpoint, show progress."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from workbench.train.checkpoint import save_checkpoint
from workbench.train.metrics import MetricsLog


def run_steps(step_fn: Callable[[int], dict], state_fn: Callable[[int], dict], *, out: Path, log: MetricsLog,
              start: int, config, desc: str, progress: bool = True, callback=None,
              postfix: Callable[[dict], dict] = lambda row: {}, main: bool = True) -> None:
    """Run steps start..config.steps-1; after each, append its row, call `callback(row)`, and save
    `state_fn(steps_done)` every `config.checkpoint_every` steps and at the end. Only the `main` process
    (rank 0 of a data-parallel run) writes the log and the checkpoints."""
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc=desc,
               disable=not (progress and main))
    for step in bar:
        row = step_fn(step)
        if main:
            log.append(row)
            bar.set_postfix(postfix(row))
            if callback is not None:
                callback(row)
        if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
            state = state_fn(step + 1)  # every rank: gathering sharded (FSDP) state is a collective
            if main:
                save_checkpoint(out, step + 1, state, config.keep_checkpoints)
