import pytest
import torch

from tests.helpers import batch_with_mask
from workbench import registry
from workbench.advantages.ipa import chunk_ids, chunk_mean, chunk_returns

pytestmark = pytest.mark.covers("ipa")
D = torch.float64


def ipa(batch, **kw):
    return registry.get("advantage", "ipa").fn(batch, **kw)


def grpo(batch, **kw):
    return registry.get("advantage", "grpo").fn(batch, **kw)


def two_rows():
    """Row 0: turn 0 (2 tokens) obs, turn 1 (1 token) obs, turn 2 (2 tokens); row 1: one turn of 3 tokens."""
    mask = torch.tensor([[1, 1, 0, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0]], dtype=D)
    turn = torch.tensor([[0, 0, 0, 1, 1, 2, 2], [0, 0, 0, -1, -1, -1, -1]])
    return mask, turn


def test_chunks_are_turns_or_runs_of_policy_tokens():
    mask = torch.tensor([[1, 0, 1, 0, 0, 1, 1]], dtype=D)  # a masked token inside turn 0 splits its run
    turn = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    assert chunk_ids(mask, turn, "turn").tolist() == [[0, -1, 0, -1, -1, 1, 1]]
    assert chunk_ids(mask, turn, "runs").tolist() == [[0, -1, 1, -1, -1, 2, 2]]
    assert chunk_ids(mask, None, "turn").tolist() == [[0, -1, 0, -1, -1, 0, 0]]  # no turn ids: one chunk


def test_chunk_mean_averages_within_each_chunk():
    mask, turn = two_rows()
    x = torch.tensor([[1.0, 3.0, 9.0, 5.0, 9.0, 0.0, 4.0], [1.0, 2.0, 6.0, 9.0, 9.0, 9.0, 9.0]], dtype=D)
    expected = torch.tensor([[2.0, 2.0, 0.0, 5.0, 0.0, 2.0, 2.0], [3.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0]], dtype=D)
    assert torch.equal(chunk_mean(x, mask, chunk_ids(mask, turn)), expected)


def test_trajectory_credit_is_grpo_on_every_chunk():
    mask, turn = two_rows()
    batch = batch_with_mask([1.0, 0.0], [0, 0], mask, turn=turn)
    assert torch.equal(ipa(batch), grpo(batch))


def test_return_credit_with_gamma_one_and_no_token_rewards_is_grpo():
    mask, turn = two_rows()
    batch = batch_with_mask([0.3, 0.9], [0, 0], mask, turn=turn)
    assert torch.allclose(ipa(batch, credit="return", gamma=1.0), grpo(batch))


def test_return_credit_discounts_across_chunks_by_hand():
    mask, turn = two_rows()
    token_rewards = torch.zeros_like(mask)
    token_rewards[0, 0] = -0.1  # inside chunk 0, not at its last token
    batch = batch_with_mask([1.0, 0.0], [0, 0], mask, turn=turn, token_rewards=token_rewards)
    a = ipa(batch, credit="return", gamma=0.5, scale="none")  # A_grpo = R - mean = +-0.5 at the last token
    # row 0 chunks: r = (-0.1, 0, 0.5): G2 = 0.5, G1 = 0.25, G0 = -0.1 + 0.125
    assert a[0].tolist() == pytest.approx([0.025, 0.025, 0, 0.25, 0, 0.5, 0.5])
    assert a[1].tolist() == pytest.approx([-0.5, -0.5, -0.5, 0, 0, 0, 0])
    # ROLL reads the reward at each chunk's last token only: the -0.1 is dropped
    roll = ipa(batch, credit="return", gamma=0.5, scale="none", reference_bug=True)
    assert roll[0].tolist() == pytest.approx([0.125, 0.125, 0, 0.25, 0, 0.5, 0.5])


def test_chunk_returns_skip_absent_turns_without_an_extra_discount():
    mask = torch.tensor([[1, 0, 1]], dtype=D)
    ids = torch.tensor([[0, -1, 2]])  # turn 1 has no policy token
    u = torch.tensor([[0.0, 0.0, 1.0]], dtype=D)
    assert chunk_returns(u, mask, ids, gamma=0.5).tolist() == [[0.5, 0.0, 1.0]]


def test_bad_inputs_are_refused():
    mask, turn = two_rows()
    batch = batch_with_mask([1.0, 0.0], [0, 0], mask, turn=turn)
    with pytest.raises(ValueError, match="chunks must be one of"):
        ipa(batch, chunks="tokens")
    with pytest.raises(ValueError, match="credit must be one of"):
        ipa(batch, credit="td")
    with pytest.raises(ValueError, match="gamma must be in"):
        ipa(batch, credit="return", gamma=1.5)
    bad = turn.clone()
    bad[0, 0] = -1
    with pytest.raises(ValueError, match="turn id -1"):
        ipa(batch_with_mask([1.0, 0.0], [0, 0], mask, turn=bad))


def test_declares_multi_turn_and_turn_ids():
    entry = registry.get("advantage", "ipa")
    assert entry.needs == ("multi_turn",) and entry.reads == ("turn",)


@pytest.mark.parametrize("credit", ["trajectory", "return"])
def test_allow_singletons_values_are_grpos(credit):
    """Row 1 alone in its group: "keep" gives it verl's A = R / (1 + eps) (on every chunk, or on its chunk's reward
    with credit="return", gamma 1 and no token rewards = the same per token), True 0, False refuses."""
    mask, turn = two_rows()
    batch = batch_with_mask([0.3, 0.9], [0, 1], mask, turn=turn)
    keep = ipa(batch, credit=credit, allow_singletons="keep")
    assert torch.allclose(keep, grpo(batch, allow_singletons="keep"))
    assert torch.allclose(keep[1], 0.9 / (1 + 1e-6) * mask[1])
    assert torch.equal(ipa(batch, credit=credit, allow_singletons=True), torch.zeros_like(mask))
    with pytest.raises(ValueError, match="group of one"):
        ipa(batch, credit=credit)
