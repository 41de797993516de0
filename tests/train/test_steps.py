"""The shared step loop: Ctrl-C becomes `Interrupted`, naming the step and the checkpoint a rerun resumes from."""
from types import SimpleNamespace

import pytest

from workbench.train.metrics import MetricsLog, read_rows
from workbench.train.steps import Interrupted, run_steps


def test_keyboard_interrupt_names_the_step_and_the_last_checkpoint(tmp_path):
    config = SimpleNamespace(steps=10, checkpoint_every=2, keep_checkpoints=2)

    def step(i):
        if i == 5:
            raise KeyboardInterrupt
        return {"step": i}

    log = MetricsLog(tmp_path / "metrics.jsonl")
    with pytest.raises(Interrupted, match=r"interrupted at step 5 \(the last checkpoint is step 4.*run the same "
                                          r"command to resume") as caught:
        run_steps(step, lambda done: {"step": done}, out=tmp_path, log=log, start=0, config=config, desc="t",
                  progress=False)
    assert (caught.value.step, caught.value.checkpoint) == (5, 4)
    assert [r["step"] for r in read_rows(log.path)] == [0, 1, 2, 3, 4]
    with pytest.raises(Interrupted, match="at step 1 .no checkpoint was reached yet"):
        run_steps(lambda i: step(i + 4), lambda done: {}, out=tmp_path / "b", log=MetricsLog(tmp_path / "m2"),
                  start=0, config=config, desc="t", progress=False)
    with pytest.raises(Interrupted, match="at step 5 .the last checkpoint is step 4"):  # a resumed run
        run_steps(step, lambda done: {}, out=tmp_path / "c", log=MetricsLog(tmp_path / "m3"), start=4,
                  config=config, desc="t", progress=False)
