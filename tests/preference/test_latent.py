"""LSPO's latent space: k-means on hashed n-gram embeddings finds separated intents, is deterministic from its seed,
never increases its objective, caps k at the distinct utterances, and expands k -> k + 1 keeping the old intents."""
import pytest
import torch

from workbench.preference import latent

CLAIMS = ["seer P1=wolf", "seer P2=wolf", "seer P0=wolf", "seer P1=wolf!", "i am seer, P2=wolf"]
DENIALS = ["villager", "villager here", "just a villager", "i am villager", "villager."]
NOISE = ["zzzz qqqq", "zzqq zzqq", "qqqq zzzz zz"]


def same_partition(a, b) -> bool:
    """Two labelings group the rows alike (up to the clusters' names)."""
    return len(set(zip(a.tolist(), b.tolist()))) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.covers("lspo")
def test_separated_kinds_of_utterance_become_separate_intents():
    texts = CLAIMS + DENIALS + NOISE
    space = latent.fit(texts, 3, seed=0)
    z = space.assign(texts)
    truth = torch.tensor([0] * len(CLAIMS) + [1] * len(DENIALS) + [2] * len(NOISE))
    assert space.k == 3 and same_partition(z, truth)
    for seed in range(1, 11):  # the best of 4 seeded draws finds it whatever the seed
        assert same_partition(latent.fit(texts, 3, seed=seed).assign(texts), truth)
    one_draw = [latent.kmeans(latent.embed(texts), 3, seed=seed, restarts=1)[1] for seed in range(1, 11)]
    assert not all(same_partition(z, truth) for z in one_draw)  # a single draw can stop in a local optimum
    assert space.dim == latent.DIM and space.centroids.dtype == torch.float64


def test_the_same_seed_gives_the_same_space_and_labels_are_nearest_centroids():
    texts = CLAIMS + DENIALS + NOISE + ["seer?", "wolf wolf", "P2"]
    a, b = latent.fit(texts, 4, seed=7), latent.fit(texts, 4, seed=7)
    assert torch.equal(a.centroids, b.centroids)
    x = latent.embed(texts)
    centroids, labels = latent.kmeans(x, 4, seed=7)
    assert torch.equal(labels, a.assign(texts))
    d = torch.cdist(x, centroids)
    assert torch.equal(d.gather(1, labels[:, None]).squeeze(1), d.min(1).values)  # each row at its nearest


def test_lloyds_iterations_never_increase_the_objective():
    texts = CLAIMS + DENIALS + NOISE + ["seer?", "wolf wolf", "P2", "vote P1", "good good"]
    x = latent.embed(texts)
    start = latent.kmeans_pp(x, 4, torch.Generator().manual_seed(3))
    before = latent.inertia(x, start, latent.nearest(x, start))
    costs = [latent.inertia(x, *latent.kmeans(x, 4, seed=3, iterations=n, restarts=1)) for n in (1, 2, 5, 100)]
    assert costs[0] <= before + 1e-12 and all(b <= a + 1e-12 for a, b in zip(costs, costs[1:]))


def test_k_is_capped_at_the_distinct_utterances():
    space = latent.fit(["villager", "villager", "seer P1=wolf"], 5)
    assert space.k == 2 and sorted(space.assign(["villager", "seer P1=wolf"]).tolist()) == [0, 1]
    one = latent.fit(["villager"] * 4, 3)
    assert one.k == 1 and one.assign(["anything at all", "villager"]).tolist() == [0, 0]


def test_expansion_adds_one_intent_and_keeps_the_old_ones_first():
    texts = CLAIMS + DENIALS + NOISE
    two = latent.fit(CLAIMS + DENIALS, 2, seed=0)
    three = latent.expand(two, texts, seed=0)
    assert three.k == 3
    old = two.assign(CLAIMS + DENIALS)
    assert torch.equal(three.assign(CLAIMS + DENIALS), old)  # intent ids keep their meaning
    assert set(three.assign(NOISE).tolist()) == {2}  # the new intent takes what the old ones did not cover


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="utterances to cluster"):
        latent.fit([], 2)
    with pytest.raises(ValueError, match="k \\(the number of intents\\)"):
        latent.fit(["a"], 0)
    with pytest.raises(ValueError, match="dim"):
        latent.fit(["a", "b"], 2, previous=latent.fit(["a", "b"], 2, dim=16))
    with pytest.raises(ValueError, match="restarts"):
        latent.fit(["a", "b"], 2, restarts=0)
    with pytest.raises(ValueError, match="start centroids"):
        latent.kmeans(latent.embed(["a", "b"]), 1, start=torch.zeros(2, latent.DIM, dtype=torch.float64))
