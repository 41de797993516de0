"""Model loading: a QLoRA model's 4-bit base keeps passing gradients to its adapters after it has generated."""
import pytest
import torch

from workbench.models import add_lora, load_model


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
