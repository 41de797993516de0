"""Time of the reward parsers on adversarial inputs at growing sizes (a table, not a test).

    python bench/bench_parsers.py [--repeats 3]

The tests (tests/rewards/test_{length,format,accuracy,reflection,hbpo}.py) assert what each reward returns on
these inputs at the largest size; this prints how long it takes at 1%, 10% and 100% of it (best of --repeats) and
the growth from 10% to 100%: about 10 for a linear scan, about 100 for a quadratic (backtracking) one. Times below a
few milliseconds are noise.
"""
from __future__ import annotations

import argparse
import time

from workbench.rewards.accuracy import accuracy_reward
from workbench.rewards.format import format_reward
from workbench.rewards.hbpo import BUDGET_SENTENCE, hbpo_reward
from workbench.rewards.length import cosine_length_reward
from workbench.rewards.reflection import reflexicoder_reward, srpo_reflection_reward


def cases():
    """(reward, input name, units at full size, build(n) -> text, call(text))."""
    budget = [BUDGET_SENTENCE.format(budget=4)]
    return [
        ("cosine-length", "x * n", 1_000_000, lambda n: "x" * n,
         lambda t: cosine_length_reward([t], [[1] * len(t)], scores=[1.0])),
        ("hbpo-reward", "x * n", 1_000_000, lambda n: "x" * n,
         lambda t: hbpo_reward([t], [[1] * len(t)], prompts=budget, scores=[1.0], max_new_tokens=8)),
        ("format-reward", "<think> + '<think' * n", 150_000, lambda n: "<think>" + "<think" * n,
         lambda t: format_reward([t], tags=("think", "answer"), trailing="none") + format_reward([t])),
        ("format-reward", "<think> + '</think' * n", 140_000, lambda n: "<think>" + "</think" * n,
         lambda t: format_reward([t], tags=("think", "answer"), trailing="none") + format_reward([t])),
        ("format-reward", "<think>a</think> + newline * n + x", 1_000_000,
         lambda n: "<think>a</think>" + "\n" * n + "x", lambda t: format_reward([t])),
        *[(f"accuracy-reward ({v})", name, n, build, lambda t, v=v: accuracy_reward([t], solution=["1"], verifier=v))
          for v in ("math", "exact", "f1")
          for name, n, build in [("'\\boxed{' * n", 150_000, lambda n: "\\boxed{" * n),
                                 ("'1 ' * n", 500_000, lambda n: "1 " * n),
                                 ("x * n", 1_000_000, lambda n: "x" * n)]],
        ("reflexicoder", "<answer> + '```python' * n", 100_000,
         lambda n: "<think>x</think><answer>" + "```python" * n,
         lambda t: reflexicoder_reward([t], answer=["1"], language="python")),
        ("reflexicoder", "'<answer> ' * n", 100_000, lambda n: "<answer> " * n,
         lambda t: reflexicoder_reward([t], answer=["1"])),
        ("srpo-reflection", "<think> + space * n", 1_000_000, lambda n: "<think>" + " " * n,
         lambda t: srpo_reflection_reward([t], answer=["1"])),
        ("srpo-reflection", "'<answer>' * n", 100_000, lambda n: "<think>a</think>" + "<answer>" * n,
         lambda t: srpo_reflection_reward([t], answer=["1"])),
    ]


def seconds(call, text, repeats: int) -> float:
    call(text[:100])  # first-call costs (lazy imports, math-verify's set-up) are not the parser's
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many calls per cell")
    args = parser.parse_args()
    fractions = (0.01, 0.1, 1.0)
    print(f"{'reward':24} {'input':34} {'chars':>10} " + " ".join(f"{f's @{f:g}':>9}" for f in fractions)
          + f" {'x10 size':>9}")
    for reward, name, full, build, call in cases():
        times = [seconds(call, build(max(1, int(full * f))), args.repeats) for f in fractions]
        growth = times[2] / max(times[1], 1e-9)  # about 10 for a linear scan, 100 for a quadratic one
        print(f"{reward:24} {name:34} {len(build(full)):>10,} " + " ".join(f"{t:>9.4f}" for t in times)
              + f" {growth:>9.1f}")


if __name__ == "__main__":
    main()
