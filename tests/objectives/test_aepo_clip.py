"""AEPO's entropy-balanced clipping: PPO-clip's values, with gradients kept on clipped high-entropy tokens."""
import pytest
import torch

from tests.helpers import D, grad, random_mask
from workbench import registry
from workbench.objectives.aepo_clip import aepo_agentic_clip, high_entropy_tokens
from workbench.objectives.ppo import ppo_clip

pytestmark = pytest.mark.covers("aepo-agentic-clip")


def clip_case(seed, B=8, T=10, scale=0.5):
    """Random batch with many ratios past the clip (scale 0.5 in log space) and random entropies."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=4)
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + torch.randn(B, T, generator=g, dtype=D) * scale).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    H = torch.rand(B, T, generator=g, dtype=D) * 3
    return logp, old, A, mask, H


def test_registered_as_an_abstract_only_objective_reading_entropy():
    entry = registry.get("objective", "aepo-agentic-clip")
    assert {"eps_low": 0.2, "eps_high": 0.2, "top_entropy_quantile": 0.2,
            "preserve_low": False}.items() <= entry.defaults.items()
    assert entry.confidence == "abstract-only" and entry.reads == ("entropy",) and "Our reading" in entry.fn.__doc__


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_equals_ppo_clip_and_clipped_high_entropy_tokens_keep_a_gradient(seed):
    """Catalog test (1): same loss value; on high-entropy A > 0 tokens past 1 + eps_high the gradient is
    -(1 + eps_high) A / N (token-mean), where PPO-clip's is 0."""
    logp, old, A, mask, H = clip_case(seed)
    ours, m = aepo_agentic_clip(logp, old, A, mask, entropy=H)
    ref, _ = ppo_clip(logp, old, A, mask)
    assert ours.item() == ref.item()
    high = high_entropy_tokens(H, mask, 0.2)
    r = torch.exp(logp.detach() - old)
    preserved = high & (A > 0) & (r > 1.2)
    assert preserved.sum() >= 2
    g, g_ref = grad(ours, logp), grad(ref, logp)
    assert (g_ref[preserved] == 0).all()
    assert torch.allclose(g[preserved], -1.2 * A[preserved] / mask.sum(), atol=1e-15)
    assert torch.equal(g[~preserved], g_ref[~preserved])
    assert m["aepo_clip/preserved_frac"] == pytest.approx(preserved.sum().item() / mask.sum().item())


@pytest.mark.parametrize("seed", [0, 1])
def test_low_entropy_tokens_are_exactly_ppo_clip(seed):
    """Catalog test (3): outside the high-entropy set nothing changes, clipped tokens included (gradient 0)."""
    logp, old, A, mask, H = clip_case(seed)
    high = high_entropy_tokens(H, mask, 0.2)
    low = (mask > 0) & ~high
    g = grad(aepo_agentic_clip(logp, old, A, mask, entropy=H, preserve_low=True)[0], logp)
    g_ref = grad(ppo_clip(logp, old, A, mask)[0], logp)
    assert torch.equal(g[low], g_ref[low])
    r = torch.exp(logp.detach() - old)
    assert (low & (((r > 1.2) & (A > 0)) | ((r < 0.8) & (A < 0)))).any()  # clipped low-entropy tokens exist
    # the high-entropy set is rho = 20 % of the valid tokens (up to rounding)
    assert high.sum().item() == pytest.approx(0.2 * mask.sum().item(), abs=1.0)


def test_lower_clip_is_preserved_only_when_asked():
    logp, old, A, mask, H = clip_case(4)
    high = high_entropy_tokens(H, mask, 0.2)
    r = torch.exp(logp.detach() - old)
    lower = high & (A < 0) & (r < 0.8)
    assert lower.sum() >= 1
    g_default = grad(aepo_agentic_clip(logp, old, A, mask, entropy=H)[0], logp)
    g_low = grad(aepo_agentic_clip(logp, old, A, mask, entropy=H, preserve_low=True)[0], logp)
    assert (g_default[lower] == 0).all()
    assert torch.allclose(g_low[lower], -0.8 * A[lower] / mask.sum(), atol=1e-15)
    loss_low, _ = aepo_agentic_clip(logp, old, A, mask, entropy=H, preserve_low=True)
    assert loss_low.item() == ppo_clip(logp, old, A, mask)[0].item()


def test_the_high_entropy_set_is_the_top_quantile_of_valid_tokens():
    H = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 9.0], [5.0, 0.6, 0.7, 0.8, 0.9, 1.0]], dtype=D)
    mask = torch.ones_like(H)
    mask[0, 5] = 0  # the largest entropy is padding: never selected
    high = high_entropy_tokens(H, mask, 0.2)
    assert high.sum() == 3 and high[1, 0] and high[1, 5] and high[1, 4] and not high[0, 5]
    assert high_entropy_tokens(H, mask, 1.0).sum() == mask.sum()


def test_bad_input_is_refused():
    logp, old, A, mask, H = clip_case(0)
    with pytest.raises(ValueError, match=r"top_entropy_quantile must be in \(0, 1\]"):
        aepo_agentic_clip(logp, old, A, mask, entropy=H, top_entropy_quantile=0.0)
    with pytest.raises(ValueError, match="need 0 <= eps_low < 1"):
        aepo_agentic_clip(logp, old, A, mask, entropy=H, eps_low=1.0)
    with pytest.raises(ValueError, match="entropy has shape"):
        aepo_agentic_clip(logp, old, A, mask, entropy=H[:, :2])
    with pytest.raises(ValueError, match="advantages has shape"):
        aepo_agentic_clip(logp, old, A[:, :2], mask, entropy=H)
