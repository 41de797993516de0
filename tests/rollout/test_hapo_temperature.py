"""HAPO's adaptive temperature: the per-token temperature, the engine's hook, and the rollout's samples and mu."""
import math
import random

import pytest
import torch

from tests.helpers import step_context
from workbench import ops, registry
from workbench.objectives.hapo import EntropyStats, entropy_stats, normalized_entropy
from workbench.rollout import HFEngine, Sampling, VLLMEngine, turns
from workbench.rollout.engine import policy_forward
from workbench.rollout.hapo_temperature import (
    AdaptiveTemperature,
    hapo_temperature,
    observe_entropy,
)
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("hapo-temperature")

STATS = EntropyStats(pivot=math.log(2.0), std=0.8, pos_max=1.5, neg_min=-2.5)


@pytest.fixture(scope="module")
def task():
    return get_task("addition")


def examples(task, n=3, seed=0):
    return task.sample(n, random.Random(seed))


def spread_logits(seed, rows=200, vocab=64):
    """Rows from near-uniform to near-one-hot, so that entropies fall on both sides of the pivot."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=g) * torch.linspace(0.0, 6.0, rows)[:, None]


def test_registered_as_a_rollout_with_hapos_defaults():
    entry = registry.get("rollout", "hapo-temperature")
    assert entry.defaults == {"tau": 0.05, "entropy_pivot": 0.8, "reference_bug": False}
    assert entry.kind == "rollout" and entry.confidence == "exact" and "mu_logp" in entry.provides


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_temperature_rises_exactly_where_h_hat_is_positive(temperature):
    """Catalog test (2): T_t > T iff h_hat > 0, T_t < T iff h_hat < 0, within [T (1 - tau), T (1 + tau)]."""
    logits = spread_logits(0)
    hook = AdaptiveTemperature(STATS, temperature=temperature, tau=0.05)
    T_t = hook.temperatures(logits)
    h_hat = normalized_entropy(ops.entropy_from_logits(logits, temperature), STATS)
    assert (h_hat > 0).any() and (h_hat < 0).any()
    assert torch.equal(T_t > temperature, h_hat > 0) and torch.equal(T_t < temperature, h_hat < 0)
    assert torch.allclose(T_t, temperature * (1 + 0.05 * h_hat))
    assert T_t.min() >= temperature * 0.95 - 1e-6 and T_t.max() <= temperature * 1.05 + 1e-6
    # the code's mapping never cools a token
    buggy = AdaptiveTemperature(STATS, temperature=temperature, tau=0.05, reference_bug=True).temperatures(logits)
    assert (buggy >= temperature).all() and (buggy > temperature).any()
    # the hook divides each row by its own T_t
    scores = hook(torch.zeros(logits.shape[0], 1, dtype=torch.long), logits)
    assert torch.allclose(scores, logits / T_t[:, None])


def test_tau_zero_is_the_constant_temperature():
    logits = spread_logits(1)
    assert torch.equal(AdaptiveTemperature(STATS, temperature=0.7, tau=0.0).temperatures(logits),
                       torch.full((logits.shape[0],), 0.7))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_a_constant_hook_samples_what_generate_samples_at_that_temperature(engine, temperature):
    """The engine's hook path (generate at temperature 1 + the hook) is the plain path when the hook is constant."""
    hook = AdaptiveTemperature(STATS, temperature=temperature, tau=0.0)
    torch.manual_seed(3)
    plain = engine.generate(["12+34=", "5+6="], n=3, max_new_tokens=5, temperature=temperature, top_p=0.9)
    torch.manual_seed(3)
    hooked = engine.generate(["12+34=", "5+6="], n=3, max_new_tokens=5, temperature=temperature, top_p=0.9,
                             temperature_hook=hook)
    assert torch.equal(plain.response_ids, hooked.response_ids) and torch.equal(plain.mu_logp, hooked.mu_logp)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tau_zero_gives_the_samples_of_the_plain_rollout(engine, task, temperature):
    """Catalog test (1): tau = 0 samples at T, whatever the statistics."""
    sampling = Sampling(6, temperature=temperature)
    torch.manual_seed(11)
    plain = turns(engine, task, examples(task), group_size=4, sampling=sampling)
    torch.manual_seed(11)
    adaptive = hapo_temperature(engine, task, examples(task), group_size=4, sampling=sampling, tau=0.0,
                                ctx=step_context(state={"stats": STATS}))
    for name in ("response_ids", "mask", "mu_logp", "rewards", "prompt_ids"):
        assert torch.equal(getattr(plain, name), getattr(adaptive, name)), name
    assert plain.completions == adaptive.completions


def test_recorded_mu_is_the_log_prob_at_the_token_temperature(engine, task):
    """Catalog test (3): mu_logp = log softmax(logits / T_t)[y_t], T_t from the same statistics."""
    sampling, exs = Sampling(6, temperature=1.0), examples(task, 4, seed=1)
    torch.manual_seed(5)
    previous = turns(engine, task, exs, group_size=4, sampling=sampling)    # the last step's batch
    previous.entropy = entropy_at(engine, previous, 1.0)
    stats = observe_entropy({"stats": None}, previous, step_context(), entropy_pivot=0.8)["stats"]
    batch = hapo_temperature(engine, task, exs, group_size=4, sampling=sampling, tau=0.5,
                             ctx=step_context(state={"stats": stats}))
    ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
    attention = torch.cat([batch.prompt_mask, torch.ones_like(batch.mask)], dim=1).long()
    with torch.no_grad():
        logits = engine.model(input_ids=ids, attention_mask=attention,
                              position_ids=(attention.cumsum(-1) - 1).clamp(min=0)).logits
    logits = logits[:, batch.prompt_ids.shape[1] - 1:-1]                         # [B, T, V]
    B, T, V = logits.shape
    T_t = AdaptiveTemperature(stats, temperature=1.0, tau=0.5).temperatures(logits.reshape(-1, V)).reshape(B, T)
    recomputed = ops.logprobs_from_logits(logits / T_t[..., None], batch.response_ids) * batch.mask
    torch.testing.assert_close(batch.mu_logp, recomputed, rtol=1e-5, atol=1e-5)  # KV cache vs one pass, fp32
    at_T = ops.logprobs_from_logits(logits, batch.response_ids) * batch.mask
    assert (batch.mu_logp - at_T).abs().max() > 1e-2  # T_t really differs from T on some tokens
    assert ((T_t > 1.0) & (batch.mask > 0)).any() and ((T_t < 1.0) & (batch.mask > 0)).any()


def entropy_at(engine, batch, temperature):
    """The policy's entropy [B, T] on the batch's responses at `temperature`, 0 off the mask (the trainer's)."""
    with torch.no_grad():
        _, entropy, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                       batch.mask, temperature, with_entropy=True)
    return entropy * batch.mask


def test_the_statistics_are_the_last_batchs_over_its_valid_tokens(engine, task):
    """observe: HAPO's compute_entropy_h over the previous batch's valid tokens (padding ignored); under data
    parallelism the tokens of every rank (gathered in rank order)."""
    torch.manual_seed(2)
    batch = turns(engine, task, examples(task), group_size=4, sampling=Sampling(6))
    batch.mask[::2, 3:] = 0                       # rows that ended early: what lies past the end must not count
    batch.entropy = torch.where(batch.mask > 0, entropy_at(engine, batch, 1.0), torch.full_like(batch.mask, 50.0))
    state = observe_entropy({"stats": None}, batch, step_context(), entropy_pivot=0.6)
    assert state["stats"] == entropy_stats(batch.entropy, batch.mask, pivot_quantile=0.6)
    assert state["stats"] != entropy_stats(batch.entropy, torch.ones_like(batch.mask), pivot_quantile=0.6)
    # two ranks holding halves of the batch see the statistics of the whole
    halves = [batch.select(torch.arange(0, 6)), batch.select(torch.arange(6, 12))]
    joined = [t for h in halves for t in h.entropy[h.mask > 0].tolist()]
    ranked = step_context(gather_objects=lambda _: joined)
    assert observe_entropy({"stats": None}, halves[0], ranked, entropy_pivot=0.6) == state


def test_the_first_step_and_greedy_sampling_are_the_plain_rollout_and_bad_input_is_refused(engine, task):
    torch.manual_seed(4)
    plain = turns(engine, task, examples(task), group_size=2, sampling=Sampling(6))
    torch.manual_seed(4)
    first = hapo_temperature(engine, task, examples(task), group_size=2, sampling=Sampling(6), tau=0.5,
                             ctx=step_context(state={"stats": None}))
    assert torch.equal(plain.response_ids, first.response_ids) and torch.equal(plain.mu_logp, first.mu_logp)
    greedy = Sampling(6, greedy=True)
    a = hapo_temperature(engine, task, examples(task), group_size=1, sampling=greedy,
                         ctx=step_context(state={"stats": STATS}))
    b = turns(engine, task, examples(task), group_size=1, sampling=greedy)
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.mu_logp, b.mu_logp)
    with pytest.raises(ValueError, match=r"tau must be in \[0, 1\)"):
        hapo_temperature(engine, task, examples(task), group_size=2, sampling=Sampling(6), tau=1.0)
    with pytest.raises(ValueError, match=r"entropy_pivot must be in \[0, 1\]"):
        hapo_temperature(engine, task, examples(task), group_size=2, sampling=Sampling(6), entropy_pivot=-0.1)


class OwnSampler(HFEngine):
    """An engine that samples outside transformers (as vLLM does): it cannot run the hook."""

    def sample(self, prompt_ids, prompt_mask, **kw):
        return super().sample(prompt_ids, prompt_mask, **kw)


def test_an_engine_that_samples_elsewhere_refuses_the_hook(engine, task):
    other = OwnSampler(engine.model, engine.tokenizer)
    assert engine.takes_temperature_hook and not other.takes_temperature_hook
    hook = AdaptiveTemperature(STATS, temperature=1.0, tau=0.05)
    with pytest.raises(ValueError, match="takes no per-token temperature_hook; use the HF engine"):
        other.generate(["1+2="], max_new_tokens=3, temperature_hook=hook)
    with pytest.raises(ValueError, match="hapo-temperature samples with a per-token temperature hook"):
        hapo_temperature(other, task, examples(task), group_size=2, sampling=Sampling(6),
                         ctx=step_context(state={"stats": STATS}))
    assert other.generate(["1+2="], max_new_tokens=3).response_ids.shape[0] == 1  # without a hook it still works
    assert not VLLMEngine.__new__(VLLMEngine).takes_temperature_hook  # vLLM samples in its own sampler: refused
