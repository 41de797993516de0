"""The trainer: models, engine and run folder around the pipeline (`workbench.train.pipeline`), for every recipe,
RL and preference alike.

A step is `make_batch` (the stages before the update, in the order of `workbench.stages.STAGES`: sampler ->
rollout -> rewards -> group transforms -> forward passes -> reward shaping -> advantage -> token masks), then
`train_on` (ppo_epochs x minibatches of the recipe's loss), then `Pipeline.after_step` and the reference's move.
The trainer never branches on a method: the recipe's components decide everything. Every step is seeded from
(seed, step), so a resumed run reproduces the steps it had not logged.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import random
import time
from pathlib import Path

import torch

from workbench import ops, registry
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch, on_device
from workbench.context import Forward, Head, StepContext
from workbench.envs.multiagent import GameTask
from workbench.kl import KL_LOGS
from workbench.models import (add_lora, add_policies, check_model_name, checkpoint_state, frozen_copy,
                              frozen_reference, load_checkpoint_state, load_model, per_policy, policy_count,
                              policy_params)
from workbench.recipes import Recipe, get_recipe, with_overrides
from workbench.recipes.run_settings import with_preference_data, with_rollout_correction
from workbench.rollout import HFEngine, make_engine, policy_forward
from workbench.rollout.agents import GamePolicy
from workbench.rollout.engine import Sampling, on_model, response_logits
from workbench.stages import BATCH_STAGES, SAMPLING_STAGES
from workbench.tasks import run_task
from workbench.tasks.preferences import read_pairs
from workbench.train.checkpoint import load_latest_checkpoint
from workbench.train.config import RunConfig
from workbench.train.distributed import DataParallel
from workbench.train.evaluate import greedy_accuracy, preference_accuracy, sampled_pass_at_k
from workbench.train.folder import claim_run_folder, open_run_folder, write_run_results
from workbench.train.guards import DeadGradientGuard, NonFiniteGuard
from workbench.train.metrics import run_log
from workbench.train.pipeline import Pipeline
from workbench.train.sft import (StartContext, check_start, check_task_prompts, engine_limit, record_warm_start,
                                 warm_start)
from workbench.train.steps import run_steps
from workbench.values import ValueHead


def resolve_recipe(config: RunConfig) -> Recipe:
    """The recipe with the config's overrides (kl_coef, entropy_coef, recipe_overrides) and preference data settings
    (pairs, data_path) applied."""
    recipe = with_overrides(get_recipe(config.recipe), config.recipe_overrides, kl_coef=config.kl_coef,
                            entropy_coef=config.entropy_coef)
    recipe = with_preference_data(recipe, pairs=config.pairs, data_path=config.data_path)
    return with_rollout_correction(recipe, config.rollout_is, cap=config.rollout_is_cap, low=config.rollout_is_low)


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


def training_forward(model, mb: RolloutBatch, temperature: float, *, with_entropy: bool, with_hidden: bool,
                     with_logits: bool) -> tuple:
    """(logp, entropy, hidden, logits) of the training forward over a minibatch: `policy_forward`'s outputs and, when
    `with_logits`, the live logits / temperature [B, T, V] they are computed from (None otherwise), with their
    gradient: for a component reading the whole next-token distribution (SRPO's forward KL to a self-teacher). Rows of
    separate policies each run under their own adapter (`per_policy`)."""
    return per_policy(model, mb.policy, _training_forward, mb.prompt_ids, mb.prompt_mask, mb.response_ids, mb.mask,
                      temperature=temperature, with_entropy=with_entropy, with_hidden=with_hidden,
                      with_logits=with_logits)


def _training_forward(model, prompt_ids, prompt_mask, response_ids, mask, *, temperature, with_entropy, with_hidden,
                      with_logits) -> tuple:
    if not with_logits:
        return (*policy_forward(model, prompt_ids, prompt_mask, response_ids, mask, temperature,
                                with_entropy=with_entropy, with_hidden=with_hidden), None)
    logits, hidden = on_model(model, response_logits, prompt_ids, prompt_mask, response_ids, with_hidden)
    logits, hidden = logits.to(mask.device), hidden if hidden is None else hidden.to(mask.device)
    entropy = ops.entropy_from_logits(logits, temperature) if with_entropy else None
    return ops.logprobs_from_logits(logits, response_ids, temperature), entropy, hidden, logits / temperature


def fill_stats(batch: RolloutBatch, fields: dict[str, str], stats: list) -> None:
    """Set each batch field of `fields` ({field: statistic}) from a forward pass's statistics ([{statistic: [B, T]}],
    empty when none was asked for), 0 off the mask."""
    for name, stat in fields.items():
        value = stats[0][stat]
        setattr(batch, name, torch.where(batch.mask > 0, value, torch.zeros_like(value)))


# What the loop logs itself each step (`Trainer.step`); the glossary gathers it with every component's `logs`.
LOOP_METRICS = {
    "step": ("RL step index (one rollout batch per step), starting at 0.",
             "Counts up by one per row. A resumed run recomputes the steps after its last checkpoint, so rows are "
             "never duplicated."),
    "rollouts": ("Rows the step's rollouts sampled, all ranks: its groups, and any resampled rounds, branches or "
                 "baselines a component drew (what the step paid for in samples).",
                 "prompts_per_step x group_size for plain GRPO; more where a method oversamples. Summed over steps: "
                 "the x-axis of a sample-efficiency curve."),
    "reward/mean": ("Mean outcome reward of the sampled responses; rises as the policy improves.",
                    "Noisy but trending up. Flat at the warm-start level: no signal reaches the policy. A jump to "
                    "the maximum while entropy collapses: check for reward hacking."),
    "reward/std": ("Std of rewards over the batch; near 0 means no learning signal is left in the groups.",
                   "Away from 0 while the task is neither solved nor hopeless; it shrinks as reward/mean nears its "
                   "minimum or maximum."),
    "accuracy": ("Fraction of sampled responses the verifier accepts (at the sampling temperature).",
                 "Follows reward/mean for 0/1 rewards. Sampled at temperature 1, so it stays below the greedy "
                 "eval/accuracy."),
    "frac_zero_std_groups": ("Share of groups whose rewards are all equal: their group advantage is 0.",
                             "Well below 1. Climbing towards 1 means most prompts became all-right or all-wrong: "
                             "harder prompts, a larger G or dynamic sampling are needed."),
    "advantage/mean": ("Mean advantage over valid tokens (about 0 for centred estimators).",
                       "Near 0 for group-centred estimators. A persistent sign means right answers are "
                       "systematically longer (> 0) or shorter (< 0) than wrong ones, since the mean is per token."),
    "advantage/abs_mean": ("Mean |advantage| over valid tokens: the size of the learning signal.",
                           "Roughly stable (about 0.8 with std scaling). Falling while frac_zero_std_groups rises: "
                           "the learning signal is drying up."),
    "entropy": ("Mean full-vocabulary token entropy of the policy on its own samples (nats); a collapse to 0 means no "
                "exploration.",
                "Declines slowly. A crash towards 0 within a few steps is entropy collapse (no exploration left); a "
                "steady rise means the policy is diffusing (learning rate or entropy bonus too high)."),
    **KL_LOGS,  # the per-token KL to the reference (`rollout_metrics`)
    "response_length/mean": ("Mean number of policy tokens per response (including EOS).",
                             "Changes slowly. A steady climb to max_new_tokens or a collapse to a few tokens points "
                             "at a length bias of the loss aggregation or at reward hacking."),
    "response_length/max": ("Longest response in the batch.",
                            "Below max_new_tokens most of the time."),
    "truncated_frac": ("Share of responses that hit max_new_tokens without EOS.",
                       "Near 0. Rising: answers run out of budget and usually score 0."),
    "grad_norm": ("Global gradient norm before clipping, averaged over optimizer steps.",
                  "Stable. Often above grad_clip (1.0 here) means every step is rescaled; spikes tend to precede "
                  "instabilities."),
    "mismatch/logp_abs_mean": ("Mean |old_logp - mu_logp| over response tokens: trainer vs rollout-engine log-prob "
                               "gap (~1e-7 with HF generate; larger with vLLM or stale engine weights).",
                               "About 1e-7 with HF generate (2e-7 to 5e-7 on the smoke runs). Larger with vLLM; a "
                               "steady climb during training means the engine is not getting the new weights."),
    "mismatch/logp_abs_max": ("Largest |old_logp - mu_logp| over the rollout batch's response tokens.",
                              "A few 1e-6 with HF generate (up to about 1e-4 on long runs). Much larger: a few "
                              "tokens were sampled with a probability the trainer disagrees with, what TIS caps."),
    "mismatch/is_ratio_mean": ("Mean importance ratio exp(old_logp - mu_logp) over response tokens (1 = no mismatch).",
                               "1 to within 1e-6 with HF generate. Drifting from 1 (vLLM, stale weights): the "
                               "samples no longer come from the policy being trained; use tis or minirl, or fix the "
                               "weight push."),
    "mismatch/is_ratio_max": ("Largest exp(old_logp - mu_logp) in the batch: what TIS's cap truncates.",
                              "1 to within about 1e-4 with HF generate. Well above TIS's cap (2 by default): some "
                              "tokens were sampled with a very different probability than the trainer gives them."),
    "eval/accuracy": ("Greedy accuracy on the held-out set (only on evaluation steps).",
                      "Rises from evaluation to evaluation: the headline number."),
    "eval/pass@1": ("--set pass_k=K: unbiased pass@1 (mean sampled accuracy) over n samples of each held-out prompt "
                    "(only on evaluation steps).",
                    "Rises with training, like eval/accuracy (sampled rather than greedy)."),
    "eval/pass@k": ("--set pass_k=K: unbiased pass@K, the chance that at least one of K samples of a held-out prompt "
                    "is right (Chen et al. 2021; only on evaluation steps).",
                    "Flat or rising. Falling while pass@1 rises: the policy is sharpening onto fewer answers "
                    "(entropy collapse): it solves the easy prompts more surely and stops exploring the others."),
    "eval/entropy": ("--set pass_k=K: the policy's mean token entropy on its samples of the held-out prompts.",
                     "Falls slowly. A collapse to near 0 within a few evaluations: exploration is gone and pass@k "
                     "will follow pass@1."),
    "time/step": ("Wall-clock seconds for the whole step.",
                  "Flat. Growth means longer responses or memory pressure."),
    "time/rollout": ("Seconds spent generating (rollout) in the step.",
                     "Flat; compare with time/train to see where a step's time goes."),
    "time/train": ("Seconds spent in forward/backward/optimizer in the step.",
                   "Flat; grows with ppo_epochs and the number of minibatches."),
    "tokens_per_s/rollout": ("Response tokens generated per second of rollout time.",
                             "Flat for a given model and batch size."),
    "tokens_per_s/train": ("Response tokens trained on per second of training time (all epochs).",
                           "Flat for a given model and batch size."),
}


class Trainer:
    """One run folder: config.json, metrics.jsonl, summary.json, checkpoints/, report.html."""

    def __init__(self, config: RunConfig, out: str | Path, progress: bool = True, callback=None):
        self.config, self.out, self.progress, self.callback = config, Path(out), progress, callback
        check_model_name(config.model, config.chat_template)
        self.recipe = resolve_recipe(config)
        self.pipeline = Pipeline(self.recipe, track_kl=config.track_kl)  # refuses parts that don't fit
        self.pipeline.check_group_size(config.group_size)
        self.pipeline.check_engine(config.engine)  # ARPO's entropies need the HF engine's top-k log-probs, ...
        self.check_old_logp()
        self.task = run_task(config)
        self.pipeline.check_task(self.task)  # a turn-level method on one-turn episodes, MC without env copies, ...
        self.pipeline.check_sampler(self.task, config.prompts_per_step)  # a pool smaller than a step, ...
        self.pipeline.check_rewards(self.task.sample(2, random.Random(config.seed)), config.max_new_tokens, config.steps)
        # a data_path's pairs, read (fields, JSON) now; their lengths are checked against the model before SFT
        self.data_pairs = read_pairs(config.data_path) if config.data_path else []
        self.log = run_log(self.out, config)  # metrics.jsonl (+ TensorBoard with report_to="tensorboard")
        self.rollouts = 0  # rows the current step's rollouts sampled (`rollout_on`)
        self.game_metrics = {}  # a game's evaluation beside its accuracy (`evaluate`)
        if isinstance(self.task, GameTask) and config.pass_k:
            raise ValueError(f"pass_k={config.pass_k} samples answers to held-out prompts; task {config.task!r} is a "
                             "game, evaluated by playing it (exploitability, win rates): set pass_k=0")
        self.parallel = DataParallel(config.distributed, config.device)  # one process unless launched with N
        self.check_policies()
        self.sampling = Sampling(config.max_new_tokens, config.temperature, config.top_p,
                                 tuple(config.stop) or None)
        self.dead_gradient, self.nonfinite = DeadGradientGuard(), NonFiniteGuard(config.nonfinite)
        if self.parallel.sharded and self.pipeline.reads_anywhere("head"):
            raise ValueError(f"recipe {config.recipe!r} reads the LM head's optimizer state (`head`), which FSDP shards "
                             "across ranks; use distributed='ddp' or 'none'")

    def check_policies(self) -> None:
        """Separate policies are LoRA adapters on one base, one per agent of a game, sampled by the HF engine (which
        switches adapters) on one process or DDP: anything else is refused before the run folder is touched."""
        c = self.config
        if self.recipe.policies != "separate":
            return
        problems = [text for broken, text in [
            (c.lora_r <= 0, "lora_r > 0 (each policy is a LoRA adapter on the one base; e.g. --set lora_r=8)"),
            (not isinstance(self.task, GameTask), f"a game of several agents (task {c.task!r} has one agent; e.g. "
                                                  "--task kuhn)"),
            (c.engine != "hf", f"engine='hf' (it switches adapters between the agents' rows; {c.engine!r} serves "
                               "one set of weights)"),
            (self.parallel.sharded, "distributed='ddp' or 'none' (FSDP shards the adapters)")] if broken]
        if problems:
            raise ValueError(f"recipe {c.recipe!r} trains separate policies, which needs " + "; ".join(problems))

    # ------------------------------------------------------------------ set-up

    def build_models(self) -> None:
        c, pipeline = self.config, self.pipeline
        torch.set_num_threads(c.threads)
        folder = warm_start(c, self.task, progress=self.progress and self.parallel.is_main, pairs=self.data_pairs)
        self.warm_start_folder = folder  # recorded in RUN/warm_start.json by `setup`
        self.model, self.tokenizer = load_model(str(folder) if folder else c.model, **c.model_kw())
        check_task_prompts(self.task, self.model, self.tokenizer, c.max_new_tokens, self.data_pairs, c.data_path,
                           engine_limit(c))
        reference = pipeline.parts["reference"][0]
        start = StartContext(c, self.task, c.model_kw(), progress=self.progress)
        self.model = reference.fn(self.model, start, **reference.use.kw)
        if c.lora_r > 0:  # the adapters' random A from the run's seed (a warm start leaves the generator unseeded)
            torch.manual_seed(c.seed)
            self.model = add_lora(self.model, r=c.lora_r, alpha=2 * c.lora_r)
        if self.recipe.policies == "separate":  # one adapter per agent of the game, each its own optimizer group
            self.model = add_policies(self.model, len(self.task.make_env().agents))
        # anchors a reference moves need weights of their own; a fixed one under LoRA is the adapter-disabled base
        self.anchors = {name: frozen_copy(self.model) for name in pipeline.anchors}
        self.ref = (self.anchors["ref"] if "ref" in self.anchors
                    else frozen_reference(self.model) if pipeline.needs_ref else None)
        self.prev = self.anchors.get("prev")
        # a multi-agent rollout's frozen opponent plays the previous iterate through an engine of its own
        self.opponents = {"past": HFEngine(self.prev, self.tokenizer)} if self.prev is not None else {}
        critic = pipeline.parts["value"][0] if pipeline.has_critic else None  # a value entry may build its own head
        make_head = getattr(critic.fn, "head", lambda hidden, **_: ValueHead(hidden)) if critic else None
        self.value_head = make_head(self.model.config.hidden_size, **critic.use.kw).to(c.device) if critic else None
        replica = self.parallel.wrap(self.model)  # FSDP: shards the policy, returns a full copy to sample from
        # parameter groups clipped one by one: each separate policy's adapter (else the whole policy), the value head
        self.groups = ([policy_params(self.model, k) for k in range(policy_count(self.model))]
                       if self.recipe.policies == "separate" else [[p for p in self.model.parameters() if p.requires_grad]])
        if self.value_head is not None and self.recipe.policies == "separate":
            self.groups.append(list(self.value_head.parameters()))  # the agents' shared critic (MARFT's)
        elif self.value_head is not None:
            self.groups[-1] = self.groups[-1] + list(self.value_head.parameters())
        self.params = [p for group in self.groups for p in group]
        self.optimizer = torch.optim.AdamW([{"params": group} for group in self.groups], lr=c.lr,
                                           weight_decay=c.weight_decay)
        self.engine = make_engine(c, self.model, self.tokenizer, replica)

    def trained_modules(self) -> torch.nn.ModuleList:
        """Everything the optimizer updates, in its parameter order (policy, then value head)."""
        return torch.nn.ModuleList([self.model] + ([self.value_head] if self.value_head is not None else []))

    def push_weights(self) -> None:
        """Give a separate rollout engine (vLLM, or the replica beside an FSDP policy) the current weights."""
        if self.engine.needs_weights:
            self.engine.load_weights(self.parallel.full_weights(self.model))

    def state(self, step: int, accuracy_before: float, sampled_before: dict | None = None) -> dict:
        """The checkpoint after `step` steps; `sampled_before` holds the held-out results before training beside
        greedy accuracy (`held_out`)."""
        return {"step": step, "model": self.parallel.model_state(self.model),
                "optimizer": self.parallel.optimizer_state(self.trained_modules(), self.optimizer),
                "value_head": self.value_head.state_dict() if self.value_head else None,
                "pipeline": self.pipeline.state_dict(), "accuracy_before": accuracy_before,
                "anchors": {name: checkpoint_state(model) for name, model in self.anchors.items()},
                "sampled_before": sampled_before or {}}

    def restore(self) -> tuple[int, dict | None]:
        """(step to start from, the held-out results before training {"accuracy", and pass@k's when on}) of the
        latest checkpoint; (0, None) without one."""
        state = load_latest_checkpoint(self.out)
        if state is None:
            if self.parallel.is_main:
                self.log.truncate(0)  # logged steps without a checkpoint are recomputed from scratch
            return 0, None
        if "accuracy_before" not in state and "before" in state:
            raise ValueError(f"{self.out} holds a checkpoint of the separate preference trainer that the one trainer "
                             "replaced (workbench before commit 2ed9c35): it cannot be resumed. Train into a new "
                             "folder (--out), or move this one aside to keep it")
        self.parallel.load_model_state(self.model, state["model"])
        self.parallel.load_optimizer_state(self.trained_modules(), self.optimizer, state["optimizer"])
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        for name, model in self.anchors.items():  # references that move (iterated preference methods)
            load_checkpoint_state(model, state["anchors"][name])
        if "pipeline" in state:
            self.pipeline.load_state_dict(state["pipeline"])
        else:
            self.pipeline.load_legacy_state(state)  # written before the pipeline existed
        self.push_weights()  # a separate engine still holds the initial weights
        if self.parallel.is_main:
            self.log.truncate(state["step"])
        return state["step"], {"accuracy": state["accuracy_before"], **state.get("sampled_before", {})}

    # ------------------------------------------------------------------ one step

    def context(self, step: int) -> StepContext:
        c = self.config
        ctx = StepContext(step=step, total_steps=c.steps, seed=c.seed, group_size=c.group_size,
                          prompts_per_step=c.prompts_per_step, max_new_tokens=c.max_new_tokens,
                          pad_id=self.tokenizer.pad_token_id, score=self.score, vocab_logp=self.vocab_logp,
                          gather=self.parallel.gather, gather_objects=self.parallel.gather_objects,
                          task=self.task, engine=self.engine, opponents=self.opponents)
        ctx.resample = lambda round: self.sample(ctx, round)
        ctx.rollout = functools.partial(self.rollout_on, ctx=ctx)
        return ctx

    def stage_runners(self) -> dict:
        """{stage name: fn(batch, ctx) -> batch} for every stage of `stages.BATCH_STAGES` (the sampler leaves the
        step's examples in `ctx.examples` and no batch yet)."""
        p = self.pipeline
        return {"sampler": self.select_examples, "rollout": self.generate, "rewards": p.reward,
                "group_transforms": p.transform_groups, "forward passes": self.forward_passes,
                "reward_shaping": p.shape_rewards, "advantage": p.advantages, "token_masks": p.mask_tokens}

    def run_stages(self, names: tuple, batch, ctx: StepContext):
        """The batch leaves every stage on the CPU, whatever a component made: between stages it is bookkeeping, and
        only the model's passes run on the config's device (they move their inputs there and their outputs back)."""
        runners = self.stage_runners()
        for name in names:
            batch = runners[name](batch, ctx)
            batch = batch if batch is None else on_device(batch, "cpu")
        return batch

    def values_of(self, hidden: torch.Tensor) -> torch.Tensor:
        """The critic's values [B, T] of hidden states [B, T, H], on the hidden states' device (the head lives on the
        model's)."""
        return self.value_head(hidden.to(self.config.device)).to(hidden.device)

    def rollout_on(self, examples: list, *, ctx: StepContext, group_size: int, greedy: bool = False,
                   temperature: float | None = None, task=None, rewarded: bool = False) -> RolloutBatch:
        """The recipe's rollout strategy on given examples in step `ctx`, with the environment's rewards only, or
        (`rewarded`) the recipe's rewards as the reward stage combines them, `scores` the environment's (rows that
        replace the batch's own); `temperature` overrides the run's sampling temperature for these samples, `task`
        the run's task (a hinted copy of it: `workbench.tasks.guidance`)."""
        sampling = dataclasses.replace(self.sampling, greedy=greedy,
                                       temperature=self.sampling.temperature if temperature is None else temperature)
        batch = self.pipeline.rollout(self.engine, self.task if task is None else task, examples,
                                      group_size=group_size, sampling=sampling, ctx=ctx)
        self.rollouts += batch.size  # what the step paid for in samples: resampled rounds and baselines too
        if not rewarded:
            return batch
        return self.pipeline.reward(batch, dataclasses.replace(ctx, examples=list(examples), metrics={}))

    @torch.no_grad()
    def score(self, batch: RolloutBatch, temperature: float) -> torch.Tensor:
        """The current policy's log-probs [B, T] of the batch's responses with the logits divided by
        `temperature` (0 off the mask)."""
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        logp, _, _ = per_policy(self.model, batch.policy, policy_forward, batch.prompt_ids, batch.prompt_mask,
                                batch.response_ids, batch.mask, temperature)
        return logp * batch.mask

    @torch.no_grad()
    def vocab_logp(self, batch: RolloutBatch) -> torch.Tensor:
        """The current policy's log-probs over the whole vocabulary [B, T, V] at each response position of the batch's
        rows (its own prompts), at the run's temperature, without gradient; 0 off the mask. Before the update this is
        the old policy: SRPO's self-teacher reads it under a prompt with feedback in it."""
        logits, _ = per_policy(self.model, batch.policy, lambda model, *rows: on_model(model, response_logits, *rows),
                               batch.prompt_ids, batch.prompt_mask, batch.response_ids)
        logp = torch.log_softmax(logits.float() / self.config.temperature, dim=-1).to(batch.mask.device)
        return logp * batch.mask[..., None].to(logp.dtype)

    def sample(self, ctx: StepContext, round: int = 0) -> RolloutBatch:
        """The sampling stages (sampler -> rollout -> rewards) of round `round` of the step; round > 0 only when a
        group transform resamples."""
        ctx.round = round
        return self.run_stages(SAMPLING_STAGES, None, ctx)

    def select_examples(self, batch: None, ctx: StepContext) -> None:
        """Sampler stage: the step's examples (this rank's share) into `ctx.examples`, seeded by (seed, step, round)."""
        c = self.config
        ctx.examples = self.parallel.shard(self.pipeline.select(self.task, c.prompts_per_step,
                                                                random.Random(f"{c.seed}-{ctx.step}-{ctx.round}")))
        ctx.metrics.update(self.pipeline.sampler_metrics())  # the same on every rank: it chose before sharding
        return batch

    def generate(self, batch: None, ctx: StepContext) -> RolloutBatch:
        """Rollout stage: the recipe's rollout strategy on the step's examples."""
        return self.rollout_on(ctx.examples, ctx=ctx, group_size=self.config.group_size)

    @property
    def on_policy(self) -> bool:
        """One optimizer step per batch and nothing before the update reads the policy's log-probs: the training
        forward supplies old_logp (ratio 1) and the entropy, as TRL does, instead of a separate pass."""
        c = self.config
        return (c.ppo_epochs == 1 and c.minibatches == 1 and not self.pipeline.has_critic
                and not self.pipeline.reads_before_update("old_logp", "entropy")
                and not self.pipeline.forward_stats("old")  # statistics of the old policy's logits need its pass
                and self.pipeline.parts["objective"][0].entry.plan is None)  # a plan takes several steps per batch

    def check_old_logp(self) -> None:
        """old_logp='rollout' replaces the pass that computes pi_old's log-probs and entropies after the rollout:
        refuse a recipe that needs that pass for more than the log-probs, before anything is built."""
        pipeline, why = self.pipeline, None
        if self.config.old_logp != "rollout":
            return
        if pipeline.has_critic:
            why = "its critic's values come from the old policy's forward pass"
        elif pipeline.reads_before_update("entropy"):
            why = "a component reads the old policy's token entropies before the update"
        elif pipeline.forward_stats("old"):
            why = f"a component reads statistics of the old policy's logits ({', '.join(pipeline.forward_stats('old'))})"
        if why:
            raise ValueError(f"old_logp='rollout' skips the forward pass after the rollout, but recipe "
                             f"{self.recipe.key!r} needs it: {why}. Use old_logp='forward' (the default)")

    @torch.no_grad()
    def forward_passes(self, batch: RolloutBatch, ctx: StepContext | None = None) -> RolloutBatch:
        """old_logp and entropy (unless on-policy), ref_logp (when a reference exists), values (critic), and the
        logit statistics a component reads (`pipeline.FORWARD_STATS`), and the previous iterate's log-probs when the
        reference keeps one; 0 off the mask. A batch of no rows (no preference pair this step) has nothing to score."""
        c, pipeline = self.config, self.pipeline
        if batch.size == 0:
            return batch
        if not self.on_policy and c.old_logp == "rollout":  # the sampler's log-probs are pi_old's (no pass)
            if batch.mu_logp is None:
                raise ValueError("old_logp='rollout' needs the rollout engine's log-probs, and this batch has none "
                                 "(given responses, e.g. preference pairs): use old_logp='forward'")
            batch.old_logp, batch.entropy = batch.mu_logp * batch.mask, None  # entropies: the training forwards'
        elif not self.on_policy:
            old_stats = pipeline.forward_stats("old")
            old_logp, entropy, hidden, *stats = per_policy(
                self.model, batch.policy, policy_forward, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                batch.mask, c.temperature, with_entropy=True, with_hidden=self.value_head is not None,
                stats=tuple(old_stats.values()))
            batch.old_logp, batch.entropy = old_logp * batch.mask, entropy * batch.mask
            fill_stats(batch, old_stats, stats)
            if self.value_head is not None:
                batch.values = batch.old_values = self.values_of(hidden) * batch.mask
        if self.ref is not None:
            ref_stats = pipeline.forward_stats("ref")
            ref_logp, _, _, *stats = policy_forward(self.ref, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                                    batch.mask, c.temperature, stats=tuple(ref_stats.values()))
            batch.ref_logp = ref_logp * batch.mask
            fill_stats(batch, ref_stats, stats)
        if self.prev is not None:
            prev_logp, _, _ = per_policy(self.prev, batch.policy, policy_forward, batch.prompt_ids, batch.prompt_mask,
                                         batch.response_ids, batch.mask, c.temperature)
            batch.prev_logp = prev_logp * batch.mask
        return batch

    def make_batch(self, step: int) -> RolloutBatch:
        """The step's batch through every stage before the update, in `stages.STAGES` order. Metrics of the
        components (sampling rounds, win rates, filtered shares) are left in `self.rollout_info`."""
        torch.manual_seed(self.config.seed * 1_000_003 + step + 7_919 * self.parallel.rank)
        self.rollouts = 0
        ctx = self.context(step)
        batch = self.run_stages(BATCH_STAGES, None, ctx)
        self.rollout_info = ctx.metrics
        return batch

    def minibatch_loss(self, mb: RolloutBatch, denom: ops.Denominators, step: int = 0,
                       value_denom: ops.Denominators | None = None, moves: torch.Tensor | None = None):
        """(loss, metrics) of a minibatch; `moves` [B, T] (a plan's step): only those tokens' log-probs, entropies and
        values carry gradient, the loss is still the whole minibatch's."""
        c, pipeline = self.config, self.pipeline
        reads = [p.reads for p in pipeline.parts["objective"] + pipeline.parts["regularizers"]]
        wants_head = any("head" in r for r in reads)
        logp, entropy, hidden, logits = training_forward(
            self.model, mb, c.temperature,
            with_entropy=pipeline.train_entropy or mb.old_logp is None or mb.entropy is None,
            with_hidden=self.value_head is not None or wants_head, with_logits=any("logits" in r for r in reads))
        if mb.old_logp is None:  # on-policy: the policy that sampled is this one (ratio 1)
            mb.old_logp, mb.entropy = logp.detach(), entropy.detach() * mb.mask
        elif mb.entropy is None:  # old_logp='rollout': the logged entropy is this forward's
            mb.entropy = entropy.detach() * mb.mask
        if wants_head:  # this update's LM head, its input and its optimizer state (CAPO predicts its step)
            mb.head = Head.of(self.model, self.optimizer, hidden, c.temperature)
        values = self.values_of(hidden) if self.value_head is not None else None
        if moves is not None:
            logp, entropy, values = (x if x is None else torch.where(moves > 0, x, x.detach())
                                     for x in (logp, entropy, values))
            logits = logits if logits is None else torch.where(moves[..., None] > 0, logits, logits.detach())
        mb.logits = logits  # [B, T, V] the whole next-token distribution, when a component reads it (SRPO)
        value_denom = value_denom or (ops.Denominators.of(mb.value_mask, denom.norm_constant) if values is not None
                                      else None)
        return pipeline.loss(Forward(logp, entropy, values), mb, denom, value_denom, step, c.steps)

    def plan(self, mb: RolloutBatch, step: int) -> list:
        """The objective's update schedule for a minibatch (`registry.Entry.plan`): [B, T] masks, one optimizer step
        each, in order, each moving only its tokens; [None] (one step, every token) when it declares none. Under data
        parallelism every rank must plan the same number of steps."""
        objective = self.pipeline.parts["objective"][0]
        if objective.entry.plan is None:
            return [None]
        masks = list(objective.entry.plan(mb, **self.pipeline.kwargs(objective, step, self.config.steps)))
        counts = self.parallel.gather(torch.tensor([len(masks)]))
        if bool((counts != len(masks)).any()):
            raise ValueError(f"objective {objective.use.key!r} planned {counts.tolist()} optimizer steps on the ranks; "
                             "every rank must take the same number: fix the plan's length with its parameters (seeupo: "
                             "turns=<the environment's max_turns>)")
        return masks

    def minibatch_rows(self, batch: RolloutBatch, gen: torch.Generator) -> tuple:
        """Row indices of each of the epoch's `minibatches` minibatches, in a random order: rows one by one, or whole
        groups when the objective reads a group's rows together (`whole_groups`: a preference item's responses)."""
        if not self.pipeline.parts["objective"][0].entry.whole_groups:
            return torch.randperm(batch.size, generator=gen).chunk(self.config.minibatches)
        groups = torch.unique_consecutive(batch.group)
        chosen = groups[torch.randperm(len(groups), generator=gen)].chunk(self.config.minibatches)
        return tuple(torch.nonzero(torch.isin(batch.group, g)).flatten() for g in chosen)

    def train_on(self, batch: RolloutBatch, step: int) -> dict:
        """ppo_epochs passes, each split into `minibatches` optimizer steps (times the steps of the objective's
        plan, `plan`); returns mean metrics.

        Under data parallelism every rank takes the same number of optimizer steps on its shard; losses are
        divided by the step's global counts and gradients summed, so the update is the one-process update."""
        c, parallel = self.config, self.parallel
        if parallel.sum([float(batch.mask.sum())])[0] == 0:
            return {"grad_norm": 0.0}  # every response masked (all truncated, no signal): no gradient this step
        gen = torch.Generator().manual_seed(c.seed * 7919 + step)
        sums: dict[str, float] = {}
        n, signal, moved = 0, 0.0, False
        on_policy = batch.old_logp is None
        fill_entropy = on_policy or batch.entropy is None
        if on_policy:
            batch.old_logp = torch.zeros_like(batch.mask)
        if fill_entropy:  # from each minibatch's training forward (on-policy, or old_logp='rollout')
            batch.entropy = torch.zeros_like(batch.mask)
        self.model.train()
        for epoch in range(c.ppo_epochs):
            fill_entropy = fill_entropy and epoch == 0  # the first pass's forwards: the policy that sampled, or nearest
            for idx in self.minibatch_rows(batch, gen):
                mb = batch.select(idx)
                if on_policy:
                    mb.old_logp = None
                if fill_entropy:
                    mb.entropy = None
                denom = parallel.denominators(mb.mask, c.max_new_tokens)
                if denom.num_tokens == 0:
                    continue
                value_denom = parallel.denominators(mb.value_mask, c.max_new_tokens) if self.value_head else None
                for moves in self.plan(mb, step):  # [None]: one step on every token; else the objective's schedule
                    live = mb.mask if moves is None else mb.mask * moves
                    if moves is not None and parallel.sum([float(live.sum())])[0] == 0:
                        continue  # a step with no token to move on any rank
                    self.optimizer.zero_grad(set_to_none=True)
                    metrics, loss = {}, torch.zeros(())
                    # a rank with nothing to learn here still joins the gradient sum; under data parallelism it also
                    # computes its (zero) loss, which may take collectives (BAPO sums its statistics over the ranks)
                    if live.sum() > 0 or parallel.active:
                        loss, metrics = self.minibatch_loss(mb, denom, step, value_denom, moves)
                        (loss * parallel.loss_scale).backward()
                        # the learning signal the dead-gradient guard checks: |A| on the trained tokens (a preference
                        # batch has no advantages; its loss may rightly have no gradient, e.g. DAPO's A = 0 steps)
                        if mb.advantages is not None:
                            signal += float((mb.advantages.abs() * live).sum())
                    if on_policy:
                        batch.old_logp[idx] = mb.old_logp * mb.mask
                    if fill_entropy and mb.entropy is not None:
                        batch.entropy[idx] = mb.entropy
                    parallel.sum_gradients(self.params)
                    norms = [parallel.clip_grad_norm(group, c.grad_clip) for group in self.groups]
                    metrics["grad_norm"] = math.sqrt(sum(n * n for n in norms))  # over every group, before clipping
                    if not self.nonfinite.allows(step, parallel.sum([loss.item()])[0], metrics["grad_norm"]):
                        continue  # every rank sees the same summed loss and norm, so all of them skip
                    moved = moved or metrics["grad_norm"] > 0
                    self.optimizer.step()
                    for k, v in metrics.items():
                        sums[k] = sums.get(k, 0.0) + v
                    n += 1
        self.dead_gradient.check(parallel.sum([signal])[0] > 0, moved)
        return {**{k: v / max(n, 1) for k, v in sums.items()}, **self.nonfinite.metrics()}

    def rollout_metrics(self, batch: RolloutBatch) -> dict:
        """What the step's batch looks like: entropy, lengths, KL to the reference, advantages (when estimated) and,
        for the policy's own samples (the rollout engine's log-probs `mu_logp` are set), rewards, accuracy and the
        engine's mismatch; a preference batch's rows are given responses, teacher-forced, and a batch of no rows
        (no preference pair this step) logs nothing."""
        if batch.size == 0:
            return {}
        lengths = batch.lengths
        valid = batch.mask if batch.mask.sum() > 0 else torch.ones_like(batch.mask)
        row = {
            "entropy": float(ops.masked_mean(batch.entropy, valid)),
            "response_length/mean": float(lengths.mean()),
            "response_length/max": float(lengths.max()),
            "truncated_frac": float(batch.truncated.float().mean()),
            "kl": None,
        }
        if batch.mu_logp is not None:
            _, std, _ = group_stats(batch.rewards.double(), batch.group)
            row.update({"reward/mean": float(batch.rewards.mean()),
                        "reward/std": float(batch.rewards.std()) if batch.size > 1 else 0.0,
                        "accuracy": float((batch.scores >= 1.0).float().mean()),
                        "frac_zero_std_groups": float((std == 0).double().mean()),
                        **mismatch_metrics(batch.old_logp, batch.mu_logp, valid)})
        if batch.advantages is not None:  # a preference batch has none: its signal is the ranking
            row.update({"advantage/mean": float(ops.masked_mean(batch.advantages, valid)),
                        "advantage/abs_mean": float(ops.masked_mean(batch.advantages.abs(), valid))})
        if batch.ref_logp is not None:
            per_token = registry.get("kl", self.recipe.kl_estimator().rstrip("+")).fn(batch.old_logp, batch.ref_logp)
            row["kl"] = float(ops.masked_mean(per_token, valid))
            if self.parallel.active:  # controllers must see the same KL on every rank
                kl_sum, count = self.parallel.sum([float((per_token * valid).sum()), float(valid.sum())])
                row["kl"] = kl_sum / max(count, 1.0)
        return row

    def step(self, step: int) -> dict:
        t0 = time.perf_counter()
        batch = self.make_batch(step)
        t1 = time.perf_counter()
        train_metrics = self.train_on(batch, step)
        self.push_weights()  # vLLM / an FSDP replica samples the next step with these
        t2 = time.perf_counter()
        tokens = float(batch.mask.sum())
        row = {"step": step, "rollouts": float(self.parallel.sum([float(self.rollouts)])[0]),
               **self.rollout_metrics(batch), **self.rollout_info, **train_metrics,
               **self.pipeline.driven_metrics(step, self.config.steps),  # the values this step used
               "time/rollout": t1 - t0, "time/train": t2 - t1, "time/step": t2 - t0,
               "tokens_per_s/rollout": float(batch.lengths.sum()) / max(t1 - t0, 1e-9),
               "tokens_per_s/train": tokens * self.config.ppo_epochs / max(t2 - t1, 1e-9)}
        self.pipeline.after_step(batch, row, self.context(step))
        self.move_anchors(step)
        if self.config.eval_every and (step + 1) % self.config.eval_every == 0:
            row["eval/accuracy"], _ = self.evaluate()
            row.update({f"eval/{k}": v for k, v in self.game_metrics.items()})
            row.update({f"eval/{k}": v for k, v in self.evaluate_sampled().items()})
        return row

    def move_anchors(self, step: int) -> None:
        """The reference's own move after the step (`registry.Entry.moves`: iterated preference methods move their
        anchors to the policy every few steps); nothing for a fixed reference."""
        reference = self.pipeline.parts["reference"][0]
        if reference.entry.moves is not None:
            reference.entry.moves(self.anchors, self.model, step,
                                  **self.pipeline.kwargs(reference, step, self.config.steps))

    def evaluate(self):
        """(accuracy, per-example records) on the held-out set; a game plays itself instead (`GameTask.evaluate`:
        exploitability, win rates against Python players), its other results kept in `game_metrics`."""
        if isinstance(self.task, GameTask):
            policy = GamePolicy(self.engine, self.model, self.tokenizer,
                                dataclasses.replace(self.sampling, greedy=True), seed=self.config.seed)
            accuracy, records, self.game_metrics = self.task.evaluate(policy)
            return accuracy, records
        examples = self.task.eval_set(self.config.eval_size)
        return greedy_accuracy(self.engine, self.task, examples, max_new_tokens=self.config.max_new_tokens,
                               stop=self.config.stop)

    def held_out(self) -> dict:
        """Held-out results beside greedy accuracy: pass@1 / pass@k / entropy of samples (when pass_k > 0) and, on a
        one-turn task, preference accuracy (the verified answer's log-prob above a near miss's)."""
        c, out = self.config, {**self.evaluate_sampled(), **self.game_metrics}  # a game's: from the last `evaluate`
        if self.task.make_env().max_turns == 1:
            out["preference_accuracy"] = preference_accuracy(self.model, self.tokenizer, self.task, c.eval_size,
                                                             c.temperature)
        return out

    @torch.no_grad()
    def evaluate_sampled(self, chunk_rows: int = 512) -> dict:
        """{"pass@1", "pass@k", "entropy"} on n = pass_samples (or pass_k) samples of every held-out prompt at the
        run's sampling settings, through the plain `turns` rollout; {} when pass_k = 0. The samples are drawn from
        a fixed seed (common random numbers: curves over training differ by the policy, not by the draw), and the
        training random state is left as it was. `entropy` is the policy's mean token entropy on those samples."""
        c = self.config
        if not c.pass_k:
            return {}
        n, examples = c.pass_samples or c.pass_k, self.task.eval_set(c.eval_size)
        rollout = registry.get("rollout", "turns").fn
        correct, entropy_sum, tokens = [], 0.0, 0.0
        per_chunk = max(chunk_rows // n, 1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed * 1_000_003 + 424_243)
            for start in range(0, len(examples), per_chunk):
                chunk = examples[start:start + per_chunk]
                batch = rollout(self.engine, self.task, chunk, group_size=n, sampling=self.sampling)
                solved = torch.zeros(len(chunk)).index_add_(0, batch.group.cpu(), (batch.rewards >= 1.0).float().cpu())
                correct += [int(x) for x in solved.tolist()]
                _, entropy, _ = policy_forward(self.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                               batch.mask, c.temperature, with_entropy=True)
                entropy_sum += float((entropy * batch.mask).sum())
                tokens += float(batch.mask.sum())
        return {**sampled_pass_at_k(correct, n, c.pass_k), "entropy": entropy_sum / max(tokens, 1.0)}

    # ------------------------------------------------------------------ the run

    def setup(self) -> "Trainer":
        """Check the run folder, build the models, then write the folder's config.json and warm_start.json (once).
        Another run's config, or inputs other than the ones the folder recorded (`check_start`), are refused
        before anything is built; a run refused anywhere before the end of the set-up writes neither file, so the
        corrected command runs in the same folder."""
        if not hasattr(self, "model"):
            if self.parallel.is_main:  # only rank 0 writes the folder
                self.lock = claim_run_folder(self.out, self.config)
                self.start = check_start(self.out, self.config, self.task)
            self.build_models()
            if self.parallel.is_main:
                open_run_folder(self.out, self.config)
                record_warm_start(self.out, self.warm_start_folder, self.start)  # `workbench export` rebuilds from it
        return self

    def close(self) -> None:
        """Give the run folder back (the lock goes with the process anyway)."""
        if getattr(self, "lock", None) is not None:
            self.lock.release()

    def run(self) -> dict:
        try:
            return self.train_and_evaluate()
        finally:
            self.close()

    def train_and_evaluate(self) -> dict:
        c = self.config
        self.setup()
        start, before = self.restore()
        if before is None:
            before = {"accuracy": self.evaluate()[0], **self.held_out()}
        accuracy_before, sampled_before = before.pop("accuracy"), before
        t_start = time.perf_counter()
        run_steps(self.step, lambda done: self.state(done, accuracy_before, sampled_before), out=self.out,
                  log=self.log, start=start, config=c, desc=f"{c.recipe} on {c.task}", progress=self.progress,
                  callback=self.callback, main=self.parallel.is_main,
                  postfix=lambda row: {"reward": f"{row.get('reward/mean', 0.0):.2f}",
                                       "H": f"{row.get('entropy', 0.0):.2f}"})
        accuracy_after, records = self.evaluate()
        summary = {"recipe": c.recipe, "task": c.task, "model": c.model, "preset": c.preset, "seed": c.seed,
                   "steps": c.steps, "accuracy_before": accuracy_before, "accuracy_after": accuracy_after,
                   **({"accuracy_is": self.task.accuracy_is} if isinstance(self.task, GameTask) else {}),
                   "eval_size": len(records), "train_seconds_this_session": time.perf_counter() - t_start,
                   "ranks": self.parallel.world}
        if c.pass_k:  # pass@1 / pass@k / entropy of n samples per held-out prompt, before and after
            summary.update({"pass_k": c.pass_k, "pass_samples": c.pass_samples or c.pass_k})
        summary.update({f"{k}_before": v for k, v in sampled_before.items()})
        summary.update({f"{k}_after": v for k, v in self.held_out().items()})
        if self.parallel.is_main:
            write_run_results(self.out, summary, records)
        return summary

