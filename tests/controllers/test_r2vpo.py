"""R²VPO's dual ascent on lam: rises while the measured ratio variance exceeds delta, decays to 0 otherwise, and in
closed loop with the objective settles where the variance meets its budget."""
import math

import pytest
import torch

from tests.helpers import TINY, D, DigitFirst
from workbench import registry
from workbench.controllers.r2vpo import R2VPODual, dual_step
from workbench.objectives.r2vpo import r2vpo
from workbench.recipes import get_recipe
from workbench.train.config import make_config
from workbench.train.metrics import read_rows
from workbench.train.pipeline import Pipeline
from workbench.train.trainer import Trainer


def run(state, variances):
    lams = []
    for v in variances:
        state = R2VPODual.update(state, None, {"r2vpo/ratio_var": v, "loss/policy": 0.0})
        lams.append(R2VPODual.value(state))
    return lams


@pytest.mark.covers("r2vpo")
def test_registered_and_started_from_the_objectives_lam_by_the_recipe():
    e = registry.get("controller", "r2vpo")
    assert e.defaults == {"delta": 0.02, "lr": 10.0} and e.confidence == "abstract-only" and e.equation
    pipeline = Pipeline(get_recipe("r2vpo"), track_kl=False)
    state = pipeline.state["controller:r2vpo"]
    assert state == {"lam": 1.0, "delta": 0.02, "lr": 10.0}
    assert pipeline.kwargs(pipeline.find("objective:r2vpo"), 0, 1)["lam"] == 1.0
    state["lam"] = 0.37  # what the controller holds is what the objective gets
    assert pipeline.kwargs(pipeline.find("objective:r2vpo"), 0, 1)["lam"] == 0.37


@pytest.mark.covers("r2vpo")
def test_lam_rises_while_the_variance_exceeds_delta_and_decays_to_zero_otherwise():
    """Catalog test (3): exact projected dual-ascent steps lam + 10 (v - 0.02), floored at 0."""
    state = R2VPODual.init(initial=1.0)
    up = run(state, [0.05, 0.03, 0.021])
    assert up == pytest.approx([1.3, 1.4, 1.41])
    assert all(b > a for a, b in zip([1.0] + up, up))
    down = run({**state, "lam": up[-1]}, [0.0] * 10)  # on-policy steps: variance 0, lam falls by 0.2 a step
    assert down[:7] == pytest.approx([1.21, 1.01, 0.81, 0.61, 0.41, 0.21, 0.01])
    assert down[7:] == [0.0, 0.0, 0.0]  # projected at 0, never negative
    assert run({**state, "lam": 0.0}, [0.019, 0.0]) == [0.0, 0.0]
    assert run({**state, "lam": 0.5}, [0.02]) == [0.5]  # on the budget: no move


@pytest.mark.covers("r2vpo")
def test_in_closed_loop_with_the_objective_the_variance_settles_at_delta():
    """A tabular policy (one free log-prob per token, fixed advantages) takes 30 SGD steps per step on the r2vpo loss
    from pi_old; the controller reads the measured variance. Inner optimum: r - 1 = A / (2 lam), so the fixed point
    is Var = E[A^2] / (4 lam^2) = delta, lam* = sqrt(E[A^2] / (4 delta))."""
    g = torch.Generator().manual_seed(0)
    n = 64
    A, mask = torch.randn(n, 1, generator=g, dtype=D) * 0.5, torch.ones(n, 1, dtype=D)
    logits, state, history = torch.zeros(n, 1, dtype=D), R2VPODual.init(initial=0.5), []
    for _ in range(40):
        old = logits.clone()
        logp = old.clone().requires_grad_(True)
        opt = torch.optim.SGD([logp], lr=n * 0.2)  # token-mean divides each token's gradient by n
        for _ in range(30):
            opt.zero_grad()
            r2vpo(logp, old, A, mask, mu_logp=old, lam=R2VPODual.value(state))[0].backward()
            opt.step()
        _, m = r2vpo(logp.detach(), old, A, mask, mu_logp=old, lam=R2VPODual.value(state))
        history.append((m["r2vpo/ratio_var"], R2VPODual.value(state)))
        state = R2VPODual.update(state, None, {"r2vpo/ratio_var": m["r2vpo/ratio_var"], "loss/policy": 0.0})
        logits = logp.detach()
    assert history[0][0] > 10 * 0.02 and R2VPODual.value(state) > 0.5  # too far at lam = 0.5: lam went up
    assert history[-1][0] == pytest.approx(0.02, rel=1e-2)
    assert R2VPODual.value(state) == pytest.approx(math.sqrt(float((A ** 2).mean()) / (4 * 0.02)), rel=1e-2)


@pytest.mark.covers("r2vpo")
def test_a_step_that_trained_nothing_keeps_lam_and_a_missing_measurement_is_an_error():
    state = R2VPODual.init(initial=0.7)
    assert R2VPODual.update(state, None, {"reward/mean": 0.5}) == state  # no loss/policy: nothing was trained
    with pytest.raises(ValueError, match="r2vpo/ratio_var"):
        R2VPODual.update(state, None, {"loss/policy": 0.1})


@pytest.mark.covers("r2vpo")
@pytest.mark.parametrize("bad,match", [(dict(initial=-1.0), "initial lam"), (dict(initial=1.0, delta=0.0), "delta"),
                                       (dict(initial=1.0, lr=0.0), "lr")])
def test_bad_settings_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        R2VPODual.init(**bad)


@pytest.mark.covers("r2vpo")
def test_dual_step_is_projected_gradient_ascent():
    assert dual_step(1.0, 0.05, delta=0.02, lr=10.0) == pytest.approx(1.3)
    assert dual_step(0.1, 0.0, delta=0.02, lr=10.0) == 0.0


@pytest.mark.covers("r2vpo")
def test_in_the_training_loop_each_step_lam_is_one_dual_step_from_the_last(tmp_path):
    """The recipe wires it: the controller reads the step's logged r2vpo/ratio_var and the next step's objective
    uses (and logs) the updated lam. Two minibatches per step, so the second sees r != 1."""
    trainer = Trainer(make_config("smoke", recipe="r2vpo", **{**TINY, "steps": 3}), tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.run()
    rows = read_rows(tmp_path / "metrics.jsonl")
    lams = [r["objective:r2vpo.lam"] for r in rows]
    assert lams[0] == 1.0 and any(r["r2vpo/ratio_var"] > 0 for r in rows)
    for row, nxt in zip(rows, lams[1:]):
        assert nxt == pytest.approx(max(0.0, row["objective:r2vpo.lam"] + 10.0 * (row["r2vpo/ratio_var"] - 0.02)))
