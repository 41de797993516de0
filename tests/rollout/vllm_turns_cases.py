"""The multi-turn rollout on the vLLM engine (token-id prompts), in its own pytest process.

Not collected directly (the name does not start with test_): tests/rollout/test_turns_vllm.py runs it in a
subprocess, because an in-process vLLM engine seeds torch's global RNG and disables torch.set_num_threads.
"""
from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.rollout.test_turns import CountTask, ManyStopsEnv  # noqa: E402
from workbench.models import build_tiny  # noqa: E402
from workbench.rollout import Sampling, policy_forward, turns  # noqa: E402
from workbench.tasks import Example, get_task  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm not installed")
LOGP_TOL = 1e-5  # float32 vLLM kernels vs the trainer's forward pass on the same tokens


@pytest.fixture(scope="module")
def engine():
    from workbench.rollout import VLLMEngine

    model, tokenizer = build_tiny(seed=0)
    return VLLMEngine(model.eval(), tokenizer, kv_cache_mb=64, max_model_len=128)


def test_multi_turn_episodes_from_token_ids_score_as_one_forward_pass(engine):
    task = CountTask()
    task.make_env = ManyStopsEnv
    torch.manual_seed(0)
    batch = turns(engine, task, [Example("12+34=", "", ""), Example("7*8=", "", "")], group_size=4,
                  sampling=Sampling(6, temperature=0.9))
    assert int(batch.turn.max()) >= 2
    logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask,
                                temperature=0.9)
    torch.testing.assert_close(logp * batch.mask, batch.mu_logp, rtol=0, atol=LOGP_TOL)
    assert torch.all(batch.mu_logp[batch.mask == 0] == 0)


def test_generate_ids_gives_each_row_its_own_budget(engine):
    torch.manual_seed(1)
    gen = engine.generate_ids([[1, 20, 21], [1, 22], [1, 23, 24, 25]], max_new_tokens=[2, 7, 4])
    lengths = gen.mask.sum(-1).long().tolist()
    assert lengths == [2, 7, 4] and gen.truncated.tolist() == [True] * 3  # the random model never says EOS here
    assert gen.prompt_mask.sum(-1).tolist() == [3, 2, 4]
    with pytest.raises(ValueError, match="max_model_len"):
        engine.generate_ids([[1] * 100], max_new_tokens=40)


def test_the_total_budget_defaults_to_max_model_len(engine):
    task = get_task("gridworld")
    torch.manual_seed(2)
    batch = turns(engine, task, task.eval_set(3), group_size=2, sampling=Sampling(60, stop=("!",)))
    total = batch.prompt_mask.sum(-1) + (batch.turn >= 0).sum(-1)  # prompt + response tokens per row
    L = engine.max_model_len
    # rows cut by the budget ran up to it (within one observation + action); none went past it
    assert batch.truncated.any() and int(total.max()) <= L and int(total[batch.truncated].min()) > L - 10


def test_one_turn_task_is_the_engines_generate(engine):
    task = get_task("addition")
    examples = task.eval_set(3)
    torch.manual_seed(3)
    gen = engine.generate([e.prompt for e in examples], n=2, max_new_tokens=6)
    torch.manual_seed(3)
    batch = turns(engine, task, examples, group_size=2, sampling=Sampling(6))
    assert torch.equal(batch.response_ids, gen.response_ids) and torch.equal(batch.mu_logp, gen.mu_logp)
    assert batch.completions == gen.texts
