"""How often an untrained model already solves candidate tasks: the table behind the small preset's choice of task.

    .venv/bin/python bench/base_rates.py [--model smollm2] [--prompts 32] [--samples 4] [--threads 2]

For each candidate (a task and its knobs, asked as the small preset asks: chat template, the preset's answer rule and
response budget), on the first `--prompts` held-out prompts: greedy accuracy (one greedy episode each, as a run's
`accuracy_before`) and sampled accuracy (`--samples` episodes each at temperature 1, the rate GRPO's groups see),
through the same rollout and verifier the trainer uses (`turns.play`, `InstructTask.score`). GRPO learns where the
sampled rate is neither ~0 (no group has a right answer) nor ~1 (no group has a wrong one). A multi-turn
environment keeps its own answer syntax (answer_format "whole").
"""
from __future__ import annotations

import argparse
import time

import torch

from workbench.models import load_model
from workbench.rollout.engine import HFEngine, Sampling
from workbench.rollout.turns import play
from workbench.tasks import run_task
from workbench.train import make_config

CANDIDATES = [  # (task, knobs); the small preset's is first
    ("reasoning_gym:products", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
    ("reasoning_gym:gcd", {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 20}),
    ("reasoning_gym:chain_sum", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}),
    ("reasoning_gym:basic_arithmetic", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
                                        "operators": ["+"]}),
    ("reasoning_gym:basic_arithmetic", {"min_terms": 2, "max_terms": 2, "min_digits": 2, "max_digits": 2,
                                        "operators": ["+"]}),
    ("reasoning_gym:leg_counting", {"min_animals": 1, "max_animals": 1}),
    ("reasoning_gym:countdown", {"min_numbers": 3, "max_numbers": 3}),
    ("countdown", {"n_numbers": 2}),
    ("calculator", {"n_operands": 2, "digits": 1}),
]


def rates(engine, task, examples, samples: int, max_new_tokens: int) -> tuple[float, float, float]:
    """(greedy accuracy, sampled accuracy, share of sampled episodes cut at the budget)."""
    greedy = play(engine, task, examples, group_size=1, sampling=Sampling(max_new_tokens, greedy=True))
    torch.manual_seed(0)
    sampled = play(engine, task, examples, group_size=samples, sampling=Sampling(max_new_tokens, temperature=1.0))
    mean = lambda xs: sum(xs) / len(xs)
    return (mean([e.episode_return >= 1 for e in greedy.episodes]),
            mean([e.episode_return >= 1 for e in sampled.episodes]),
            mean([bool(e.truncated) for e in sampled.episodes]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--prompts", type=int, default=32, help="held-out prompts per task")
    p.add_argument("--samples", type=int, default=4, help="sampled episodes per prompt (temperature 1)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (2 on a quiet 2-core machine)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    preset = make_config("small", model=args.model)
    model, tokenizer = load_model(preset.model, **preset.model_kw())
    engine = HFEngine(model, tokenizer)
    print(f"{args.model}, chat template, answer_format={preset.answer_format!r} (one-turn tasks), "
          f"max_new_tokens={preset.max_new_tokens}; {args.prompts} held-out prompts, {args.samples} samples each at "
          f"temperature 1, {args.threads} thread(s)\n")
    print(f"{'task':34s} {'knobs':64s} {'greedy':>7s} {'sampled':>8s} {'cut':>5s} {'s':>5s}")
    for name, knobs in CANDIDATES:
        multi_turn = run_task(make_config("smoke", task=name, task_kw=knobs)).make_env().max_turns > 1
        config = make_config("small", model=args.model, task=name, task_kw=knobs,
                             answer_format="whole" if multi_turn else preset.answer_format)
        task = run_task(config)
        start = time.perf_counter()
        greedy, sampled, cut = rates(engine, task, task.eval_set()[:args.prompts], args.samples,
                                     config.max_new_tokens)
        knob_text = ", ".join(f"{k}={v}" for k, v in knobs.items())
        print(f"{name:34s} {knob_text:64s} {greedy:7.2f} {sampled:8.2f} {cut:5.2f} {time.perf_counter() - start:5.0f}",
              flush=True)


if __name__ == "__main__":
    main()
