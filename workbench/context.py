"""What the pipeline hands a component besides the batch: the step's context and the training forward pass."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

import torch


@dataclass
class StepContext:
    """One step as a component sees it. `state` is the calling component's own state (None if it keeps none);
    `metrics` collects what it wants logged in the step's row. `resample(round)` draws and rolls out a new
    round of the same step (group transforms); `rollout(examples, group_size=, greedy=, temperature=, task=,
    rewarded=)` runs the recipe's rollout strategy on given examples (e.g. ReMax's greedy baseline, AEPO's
    resampling at another temperature, GHPO's re-roll of a hinted copy of the task; `rewarded=True` scores the
    rows through the recipe's reward stage, as rows that replace the batch's own must be); `score(batch, temperature)` is the current policy's log-probs [B, T] of the batch's responses at
    that temperature, without gradient (DCPO's target-temperature weight); `vocab_logp(batch)` is the current policy's
    log-probs over the whole vocabulary [B, T, V] at each response position, at the run's temperature, without
    gradient (a self-teacher's distribution under another prompt: SRPO); `gather(x)` collects a per-row tensor from
    every rank, so that state a component keeps is the same on all of them (`gather_objects(list)`: the same for lists
of Python objects, e.g. prompt texts). `task` is the run's task (its
    `make_env()`, `expert_actions`, `score`: Monte Carlo continuations replay an episode with `episodes.replay`);
    `engine` is the rollout engine (`generate_ids(prefixes, ...)` continues token-id prefixes, `tokenizer`
    encodes text), for components that sample from a state mid-episode or score text the batch does not hold."""

    step: int
    total_steps: int
    seed: int
    group_size: int
    prompts_per_step: int
    max_new_tokens: int
    pad_id: int = 0
    examples: list = field(default_factory=list)   # the step's examples; batch.group indexes them
    resample: Callable | None = None
    rollout: Callable | None = None
    score: Callable | None = None
    vocab_logp: Callable | None = None             # batch -> [B, T, V] the policy's log-probs, 0 off the mask
    gather: Callable = lambda x: x                 # [N] this rank's rows -> all ranks' rows (data parallelism)
    gather_objects: Callable = lambda xs: list(xs)  # this rank's list -> every rank's lists joined, in rank order
    task: Any = None                               # the run's task (environments, experts, the verifier)
    engine: Any = None                             # the rollout engine (continue prefixes; `tokenizer`)
    opponents: dict = field(default_factory=dict)  # engines of frozen opponents by name ("past": the previous
    #                                                iterate the recipe's reference keeps), for multi-agent rollouts
    state: Any = None
    metrics: dict = field(default_factory=dict)
    component: str = ""                            # "slot:key" of the component being called
    round: int = 0                                 # sampling round of the step: > 0 when a transform resamples

    def rng(self, round: int = 0) -> random.Random:
        """This component's random stream for this step: seeded by (seed, step, round, component)."""
        return random.Random(f"{self.seed}-{self.step}-{round}-{self.component}")

    def generator(self, round: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.rng(round).getrandbits(63))


@dataclass
class Forward:
    """The training forward pass over a minibatch, [B, T] each; None where no component asked for it."""

    logp: torch.Tensor
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


@dataclass(eq=False)  # compared by identity: a batch field (`RolloutBatch.head`), never merged across batches
class Head:
    """The policy's output layer at a minibatch's training forward, as the coming optimizer step sees it.

    logits / temperature = (hidden @ weight.T + bias) / temperature at each response position. `exp_avg`,
    `exp_avg_sq` and `step` are the optimizer's Adam state of `weight` as of this update (None, None, 0 before
    its first step; a tied embedding's state counts both uses); `trained` is False when the optimizer does not
    update `weight` (a LoRA run's frozen head). The trainer sets it on a minibatch when a component reads "head"
    (CAPO predicts each token's update from it), built by `Head.of`."""

    hidden: torch.Tensor                    # [B, T, H] the head's input at each response position, detached
    weight: torch.Tensor                    # [V, H], detached
    bias: torch.Tensor | None
    trained: bool
    lr: float
    betas: tuple
    eps: float
    temperature: float
    exp_avg: torch.Tensor | None = None     # [V, H] first moment of the loss gradient
    exp_avg_sq: torch.Tensor | None = None  # [V, H] second moment
    step: int = 0                           # optimizer steps taken on `weight` so far

    @classmethod
    def of(cls, model, optimizer: torch.optim.Optimizer, hidden: torch.Tensor, temperature: float) -> "Head":
        """`model`'s output layer as `optimizer`'s coming step sees it: weight, bias, the optimizer's lr, betas, eps
        and Adam state of the weight right now, and `hidden` [B, T, H], its input at the training forward."""
        layer = model.get_output_embeddings()
        weight, bias = layer.weight, getattr(layer, "bias", None)
        group = next((g for g in optimizer.param_groups if any(p is weight for p in g["params"])), {})
        state = optimizer.state.get(weight, {}) if group else {}  # empty before the first step
        return cls(hidden=hidden.detach().to(weight.device), weight=weight.detach(), bias=None if bias is None else bias.detach(),
                   trained=bool(group) and weight.requires_grad, lr=group.get("lr", 0.0),
                   betas=tuple(group.get("betas", ())), eps=group.get("eps", 0.0), temperature=temperature,
                   exp_avg=state.get("exp_avg"), exp_avg_sq=state.get("exp_avg_sq"), step=int(state.get("step", 0)))
