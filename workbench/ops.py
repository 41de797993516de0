"""Masked reductions, the four loss-aggregation modes, and log-prob / entropy from logits.

Shapes: per-token tensors are [B, T] over response tokens; `mask` is 1 where the policy produced the
token. Everything here is pure tensor math (no model, no I/O).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from workbench import registry


def check_mask(x: torch.Tensor, mask: torch.Tensor, what: str = "tensor") -> None:
    if x.shape != mask.shape:
        raise ValueError(f"{what} has shape {tuple(x.shape)} but mask has shape {tuple(mask.shape)}")
    if mask.numel() == 0 or not bool(mask.any()):
        raise ValueError(f"mask is all zero: no response token to average {what} over")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """Mean of x over mask == 1. With dim=None an all-zero mask is an error; along a dim, empty rows give 0."""
    if dim is None:
        check_mask(x, mask)
        return masked_sum(x, mask) / mask.sum()
    return masked_sum(x, mask, dim) / mask.sum(dim).clamp(min=1)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    mean = masked_mean(x, mask)
    n = mask.sum()
    var = masked_sum((x - mean) ** 2, mask) / n
    if unbiased:
        if n < 2:
            raise ValueError("unbiased (Bessel) variance needs at least 2 masked tokens")
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True, eps: float = 1e-8,
                  shift_mean: bool = True) -> torch.Tensor:
    """(x - mean) * rsqrt(var + eps) over masked entries (verl/TRL `masked_whiten`); masked-out entries -> 0."""
    mean, var = masked_mean(x, mask), masked_var(x, mask, unbiased)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask


# ----------------------------------------------------------------------------------------------------
# Loss aggregation


@dataclass(frozen=True)
class Denominators:
    """How one optimizer step's per-token losses are summed: global counts, so that micro-batching does not change
    the loss, and optional per-token weights on the loss.

    When a step's batch is split into micro-batches (gradient accumulation, or data-parallel ranks),
    each micro-batch divides by these global counts instead of its own, and the summed micro-batch
    losses equal the full-batch loss exactly. `weights` (the minibatch's [B, T], see `weighted`) multiply the
    per-token loss and leave the counts alone.
    """

    num_tokens: float | None = None     # valid tokens in the optimizer step (token-mean)
    num_seqs: float | None = None       # sequences with >= 1 valid token in the step (seq-mean-*)
    norm_constant: float | None = None  # the constant C of seq-mean-token-sum-norm (e.g. B_global * L_max)
    weights: torch.Tensor | None = None  # [B, T] detached per-token weights on the loss, counts unchanged
                                        # (rollout importance correction: verl's `pg_losses * rollout_is_weights`)
    reduce: Callable | None = None      # sums a tensor over the data-parallel ranks (None: one process), for a
                                        # loss that searches on statistics of the whole step (BAPO's pos / neg)

    def total(self, x: torch.Tensor) -> torch.Tensor:
        """`x` summed over the ranks of the optimizer step (itself in one process)."""
        return x if self.reduce is None else self.reduce(x)

    @staticmethod
    def of(mask: torch.Tensor, norm_constant: float | None = None) -> "Denominators":
        return Denominators(float(mask.sum()), float((mask.sum(-1) > 0).sum()), norm_constant)


AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _seq_count(mask: torch.Tensor, denom: Denominators | None) -> torch.Tensor | float:
    if denom is not None and denom.num_seqs is not None:
        return denom.num_seqs
    return (mask.sum(-1) > 0).sum().clamp(min=1)


@registry.aggregation(
    "token-mean", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Every valid token in the batch weighs the same.",
    equation=r"L = \frac{\sum_{i,t} m_{i,t}\,\ell_{i,t}}{\sum_{i,t} m_{i,t}}")
def token_mean(per_token, mask, denom: Denominators | None = None):
    n = denom.num_tokens if denom is not None and denom.num_tokens is not None else mask.sum().clamp(min=1)
    return masked_sum(per_token, mask) / n


@registry.aggregation(
    "seq-mean-token-mean",
    title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="Average tokens within a sequence, then sequences: short answers weigh more per token.",
    equation=r"L = \frac{1}{B}\sum_i \frac{\sum_t m_{i,t}\ell_{i,t}}{\max(\sum_t m_{i,t},1)}")
def seq_mean_token_mean(per_token, mask, denom: Denominators | None = None):
    per_seq = masked_sum(per_token, mask, -1) / mask.sum(-1).clamp(min=1)
    return per_seq.sum() / _seq_count(mask, denom)


@registry.aggregation(
    "seq-mean-token-sum",
    title="Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement Learning",
    summary="Sum tokens within a sequence, average sequences: long answers carry more gradient.",
    equation=r"L = \frac{1}{B}\sum_i \sum_t m_{i,t}\ell_{i,t}")
def seq_mean_token_sum(per_token, mask, denom: Denominators | None = None):
    return masked_sum(per_token, mask) / _seq_count(mask, denom)


@registry.aggregation(
    "seq-mean-token-sum-norm", title="Understanding R1-Zero-Like Training: A Critical Perspective",
    summary="Sum over all tokens divided by a constant C (Dr.GRPO): no length bias, no batch dependence.",
    equation=r"L = \frac{1}{C}\sum_{i,t} m_{i,t}\ell_{i,t},\quad C = B_{\text{global}} L_{\max}")
def seq_mean_token_sum_norm(per_token, mask, denom: Denominators | None = None):
    if denom is None or denom.norm_constant is None:
        raise ValueError(
            "seq-mean-token-sum-norm needs an explicit constant: pass "
            "denom=Denominators(norm_constant=C), e.g. C = sequences_per_step * max_new_tokens")
    if denom.norm_constant <= 0:
        raise ValueError(f"norm_constant must be positive, got {denom.norm_constant}")
    return masked_sum(per_token, mask) / denom.norm_constant


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean",
              denom: Denominators | None = None) -> torch.Tensor:
    """Turn a per-token loss [B, T] into a scalar with one of the four aggregation modes."""
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; choose one of {AGG_MODES}")
    check_mask(per_token, mask, "per-token loss")
    return registry.get("aggregation", mode).fn(weighted(per_token, denom), mask, denom)


def weighted(per_token: torch.Tensor, denom: Denominators | None) -> torch.Tensor:
    """The per-token loss times `denom.weights` (the rollout importance correction), or unchanged: every aggregator
    of per-token losses goes through this, `aggregate` and the objectives with their own (m-grpo's per-action mean)."""
    return per_token if denom is None or denom.weights is None else per_token * denom.weights


# ----------------------------------------------------------------------------------------------------
# Log-probs and entropy from logits, in fp32, chunked over positions so a 150k vocabulary fits.


def _chunks(x: torch.Tensor, chunk: int) -> tuple[torch.Tensor, ...]:
    """x's rows `chunk` at a time, as `torch.split` views: under autograd their gradients meet in one concatenation,
    where slices (x[a:b]) would each add a full-size gradient in backward, a cost quadratic in the number of chunks
    (measured on an H200: ~35 % of the full preset's train-phase GPU time, in zero fills and adds)."""
    return x.split(chunk) if x.shape[0] else ()


def logprobs_from_logits(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0,
                         chunk: int = 128) -> torch.Tensor:
    """log softmax(logits / temperature)[tokens]; logits [..., V], tokens [...] -> [...]."""
    flat_logits, flat_tokens = logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1)
    out = []
    for rows, picks in zip(_chunks(flat_logits, chunk), _chunks(flat_tokens, chunk)):
        scaled = rows.float() / temperature
        picked = scaled.gather(-1, picks[:, None]).squeeze(-1)
        out.append(picked - torch.logsumexp(scaled, -1))
    return torch.cat(out).reshape(tokens.shape) if out else flat_logits.new_zeros(tokens.shape).float()


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """H = logsumexp(l) - sum softmax(l) * l per position, l = logits / temperature; [..., V] -> [...]."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for rows in _chunks(flat, chunk):
        scaled = rows.float() / temperature
        out.append(torch.logsumexp(scaled, -1) - (torch.softmax(scaled, -1) * scaled).sum(-1))
    return torch.cat(out).reshape(logits.shape[:-1]) if out else flat.new_zeros(logits.shape[:-1]).float()


def mean_logprob_from_logits(logits: torch.Tensor, temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """mean_v log softmax(l)_v = mean_v l_v - logsumexp(l) per position, l = logits / temperature; [..., V] -> [...]:
    the log-prob a uniform choice over the vocabulary expects (ROVER's `sum_log_softmax`)."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for rows in _chunks(flat, chunk):
        scaled = rows.float() / temperature
        out.append(scaled.mean(-1) - torch.logsumexp(scaled, -1))
    return torch.cat(out).reshape(logits.shape[:-1]) if out else flat.new_zeros(logits.shape[:-1]).float()
