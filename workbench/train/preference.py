"""Preference training: offline (pairs fixed up front, reference log-probs cached) or online (pairs
sampled from the current policy each step and labelled by the task's verifier).

Same run folder as the RL loop: config.json, metrics.jsonl, summary.json, checkpoints/, report.html.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from workbench import registry
from workbench.recipes import get_recipe
from workbench.rollout import make_engine, policy_forward
from workbench.rollout.engine import encode_prompts, encode_responses
from workbench.tasks import get_task
from workbench.tasks.preferences import (PreferencePair, corrupt, degraded_lists, pair_from, read_pairs, task_lists,
                                         task_pairs)
from workbench.tasks.steps import advantage_steps, sibling_pairs
from workbench.train.checkpoint import load_latest_checkpoint
from workbench.train.evaluate import greedy_accuracy
from workbench.models import (add_lora, checkpoint_state, frozen_copy, frozen_reference, load_checkpoint_state, load_model,
                              merged_state_dict)
from workbench.files import save_atomic, write_atomic
from workbench.train.folder import claim_run_folder, write_run_results
from workbench.train.guards import NonFiniteGuard
from workbench.train.metrics import run_log
from workbench.train.sft import check_task_prompts, record_warm_start, warm_start
from workbench.train.steps import run_steps


def list_logps(model, tokenizer, prompts: list[str], lists: list[list[str]], temperature: float = 1.0,
               ends: list[list[bool]] | None = None):
    """Summed response log-probs and token counts of K responses per prompt, [B, K] each, in one forward pass.

    `ends[b][k]` False scores a partial response (a reasoning step) without the EOS token."""
    K = len(lists[0])
    if any(len(responses) != K for responses in lists):
        raise ValueError("every list needs the same number of responses")
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [p for p in prompts for _ in range(K)], device)
    ids, mask = encode_responses(tokenizer, [r for responses in lists for r in responses], device,
                                 eos=None if ends is None else [e for row in ends for e in row])
    logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, ids, mask, temperature)
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


@dataclass
class Items:
    """One batch of preference data: per prompt, K responses best first (a pair is K = 2), the partial-step
    flags of step-level data, and per-item inputs for the loss ([N] or [N, K] tensors, by name)."""

    prompts: list[str]
    responses: list[list[str]]
    ends: list[list[bool]] | None = None   # False: a partial step, scored without EOS (None: all complete)
    inputs: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompts)

    def select(self, idx: list[int]) -> "Items":
        return Items([self.prompts[i] for i in idx], [self.responses[i] for i in idx],
                     None if self.ends is None else [self.ends[i] for i in idx],
                     {k: v[idx] for k, v in self.inputs.items()})

    def to_json(self) -> str:
        return json.dumps({"prompts": self.prompts, "responses": self.responses, "ends": self.ends,
                           "inputs": {k: v.tolist() for k, v in self.inputs.items()}})

    @staticmethod
    def from_json(text: str) -> "Items":
        d = json.loads(text)
        return Items(d["prompts"], d["responses"], d["ends"], {k: torch.tensor(v) for k, v in d["inputs"].items()})


def pair_items(pairs: list[PreferencePair], inputs: dict | None = None) -> Items:
    return Items([p.prompt for p in pairs], [[p.chosen, p.rejected] for p in pairs], inputs=inputs or {})


ITERATION_UPDATES = ("ref", "prev", "momentum")


def has_own_weights(model) -> bool:
    """A reference with weights of its own (a copy, checkpointed), not the adapter-disabled policy."""
    return isinstance(model, torch.nn.Module)


def preference_recipe(config):
    """The preference recipe with the config's overrides applied to its loss: recipe_overrides {"loss": {kw: value}}
    and kl_coef (the loss's beta). Anything a preference loop cannot apply is refused (a run never records a
    setting it ignored)."""
    recipe = get_recipe(config.recipe)
    unknown = sorted(set(config.recipe_overrides) - {"loss"})
    if unknown or config.entropy_coef is not None:
        raise ValueError(f"recipe {recipe.key!r} is a preference recipe: recipe_overrides take only "
                         f'{{"loss": {{...}}}} (its loss keywords) and kl_coef its beta; got overrides {unknown}'
                         + (f" and entropy_coef={config.entropy_coef}" if config.entropy_coef is not None else ""))
    kw = dict(config.recipe_overrides.get("loss", {}))
    if config.kl_coef is not None:
        kw["beta"] = config.kl_coef
    params = inspect.signature(registry.get("preference", recipe.loss).fn).parameters
    bad = sorted(set(kw) - set(params))
    if bad:
        raise ValueError(f"recipe {recipe.key!r}: its loss {recipe.loss!r} takes no {bad}; its keywords: "
                         f"{sorted(k for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)}")
    return dataclasses.replace(recipe, loss_kw={**recipe.loss_kw, **kw}) if kw else recipe


class PreferenceTrainer:
    """Trains a preference recipe (see `workbench.recipes.PREFERENCE_RECIPES`).

    Models: the policy, the reference π_ref and, for recipes anchored at an earlier iterate, `prev`. Every
    `iteration_steps` steps the recipe's `iteration_update` moves them: "ref" π_ref ← π (SPPO, iterative DPO),
    "prev" π_t ← π with π_ref fixed (INPO, Nash-MP), "momentum" π̂_{t−1} ← π_ref ← π (APO).
    """

    def __init__(self, config, out, progress: bool = True, callback=None):
        self.config, self.out, self.progress, self.callback = config, Path(out), progress, callback
        self.recipe = preference_recipe(config)
        if self.recipe.iteration_update not in ITERATION_UPDATES:
            raise ValueError(f"recipe {self.recipe.key!r}: iteration_update must be one of {ITERATION_UPDATES}, "
                             f"got {self.recipe.iteration_update!r}")
        if any("prev_" in spec for spec in self.recipe.loss_inputs) and self.recipe.iteration_update == "ref":
            raise ValueError(f"recipe {self.recipe.key!r} asks for prev_* inputs but keeps no previous model "
                             "(set iteration_update to 'prev' or 'momentum')")
        self.loss = registry.get("preference", self.recipe.loss)
        self.task = get_task(config.task, **config.task_kw)
        self.log = run_log(self.out, config)  # metrics.jsonl (+ TensorBoard with report_to="tensorboard")
        self.nonfinite = NonFiniteGuard(config.nonfinite)

    def setup(self) -> "PreferenceTrainer":
        if hasattr(self, "model"):
            return self
        self.lock = claim_run_folder(self.out, self.config)
        c = self.config
        torch.set_num_threads(c.threads)
        folder = warm_start(c, self.task, progress=self.progress)
        record_warm_start(self.out, c, folder)  # `workbench export` rebuilds the policy from it
        self.model, self.tokenizer = load_model(str(folder) if folder else c.model, **c.model_kw())
        check_task_prompts(self.task, self.model, self.tokenizer, c.max_new_tokens)
        if c.lora_r > 0:
            self.model = add_lora(self.model, r=c.lora_r, alpha=2 * c.lora_r)
        r = self.recipe
        moving_ref = r.iteration_steps and r.iteration_update in ("ref", "momentum")
        # a reference that moves to the policy needs its own weights; a fixed one under LoRA is the base itself
        self.ref = frozen_copy(self.model) if moving_ref else frozen_reference(self.model)
        self.prev = frozen_copy(self.model) if r.iteration_update != "ref" else None
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=c.lr,
                                           weight_decay=c.weight_decay)
        self.engine = make_engine(c, self.model, self.tokenizer)  # samples online items and step data
        self.items = None if self.recipe.online else self.dataset()
        self.ref_cache = self.reference_logps(self.items) if self.items is not None else None
        return self

    # ------------------------------------------------------------------ data

    def dataset(self) -> Items:
        """Offline items, built once and kept in the run folder (items.json) so a resumed run trains on the
        same data: verified pairs, K-lists, pairs with degraded copies of the chosen answer, or steps."""
        path = self.out / "items.json"
        if path.exists():
            try:
                return Items.from_json(path.read_text())
            except (ValueError, KeyError, TypeError) as err:  # damaged; it is rebuilt from the config, identically
                print(f"warning: {path} is damaged ({type(err).__name__}: {err}); building it again", file=sys.stderr)
        c, r = self.config, self.recipe
        if r.data == "lists":
            lists = task_lists(self.task, c.pairs, r.list_size, seed=c.seed)
            items = Items([p for p, _ in lists], [ranked for _, ranked in lists])
        elif r.data == "steps":
            torch.manual_seed(c.seed)
            steps = advantage_steps(self.engine, self.task, self.task.sample(c.pairs, random.Random(f"steps-{c.seed}")),
                                    step_chars=r.step_chars, k=r.rollouts_per_state, max_new_tokens=c.max_new_tokens,
                                    temperature=c.temperature)
            items = Items([s.prompt for s in steps], [[s.step] for s in steps], [[s.final] for s in steps],
                          {"advantages": torch.tensor([s.advantage for s in steps])})
        elif c.data_path:
            items = pair_items(read_pairs(c.data_path))
        else:
            pairs = task_pairs(self.task, c.pairs, seed=c.seed)
            # task pairs are verified-correct ≻ wrong: rewards 1 and 0 (a JSONL file carries none)
            items = pair_items(pairs, {"chosen_reward": torch.ones(len(pairs)),
                                       "rejected_reward": torch.zeros(len(pairs))})
            if r.data == "degraded":
                lists = degraded_lists(pairs, r.degrade_fractions, seed=c.seed)
                items.responses = [ranked for _, ranked in lists]
        if r.data not in ("pairs", "lists", "degraded", "steps"):
            raise ValueError(f"recipe {r.key!r}: unknown offline data {r.data!r} (pairs, lists, degraded, steps)")
        write_atomic(path, items.to_json())
        return items

    def online_items(self, step: int) -> Items:
        """Items sampled from the current policy and labelled by the verifier: best-vs-worst pairs with win
        rates and rewards, K-lists with rewards, or step-level sibling pairs with their values."""
        c, r = self.config, self.recipe
        rng = random.Random(f"{c.seed}-{step}")
        torch.manual_seed(c.seed * 1_000_003 + step)
        examples = self.task.sample(c.prompts_per_step, rng)
        if r.data == "siblings":
            pairs = sibling_pairs(self.engine, self.task, examples, rng, step_chars=r.step_chars,
                                  children=c.group_size, k=r.rollouts_per_state, max_new_tokens=c.max_new_tokens,
                                  temperature=c.temperature)
            return Items([p.prompt for p in pairs], [[p.chosen, p.rejected] for p in pairs],
                         [[p.chosen_final, p.rejected_final] for p in pairs],
                         {"chosen_q": torch.tensor([p.chosen_q for p in pairs]),
                          "rejected_q": torch.tensor([p.rejected_q for p in pairs])})
        G = r.list_size if r.data == "lists" else c.group_size
        gen = self.engine.generate([e.prompt for e in examples], n=G, max_new_tokens=c.max_new_tokens,
                                   temperature=c.temperature, top_p=c.top_p, stop=c.stop or None)
        groups = [(e, gen.texts[i * G:(i + 1) * G]) for i, e in enumerate(examples)]
        if r.data == "lists":  # BRAIn: all K samples, each with its reward
            return Items([e.prompt for e, _ in groups], [samples for _, samples in groups],
                         inputs={"list_rewards": torch.tensor([self.task.rewards(s, [e] * G) for e, s in groups])})
        items, winrates, rewards = [], [], []
        for e, samples in groups:
            pair = pair_from(self.task, e, samples)
            if pair is None or not pair.chosen or not pair.rejected:
                continue
            items.append(pair)
            winrates.append([win_rate(self.task, e, y, samples) for y in (pair.chosen, pair.rejected)])
            rewards.append([self.task.score(y, e) for y in (pair.chosen, pair.rejected)])
        rates, scores = torch.tensor(winrates).view(-1, 2), torch.tensor(rewards).view(-1, 2)
        return pair_items(items, {"chosen_winrate": rates[:, 0], "rejected_winrate": rates[:, 1],
                                  "chosen_reward": scores[:, 0], "rejected_reward": scores[:, 1]})

    def item_logps(self, model, items: Items) -> tuple[torch.Tensor, torch.Tensor]:
        return list_logps(model, self.tokenizer, items.prompts, items.responses, self.config.temperature, items.ends)

    @torch.no_grad()
    def frozen_logps(self, model, items: Items) -> torch.Tensor:
        """[N, K] log-probs under a frozen model, in chunks of 256 items."""
        return torch.cat([self.item_logps(model, items.select(list(range(i, min(i + 256, len(items))))))[0]
                          for i in range(0, len(items), 256)])

    def reference_logps(self, items: Items) -> torch.Tensor:
        """[N, K] reference log-probs of every offline item, computed once and cached in the run folder."""
        path = self.out / "ref_logps.pt"
        if path.exists():
            try:
                cached = torch.load(path)
                if cached.shape[0] == len(items):
                    return cached
            except Exception as err:  # a cache: recomputed when unreadable
                print(f"warning: {path} is damaged ({type(err).__name__}); computing it again", file=sys.stderr)
        cached = self.frozen_logps(self.ref, items)
        save_atomic(cached, path)
        return cached

    # ------------------------------------------------------------------ one step

    def step_items(self, step: int) -> tuple[Items, torch.Tensor | None]:
        """The step's items and, offline, their cached reference log-probs [B, K]."""
        if self.recipe.online:
            return self.online_items(step), None
        rng = random.Random(f"{self.config.seed}-{step}")
        idx = rng.sample(range(len(self.items)), min(self.config.prompts_per_step, len(self.items)))
        return self.items.select(idx), self.ref_cache[idx]

    def push_weights(self) -> None:
        """Give a separate rollout engine (vLLM) the policy's current weights (HF generate needs none)."""
        if self.engine.needs_weights:
            self.engine.load_weights(merged_state_dict(self.model))

    def next_iteration(self) -> None:
        """Move the anchors at an iteration boundary (see the class docstring)."""
        if self.recipe.iteration_update == "momentum":
            self.prev.load_state_dict(self.ref.state_dict())
        anchor = self.prev if self.recipe.iteration_update == "prev" else self.ref
        anchor.load_state_dict(self.model.state_dict())

    def loss_inputs(self, items: Items, logps, lengths, ref) -> dict:
        """The recipe's extra loss inputs, by name ("kw=source" renames): lengths, rewards, win rates, values,
        the previous iterate's log-probs, the degraded copies' log-probs."""
        available = {"chosen_len": lengths[:, 0], "rejected_len": lengths[:, -1], **items.inputs}
        if logps.shape[1] > 2:
            available.update(degraded_logp=logps[:, 1:-1], ref_degraded_logp=ref[:, 1:-1])
        specs = [(kw, source or kw) for kw, _, source in (spec.partition("=") for spec in self.recipe.loss_inputs)]
        if any(source.startswith("prev_") for _, source in specs):
            prev = self.frozen_logps(self.prev, items)
            available.update(prev_chosen_logp=prev[:, 0], prev_rejected_logp=prev[:, -1])
        missing = [source for _, source in specs if source not in available]
        if missing:
            raise ValueError(f"recipe {self.recipe.key!r} needs per-item inputs {missing}, which this data source "
                             "does not provide (JSONL pairs carry no rewards)")
        return {kw: available[source] for kw, source in specs}

    def compute_loss(self, logps, ref, inputs: dict):
        """The registered loss on the recipe's layout: a whole list, one step per item, or a pair (first vs
        last response)."""
        fn, kw = self.loss.fn, self.recipe.loss_kw
        if self.recipe.data == "lists":
            return fn(logps, None, ref, None, **kw, **inputs)
        if self.recipe.data == "steps":
            return fn(logps[:, 0], ref[:, 0], **kw, **inputs)
        return fn(logps[:, 0], logps[:, -1], ref[:, 0], ref[:, -1], **kw, **inputs)

    def step(self, step: int) -> dict:
        c, t0 = self.config, time.perf_counter()
        if self.recipe.iteration_steps and step % self.recipe.iteration_steps == 0 and step > 0:
            self.next_iteration()
        items, ref = self.step_items(step)
        row = {"step": step, "pairs": len(items)}
        if not len(items):
            return {**row, "time/step": time.perf_counter() - t0}  # online: no prompt separated its samples
        if ref is None:
            ref = self.frozen_logps(self.ref, items)
        self.model.train()
        logps, lengths = self.item_logps(self.model, items)
        loss, metrics = self.compute_loss(logps, ref, self.loss_inputs(items, logps, lengths, ref))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip))
        if self.nonfinite.allows(step, loss.item(), grad_norm):
            self.optimizer.step()
            self.push_weights()  # a separate engine (vLLM) samples the next items with the new weights
        return {**row, "loss/preference": loss.item(), **metrics, "grad_norm": grad_norm, **self.nonfinite.metrics(),
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
                                            max_new_tokens=self.config.max_new_tokens, stop=self.config.stop)
        return {"accuracy": task_acc, "preference_accuracy": self.preference_accuracy(), "records": records}

    # ------------------------------------------------------------------ the run

    def run(self) -> dict:
        try:
            return self.train_and_evaluate()
        finally:
            self.close()

    def close(self) -> None:
        """Give the run folder back (the lock goes with the process anyway)."""
        if getattr(self, "lock", None) is not None:
            self.lock.release()

    def train_and_evaluate(self) -> dict:
        c = self.config
        self.setup()
        state = load_latest_checkpoint(self.out)
        if state is None:
            start, before = 0, {k: v for k, v in self.evaluate().items() if k != "records"}
            self.log.truncate(0)
        else:
            load_checkpoint_state(self.model, state["model"])
            if state["ref"] is not None:
                load_checkpoint_state(self.ref, state["ref"])  # iterative recipes move their reference
            if self.prev is not None:
                load_checkpoint_state(self.prev, state["prev"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.push_weights()  # a separate engine still holds the start
            start, before = state["step"], state["before"]
            self.log.truncate(start)
        run_steps(self.step, lambda done: {"step": done, "model": checkpoint_state(self.model),
                                           "ref": checkpoint_state(self.ref) if has_own_weights(self.ref) else None,
                                           "optimizer": self.optimizer.state_dict(), "before": before,
                                           "prev": checkpoint_state(self.prev) if self.prev is not None else None},
                  out=self.out, log=self.log, start=start, config=c, desc=f"{c.recipe} on {c.task}",
                  progress=self.progress, callback=self.callback)
        after = self.evaluate()
        summary = {"recipe": c.recipe, "task": c.task, "model": c.model, "preset": c.preset, "seed": c.seed,
                   "steps": c.steps, "accuracy_before": before["accuracy"], "accuracy_after": after["accuracy"],
                   "preference_accuracy_before": before["preference_accuracy"],
                   "preference_accuracy_after": after["preference_accuracy"], "eval_size": len(after["records"])}
        write_run_results(self.out, summary, after["records"])
        return summary
