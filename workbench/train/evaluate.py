"""Greedy accuracy on a task's fixed held-out set."""
from __future__ import annotations

from workbench.tasks import Example, Task


def greedy_accuracy(engine, task: Task, examples: list[Example], *, max_new_tokens: int,
                    batch_size: int = 256, stop: list[str] | None = None) -> tuple[float, list[dict]]:
    """(accuracy, per-example records with prompt, completion, answer, correct); responses end at EOS or at a
    `stop` string, as in training, so the evaluated completions are the ones the policy is trained to give."""
    if not examples:
        raise ValueError(f"task {task.name!r} has an empty evaluation set")
    records = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        gen = engine.generate([e.prompt for e in chunk], n=1, max_new_tokens=max_new_tokens, greedy=True,
                              stop=stop)
        scores = task.rewards(gen.texts, chunk)
        records += [{"prompt": e.prompt, "completion": c, "answer": e.answer, "correct": s}
                    for e, c, s in zip(chunk, gen.texts, scores)]
    return sum(r["correct"] for r in records) / len(records), records
