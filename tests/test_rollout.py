"""HF generate engine, group sampling and the SFT warm-start on the tiny model."""
import random

import pytest
import torch

from workbench.models import build_tiny
from workbench.rollout import HFEngine, policy_forward, sample_groups
from workbench.rollout.engine import encode_responses, response_mask
from workbench.tasks import get_task
from workbench.train import make_config
from workbench.train.sft import sft_loss, train_sft, warm_start


@pytest.fixture(scope="module")
def engine():
    model, tokenizer = build_tiny(seed=0)
    return HFEngine(model, tokenizer)


def test_response_mask_keeps_tokens_up_to_the_first_eos():
    eos = 2
    ids = torch.tensor([[5, 6, eos, 0, 0], [5, eos, 7, eos, 0], [5, 6, 7, 8, 9]])
    mask, truncated = response_mask(ids, eos)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert truncated.tolist() == [False, False, True]


def test_group_sampling_layout_rewards_and_behaviour_logprobs(engine):
    task = get_task("addition")
    examples = task.sample(3, random.Random(0))
    torch.manual_seed(0)
    batch = sample_groups(engine, task, examples, group_size=4, max_new_tokens=5, temperature=0.8)
    assert batch.size == 12 and batch.group.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert batch.prompts[4] == examples[1].prompt and len(batch.completions) == 12
    assert batch.rewards.tolist() == task.rewards(batch.completions, [e for e in examples for _ in range(4)])
    # pad after EOS, and truncated rows are exactly those without EOS
    eos, pad = engine.tokenizer.eos_token_id, engine.tokenizer.pad_token_id
    assert torch.all(batch.response_ids[batch.mask == 0] == pad)
    assert batch.truncated.tolist() == [bool((row != eos).all()) for row in batch.response_ids]
    # the engine's log-probs of its own samples equal the trainer's forward pass at the same temperature
    logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                batch.mask, temperature=0.8)
    assert torch.allclose(logp * batch.mask, batch.mu_logp, atol=1e-5)


def test_same_seed_same_samples_and_greedy_is_deterministic(engine):
    prompts = ["12+34=", "5+6="]
    torch.manual_seed(1)
    a = engine.generate(prompts, n=3, max_new_tokens=4)
    torch.manual_seed(1)
    b = engine.generate(prompts, n=3, max_new_tokens=4)
    assert torch.equal(a.response_ids, b.response_ids)
    g1 = engine.generate(prompts, max_new_tokens=4, greedy=True)
    g2 = engine.generate(prompts, max_new_tokens=4, greedy=True)
    assert g1.texts == g2.texts
    with pytest.raises(ValueError, match="at least one prompt"):
        engine.generate([], max_new_tokens=4)
    with pytest.raises(ValueError, match="temperature"):
        engine.generate(prompts, temperature=0.0)


def test_encode_responses_appends_eos_and_right_pads(engine):
    ids, mask = encode_responses(engine.tokenizer, ["12", "3"])
    eos = engine.tokenizer.eos_token_id
    assert ids[0, 2] == eos and ids[1, 1] == eos and mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_sft_lowers_the_loss_and_the_warm_start_is_cached(tmp_path, monkeypatch):
    model, tokenizer = build_tiny(seed=0)
    task = get_task("addition", digits=1)
    before = sft_loss(model, tokenizer, task.eval_set()).item()
    train_sft(model, tokenizer, task, steps=40, lr=3e-3, batch_size=32, seed=0, progress=False)
    assert sft_loss(model, tokenizer, task.eval_set()).item() < before - 0.5
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    config = make_config("smoke", task="addition", task_kw={"digits": 1}, sft_steps=3)
    folder = warm_start(config, task, progress=False)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert warm_start(config, task, progress=False) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not retrained
    assert warm_start(make_config("smoke", sft_steps=0), task) is None


def test_chat_template_wraps_prompts_for_instruct_models(tmp_path):
    from workbench.models import build_tiny, load_model, save_model
    from workbench.rollout.engine import encode_prompts
    from workbench.train.preference import list_logps

    model, tok = build_tiny(seed=0)
    tok.chat_template = ("{% for m in messages %}U:{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}A:{% endif %}")
    save_model(model, tok, tmp_path / "instruct")
    with pytest.raises(ValueError, match="no chat template"):
        load_model("tiny", chat_template=True)
    chat_model, chat_tok = load_model(str(tmp_path / "instruct"), chat_template=True)
    ids, mask = encode_prompts(chat_tok, ["1+2=", "12+30="])
    assert chat_tok.decode(ids[1][mask[1] > 0]) == "U:12+30=\nA:"
    plain_ids, _ = encode_prompts(tok, ["12+30="])
    assert tok.decode(plain_ids[0], skip_special_tokens=True) == "12+30="
    gen = HFEngine(chat_model, chat_tok).generate(["1+2="], n=2, max_new_tokens=4)
    assert gen.prompt_ids.shape[0] == 2 and chat_tok.decode(gen.prompt_ids[0]).endswith("U:1+2=\nA:")
    # the preference trainer scores responses after the same wrapped prompt
    wrapped, _ = list_logps(chat_model, chat_tok, ["1+2="], [["3"]])
    assert not torch.allclose(wrapped, list_logps(chat_model, tok, ["1+2="], [["3"]])[0])
