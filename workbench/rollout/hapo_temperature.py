"""HAPO's adaptive temperature sampling: each token is drawn at T_t = T (1 + tau h_hat_t).

h_hat_t is HAPO's normalized entropy (`workbench.objectives.hapo.normalized_entropy`) of the step's own
distribution at the base temperature T: above the pivot quantile of log-entropy the temperature rises (explore at
forks), below it falls (stay coherent), by at most tau = 5 %.

The statistics that map an entropy to h_hat (pivot, spread, max/min) come, in HAPO, from the previous training
batch. A rollout here sees no pipeline state (`Pipeline.rollout` passes the recipe's keyword arguments only), so
they are computed from a first pass over the same examples at the constant temperature T, scored by one forward
pass of the policy: the statistics of the current policy on the current prompts instead of the last ones. The
first pass leaves the random state as it found it, so with tau = 0 the returned samples are exactly the
plain `turns` rollout's. The cost is a second generation per step.

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
from workbench.rollout.engine import policy_forward
from workbench.rollout.turns import TURNS_PROVIDES, turns


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


def first_pass_stats(engine, task, examples, *, group_size: int, sampling, entropy_pivot: float) -> EntropyStats:
    """Entropy statistics of the policy's own samples at the constant temperature, drawn without moving the
    random state (the real samples that follow start from the same one)."""
    device = engine.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        probe = turns(engine, task, examples, group_size=group_size, sampling=sampling)
    with torch.no_grad():
        _, entropy, _ = policy_forward(engine.model, probe.prompt_ids, probe.prompt_mask, probe.response_ids,
                                       probe.mask, sampling.temperature, with_entropy=True)
    return entropy_stats(entropy, probe.mask, pivot_quantile=entropy_pivot)


@registry.rollout(
    "hapo-temperature", title=HAPO_TITLE,
    summary="Per-token sampling temperature T (1 + tau h_hat): hotter on high-entropy tokens, cooler on low-entropy "
            "ones (tau = 0.05); h_hat normalized with statistics of a first pass; mu_logp recorded at T_t.",
    equation=r"T_t = T\,(1 + \tau\,\hat h_t),\quad \hat h_t = \mathrm{norm}\big(\log H(\pi(\cdot\mid y_{<t})/T)\big)"
             r"\in[-1, 1]",
    reads=(), provides=TURNS_PROVIDES)
def hapo_temperature(engine, task, examples, *, group_size: int, sampling, ctx=None, tau=0.05, entropy_pivot=0.8,
                     reference_bug=False):
    """The `turns` rollout sampled at T_t = T (1 + tau h_hat_t) (T = `sampling.temperature`).

    Defaults from HAPO's recipes (`actor_rollout_ref.rollout.temperature_tau=0.05`, `actor.entropy_pivot=0.8`,
    whose statistics the sampler reuses). h_hat is clipped to [-1, 1] as in HAPO's sampler
    (`compute_entropy_based_temperature`), so T_t lies in [T (1 - tau), T (1 + tau)]. reference_bug=True maps
    low-entropy tokens to h_hat >= 0 as HAPO's code does (see `objectives/hapo.py`), so the temperature never
    falls below T. HAPO's sampler measures the entropy of the raw logits (T = 1 in all its recipes) and adds
    1e-6 to the spread; here the entropy is taken at T, the one the trainer's `batch.entropy` uses. Greedy
    sampling is the plain rollout. Needs an engine that runs a temperature hook (the HF engine).
    """
    if not 0 <= tau < 1:
        raise ValueError(f"tau must be in [0, 1) so that T_t = T (1 + tau h_hat) stays positive, got {tau}")
    if not 0 <= entropy_pivot <= 1:
        raise ValueError(f"entropy_pivot must be in [0, 1], got {entropy_pivot}")
    if sampling.greedy:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    if not getattr(engine, "takes_temperature_hook", False):
        raise ValueError(f"hapo-temperature samples with a per-token temperature hook, which {type(engine).__name__} "
                         "does not run; use the HF engine (engine='hf')")
    stats = first_pass_stats(engine, task, examples, group_size=group_size, sampling=sampling,
                             entropy_pivot=entropy_pivot)
    hook = AdaptiveTemperature(stats, temperature=sampling.temperature, tau=tau, reference_bug=reference_bug)
    return turns(HookedEngine(engine, hook), task, examples, group_size=group_size, sampling=sampling)
