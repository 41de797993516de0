"""Small builders shared by the tests."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch
from workbench.tasks import Example, Task


def make_batch(rewards, group, lengths=None, **fields) -> RolloutBatch:
    """A float64 RolloutBatch with the given rewards/groups over right-padded responses (default 3 tokens)."""
    batch = RolloutBatch.from_rewards(rewards, group, lengths if lengths is not None else [3] * len(rewards))
    for name, value in fields.items():
        setattr(batch, name, value)
    return batch


AGREE_TOL = dict(rtol=1e-6, atol=1e-6)  # agreement with reference implementations, float64


def assert_agree(ours, theirs, leaf=None, **tol):
    """Same value (float64 on our side) and, when `leaf` is given, the same gradient w.r.t. `leaf`."""
    tol = tol or AGREE_TOL
    ours, theirs = torch.as_tensor(ours), torch.as_tensor(theirs)
    assert ours.dtype == torch.float64, f"workbench computed in {ours.dtype}, expected float64"
    torch.testing.assert_close(ours, theirs.to(torch.float64), **tol)
    if leaf is not None:
        (g_ours,) = torch.autograd.grad(ours, leaf, retain_graph=True)
        (g_theirs,) = torch.autograd.grad(theirs, leaf, retain_graph=True)
        torch.testing.assert_close(g_ours, g_theirs.to(torch.float64), **tol)


def batch_with_mask(rewards, group, mask, **fields) -> RolloutBatch:
    """A RolloutBatch over an explicit response mask (holes allowed), with extra fields set."""
    batch = RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask,
                         group=torch.as_tensor(group).long(), rewards=torch.as_tensor(rewards, dtype=torch.float64))
    for name, value in fields.items():
        setattr(batch, name, value)
    return batch


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def anchor_mask(B, T, g, holes=False):
    """Right-padded [B, T] float64 mask with row 0 full length (the reference-agreement tests' layout);
    `holes` zeroes two interior positions of long rows, like observation tokens in a multi-turn response."""
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    if holes:
        mask[lengths >= 5, 1:3] = 0.0
    return mask


def random_mask(B, T, generator, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=generator)
    return (torch.arange(T)[None, :] < lengths[:, None]).double()


# A run small enough for a unit test (seconds on one thread).
TINY = dict(task="addition", steps=4, prompts_per_step=4, group_size=4, max_new_tokens=6, sft_steps=0,
            eval_size=16, checkpoint_every=2, minibatches=2, lr=1e-3)


class DigitFirst(Task):
    """Reward 1 when the answer starts with a digit: about 10% of random tokens, so groups carry signal."""

    name = "digit_first"

    def make_example(self, rng):
        return Example(prompt=f"{rng.randrange(10)}?", answer="", target="1")

    def score(self, completion, example):
        return float(completion[:1].isdigit())

    def eval_set(self, n=None):
        return [Example(prompt=f"{i}!", answer="", target="1") for i in range(10)]


class Interrupt(Exception):
    """Raised from a step callback to simulate a run killed between steps."""


def run_task(config, out, task=None, stop_after_step=None):
    """Run (or resume) `config` into `out` (on `task` when given); optionally die after a step."""
    from workbench.train import make_trainer

    def crash(row):
        if row["step"] == stop_after_step:
            raise Interrupt

    trainer = make_trainer(config, out, progress=False, callback=crash if stop_after_step is not None else None)
    if task is not None:
        trainer.task = task
    return trainer.run()


def metric_rows(out):
    """Rows of a run's metrics.jsonl without wall-clock fields (those differ between identical runs)."""
    from workbench.train.metrics import read_rows

    return [{k: v for k, v in r.items() if not k.startswith(("time/", "tokens_per_s/"))}
            for r in read_rows(out / "metrics.jsonl")]


def resumes_exactly(config, tmp_path, stop_after_step=2, task=None) -> bool:
    """A run killed after `stop_after_step` and resumed logs exactly what an uninterrupted run logs."""
    run_task(config, tmp_path / "straight", task)
    try:
        run_task(config, tmp_path / "resumed", task, stop_after_step=stop_after_step)
    except Interrupt:
        pass
    run_task(config, tmp_path / "resumed", task)
    return metric_rows(tmp_path / "resumed") == metric_rows(tmp_path / "straight")
