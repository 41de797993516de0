"""Rollout throughput of the two engines, HF generate vs vLLM, on the tiny model or SmolLM2 (a table, not a test).

    python bench/bench_engines.py [--threads 1] [--repeats 3] [--hidden 128 --layers 2]
    python bench/bench_engines.py --model smollm2 --samples 8 --max-new-tokens 32   # the small preset's rollout

Each engine samples 16 prompts x 8 samples x up to 64 new tokens through the engine protocol (`generate`,
so encoding, padding and log-prob extraction are included); tokens/s counts response tokens (EOS included).
The untrained model rarely emits EOS, so almost every row uses the full budget; `--model smollm2` samples
SmolLM2-135M-Instruct on the small preset's first 16 held-out prompts (chat template), whose replies end at EOS
(HF generate keeps computing a finished row until the batch's last one ends; vLLM drops it). vLLM's one-off start-up and
the cost of one weight push (`load_weights`, done after every RL step) are reported separately.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from workbench.models import TinySize, build_tiny

TINY_PROMPTS = [f"{a}+{b}=" for a, b in zip(range(10, 26), range(40, 56))]  # 16 prompts


def time_generate(engine, prompts, repeats: int, *, n: int, max_new_tokens: int) -> tuple[float, float]:
    """(median seconds, median response tokens) of `repeats` sampling calls, after one warm-up call."""
    engine.generate(prompts[:2], n=2, max_new_tokens=4)
    seconds, tokens = [], []
    for r in range(repeats):
        torch.manual_seed(r)
        t0 = time.perf_counter()
        gen = engine.generate(prompts, n=n, max_new_tokens=max_new_tokens, temperature=1.0)
        seconds.append(time.perf_counter() - t0)
        tokens.append(float(gen.mask.sum()))
    return statistics.median(seconds), statistics.median(tokens)


def time_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128, help="model width (heads = hidden / 32)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--model", default="tiny", choices=["tiny", "smollm2"])
    args = p.parse_args()
    torch.set_num_threads(args.threads)  # before vLLM starts: its in-process engine makes this a no-op
    if args.model == "smollm2":
        from workbench.models import load_model
        from workbench.tasks import run_task
        from workbench.train import make_config

        config = make_config("small")
        model, tokenizer = load_model("smollm2", chat_template=True)
        task = run_task(config)
        prompts = [task.opening(e) for e in task.eval_set(16)]
    else:
        size = TinySize(hidden=args.hidden, layers=args.layers, heads=args.hidden // 32, intermediate=4 * args.hidden)
        model, tokenizer = build_tiny(size, seed=0)
        prompts = TINY_PROMPTS
    model = model.to(getattr(torch, args.dtype)).eval()
    params = sum(t.numel() for t in model.parameters()) / 1e6
    shape = dict(n=args.samples, max_new_tokens=args.max_new_tokens)

    from workbench.rollout import HFEngine

    rows = [("hf", 0.0, None, *time_generate(HFEngine(model, tokenizer), prompts, args.repeats, **shape))]
    try:
        from workbench.rollout.vllm_engine import VLLMEngine
        start = time.perf_counter()
        engine = VLLMEngine(model, tokenizer, max_model_len=256, kv_cache_mb=512 if args.model == "smollm2" else 128)
        start = time.perf_counter() - start
        sync = time_call(lambda: engine.load_weights(model.state_dict()))
        rows.append(("vllm", start, sync, *time_generate(engine, prompts, args.repeats, **shape)))
    except ImportError as e:
        print(f"(vLLM skipped: {e})")

    print(f"\n{params:.2f}M params ({args.dtype}), {torch.get_num_threads()} thread(s), {len(prompts)} prompts x "
          f"{args.samples} samples x {args.max_new_tokens} tokens, median of {args.repeats}\n")
    print(f"{'engine':>7} {'start s':>8} {'sync ms':>8} {'tokens':>7} {'generate s':>11} {'tok/s':>8}")
    for name, start, sync, seconds, tokens in rows:
        sync_ms = "-" if sync is None else f"{1000 * sync:.1f}"
        print(f"{name:>7} {start:>8.1f} {sync_ms:>8} {tokens:>7.0f} {seconds:>11.3f} {tokens / seconds:>8.0f}")


if __name__ == "__main__":
    main()
