"""The RL loop: rollout -> reward -> advantage -> objective over ppo_epochs x minibatches.

The loop never branches on algorithm names: it looks up the recipe's components in the registry.
Every step is seeded from (seed, step), so a resumed run reproduces the steps it had not logged.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import random
import time
from pathlib import Path

import torch

from workbench import ops, registry
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch
from workbench.models import add_lora, frozen_reference, load_model
from workbench.preference.proximal import soup_model
from workbench.preference.selfplay import preferences_from_scores
from workbench.recipes import Recipe, get_recipe
from workbench.regularizers.entropy import entropy_bonus
from workbench.regularizers.kl_penalty import AdaptiveKLController, kl_in_loss, kl_in_reward
from workbench.regularizers.masks import fill_groups
from workbench.rollout import make_engine, policy_forward, sample_groups
from workbench.tasks import get_task
from workbench.train.checkpoint import latest_checkpoint, load_checkpoint, prepare_run_folder
from workbench.train.config import RunConfig
from workbench.train.distributed import DataParallel
from workbench.train.evaluate import greedy_accuracy
from workbench.train.metrics import MetricsLog, read_rows
from workbench.train.sft import warm_start
from workbench.train.steps import run_steps


def resolve_recipe(config: RunConfig) -> Recipe:
    """The recipe with the config's overrides (kl_coef, entropy_coef, recipe_overrides) applied."""
    recipe = get_recipe(config.recipe)
    changes = dict(config.recipe_overrides)
    if config.kl_coef is not None:
        changes["kl_coef"] = config.kl_coef
    if config.entropy_coef is not None:
        changes["entropy_coef"] = config.entropy_coef
    names = {f.name for f in dataclasses.fields(Recipe)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise ValueError(f"unknown recipe fields {unknown} in overrides; valid: {sorted(names)}")
    return dataclasses.replace(recipe, **changes)


class ValueHead(torch.nn.Module):
    """V(s_t) from the policy's last hidden state (shared trunk)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.proj.weight)
        torch.nn.init.zeros_(self.proj.bias)

    def forward(self, hidden):
        return self.proj(hidden.float()).squeeze(-1)


def mismatch_metrics(old_logp, mu_logp, mask) -> dict:
    """How far the rollout engine's log-probs (mu) are from the trainer's (old) on the same tokens [B, T].

    ratio = exp(old - mu) is the importance weight that TIS/MiniRL correct with; both are ~0 / ~1 with HF
    generate (same model, same kernels) and grow with a separate engine (vLLM) or stale weights.
    """
    valid = mask > 0
    diff = torch.where(valid, old_logp - mu_logp, torch.zeros_like(old_logp))  # [B, T], 0 off the mask
    ratio = torch.where(valid, diff.exp(), torch.zeros_like(diff))
    return {"mismatch/logp_abs_mean": float(ops.masked_mean(diff.abs(), mask)),
            "mismatch/logp_abs_max": float(diff.abs().max()),
            "mismatch/is_ratio_mean": float(ops.masked_mean(ratio, mask)),
            "mismatch/is_ratio_max": float(ratio.max())}


class Trainer:
    """One run folder: config.json, metrics.jsonl, summary.json, checkpoints/, report.html."""

    def __init__(self, config: RunConfig, out: str | Path, progress: bool = True, callback=None):
        self.config, self.out, self.progress, self.callback = config, Path(out), progress, callback
        self.recipe = resolve_recipe(config)
        self.advantage = registry.get("advantage", self.recipe.advantage)
        self.objective = registry.get("objective", self.recipe.objective)
        self.token_masks = [registry.get("data", key) for key in self.recipe.token_masks]
        if self.recipe.critic and not hasattr(self.advantage.fn, "critic_targets"):
            raise ValueError(f"recipe {self.recipe.key!r} trains a critic, but advantage {self.recipe.advantage!r} "
                             "defines no critic targets (use gae or t-ppo)")
        if self.recipe.agg not in ops.AGG_MODES:
            raise ValueError(f"recipe {self.recipe.key!r}: unknown aggregation {self.recipe.agg!r}")
        self.task = get_task(config.task, **config.task_kw)
        self.log = MetricsLog(self.out / "metrics.jsonl")
        self.parallel = DataParallel(config.distributed, config.device)  # one process unless launched with N

    # ------------------------------------------------------------------ set-up

    def build_models(self) -> None:
        c = self.config
        torch.set_num_threads(c.threads)
        folder = warm_start(c, self.task, progress=self.progress and self.parallel.is_main)
        self.model, self.tokenizer = load_model(str(folder) if folder else c.model, **c.model_kw())
        if self.recipe.reference == "soup":
            self.model = self.soup_of_two_sft_runs()
        if c.lora_r > 0:
            self.model = add_lora(self.model, r=c.lora_r, alpha=2 * c.lora_r)
        r = self.recipe
        kl_term = r.kl_placement != "none" and (r.kl_coef > 0 or r.kl_target is not None)
        needs_ref = kl_term or c.track_kl  # beta = 0 and no KL logging: skip the reference forward pass
        self.ref = frozen_reference(self.model) if needs_ref else None  # LoRA: the adapter-disabled base
        self.value_head = ValueHead(self.model.config.hidden_size).to(c.device) if r.critic else None
        replica = self.parallel.wrap(self.model)  # FSDP: shards the policy, returns a full copy to sample from
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay)
        self.engine = make_engine(c, self.model, self.tokenizer, replica)
        self.kl_controller = AdaptiveKLController(r.kl_coef, r.kl_target, r.kl_horizon) if r.kl_target else None
        self.shaping = [(registry.get("reward", key).fn, kw) for key, kw in r.reward_shaping]
        self.shaping_state = {i: fn.init_state() for i, (fn, _) in enumerate(self.shaping)
                              if hasattr(fn, "init_state")}  # running statistics, checkpointed

    def soup_of_two_sft_runs(self):
        """SALSA: the uniform weight average of this config's SFT model and a second one fine-tuned from seed + 1
        (the policy starts there and the KL reference is that soup). Without SFT the second ingredient is the
        model loaded with seed + 1: the same checkpoint for a pretrained model (the soup is then that model)."""
        c = self.config
        other = warm_start(dataclasses.replace(c, seed=c.seed + 1), self.task, progress=self.progress)
        second, _ = load_model(str(other) if other else c.model, **{**c.model_kw(), "seed": c.seed + 1})
        return soup_model([self.model, second]).train().requires_grad_(True)

    def trained_modules(self) -> torch.nn.ModuleList:
        """Everything the optimizer updates, in its parameter order (policy, then value head)."""
        return torch.nn.ModuleList([self.model] + ([self.value_head] if self.value_head is not None else []))

    def push_weights(self) -> None:
        """Give a separate rollout engine (vLLM, or the replica beside an FSDP policy) the current weights."""
        if self.engine.needs_weights:
            self.engine.load_weights(self.parallel.full_weights(self.model))

    @property
    def kl_beta(self) -> float:
        return self.kl_controller.beta if self.kl_controller else self.recipe.kl_coef

    def state(self, step: int, accuracy_before: float) -> dict:
        return {"step": step, "model": self.parallel.model_state(self.model),
                "optimizer": self.parallel.optimizer_state(self.trained_modules(), self.optimizer),
                "value_head": self.value_head.state_dict() if self.value_head else None,
                "kl_beta": self.kl_beta, "shaping_state": copy.deepcopy(self.shaping_state),
                "accuracy_before": accuracy_before}

    def restore(self) -> tuple[int, float | None]:
        ckpt = latest_checkpoint(self.out)
        if ckpt is None:
            if read_rows(self.out / "metrics.jsonl") and self.parallel.is_main:
                self.log.truncate(0)  # logged steps without a checkpoint are recomputed from scratch
            return 0, None
        state = load_checkpoint(ckpt)
        self.parallel.load_model_state(self.model, state["model"])
        self.parallel.load_optimizer_state(self.trained_modules(), self.optimizer, state["optimizer"])
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        if self.kl_controller is not None:
            self.kl_controller.beta = state.get("kl_beta", self.kl_controller.beta)
        self.shaping_state = state.get("shaping_state", self.shaping_state)  # absent in older checkpoints
        self.push_weights()  # a separate engine still holds the initial weights
        if self.parallel.is_main:
            self.log.truncate(state["step"])
        return state["step"], state["accuracy_before"]

    # ------------------------------------------------------------------ one step

    def sample(self, step: int, round: int = 0) -> RolloutBatch:
        """Draw prompts for (step, round), sample G responses each, score and shape the rewards."""
        c, recipe = self.config, self.recipe
        self.sample_info = {}  # metrics of the reward step (SPO's win-rate statistics)
        examples = self.parallel.shard(self.task.sample(c.prompts_per_step, random.Random(f"{c.seed}-{step}-{round}")))
        batch = sample_groups(self.engine, self.task, examples, group_size=c.group_size,
                              max_new_tokens=c.max_new_tokens, temperature=c.temperature, top_p=c.top_p,
                              stop=c.stop)
        batch.scores = batch.rewards.clone()
        if recipe.preference_reward:  # SPO: reward = win rate against the group under the verifier's judgments
            judge = registry.get("preference", recipe.preference_reward).fn
            wins, self.sample_info = judge(preferences_from_scores(batch.rewards.view(-1, c.group_size)))
            batch.rewards = wins.flatten().to(batch.rewards.dtype)
        for i, (fn, kw) in enumerate(self.shaping):
            state = {"state": self.shaping_state[i]} if i in self.shaping_state else {}
            batch.rewards = fn(batch.rewards, batch.lengths, max_len=c.max_new_tokens, **kw, **state)
        if recipe.baseline_rollout:
            greedy = self.engine.generate([e.prompt for e in examples], max_new_tokens=c.max_new_tokens,
                                          greedy=True, stop=c.stop)
            baseline = torch.tensor(self.task.rewards(greedy.texts, examples), dtype=batch.rewards.dtype)
            batch.baseline_rewards = baseline.repeat_interleave(c.group_size)
        return batch

    def sample_informative(self, step: int) -> tuple[RolloutBatch, dict]:
        """DAPO dynamic sampling: keep only groups with reward spread, resampling up to the recipe's rounds."""
        batch, info = fill_groups(lambda round: self.sample(step, round), self.config.prompts_per_step,
                                  max_rounds=self.recipe.dynamic_sampling_rounds,
                                  pad_id=self.tokenizer.pad_token_id)
        if batch.size == 0:  # no group with any spread: train on the first round (all A = 0, logged as such)
            batch = self.sample(step, 0)
        return batch, {"sampling/rounds": info["rounds"], "sampling/shortfall_groups": info["shortfall"]}

    @torch.no_grad()
    def rollout(self, step: int) -> RolloutBatch:
        """The step's batch with old/ref log-probs, values, masks and advantages filled in.

        Sampling metrics (dynamic-sampling rounds, filtered share) are left in `self.rollout_info`.
        """
        c, recipe = self.config, self.recipe
        torch.manual_seed(c.seed * 1_000_003 + step + 7_919 * self.parallel.rank)
        batch, info = self.sample_informative(step) if recipe.dynamic_sampling_rounds else (self.sample(step), {})
        old_logp, entropy, hidden = policy_forward(
            self.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask, c.temperature,
            with_entropy=True, with_hidden=self.value_head is not None)
        batch.old_logp, batch.entropy = old_logp * batch.mask, entropy * batch.mask
        if self.ref is not None:
            ref_logp, _, _ = policy_forward(self.ref, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                            batch.mask, c.temperature)
            batch.ref_logp = ref_logp * batch.mask
        if self.value_head is not None:
            batch.values = batch.old_values = self.value_head(hidden) * batch.mask
        for entry in self.token_masks:
            batch.mask = entry.fn(batch)
        if recipe.kl_placement == "reward" and self.kl_beta:
            batch.token_rewards = kl_in_reward(batch.old_logp, batch.ref_logp, batch.mask,
                                               beta=self.kl_beta, estimator=recipe.kl_estimator)
        batch.advantages = self.advantage.fn(batch, **recipe.advantage_kw).float()
        if self.value_head is not None:
            returns, value_mask = self.advantage.fn.critic_targets(batch, **recipe.advantage_kw)
            batch.returns, batch.value_mask = returns.float(), value_mask
        if recipe.min_abs_advantage:
            keep = batch.advantages.abs().amax(-1) >= recipe.min_abs_advantage
            batch.mask = batch.mask * keep[:, None].to(batch.mask.dtype)
            info["filtered_frac"] = float(1 - keep.float().mean())
        self.rollout_info = {**info, **self.sample_info}
        return batch

    def minibatch_loss(self, mb: RolloutBatch, denom: ops.Denominators, step: int = 0,
                       value_denom: ops.Denominators | None = None):
        c, recipe = self.config, self.recipe
        logp, entropy, hidden = policy_forward(
            self.model, mb.prompt_ids, mb.prompt_mask, mb.response_ids, mb.mask, c.temperature,
            with_entropy=recipe.entropy_coef != 0, with_hidden=self.value_head is not None)
        inputs = {name: getattr(mb, name) for name in recipe.objective_inputs}
        # schedules the objective declares (e.g. MDPO's 1/t_k) are functions of training progress
        inputs.update({name: fn(step, c.steps) for name, fn in getattr(self.objective.fn, "schedule", {}).items()})
        loss, metrics = self.objective.fn(logp, mb.old_logp, mb.advantages, mb.mask, agg=recipe.agg,
                                          denom=denom, **recipe.objective_kw, **inputs)
        metrics["loss/policy"] = loss.item()
        total = loss
        if recipe.kl_placement == "loss" and self.kl_beta:
            kl_loss, _ = kl_in_loss(logp, mb.ref_logp, mb.mask, beta=self.kl_beta,
                                    estimator=recipe.kl_estimator, agg=recipe.agg, denom=denom)
            total = total + kl_loss
        if recipe.entropy_coef:
            total = total + entropy_bonus(entropy, mb.mask, coef=recipe.entropy_coef, agg=recipe.agg, denom=denom)
        if self.value_head is not None:
            v_loss, v_metrics = self.value_loss(self.value_head(hidden), mb,
                                                value_denom or ops.Denominators.of(mb.value_mask, denom.norm_constant))
            total = total + recipe.vf_coef * v_loss
            metrics.update(v_metrics)
        metrics["loss/total"] = total.item()
        return total, metrics

    def value_loss(self, values, mb: RolloutBatch, denom: ops.Denominators):
        """Clipped value loss on the recipe's value mask (0 when a minibatch has no critic target); `denom`
        counts the value mask's tokens over the optimizer step."""
        if mb.value_mask.sum() == 0:
            return values.sum() * 0, {}
        return registry.get("objective", "value-loss").fn(values, mb.old_values, mb.returns, mb.value_mask,
                                                          agg=self.recipe.agg, denom=denom)

    def train_on(self, batch: RolloutBatch, step: int) -> dict:
        """ppo_epochs passes, each split into `minibatches` optimizer steps; returns mean metrics.

        Under data parallelism every rank takes the same number of optimizer steps on its shard; losses are
        divided by the step's global counts and gradients summed, so the update is the one-process update."""
        c, parallel = self.config, self.parallel
        if parallel.sum([float(batch.mask.sum())])[0] == 0:
            return {}  # every response masked (e.g. all truncated): nothing to learn from this step
        gen = torch.Generator().manual_seed(c.seed * 7919 + step)
        sums: dict[str, float] = {}
        n = 0
        self.model.train()
        for _ in range(c.ppo_epochs):
            order = torch.randperm(batch.size, generator=gen)
            for idx in order.chunk(c.minibatches):
                mb = batch.select(idx)
                denom = parallel.denominators(mb.mask, c.max_new_tokens)
                if denom.num_tokens == 0:
                    continue
                value_denom = parallel.denominators(mb.value_mask, c.max_new_tokens) if self.value_head else None
                self.optimizer.zero_grad(set_to_none=True)
                metrics = {}
                if mb.mask.sum() > 0:  # a rank with nothing to learn here still joins the gradient sum
                    loss, metrics = self.minibatch_loss(mb, denom, step, value_denom)
                    (loss * parallel.loss_scale).backward()
                parallel.sum_gradients(self.params)
                metrics["grad_norm"] = parallel.clip_grad_norm(self.params, c.grad_clip)
                self.optimizer.step()
                for k, v in metrics.items():
                    sums[k] = sums.get(k, 0.0) + v
                n += 1
        return {k: v / max(n, 1) for k, v in sums.items()}

    def rollout_metrics(self, batch: RolloutBatch) -> dict:
        lengths = batch.lengths
        valid = batch.mask if batch.mask.sum() > 0 else torch.ones_like(batch.mask)
        _, std, _ = group_stats(batch.rewards.double(), batch.group)
        row = {
            "reward/mean": float(batch.rewards.mean()),
            "reward/std": float(batch.rewards.std()) if batch.size > 1 else 0.0,
            "accuracy": float((batch.scores >= 1.0).float().mean()),
            "frac_zero_std_groups": float((std == 0).double().mean()),
            "advantage/mean": float(ops.masked_mean(batch.advantages, valid)),
            "advantage/abs_mean": float(ops.masked_mean(batch.advantages.abs(), valid)),
            "entropy": float(ops.masked_mean(batch.entropy, valid)),
            "response_length/mean": float(lengths.mean()),
            "response_length/max": float(lengths.max()),
            "truncated_frac": float(batch.truncated.float().mean()),
            "kl": None,
        }
        if batch.ref_logp is not None:
            row["kl"] = float(ops.masked_mean(
                registry.get("regularizer", self.recipe.kl_estimator.rstrip("+")).fn(batch.old_logp, batch.ref_logp),
                valid))
        if batch.mu_logp is not None:
            row.update(mismatch_metrics(batch.old_logp, batch.mu_logp, valid))
        return row

    def step(self, step: int) -> dict:
        t0 = time.perf_counter()
        batch = self.rollout(step)
        t1 = time.perf_counter()
        train_metrics = self.train_on(batch, step)
        self.push_weights()  # vLLM / an FSDP replica samples the next step with these
        t2 = time.perf_counter()
        tokens = float(batch.mask.sum())
        row = {"step": step, **self.rollout_metrics(batch), **self.rollout_info, **train_metrics,
               "clip/region": train_metrics.get("clip/region"),
               "time/rollout": t1 - t0, "time/train": t2 - t1, "time/step": t2 - t0,
               "tokens_per_s/rollout": float(batch.lengths.sum()) / max(t1 - t0, 1e-9),
               "tokens_per_s/train": tokens * self.config.ppo_epochs / max(t2 - t1, 1e-9)}
        if self.kl_controller is not None:
            row["kl/beta"] = self.kl_beta  # the beta this step used
            self.kl_controller.update(row["kl"], n_steps=batch.size)
        if self.config.eval_every and (step + 1) % self.config.eval_every == 0:
            row["eval/accuracy"], _ = self.evaluate()
        return row

    def evaluate(self):
        examples = self.task.eval_set(self.config.eval_size)
        return greedy_accuracy(self.engine, self.task, examples, max_new_tokens=self.config.max_new_tokens,
                               stop=self.config.stop)

    # ------------------------------------------------------------------ the run

    def setup(self) -> "Trainer":
        """Create/check the run folder and build the models (once)."""
        if not hasattr(self, "model"):
            if self.parallel.is_main:
                prepare_run_folder(self.out, self.config.to_json(), type(self.config)().to_json())
            self.build_models()
        return self

    def run(self) -> dict:
        c = self.config
        self.setup()
        start, accuracy_before = self.restore()
        if accuracy_before is None:
            accuracy_before, _ = self.evaluate()
        t_start = time.perf_counter()
        run_steps(self.step, lambda done: self.state(done, accuracy_before), out=self.out, log=self.log,
                  start=start, config=c, desc=f"{c.recipe} on {c.task}", progress=self.progress,
                  callback=self.callback, main=self.parallel.is_main,
                  postfix=lambda row: {"reward": f"{row['reward/mean']:.2f}", "H": f"{row['entropy']:.2f}"})
        accuracy_after, records = self.evaluate()
        summary = {"recipe": c.recipe, "task": c.task, "model": c.model, "preset": c.preset, "seed": c.seed,
                   "steps": c.steps, "accuracy_before": accuracy_before, "accuracy_after": accuracy_after,
                   "eval_size": len(records), "train_seconds_this_session": time.perf_counter() - t_start,
                   "ranks": self.parallel.world}
        if self.parallel.is_main:
            (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
            with open(self.out / "eval_after.jsonl", "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)
        return summary
