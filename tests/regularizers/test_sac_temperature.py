"""SAC's temperature ported to tokens: the learned entropy bonus and the temperature loss J(alpha)."""
import pytest
import torch

from tests.helpers import D, batch_with_mask, random_mask, seeded
from tests.reference.formulas_entropy import cleanrl_sac_atari_alpha_loss
from workbench import ops, registry
from workbench.context import Forward
from workbench.regularizers.entropy import entropy_bonus
from workbench.regularizers.sac_temperature import sac_temperature, temperature_loss


def entropy_case(seed, B=5, T=6, level=1.0):
    g = seeded(seed)
    mask = random_mask(B, T, g)
    H = (level + 0.1 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    return H, mask


@pytest.mark.covers("sac-temperature")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_regularizer_is_the_entropy_bonus_with_coefficient_alpha(agg):
    e = registry.get("regularizer", "sac-temperature")
    assert e.defaults == {"agg": "token-mean", "denom": None, "alpha": 0.2} and e.reads == ("entropy",)
    H, mask = entropy_case(0)
    batch = batch_with_mask([0.0] * 5, list(range(5)), mask)
    loss, _ = sac_temperature(Forward(torch.zeros_like(H), H), batch, agg=agg, alpha=0.07)
    ref = entropy_bonus(H, mask, coef=0.07, agg=agg)
    assert loss.item() == ref.item() == pytest.approx(-0.07 * ops.aggregate(H, mask, agg).item())
    assert torch.equal(torch.autograd.grad(loss, H)[0], torch.autograd.grad(ref, H)[0])
    with pytest.raises(ValueError, match="alpha"):
        sac_temperature(Forward(torch.zeros_like(H), H), batch, alpha=-0.1)


@pytest.mark.covers("sac-temperature")
@pytest.mark.parametrize("level, sign", [(1.5, 1.0), (0.2, -1.0), (0.8, 0.0)])
def test_temperature_gradient_sign_follows_entropy_minus_target(level, sign):
    H, mask = entropy_case(1, level=level)
    target = float(ops.masked_mean(H.detach(), mask)) if sign == 0 else 0.8
    alpha = torch.tensor(0.3, dtype=D, requires_grad=True)
    J = temperature_loss(alpha.log(), H, mask, target_entropy=target)
    (dJ,) = torch.autograd.grad(J, alpha)
    gap = float(ops.masked_mean(H.detach(), mask)) - target
    assert dJ.item() == pytest.approx(gap, abs=1e-15)  # dJ/dalpha = agg(H - Hbar)
    if sign == 0:
        assert dJ.item() == pytest.approx(0.0, abs=1e-15)  # at H = Hbar alpha stays
    else:
        assert dJ.item() * sign > 0  # above the target alpha falls (descent), below it rises
    J = temperature_loss(alpha.log(), H, mask, target_entropy=target)
    assert torch.autograd.grad(J, H, allow_unused=True)[0] is None  # J moves alpha only, never the policy


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
