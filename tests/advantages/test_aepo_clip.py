"""AEPO's entropy-aware advantage: A_acc (1 + alpha * clipped entropy z-score), a chain entry after grpo."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.aepo_clip import aepo_entropy_advantage, entropy_zscore
from workbench.advantages.group import grpo
from workbench.recipes import RECIPES
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("aepo-agentic-clip")


def chained(alpha, seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = make_batch(torch.rand(8, generator=g, dtype=D).tolist(), [0] * 4 + [1] * 4, [2, 5, 3, 4, 1, 6, 2, 3])
    batch.entropy = torch.rand(batch.mask.shape, generator=g, dtype=D) * 4 * batch.mask
    batch.advantages = grpo(batch)
    return batch, aepo_entropy_advantage(batch, alpha=alpha)


def test_registered_after_grpo_in_the_chain():
    entry = registry.get("advantage", "aepo-agentic-clip")
    assert entry.defaults == {"alpha": 0.1} and set(entry.reads) == {"entropy", "advantages"}
    assert entry.confidence == "abstract-only" and "Our reading" in entry.fn.__doc__
    Pipeline(RECIPES["aepo-agentic-clip"])  # grpo first: the read of `advantages` is satisfied


def test_alpha_zero_is_the_grpo_advantage():
    """Catalog test (2)."""
    batch, out = chained(0.0)
    assert torch.equal(out, grpo(batch))


@pytest.mark.parametrize("seed", [0, 1])
def test_values_are_the_advantage_scaled_by_the_clipped_entropy_zscore(seed):
    batch, out = chained(0.1, seed)
    v = batch.mask > 0
    H = batch.entropy[v]
    z = ((H - H.mean()) / H.std(unbiased=False)).clamp(-1, 1)
    assert torch.allclose(out[v], batch.advantages[v] * (1 + 0.1 * z), atol=1e-14)
    assert (out[~v] == 0).all()
    # the scale stays in [0.9, 1.1]: no advantage changes sign, and uncertain tokens weigh more
    ratio = out[v] / batch.advantages[v]
    assert ratio.min() >= 0.9 - 1e-12 and ratio.max() <= 1.1 + 1e-12 and ratio.max() > 1.0
    assert (z.abs() == 1).any()  # the clip is exercised


def test_equal_entropies_leave_the_advantage_unchanged_and_bad_input_is_refused():
    batch, _ = chained(0.1)
    batch.entropy = torch.full_like(batch.mask, 2.0)
    assert torch.equal(entropy_zscore(batch.entropy, batch.mask), torch.zeros_like(batch.mask))
    assert torch.equal(aepo_entropy_advantage(batch), batch.advantages)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\)"):
        aepo_entropy_advantage(batch, alpha=1.0)
    batch.advantages = None
    with pytest.raises(ValueError, match=r"needs batch fields \['advantages'\]"):
        aepo_entropy_advantage(batch)
