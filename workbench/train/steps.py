"""The step loop every trainer shares: log each row as it comes, checkpoint, show progress, stop cleanly."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from workbench.train.checkpoint import save_checkpoint
from workbench.train.metrics import MetricsLog


class Interrupted(Exception):
    """Ctrl-C or SIGTERM during the step loop; the run folder holds everything up to the last checkpoint."""

    def __init__(self, step: int, checkpoint: int | None):
        self.step, self.checkpoint = step, checkpoint
        kept = f"the last checkpoint is step {checkpoint}" if checkpoint else "no checkpoint was reached yet"
        super().__init__(f"interrupted at step {step} ({kept}; steps after it are recomputed); "
                         "run the same command to resume")


def run_steps(step_fn: Callable[[int], dict], state_fn: Callable[[int], dict], *, out: Path, log: MetricsLog,
              start: int, config, desc: str, progress: bool = True, callback=None,
              postfix: Callable[[dict], dict] = lambda row: {}, main: bool = True) -> None:
    """Run steps start..config.steps-1; after each, append its row, call `callback(row)`, and save
    `state_fn(steps_done)` every `config.checkpoint_every` steps and at the end. Only the `main` process
    (rank 0 of a data-parallel run) writes the log (metrics.jsonl, and TensorBoard event files with
    report_to="tensorboard") and the checkpoints. KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one by the
    CLI) becomes `Interrupted`, naming the step and the checkpoint a rerun resumes from."""
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc=desc,
               disable=not (progress and main))
    step, saved = start, start or None
    try:
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
                saved = step + 1
    except KeyboardInterrupt:
        bar.close()
        raise Interrupted(step, saved) from None
    finally:
        log.close()  # the TensorBoard writer, when the run logs to one
