"""SPO segment advantages: chain cutpoints and Monte Carlo values, tree node values, the probability mask."""
import math
import random

import pytest
import torch

from tests.helpers import D, make_batch
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.spo import (
    chain_boundaries,
    chain_segments,
    cutpoints,
    segment_runs,
    spo_chain_values,
    spo_prob_mask,
    spo_segment,
    tree_values,
)
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.models import char_tokenizer
from workbench.tasks import Example, Task

pytestmark = pytest.mark.covers("spo-segment")
UNSURE = math.log(0.5)  # old log-prob of a token the policy was unsure of (p = 0.5 < 0.9)


# ---------------------------------------------------------------------------------------------------- trees as rows

def tree_batch(trees, tokens_per_node=2, shared="per_path", logp=UNSURE):
    """Rows of the root-to-leaf paths of `trees` (one group each). A tree is a list of children; a child is a leaf's
    reward (a number) or a list of its own children. Node ids are given in depth-first preorder; every node holds
    `tokens_per_node` tokens. Returns (batch, paths {node id: tuple of child indices from the root})."""
    rows, paths, counter = [], {}, [0]

    def walk(children, g, prefix, above):
        for j, child in enumerate(children):
            node, counter[0] = counter[0], counter[0] + 1
            paths[node] = prefix + (j,)
            if isinstance(child, list):
                walk(child, g, prefix + (j,), above + [node])
            else:
                rows.append((g, above + [node], float(child)))

    for g, tree in enumerate(trees):
        walk(tree, g, (), [])
    T = max(len(nodes) for _, nodes, _ in rows) * tokens_per_node
    segment = torch.full((len(rows), T), -1, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=D)
    owned = set()
    for i, (_, nodes, _) in enumerate(rows):
        for j, node in enumerate(nodes):
            cols = slice(j * tokens_per_node, (j + 1) * tokens_per_node)
            segment[i, cols] = node
            mask[i, cols] = float(shared == "per_path" or node not in owned)
            owned.add(node)
    batch = RolloutBatch(response_ids=torch.zeros(segment.shape, dtype=torch.long), mask=mask,
                         group=torch.tensor([g for g, _, _ in rows]),
                         rewards=torch.tensor([r for _, _, r in rows], dtype=D), segment=segment)
    batch.old_logp = torch.full(segment.shape, logp, dtype=D) * mask
    return batch, paths


def node_advantage(A, batch, node):
    """The advantage on node `node`'s tokens (one value; checked equal wherever they are trained)."""
    at = (batch.segment == node) & (batch.mask > 0)
    values = A[at]
    assert values.numel() and torch.allclose(values, values[0].expand_as(values)), (node, values)
    return float(values[0])


def random_tree(rng, depth, branch, p_leaf=0.0):
    """A tree whose inner nodes have `branch` children down to `depth`, 0/1 leaves; an inner node below the root is
    a leaf early with probability p_leaf."""
    def children(d):
        return [rng.choice([0.0, 1.0]) if d == depth or (d > 1 and rng.random() < p_leaf) else children(d + 1)
                for _ in range(branch)]
    return children(1)


def children_of(paths):
    """{parent path: [child node ids]} from the node paths (root: ())."""
    out = {}
    for node, path in sorted(paths.items()):
        out.setdefault(path[:-1], []).append(node)
    return out


# ---------------------------------------------------------------------------------------------------- card tests

@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("reference_bug", [False, True])
def test_rloo_sibling_advantages_average_to_zero_under_their_parent(seed, reference_bug):
    rng = random.Random(seed)
    trees = [random_tree(rng, depth=3, branch=rng.choice([2, 3])) for _ in range(2)]
    batch, paths = tree_batch(trees)
    A = spo_segment(batch, whiten=False, reference_bug=reference_bug)
    for parent, kids in children_of(paths).items():
        if parent == ():  # the roots of both trees: split per tree below
            continue
        assert abs(sum(node_advantage(A, batch, k) for k in kids)) < 1e-12
    for g in range(2):  # the root's children, tree by tree
        firsts = [n for n, p in paths.items() if len(p) == 1 and bool((batch.segment[batch.group == g] == n).any())]
        assert abs(sum(node_advantage(A, batch, k) for k in firsts)) < 1e-12


def test_one_segment_per_response_is_the_trajectory_advantage():
    """A chain with one segment (V(s_0) = the group mean) and a one-level tree both give R - mean_g R."""
    R, G = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0], [0, 0, 0, 1, 1, 1]
    chain = make_batch(R, G, lengths=[3, 2, 4, 1, 3, 2])
    chain.old_logp = torch.full(chain.mask.shape, UNSURE, dtype=D) * chain.mask
    chain.segment = torch.where(chain.mask > 0, torch.arange(6)[:, None], torch.tensor(-1))   # one segment a row
    mean = torch.tensor([1 / 3] * 3 + [2 / 3] * 3, dtype=D)
    chain.segment_values = mean[:, None]
    expected = grpo(chain, scale="none")
    torch.testing.assert_close(spo_segment(chain, whiten=False), expected)
    tree, _ = tree_batch([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], tokens_per_node=3)
    torch.testing.assert_close(spo_segment(tree, whiten=False), grpo(tree, scale="none"))


@pytest.mark.parametrize("reference_bug", [False, True])
def test_confident_tokens_get_exactly_zero_gradient(reference_bug):
    batch, _ = tree_batch([[[1.0, 0.0], 1.0], [[0.0, 1.0, 1.0], 0.0]], tokens_per_node=3)
    g = torch.Generator().manual_seed(0)
    p = torch.rand(batch.mask.shape, generator=g, dtype=D) * 0.5 + 0.5    # half of the tokens above 0.9
    p[0, 0] = 0.9                                                          # exactly at the threshold
    batch.old_logp = p.log() * batch.mask
    batch.advantages = spo_segment(batch, reference_bug=reference_bug)
    mask = spo_prob_mask(batch)
    confident = (p >= 0.9) & (batch.mask > 0)
    assert bool(confident.any()) and not bool((mask[confident] > 0).any())
    logp = batch.old_logp.clone().requires_grad_(True)
    loss, _ = registry.get("objective", "ppo-clip").fn(logp, batch.old_logp, batch.advantages, mask)
    (grad,) = torch.autograd.grad(loss, logp)
    assert bool((grad[confident] == 0).all())
    assert bool((grad[(mask > 0) & (batch.advantages != 0)] != 0).all())
    if not reference_bug:  # the advantage alone already gives them no gradient, whatever the loss mask
        assert bool((batch.advantages[confident] == 0).all())
        loss, _ = registry.get("objective", "ppo-clip").fn(logp, batch.old_logp, batch.advantages, batch.mask)
        (grad,) = torch.autograd.grad(loss, logp)
        assert bool((grad[confident] == 0).all())


# ---------------------------------------------------------------------------------------------------- the chain

def test_cutpoints_are_every_interval_th_position_before_an_unsure_token():
    probs = [0.5, 0.95, 0.2, 0.99, 0.3, 0.1, 0.97, 0.4]      # unsure tokens 0, 2, 4, 5, 7
    assert cutpoints(probs, interval=1) == [-1, 1, 3, 4, 6]
    assert cutpoints(probs, interval=2) == [-1, 3, 6]
    assert cutpoints(probs, interval=5) == [-1]
    assert chain_boundaries(probs, interval=2) == ([-1, 3, 6], [True, True, True])
    confident_first = [0.95] + probs[1:]                      # token 0 sure: no cutpoint -1
    assert chain_boundaries(confident_first, interval=2) == ([-1, 1, 4], [True] * 3)     # the paper's V(s_0)
    assert chain_boundaries(confident_first, interval=2, reference_bug=True) == ([-1, 1, 4], [False, True, True])
    seg = chain_segments([[-1, 3, 6], [-1]], [8, 3], T=9, first_id=10)
    assert seg.tolist() == [[10] * 4 + [11] * 3 + [12] + [-1], [13] * 3 + [-1] * 6]
    with pytest.raises(ValueError, match="cutpoint_interval"):
        cutpoints(probs, interval=0)


def chain_batch(probs, values, reward, interval=1, reference_bug=False):
    """One chain row from token probabilities and the Monte Carlo value of each boundary (NaN: not estimated)."""
    b = make_batch([reward], [0], lengths=[len(probs)])
    b.old_logp = torch.tensor([probs], dtype=D).log()
    bounds, _ = chain_boundaries(probs, interval=interval, reference_bug=reference_bug)
    b.segment = chain_segments([bounds], [len(probs)], len(probs))
    b.segment_values = torch.tensor([values], dtype=D)
    return b


def test_chain_advantage_by_hand():
    """Boundaries after tokens -1, 1, 3: segments {0,1}, {2,3}, {4,5}; V = 0.2, 0.6, 0.5, R = 1."""
    probs = [0.5, 0.95, 0.3, 0.99, 0.4, 0.95]
    b = chain_batch(probs, [0.2, 0.6, 0.5], reward=1.0)
    A = spo_segment(b, whiten=False)
    expected = [0.4, 0.0, -0.1, 0.0, 0.5, 0.0]                  # A_k on unsure tokens, 0 on sure ones
    torch.testing.assert_close(A[0], torch.tensor(expected, dtype=D))
    # the code's chain when the first token is sure: no V(s_0), the first segment gets 0
    sure_first = [0.95, 0.3, 0.99, 0.4, 0.95]                  # boundaries -1 (not estimated), 0, 2
    b = chain_batch(sure_first, [math.nan, 0.6, 0.5], reward=1.0, reference_bug=True)
    torch.testing.assert_close(spo_segment(b, whiten=False, reference_bug=True)[0],
                               torch.tensor([0.0, -0.1, 0.0, 0.5, 0.0], dtype=D))


def test_whitening_uses_only_the_unsure_tokens():
    probs = [0.5, 0.95, 0.3, 0.99, 0.4, 0.95]
    b = chain_batch(probs, [0.2, 0.6, 0.5], reward=1.0)
    raw = spo_segment(b, whiten=False)[0]
    unsure = torch.tensor(probs) < 0.9
    x = raw[unsure]
    expected = torch.zeros(6, dtype=D)
    expected[unsure] = (x - x.mean()) / (x.var(unbiased=True) + 1e-8).sqrt()
    torch.testing.assert_close(spo_segment(b)[0], expected)


def test_drop_zero_leaves_zero_advantage_segments_out():
    batch, _ = tree_batch([[[1.0, 1.0], [1.0, 0.0]]], tokens_per_node=1)   # the first inner node: A = 0.25,
    raw = spo_segment(batch, whiten=False)                                      # its leaves: A = 0
    zero = (raw == 0) & (batch.mask > 0)
    assert bool(zero.any())
    A = spo_segment(batch, drop_zero=True)
    assert bool((A[zero] == 0).all())
    kept = ~zero & (batch.mask > 0)
    assert abs(float(A[kept].mean())) < 1e-12   # whitened over the non-zero ones only
    batch.advantages = A
    assert not bool((spo_prob_mask(batch, drop_zero=True)[zero] > 0).any())
    assert bool((spo_prob_mask(batch)[zero] > 0).all())


# ---------------------------------------------------------------------------------------------------- the tree

def test_tree_node_values_paper_and_code():
    """Root -> a (leaves 1, 0, 0) and b (a leaf, 1): the leaves below the root average 2/4 = 0.5; the children's
    values average (1/3 + 1)/2 = 2/3 (the code)."""
    batch, paths = tree_batch([[[1.0, 0.0, 0.0], 1.0]])
    _, run_paths = segment_runs(batch.segment)
    group, R = batch.group.tolist(), batch.rewards.tolist()
    paper, _ = tree_values(run_paths, R, group)
    code, _ = tree_values(run_paths, R, group, reference_bug=True)
    assert paper[("root", 0)] == pytest.approx(0.5) and code[("root", 0)] == pytest.approx(2 / 3)
    a, b = [n for n, p in paths.items() if p in ((0,), (1,))]
    A_paper, A_code = spo_segment(batch, whiten=False), spo_segment(batch, whiten=False, reference_bug=True)
    assert node_advantage(A_paper, batch, a) == pytest.approx(1 / 3 - 0.5)
    assert node_advantage(A_code, batch, a) == pytest.approx(1 / 3 - 2 / 3)
    assert node_advantage(A_paper, batch, b) == pytest.approx(0.5)
    # a full tree: both readings agree
    full, _ = tree_batch([[[1.0, 0.0], [1.0, 1.0]]])
    torch.testing.assert_close(spo_segment(full), spo_segment(full, reference_bug=True))


def test_grpo_divides_by_the_spread_of_the_parents_children():
    batch, paths = tree_batch([[[1.0, 0.0], [1.0, 1.0]]])
    A = spo_segment(batch, adv_method="grpo", whiten=False, reference_bug=True)
    a, b = [n for n, p in paths.items() if p in ((0,), (1,))]
    root_std = torch.tensor([0.5, 1.0]).std(unbiased=False)                      # children values 0.5, 1
    assert node_advantage(A, batch, a) == pytest.approx((0.5 - 0.75) / (float(root_std) + 1e-8))
    assert node_advantage(A, batch, b) == pytest.approx((1.0 - 0.75) / (float(root_std) + 1e-8))
    leaf = next(n for n, p in paths.items() if p == (0, 0))
    assert node_advantage(A, batch, leaf) == pytest.approx(0.5 / (0.5 + 1e-8))
    leaf = next(n for n, p in paths.items() if p == (1, 0))
    assert node_advantage(A, batch, leaf) == 0.0                                 # no spread: 0 / 1e-8


def test_shared_prefix_trained_once_or_per_path():
    once, _ = tree_batch([[[1.0, 0.0], 1.0]], shared="once")
    per_path, _ = tree_batch([[[1.0, 0.0], 1.0]], shared="per_path")
    assert once.mask.sum() == 2 * 4 and per_path.mask.sum() == 2 * 5         # 4 nodes; the shared one twice
    torch.testing.assert_close(spo_segment(once, whiten=False), spo_segment(per_path, whiten=False) * once.mask)


def test_bad_inputs_are_named():
    batch, _ = tree_batch([[1.0, 0.0]])
    with pytest.raises(ValueError, match="adv_method"):
        spo_segment(batch, adv_method="ppo")
    with pytest.raises(ValueError, match="prob_threshold"):
        spo_segment(batch, prob_threshold=1.5)
    bad, _ = tree_batch([[[1.0, 0.0]]])
    bad.segment[0, 3] = bad.segment[0, 0]                                     # node 0 again after node 1
    with pytest.raises(ValueError, match="two separate runs"):
        spo_segment(bad)
    twice, _ = tree_batch([[1.0, 1.0]])
    twice.segment[1] = twice.segment[0]                                       # two rows end at one leaf
    with pytest.raises(ValueError, match="same leaf"):
        spo_segment(twice)
    chain = chain_batch([0.5, 0.5], [0.3, 0.4], reward=1.0)
    with pytest.raises(ValueError, match="grpo"):
        spo_segment(chain, adv_method="grpo")


# ---------------------------------------------------------------------------------------------------- the values

class Pair(Task):
    """Reward 1 for the completion "ab" exactly."""

    name = "pair"

    def make_example(self, rng):
        return Example(prompt="q:", answer="ab", target="ab")

    def score(self, completion, example):
        return float(completion == example.answer)


def test_chain_values_are_the_mean_score_of_continuations_from_each_cut():
    """A scripted policy that always continues with "b": from the prompt it answers "b" (0), after "a" it
    completes "ab" (1). Token 0 ("a") and 1 ("b") are unsure, EOS is sure: boundaries -1 and 0 (interval 1)."""
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, lambda history: "b<eos>")
    ids = tok("ab", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    prompt = tok("q:", return_tensors="pt")
    batch = RolloutBatch(response_ids=torch.tensor([ids, ids]), mask=torch.ones(2, 3), group=torch.tensor([0, 0]),
                         rewards=torch.tensor([1.0, 1.0]), prompt_ids=prompt["input_ids"].repeat(2, 1),
                         prompt_mask=prompt["attention_mask"].repeat(2, 1))
    batch.old_logp = torch.tensor([[0.5, 0.5, 0.95]] * 2).log()
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=1, max_new_tokens=4,
                      examples=[Pair().make_example(None)], task=Pair(), engine=engine)
    out = spo_chain_values(batch, ctx, cutpoint_interval=1, mc_samples=3)
    assert out.segment.tolist() == [[0, 1, 1], [2, 3, 3]]
    torch.testing.assert_close(out.segment_values, torch.tensor([[0.0, 1.0]] * 2, dtype=D))
    assert ctx.metrics["spo/continuations"] == 2 * 3          # two distinct prefixes, shared by both rows
    assert engine.calls == [("generate_ids", 6)]
    A = spo_segment(out, whiten=False)
    torch.testing.assert_close(A, torch.tensor([[1.0, 0.0, 0.0]] * 2))
    group_v0 = spo_chain_values(batch, ctx, cutpoint_interval=1, mc_samples=3, v0="group")
    assert group_v0.segment_values[:, 0].tolist() == [1.0, 1.0] and engine.calls[-1] == ("generate_ids", 3)


def test_a_continuation_cut_by_its_budget_scores_as_the_rollout_would_or_the_given_penalty():
    """Budget 1 after "a": the continuation "b" has no room for EOS. Scored as is ("ab" is right) by default, or the
    code's unfinished-response penalty when given."""
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, lambda history: "b<eos>")
    ids = tok("ab", add_special_tokens=False)["input_ids"]
    prompt = tok("q:", return_tensors="pt")
    batch = RolloutBatch(response_ids=torch.tensor([ids]), mask=torch.ones(1, 2), group=torch.tensor([0]),
                         rewards=torch.tensor([1.0]), prompt_ids=prompt["input_ids"],
                         prompt_mask=prompt["attention_mask"])
    batch.old_logp = torch.tensor([[0.5, 0.5]]).log()
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=1, prompts_per_step=1, max_new_tokens=2,
                      examples=[Pair().make_example(None)], task=Pair(), engine=engine)
    as_is = spo_chain_values(batch, ctx, cutpoint_interval=1, mc_samples=2).segment_values
    penalized = spo_chain_values(batch, ctx, cutpoint_interval=1, mc_samples=2, truncated_score=-1.0).segment_values
    assert as_is.tolist() == [[0.0, 1.0]] and penalized.tolist() == [[0.0, -1.0]]   # "b<eos>" from the prompt ended
