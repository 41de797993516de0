"""SAC's temperature ported to tokens: the learned entropy bonus and the temperature loss J(alpha)."""
import pytest
import torch

from tests.helpers import D, batch_with_mask, random_mask, seeded
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


