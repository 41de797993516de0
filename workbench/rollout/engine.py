"""The engine protocol (generate, logprobs, load_weights) and its HF `generate` implementation."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import ops


@dataclass
class Generation:
    """Sampled responses for a list of prompts (each prompt repeated n times, rows grouped)."""

    prompt_ids: torch.Tensor    # [B, P] left-padded
    prompt_mask: torch.Tensor   # [B, P]
    response_ids: torch.Tensor  # [B, T] right-padded with pad after EOS
    mask: torch.Tensor          # [B, T] float, 1 up to and including the first EOS
    truncated: torch.Tensor     # [B] bool, no EOS within max_new_tokens
    mu_logp: torch.Tensor       # [B, T] behaviour log-probs reported by the engine
    texts: list[str]            # decoded responses without special tokens


def response_mask(response_ids: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask of tokens up to and including the first EOS, and which rows never emitted EOS."""
    is_eos = response_ids == eos_id
    before_eos = (is_eos.long().cumsum(-1) - is_eos.long()) == 0  # no EOS strictly before t
    return before_eos.float(), ~is_eos.any(-1)


def policy_forward(model, prompt_ids, prompt_mask, response_ids, mask, temperature: float = 1.0,
                   with_entropy: bool = False, with_hidden: bool = False):
    """Log-probs [B, T] of `response_ids` (and entropy [B, T], last hidden states) in one forward pass.

    Position ids follow the left-padded attention mask, exactly as `generate` computes them.
    """
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)
    attention = torch.cat([prompt_mask, torch.ones_like(mask)], dim=1).long()
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                output_hidden_states=with_hidden, use_cache=False)
    P = prompt_ids.shape[1]
    logits = out.logits[:, P - 1:-1]
    logp = ops.logprobs_from_logits(logits, response_ids, temperature)
    entropy = ops.entropy_from_logits(logits, temperature) if with_entropy else None
    hidden = out.hidden_states[-1][:, P - 1:-1] if with_hidden else None
    return logp, entropy, hidden


def encode_responses(tokenizer, texts: list[str], device=None, eos: list[bool] | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded token ids of `texts`, each followed by EOS (unless `eos[i]` is False: a partial response,
    e.g. one reasoning step), and their mask: [B, T] each (teacher forcing)."""
    eos = [True] * len(texts) if eos is None else eos
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] * bool(end)
           for t, end in zip(texts, eos, strict=True)]
    if not all(ids):
        raise ValueError("an empty partial response (eos=False, no text) has no token to score")
    width = max(len(row) for row in ids)
    out = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(ids), width)
    for i, row in enumerate(ids):
        out[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1.0
    return out.to(device), mask.to(device)


def encode_prompts(tokenizer, prompts: list[str], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and mask [B, P]. A tokenizer loaded with `chat_template=True` wraps each prompt
    as one user turn of its chat template, with the assistant's generation prompt (instruct models)."""
    chat = getattr(tokenizer, "use_chat_template", False)
    if chat:
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                 add_generation_prompt=True) for p in prompts]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=not chat)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def check_sampling_args(prompts: list[str], temperature: float, greedy: bool) -> None:
    """The arguments every engine's `generate` rejects, with the same messages."""
    if not prompts:
        raise ValueError("generate needs at least one prompt")
    if temperature <= 0 and not greedy:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature} (use greedy=True)")


class HFEngine:
    """Generation with transformers' `generate` on the training model itself (weights always in sync)."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    @property
    def device(self):
        return next(self.model.parameters()).device

    def encode(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        return encode_prompts(self.tokenizer, prompts, self.device)

    @torch.no_grad()
    def generate(self, prompts: list[str], *, n: int = 1, max_new_tokens: int = 16, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False) -> Generation:
        check_sampling_args(prompts, temperature, greedy)
        rows = [p for p in prompts for _ in range(n)]
        prompt_ids, prompt_mask = self.encode(rows)
        was_training = self.model.training
        self.model.eval()
        sample_kw = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": 0}
        out = self.model.generate(
            input_ids=prompt_ids, attention_mask=prompt_mask, do_sample=not greedy,
            max_new_tokens=max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.tokenizer.eos_token_id, output_scores=True, return_dict_in_generate=True,
            **sample_kw)
        self.model.train(was_training)
        response_ids = out.sequences[:, prompt_ids.shape[1]:]
        mask, truncated = response_mask(response_ids, self.tokenizer.eos_token_id)
        response_ids = torch.where(mask > 0, response_ids, torch.full_like(response_ids, self.tokenizer.pad_token_id))
        scores = torch.stack(out.scores, dim=1)  # [B, T, V], already divided by the temperature
        mu_logp = ops.logprobs_from_logits(scores, response_ids) * mask
        texts = self.tokenizer.batch_decode(response_ids, skip_special_tokens=True)
        return Generation(prompt_ids, prompt_mask, response_ids, mask.to(prompt_ids.device), truncated, mu_logp, texts)

    @torch.no_grad()
    def logprobs(self, gen: Generation, temperature: float = 1.0) -> torch.Tensor:
        logp, _, _ = policy_forward(self.model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask,
                                    temperature)
        return logp * gen.mask

    def load_weights(self, state_dict) -> None:
        """HF generate runs on the training model itself, so there is nothing to push."""


def make_engine(config, model, tokenizer):
    """The rollout engine `config.engine` names: "hf" (generate on the training model) or "vllm"."""
    if config.engine == "hf":
        return HFEngine(model, tokenizer)
    if config.engine == "vllm":
        from workbench.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(model, tokenizer, kv_cache_mb=config.vllm_kv_cache_mb,
                          max_model_len=config.vllm_max_model_len, seed=config.seed)
    raise ValueError(f"unknown engine {config.engine!r}; choose 'hf' or 'vllm'")
