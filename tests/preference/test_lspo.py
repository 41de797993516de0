"""LSPO's pairs and loss: the chosen utterance's intent always has the higher latent-policy probability, one cluster
gives no pairs, only utterances of one decision point are paired, and the loss is DPO's."""
import random

import pytest
import torch

from tests.helpers import D
from workbench import registry
from workbench.preference import latent
from workbench.preference.lspo import LSPO_TITLE, intent_probs, latent_pairs, lspo
from workbench.preference.pairwise import dpo

pytestmark = pytest.mark.covers("lspo")


def random_rows(seed, keys=6, rows=40, k=4):
    """Rows of candidate utterances at `keys` decision points, each with an intent and the latent policy's
    probability of it there (a random policy per key)."""
    rng = random.Random(seed)
    policy = {f"x{j}": [rng.random() for _ in range(k)] for j in range(keys)}
    policy = {key: [p / sum(ps) for p in ps] for key, ps in policy.items()}
    out = []
    for i in range(rows):
        key, z = f"x{rng.randrange(keys)}", rng.randrange(k)
        out.append((key, f"utterance {i} intent {z}", z, policy[key][z]))
    return [list(col) for col in zip(*out)]


@pytest.mark.parametrize("seed", range(20))
def test_the_chosen_intent_always_has_the_higher_latent_policy_probability(seed):
    """Card test (1)."""
    keys, texts, intents, probs = random_rows(seed)
    pairs = latent_pairs(keys, texts, intents, probs)
    assert pairs
    for pair in pairs:
        assert pair.chosen_prob > pair.rejected_prob and pair.chosen_intent != pair.rejected_intent
        mine = [i for i, key in enumerate(keys) if key == pair.key]  # both from the same decision point
        assert pair.chosen in [texts[i] for i in mine] and pair.rejected in [texts[i] for i in mine]
        assert pair.chosen_prob == max(probs[i] for i in mine) and pair.rejected_prob == min(probs[i] for i in mine)
    assert len({p.key for p in pairs}) == len(pairs)  # one pair per decision point
    # a key with rows of different probabilities always gives its pair
    spread = {key for key in keys if len({probs[i] for i, k in enumerate(keys) if k == key}) > 1}
    assert {p.key for p in pairs} == spread


def test_one_cluster_gives_no_pairs():
    """Card test (2): a latent space of one intent puts every utterance in it, so every row of a decision point has
    the same latent-policy probability and nothing is preferred."""
    texts = ["seer P1=wolf", "villager", "zzz", "i am villager", "seer P2=good"]
    space = latent.fit(texts, 1)
    intents = space.assign(texts).tolist()
    assert intents == [0] * 5
    policy = {"P0 villager |": {"0": 1.0}, "P1 wolf |0": {"0": 1.0}}
    keys = ["a", "a", "a", "b", "b"]
    sets = ["P0 villager |"] * 3 + ["P1 wolf |0"] * 2
    assert latent_pairs(keys, texts, intents, intent_probs(policy, sets, intents)) == []
    assert latent_pairs(["a"] * 3, texts[:3], [2, 2, 2], [0.4, 0.4, 0.4]) == []  # one intent, any probability


def test_ties_and_the_minimum_gap_give_no_pair_and_order_decides_among_equals():
    keys = ["x"] * 4
    assert latent_pairs(keys, list("abcd"), [0, 1, 2, 3], [0.25, 0.25, 0.25, 0.25]) == []  # tied intents
    [pair] = latent_pairs(keys, list("abcd"), [0, 1, 2, 3], [0.1, 0.4, 0.4, 0.1])
    assert (pair.chosen, pair.rejected, pair.chosen_intent, pair.rejected_intent) == ("b", "a", 1, 0)
    assert latent_pairs(keys, list("abcd"), [0, 1, 2, 3], [0.1, 0.4, 0.4, 0.1], min_gap=0.35) == []
    assert len(latent_pairs(keys, list("abcd"), [0, 1, 2, 3], [0.1, 0.4, 0.4, 0.1], min_gap=0.25)) == 1


def test_intent_probs_reads_the_policy_at_each_rows_set():
    policy = {"P0 villager |": {"0": 0.2, "1": 0.8}, "P1 wolf |1": {"0": 0.6, "1": 0.4}}
    assert intent_probs(policy, ["P0 villager |", "P1 wolf |1", "P0 villager |"], [1, 0, 0]) == [0.8, 0.6, 0.2]
    with pytest.raises(ValueError, match="no information set"):
        intent_probs(policy, ["P2 seer |"], [0])
    with pytest.raises(ValueError, match="not an action"):
        intent_probs(policy, ["P1 wolf |1"], [5])
    with pytest.raises(ValueError, match="one of each per row"):
        intent_probs(policy, ["P1 wolf |1"], [0, 1])


def test_bad_rows_are_refused():
    with pytest.raises(ValueError, match="one entry per row"):
        latent_pairs(["a"], ["x", "y"], [0], [0.5])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        latent_pairs(["a", "a"], ["x", "y"], [0, 1], [0.5, 1.5])
    with pytest.raises(ValueError, match="min_gap"):
        latent_pairs(["a"], ["x"], [0], [0.5], min_gap=-1)


def test_the_loss_is_dpos_value_and_gradient_and_registered_from_the_catalog():
    g = torch.Generator().manual_seed(0)
    c, r, rc, rr = (-(torch.rand(5, generator=g, dtype=D) * 3 + 0.5) for _ in range(4))
    c.requires_grad_(True)
    ours, metrics = lspo(c, r, rc, rr, beta=0.3)
    theirs, expected = dpo(c, r, rc, rr, beta=0.3)
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-14) and metrics == expected
    (g1,) = torch.autograd.grad(ours, c)
    (g2,) = torch.autograd.grad(theirs, c)
    assert torch.allclose(g1, g2, rtol=1e-14, atol=0)
    entry = registry.get("preference", "lspo")
    row = registry.catalog()["lspo"]
    assert entry.title == LSPO_TITLE == row["title"] and entry.confidence == row["confidence"] == "abstract-only"
    assert entry.family == "multiagent" and entry.equation and entry.defaults == {"beta": 0.1}
    assert entry.declares("dpo/weight") and entry.declares("rewards/margins")
