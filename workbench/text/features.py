"""Prompt features for samplers that predict a prompt's difficulty from prompts they have measured.

DOTS predicts an unmeasured prompt's difficulty by attention over embeddings of measured ones, PCL fits a value model
of the pass rate on embeddings; both use a frozen language model's embedding. A sampler here runs before the policy
sees the step and holds no model, so the embedding is a fixed one of the text itself:

    phi(x) = v / |v|,   v_j = #{character n-grams g of x (n = 1..3) : hash(g) mod dim = j}

deterministic (a stable hash, not Python's salted `hash`), unit length, so <phi(x), phi(x')> is a cosine similarity in
[0, 1]. On countdown it separates puzzles by how many numbers they hold (their length and digit mix), the property
that sets their difficulty; what a frozen LM embedding adds beyond the text's surface is not available at this scale.
"""
from __future__ import annotations

import zlib

import torch

DIM = 256      # hashed feature buckets
NGRAMS = (1, 2, 3)


def prompt_features(prompts: list[str], dim: int = DIM) -> torch.Tensor:
    """[len(prompts), dim] float64 unit rows: hashed character 1-3-gram counts of each prompt."""
    out = torch.zeros(len(prompts), dim, dtype=torch.float64)
    for i, text in enumerate(prompts):
        for n in NGRAMS:
            for j in range(len(text) - n + 1):
                out[i, zlib.crc32(text[j:j + n].encode()) % dim] += 1.0
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)
