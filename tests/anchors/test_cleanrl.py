"""Agreement with cleanrl's SAC temperature loss (vwxyzjn/cleanrl `cleanrl/sac_atari.py`, `autotune`, commit
fe8d8a03), transcribed in tests/anchors/formulas_entropy.py: our token port of J(alpha)."""
import pytest
import torch

from tests.helpers import D, seeded
from tests.anchors.formulas_entropy import cleanrl_sac_atari_alpha_loss
from workbench import ops
from workbench.regularizers.sac_temperature import temperature_loss


@pytest.mark.covers("sac-temperature")
def test_exact_vocabulary_expectation_is_minus_the_entropy_and_matches_cleanrl():
    g = seeded(2)
    B, V = 7, 11
    logits = 2 * torch.randn(B, V, generator=g, dtype=D)
    log_pi = torch.log_softmax(logits, -1)
    probs = log_pi.exp()
    # E_a[log pi(a|s)] = -H, with H the trainer's entropy (logsumexp form, float32)
    assert torch.allclose((probs * log_pi).sum(-1), -ops.entropy_from_logits(logits).to(D), atol=1e-5)
    H = -(probs * log_pi).sum(-1)
    target = 0.89 * torch.log(torch.tensor(float(V), dtype=D))           # cleanrl's discrete target
    ours_leaf, theirs_leaf = (torch.tensor(-0.4, dtype=D, requires_grad=True) for _ in range(2))
    ours = temperature_loss(ours_leaf, H[:, None], torch.ones(B, 1, dtype=D), target_entropy=float(target))
    theirs = cleanrl_sac_atari_alpha_loss(theirs_leaf, probs, log_pi, target)
    assert ours.item() == pytest.approx(V * theirs.item(), rel=1e-12)   # cleanrl's .mean() also divides by |A|
    (g_ours,), (g_theirs,) = torch.autograd.grad(ours, ours_leaf), torch.autograd.grad(theirs, theirs_leaf)
    assert g_ours.item() == pytest.approx(V * g_theirs.item(), rel=1e-12)
