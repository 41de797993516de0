"""Greedy accuracy on a task's fixed held-out set: one greedy episode per example through the rollout."""
from __future__ import annotations

from workbench.rollout.engine import Sampling
from workbench.rollout.turns import play
from workbench.tasks import Example, Task


def greedy_accuracy(engine, task: Task, examples: list[Example], *, max_new_tokens: int, batch_size: int = 256,
                    stop: list[str] | None = None, max_turns: int | None = None,
                    max_total_tokens: int | None = None) -> tuple[float, list[dict]]:
    """(accuracy, per-example records with prompt, completion, answer, correct) of greedy episodes run by the
    multi-turn rollout (`turns.play`, group_size 1): `max_new_tokens` per turn, turns ending at EOS, a `stop`
    string or one of the environment's, as in training. `correct` is the episode's return (the verifier's score
    for a one-turn task, whose completion is the answer; for a multi-turn task the completion is the whole
    transcript after the prompt)."""
    if not examples:
        raise ValueError(f"task {task.name!r} has an empty evaluation set")
    sampling = Sampling(max_new_tokens, greedy=True, stop=tuple(stop) if stop else None)
    records = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        played = play(engine, task, chunk, group_size=1, sampling=sampling, max_turns=max_turns,
                      max_total_tokens=max_total_tokens)
        records += [{"prompt": e.prompt, "completion": ep.completion, "answer": e.answer, "correct": ep.episode_return}
                    for e, ep in zip(chunk, played.episodes)]
    return sum(r["correct"] for r in records) / len(records), records
