"""ReMix's per-behaviour clip: PPO-clip of pi / mu, so utd = 1 with mu = pi_old is PPO-clip exactly; a stale row is
clipped around its own mu, not around pi_old; the UTD plan takes utd optimizer steps; refusals."""
import math

import pytest
import torch

from tests.helpers import random_batch
from workbench import registry
from workbench.objectives.decoupled import dots_rr_clip
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.remix import check_utd, remix_objective, utd_plan

pytestmark = pytest.mark.covers("remix")


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("seed", range(3))
def test_fresh_rows_and_utd_one_give_ppo_clip(seed, agg):
    """Catalog test (1), loss half: mu = pi_old -> exactly ppo-clip (value and gradient); utd = 1 -> one step."""
    logp, old, A, mask = random_batch(seed)
    ours, m = remix_objective(logp, old, A, mask, mu_logp=old.clone(), agg=agg, utd=1)
    theirs, m_ppo = ppo_clip(logp, old, A, mask, agg=agg)
    (g1,) = torch.autograd.grad(ours, logp, retain_graph=True)
    (g2,) = torch.autograd.grad(theirs, logp)
    assert torch.equal(ours, theirs) and torch.equal(g1, g2) and m == m_ppo
    assert utd_plan(None, utd=1) == [None]


def test_a_stale_row_is_clipped_around_its_own_behaviour_policy():
    """One token, A = 1, pi = 0.5, pi_old = 0.5, mu = 0.25: r = pi / mu = 2 is past 1 + eps, so the loss is
    -(1 + eps) with no gradient; dots-rr-clip (clip around pi_old, weight pi_old / mu = 2) gives -2 with a gradient."""
    logp = torch.tensor([[math.log(0.5)]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[math.log(0.5)]], dtype=torch.float64)
    mu = torch.tensor([[math.log(0.25)]], dtype=torch.float64)
    A, mask = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
    ours, m = remix_objective(logp, old, A, mask, mu_logp=mu)
    assert ours.item() == pytest.approx(-1.2) and m["clip/high"] == 1.0
    (g,) = torch.autograd.grad(ours, logp)
    assert float(g) == 0.0
    dots, _ = dots_rr_clip(logp, old, A, mask, mu_logp=mu)
    assert dots.item() == pytest.approx(-2.0)


def test_old_logp_is_not_read_by_the_loss():
    logp, old, A, mask = random_batch(4)
    mu = old + 0.1
    a, _ = remix_objective(logp, old, A, mask, mu_logp=mu)
    b, _ = remix_objective(logp, old - 3.0, A, mask, mu_logp=mu)
    assert torch.equal(a, b)


def test_the_plan_takes_utd_steps_each_moving_every_token():
    assert utd_plan(None, utd=2) == [None, None] and utd_plan(None, utd=3, eps_low=0.1) == [None] * 3
    entry = registry.get("objective", "remix")
    assert entry.plan is utd_plan and entry.reads == ("mu_logp",) and entry.defaults["utd"] == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_utd_is_refused_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="utd="):
        check_utd(utd=bad)


def test_mismatched_mu_shape_is_refused():
    logp, old, A, mask = random_batch(0)
    with pytest.raises(ValueError, match="mu_logp has shape"):
        remix_objective(logp, old, A, mask, mu_logp=old[:, :2])
