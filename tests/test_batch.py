"""RolloutBatch: concatenation pads and joins every field; prompts are left-padded; groups are replaced in place."""
import pytest
import torch

from tests.helpers import group_batch
from workbench.batch import concat, left_pad, replace_groups


@pytest.mark.covers("dynamic-sampling")
def test_concat_pads_and_joins_every_field():
    a = group_batch([1.0, 0.0], [0, 0], [2, 1], truncated=torch.tensor([False, True]),
                    prompt_ids=torch.tensor([[0, 5], [4, 5]]), prompt_mask=torch.tensor([[0, 1], [1, 1]]))
    b = group_batch([0.5], [3], [4], truncated=torch.tensor([False]),
                    prompt_ids=torch.tensor([[1, 2, 3]]), prompt_mask=torch.tensor([[1, 1, 1]]))
    a.response_ids = torch.where(a.mask > 0, 7, 9)
    out = concat([a, b], pad_id=9)
    assert out.mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert out.response_ids[:2].tolist() == [[7, 7, 9, 9], [7, 9, 9, 9]]
    assert out.prompt_ids.tolist() == [[9, 0, 5], [9, 4, 5], [1, 2, 3]]  # left-padded
    assert out.prompt_mask.tolist() == [[0, 0, 1], [0, 1, 1], [1, 1, 1]]
    assert out.group.tolist() == [0, 0, 3] and out.truncated.tolist() == [False, True, False]
    assert out.completions == ["c0", "c1", "c0"] and out.entropy is None
    b.truncated = None
    with pytest.raises(ValueError, match="truncated"):
        concat([a, b])


def test_left_pad_right_aligns_every_row_and_masks_the_padding():
    ids, mask = left_pad([[5, 6, 7], [8], []], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]] and mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert ids.dtype == mask.dtype == torch.long


@pytest.mark.covers("ghpo")
def test_replaced_groups_keep_their_place_and_other_rows_stay():
    batch = group_batch([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], [5, 5, 2, 2, 9, 9], [1, 2, 1, 2, 1, 2])
    new = group_batch([0.5, 0.25], [2, 2], [3, 4])
    new.completions = ["n0", "n1"]
    out = replace_groups(batch, new, pad_id=0)
    assert out.group.tolist() == [5, 5, 2, 2, 9, 9] and out.completions == ["c0", "c1", "n0", "n1", "c4", "c5"]
    assert out.rewards.tolist() == [1.0, 0.0, 0.5, 0.25, 1.0, 1.0] and out.mask.shape == (6, 4)
    everything = group_batch([0.0] * 6, [9, 9, 5, 5, 2, 2], [1] * 6)  # every group replaced, in another order
    assert replace_groups(batch, everything).group.tolist() == [5, 5, 2, 2, 9, 9]
