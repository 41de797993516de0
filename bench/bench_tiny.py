"""Rollout tokens/s and train-step time of the tiny model (a table, not a test).

    python bench/bench_tiny.py [--threads 1] [--repeats 3]

Generation is forced to the full budget (EOS suppressed) so every configuration generates the same
number of tokens; the train step is one ppo_epoch over the batch in `minibatches` optimizer steps.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from workbench.train import Trainer, make_config


def measure(trainer: Trainer, repeats: int) -> dict:
    rollout_s, train_s, tokens = [], [], []
    for step in range(repeats):
        t0 = time.perf_counter()
        batch = trainer.make_batch(step)
        t1 = time.perf_counter()
        trainer.train_on(batch, step)
        t2 = time.perf_counter()
        rollout_s.append(t1 - t0)
        train_s.append(t2 - t1)
        tokens.append(float(batch.lengths.sum()))
    return {"rollout_s": statistics.median(rollout_s), "train_s": statistics.median(train_s),
            "tokens": statistics.median(tokens)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"tiny model, {args.threads} thread(s), median of {args.repeats} steps\n")
    print(f"{'prompts x G':>12} {'tokens':>7} {'max_new':>8} {'rollout s':>10} {'rollout tok/s':>14} "
          f"{'train step s':>13} {'train tok/s':>12}")
    for prompts, group, max_new in ((8, 8, 16), (16, 8, 16), (32, 8, 16), (16, 8, 64)):
        config = make_config("smoke", task="addition", prompts_per_step=prompts, group_size=group,
                             max_new_tokens=max_new, sft_steps=0, threads=args.threads, minibatches=2)
        with tempfile.TemporaryDirectory() as out:
            trainer = Trainer(config, out, progress=False).setup()
            trainer.model.generation_config.suppress_tokens = [trainer.tokenizer.eos_token_id]
            r = measure(trainer, args.repeats)
        print(f"{prompts:>5} x {group:<5} {r['tokens']:>7.0f} {max_new:>8} {r['rollout_s']:>10.3f} "
              f"{r['tokens'] / r['rollout_s']:>14.0f} {r['train_s']:>13.3f} {r['tokens'] / r['train_s']:>12.0f}")


if __name__ == "__main__":
    main()
