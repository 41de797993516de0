"""RL-PLUS's loss: unclipped -A r on the policy's own tokens; on external tokens the MIS ratio
2 pi / (pi_old + (pi_old + 1)/2) times A (1 - sg pi)^gamma. Agreement with the reference's
`compute_token_on_off_policy_loss` is in tests/anchors/test_rl_plus.py; the recipe trains and resumes here."""
import math

import pytest
import torch

from tests.helpers import TINY, D, grad, metric_rows, random_batch, resumes_exactly
from workbench import ops, registry
from workbench.advantages.rl_plus import RL_PLUS_TITLE
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.rl_plus import exploration_weight, mis_ratio, rl_plus
from workbench.recipes import get_recipe
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("rl-plus")


def mixed_batch(seed, scale=0.6):
    """random_batch (log-probs < 0, ratios far from 1) with rows 1 and 4 external on their policy tokens."""
    logp, old, A, mask = random_batch(seed, scale=scale)
    logp = logp.detach().clamp(max=-1e-3).requires_grad_(True)
    off = torch.zeros_like(mask)
    off[[1, 4]] = mask[[1, 4]]
    return logp, old, A, mask, off


def one_token(p, p_old, advantage, external, leaf_logits=False):
    """One token with pi_theta = p (a softmax over 5 logits when `leaf_logits`), pi_old = p_old."""
    if leaf_logits:
        logits = torch.zeros(5, dtype=D)
        logits[2] = math.log(p / (1 - p) * 4)  # softmax(logits)[2] = p
        logits.requires_grad_(True)
        logp, leaf = torch.log_softmax(logits, -1)[2].reshape(1, 1), logits
    else:
        logp = torch.tensor([[math.log(p)]], dtype=D, requires_grad=True)
        leaf = logp
    one = torch.ones(1, 1, dtype=D)
    old = torch.tensor([[math.log(p_old)]], dtype=D)
    return logp, leaf, old, advantage * one, one, one * float(external)


def test_registered_with_the_references_defaults():
    entry = registry.get("objective", "rl-plus")
    assert entry.title == RL_PLUS_TITLE == registry.catalog()["rl-plus"]["title"]
    assert {"gamma": 0.5, "off_ratio": "mis", "logr_clamp": None}.items() <= entry.defaults.items()
    assert entry.reads == ("offpolicy_mask",) and entry.equation and entry.fn.__doc__


def test_the_mis_ratio_at_pi_equal_pi_old_is_4p_over_3p_plus_1_and_never_above_4():
    """Catalog test (1): 4p/(3p + 1) in [0, 1], 1 at p = 1; over all (pi_theta, pi_old) in [0, 1]^2 at most 4, reached
    at pi_theta = 1, pi_old = 0 (where the naive pi/pi_old is infinite)."""
    p = torch.linspace(0, 1, 1001, dtype=D)
    logp = torch.log(p)
    diagonal = mis_ratio(logp, logp)
    assert torch.allclose(diagonal, 4 * p / (3 * p + 1), atol=1e-15, rtol=0)
    assert diagonal.min().item() == 0.0 and diagonal.max().item() == 1.0 and diagonal[-1].item() == 1.0
    assert torch.all(diagonal[1:-1] < 1)
    pi, pi_old = torch.meshgrid(p, p, indexing="ij")
    surface = mis_ratio(torch.log(pi), torch.log(pi_old))
    assert torch.isfinite(surface).all() and surface.max().item() == 4.0 and surface[-1, 0].item() == 4.0
    assert torch.allclose(surface, 4 * pi / (3 * pi_old + 1), atol=1e-15, rtol=0)
    # bounded where the naive ratio explodes: pi_old -> 0
    assert mis_ratio(torch.tensor(math.log(0.5), dtype=D), torch.tensor(-50.0, dtype=D)).item() == pytest.approx(2.0)


def test_the_exploration_weight_is_1_at_pi_0_and_0_at_pi_1():
    """Catalog test (2), and decreasing in between; gamma = 0 turns it off."""
    p = torch.linspace(0, 1, 101, dtype=D)
    c = exploration_weight(torch.log(p), 0.5)
    assert c[0].item() == 1.0 and c[-1].item() == 0.0
    assert torch.all(c[1:] < c[:-1]) and torch.allclose(c, (1 - p).sqrt(), atol=1e-15, rtol=0)
    assert torch.equal(exploration_weight(torch.log(p), 0.0), torch.ones_like(p))
    # a log-prob rounded above 0 gives 0, not NaN (the reference's (1 - p)^0.5 would be NaN there)
    assert exploration_weight(torch.tensor([1e-12], dtype=D), 0.5).item() == 0.0


def test_known_values_on_a_hand_built_batch():
    """Row 0, on-policy: A = 2, pi = 0.5, pi_old = 0.25 (r = 2): l = -4. Row 1, external: A = 1, pi = 0.25,
    pi_old = 0.5: off_ratio = 2 * 0.25 / (0.5 + 0.75) = 0.4, weight sqrt(0.75): l = -0.4 sqrt(0.75). Token mean."""
    logp = torch.log(torch.tensor([[0.5], [0.25]], dtype=D)).requires_grad_(True)
    old = torch.log(torch.tensor([[0.25], [0.5]], dtype=D))
    A, mask = torch.tensor([[2.0], [1.0]], dtype=D), torch.ones(2, 1, dtype=D)
    off = torch.tensor([[0.0], [1.0]], dtype=D)
    loss, m = rl_plus(logp, old, A, mask, offpolicy_mask=off)
    assert loss.item() == pytest.approx((-4 - 0.4 * math.sqrt(0.75)) / 2, rel=1e-14)
    assert grad(loss, logp).flatten().tolist() == pytest.approx([-4 / 2, -0.4 * math.sqrt(0.75) / 2], rel=1e-14)
    assert m == pytest.approx({"ratio/mean": 2.0, "ratio/max": 2.0, "kl/k1_old": -math.log(2),
                               "kl/k3_old": 1 - math.log(2), "shaping/offpolicy_frac": 0.5,
                               "shaping/offpolicy_prob": 0.25, "rlplus/off_ratio": 0.4,
                               "rlplus/exploration_weight": math.sqrt(0.75)}, rel=1e-14)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("p, p_old", [(0.02, 0.02), (0.3, 0.1), (0.7, 0.9), (0.95, 0.95), (0.5, 1e-20)])
def test_external_token_gradient_is_the_mis_derivative_with_the_weight_stopped(p, p_old, gamma):
    """d l / d log pi = -A (1 - p)^gamma 4p/(3 p_old + 1): the ratio's own derivative times the detached weight,
    not the derivative of the product; w.r.t. the token's logit under a softmax, times (1 - p)."""
    A = -1.5
    logp, _, old, adv, one, off = one_token(p, p_old, A, external=True)
    loss, _ = rl_plus(logp, old, adv, one, offpolicy_mask=off, gamma=gamma)
    off_ratio = 4 * p / (3 * p_old + 1)
    expected = -A * (1 - p) ** gamma * off_ratio
    assert grad(loss, logp).item() == pytest.approx(expected, rel=1e-12)
    if gamma > 0:  # without the stop-gradient the weight's own slope -gamma p (1 - p)^(gamma - 1) would enter
        through = -A * off_ratio * ((1 - p) ** gamma - gamma * p * (1 - p) ** (gamma - 1))
        assert grad(loss, logp).item() != pytest.approx(through, rel=1e-6)
    logp, logits, old, adv, one, off = one_token(p, p_old, A, external=True, leaf_logits=True)
    loss, _ = rl_plus(logp, old, adv, one, offpolicy_mask=off, gamma=gamma)
    (g,) = torch.autograd.grad(loss, logits)
    assert g[2].item() == pytest.approx(expected * (1 - p), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_on_policy_tokens_weigh_minus_a_r_unclipped_and_old_logp_gets_no_gradient(seed):
    logp, old, A, mask, off = mixed_batch(seed)
    old = old.clone().requires_grad_(True)
    loss, _ = rl_plus(logp, old, A, mask, offpolicy_mask=off)
    r = torch.exp(logp.detach() - old.detach())
    on = (mask > 0) & (off == 0)
    assert torch.allclose(grad(loss, logp)[on], (-A * r / mask.sum())[on], atol=1e-15, rtol=1e-12)
    assert (on & ((r > 1.2) | (r < 0.8))).any()  # where PPO would have clipped, still -A r
    o = off > 0
    p, p_old = torch.exp(logp.detach()), torch.exp(old.detach())
    expected_off = -A * (1 - p).sqrt() * 4 * p / (3 * p_old + 1) / mask.sum()
    assert torch.allclose(grad(loss, logp)[o], expected_off[o], atol=1e-15, rtol=1e-12)
    assert torch.autograd.grad(loss, old, retain_graph=True, allow_unused=True)[0] is None  # detached: not in the graph
    assert grad(loss, logp)[mask == 0].abs().sum().item() == 0.0  # padding takes no gradient


@pytest.mark.parametrize("seed", range(3))
def test_no_external_tokens_is_the_unclipped_ratio_loss(seed):
    """Reduction: -A r over every token (REINFORCE with the ratio), = ppo-clip with a clip that never binds."""
    logp, old, A, mask, _ = mixed_batch(seed)
    none = torch.zeros_like(mask)
    for agg, denom in (("token-mean", None), ("seq-mean-token-sum-norm", ops.Denominators(norm_constant=42.0))):
        ours, m = rl_plus(logp, old, A, mask, offpolicy_mask=none, agg=agg, denom=denom)
        direct = ops.aggregate(-A * torch.exp(logp - old), mask, agg, denom)
        unclipped, m_ppo = ppo_clip(logp, old, A, mask, agg=agg, denom=denom, eps_low=1.0, eps_high=1e9)
        assert ours.item() == pytest.approx(direct.item(), rel=1e-14) == pytest.approx(unclipped.item(), rel=1e-14)
        assert torch.allclose(grad(ours, logp), grad(unclipped, logp), atol=1e-15, rtol=1e-12)
        assert {k: m[k] for k in ("ratio/mean", "ratio/max", "kl/k1_old")} == pytest.approx(
            {k: m_ppo[k] for k in ("ratio/mean", "ratio/max", "kl/k1_old")})
        assert m["shaping/offpolicy_frac"] == m["rlplus/off_ratio"] == m["rlplus/exploration_weight"] == 0.0


@pytest.mark.parametrize("seed", range(2))
def test_no_reshape_mode_is_minus_pi_a_on_external_tokens(seed):
    logp, old, A, mask, off = mixed_batch(seed)
    loss, m = rl_plus(logp, old, A, mask, offpolicy_mask=off, off_ratio="no_reshape")
    p = torch.exp(logp.detach())
    o = off > 0
    assert torch.allclose(grad(loss, logp)[o], (-A * p / mask.sum())[o], atol=1e-15, rtol=1e-12)
    assert m["rlplus/off_ratio"] == pytest.approx(p[o].mean().item()) and m["rlplus/exploration_weight"] == 1.0


def test_metrics_are_means_over_the_external_tokens():
    logp, old, A, mask, off = mixed_batch(0)
    _, m = rl_plus(logp, old, A, mask, offpolicy_mask=off)
    o = off > 0
    p, p_old = torch.exp(logp.detach()), torch.exp(old)
    assert m["shaping/offpolicy_frac"] == pytest.approx(off.sum().item() / mask.sum().item())
    assert m["shaping/offpolicy_prob"] == pytest.approx(p[o].mean().item())
    assert m["rlplus/off_ratio"] == pytest.approx((4 * p / (3 * p_old + 1))[o].mean().item())
    assert m["rlplus/exploration_weight"] == pytest.approx((1 - p).sqrt()[o].mean().item())
    on = (mask > 0) & ~o
    assert m["ratio/mean"] == pytest.approx(torch.exp(logp.detach() - old)[on].mean().item())


def test_bad_input_is_refused():
    logp, old, A, mask, off = mixed_batch(0)
    with pytest.raises(ValueError, match=r"gamma=-1: the exponent of the exploration weight .* must be a finite "
                                         r"number >= 0"):
        rl_plus(logp, old, A, mask, offpolicy_mask=off, gamma=-1)
    with pytest.raises(ValueError, match="off_ratio must be one of"):
        rl_plus(logp, old, A, mask, offpolicy_mask=off, off_ratio="RL-PLUS")
    with pytest.raises(ValueError, match="offpolicy_mask has shape"):
        rl_plus(logp, old, A, mask, offpolicy_mask=off[:, :2])
    with pytest.raises(ValueError, match="all zero"):
        rl_plus(logp, old, A, torch.zeros_like(mask), offpolicy_mask=off)


@pytest.mark.parametrize("kw, match", [
    ({"gamma": -1}, r"objective 'rl-plus': gamma=-1: the exponent of the exploration weight"),
    ({"gamma": "half"}, r"gamma='half' needs a number"),
    ({"off_ratio": "naive"}, r"off_ratio='naive' is not one of \['mis', 'no_reshape'\]"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    config = make_config("smoke", recipe="rl-plus", **{**TINY, "recipe_overrides": {"objective": kw}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_recipe_follows_the_reference_script():
    recipe = get_recipe("rl-plus")
    assert recipe.title == registry.catalog()["rl-plus"]["title"]
    assert recipe.rollout.key == "policy-shaping" and [u.key for u in recipe.advantage] == ["rl-plus"]
    assert recipe.objective.key == "rl-plus" and recipe.objective.kw == {}
    assert recipe.agg == "seq-mean-token-sum-norm"
    assert [(u.key, u.kw) for u in recipe.regularizers] == [("entropy-bonus", {"coef": 0.001})]  # and no KL term


def test_the_recipe_trains_on_its_reference_rows_and_resumes_exactly(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="rl-plus", **TINY), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert len(rows) == TINY["steps"] and any(r["grad_norm"] > 0 for r in rows)
    for r in rows:  # one reference row in each group of G = 4: external tokens in every step, with a bounded ratio
        assert 0 < r["shaping/offpolicy_frac"] < 0.5 and 0 < r["rlplus/off_ratio"] <= 4
        assert 0 < r["rlplus/exploration_weight"] <= 1
