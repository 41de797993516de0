"""LSPO's latent strategy space: free-form utterances -> k discrete intents, by k-means on fixed text embeddings.

    phi(x)   hashed character 1-3-gram counts of x, unit length (`workbench.text.features.prompt_features`, the
             embedding every sampler here uses; the paper embeds with an LLM embedding model, not available here)
    k-means  minimize sum_i |phi(x_i) - mu_{z_i}|^2 over centroids mu_1..mu_k and intents z_i (Lloyd's iterations):
                 z_i = argmin_c |phi(x_i) - mu_c|^2   (a tie: the lowest c)
                 mu_c = mean of {phi(x_i) : z_i = c}  (a cluster left empty keeps its centroid)
             until no z_i changes (or `iterations`); the objective never increases
    init     k-means++ (Arthur & Vassilvitskii 2007), seeded: the first centroid a point drawn uniformly, each next
             one a point drawn with probability proportional to D(x)^2, its squared distance to the nearest
             centroid chosen so far; `restarts` seeded draws (seed, seed + 1, ...), the run of lowest objective kept
             (as scikit-learn's n_init: Lloyd's iterations stop in local optima)
    expand   LSPO's latent space expansion, k -> k + 1 (`expand`): the previous centroids start as the first k and
             k-means++ adds the new one, so intent ids keep their meaning across iterations

Decisions (the paper gives none of these): k is capped at the number of distinct embeddings (k-means++ cannot place
more centroids than there are distinct points; `LatentSpace.k` is what was fitted); embeddings and centroids are
float64; the same texts, k, seed and previous space give the same space.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench.text.features import DIM, prompt_features


@dataclass(frozen=True)
class LatentSpace:
    """k intents: a centroid each in the embedding space (dim hashed features)."""

    centroids: torch.Tensor  # [k, dim] float64

    @property
    def k(self) -> int:
        return self.centroids.shape[0]

    @property
    def dim(self) -> int:
        return self.centroids.shape[1]

    def assign(self, texts: list[str]) -> torch.Tensor:
        """[N] long: each text's intent, its nearest centroid."""
        return nearest(embed(texts, self.dim), self.centroids)


def embed(texts: list[str], dim: int = DIM) -> torch.Tensor:
    """[N, dim] float64 unit rows phi(x)."""
    return prompt_features(list(texts), dim)


def nearest(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """[N] long argmin_c |x_i - mu_c|^2 (torch.argmin takes the first of equal minima: the lowest c)."""
    return torch.cdist(x, centroids).argmin(1)


def inertia(x: torch.Tensor, centroids: torch.Tensor, labels: torch.Tensor) -> float:
    """sum_i |x_i - mu_{z_i}|^2, the k-means objective."""
    return float(((x - centroids[labels]) ** 2).sum())


def kmeans_pp(x: torch.Tensor, k: int, generator: torch.Generator, start: torch.Tensor | None = None) -> torch.Tensor:
    """[k, dim] k-means++ centroids (the rows of `start` first)."""
    chosen = [] if start is None else list(start)
    if not chosen:
        chosen.append(x[torch.randint(len(x), (1,), generator=generator)].squeeze(0))
    while len(chosen) < k:
        d2 = torch.cdist(x, torch.stack(chosen)).min(1).values ** 2  # [N]
        chosen.append(x[torch.multinomial(d2 / d2.sum(), 1, generator=generator)].squeeze(0))
    return torch.stack(chosen)


def kmeans(x: torch.Tensor, k: int, *, seed: int = 0, start: torch.Tensor | None = None, iterations: int = 100,
           restarts: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """(centroids [k', dim], labels [N]) of Lloyd's k-means on x [N, dim] from k-means++ (after the rows of `start`),
    the best of `restarts` draws; k' = min(k, the number of distinct rows of x)."""
    if x.dim() != 2 or len(x) == 0:
        raise ValueError(f"k-means needs a non-empty [N, dim] matrix of embeddings, got shape {tuple(x.shape)}")
    if k < 1:
        raise ValueError(f"k (the number of intents) must be >= 1, got {k}")
    if start is not None and (start.dim() != 2 or start.shape[1] != x.shape[1] or len(start) > k):
        raise ValueError(f"start centroids must be [<= k, {x.shape[1]}], got {tuple(start.shape)}")
    k = min(k, len(torch.unique(x, dim=0)))
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1 (seeded k-means++ draws, the best kept), got {restarts}")
    if start is not None:
        start = start[:k]
    runs = [lloyd(x, kmeans_pp(x, k, torch.Generator().manual_seed(seed + r), start), iterations)
            for r in range(restarts)]
    return min(runs, key=lambda run: inertia(x, *run))  # the first of equal objectives


def lloyd(x: torch.Tensor, centroids: torch.Tensor, iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's iterations from `centroids` (changed in place) until no label changes."""
    k = len(centroids)
    labels = nearest(x, centroids)
    for _ in range(iterations):
        for c in range(k):
            members = labels == c
            if members.any():
                centroids[c] = x[members].mean(0)
        new = nearest(x, centroids)
        if torch.equal(new, labels):
            break
        labels = new
    return centroids, labels


def fit(texts: list[str], k: int, *, seed: int = 0, previous: LatentSpace | None = None, dim: int = DIM,
        iterations: int = 100, restarts: int = 4) -> LatentSpace:
    """The latent space of `texts` with k intents (fewer if the texts have fewer distinct embeddings), the
    `previous` space's centroids as its first ones."""
    if not texts:
        raise ValueError("a latent space needs utterances to cluster; got none")
    if previous is not None and previous.dim != dim:
        raise ValueError(f"the previous space has dim {previous.dim}, this one {dim}: they must match")
    start = None if previous is None else previous.centroids
    centroids, _ = kmeans(embed(texts, dim), k, seed=seed, start=start, iterations=iterations, restarts=restarts)
    return LatentSpace(centroids)


def expand(space: LatentSpace, texts: list[str], *, seed: int = 0, iterations: int = 100,
           restarts: int = 4) -> LatentSpace:
    """LSPO's expansion: k + 1 intents, the current ones first (refitted on `texts`)."""
    return fit(texts, space.k + 1, seed=seed, previous=space, dim=space.dim, iterations=iterations,
               restarts=restarts)
