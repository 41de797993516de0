"""Model and tokenizer loading: a tiny character-level Llama built in code, or any local/hub model.

The tiny model is a real `LlamaForCausalLM` with a real `PreTrainedTokenizerFast`, so it goes through
the same `save_pretrained` / `from_pretrained` path as a hub model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

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


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_model(name_or_path: str, *, dtype: str = "float32", device: str = "cpu", seed: int = 0):
    """(model, tokenizer) from "tiny" (built in code) or a local folder / hub id via from_pretrained."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if name_or_path == "tiny":
        model, tokenizer = build_tiny(seed=seed)
    else:
        if Path(name_or_path).exists():
            if not (Path(name_or_path) / "config.json").exists():
                raise FileNotFoundError(f"{name_or_path} has no config.json: not a save_pretrained folder")
            quiet_local_io()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=DTYPES[dtype])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model.to(device=device, dtype=DTYPES[dtype]), tokenizer


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
    return get_peft_model(model, config)
