"""The engine protocol (generate, generate_ids, logprobs, load_weights) and its HF `generate` implementation."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Union

import torch
from tokenizers.decoders import DecodeStream
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList, TopPLogitsWarper

from workbench import ops
from workbench.batch import left_pad, on_device
from workbench.envs.base import Message, as_messages
from workbench.models import active_policy, policy_count


@dataclass(frozen=True)
class Sampling:
    """How a rollout samples each action turn. `max_new_tokens` is the budget of one turn (of the whole response
    for a one-turn task); `stop` strings end a turn and are kept in its text (EOS always ends one too)."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] | None = None
    greedy: bool = False

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        check_stop_strings(self.stop)
        if self.stop is not None:  # a list would make the dataclass unhashable; keep the order
            object.__setattr__(self, "stop", tuple(self.stop))


Prompt = Union[str, list]  # a user message's text, or a list of chat messages


@dataclass
class Generation:
    """Sampled responses for a list of prompts (each prompt repeated n times, rows grouped)."""

    prompt_ids: torch.Tensor    # [B, P] left-padded
    prompt_mask: torch.Tensor   # [B, P]
    response_ids: torch.Tensor  # [B, T] right-padded with pad after the end (EOS or stop string)
    mask: torch.Tensor          # [B, T] float, 1 up to and including the first EOS or stop-string token
    truncated: torch.Tensor     # [B] bool, neither EOS nor stop string within max_new_tokens
    mu_logp: torch.Tensor       # [B, T] behaviour log-probs reported by the engine (0 off the mask)
    texts: list[str]            # decoded responses without special tokens, cut right after a stop string
    topk_logp: torch.Tensor | None = None  # [B, T, k + 1] what vLLM's `logprobs=k` reports per token (`topk_logprobs`);
    #                                        None unless the sampler was asked (`topk=k`)


def topk_logprobs(scores: torch.Tensor, response_ids: torch.Tensor, k: int) -> torch.Tensor:
    """[B, T, k + 1] the log-probs vLLM's `logprobs=k` reports at each step of the sampling distribution `scores`
    [B, T, V] (logits after temperature and top-p): the k largest, then the sampled token's when it is not among them
    (-inf when it is: vLLM's dict then holds k entries). Entropy-triggered branching (ARPO) reads them."""
    logp = torch.log_softmax(scores.float(), dim=-1)
    top, ids = logp.topk(min(k, logp.shape[-1]), dim=-1)                    # [B, T, k]
    sampled = logp.gather(-1, response_ids[..., None])                       # [B, T, 1]
    inside = (ids == response_ids[..., None]).any(-1, keepdim=True)
    return torch.cat([top, sampled.masked_fill(inside, float("-inf"))], dim=-1)


def response_mask(response_ids: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask of tokens up to and including the first EOS, and which rows never emitted EOS."""
    is_eos = response_ids == eos_id
    before_eos = (is_eos.long().cumsum(-1) - is_eos.long()) == 0  # no EOS strictly before t
    return before_eos.float(), ~is_eos.any(-1)


def cap_lengths(response_ids: torch.Tensor, mask: torch.Tensor, truncated: torch.Tensor, eos_id: int,
                max_new_tokens) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut each row at its own budget (`max_new_tokens` an int or one int per row): mask [B, T] and truncated [B]
    as if the row had been generated with its own budget. Tokens past a row's budget were sampled only because
    another row had a larger one; causality makes the kept tokens independent of them."""
    if isinstance(max_new_tokens, int):
        return mask, truncated
    caps = torch.tensor(max_new_tokens, device=response_ids.device)[:, None]  # [B, 1]
    within = torch.arange(response_ids.shape[1], device=response_ids.device)[None, :] < caps  # [B, T]
    eos_within = ((response_ids == eos_id) & within).any(-1)
    return mask * within.to(mask.dtype), ~eos_within


def check_stop_strings(stop) -> None:
    """Stop strings must be a list of non-empty strings: an empty one would end every response before it begins
    (and vLLM rejects it), a bare string would be read as a list of its characters."""
    if stop is None:
        return
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
        raise ValueError(f"stop must be a list of non-empty strings, got {stop!r}")


class StopStringScanner:
    """Decodes one response token by token and says when its text first contains one of the stop strings.

    The text grows by incremental decoding (tokenizers' DecodeStream, as vLLM's detokenizer), so each token costs
    O(1) instead of re-decoding the prefix, and a character split over several tokens (byte-level BPE) appears
    only with the token that completes it. A stop string that ends inside a token's text ends at that token.
    Only the response is decoded (not the prompt): a stop string never spans the prompt/response boundary.
    """

    def __init__(self, tokenizer, stop: list[str]):
        self.tokenizer, self.stop = tokenizer, stop
        self.backend = getattr(tokenizer, "backend_tokenizer", None)  # None: a pure-Python tokenizer
        self.stream = DecodeStream(skip_special_tokens=True) if self.backend is not None else None
        self.ids: list[int] = []
        self.text = ""                 # decoded text of the tokens pushed so far
        self.end: int | None = None    # once stopped: the character offset right after the first stop string

    def push(self, token_id: int) -> bool:
        """Append the next token; True from the token that completes the first stop string on."""
        if self.end is not None:
            return True
        self.ids.append(token_id)
        if self.stream is not None:
            searched = len(self.text)  # characters already searched, unchanged by the new token
            self.text += self.stream.step(self.backend, token_id) or ""
        else:  # no incremental decoder: re-decode the prefix (exact, quadratic in the length), which may rewrite
            previous = self.text  # its end (an incomplete character decodes to U+FFFD until completed)
            self.text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
            searched = len(os.path.commonprefix([previous, self.text]))
        # a new occurrence ends in the new characters; the earliest-ending one wins (as in vLLM)
        ends = [i + len(s) for s in self.stop if (i := self.text.find(s, max(0, searched - len(s) + 1))) >= 0]
        if ends:
            self.end = min(ends)
        return self.end is not None


def first_stop(tokenizer, token_ids: list[int], stop: list[str]) -> tuple[int, str] | None:
    """(index of the token completing the first stop string, the text cut right after it), or None."""
    scanner = StopStringScanner(tokenizer, stop)
    for t, token_id in enumerate(token_ids):
        if scanner.push(token_id):
            return t, scanner.text[:scanner.end]
    return None


def apply_stop_strings(tokenizer, response_ids: torch.Tensor, mask: torch.Tensor, truncated: torch.Tensor,
                       stop: list[str] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    """End each response at the token that completes its first stop string; pad what the mask drops; decode.

    response_ids [B, T], mask [B, T] (ones then zeros: up to the first EOS / the engine's last token),
    truncated [B]. Returns new (response_ids, mask, truncated, texts): a stopped row keeps its tokens up to and
    including the stop token, so the trainer scores exactly what was kept, the rest become pad and are masked
    out; it counts as finished (truncated False); its text ends right after the stop string, which is kept
    (vLLM's include_stop_str_in_output=True), even where the stop token decodes to more characters. Every
    engine ends its `generate` here, so HF and vLLM cut responses identically. Without stop strings this only
    pads the masked-out tokens and decodes.
    """
    mask, truncated, cut_texts = mask.clone(), truncated.clone(), {}
    if stop:
        lengths = mask.sum(-1).long().tolist()
        for i, (row, length) in enumerate(zip(response_ids.tolist(), lengths)):
            found = first_stop(tokenizer, row[:length], stop)
            if found is not None:
                t, cut_texts[i] = found
                mask[i, t + 1:] = 0
                truncated[i] = False
    response_ids = torch.where(mask > 0, response_ids, torch.full_like(response_ids, tokenizer.pad_token_id))
    texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    for i, text in cut_texts.items():
        texts[i] = text
    return response_ids, mask, truncated, texts


class ResponseStopCriteria(StoppingCriteria):
    """HF `generate` stops a row once its response contains a stop string (saves the tokens after it).

    Decided by the same StopStringScanner as `apply_stop_strings`, so generation never stops a row the
    post-processing would keep going. transformers' own `stop_strings=` also matches a stop string spanning the
    prompt's end and the response's start: such a row would stop with no stop string in its response, and its
    padding would fall inside the mask.
    """

    def __init__(self, tokenizer, stop: list[str], rows: int):
        self.scanners = [StopStringScanner(tokenizer, stop) for _ in range(rows)]

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        newest = input_ids[:, -1].tolist()  # [B] the token just generated (pad once a row has ended)
        return torch.tensor([s.push(t) for s, t in zip(self.scanners, newest)], device=input_ids.device)


# Per-position statistics of the (tempered) logits a forward pass can return besides log-probs: name ->
# fn(logits [B, T, V], temperature) -> [B, T]. Components read them as batch fields (`pipeline.FORWARD_STATS`).
LOGIT_STATS = {
    "vocab_mean_logp": ops.mean_logprob_from_logits,          # mean_v log pi(v | s_t) (ROVER's uniform-policy term)
    "argmax": lambda logits, temperature: logits.argmax(-1),  # the greedy token at s_t (B-Coder's reference action)
}


def policy_forward(model, prompt_ids, prompt_mask, response_ids, mask, temperature: float = 1.0,
                   with_entropy: bool = False, with_hidden: bool = False, stats: tuple[str, ...] = ()):
    """Log-probs [B, T] of `response_ids` (and entropy [B, T], last hidden states) from one forward of the policy
    (`response_logits`: a group's shared prompt run once).

    Position ids follow the left-padded attention mask, exactly as `generate` computes them. `stats`: names of
    `LOGIT_STATS` computed from the same logits; when given, a fourth output {name: [B, T]} is returned.
    """
    unknown = sorted(set(stats) - set(LOGIT_STATS))
    if unknown:
        raise ValueError(f"unknown logit statistics {unknown}; known: {sorted(LOGIT_STATS)}")
    home = response_ids.device
    logits, hidden = on_model(model, response_logits, prompt_ids, prompt_mask, response_ids, with_hidden)
    ids = response_ids.to(logits.device)
    logp = ops.logprobs_from_logits(logits, ids, temperature).to(home)
    entropy = ops.entropy_from_logits(logits, temperature).to(home) if with_entropy else None
    hidden = hidden if hidden is None else hidden.to(home)
    if stats:
        return logp, entropy, hidden, {name: LOGIT_STATS[name](logits, temperature).to(home) for name in stats}
    return logp, entropy, hidden


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def on_model(model, fn, *tensors_then_args):
    """fn(model, *args) with the leading tensor arguments moved to the model's device: the batch lives on the CPU,
    the model wherever the config put it."""
    device = model_device(model)
    return fn(model, *(x.to(device) if isinstance(x, torch.Tensor) else x for x in tensors_then_args))


def response_logits(model, prompt_ids, prompt_mask, response_ids, with_hidden: bool = False):
    """Logits [B, T, V] of the positions that predict each response token (P-1 .. P+T-2), and the last layer's
    hidden states there [B, T, H] (None unless `with_hidden`). The LM head runs only on those positions: on a real
    vocabulary (49k for SmolLM2) the prompt's logits would be most of the pass's memory and a good part of its time.
    Rows that share their prompt (a group) share its pass (`shared_prompt_logits`)."""
    groups = prompt_groups(model, prompt_ids)
    if groups is not None and not getattr(model, "is_gradient_checkpointing", False):
        return shared_prompt_logits(model, *groups, prompt_mask, response_ids, with_hidden)
    T = response_ids.shape[1]
    attention = torch.cat([prompt_mask, torch.ones_like(response_ids)], dim=1).long()
    out = model(input_ids=torch.cat([prompt_ids, response_ids], dim=1), attention_mask=attention,
                position_ids=positions_of(attention), output_hidden_states=with_hidden, use_cache=False,
                logits_to_keep=T + 1)
    return out.logits[:, :-1], out.hidden_states[-1][:, -T - 1:-1] if with_hidden else None


# A shared prompt's pass costs one more model call (30 ms more on the tiny model's generate of 16 x 8 rows, measured):
# worth it only when it saves more compute than that (never on the tiny model, always on SmolLM2's groups).
SHARING_MIN_FLOPS = 1e9


def prompt_groups(model, prompt_ids: torch.Tensor):
    """(distinct prompts [U, P], each row's prompt [B]) when running each distinct prompt once instead of once per
    row saves more than SHARING_MIN_FLOPS (2 x parameters x prompt tokens saved), else None."""
    flops_per_token = 2 * sum(p.numel() for p in model.parameters())
    if (len(prompt_ids) - 1) * prompt_ids.shape[1] * flops_per_token < SHARING_MIN_FLOPS:
        return None  # not worth it even if every row had the same prompt (the tiny model): no search for repeats
    distinct, rows = torch.unique(prompt_ids, dim=0, return_inverse=True)
    if (len(rows) - len(distinct)) * prompt_ids.shape[1] * flops_per_token < SHARING_MIN_FLOPS:
        return None
    return distinct, rows


def first_rows(rows: torch.Tensor, n: int) -> torch.Tensor:
    """[n] a row holding each of the n distinct prompts (a prompt's padding is the same in all its rows)."""
    return torch.zeros(n, dtype=torch.long, device=rows.device).scatter_(0, rows, torch.arange(len(rows),
                                                                                               device=rows.device))


def positions_of(attention: torch.Tensor) -> torch.Tensor:
    """Position ids that follow a left-padded attention mask, exactly as `generate` computes them."""
    return (attention.cumsum(-1) - 1).clamp(min=0)


def shared_prompt_logits(model, distinct, rows, prompt_mask, response_ids, with_hidden: bool):
    """`response_logits` with each distinct prompt run once: distinct [U, P] prompts, rows [B] the prompt of each
    row. The prompts' keys and values (a KV cache, kept in the autograd graph) are gathered per row and the
    responses run on top of them; the gradient through the gather sums the rows' contributions into their prompt's
    pass, so logits and gradients are the unshared pass's (to float rounding), at a G-th of the prompt's cost for
    groups of G. The first response token is predicted by the prompt's last position, the others by the response's
    own positions (the last response token predicts nothing and is not run)."""
    out = distinct_prompt_pass(model, distinct, rows, prompt_mask, output_hidden_states=with_hidden)
    logits, hidden = out.logits[rows], out.hidden_states[-1][rows, -1:] if with_hidden else None  # [B, 1, ...]
    if response_ids.shape[1] == 1:
        return logits, hidden
    attention = torch.cat([prompt_mask, torch.ones_like(response_ids[:, :-1])], dim=1).long()
    P = prompt_mask.shape[1]
    rest = model(input_ids=response_ids[:, :-1], attention_mask=attention, position_ids=positions_of(attention)[:, P:],
                 past_key_values=out.past_key_values, output_hidden_states=with_hidden, use_cache=True)
    logits = torch.cat([logits, rest.logits], dim=1)
    if with_hidden:
        hidden = torch.cat([hidden, rest.hidden_states[-1]], dim=1)
    return logits, hidden


@torch.no_grad()
def shared_prefix(model, prompt_ids, prompt_mask):
    """The KV cache of every row's prompt but its last token, each distinct prompt run once (a group's G rows share
    one prefill), or None when sharing saves too little (`prompt_groups`). `generate` then runs only the last
    prompt token of each row before sampling: the prefill is most of a short rollout's compute on a real model,
    and rows of a group would otherwise each repeat it."""
    groups = prompt_groups(model, prompt_ids[:, :-1]) if prompt_ids.shape[1] > 1 else None
    return None if groups is None else distinct_prompt_pass(model, *groups, prompt_mask[:, :-1]).past_key_values


def distinct_prompt_pass(model, distinct, rows, prompt_mask, **kwargs):
    """The model's output on each distinct prompt [U, P] (logits of the last position only), its KV cache spread to
    the rows [B] that hold each prompt: an index, so under autograd the gradient flows back to the prompts' pass."""
    mask = prompt_mask[first_rows(rows, len(distinct))].long()  # [U, P]
    out = model(input_ids=distinct, attention_mask=mask, position_ids=positions_of(mask), use_cache=True,
                logits_to_keep=1, **kwargs)
    out.past_key_values.batch_select_indices(rows)  # [U, ...] -> [B, ...]
    return out


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


def plain_text(messages: list[Message]) -> str:
    """Messages without a chat template: their contents, concatenated (an environment writes its own separators)."""
    return "".join(m["content"] for m in messages)


def encode_prompts(tokenizer, prompts: list[Prompt], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and mask [B, P]. A prompt is a user message's text or a list of chat messages.
    A tokenizer loaded with `chat_template=True` renders the messages with its chat template and the assistant's
    generation prompt (instruct models); otherwise a prompt is its messages' contents concatenated, so a string
    prompt is tokenized as it is."""
    chat = getattr(tokenizer, "use_chat_template", False)
    enc = tokenizer(prompt_texts(tokenizer, prompts), return_tensors="pt", padding=True, add_special_tokens=not chat)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def prompt_texts(tokenizer, prompts: list[Prompt]) -> list[str]:
    """What the tokenizer is given for each prompt (see `encode_prompts`)."""
    if getattr(tokenizer, "use_chat_template", False):
        return [tokenizer.apply_chat_template(as_messages(p), tokenize=False, add_generation_prompt=True)
                for p in prompts]
    return [p if isinstance(p, str) else plain_text(p) for p in prompts]


def check_prompt_lengths(tokenizer, prompts: list[Prompt], context: int | None, max_new_tokens: int,
                         source: str) -> None:
    """The rule for inputs longer than the model takes: a prompt whose tokens + max_new_tokens exceed the model's
    context (its position table) is refused, naming the first such prompt; none is truncated, since a cut prompt
    is another question. Run on a task's known prompts before anything is trained."""
    if context is None or not prompts:
        return
    chat = getattr(tokenizer, "use_chat_template", False)
    room = context - max_new_tokens
    for start in range(0, len(prompts), 256):
        texts = prompt_texts(tokenizer, prompts[start:start + 256])
        lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=not chat)["input_ids"]]  # no padding
        over = [(i, n) for i, n in enumerate(lengths) if n > room]
        if over:
            i, n = over[0]
            raise ValueError(
                f"{source}: prompt {start + i} ({texts[i][:40]!r}...) is {n} tokens; with max_new_tokens="
                f"{max_new_tokens} it needs {n + max_new_tokens} positions, and the model takes {context}. Shorten or "
                f"drop such prompts (or lower max_new_tokens); prompts are never truncated")


def check_sampling_args(prompts: list, temperature: float, greedy: bool, stop: list[str] | None = None,
                        max_new_tokens=1) -> None:
    """The arguments every engine's `generate` / `generate_ids` rejects, with the same messages."""
    if not prompts:
        raise ValueError("generate needs at least one prompt")
    budgets = [max_new_tokens] if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(budgets) not in (1, len(prompts)) or min(budgets) < 1:
        raise ValueError(f"max_new_tokens must be >= 1 (one int, or one per prompt), got {max_new_tokens}")
    if temperature <= 0 and not greedy:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature} (use greedy=True)")
    check_stop_strings(stop)


class HFEngine:
    """Generation with transformers' `generate` on the training model itself (weights always in sync), or on a
    separate replica (`separate=True`, e.g. beside an FSDP-sharded policy) that `load_weights` updates."""

    def __init__(self, model, tokenizer, separate: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.needs_weights = separate  # does the trainer have to push its weights after each step?
        self._last_encoded = None  # (key, (ids, mask)) of the last `encode`

    @property
    def device(self):
        return model_device(self.model)

    @property
    def policies(self) -> int:
        """How many separate policies (LoRA adapters) the model holds: 1 when one policy plays every agent."""
        return policy_count(self.model)

    def policy(self, index: int):
        """A context in which generation uses policy `index`'s adapter (nothing to switch with one policy)."""
        return active_policy(self.model, index) if self.policies > 1 else contextlib.nullcontext()

    def encode(self, prompts: list[Prompt], n: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt ids and mask [B·n, P], each prompt tokenized once and repeated n times (rows grouped). The last
        call's tokens are kept: a rollout encodes its first turn's prompts to bound the budget, then `generate`
        encodes the same prompts (tokenizing twice cost ~6 ms a step on the tiny model's bench)."""
        key = (repr(prompts), getattr(self.tokenizer, "use_chat_template", False))
        if self._last_encoded is None or self._last_encoded[0] != key:
            self._last_encoded = key, encode_prompts(self.tokenizer, prompts)
        ids, mask = self._last_encoded[1]
        return ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)  # new tensors, never the kept ones

    @property
    def max_length(self) -> int | None:
        """Longest prompt + response the model takes (its position table), or None when it does not say."""
        return getattr(getattr(self.model, "config", None), "max_position_embeddings", None)

    @property
    def takes_temperature_hook(self) -> bool:
        """Does `generate` accept a per-token `temperature_hook`? Only transformers' sampler (this class's
        `sample`) runs one; an engine that samples elsewhere (vLLM) refuses it."""
        return type(self).sample is HFEngine.sample

    @property
    def reports_topk(self) -> bool:
        """Does `generate` fill `Generation.topk_logp` when given `topk=k`? Only this class's `sample` does."""
        return type(self).sample is HFEngine.sample

    @torch.no_grad()
    def generate(self, prompts: list[Prompt], *, n: int = 1, max_new_tokens: int = 16, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, stop: list[str] | None = None,
                 temperature_hook=None, topk: int = 0) -> Generation:
        """n samples per prompt (rows grouped). A response ends at EOS or at the token completing one of the
        `stop` strings; the stop string is kept in its text (vLLM's include_stop_str_in_output=True), see
        `apply_stop_strings`. `temperature_hook`, `topk`: see `sample`."""
        check_sampling_args(prompts, temperature, greedy, stop, max_new_tokens)
        prompt_ids, prompt_mask = self.encode(prompts, n)  # [B, P], B = len(prompts) · n
        return self.sample(prompt_ids, prompt_mask, max_new_tokens=max_new_tokens, temperature=temperature,
                           top_p=top_p, greedy=greedy, stop=stop, **self._hook(temperature_hook), **self._topk(topk))

    @torch.no_grad()
    def generate_ids(self, prompts: list[list[int]], *, max_new_tokens: int | list[int] = 16,
                     temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                     stop: list[str] | None = None, temperature_hook=None, topk: int = 0) -> Generation:
        """One sample per token-id prompt (a multi-turn history: never re-tokenized), each with its own budget
        when `max_new_tokens` is a list. Same fields and ending rules as `generate`."""
        check_sampling_args(prompts, temperature, greedy, stop, max_new_tokens)
        prompt_ids, prompt_mask = left_pad(prompts, self.tokenizer.pad_token_id)
        return self.sample(prompt_ids, prompt_mask, max_new_tokens=max_new_tokens, temperature=temperature,
                           top_p=top_p, greedy=greedy, stop=stop, **self._hook(temperature_hook), **self._topk(topk))

    def _topk(self, topk: int) -> dict:
        """`sample`'s keyword for top-k log-probs (none when not asked, so an engine overriding `sample` keeps
        working)."""
        if not topk:
            return {}
        if not self.reports_topk:
            raise ValueError(f"{type(self).__name__} does not report top-k log-probs (topk={topk}); use the HF engine "
                             "(engine='hf')")
        return {"topk": topk}

    def _hook(self, temperature_hook) -> dict:
        """`sample`'s keyword for a hook (none without one, so an engine overriding `sample` keeps working)."""
        if temperature_hook is None:
            return {}
        if not self.takes_temperature_hook:
            raise ValueError(f"{type(self).__name__} does not sample with transformers and takes no per-token "
                             "temperature_hook; use the HF engine (engine='hf')")
        return {"temperature_hook": temperature_hook}

    def sample(self, prompt_ids, prompt_mask, *, max_new_tokens, temperature, top_p, greedy, stop,
               temperature_hook=None, topk: int = 0) -> Generation:
        """transformers' `generate` on left-padded prompts [B, P]; `max_new_tokens` an int or one per row.

        `temperature_hook` (a transformers LogitsProcessor) replaces the constant `temperature`: it is given each
        step's raw logits [B, V] and returns them divided by its own per-row temperature; top_p applies after it,
        as after a constant temperature. `mu_logp` are then the log-probs at the hook's temperatures. Greedy
        decoding ignores it (a positive temperature does not move the argmax). `topk` > 0 also fills
        `topk_logp` [B, T, k + 1] from the same scores (`topk_logprobs`)."""
        rows, home = prompt_ids.shape[0], prompt_ids.device
        prompt_ids, prompt_mask = prompt_ids.to(self.device), prompt_mask.to(self.device)
        budget = max_new_tokens if isinstance(max_new_tokens, int) else max(max_new_tokens)
        was_training = self.model.training
        self.model.eval()
        sample_kw = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": 0}
        if temperature_hook is not None and not greedy:  # generate's own temperature and top-p would run first
            warpers = [temperature_hook] + ([TopPLogitsWarper(top_p)] if top_p < 1.0 else [])
            sample_kw = {"temperature": 1.0, "top_p": 1.0, "top_k": 0,
                         "logits_processor": LogitsProcessorList(warpers)}
        if stop:  # stop generating once every row has ended; the cut itself is apply_stop_strings'
            criteria = ResponseStopCriteria(self.tokenizer, stop, rows)
            sample_kw["stopping_criteria"] = StoppingCriteriaList([criteria])
        out = self.model.generate(
            input_ids=prompt_ids, attention_mask=prompt_mask, do_sample=not greedy,
            max_new_tokens=budget, pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.tokenizer.eos_token_id, output_scores=True, return_dict_in_generate=True,
            past_key_values=shared_prefix(self.model, prompt_ids, prompt_mask), **sample_kw)
        self.model.train(was_training)
        response_ids = out.sequences[:, prompt_ids.shape[1]:]
        mask, truncated = response_mask(response_ids, self.tokenizer.eos_token_id)
        mask, truncated = cap_lengths(response_ids, mask, truncated, self.tokenizer.eos_token_id, max_new_tokens)
        response_ids, mask, truncated, texts = apply_stop_strings(self.tokenizer, response_ids, mask, truncated, stop)
        scores = torch.stack(out.scores, dim=1)  # [B, T, V], already divided by the (hook's) temperature
        mu_logp = ops.logprobs_from_logits(scores, response_ids) * mask
        topk_logp = topk_logprobs(scores, response_ids, topk) if topk else None
        return on_device(Generation(prompt_ids, prompt_mask, response_ids, mask, truncated, mu_logp, texts, topk_logp),
                         home)

    @torch.no_grad()
    def logprobs(self, gen: Generation, temperature: float = 1.0) -> torch.Tensor:
        logp, _, _ = policy_forward(self.model, gen.prompt_ids, gen.prompt_mask, gen.response_ids, gen.mask,
                                    temperature)
        return logp * gen.mask

    def load_weights(self, state_dict) -> None:
        """Copy the trainer's full weights into a separate replica; on the training model itself a no-op."""
        if self.needs_weights:
            self.model.load_state_dict(state_dict)


ENGINE_OFFERS = {"hf": {"topk_logprobs"}, "vllm": set()}  # registry.ENGINE_NEEDS each engine meets (`reports_topk`)


def make_engine(config, model, tokenizer, replica=None):
    """The rollout engine `config.engine` names: "hf" (generate on the training model, or on `replica` when the
    training model cannot generate by itself, e.g. FSDP-sharded) or "vllm" (started from `replica or model`)."""
    if config.engine == "hf":
        return HFEngine(replica, tokenizer, separate=True) if replica is not None else HFEngine(model, tokenizer)
    if config.engine == "vllm":
        from workbench.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(model if replica is None else replica, tokenizer, kv_cache_mb=config.vllm_kv_cache_mb,
                          max_model_len=config.vllm_max_model_len, seed=config.seed)
    raise ValueError(f"unknown engine {config.engine!r}; choose 'hf' or 'vllm'")
