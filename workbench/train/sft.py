"""Supervised warm-start: teacher-forced cross-entropy on expert episodes, cached by config hash.

An expert episode is the task's `expert_actions` replayed through its environment and encoded exactly as the
multi-turn rollout encodes a sampled one (`workbench.rollout.turns.encode_expert`): the loss is on action
tokens only, observation tokens condition them. A one-turn task's episode is its target + EOS, so its loss
(and cached warm start) is the one it always was.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import torch
from tqdm.auto import tqdm

from workbench import ops
from workbench.episodes import episode_seed
from workbench.files import remove_stale_temps, write_atomic
from workbench.models import load_model, save_model_atomically
from workbench.paths import cache_dir
from workbench.rollout.engine import check_prompt_lengths, encode_prompts, policy_forward
from workbench.rollout.turns import encode_expert, pad_episodes, prompt_of
from workbench.tasks import Task


def expert_batch(tokenizer, task: Task, examples, device=None):
    """(prompt_ids, prompt_mask [B, P], response_ids, mask [B, T]) of the examples' expert episodes; mask is 1
    on action tokens (a one-turn task: target + EOS)."""
    opened, episodes = [], []
    for e in examples:
        messages, episode = encode_expert(tokenizer, task.make_env(), e, task.expert_actions(e), episode_seed(e, 0))
        opened.append(prompt_of(messages))
        episodes.append(episode)
    prompt_ids, prompt_mask = encode_prompts(tokenizer, opened, device)
    response_ids, mask, _, _ = pad_episodes(episodes, tokenizer.pad_token_id, device)
    return prompt_ids, prompt_mask, response_ids, mask


def sft_loss(model, tokenizer, examples, task: Task | None = None) -> torch.Tensor:
    """Mean negative log-likelihood of the expert's action tokens given the prompt and the observations before
    them (one forward pass per episode). Without a task, each example is one turn: target + EOS."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask, response_ids, mask = expert_batch(tokenizer, task or Task(), examples, device)
    logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, response_ids, mask)
    return -ops.masked_mean(logp, mask)


def train_sft(model, tokenizer, task: Task, *, steps: int, lr: float, batch_size: int, seed: int,
              progress: bool = True) -> list[float]:
    """AdamW on sft_loss for `steps` steps with a cosine schedule; returns the loss curve."""
    rng = random.Random(f"sft-{seed}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1), pct_start=0.1)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc="SFT warm-start", disable=not progress):
        loss = sft_loss(model, tokenizer, task.sample(batch_size, rng), task)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def check_task_prompts(task: Task, model, tokenizer, max_new_tokens: int) -> None:
    """Every prompt the task knows fits the model's context with max_new_tokens to spare, and every character of
    its prompts and targets is one the tokenizer represents (else a ValueError): run before SFT and before RL, so a
    row the model cannot read is refused before anything is trained."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    examples = task.known_examples()
    check_representable(tokenizer, examples, f"task {task.name!r}")
    check_prompt_lengths(tokenizer, [e.prompt for e in examples], context, max_new_tokens, f"task {task.name!r}")


def unknown_characters(tokenizer, chars) -> set[str]:
    """The characters the tokenizer turns into its unknown token (none for a byte-level tokenizer, which has no
    unknown token or never needs it; printable ASCII and newline only for the tiny model's character tokenizer)."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return set()
    chars = sorted(chars)
    ids = tokenizer(chars, add_special_tokens=False)["input_ids"]
    return {ch for ch, row in zip(chars, ids) if unk in row}


def check_representable(tokenizer, examples, source: str, shown: int = 3) -> None:
    """Refuse prompts and targets with characters the tokenizer cannot represent: each would become its unknown
    token, so distinct prompts ("café", "cafè") would merge into one and targets would teach "<unk>". Names the
    characters with their counts and the first texts holding them."""
    texts = [text for e in examples for text in (e.prompt, e.target)]
    counts = Counter(ch for text in texts for ch in text)
    bad = unknown_characters(tokenizer, counts)
    if not bad:
        return
    listed = ", ".join(f"{ch!r} x{counts[ch]}" for ch in sorted(bad, key=lambda ch: (-counts[ch], ch))[:10])
    holding = [text for text in dict.fromkeys(texts) if bad & set(text)]
    first = ", ".join(repr(text if len(text) <= 60 else text[:57] + "...") for text in holding[:shown])
    raise ValueError(
        f"{source}: {len(bad)} distinct characters ({sum(counts[ch] for ch in bad)} in all, in {len(holding)} prompts "
        f"or targets) are not in the tokenizer's vocabulary and would all become {tokenizer.unk_token!r}, merging "
        f"distinct texts: {listed}{', ...' if len(bad) > 10 else ''}; first in {first}. Replace them (e.g. with "
        "ASCII), drop those rows, or use a model whose tokenizer covers them")


def warm_start_key(config, task: Task | None = None) -> str:
    """The cache key of a warm start: everything it depends on, the task's data files by content (a `file:`
    task's file edited in place is a new warm start, the same file elsewhere the same one)."""
    spec = {"v": 1, "model": config.model, "task": config.task, "task_kw": config.task_kw,
            "steps": config.sft_steps, "lr": config.sft_lr, "batch": config.sft_batch, "seed": config.seed,
            "dtype": config.dtype}
    if config.chat_template:  # prompts are formatted differently (only added when on: old keys stay valid)
        spec["chat_template"] = True
    data = task.data_digest() if task is not None else None
    if data is not None:  # procedural tasks have none: their keys stay what they were
        spec["data"] = data
        spec["task"] = config.task.split(":")[0]  # the path no longer matters, the content does
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def warm_start(config, task: Task, progress: bool = True) -> Path | None:
    """Folder of the SFT'd model for this config (built once, then reused from the cache); None if no SFT."""
    if config.sft_steps <= 0:
        return None
    folder = cache_dir() / "sft" / warm_start_key(config, task)
    if (folder / "config.json").exists():
        return folder
    remove_stale_temps(folder.parent)  # what killed builds left behind
    torch.manual_seed(config.seed)
    model, tokenizer = load_model(config.model, **{**config.model_kw(), "load_in_4bit": False})  # SFT: all weights
    check_task_prompts(task, model, tokenizer, config.max_new_tokens)
    train_sft(model, tokenizer, task, steps=config.sft_steps, lr=config.sft_lr, batch_size=config.sft_batch,
              seed=config.seed, progress=progress)
    return save_model_atomically(model, tokenizer, folder)  # another process may have finished first


WARM_START_FILE = "warm_start.json"  # in a run folder: where its warm start lives (`workbench export` reads it)


def record_warm_start(out: Path, config, folder: Path | None) -> Path:
    """Write RUN/warm_start.json: {"path", "key", "sft_steps"} of the SFT folder the run started from, or
    {"path": null} without SFT (the run started from config.model)."""
    record = ({"path": str(Path(folder).resolve()), "key": Path(folder).name, "sft_steps": config.sft_steps}
              if folder is not None else {"path": None, "key": None, "sft_steps": config.sft_steps})
    return write_atomic(Path(out) / WARM_START_FILE, json.dumps(record, indent=2))


class StartContext:
    """What a reference builder may read while the policy's start is built (`registry` kind "reference"): the run's
    `seed`, and `load_sft(seed)`, this run's SFT warm start trained with another seed (SALSA's soup)."""

    def __init__(self, config, task, load_kw: dict, progress: bool):
        self.config, self.task, self.load_kw, self.progress = config, task, load_kw, progress

    @property
    def seed(self) -> int:
        return self.config.seed

    def load_sft(self, seed: int):
        other = warm_start(dataclasses.replace(self.config, seed=seed), self.task, progress=self.progress)
        model, _ = load_model(str(other) if other else self.config.model, **{**self.load_kw, "seed": seed})
        return model
