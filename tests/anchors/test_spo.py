"""Agreement with SPO's code (tests/anchors/formulas_spo.py, AIFrameResearch/SPO @ b9fc6a2) on the same inputs:

    cutpoints                the response's token log-probs -> every cutpoint_interval-th (t - 1 : p_t < 0.9)
    chain token advantages   cutpoint values + score -> `_compute_token_advantages` (reference_bug: the code's V(s_0)
                             only when the first token is unsure, zeroing p > 0.9)
    chain whitening          `masked_whiten(..., logprobs, unbiased_variance=True)` over several padded rows
    tree edges               hand-built trees with 0/1 leaves (some ending early) -> `_construct_tree` values and
                             `extract_edges_from_tree` (rloo, grpo; with and without only_adv_greater_than_zero)

and the documented departures of the code from the paper (module docstring of workbench/advantages/spo.py).
"""
import math
import random

import numpy as np
import pytest
import torch

from tests.advantages.test_spo import random_tree, tree_batch
from tests.helpers import D
from tests.anchors import formulas_spo as ref
from workbench.advantages.spo import (
    chain_boundaries,
    chain_segments,
    cutpoints,
    spo_segment,
)
from workbench.batch import RolloutBatch

pytestmark = pytest.mark.covers("spo-segment")


def random_logprobs(rng: random.Random, n: int) -> list[float]:
    """Token log-probs, about half of them confident (p > 0.9)."""
    return [math.log(rng.uniform(0.91, 1.0) if rng.random() < 0.5 else rng.uniform(0.05, 0.89)) for _ in range(n)]


def chain_rows(rng: random.Random, rows: int, interval: int):
    """(batch, their advantages [per row list], their whitened [B, T]) for `rows` random responses."""
    lengths = [rng.randint(1, 12) for _ in range(rows)]
    T = max(lengths)
    old = torch.zeros(rows, T, dtype=D)
    mask = torch.zeros(rows, T, dtype=D)
    values = torch.full((rows, T + 1), math.nan, dtype=D)
    bounds, theirs, scores = [], [], []
    for i, n in enumerate(lengths):
        logp = random_logprobs(rng, n)
        old[i, :n], mask[i, :n] = torch.tensor(logp, dtype=D), 1.0
        cuts, probs = ref.cutpoints_from_logprobs(np.array(logp), interval)
        assert cutpoints(np.exp(logp).tolist(), interval=interval) == cuts.tolist()
        cut_values = [float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])) for _ in cuts]
        score = float(rng.random() < 0.5)
        _, adv = ref.compute_token_advantages(score, cuts.tolist(), cut_values, probs)
        theirs.append(adv)
        scores.append(score)
        b, estimated = chain_boundaries(np.exp(logp).tolist(), interval=interval, reference_bug=True)
        by_cut = dict(zip(cuts.tolist(), cut_values))
        values[i, :len(b)] = torch.tensor([by_cut[c] if e else math.nan for c, e in zip(b, estimated)], dtype=D)
        bounds.append(b)
    batch = RolloutBatch(response_ids=torch.zeros(rows, T, dtype=torch.long), mask=mask,
                         group=torch.arange(rows), rewards=torch.tensor(scores, dtype=D))
    batch.old_logp = old
    batch.segment = chain_segments(bounds, lengths, T)
    batch.segment_values = values
    return batch, theirs


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("interval", [1, 2, 5])
def test_chain_token_advantages_match_the_code(seed, interval):
    batch, theirs = chain_rows(random.Random(seed), rows=6, interval=interval)
    ours = spo_segment(batch, whiten=False, reference_bug=True)
    for i, adv in enumerate(theirs):
        torch.testing.assert_close(ours[i, :len(adv)], torch.tensor(adv, dtype=D), rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_chain_whitening_matches_the_code(seed):
    rng = random.Random(seed)
    batch, theirs = chain_rows(rng, rows=8, interval=rng.choice([1, 2, 5]))
    raw = torch.zeros(batch.mask.shape, dtype=D)
    for i, adv in enumerate(theirs):
        raw[i, :len(adv)] = torch.tensor(adv, dtype=D)
    if int(((batch.old_logp.exp() < 0.9) & (batch.mask > 0)).sum()) < 2:
        pytest.skip("fewer than two unsure tokens: the code divides by zero")
    expected = ref.masked_whiten(raw, batch.mask > 0, logprobs=batch.old_logp * batch.mask + (1 - batch.mask),
                                 unbiased_variance=True)
    ours = spo_segment(batch, reference_bug=True)
    on = batch.mask > 0  # the code's Bessel factor n / (n - 1) divides integer counts: float32 (7 digits)
    torch.testing.assert_close(ours[on], expected[on], rtol=1e-7, atol=1e-7)


def test_the_paper_estimates_v_s0_where_the_code_gives_the_first_segment_zero():
    logp = [math.log(0.95), math.log(0.3), math.log(0.99), math.log(0.4)]   # token 0 sure: cutpoints 0, 2
    probs = np.exp(logp)
    bounds, estimated = chain_boundaries(probs.tolist(), interval=1)
    assert bounds == [-1, 0, 2] and all(estimated)
    batch = RolloutBatch(response_ids=torch.zeros(1, 4, dtype=torch.long), mask=torch.ones(1, 4, dtype=D),
                         group=torch.tensor([0]), rewards=torch.tensor([1.0], dtype=D))
    batch.old_logp = torch.tensor([logp], dtype=D)
    batch.segment = chain_segments([bounds], [4], 4)
    batch.segment_values = torch.tensor([[0.2, 0.6, 0.5]], dtype=D)             # V(s_0) = 0.2 estimated
    ours = spo_segment(batch, whiten=False)[0]
    _, theirs = ref.compute_token_advantages(1.0, [0, 2], [0.6, 0.5], probs)
    assert ours[0] == 0 and theirs[0] == 0                                      # token 0 is sure either way
    torch.testing.assert_close(ours[1:], torch.tensor(theirs[1:], dtype=D))     # later segments agree
    batch.old_logp[0, 0] = math.log(0.5)                                        # an unsure first token ...
    batch.segment_values = torch.tensor([[0.2, 0.6, 0.5]], dtype=D)
    assert float(spo_segment(batch, whiten=False)[0, 0]) == pytest.approx(0.4)  # ... gets V(s_1) - V(s_0)


def dict_tree(children, prefix=(), text="q"):
    """The code's nested-dict tree of a test tree (see tests/advantages/test_spo.py::tree_batch): node text = its
    path of child indices, leaves carry their reward."""
    node = {"text": text, "full_text": text, "children": []}
    for j, child in enumerate(children):
        path = prefix + (j,)
        if isinstance(child, list):
            sub = dict_tree(child, path, str(path))
        else:
            sub = {"text": str(path), "reward": float(child)}
        sub["full_text"] = node["full_text"] + sub["text"]
        node["children"].append(sub)
    return node


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("adv_method", ["rloo", "grpo"])
@pytest.mark.parametrize("only_nonzero", [False, True])
def test_tree_edge_advantages_match_the_code(seed, adv_method, only_nonzero):
    rng = random.Random(seed)
    tree = random_tree(rng, depth=3, branch=rng.choice([2, 3]), p_leaf=0.3)
    batch, paths = tree_batch([tree], tokens_per_node=2)
    edges = ref.extract_edges_from_tree(ref.construct_tree(dict_tree(tree)), adv_method=adv_method,
                                        only_adv_greater_than_zero=only_nonzero)
    ours = spo_segment(batch, adv_method=adv_method, whiten=False, prob_threshold=None, reference_bug=True,
                       drop_zero=only_nonzero)
    by_text = {e["response_text"]: e["advantage"] for e in edges}
    for node, path in paths.items():
        at = batch.segment == node
        if str(path) in by_text:
            torch.testing.assert_close(ours[at], torch.full_like(ours[at], by_text[str(path)]), rtol=1e-9, atol=1e-9)
        else:  # an edge the code leaves out of training: exactly 0 here, so the token mask drops it
            assert only_nonzero and bool((ours[at] == 0).all())
    assert len(by_text) == len(edges)


def test_paper_node_values_differ_from_the_code_when_a_branch_ends_early():
    tree = [[1.0, 0.0, 0.0], 1.0]                                   # child a: three leaves; child b: a leaf
    batch, paths = tree_batch([tree], tokens_per_node=1)
    edges = ref.extract_edges_from_tree(ref.construct_tree(dict_tree(tree)), only_adv_greater_than_zero=False)
    code = {e["response_text"]: e["advantage"] for e in edges}
    ours = spo_segment(batch, whiten=False, prob_threshold=None)
    a = next(n for n, p in paths.items() if p == (0,))
    assert code[str((0,))] == pytest.approx(1 / 3 - 2 / 3)         # root = mean of children (1/3, 1)
    assert float(ours[batch.segment == a][0]) == pytest.approx(1 / 3 - 1 / 2)   # root = mean of the 4 leaves
