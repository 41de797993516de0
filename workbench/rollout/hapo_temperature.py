"""HAPO's adaptive temperature sampling: each token is drawn at T_t = T (1 + tau h_hat_t).

h_hat_t is HAPO's normalized entropy (`workbench.objectives.hapo.normalized_entropy`) of the step's own
distribution at the base temperature T: above the pivot quantile of log-entropy the temperature rises (explore at
forks), below it falls (stay coherent), by at most tau = 5 %.

The statistics that map an entropy to h_hat (pivot, spread, max/min) are, as in HAPO's trainer
(`ray_trainer.py`: `norm_entropys` from the last batch's `old_log_prob` entropies, handed to the sampler with the
next generation), those of the previous step's batch: the rollout keeps them as its pipeline state (checkpointed)
and `observe` replaces them after every step with the statistics of that step's `batch.entropy` (the old policy's,
at T), gathered over every rank. The first step has none and samples at the constant T, as HAPO's does.

The returned `mu_logp` are the log-probs the tokens were drawn with (at T_t): the trainer scores at T, and the
difference shows in the `mismatch/*` metrics; `tis` (or `--set rollout_is=...`) corrects it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessor

from workbench import ops, registry
from workbench.advantages.hapo import HAPO_TITLE
from workbench.objectives.hapo import EntropyStats, entropy_stats, normalized_entropy
from workbench.rollout.turns import TURNS_PROVIDES, turns


def check_hapo(*, tau=0.05, entropy_pivot=0.8, **_) -> None:
    if not 0 <= tau < 1:
        raise ValueError(f"tau must be in [0, 1) so that T_t = T (1 + tau h_hat) stays positive, got {tau}")
    if not 0 <= entropy_pivot <= 1:
        raise ValueError(f"entropy_pivot must be in [0, 1], got {entropy_pivot}")


class AdaptiveTemperature(LogitsProcessor):
    """Divides each row's logits [B, V] by T_t = T (1 + tau h_hat_t), h_hat_t from the entropy of softmax(logits/T)
    under fixed `stats`: the engine's per-token temperature hook (`HFEngine.sample(temperature_hook=...)`)."""

    def __init__(self, stats: EntropyStats, *, temperature: float, tau: float, reference_bug: bool = False):
        self.stats, self.temperature, self.tau, self.reference_bug = stats, temperature, tau, reference_bug

    def temperatures(self, logits: torch.Tensor) -> torch.Tensor:
        """T_t [B] for the next-token logits [B, V]."""
        entropy = ops.entropy_from_logits(logits, self.temperature)
        h_hat = normalized_entropy(entropy, self.stats, reference_bug=self.reference_bug)
        return self.temperature * (1.0 + self.tau * h_hat)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.temperatures(scores).to(scores.dtype)[:, None]


@dataclass
class HookedEngine:
    """An engine whose `generate` / `generate_ids` sample with a temperature hook; everything else is `engine`'s
    (so the multi-turn rollout runs on it unchanged)."""

    engine: object
    hook: LogitsProcessor

    def generate(self, prompts, **kw):
        return self.engine.generate(prompts, **kw, temperature_hook=self.hook)

    def generate_ids(self, prompts, **kw):
        return self.engine.generate_ids(prompts, **kw, temperature_hook=self.hook)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def last_step_stats(**_) -> dict:
    """The rollout's state: the entropy statistics of the previous step's batch (None before the first step)."""
    return {"stats": None}


def observe_entropy(state: dict, batch, ctx, *, entropy_pivot=0.8, **_) -> dict:
    """After a step: the statistics of its batch's entropy [B, T] over the valid tokens of every rank."""
    tokens = ctx.gather_objects(batch.entropy[batch.mask > 0].tolist())   # [N] every rank's valid tokens
    entropy = torch.tensor(tokens, dtype=batch.entropy.dtype)[None]         # [1, N]
    return {"stats": entropy_stats(entropy, torch.ones_like(entropy), pivot_quantile=entropy_pivot)}


@registry.rollout(
    "hapo-temperature", title=HAPO_TITLE,
    summary="Per-token sampling temperature T (1 + tau h_hat): hotter on high-entropy tokens, cooler on low-entropy "
            "ones (tau = 0.05); h_hat normalized with the previous batch's entropy statistics; mu_logp recorded "
            "at T_t.",
    equation=r"T_t = T\,(1 + \tau\,\hat h_t),\quad \hat h_t = \mathrm{norm}\big(\log H(\pi(\cdot\mid y_{<t})/T)\big)"
             r"\in[-1, 1]",
    reads=(), provides=TURNS_PROVIDES, state=last_step_stats, observe=observe_entropy, check=check_hapo)
def hapo_temperature(engine, task, examples, *, group_size: int, sampling, ctx=None, tau=0.05, entropy_pivot=0.8,
                     reference_bug=False):
    """The `turns` rollout sampled at T_t = T (1 + tau h_hat_t) (T = `sampling.temperature`), h_hat under the
    previous step's statistics (`ctx.state`; the constant T when there are none yet, or without a pipeline).

    Defaults from HAPO's recipes (`actor_rollout_ref.rollout.temperature_tau=0.05`, `actor.entropy_pivot=0.8`,
    whose statistics the sampler reuses). h_hat is clipped to [-1, 1] as in HAPO's sampler
    (`compute_entropy_based_temperature`), so T_t lies in [T (1 - tau), T (1 + tau)]. reference_bug=True maps
    low-entropy tokens to h_hat >= 0 as HAPO's code does (see `objectives/hapo.py`), so the temperature never
    falls below T. HAPO's sampler measures the entropy of the raw logits (T = 1 in all its recipes) and adds
    1e-6 to the spread; here the entropy is taken at T, the one the trainer's `batch.entropy` uses. Greedy
    sampling is the plain rollout. Needs an engine that runs a temperature hook (the HF engine).
    """
    check_hapo(tau=tau, entropy_pivot=entropy_pivot)
    stats = ctx.state["stats"] if ctx is not None and ctx.state is not None else None
    if sampling.greedy or stats is None:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    if not getattr(engine, "takes_temperature_hook", False):
        raise ValueError(f"hapo-temperature samples with a per-token temperature hook, which {type(engine).__name__} "
                         "does not run; use the HF engine (engine='hf')")
    hook = AdaptiveTemperature(stats, temperature=sampling.temperature, tau=tau, reference_bug=reference_bug)
    return turns(HookedEngine(engine, hook), task, examples, group_size=group_size, sampling=sampling)
