"""Loss aggregation and global denominators (micro-batching changes nothing), masked statistics, log-probs and
entropy from logits."""

import pytest
import torch

from tests.helpers import random_mask
from workbench import ops, registry


def ten_vs_thousand():
    """One 10-token and one 1000-token response, every token carrying loss 1."""
    mask = torch.zeros(2, 1000, dtype=torch.float64)
    mask[0, :10] = 1
    mask[1, :] = 1
    return torch.ones_like(mask, requires_grad=True), mask


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
def test_aggregation_modes_on_10_vs_1000_tokens():
    loss, mask = ten_vs_thousand()
    assert ops.aggregate(loss, mask, "token-mean").item() == pytest.approx(1.0)
    assert ops.aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx(1.0)
    assert ops.aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx(505.0)
    c = ops.Denominators(norm_constant=2 * 1000)
    assert ops.aggregate(loss, mask, "seq-mean-token-sum-norm", c).item() == pytest.approx(1010 / 2000)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.parametrize("mode, short_weight, long_weight", [
    ("token-mean", 1 / 1010, 1 / 1010),              # every token equal: the long answer dominates
    ("seq-mean-token-mean", 1 / 20, 1 / 2000),        # each sequence equal: short tokens weigh 100x
    ("seq-mean-token-sum", 1 / 2, 1 / 2),
])
def test_per_token_gradient_weights(mode, short_weight, long_weight):
    loss, mask = ten_vs_thousand()
    ops.aggregate(loss, mask, mode).backward()
    assert loss.grad[0, 0].item() == pytest.approx(short_weight)
    assert loss.grad[1, 0].item() == pytest.approx(long_weight)
    assert loss.grad[0, 10:].abs().sum() == 0  # padding gets no gradient


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
def test_equal_lengths_reductions():
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(4, 7, generator=g, dtype=torch.float64)
    mask = torch.ones(4, 7, dtype=torch.float64)
    assert torch.allclose(ops.aggregate(loss, mask, "token-mean"), ops.aggregate(loss, mask, "seq-mean-token-mean"))
    norm = ops.aggregate(loss, mask, "seq-mean-token-sum-norm", ops.Denominators(norm_constant=4 * 7))
    assert torch.allclose(norm, ops.aggregate(loss, mask, "seq-mean-token-sum") / 7)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.parametrize("mode", ops.AGG_MODES)
def test_micro_batches_with_global_denominators_reproduce_the_full_batch(mode):
    g = torch.Generator().manual_seed(1)
    loss = torch.randn(8, 9, generator=g, dtype=torch.float64, requires_grad=True)
    mask = random_mask(8, 9, g)
    denom = ops.Denominators.of(mask, norm_constant=8 * 9)
    full = ops.aggregate(loss, mask, mode, denom)
    (full_grad,) = torch.autograd.grad(full, loss)
    parts = sum(ops.aggregate(loss[i:i + 2], mask[i:i + 2], mode, denom) for i in range(0, 8, 2))
    (part_grad,) = torch.autograd.grad(parts, loss)
    assert torch.allclose(full, parts) and torch.allclose(full_grad, part_grad)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
def test_empty_rows_contribute_nothing_and_do_not_divide_by_zero():
    loss = torch.ones(3, 4, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
        assert torch.isfinite(ops.aggregate(loss, mask, mode))
    assert ops.aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx(1.0)  # 2 sequences, not 3


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
def test_bad_inputs_get_clear_errors():
    loss = torch.ones(2, 3)
    with pytest.raises(ValueError, match="shape"):
        ops.aggregate(loss, torch.ones(2, 4), "token-mean")
    with pytest.raises(ValueError, match="all zero"):
        ops.aggregate(loss, torch.zeros(2, 3), "token-mean")
    with pytest.raises(ValueError, match="unknown aggregation"):
        ops.aggregate(loss, torch.ones(2, 3), "mean")
    with pytest.raises(ValueError, match="norm_constant"):
        ops.aggregate(loss, torch.ones(2, 3), "seq-mean-token-sum-norm")


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
def test_masked_whiten_has_zero_mean_unit_variance():
    g = torch.Generator().manual_seed(2)
    x, mask = torch.randn(5, 6, generator=g, dtype=torch.float64), random_mask(5, 6, g, min_len=2)
    w = ops.masked_whiten(x, mask, eps=0.0)
    assert ops.masked_mean(w, mask).abs() < 1e-12
    assert ops.masked_var(w, mask).item() == pytest.approx(1.0)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.covers("entropy-bonus")
def test_logprobs_and_entropy_match_reference_and_chunking():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 5, 11, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, 11, (3, 5), generator=g)
    ref = torch.log_softmax(logits / 0.7, -1).gather(-1, tokens[..., None]).squeeze(-1)
    for chunk in (1, 4, 128):
        assert torch.allclose(ops.logprobs_from_logits(logits, tokens, 0.7, chunk).double(), ref, atol=1e-6)
    p = torch.softmax(logits, -1)
    assert torch.allclose(ops.entropy_from_logits(logits, chunk=2).double(), -(p * p.log()).sum(-1), atol=1e-5)
    uniform = torch.zeros(2, 3, 50)
    assert torch.allclose(ops.entropy_from_logits(uniform), torch.full((2, 3), torch.log(torch.tensor(50.0))))
    assert ops.logprobs_from_logits(logits[:0], tokens[:0]).shape == (0, 5)  # no rows: nothing to chunk


def test_chunked_logprobs_backward_is_one_concatenation_and_the_unchunked_gradient():
    """Chunks are split views: their gradients meet in one SplitBackward, not one full-size add per chunk (the
    quadratic backward measured on the GPU), and the gradient is the unchunked log-softmax's."""
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 6, 13, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, 13, (4, 6), generator=g)
    weights = torch.randn(4, 6, generator=g, dtype=torch.float64)
    out = ops.logprobs_from_logits(logits, tokens, 0.9, chunk=5)
    seen, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo += [n for n, _ in node.next_functions]
    nodes = {type(n).__name__ for n in seen}
    assert "SplitWithSizesBackward0" in nodes or "SplitBackward0" in nodes
    assert "SliceBackward0" not in nodes
    (grad,) = torch.autograd.grad((out * weights).sum(), logits)
    ref = torch.log_softmax(logits / 0.9, -1).gather(-1, tokens[..., None]).squeeze(-1)
    (expected,) = torch.autograd.grad((ref * weights).sum(), logits)
    assert torch.allclose(grad, expected, atol=1e-12)


# Objectives whose token selection uses statistics of the whole (micro-)batch: the covariance is centred by
# the batch means and the top-k / random subset is drawn per call (clip_cov, kl_cov), BAPO searches its bounds on
# the batch it gets, HAPO normalizes entropy by the batch's quantile and spread, AEPO's clip picks the batch's top
# entropy quantile. They are invariant only when that is computed once per optimizer step; their references compute
# it per micro-batch, as here. CAPO predicts each token's update from the LM head (tests/objectives/test_capo.py).
BATCH_DEPENDENT = {"clip_cov", "kl_cov", "bapo", "hapo", "aepo-agentic-clip", "capo", "srpo-route"}
# ROVER and B-Coder read the LM head and need log-probs that come from it: their own test files check micro-batching.
READS_HEAD = {"rover", "b-coder"}
# The preference objective reads whole items (`whole_groups`): minibatches never split one, and it averages over
# items, not tokens (tests/objectives/test_preference.py).
POLICY_OBJECTIVES = [e for e in registry.entries("objective")
                     if e.key != "value-loss" and e.key not in BATCH_DEPENDENT | READS_HEAD and not e.whole_groups]


def inputs(seed=0, B=8, T=7):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(B, 1, generator=g, dtype=torch.float64).expand(B, T) * mask
    extras = {  # per-row fields objectives read besides (logp, old, A, mask)
        "mu_logp": old + 0.1 * torch.randn(B, T, generator=g, dtype=torch.float64),
        "target_adv": torch.randn(B, 1, generator=g, dtype=torch.float64).expand(B, T) * mask,
        "offpolicy_mask": (torch.arange(B) % 3 == 0).to(torch.float64)[:, None] * mask,
        "task_value": 0.25 * torch.rand(B, generator=g, dtype=torch.float64),
        "entropy": torch.rand(B, T, generator=g, dtype=torch.float64) * mask,
        "turn": torch.where(mask > 0, 0, -1).long(),  # one-turn rows (turn-level objectives)
    }
    return logp, old, adv, mask, extras


def call(entry, logp, old, adv, mask, extras, denom, rows=slice(None)):
    given = {name: extras[name][rows] for name in entry.reads if extras and name in extras}
    agg = entry.defaults.get("agg", "token-mean")
    return entry.fn(logp[rows], old[rows], adv[rows], mask[rows], agg=agg, denom=denom, **given)[0]


@pytest.mark.parametrize("entry", POLICY_OBJECTIVES, ids=[e.key for e in POLICY_OBJECTIVES])
@pytest.mark.parametrize("micro", [1, 2, 4])
def test_micro_batched_loss_and_gradient_equal_the_full_batch(entry, micro):
    logp, old, adv, mask, extras = inputs()
    denom = ops.Denominators.of(mask, norm_constant=8 * 7)
    full = call(entry, logp, old, adv, mask, extras, denom)
    (g_full,) = torch.autograd.grad(full, logp)
    size = 8 // micro
    parts = sum(call(entry, logp, old, adv, mask, extras, denom, slice(i, i + size)) for i in range(0, 8, size))
    (g_parts,) = torch.autograd.grad(parts, logp)
    assert torch.allclose(full, parts, atol=1e-12) and torch.allclose(g_full, g_parts, atol=1e-12), entry.key


@pytest.mark.covers("seq-mean-token-mean", "token-mean")
def test_local_denominators_break_invariance_when_lengths_differ():
    logp, old, adv, mask, _ = inputs(seed=3)
    entry = registry.get("objective", "ppo-clip")
    full = call(entry, logp, old, adv, mask, None, None)
    local = sum(call(entry, logp, old, adv, mask, None, None, slice(i, i + 2))
                for i in range(0, 8, 2)) / 4  # the usual mean over micro-batches
    assert not torch.allclose(full, local)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "m-grpo")
def test_loss_weights_multiply_the_per_token_loss_and_leave_the_counts():
    """Denominators(weights=w) aggregates per_token * w with the counts of the mask (verl's rollout_is weights), in
    ops.aggregate and in m-grpo's own per-action mean alike."""
    from dataclasses import replace

    from workbench.objectives.multiturn import action_mean

    logp, _, _, mask, _ = inputs(seed=4)
    per_token = logp.detach() * mask
    w = torch.rand(mask.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    denom = ops.Denominators.of(mask)
    for mode in ("token-mean", "seq-mean-token-mean"):
        assert torch.allclose(ops.aggregate(per_token, mask, mode, replace(denom, weights=w)),
                              ops.aggregate(per_token * w, mask, mode, denom))
    turn = (torch.arange(mask.shape[1]) // 3).expand_as(mask) * (mask > 0) - (mask == 0).long()
    assert torch.allclose(action_mean(per_token, mask, turn, replace(denom, weights=w)),
                          action_mean(per_token * w, mask, turn, denom))
    assert not torch.allclose(ops.aggregate(per_token, mask, "token-mean", replace(denom, weights=w)),
                              ops.aggregate(per_token, mask, "token-mean", denom))
