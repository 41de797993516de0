"""Supervised warm-start: teacher-forced cross-entropy on task targets, cached by config hash."""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import torch
from tqdm.auto import tqdm

from workbench import ops
from workbench.models import load_model, save_model_atomically
from workbench.paths import cache_dir
from workbench.rollout.engine import encode_prompts, encode_responses, policy_forward
from workbench.tasks import Task


def sft_loss(model, tokenizer, examples) -> torch.Tensor:
    """Mean negative log-likelihood of target + EOS given the prompt, over target tokens."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [e.prompt for e in examples], device)
    target_ids, target_mask = encode_responses(tokenizer, [e.target for e in examples], device)
    logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, target_ids, target_mask)
    return -ops.masked_mean(logp, target_mask)


def train_sft(model, tokenizer, task: Task, *, steps: int, lr: float, batch_size: int, seed: int,
              progress: bool = True) -> list[float]:
    """AdamW on sft_loss for `steps` steps with a cosine schedule; returns the loss curve."""
    rng = random.Random(f"sft-{seed}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1), pct_start=0.1)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc="SFT warm-start", disable=not progress):
        loss = sft_loss(model, tokenizer, task.sample(batch_size, rng))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def warm_start_key(config) -> str:
    spec = {"v": 1, "model": config.model, "task": config.task, "task_kw": config.task_kw,
            "steps": config.sft_steps, "lr": config.sft_lr, "batch": config.sft_batch, "seed": config.seed,
            "dtype": config.dtype}
    if config.chat_template:  # prompts are formatted differently (only added when on: old keys stay valid)
        spec["chat_template"] = True
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def warm_start(config, task: Task, progress: bool = True) -> Path | None:
    """Folder of the SFT'd model for this config (built once, then reused from the cache); None if no SFT."""
    if config.sft_steps <= 0:
        return None
    folder = cache_dir() / "sft" / warm_start_key(config)
    if (folder / "config.json").exists():
        return folder
    torch.manual_seed(config.seed)
    model, tokenizer = load_model(config.model, **{**config.model_kw(), "load_in_4bit": False})  # SFT: all weights
    train_sft(model, tokenizer, task, steps=config.sft_steps, lr=config.sft_lr, batch_size=config.sft_batch,
              seed=config.seed, progress=progress)
    return save_model_atomically(model, tokenizer, folder)  # another process may have finished first
