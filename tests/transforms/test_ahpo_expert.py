"""AHPO's gate and expert rows (MM-HELIX, arXiv 2510.08540): xi is a step in the success count, a gated group gets
its expert trace (replayed through the environment, outside the policy loss, marked for the SFT term), a group at or
above R_hat is untouched (GRPO), and a run gates its failing groups and trains the SFT term."""

import pytest
import torch

from tests.helpers import TINY, DigitSteps, metric_rows, no_solution_task, run_task, sampled_step
from workbench.advantages.ampo import ampo_advantage
from workbench.advantages.group import grpo
from workbench.models import build_tiny
from workbench.rollout.engine import HFEngine
from workbench.tasks import get_task
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.ahpo_expert import ahpo_gate, gate, successes

pytestmark = pytest.mark.covers("ahpo")
G = 4


@pytest.fixture(scope="module")
def engine():
    return HFEngine(*build_tiny(seed=0))


def step(engine, task, scores, seed=0):
    """A sampled batch of len(scores) // G groups of `task` with the given verifier scores, and its step context."""
    return sampled_step(engine, task, scores, seed=seed, group_size=G)


@pytest.mark.parametrize("r_hat", [0, 1, 2, G, G + 1])
def test_xi_is_a_step_in_the_success_count(r_hat):
    """Card (3): xi(s) is 1 below R_hat and 0 from it on: constant on each side, one jump, at R_hat."""
    xi = [gate(s, r_hat) for s in range(G + 1)]
    assert xi == [s < r_hat for s in range(G + 1)]
    assert sum(a != b for a, b in zip(xi, xi[1:])) == (1 if 0 < r_hat <= G else 0)


def test_successes_count_the_on_policy_rows_the_verifier_accepts():
    scores = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.0, 0.0, 1.0, 1.0])
    group = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    on = torch.tensor([True] * 7 + [False])  # the last row is an off-policy row: not the policy's success
    assert successes(scores, group, on) == {0: 2, 1: 1}


@pytest.mark.parametrize("r_hat", [1, 2, 3])
def test_a_gated_group_gets_its_expert_trace_outside_the_policy_loss(engine, r_hat):
    """Groups with 0, 1 and 2 successes: exactly those below R_hat get one expert row, last in the group: the task's
    expert actions replayed through its environment (observations included, mask 0), the verifier's score,
    offpolicy_mask its action tokens, mask 0; the sampled rows are untouched."""
    task = DigitSteps()
    scores = [0.0] * G + [1.0, 0, 0, 0] + [1.0, 1.0, 0, 0]
    batch, ctx = step(engine, task, scores)
    before = batch.select(torch.arange(batch.size))
    out = ahpo_gate(batch, ctx, r_hat=r_hat)
    gated = [g for g, s in enumerate([0, 1, 2]) if s < r_hat]
    expert = out.offpolicy_mask.sum(-1) > 0
    assert out.group[expert].tolist() == gated and out.size == 3 * G + len(gated)
    assert out.group.tolist() == sorted(out.group.tolist())
    rows = torch.nonzero(expert).flatten().tolist()
    assert all(r + 1 == out.size or out.group[r + 1] != out.group[r] for r in rows)  # last of its group
    assert (out.mask[expert] == 0).all() and (out.mu_logp[expert] == 0).all()
    assert all(out.completions[r] == "11121" for r in rows)  # actions "1" with the tool's "1", "2" between
    assert all(out.offpolicy_mask[r].tolist()[:5] == [1, 0, 1, 0, 1] for r in rows)
    assert out.scores[expert].tolist() == [1.0] * len(gated)
    on = out.select(torch.nonzero(~expert).flatten())
    T = before.response_ids.shape[1]
    assert on.completions == before.completions and torch.equal(on.mask[:, :T], before.mask)
    assert torch.equal(ampo_advantage(out, allow_singletons=False)[~expert][:, :T], grpo(before))
    assert ctx.metrics["ahpo/gated_groups"] == pytest.approx(len(gated) / 3)


def test_no_gated_group_is_grpo(engine):
    """Card (1) at the batch: every group reaches R_hat, nothing is appended, the advantage is GRPO's."""
    batch, ctx = step(engine, get_task("addition"), [1.0, 0, 0, 0, 0, 1.0, 1.0, 0])
    before = batch.select(torch.arange(batch.size))
    out = ahpo_gate(batch, ctx)
    assert out.completions == before.completions and (out.offpolicy_mask == 0).all()
    assert torch.equal(ampo_advantage(out, allow_singletons=False), grpo(before))
    assert ctx.metrics["ahpo/gated_groups"] == 0.0


def test_a_one_turn_tasks_expert_trace_is_its_target(engine):
    batch, ctx = step(engine, get_task("addition"), [0.0] * G)
    out = ahpo_gate(batch, ctx)
    expert = out.offpolicy_mask.sum(-1) > 0
    assert [c for c, e in zip(out.completions, expert) if e] == [ctx.task.expert_actions(ctx.examples[0])[0]]
    assert out.scores[expert].tolist() == [1.0]


@pytest.mark.parametrize("r_hat, match", [(-1, r"r_hat=-1 is the success count .* integer >= 0"),
                                          (1.5, r"r_hat=1.5 needs a whole number")])
def test_bad_settings_are_refused_before_training(tmp_path, r_hat, match):
    config = make_config("smoke", recipe="ahpo", **{**TINY, "recipe_overrides": {"group_transforms": {"r_hat": r_hat}}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_without_solutions_is_refused_at_start(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="ahpo", **TINY), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"group_transform:ahpo needs a solution per example .* task 'trl' has none"):
        trainer.pipeline.check_task(no_solution_task())
    assert not (tmp_path / "run").exists()


def test_a_run_gates_its_failing_groups_and_trains_the_sft_term(tmp_path):
    """The untrained tiny model fails every addition: every group is gated, the GRPO advantage is 0, and the only
    gradient is the SFT term's."""
    run_task(make_config("smoke", recipe="ahpo", **TINY), tmp_path / "run")
    rows = metric_rows(tmp_path / "run")
    assert all(r["ahpo/gated_groups"] == 1.0 and r["ahpo/sft_loss"] > 0 for r in rows)
    assert all(r["grad_norm"] > 0 for r in rows)
