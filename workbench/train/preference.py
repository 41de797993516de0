"""Preference training: offline (pairs fixed up front, reference log-probs cached) or online (pairs
sampled from the current policy each step and labelled by the task's verifier).

Same run folder as the RL loop: config.json, metrics.jsonl, summary.json, checkpoints/, report.html.
"""
from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path

import torch

from workbench import registry
from workbench.recipes import get_recipe
from workbench.rollout import HFEngine, policy_forward
from workbench.rollout.engine import encode_responses
from workbench.tasks import get_task
from workbench.tasks.preferences import PreferencePair, corrupt, pair_from, read_pairs, task_lists, task_pairs
from workbench.train.checkpoint import latest_checkpoint, load_checkpoint, prepare_run_folder
from workbench.train.evaluate import greedy_accuracy
from workbench.models import load_model
from workbench.train.metrics import MetricsLog, read_rows
from workbench.train.sft import warm_start
from workbench.train.steps import run_steps


def list_logps(model, tokenizer, prompts: list[str], lists: list[list[str]], temperature: float = 1.0):
    """Summed response log-probs and token counts of K responses per prompt, [B, K] each, in one forward pass."""
    K = len(lists[0])
    if any(len(responses) != K for responses in lists):
        raise ValueError("every list needs the same number of responses")
    device = next(model.parameters()).device
    enc = tokenizer([p for p in prompts for _ in range(K)], return_tensors="pt", padding=True)
    ids, mask = encode_responses(tokenizer, [r for responses in lists for r in responses], device)
    logp, _, _ = policy_forward(model, enc["input_ids"].to(device), enc["attention_mask"].to(device), ids, mask,
                                temperature)
    return (logp * mask).sum(-1).view(-1, K), mask.sum(-1).view(-1, K)


def sequence_logps(model, tokenizer, pairs: list[PreferencePair], temperature: float = 1.0):
    """Summed log-probs of chosen and rejected ([B] each) and their token counts: a pair is a list of two."""
    logps, lengths = list_logps(model, tokenizer, [p.prompt for p in pairs], [[p.chosen, p.rejected] for p in pairs],
                                temperature)
    return logps[:, 0], logps[:, 1], lengths[:, 0], lengths[:, 1]


def win_rate(task, example, response: str, samples: list[str]) -> float:
    """P(response beats a sample of the policy), from verifier scores: 1 if higher, 1/2 if equal."""
    mine = task.score(response, example)
    scores = [task.score(s, example) for s in samples]
    return sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in scores) / len(scores)


def held_out_pairs(task, n: int) -> list[PreferencePair]:
    """target ≻ corrupted target on the task's fixed held-out prompts."""
    rng = random.Random("held-out-pairs")
    return [PreferencePair(e.prompt, e.target, corrupt(e.target, rng)) for e in task.eval_set(n)]


class PreferenceTrainer:
    """Trains a preference recipe (see `workbench.recipes.PREFERENCE_RECIPES`)."""

    def __init__(self, config, out, progress: bool = True, callback=None):
        self.config, self.out, self.progress, self.callback = config, Path(out), progress, callback
        self.recipe = get_recipe(config.recipe)
        self.loss = registry.get("preference", self.recipe.loss)
        self.task = get_task(config.task, **config.task_kw)
        self.log = MetricsLog(self.out / "metrics.jsonl")

    def setup(self) -> "PreferenceTrainer":
        if hasattr(self, "model"):
            return self
        prepare_run_folder(self.out, self.config.to_json(), type(self.config)().to_json())
        c = self.config
        torch.set_num_threads(c.threads)
        folder = warm_start(c, self.task, progress=self.progress)
        self.model, self.tokenizer = load_model(str(folder) if folder else c.model, dtype=c.dtype,
                                                device=c.device, seed=c.seed)
        self.ref = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        self.engine = HFEngine(self.model, self.tokenizer)
        self.pairs = [] if self.recipe.online else self.dataset()
        self.ref_cache = self.reference_logps(self.pairs) if self.pairs else None
        return self

    def dataset(self) -> list[tuple[str, list[str]]]:
        """Offline items (prompt, responses best first): pairs, or K-lists for listwise recipes."""
        c, k = self.config, self.recipe.list_size
        if k:
            return task_lists(self.task, c.pairs, k, seed=c.seed)
        pairs = read_pairs(c.data_path) if c.data_path else task_pairs(self.task, c.pairs, seed=c.seed)
        return [(p.prompt, [p.chosen, p.rejected]) for p in pairs]

    def item_logps(self, model, items) -> tuple[torch.Tensor, torch.Tensor]:
        return list_logps(model, self.tokenizer, [p for p, _ in items], [r for _, r in items], self.config.temperature)

    def reference_logps(self, items) -> torch.Tensor:
        """[N, K] reference log-probs of every offline item, computed once and cached in the run folder."""
        path = self.out / "ref_logps.pt"
        if path.exists():
            cached = torch.load(path)
            if cached.shape[0] == len(items):
                return cached
        with torch.no_grad():
            cached = torch.cat([self.item_logps(self.ref, items[i:i + 256])[0] for i in range(0, len(items), 256)])
        torch.save(cached, path)
        return cached

    # ------------------------------------------------------------------ one step

    def step_pairs(self, step: int) -> tuple[list[tuple[str, list[str]]], torch.Tensor | None, dict]:
        """The step's items (prompt, responses best first), their cached reference log-probs [B, K] (offline),
        and per-item extras (win rates, rewards)."""
        c = self.config
        rng = random.Random(f"{c.seed}-{step}")
        if not self.recipe.online:
            idx = rng.sample(range(len(self.pairs)), min(c.prompts_per_step, len(self.pairs)))
            return [self.pairs[i] for i in idx], self.ref_cache[idx], self.pair_rewards(len(idx))
        torch.manual_seed(c.seed * 1_000_003 + step)
        examples = self.task.sample(c.prompts_per_step, rng)
        gen = self.engine.generate([e.prompt for e in examples], n=c.group_size, max_new_tokens=c.max_new_tokens,
                                   temperature=c.temperature, top_p=c.top_p)
        G = c.group_size
        pairs, winrates, rewards = [], [], []
        for i, e in enumerate(examples):
            samples = [t for t in gen.texts[i * G:(i + 1) * G]]
            pair = pair_from(self.task, e, samples)
            if pair is None or not pair.chosen or not pair.rejected:
                continue
            pairs.append((pair.prompt, [pair.chosen, pair.rejected]))
            winrates.append([win_rate(self.task, e, y, samples) for y in (pair.chosen, pair.rejected)])
            rewards.append([self.task.score(y, e) for y in (pair.chosen, pair.rejected)])
        extras = {}
        if pairs:
            rates, scores = torch.tensor(winrates), torch.tensor(rewards)
            extras = {"chosen_winrate": rates[:, 0], "rejected_winrate": rates[:, 1],
                      "chosen_reward": scores[:, 0], "rejected_reward": scores[:, 1]}
        return pairs, None, extras

    def pair_rewards(self, n: int) -> dict:
        """Offline task pairs are verified-correct ≻ wrong: rewards 1 and 0 (a JSONL file carries none)."""
        if self.config.data_path:
            return {}
        return {"chosen_reward": torch.ones(n), "rejected_reward": torch.zeros(n)}

    def step(self, step: int) -> dict:
        c, t0 = self.config, time.perf_counter()
        if self.recipe.iteration_steps and step % self.recipe.iteration_steps == 0:
            self.ref.load_state_dict(self.model.state_dict())  # the new iteration's reference pi_t
        pairs, ref, extras = self.step_pairs(step)
        row = {"step": step, "pairs": len(pairs)}
        if not pairs:
            return {**row, "time/step": time.perf_counter() - t0}  # online: no prompt separated its samples
        if ref is None:
            with torch.no_grad():
                ref = self.item_logps(self.ref, pairs)[0]
        self.model.train()
        logps, lengths = self.item_logps(self.model, pairs)
        available = {"chosen_len": lengths[:, 0], "rejected_len": lengths[:, -1], **extras}
        missing = [name for name in self.recipe.loss_inputs if name not in available]
        if missing:
            raise ValueError(f"recipe {self.recipe.key!r} needs per-pair inputs {missing}, which this data source "
                             "does not provide (JSONL pairs carry no rewards)")
        inputs = {name: available[name] for name in self.recipe.loss_inputs}
        if self.recipe.list_size:  # listwise: the whole [B, K] list in the "chosen" slots
            loss, metrics = self.loss.fn(logps, None, ref, None, **self.recipe.loss_kw, **inputs)
        else:
            loss, metrics = self.loss.fn(logps[:, 0], logps[:, 1], ref[:, 0], ref[:, 1], **self.recipe.loss_kw,
                                         **inputs)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip))
        self.optimizer.step()
        return {**row, "loss/preference": loss.item(), **metrics, "grad_norm": grad_norm,
                "time/step": time.perf_counter() - t0}

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def preference_accuracy(self) -> float:
        """Held-out pairs where the policy gives the chosen answer the higher log-prob."""
        pairs = held_out_pairs(self.task, self.config.eval_size)
        chosen, rejected, _, _ = sequence_logps(self.model, self.tokenizer, pairs, self.config.temperature)
        return float((chosen > rejected).float().mean())

    def evaluate(self) -> dict:
        task_acc, records = greedy_accuracy(self.engine, self.task, self.task.eval_set(self.config.eval_size),
                                            max_new_tokens=self.config.max_new_tokens)
        return {"accuracy": task_acc, "preference_accuracy": self.preference_accuracy(), "records": records}

    # ------------------------------------------------------------------ the run

    def run(self) -> dict:
        c = self.config
        self.setup()
        ckpt = latest_checkpoint(self.out)
        if ckpt is None:
            start, before = 0, {k: v for k, v in self.evaluate().items() if k != "records"}
            if read_rows(self.out / "metrics.jsonl"):
                self.log.truncate(0)
        else:
            state = load_checkpoint(ckpt)
            self.model.load_state_dict(state["model"])
            self.ref.load_state_dict(state["ref"])  # iterative recipes move their reference
            self.optimizer.load_state_dict(state["optimizer"])
            start, before = state["step"], state["before"]
            self.log.truncate(start)
        run_steps(self.step, lambda done: {"step": done, "model": self.model.state_dict(), "ref": self.ref.state_dict(),
                                           "optimizer": self.optimizer.state_dict(), "before": before},
                  out=self.out, log=self.log, start=start, config=c, desc=f"{c.recipe} on {c.task}",
                  progress=self.progress, callback=self.callback)
        after = self.evaluate()
        summary = {"recipe": c.recipe, "task": c.task, "model": c.model, "preset": c.preset, "seed": c.seed,
                   "steps": c.steps, "accuracy_before": before["accuracy"], "accuracy_after": after["accuracy"],
                   "preference_accuracy_before": before["preference_accuracy"],
                   "preference_accuracy_after": after["preference_accuracy"], "eval_size": len(after["records"])}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
