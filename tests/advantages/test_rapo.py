"""RAPO's advantage scaling: A * N / max(1, #rows with A != 0), over the batch (default) or each group; the mean
|A| over the batch then equals that over the signal-carrying rows (the gradient mass of a dense batch)."""
import pytest
import torch

from tests.helpers import make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.rapo import check_rapo_scaling, rapo_scaling

pytestmark = pytest.mark.covers("rapo")


def chained(rewards, groups, scope="batch", lengths=None):
    batch = make_batch(rewards, groups, lengths)
    batch.advantages = grpo(batch)
    return batch.advantages, rapo_scaling(batch, scope=scope)


def test_batch_scope_by_hand():
    """One mixed group of 4 (every A != 0), one all-fail group (A = 0): N / #non-zero = 8 / 4 = 2."""
    before, after = chained([1, 0, 0, 0, 0, 0, 0, 0], [0] * 4 + [1] * 4)
    torch.testing.assert_close(after, 2 * before)
    assert torch.equal(after[4:], torch.zeros_like(after[4:]))


def test_the_batch_mean_magnitude_equals_that_of_the_rows_with_signal():
    rewards = [1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0]
    before, after = chained(rewards, [0] * 4 + [1] * 4 + [2] * 4, lengths=[1] * 12)
    signal = before[:, 0] != 0
    torch.testing.assert_close(after[:, 0].abs().mean(), before[signal, 0].abs().mean())


def test_group_scope_is_the_identity_under_0_1_rewards_and_acts_at_the_mean():
    before, after = chained([1, 0, 0, 1, 0, 0, 0, 0], [0] * 4 + [1] * 4, scope="group")
    torch.testing.assert_close(after, before)  # mixed groups: all rows non-zero; failed: zeros stay zeros
    before, after = chained([1.0, 0.5, 0.0], [0, 0, 0], scope="group")  # the middle row sits at the mean: A = 0
    assert before[1].abs().sum() == 0
    torch.testing.assert_close(after, before * 3 / 2)


def test_reductions_no_signal_and_all_signal():
    before, after = chained([0] * 4, [0] * 4)
    assert torch.equal(after, before) and torch.equal(after, torch.zeros_like(after))
    before, after = chained([1, 0, 1, 0], [0, 0, 1, 1])
    torch.testing.assert_close(after, before)


def test_registration_and_bad_settings():
    entry = registry.get("advantage", "rapo")
    assert entry.defaults == {"scope": "batch"} and "advantages" in entry.reads
    with pytest.raises(ValueError, match="scope must be one of"):
        check_rapo_scaling(scope="prompt")
    with pytest.raises(ValueError, match=r"advantage=\['grpo', 'rapo'\]"):
        rapo_scaling(make_batch([1, 0], [0, 0]))
