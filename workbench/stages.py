"""The training step's stages and the registry's kinds, in the order they run: the one place the order is written.

    setup -> sampler -> rollout -> rewards -> group_transforms -> forward passes -> reward_shaping -> advantage
          -> token_masks -> update -> after the step

`KINDS` lists every registry kind once, in that order, with its signature, the recipe field (slot) that holds its
components and the book's heading. `STAGES` says which slots each stage runs. The registry's signatures, the
recipe's slots, the pipeline's stage list, the trainer's loop and the book's catalog are all read from here.

Token masks run after the advantage: a mask may read the advantages (LOOP drops rollouts with |A| < 0.01), so
advantage estimators (and a critic's targets) see the rollout's mask and a token mask only changes which tokens the
policy loss trains on.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    kind: str          # registry kind
    title: str         # the book's heading for the kind's components
    signature: str     # the one call every component of the kind answers
    slot: str = ""     # the recipe field listing the kind's components ("" when a recipe does not list them)
    single: bool = False  # the slot holds one component (or, for value, none), not a list
    passed: tuple = ()    # the keywords the pipeline passes every component of the kind besides its settings


KINDS = (
    Kind("reference", "Reference builders", "fn(model, ctx, **hp) -> model                  (policy start and KL "
         "reference)", "reference", single=True),
    Kind("sampler", "Samplers", "init(**hp) -> state; select(state, task, n, rng) -> examples; update(state, batch) "
         "-> state", "sampler", single=True),
    Kind("rollout", "Rollout strategies", "fn(engine, task, examples, *, group_size, sampling, **hp) -> "
         "RolloutBatch", "rollout", single=True, passed=("group_size", "sampling", "ctx")),
    Kind("env", "Environments", "reset(example, seed) -> (messages, info); step(action) -> (observations, reward, "
         "done, info)"),
    Kind("reward", "Rewards", "fn(completions, **columns) -> list[float | None]          (TRL's convention)",
         "rewards", passed=("completions", "prompts", "completion_ids", "answer", "solution", "target", "scores",
                            "truncated", "turn_info", "max_new_tokens", "step", "total_steps", "log_metric")),
    Kind("group_transform", "Group transforms", "fn(batch, ctx, **hp) -> batch                             "
         "(filter, resample, inject)", "group_transforms"),
    Kind("reward_shaping", "Reward shaping", "fn(batch, ctx, **hp) -> batch                             (rewards, "
         "token_rewards)", "reward_shaping"),
    Kind("advantage", "Advantage estimators", "fn(batch, **hp) -> A [B, T]                               (may read "
         "batch.advantages)", "advantage"),
    Kind("token_mask", "Token masks", "fn(batch, **hp) -> mask [B, T]", "token_masks"),
    Kind("loss_weight", "Loss weights", "fn(batch, **hp) -> (w [B, T], metrics)          (multiply the objective's "
         "per-token loss)", "loss_weights"),
    Kind("objective", "Policy objectives", "fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, "
         "metrics)", "objective", single=True, passed=("agg", "denom")),
    Kind("aggregation", "Loss aggregation", "fn(per_token, mask, denom) -> scalar"),
    Kind("regularizer", "Regularizers", "fn(forward, batch, *, agg, denom, **hp) -> (loss, metrics)",
         "regularizers", passed=("agg", "denom")),
    Kind("kl", "KL estimators", "fn(logp, ref_logp) -> per-token KL estimate [B, T]"),
    Kind("value", "Value losses (critics)", "fn(values, batch, *, agg, denom, **hp) -> (loss, metrics)   (targets "
         "from the advantage)", "value", single=True, passed=("agg", "denom")),
    Kind("preference", "Preference losses", "fn(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, "
         "**hp) -> (loss, metrics)"),
    Kind("controller", "Controllers", "init(**hp) -> state; update(state, batch, metrics) -> state; value(state) -> "
         "{param: x}", "controllers"),
    Kind("schedule", "Schedules", "fn(step, total, **hp) -> float", "schedules"),
    Kind("buffer", "Replay buffers", "init(**hp) -> state; add(state, batch, step) -> state; draw(state, n, rng) -> "
         "(batch, state)", "buffers"),
    Kind("recipe", "Recipes", "a named composition of the above"),
)


@dataclass(frozen=True)
class Stage:
    name: str
    slots: tuple       # recipe fields whose components this stage runs, in order
    does: str


STAGES = (
    Stage("setup", ("reference",), "what the policy starts from and the KL reference is: fn(model, ctx) -> model"),
    Stage("sampler", ("sampler",), "which examples enter the step: select(state, task, n, rng)"),
    Stage("rollout", ("rollout",), "generate over the task's environment: fn(engine, task, examples, *, group_size)"),
    Stage("rewards", ("rewards",), "the environment's reward + weighted reward functions (TRL's signature)"),
    Stage("group_transforms", ("group_transforms",),
          "edit finished groups: fn(batch, ctx) -> batch (dynamic sampling)"),
    Stage("forward passes", (), "old log-probs and entropy, reference log-probs, values: only what a component reads"),
    Stage("reward_shaping", ("reward_shaping",), "rewards -> rewards / token rewards: fn(batch, ctx) -> batch"),
    Stage("advantage", ("advantage",), "a chain, later entries may read advantages: fn(batch) -> A [B, T] (+ targets)"),
    Stage("token_masks", ("token_masks",), "which tokens the update trains on: fn(batch) -> mask [B, T]"),
    Stage("update", ("loss_weights", "objective", "regularizers", "value"),
          "objective (weighted per token) + regularizers + value loss, per minibatch"),
    Stage("after the step", ("controllers", "sampler", "buffers"), "controllers, samplers and buffers update"),
)  # schedules are not a stage: each is evaluated where the parameter it drives is used

SLOTS = {k.slot: k.kind for k in KINDS if k.slot}        # recipe field -> registry kind, in pipeline order
SINGLE = tuple(k.slot for k in KINDS if k.slot and k.single)
PASSED = {k.kind: k.passed for k in KINDS}                # kind -> keywords the pipeline passes besides settings
BATCH_STAGES = tuple(s.name for s in STAGES if s.name not in ("setup", "update", "after the step"))  # make the batch
SAMPLING_STAGES = BATCH_STAGES[:BATCH_STAGES.index("rewards") + 1]  # what a resampling round (`ctx.resample`) reruns
