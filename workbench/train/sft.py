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
from workbench.models import BUILTIN_MODELS, IN_CODE_MODELS, load_model, save_model_atomically
from workbench.paths import cache_dir
from workbench.rollout.engine import check_prompt_lengths, encode_prompts, policy_forward, prompt_texts
from workbench.batch import left_pad
from workbench.envs.multiagent import GameTask
from workbench.rollout.agents import expert_rows
from workbench.rollout.turns import encode_expert, pad_episodes, prompt_of, unpadded
from workbench.tasks import Task
from workbench.tasks.dataset import file_sha256


def expert_batch(tokenizer, task: Task, examples, device=None, seeds=None):
    """(prompt_ids, prompt_mask [B, P], response_ids, mask [B, T]) of the examples' expert episodes; mask is 1
    on action tokens (a one-turn task: target + EOS). A game gives one row per agent of a game its expert Python
    player plays in every seat (`rollout.agents.expert_rows`), seeded by `seeds` (one per example: a random player
    plays another game each time a deal comes back; default the example's own seed)."""
    prompts, episodes = [], []
    for i, e in enumerate(examples):
        if isinstance(task, GameTask):
            rows = expert_rows(tokenizer, task, e, seeds[i] if seeds is not None else episode_seed(e, 0))
        else:
            messages, episode = encode_expert(tokenizer, task.make_env(), e, task.expert_actions(e),
                                              episode_seed(e, 0))
            ids, mask = encode_prompts(tokenizer, [prompt_of(messages)])
            rows = [(unpadded(ids, mask)[0], episode)]
        prompts += [ids for ids, _ in rows]
        episodes += [episode for _, episode in rows]
    prompt_ids, prompt_mask = left_pad(prompts, tokenizer.pad_token_id, device)
    response_ids, mask, _, _ = pad_episodes(episodes, tokenizer.pad_token_id, device)
    return prompt_ids, prompt_mask, response_ids, mask


def sft_loss(model, tokenizer, examples, task: Task | None = None, seeds=None) -> torch.Tensor:
    """Mean negative log-likelihood of the expert's action tokens given the prompt and the observations before
    them (one forward pass per episode). Without a task, each example is one turn: target + EOS. `seeds`: a game's
    expert games (`expert_batch`)."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask, response_ids, mask = expert_batch(tokenizer, task or Task(), examples, device, seeds)
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
        # a task may warm-start on more than it trains on (a proposer task: its solver's questions too)
        examples = getattr(task, "sft_sample", task.sample)(batch_size, rng)
        seeds = [rng.getrandbits(32) for _ in examples] if isinstance(task, GameTask) else None  # a new game each time
        loss = sft_loss(model, tokenizer, examples, task, seeds)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def check_task_prompts(task: Task, model, tokenizer, max_new_tokens: int, pairs=(), pairs_source: str = "",
                       engine_limit: int | None = None) -> None:
    """Every prompt the task knows fits the model's context with max_new_tokens to spare (and the rollout engine's
    own limit, `engine_limit`: vLLM's max_model_len), every character of its prompts and targets is one the
    tokenizer represents, and every preference pair the run will train on (`pairs`, from `pairs_source`: a data_path
    file) fits too (else a ValueError): run before SFT and before RL, so a row the model cannot read is refused
    before anything is trained."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    name = f"task {task.name!r}"
    if engine_limit is not None and (context is None or engine_limit < context):
        context, name = engine_limit, f"{name} on the vLLM engine (max_model_len={engine_limit}: vllm_max_model_len)"
    examples = task.known_examples()
    check_representable(tokenizer, examples, f"task {task.name!r}")
    check_prompt_lengths(tokenizer, [task.opening(e) for e in examples], context, max_new_tokens, name)
    check_pair_lengths(tokenizer, list(pairs), context, max_new_tokens, pairs_source or "preference pairs")


def engine_limit(config) -> int | None:
    """The longest prompt + response the run's rollout engine takes, where it has its own (vLLM's max_model_len)."""
    return config.vllm_max_model_len if config.engine == "vllm" else None


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


def check_pair_lengths(tokenizer, pairs: list, context: int | None, max_new_tokens: int, source: str) -> None:
    """Preference pairs are held to the rule for a task's prompts (`check_prompt_lengths`: prompt + max_new_tokens
    within the model's context, nothing truncated), and each row's prompt + its longer response + EOS, which the
    pair is scored on, fits the context too."""
    if context is None or not pairs:
        return
    check_prompt_lengths(tokenizer, [p.prompt for p in pairs], context, max_new_tokens, source)
    chat = getattr(tokenizer, "use_chat_template", False)
    for start in range(0, len(pairs), 256):
        chunk = pairs[start:start + 256]
        prompts = tokenizer(prompt_texts(tokenizer, [p.prompt for p in chunk]), add_special_tokens=not chat)
        chosen, rejected = (tokenizer([getattr(p, side) for p in chunk], add_special_tokens=False)["input_ids"]
                            for side in ("chosen", "rejected"))
        for i, prompt in enumerate(prompts["input_ids"]):
            response = max(len(chosen[i]), len(rejected[i]))
            if len(prompt) + response + 1 > context:
                raise ValueError(
                    f"{source}: row {start + i + 1} ({chunk[i].prompt[:40]!r}...) is {len(prompt)} prompt tokens and "
                    f"{response} tokens in its longer response; scoring it needs {len(prompt) + response + 1} "
                    f"positions, and the model takes {context}. Shorten or drop such rows; nothing is truncated")


def warm_start_key(config, task: Task | None = None) -> str:
    """The cache key of a warm start: everything it depends on, the task's data files by content (a `file:`
    task's file edited in place is a new warm start, the same file elsewhere the same one)."""
    spec = {"v": 1, "model": config.model, "task": config.task, "task_kw": config.task_kw,
            "steps": config.sft_steps, "lr": config.sft_lr, "batch": config.sft_batch, "seed": config.seed,
            "dtype": config.dtype}
    if config.chat_template:  # prompts are formatted differently (only added when on: old keys stay valid)
        spec["chat_template"] = True
    if config.system_prompt or config.answer_format != "whole":  # other prompts or targets (added likewise)
        spec.update(system_prompt=config.system_prompt, answer_format=config.answer_format)
    if isinstance(task, GameTask):  # games: the expert plays a freshly seeded game per sample (was one per deal)
        spec["games"] = 2
    data = task.data_digest() if task is not None else None
    if data is not None:  # procedural tasks have none: their keys stay what they were
        spec["data"] = data
        spec["task"] = config.task.split(":")[0]  # the path no longer matters, the content does
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def warm_start(config, task: Task, progress: bool = True, pairs=()) -> Path | None:
    """Folder of the SFT'd model for this config (built once, then reused from the cache); None if no SFT. The
    task's prompts and the preference `pairs` the run trains on (config.data_path's) are checked against the
    model before SFT."""
    if config.sft_steps <= 0:
        return None
    folder = cache_dir() / "sft" / warm_start_key(config, task)
    if (folder / "config.json").exists():
        return folder
    remove_stale_temps(folder.parent)  # what killed builds left behind
    torch.manual_seed(config.seed)
    model, tokenizer = load_model(config.model, **{**config.model_kw(), "load_in_4bit": False})  # SFT: all weights
    check_task_prompts(task, model, tokenizer, config.max_new_tokens, pairs, config.data_path, engine_limit(config))
    train_sft(model, tokenizer, task, steps=config.sft_steps, lr=config.sft_lr, batch_size=config.sft_batch,
              seed=config.seed, progress=progress)
    return save_model_atomically(model, tokenizer, folder)  # another process may have finished first


WARM_START_FILE = "warm_start.json"  # in a run folder: what it started from (`workbench export` reads it)


def model_digest(name: str) -> str | None:
    """A local model folder by content (sha256 of its files' names and bytes, hidden files and *.md aside), so
    a folder saved over in place is another model; None for a hub id or a model built in code."""
    folder = Path(name)
    if name in IN_CODE_MODELS or name in BUILTIN_MODELS or not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".md"):
        digest.update(f"{path.name}\0{file_sha256(path)}\0".encode())
    return digest.hexdigest()[:16]


def run_start(config, task: Task) -> dict:
    """What a run starts from, as RUN/warm_start.json records it beside the warm start's path: the warm start's
    cache key (SFT runs), the task's data files and the model folder, by content."""
    return {"key": warm_start_key(config, task) if config.sft_steps > 0 else None, "sft_steps": config.sft_steps,
            "data": task.data_digest(), "model": model_digest(config.model)}


def start_changes(recorded: dict, start: dict, config) -> list[str]:
    """What differs between a folder's recorded start and this config's start today, in words."""
    said = {"data": f"the data files of task {config.task!r}", "model": f"the model folder {config.model}",
            "key": "the SFT warm start this config builds (its data or settings)"}
    changed = [name for name in ("data", "model", "key") if name in recorded and recorded[name] != start[name]]
    if "data" in changed or "model" in changed:
        changed = [name for name in changed if name != "key"]  # the key follows the data: name the cause
    return [f"{said[name]} (recorded {recorded[name]}, now {start[name]})" for name in changed]


def check_start(out: Path, config, task: Task) -> dict:
    """This run's start (`run_start`), after refusing a folder that recorded another one: resuming would train
    the old checkpoint's policy on other data, under a reference rebuilt from them. Nothing is written."""
    start, path = run_start(config, task), Path(out) / WARM_START_FILE
    if not path.exists():
        return start
    try:
        recorded = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); restore it, or choose another --out") from None
    changed = start_changes(recorded if isinstance(recorded, dict) else {}, start, config)
    if changed:
        raise ValueError(f"{out} holds a run that started from other inputs: {'; '.join(changed)} changed since. "
                         "Resuming would continue its checkpoint on inputs it was not trained on, under a reference "
                         "built from them; nothing was written. Restore what changed, or choose another --out (or delete the folder to start "
                         "over)")
    return start


def record_warm_start(out: Path, folder: Path | None, start: dict) -> Path:
    """Write RUN/warm_start.json: {"path", "key", "sft_steps", "data", "model"}, the SFT folder the run started
    from ({"path": null} without SFT: it started from config.model) and `run_start`'s fields. Rewritten only when
    it changed (the cache moved, or an older workbench wrote it without data and model), not on a plain resume."""
    record = {"path": None, "key": None, **start}
    if folder is not None:
        record.update(path=str(Path(folder).resolve()), key=Path(folder).name)
    path = Path(out) / WARM_START_FILE
    text = json.dumps(record, indent=2)
    if not path.exists() or path.read_text() != text:
        write_atomic(path, text)
    return path


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
