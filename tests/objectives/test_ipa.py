import pytest
import torch

from tests.helpers import D, grad, random_batch
from workbench import ops, registry

pytestmark = pytest.mark.covers("ipa")


def ipa(*args, **kw):
    return registry.get("objective", "ipa").fn(*args, **kw)


def objective(key, *args, **kw):
    return registry.get("objective", key).fn(*args, **kw)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.01, 0.02)])
def test_one_chunk_per_trajectory_is_gspo(seed, eps):
    logp, old, A, mask = random_batch(seed)
    ours, _ = ipa(logp, old, A, mask, turn=torch.zeros(mask.shape, dtype=torch.long), eps_low=eps[0], eps_high=eps[1])
    ref, _ = objective("gspo", logp, old, A, mask, eps_low=eps[0], eps_high=eps[1])
    assert torch.allclose(ours, ref)
    assert torch.allclose(grad(ours, logp), grad(ref, logp))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dual_clip_c", [None, 3.0])
def test_one_token_per_chunk_is_token_level_ppo_clip(seed, dual_clip_c):
    logp, old, A, mask = random_batch(seed, scale=0.5)
    A = A * torch.linspace(-1, 2, mask.shape[1], dtype=D)  # per-token advantages, both signs
    turn = torch.arange(mask.shape[1]).expand(mask.shape)
    ours, m = ipa(logp, old, A, mask, turn=turn, dual_clip_c=dual_clip_c)
    ref, m_ref = objective("ppo-clip", logp, old, A, mask, agg="seq-mean-token-mean", dual_clip_c=dual_clip_c)
    assert torch.allclose(ours, ref)
    assert torch.allclose(grad(ours, logp), grad(ref, logp))
    assert m["clip/region"] == pytest.approx(m_ref["clip/region"])


def test_clipping_a_chunk_zeroes_exactly_that_chunks_gradient():
    mask = torch.tensor([[1, 1, 0, 1, 1]], dtype=D)  # turn 0: tokens 0-1, an observation token, turn 1: tokens 3-4
    turn = torch.tensor([[0, 0, 0, 1, 1]])
    old = torch.full(mask.shape, -1.0, dtype=D)
    logp = (old + torch.tensor([[0.4, 0.6, 0.0, 0.02, 0.08]], dtype=D)).requires_grad_(True)  # s_0 = e^0.5 > 1.2
    A = torch.ones_like(mask)
    loss, metrics = ipa(logp, old, A, mask, turn=turn)
    g = grad(loss, logp)[0]
    assert g[0] == 0 and g[1] == 0 and g[2] == 0           # the clipped chunk and the observation token
    s_1 = torch.exp(torch.tensor(0.05, dtype=D)).item()  # the other chunk: -(1/2)(1/2) s_1 A on each token
    assert g[3].item() == pytest.approx(-0.25 * s_1) and g[4].item() == pytest.approx(-0.25 * s_1)
    assert metrics["clip/high"] == pytest.approx(0.5)       # two of the four tokens carry the clipped chunk ratio


def test_chunk_mean_then_trajectory_mean_by_hand():
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0]], dtype=D)
    turn = torch.tensor([[0, 0, 0, 1], [0, -1, -1, -1]])
    A = torch.tensor([[1.0, 1.0, 0.0, 4.0], [2.0, 0.0, 0.0, 0.0]], dtype=D)
    logp = torch.full(mask.shape, -1.0, dtype=D)
    loss, m = ipa(logp, logp, A, mask, turn=turn)  # ratio 1: l_t = -A_t
    assert loss.item() == pytest.approx(-((1.0 + 4.0) / 2 + 2.0) / 2)  # chunks (1, 4) -> 2.5; row 1: 2
    token_mean, _ = ipa(logp, logp, A, mask, turn=turn, chunk_agg=False, agg="token-mean")
    assert token_mean.item() == pytest.approx(-(1 + 1 + 4 + 2) / 4)
    assert m["ipa/chunks_per_row"] == pytest.approx(1.5)


def test_runs_split_a_turn_at_a_masked_token():
    mask = torch.tensor([[1, 0, 1]], dtype=D)
    turn = torch.zeros(1, 3, dtype=torch.long)
    old = torch.zeros_like(mask)
    logp = torch.tensor([[0.3, 0.0, -0.3]], dtype=D, requires_grad=True)
    A = torch.ones_like(mask)
    as_turn, _ = ipa(logp, old, A, mask, turn=turn, chunks="turn")  # one chunk: s = 1
    as_runs, m = ipa(logp, old, A, mask, turn=turn, chunks="runs")  # two chunks: e^0.3 (clipped) and e^-0.3
    assert as_turn.item() == pytest.approx(-1.0)
    assert as_runs.item() == pytest.approx(-(1.2 + torch.exp(torch.tensor(-0.3)).item()) / 2)
    assert m["ipa/chunks_per_row"] == 2.0


def test_global_denominators_make_it_micro_batch_invariant():
    logp, old, A, mask = random_batch(3)
    turn = (torch.arange(mask.shape[1]) // 3).expand(mask.shape)
    denom = ops.Denominators.of(mask)
    full, _ = ipa(logp, old, A, mask, turn=turn, denom=denom)
    halves = sum(ipa(logp[s], old[s], A[s], mask[s], turn=turn[s], denom=denom)[0] for s in (slice(0, 3), slice(3, 6)))
    assert torch.allclose(full, halves)


def test_chunk_aggregation_refuses_another_agg():
    logp, old, A, mask = random_batch(0)
    with pytest.raises(ValueError, match="chunk_agg=False"):
        ipa(logp, old, A, mask, agg="token-mean")
