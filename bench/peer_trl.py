"""A peer run: TRL's GRPOTrainer trained from our run's start on the same task and settings, evaluated by our code.

    .venv/bin/python bench/peer_trl.py --preset small --seed 0 --out runs/peer-trl/small-s0 [--steps N]
    .venv/bin/python bench/peer_trl.py --store small-products    # the seeds' folders -> data/stored_runs/NAME-trl.jsonl

What is the same as `workbench run grpo --preset small --seed S`: the model folder it starts from, the task and its
held-out set, prompts as chat messages rendered by the model's template (TRL's conversational dataset), the verifier
with the preset's answer rule (`InstructTask.score`), prompts x G per step, response budget, temperature 1, lr
(constant, AdamW, no weight decay), grad-norm clip 1, one optimizer step per rollout, the GRPO loss
(`loss_type="grpo"`, `scale_rewards="group"`, clip 0.2, beta 0) and the evaluation: greedy accuracy on the same
`eval_size` held-out prompts by `workbench.train.evaluate.greedy_accuracy`, before training and every `eval_every`
steps. What differs: which training prompts are drawn (TRL shuffles its dataset with its seed) and the random
numbers of sampling, so the two agree in distribution, run by run within seed noise. One torch thread.

The folder gets `metrics.jsonl` (one row per step: step, reward/mean, response_length/mean, truncated_frac and, at
evaluation steps, eval/accuracy) and `summary.json` (accuracy_before, accuracy_after), the fields our stored
comparisons keep; a finished folder is not re-run. `--store NAME` gathers the finished seeds of a stored comparison's
peer runs (runs/peer-trl/NAME/trl-sSEED) into data/stored_runs/NAME-trl.jsonl, in the stored-runs line format.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench_vs_trl import trl_grpo_config, trl_rows, trl_verifier


def eval_accuracy(model, tokenizer, task, config) -> float:
    from workbench.rollout.engine import HFEngine
    from workbench.train.evaluate import greedy_accuracy

    accuracy, _ = greedy_accuracy(HFEngine(model, tokenizer), task, task.eval_set(config.eval_size),
                                  max_new_tokens=config.max_new_tokens, stop=config.stop)
    return accuracy


def train_peer(config, out: Path) -> dict:
    """TRL GRPOTrainer for config.steps rollouts from config.model; metrics.jsonl + summary.json in `out`."""
    import torch
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOTrainer

    from workbench.models import load_model, quiet_local_io
    from workbench.tasks import run_task

    if (out / "summary.json").exists():
        return json.loads((out / "summary.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    quiet_local_io()
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    task = run_task(config)
    model, tokenizer = load_model(config.model, **config.model_kw())
    examples = task.sample(config.prompts_per_step * (config.steps + 1), random.Random(f"{config.seed}-trl"))
    data = trl_rows(task, examples, chat=config.chat_template)
    rows, log = [], (out / "metrics.jsonl").open("w")
    before = eval_accuracy(model, tokenizer, task, config)

    class Record(TrainerCallback):
        """One metrics row per optimizer step (= one rollout here), with an evaluation every eval_every steps."""

        def on_log(self, _args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                step = state.global_step - 1
                row = {"step": step, "reward/mean": logs["reward"],
                       "response_length/mean": logs.get("completions/mean_length"),
                       "truncated_frac": logs.get("completions/clipped_ratio"), "time": time.time()}
                if config.eval_every and (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                    row["eval/accuracy"] = eval_accuracy(model, tokenizer, task, config)
                rows.append(row)
                log.write(json.dumps(row) + "\n")
                log.flush()

    args = SimpleNamespace(recipe="grpo", beta=config.kl_coef or 0.0, cuda=False, group=config.group_size,
                           max_tokens=config.max_new_tokens, lr=config.lr)
    with tempfile.TemporaryDirectory() as tmp:
        trl_config = trl_grpo_config(args, tmp, seed=config.seed, max_steps=config.steps,
                                     rollout_rows=config.prompts_per_step * config.group_size,
                                     minibatches=config.minibatches, logging_strategy="steps", logging_steps=1)
        trainer = GRPOTrainer(model=model, reward_funcs=trl_verifier(task), args=trl_config,
                              processing_class=tokenizer, train_dataset=data, callbacks=[Record()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    log.close()
    summary = {"accuracy_before": before, "accuracy_after": rows[-1]["eval/accuracy"], "eval_size": config.eval_size,
               "steps": config.steps, "trl": __import__("trl").__version__}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def store(name: str, runs_root: Path) -> Path:
    """data/stored_runs/NAME-trl.jsonl from runs_root/NAME/trl-sSEED, in the stored-runs line format."""
    from workbench.files import write_atomic
    from workbench.results.stored_runs import COMPARISONS, DATA, commit, machine
    from workbench.train.metrics import read_rows

    spec = COMPARISONS[name]
    seeds = [seed for seed in range(spec.seeds) if (runs_root / name / f"trl-s{seed}" / "summary.json").exists()]
    if not seeds:
        raise SystemExit(f"no finished peer run under {runs_root / name} (trl-sSEED folders)")
    lines = [{"meta": {"name": f"{name}-trl", "peer": "trl GRPOTrainer", "of": name, "task": spec.task,
                       "preset": spec.preset, "sets": list(spec.sets), "seeds": len(seeds),
                       "recipes": ["trl-grpo"], "commit": commit(), "machine": machine(),
                       "command": f"python bench/peer_trl.py --preset {spec.preset} --seed S --out "
                                  f"{runs_root / name}/trl-sS, S in {seeds}; then --store {name}"}}]
    for seed in seeds:
        folder = runs_root / name / f"trl-s{seed}"
        summary = json.loads((folder / "summary.json").read_text())
        lines.append({"summary": {"recipe": "trl-grpo", "seed": seed, **{k: summary[k] for k in
                                                                         ("accuracy_before", "accuracy_after")}}})
        lines += [{"row": {"recipe": "trl-grpo", "seed": seed, **{k: v for k, v in row.items() if k != "time"}}}
                  for row in read_rows(folder / "metrics.jsonl")]
    return write_atomic(DATA / f"{name}-trl.jsonl", "".join(json.dumps(line) + "\n" for line in lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="run folder (default runs/peer-trl/PRESET-sSEED)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config overrides, as `workbench run`")
    p.add_argument("--store", metavar="NAME", help="gather the peer runs of stored comparison NAME")
    args = p.parse_args()
    if args.store:
        print(store(args.store, Path("runs/peer-trl")))
        return
    from workbench.train import apply_sets, make_config

    config = apply_sets(make_config(args.preset, seed=args.seed), args.set)
    if config.sft_steps or config.lora_r or config.kl_coef:
        sys.exit("peer_trl.py runs TRL from config.model without SFT, LoRA or a KL term (sft_steps=0, lora_r=0, "
                 "kl_coef=0): the small preset's settings")
    out = Path(args.out or f"runs/peer-trl/{args.preset}-s{args.seed}")
    print(json.dumps(train_peer(config, out)))


if __name__ == "__main__":
    main()
