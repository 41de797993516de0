"""SAFE's double soft-min critic: the soft-min, its head, the Huber value loss, and the trainer building it."""
import pytest
import torch

from tests.helpers import D, TINY, batch_with_mask, random_mask
from workbench import registry
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.values import ValueHead
from workbench.values.soft_min import SoftMinValueHead, huber_value_loss, safe_value, soft_min
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


def pairs(seed, n=200, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(n, generator=g, dtype=D) for _ in range(2))


@pytest.mark.covers("safe")
@pytest.mark.parametrize("alpha", [1e-3, 0.05, 0.3, 1.0, 10.0, 1e4])
def test_soft_min_lies_between_min_and_mean(alpha):
    v1, v2 = pairs(0)
    V = soft_min(v1, v2, alpha)
    assert torch.all(V <= (v1 + v2) / 2 + 1e-12) and torch.all(V >= torch.minimum(v1, v2) - 1e-12)
    assert torch.equal(V, soft_min(v2, v1, alpha))  # symmetric


@pytest.mark.covers("safe")
def test_soft_min_tends_to_min_as_alpha_to_0_and_to_mean_as_alpha_to_infinity():
    v1, v2 = pairs(1)
    lo, mean = torch.minimum(v1, v2), (v1 + v2) / 2
    gaps_min = [float((soft_min(v1, v2, a) - lo).abs().max()) for a in (1.0, 0.1, 0.01, 1e-3)]
    gaps_mean = [float((soft_min(v1, v2, a) - mean).abs().max()) for a in (1.0, 10.0, 100.0, 1e4, 1e6)]
    assert all(a > b for a, b in zip(gaps_min, gaps_min[1:])) and gaps_min[-1] < 1e-3 * 0.7
    assert all(a > b for a, b in zip(gaps_mean, gaps_mean[1:])) and gaps_mean[-1] < 1e-4
    # equal heads: the soft-min is that value at any alpha
    assert torch.allclose(soft_min(v1, v1, 0.3), v1, atol=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        soft_min(v1, v2, 0.0)


@pytest.mark.covers("safe")
def test_head_starts_at_zero_and_trains_both_heads():
    torch.manual_seed(0)
    head = SoftMinValueHead(16, alpha=0.3).double()
    hidden = torch.randn(3, 5, 16, dtype=D)
    assert head(hidden).shape == (3, 5) and torch.all(head(hidden) == 0)
    target = torch.randn(3, 5, dtype=D)
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    first = None
    for _ in range(200):
        opt.zero_grad()
        loss = ((head(hidden) - target) ** 2).mean()
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2 * first
    v1, v2 = head.heads(hidden)
    assert v1.abs().sum() > 0 and v2.abs().sum() > 0 and not torch.allclose(v1, v2)
    assert torch.allclose(head(hidden), soft_min(v1, v2, 0.3))
    with pytest.raises(ValueError, match="alpha"):
        SoftMinValueHead(16, alpha=-1.0)


@pytest.mark.covers("safe")
def test_huber_value_loss_adds_the_clipped_twin():
    v = torch.tensor([[0.1, 2.0, -1.0]], dtype=D, requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0]], dtype=D)
    R = torch.tensor([[0.0, 0.0, 0.0]], dtype=D)
    mask = torch.ones(1, 3, dtype=D)
    loss = huber_value_loss(v, old, R, mask)
    huber = lambda x: 0.5 * x ** 2 if abs(x) < 0.5 else 0.5 * (abs(x) - 0.25)  # noqa: E731  (delta 0.5)
    expected = sum(0.5 * (huber(x) + huber(max(-0.2, min(0.2, x)))) for x in (0.1, 2.0, -1.0)) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    (g,) = torch.autograd.grad(loss, v)
    # the clipped term has no gradient outside the clip; the Huber slope is capped at delta = 0.5
    assert torch.allclose(g, torch.tensor([[0.5 * (0.1 + 0.1), 0.5 * 0.5, 0.5 * -0.5]], dtype=D) / 3)
    with pytest.raises(ValueError, match="delta"):
        huber_value_loss(v, old, R, mask, delta=0.0)


@pytest.mark.covers("safe")
def test_value_entry_weights_the_loss_and_skips_empty_targets():
    e = registry.get("value", "safe")
    assert e.defaults == {"agg": "token-mean", "denom": None, "coef": 0.5, "alpha": 0.3, "delta": 0.5, "clip_eps": 0.2}
    g = torch.Generator().manual_seed(3)
    mask = random_mask(4, 5, g)
    values = torch.randn(4, 5, generator=g, dtype=D, requires_grad=True)
    batch = batch_with_mask([0.0] * 4, [0, 0, 1, 1], mask, old_values=values.detach() + 0.1, value_mask=mask,
                            returns=torch.randn(4, 5, generator=g, dtype=D) * mask)
    loss, m = safe_value(values, batch)
    plain = huber_value_loss(values, batch.old_values, batch.returns, mask)
    assert loss.item() == pytest.approx(0.5 * plain.item()) and m["value/loss"] == pytest.approx(plain.item())
    batch.value_mask = torch.zeros_like(mask)
    zero, m = safe_value(values, batch)
    assert zero.item() == 0 and m == {}


@pytest.mark.covers("safe")
def test_trainer_builds_the_soft_min_head_for_the_safe_recipe_only(tmp_path):
    safe = Trainer(make_config("smoke", recipe="safe", **{**TINY, "steps": 1}), tmp_path / "safe", progress=False)
    safe.setup()
    assert isinstance(safe.value_head, SoftMinValueHead) and safe.value_head.alpha == 0.3
    assert any(p is safe.value_head.v2[0].weight for p in safe.params)  # both heads are optimized
    ppo = Trainer(make_config("smoke", recipe="ppo", **{**TINY, "steps": 1}), tmp_path / "ppo", progress=False)
    ppo.setup()
    assert type(ppo.value_head) is ValueHead


@pytest.mark.parametrize("overrides, message", [
    ({"alpha": 0}, r"value 'safe': alpha must be > 0, got 0"),
    ({"delta": 0}, r"value 'safe': delta and clip_eps must be > 0, got delta=0, clip_eps=0.2"),
    ({"clip_eps": -1}, r"got delta=0.5, clip_eps=-1"),
])
def test_settings_it_cannot_take_are_refused_when_the_recipe_is_built(overrides, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("safe"), {"value": overrides}))
