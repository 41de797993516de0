"""The pipeline: a recipe's components, checked against each other, with their state, run in one fixed order.

A training step runs the stages of `workbench.stages.STAGES` in that order (`Trainer.make_batch`, then
`Trainer.train_on` and `Pipeline.after_step`); each stage runs, in order, the components the recipe lists for it.

The loop never branches on a method. Each registration declares what it reads and provides; `Pipeline`
refuses, before anything is built, a recipe whose parts don't fit. State kept across steps (controllers,
running statistics, buffers, samplers) lives in `Pipeline.state`, is saved in every checkpoint and
restored exactly; controllers and schedules set the parameter they name (`into="kind:key.param"`).
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, replace

import torch

from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.context import Forward, StepContext
from workbench.params import check_choice, check_value, did_you_mean
from workbench.recipes import RECIPES, Recipe, Use
from workbench.rewards import aggregate, interop
from workbench.rewards.stage import (check_return, mask_unscorable, probe_columns, reward_columns, reward_metrics,
                                     run_reward)
from workbench.rollout.engine import ENGINE_OFFERS
from workbench.stages import BATCH_STAGES, PASSED, SLOTS, STAGES
from workbench.tasks import get_task
from workbench.tasks.base import Task
from workbench.envs.multiagent import MultiAgentEnv
from workbench.tasks.guidance import has_solutions
from workbench.probe import probe_settings

BEFORE_UPDATE = [slot for stage in STAGES if stage.name in BATCH_STAGES for slot in stage.slots]

PIPELINE_ARGUMENTS = ("agg", "denom")  # what the pipeline passes a loss term itself, never a recipe's setting
REWARD_OPTIONS = ("weight", *interop.CALL_OPTIONS)  # a reward Use's keywords for the pipeline, not the function
# Batch fields a rollout always fills; forward passes add old_logp, entropy, ref_logp, values.
ROLLOUT_FIELDS = {"response_ids", "mask", "group", "rewards", "scores", "prompt_ids", "prompt_mask", "mu_logp",
                  "truncated", "completions", "prompts"}
# Batch fields the forward passes fill from the logits only when a component reads them: field -> (pass, statistic
# of `rollout.engine.LOGIT_STATS`); "old" is the old-log-prob pass, "ref" the reference's.
FORWARD_STATS = {"old_vocab_mean_logp": ("old", "vocab_mean_logp"), "ref_argmax": ("ref", "argmax")}


def providers(fields: list[str]) -> list[str]:
    """'kind:key' of every registered component that provides one of `fields` (critic targets: `returns`,
    `value_mask` come with an advantage's declared targets)."""
    out = []
    for e in registry.entries():
        made = set(e.provides) | ({"returns", "value_mask"} if e.targets else set())
        if made & set(fields):
            out.append(f"{e.kind}:{e.key}")
    return out


def tasks_offering(need: str) -> list[str]:
    """The registered tasks that offer `need` (a key of `registry.NEEDS`); games only where the need is theirs (a
    one-agent method never trains on a game)."""
    offers = [task_capabilities(get_task(e.key)) for e in registry.entries("env")]
    return [e.key for e, can in zip(registry.entries("env"), offers) if can[need] and (need == "agents" or not can["agents"])]


def task_capabilities(task) -> dict[str, bool]:
    """{need: whether `task` offers it} for every key of `registry.NEEDS`, read off one fresh environment."""
    env = task.make_env()
    return {"multi_turn": env.max_turns > 1, "env_copy": bool(getattr(env, "copyable", False)),
            "env_actions": callable(getattr(env, "actions", None)),
            "expert": env.max_turns > 1 and type(task).expert_actions is not Task.expert_actions,
            "subgoals": bool(getattr(env, "subgoals", False)), "solution": has_solutions(task),
            "agents": isinstance(env, MultiAgentEnv), "phases": bool(getattr(env, "phases", ())),
            "proposer": getattr(task, "solver", None) is not None and callable(getattr(task, "question", None))}


# What the pipeline logs itself (`Pipeline.loss`); the components' metrics are declared by each (`logs=`).
PIPELINE_METRICS = {
    "loss/policy": ("Policy objective value (aggregated), averaged over minibatches.",
                    "Not a progress measure: with centred advantages it hovers around 0 and does not go down as the "
                    "policy improves."),
    "loss/total": ("Total loss optimized: policy + KL + entropy + value terms.",
                   "Same caveat as loss/policy; the KL and entropy terms shift it."),
}


def step_outcomes(batch: RolloutBatch, ctx: StepContext) -> RolloutBatch:
    """What a sampler learns from a finished step, from every rank (data parallelism; one process: the batch's own):
    each row's prompt, score and reward, one group per prompt. A sampler selects before the step is sharded, so it
    must see the outcomes of every rank's share."""
    if batch is None or batch.size == 0 or not batch.prompts:
        return batch
    prompts = ctx.gather_objects([str(p) for p in batch.prompts])
    ids = {p: i for i, p in enumerate(dict.fromkeys(prompts))}
    view = RolloutBatch.from_rewards(ctx.gather(batch.rewards.double()), group=[ids[p] for p in prompts])
    view.scores = ctx.gather((batch.scores if batch.scores is not None else batch.rewards).double())
    view.prompts = prompts
    return view


@dataclass
class Part:
    """One component of the running pipeline."""

    slot: str       # recipe field, e.g. "regularizers"
    use: Use
    entry: registry.Entry
    name: str       # "kind:key", unique in the pipeline (state and `into` targets use it)

    @property
    def fn(self):
        return self.entry.fn

    @property
    def reads(self) -> tuple:
        return self.entry.reads_with(self.use.kw)


class Pipeline:
    def __init__(self, recipe: Recipe, *, track_kl: bool = True):
        self.recipe = recipe
        if recipe.agg not in ops.AGG_MODES:
            raise ValueError(f"recipe {recipe.key!r}: unknown aggregation {recipe.agg!r}; modes: {ops.AGG_MODES}")
        self.parts: dict[str, list[Part]] = {slot: [] for slot in SLOTS}
        for kind, u in recipe.uses():
            slot = next(s for s, k in SLOTS.items() if k == kind)
            self.parts[slot].append(self._part(slot, kind, u))
        self.drivers = {p.use.into: p for p in self.parts["controllers"] + self.parts["schedules"]}
        self._check_drivers()
        self.needs_ref = track_kl or self.reads_anywhere("ref_logp") or bool(self.forward_stats("ref"))
        self.anchors = self.parts["reference"][0].entry.keeps if self.parts["reference"] else ()
        self.has_critic = bool(self.parts["value"])
        self.train_entropy = any("entropy" in p.reads for p in self.parts["regularizers"])
        self._check_reads()
        if recipe.reward_aggregation not in aggregate.AGGREGATIONS:
            raise ValueError(f"recipe {recipe.key!r}: unknown reward_aggregation {recipe.reward_aggregation!r}; "
                             f"choose one of {aggregate.AGGREGATIONS}")
        if not recipe.task_reward and not self.parts["rewards"]:
            raise ValueError(f"recipe {recipe.key!r}: task_reward=0 leaves no reward at all; give it reward "
                             "functions (rewards=[...]) or a task_reward > 0")
        self.state = {p.name: self._initial_state(p) for slot in SLOTS for p in self.parts[slot]
                      if p.entry.state or registry.STATEFUL.get(p.entry.kind)}

    # ------------------------------------------------------------------ building and checking

    def _part(self, slot: str, kind: str, u: Use) -> Part:
        try:
            entry = (interop.external_entry(u.key, u.kw) if kind == "reward" and interop.is_external(u.key)
                     else registry.get(kind, u.key))
        except KeyError as err:
            raise ValueError(f"recipe {self.recipe.key!r}, slot {slot}: {err.args[0]}") from None
        name = f"{kind}:{u.key}"
        taken = {p.name for ps in self.parts.values() for p in ps}
        if name in taken:
            name = f"{name}#{sum(n.split('#')[0] == name for n in taken) + 1}"
        self._check_kwargs(entry, u, slot)
        return Part(slot, u, entry, name)

    def _check_kwargs(self, entry: registry.Entry, u: Use, slot: str) -> None:
        """Refuse, naming the component, a parameter it does not take (with the closest it does) and a value of the
        wrong type or out of range (`workbench.params`); then the component's own `check`. A reward's `**columns`
        are the dataset's columns, not settings: its settings are its named parameters and `REWARD_OPTIONS`."""
        where = f"recipe {self.recipe.key!r}: {entry.kind} {u.key!r}"
        fn = entry.fn.init if registry.STATEFUL.get(entry.kind) else entry.fn
        params = inspect.signature(fn).parameters
        settings = {k: p.default for k, p in params.items()
                    if p.default is not inspect.Parameter.empty and k not in PIPELINE_ARGUMENTS}
        given = sorted(set(u.kw) & set(PIPELINE_ARGUMENTS) & set(params))
        if given:
            raise ValueError(f"{where}: {given[0]} is the pipeline's to pass (the recipe's aggregation and the "
                             f"update's denominators), not a component setting; set the recipe's with "
                             f"--set recipe_overrides.agg=MODE")
        if entry.kind == "reward":
            settings.update(weight=1.0, conversational=True, build=None)
        open_ended = (any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
                      and (entry.kind != "reward" or interop.is_external(u.key)))
        for name, value in u.kw.items():
            if name in settings:
                check_value(where, name, value, settings[name])
                if name in entry.choices:
                    check_choice(where, name, value, entry.choices[name])
            elif not open_ended:
                named = sorted(k for k in settings if k not in ("conversational", "build"))  # a sampler's `init`
                raise ValueError(f"{where} takes no {name!r}{did_you_mean(name, settings)}; its parameters: "
                                 f"{named + (['weight'] if entry.kind == 'reward' else [])}")
        try:
            if entry.check is not None:
                entry.check(**u.kw)
            if not registry.STATEFUL.get(entry.kind) and not interop.is_external(u.key):
                probe_settings(entry.fn, {k: v for k, v in u.kw.items() if k in params}, {"agg": self.recipe.agg},
                               inputs=tuple(n for n in PASSED[entry.kind] if n != "agg"))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None

    def check_group_size(self, group_size: int) -> None:
        """Refuse, before anything is trained, a group size a component cannot take: G = 1 for a group baseline that
        needs G >= 2 (it takes `allow_singletons`, and the recipe leaves it False), or what a component's `check`
        refuses when it takes `group_size` (e.g. more guided samples than the group holds)."""
        for p in (p for parts in self.parts.values() for p in parts):
            check = p.entry.check
            if check is not None and "group_size" in inspect.signature(check).parameters:
                try:
                    check(group_size=group_size, **p.use.kw)
                except ValueError as err:
                    raise ValueError(f"recipe {self.recipe.key!r}, {p.name}: {err}") from None
        if group_size >= 2:
            return
        for slot, parts in self.parts.items():
            for p in parts:
                param = inspect.signature(p.fn).parameters.get("allow_singletons") if callable(p.fn) else None
                if param is not None and not p.use.kw.get("allow_singletons", param.default):
                    raise ValueError(
                        f"group_size={group_size}: {p.entry.kind} {p.use.key!r} of recipe {self.recipe.key!r} needs "
                        f"at least 2 samples per prompt for its group baseline; set group_size >= 2, or give "
                        f"one-sample groups A = 0 with --set recipe_overrides.{slot}:{p.use.key}.allow_singletons=true")

    def check_rewards(self, examples: list, max_new_tokens: int, total_steps: int) -> None:
        """Call each reward function once on the task's examples answered with their targets: one that returns the
        wrong number of values or a non-number is refused now, not after the warm start (`stage.check_return`)."""
        columns = probe_columns(examples, max_new_tokens, total_steps)
        for p in self.parts["rewards"]:
            name = p.name.split(":", 1)[1] if not interop.is_external(p.use.key) else p.fn.__name__
            check_return(name, p.fn, columns, self.kwargs(p, 0, total_steps))

    def check_task(self, task) -> None:
        """Refuse, before anything is built, a task that lacks what a component `needs` (registry.NEEDS):
        multi-turn episodes for a turn-level method, copyable environments for Monte Carlo continuations, ..."""
        needing = [(p, need) for parts in self.parts.values() for p in parts for need in p.entry.needs
                   if need in registry.NEEDS]
        offers = task_capabilities(task)
        for p, need in needing:
            if not offers[need]:
                raise ValueError(f"recipe {self.recipe.key!r}: {p.name} needs {registry.NEEDS[need]}; task "
                                 f"{task.name!r} has none. Train it on a task that does: --task "
                                 f"{' | '.join(tasks_offering(need))}")
        if offers["agents"] and not any(need == "agents" for _, need in needing):
            games = sorted(key for key, recipe in RECIPES.items() if recipe.rollout.key == "agents")
            raise ValueError(f"task {task.name!r} is a game of several agents: recipe {self.recipe.key!r} has no "
                             f"rollout that plays one; use a multi-agent recipe (rollout `agents`), e.g. --recipe "
                             f"{' | '.join(games) or 'self-play'}")
        for p in self.parts["rollout"]:
            check = getattr(p.fn, "check_task", None)
            if check is not None:
                try:
                    check(task, anchors=self.anchors, **p.use.kw)
                except ValueError as err:
                    raise ValueError(f"recipe {self.recipe.key!r}, {p.name}: {err}") from None

    def check_sampler(self, task, prompts_per_step: int) -> None:
        """Refuse, before anything is built, a sampler that cannot give a step its prompts from this task (a pool
        smaller than a step, a task with fewer distinct prompts than the pool): the sampler's own `check_run`."""
        for p in self.parts["sampler"]:
            check = getattr(p.fn, "check_run", None)
            if check is not None:
                try:
                    check(task, prompts_per_step, **p.use.kw)
                except ValueError as err:
                    raise ValueError(f"recipe {self.recipe.key!r}, {p.name}: {err}") from None

    def check_engine(self, engine: str) -> None:
        """Refuse, before anything is built, an engine that lacks what a component needs of it
        (registry.ENGINE_NEEDS: top-k log-probs for ARPO's entropy, ...)."""
        for p in (p for parts in self.parts.values() for p in parts):
            for need in set(p.entry.needs) & set(registry.ENGINE_NEEDS) - ENGINE_OFFERS[engine]:
                able = [name for name, offers in ENGINE_OFFERS.items() if need in offers]
                raise ValueError(f"recipe {self.recipe.key!r}: {p.name} needs {registry.ENGINE_NEEDS[need]}, which "
                                 f"engine={engine!r} does not report; use engine={' or '.join(map(repr, able))}")

    def _check_drivers(self) -> None:
        """`into="kind:key.param"` drives one parameter with a float; a controller may instead name the whole
        component (`into="kind:key"`) and return {param: value} from `value(state)` (several bounds at once)."""
        for target, driver in self.drivers.items():
            where, _, param = target.partition(".")
            part = self.find(where)
            if not target or part is None or not (param or driver.slot == "controllers"):
                names = sorted(p.name for ps in self.parts.values() for p in ps)
                raise ValueError(f"recipe {self.recipe.key!r}: {driver.name} drives into={target!r}, which names no "
                                 f"component parameter; use 'kind:key.param' with one of {names}")
            params = inspect.signature(part.fn).parameters
            if param and param not in params:
                raise ValueError(f"recipe {self.recipe.key!r}: {driver.name} drives {param!r}, which {part.name} does "
                                 f"not take")

    def driven_params(self, target: str, value) -> dict:
        """{param: value} a driver sets on its target: one parameter, or the dict a whole-component driver returns."""
        where, _, param = target.partition(".")
        if param:
            return {param: value}
        if not isinstance(value, dict):
            raise ValueError(f"controller driving into={target!r} (a whole component) must return {{param: value}} "
                             f"from value(state), got {type(value).__name__}")
        takes = inspect.signature(self.find(where).fn).parameters
        unknown = sorted(set(value) - set(takes))
        if unknown:
            raise ValueError(f"controller driving {where} sets {unknown}, which {where} does not take")
        return value

    def reads_before_update(self, *fields: str) -> bool:
        """Does a stage before the update read any of `fields` (so the forward passes must supply it)?"""
        return any(f in p.reads for slot in BEFORE_UPDATE for p in self.parts[slot] for f in fields)

    def reads_anywhere(self, field: str) -> bool:
        return any(field in p.reads for ps in self.parts.values() for p in ps)

    def forward_stats(self, forward_pass: str) -> dict[str, str]:
        """{batch field: logit statistic} that forward pass `forward_pass` ("old" or "ref") must fill because a
        component reads the field (`FORWARD_STATS`)."""
        return {name: stat for name, (where, stat) in FORWARD_STATS.items()
                if where == forward_pass and self.reads_anywhere(name)}

    def _check_reads(self) -> None:
        """Walk `STAGES` in order; every read must be provided by an earlier stage (or, for the update's and the
        after-step components, by the training forward: `logp`, the live logits / temperature, `logits` (SRPO), and
        the LM head with its optimizer state, `head` (`context.Head`); and the step's logged `kl`)."""
        forward = {"old_logp", "entropy", *self.forward_stats("old")}
        forward |= {"ref_logp", *self.forward_stats("ref")} if self.needs_ref else set()
        forward |= {"values", "old_values"} if self.has_critic else set()
        forward |= {"prev_logp"} if "prev" in self.anchors else set()
        added = {"forward passes": forward, "update": {"logp", "head", "logits"},
                 "after the step": {"kl"} if self.needs_ref else set()}
        have = set(ROLLOUT_FIELDS)
        for stage in STAGES:
            have |= added.get(stage.name, set())
            for p in (p for slot in stage.slots for p in self.parts[slot]):
                missing = [f for f in p.reads if f not in have]
                if missing:
                    critic = ("; values and old_values come from a critic: give the recipe a value loss (value="
                              "use('value-loss'), or the method's own)" if {"values", "old_values"} & set(missing)
                              else "")
                    prev = ("; prev_logp is the previous iterate's: give the recipe a reference that keeps one "
                            f"({', '.join(e.key for e in registry.entries('reference') if 'prev' in e.keeps)})"
                            if "prev_logp" in missing else "")
                    raise ValueError(f"recipe {self.recipe.key!r}: {p.name} reads {missing}, which no earlier stage "
                                     f"provides; components that provide them: {providers(missing)} (for ref_logp "
                                     f"or kl: keep track_kl=true){critic}{prev}")
                have |= set(p.entry.provides)
                if stage.name == "advantage":
                    have |= {"advantages"} | ({"returns", "value_mask"} if p.entry.targets else set())

    def _initial_state(self, p: Part):
        if p.slot == "controllers":
            where, _, param = p.use.into.partition(".")
            target = self.find(where)
            current = {**target.entry.defaults, **target.use.kw}  # whole-component drivers start from all of them
            return p.fn.init(initial=current.get(param) if param else current, **p.use.kw)
        if registry.STATEFUL.get(p.entry.kind):
            return p.fn.init(**p.use.kw)
        return p.entry.state()

    def find(self, name: str) -> Part | None:
        return next((p for ps in self.parts.values() for p in ps if p.name == name), None)

    # ------------------------------------------------------------------ parameters driven across steps

    def kwargs(self, p: Part, step: int, total: int) -> dict:
        """The part's keyword arguments this step: the recipe's, then what controllers and schedules drive."""
        kw = {k: v for k, v in p.use.kw.items() if not (p.entry.kind == "reward" and k in REWARD_OPTIONS)}
        for target, driver in self.drivers.items():
            if target.partition(".")[0] == p.name:
                kw.update(self.driven_params(target, self.driven_value(driver, step, total)))
        return kw

    def driven_value(self, driver: Part, step: int, total: int) -> float:
        if driver.slot == "controllers":
            return driver.fn.value(self.state[driver.name])
        return driver.fn(step, total, **driver.use.kw)

    def driven_metrics(self, step: int, total: int) -> dict:
        """The values each controller set this step, logged as `<target>.<param>`, or by the run coefficient's name
        when the parameter is one (`kl_coef` for an adaptive KL beta); only numbers are logged (a controller may also
        drive a list, e.g. a per-turn history)."""
        out = {}
        for target, driver in self.drivers.items():
            if driver.slot == "controllers":
                where = target.partition(".")[0]
                names = {param: name for name, param in self.find(where).entry.coefficients.items()}
                for param, value in self.driven_params(target, self.driven_value(driver, step, total)).items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        out[names.get(param, f"{where}.{param}")] = float(value)
        return out

    def context(self, p: Part, base: StepContext) -> StepContext:
        """`base` as component `p` sees it: its own state and random stream; metrics go to the step's row."""
        return replace(base, state=self.state.get(p.name), component=p.name)

    # ------------------------------------------------------------------ stages

    def select(self, task, n: int, rng) -> list:
        p = self.parts["sampler"][0]
        return p.fn.select(self.state[p.name], task, n, rng)

    def sampler_metrics(self) -> dict:
        """What the sampler reports of its last choice and fit (its state's `metrics`, declared in its `logs`)."""
        p = self.parts["sampler"][0]
        return dict(getattr(self.state[p.name], "metrics", None) or {})

    def rollout(self, engine, task, examples: list, *, group_size: int, sampling, ctx: StepContext):
        """The recipe's rollout strategy on `examples`; like every stage's component it sees its own state and the
        parameters controllers and schedules drive (`ctx`)."""
        p = self.parts["rollout"][0]
        return p.fn(engine, task, examples, group_size=group_size, sampling=sampling, ctx=self.context(p, ctx),
                    **self.kwargs(p, ctx.step, ctx.total_steps))

    def reward(self, batch, ctx: StepContext):
        """`scores` = the environment's reward; `rewards` = the recipe's rewards combined: the environment's
        (weight `task_reward`) and each reward function's (weight `weight`), summed (`reward_aggregation`
        "sum_then_normalize") or each normalized within its groups first ("normalize_then_sum"). None means
        "not applicable" and is left out (TRL's nansum); a row no reward applies to is masked out of the update
        (`stage.mask_unscorable`).
        Logs `rewards/<name>/mean|std` per reward."""
        batch.scores = batch.rewards.clone()
        if not self.parts["rewards"]:
            batch.rewards = batch.rewards * self.recipe.task_reward
            return batch
        columns = reward_columns(batch, ctx.examples, ctx)
        names, values, weights = [], [], []
        if self.recipe.task_reward:
            names.append("task"), values.append(batch.scores.double()), weights.append(self.recipe.task_reward)
        for p in self.parts["rewards"]:
            name = p.name.split(":", 1)[1] if not interop.is_external(p.use.key) else p.fn.__name__
            names.append(name)
            values.append(run_reward(name, p.fn, columns, self.kwargs(p, ctx.step, ctx.total_steps), ctx.metrics))
            weights.append(p.use.kw.get("weight", 1.0))
        table = torch.stack(values, dim=1)                                           # [B, K]
        rewards, unscorable = aggregate.combine(table, torch.tensor(weights, dtype=torch.float64), batch.group,
                                                self.recipe.reward_aggregation)
        ctx.metrics.update(reward_metrics(names, ctx.gather(table), ctx.gather(unscorable.double())))
        batch.rewards = rewards.to(batch.scores.dtype)
        return mask_unscorable(batch, unscorable) if bool(unscorable.any()) else batch

    def _batch_stage(self, slot: str, batch, ctx: StepContext):
        for p in self.parts[slot]:
            batch = p.fn(batch, self.context(p, ctx), **self.kwargs(p, ctx.step, ctx.total_steps))
        return batch

    def transform_groups(self, batch, ctx: StepContext):
        return self._batch_stage("group_transforms", batch, ctx)

    def shape_rewards(self, batch, ctx: StepContext):
        return self._batch_stage("reward_shaping", batch, ctx)

    def advantages(self, batch, ctx: StepContext):
        """The advantage chain; the first entry that defines critic targets fills returns / value_mask."""
        for p in self.parts["advantage"]:
            kw = self.kwargs(p, ctx.step, ctx.total_steps)
            batch.advantages = p.fn(batch, **kw).float()
            if self.has_critic and p.entry.targets and batch.returns is None:
                returns, value_mask = p.entry.targets(batch, **kw)
                batch.returns, batch.value_mask = returns.float(), value_mask
        if self.has_critic and batch.returns is None:
            raise ValueError(f"recipe {self.recipe.key!r} trains a critic, but no advantage in its chain defines "
                             "critic targets (use gae or t-ppo)")
        return batch

    def mask_tokens(self, batch, ctx: StepContext):
        for p in self.parts["token_masks"]:
            had = batch.mask.sum(-1) > 0
            batch.mask = p.fn(batch, **self.kwargs(p, ctx.step, ctx.total_steps))
            dropped = had & (batch.mask.sum(-1) == 0)
            ctx.metrics[f"filtered_frac/{p.use.key}"] = float(dropped.float().mean())
        return batch

    def loss(self, forward: Forward, mb, denom: ops.Denominators, value_denom, step: int, total: int):
        """(total loss, metrics) of a minibatch: objective + regularizers + value loss. The loss weights' product
        [B, T] (the rollout importance correction) multiplies the objective's per-token loss only, as verl does."""
        agg = self.recipe.agg
        weights, metrics = None, {}
        for w in self.parts["loss_weights"]:
            factor, m = w.fn(mb, **self.kwargs(w, step, total))
            weights = factor if weights is None else weights * factor
            metrics.update(m)
        p = self.parts["objective"][0]
        inputs = {name: getattr(mb, name) for name in p.reads}
        objective_denom = denom if weights is None else replace(denom, weights=weights)
        loss, m = p.fn(forward.logp, mb.old_logp, mb.advantages, mb.mask, agg=agg, denom=objective_denom,
                       **self.kwargs(p, step, total), **inputs)
        metrics.update(m)
        metrics["loss/policy"] = loss.item()
        total_loss = loss
        for r in self.parts["regularizers"]:
            term, m = r.fn(forward, mb, agg=agg, denom=denom, **self.kwargs(r, step, total))
            total_loss = total_loss + term
            metrics.update(m)
        for v in self.parts["value"]:
            term, m = v.fn(forward.values, mb, agg=agg, denom=value_denom, **self.kwargs(v, step, total))
            total_loss = total_loss + term
            metrics.update(m)
        metrics["loss/total"] = total_loss.item()
        return total_loss, metrics

    def after_step(self, batch, row: dict, ctx: StepContext) -> None:
        """Controllers, samplers, buffers and every component that `observe`s update from the finished step (its
        batch and logged row)."""
        for p in self.parts["controllers"]:
            self.state[p.name] = p.fn.update(self.state[p.name], batch, row)
        for p in self.parts["sampler"]:  # every rank's outcomes: the samplers' state stays the same on all ranks
            self.state[p.name] = p.fn.update(self.state[p.name], step_outcomes(batch, ctx))
        for p in self.parts["buffers"]:
            self.state[p.name] = p.fn.add(self.state[p.name], batch, row["step"])
        for p in (p for ps in self.parts.values() for p in ps if p.entry.observe is not None):
            self.state[p.name] = p.entry.observe(self.state[p.name], batch, self.context(p, ctx),
                                                 **self.kwargs(p, ctx.step, ctx.total_steps))

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict:
        return copy.deepcopy(self.state)

    def load_state_dict(self, state: dict) -> None:
        unknown = sorted(set(state) - set(self.state))
        if unknown:
            raise ValueError(f"checkpoint holds state of components {unknown} that recipe {self.recipe.key!r} does "
                             f"not have (a different recipe wrote it)")
        self.state.update(copy.deepcopy(state))

    def load_legacy_state(self, state: dict) -> None:
        """Checkpoints written before the pipeline: `shaping_state` {index: state} and `kl_beta`."""
        stateful = [p for p in self.parts["reward_shaping"] if p.entry.state]
        for index, value in (state.get("shaping_state") or {}).items():
            if int(index) < len(stateful):
                self.state[stateful[int(index)].name] = value
        if state.get("kl_beta") is not None:
            for target, driver in self.drivers.items():
                if driver.slot == "controllers" and target.endswith(".beta"):
                    self.state[driver.name].beta = state["kl_beta"]
