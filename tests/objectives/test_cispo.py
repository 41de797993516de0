"""CISPO: clipped importance-sampling weights that keep every token's gradient."""
import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import ops, registry
from workbench.objectives.cispo import cispo
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


def cispo_token_grad(r, sign, **kw):
    logp, old, A, mask = tokens(r, sign)
    loss, m = cispo(logp, old, A, mask, agg="token-mean", **kw)
    return grad(loss * len(r), logp)[:, 0], m


@pytest.mark.covers("cispo")
@pytest.mark.parametrize("kw", [{}, {"cap_abs": None, "eps_low": 0.2, "eps_high": 0.28}])
def test_cispo_on_policy_gradient_is_minus_advantage(kw):
    logp, old, A, mask = random_batch(8)
    loss, m = cispo(logp, logp.detach(), A, mask, **kw)
    reinforce = ops.aggregate(-A * logp, mask, "token-mean")
    assert torch.allclose(grad(loss, logp), grad(reinforce, logp), atol=1e-15)
    assert m["clip/cispo"] == 0 and m["cispo/weight_mean"] == pytest.approx(1.0)


@pytest.mark.covers("cispo")
def test_cispo_out_of_bound_tokens_keep_the_capped_gradient():
    r = torch.tensor([0.1, 0.5, 0.9, 1.0, 1.5, 4.9, 5.0, 7.0, 50.0], dtype=D)
    for sign in (1.0, -1.0):
        g, m = cispo_token_grad(r, sign)  # TRL default cap_abs = 5
        assert torch.allclose(g, -sign * r.clamp(max=5.0), rtol=1e-14)
        assert torch.all(g != 0)
        assert m["clip/cispo"] == pytest.approx(2 / 9 if sign > 0 else 0.0)
        assert m["clip/out_of_band"] == pytest.approx(2 / 9)
        g, m = cispo_token_grad(r, sign, cap_abs=None, eps_low=0.2, eps_high=0.28)
        assert torch.allclose(g, -sign * r.clamp(0.8, 1.28), rtol=1e-14)
        assert torch.all(g != 0)
        assert m["clip/out_of_band"] == pytest.approx(7 / 9)
        assert m["clip/cispo"] == pytest.approx(5 / 9 if sign > 0 else 0.0)
        assert m["clip/low"] == pytest.approx(0.0 if sign > 0 else 2 / 9)


@pytest.mark.covers("cispo")
def test_cispo_conventions_coincide_without_lower_bound():
    logp, old, A, mask = random_batch(9, scale=0.6)
    a, ma = cispo(logp, old, A, mask, cap_abs=1.28)
    b, mb = cispo(logp, old, A, mask, cap_abs=None, eps_low=1.0, eps_high=0.28)
    assert a.item() == pytest.approx(b.item(), rel=1e-14)
    assert torch.allclose(grad(a, logp), grad(b, logp), atol=1e-15)
    assert ma["clip/cispo"] == pytest.approx(mb["clip/cispo"]) and ma["clip/cispo"] > 0


@pytest.mark.covers("cispo")
def test_cispo_convention_errors_name_both_readings():
    logp, old, A, mask = random_batch(10)
    bad = [dict(eps_low=0.2, eps_high=0.28),               # cap_abs left at its default
           dict(cap_abs=None),                              # nothing
           dict(cap_abs=None, eps_high=0.28),               # half of verl's
           dict(cap_abs=0.28)]                              # relative value given as absolute cap
    for kw in bad:
        with pytest.raises(ValueError, match="cap_abs") as e:
            cispo(logp, old, A, mask, **kw)
        assert "TRL" in str(e.value) and "verl" in str(e.value)
    assert registry.get("objective", "cispo").defaults["cap_abs"] == 5.0


@pytest.mark.parametrize("overrides, message", [
    ({"eps_low": 0.2, "eps_high": 0.3}, r"objective 'cispo': CISPO has two incompatible weight conventions.*got "
                                        r"cap_abs=5.0 together with eps_low=0.2"),
    ({"cap_abs": None, "eps_high": 0.3}, r"got cap_abs=None, eps_low=None, eps_high=0.3"),
    ({"cap_abs": 0.5}, r"cap_abs=0.5 < 1 would down-weight even on-policy tokens"),
    ({"level": "seq"}, r"level='seq' is not one of \['token', 'sequence'\]"),
])
def test_a_weight_convention_it_cannot_take_is_refused_when_the_recipe_is_built(overrides, message):
    """The conventions were checked on the first minibatch's ratios: a run got as far as its first update."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("cispo"), {"objective": overrides}))
    Pipeline(with_overrides(get_recipe("cispo"), {"objective": {"cap_abs": None, "eps_low": 0.2, "eps_high": 0.3}}))
