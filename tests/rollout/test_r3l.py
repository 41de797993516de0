"""R3L's reflect-then-retry rollout and pivotal credit: pivots by the documented rule on scripted episodes, a retry's
given prefix is the original's (token by token, mask 0, the environment continued from its state), the guidance is in
the sampling prompt and absent from the training prompt, the pivot mask gives the shared prefix exactly zero gradient,
and the recipe trains on a multi-turn task and resumes exactly."""
import random

import pytest
import torch

from tests.helpers import (TINY, CallTask, metric_rows, no_solution_task, resumes_exactly, run_task, step_context,
                           task_for)
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.r3l import PIVOT, ROLE, r3l_advantage, row_pivot, row_role
from workbench.masks.r3l import pivotal_credit
from workbench.models import char_tokenizer
from workbench.objectives.r3l import opmd_loss
from workbench.rollout import Sampling
from workbench.rollout.r3l import Reflection, pivot_turn, r3l_rollout, reflect, verified_correction
from workbench.tasks import Example, get_task
from workbench.train.config import make_config
from workbench.train.glossary import unexplained
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("r3l")

SOLVED, STUCK = Example(prompt="1?", answer="", target="end"), Example(prompt="2?", answer="", target="end")


def steps(*actions, errors=()):
    """turn_info of an episode that took `actions`, with a tool error at the steps in `errors`."""
    return [{"state": s, "action": a, "tool_error": "bad call" if s in errors else None} for s, a in enumerate(actions)]


@pytest.mark.parametrize("actions, errors, solution, pivot, rule", [
    (("a;", "c;", "x"), (), ["a;", "b;", "end"], 1, "departure"),      # first action differing from the solution
    (("c;", "b;", "x"), (1,), ["a;", "b;", "end"], 1, "tool_error"),   # a tool error comes before the expert rule
    (("a;", "b;", "x"), (), ["a;", "b;", "end"], 2, "departure"),      # the final answer departs
    (("a;", "b;", "c;", "x"), (), ["a;", "b;"], 2, "departure"),        # a step past the solution's end departs
    (("a;", "b;"), (), ["a;", "b;", "end"], 1, "departure"),            # followed the solution, cut off: last step
    (("a;", "c;", "x"), (), None, 0, "none"),                           # no tool error, no solution: start over
    (("42",), (), ["41"], 0, "departure"),                              # a one-turn task: always 0
])
def test_the_pivot_is_the_first_tool_error_else_the_first_departure_from_the_solution(actions, errors, solution,
                                                                                      pivot, rule):
    assert pivot_turn(steps(*actions, errors=errors), solution) == (pivot, rule)


def test_the_reflection_is_the_verifiers_diagnosis_rendered_as_text():
    failed = reflect(steps("[98*50]", "[x]", "A:1", errors=(1,)), 0.0, False, ["[50*98]", "[4900-54]", "A:4846"])
    assert failed == Reflection("failure", 0.0, "Step 1 '[x]' got a tool error: bad call", "do not repeat '[x]'", 1)
    assert failed.guidance() == ("Previous attempt: failure (reward 0). Step 1 '[x]' got a tool error: bad call. "
                                 "Retry from step 1: do not repeat '[x]'.")
    assert "4846" not in failed.guidance()  # the diagnosis never quotes the solution
    assert reflect(steps("end"), 1.0, False, ["end"]).outcome == "success"
    assert reflect(steps("a;"), 0.0, True, None).root_cause == "The episode was cut off at the token budget"
    assert verified_correction(0.0, 3, 1.0, 3, 1.0) and verified_correction(1.0, 5, 1.0, 3, 1.0)
    assert not verified_correction(0.0, 3, 0.5, 2, 1.0) and not verified_correction(1.0, 3, 1.0, 3, 1.0)


def call_policy(seen):
    """A scripted policy on `CallTask(prefix="obs")`: on "1?" it solves (a; b; end); on "2?" it calls a; then c; and
    answers x (wrong: departs at step 1); given the guidance it calls b; and ends (solves). Records what it saw."""
    def policy(history):
        seen.append(history)
        done = history.count("obs")
        if "Previous attempt" in history:
            return ["a;", "b;", "end<eos>"][done]
        return (["a;", "b;", "end<eos>"] if "1?" in history else ["a;", "c;", "x<eos>"])[done]
    return policy


def call_rollout(**kw):
    tok, seen = char_tokenizer(), []
    engine = ScriptedEngine(tok, call_policy(seen))
    ctx = step_context(component="rollout:r3l")
    batch = r3l_rollout(engine, CallTask(prefix="obs"), [SOLVED, STUCK], group_size=4, sampling=Sampling(8), ctx=ctx,
                        **kw)
    return tok, batch, ctx.metrics, seen


def test_failures_are_retried_from_their_pivot_and_verified_corrections_kept_under_the_guided_prompt():
    _, batch, metrics, _ = call_rollout()
    roles = [row_role(info) for info in batch.turn_info]
    assert batch.group.tolist() == [0, 0, 1, 1, 1, 1, 1, 1]
    assert roles == ["base", "base", "base", "base", "retry", "retry", "sft", "sft"]
    assert [row_pivot(info) for info in batch.turn_info] == [0, 0, 1, 1, 1, 1, 1, 1]
    assert batch.rewards.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert all(step[PIVOT] == 1 and step[ROLE] == "retry" for step in batch.turn_info[4])  # every step carries it
    assert metrics == {"r3l/retries": 1.0, "r3l/base_success": 0.5, "r3l/retry_success": 1.0, "r3l/pivot": 1.0}
    _, plain, _, _ = call_rollout(retry_sft=False)
    assert [row_role(info) for info in plain.turn_info] == roles[:6]
    assert {m.name for m in registry.get("rollout", "r3l").logs} == set(metrics)


def test_a_retry_replays_the_originals_prefix_token_by_token_and_continues_its_environment():
    tok, batch, _, _ = call_rollout()
    original, retried = 2, 4
    prefix = (batch.turn[original] >= 0) & (batch.turn[original] < 1)  # turn 0: "a;" and its observation
    n = int(prefix.sum())
    assert n == len("a;obs1\n") and bool(prefix[:n].all())
    assert torch.equal(batch.response_ids[retried, :n], batch.response_ids[original, :n])
    assert batch.turn[retried, :n].tolist() == batch.turn[original, :n].tolist()
    assert batch.mask[retried, :n].sum() == 0 and batch.mask[original, :2].tolist() == [1.0, 1.0]  # given vs sampled
    assert batch.mask[retried, n] == 1 and batch.turn[retried, n] == 1  # the policy samples from the pivot on
    assert [s["state"] for s in batch.turn_info[retried][:2]] == [s["state"] for s in batch.turn_info[original][:2]]
    assert [s["action"] for s in batch.turn_info[retried]] == ["a;", "b;", "end"]
    assert tok.decode(batch.response_ids[retried][batch.turn[retried] >= 0]) == "a;obs1\nb;obs2\nend<eos>"


def test_the_guidance_is_sampled_from_but_absent_from_the_training_prompt():
    tok, batch, _, seen = call_rollout()
    guided = [h for h in seen if "Previous attempt" in h]
    assert guided and all("Step 1 'c;' departs from a solution" in h and h.endswith(("2?", "2?a;obs1\n",
                                                                                      "2?a;obs1\nb;obs2\n"))
                          for h in guided)  # the guidance before the question, the prefix after it
    base, retry, sft = 2, 4, 6
    for row in (base, retry):
        assert tok.decode(batch.prompt_ids[row][batch.prompt_mask[row] > 0], skip_special_tokens=True) == "2?"
        assert batch.prompts[row] == "2?"
    assert torch.equal(batch.prompt_ids[retry], batch.prompt_ids[base])
    guided_prompt = tok.decode(batch.prompt_ids[sft][batch.prompt_mask[sft] > 0], skip_special_tokens=True)
    assert guided_prompt.startswith("Previous attempt: failure (reward 0).") and guided_prompt.endswith("\n2?")
    assert torch.equal(batch.response_ids[sft], batch.response_ids[retry])  # the same retry, under the guidance


def test_pivotal_credit_gives_the_shared_prefix_exactly_zero_gradient():
    """Catalog (2): tokens of turns k < k_pivot, in the retried base episode and in its retry, get exactly zero
    gradient; the diverging suffix and the rows without a pivot keep theirs."""
    _, batch, _, _ = call_rollout()
    batch.rewards = batch.rewards.double()
    batch.advantages = r3l_advantage(batch)
    masked = pivotal_credit(batch)
    prefix = (batch.turn >= 0) & (batch.turn < 1)
    assert masked[2:][prefix[2:]].sum() == 0 and torch.equal(masked[:2], batch.mask[:2])
    assert torch.equal(masked * ~prefix, batch.mask * ~prefix)
    logp = torch.full(batch.mask.shape, -0.7, dtype=torch.float64, requires_grad=True)
    loss, _ = opmd_loss(logp, logp.detach(), batch.advantages.double(), masked.double())
    (grad,) = torch.autograd.grad(loss, logp)
    assert (grad[2:][prefix[2:]] == 0).all()
    trained = masked > 0
    assert (grad[trained] != 0).all()  # every advantage here is nonzero: -1/2 on the failure, 1 on successes
    assert torch.equal(grad != 0, trained)


def test_a_tool_error_sets_the_pivot_on_a_real_environment():
    """Calculator: a valid call that is not the solution's (a departure at step 0), a malformed call (a tool error at
    step 1), a wrong answer; guided, the retry answers right from its pivot."""
    task = get_task("calculator", n_operands=3)
    example = task.sample(1, random.Random(0))[0]
    engine = ScriptedEngine(char_tokenizer(), lambda h: f"{example.target}<eos>" if "Previous" in h else
                            ["[1+2]", "[x]", "A:1<eos>"][h.count("\n")])  # one observation line per step so far
    batch = r3l_rollout(engine, task, [example], group_size=2, sampling=Sampling(12), ctx=step_context())
    assert [row_role(info) for info in batch.turn_info] == ["base", "retry", "sft"]
    base, retry = batch.turn_info[0], batch.turn_info[1]
    assert [s["action"] for s in base] == ["[1+2]", "[x]", "A:1"] and base[1]["tool_error"]
    assert row_pivot(base) == row_pivot(retry) == 1  # the malformed call, not the first departure (step 0)
    assert [s["action"] for s in retry] == ["[1+2]", example.target] and batch.rewards[1:].tolist() == [1.0, 1.0]
    assert retry[1]["state"] == base[1]["state"]  # the replayed call's result is in the state the retry acts from


def test_a_retry_that_cannot_fit_under_the_length_limit_is_not_made():
    """The base episodes fit in 24 positions; the guidance (about 100 characters) does not: nothing is retried, the
    failed base rows stay unmasked, as the reference drops a second rollout that fails."""
    tok, seen = char_tokenizer(), []
    engine = ScriptedEngine(tok, call_policy(seen), max_length=24)
    ctx = step_context()
    batch = r3l_rollout(engine, CallTask(prefix="obs"), [SOLVED, STUCK], group_size=4, sampling=Sampling(8), ctx=ctx)
    assert [row_role(info) for info in batch.turn_info] == ["base"] * 4 and batch.rewards.tolist() == [1, 1, 0, 0]
    assert [row_pivot(info) for info in batch.turn_info] == [0] * 4 and torch.equal(pivotal_credit(batch), batch.mask)
    assert ctx.metrics["r3l/retries"] == 0.0 and not any("Previous attempt" in h for h in seen)


def test_greedy_rollouts_are_plain_and_the_whole_group():
    tok, seen = char_tokenizer(), []
    engine = ScriptedEngine(tok, call_policy(seen))
    batch = r3l_rollout(engine, CallTask(prefix="obs"), [STUCK], group_size=4, sampling=Sampling(8, greedy=True))
    assert batch.size == 4 and not any("Previous attempt" in h for h in seen)


@pytest.mark.parametrize("overrides, match", [
    ({"group_size": 3}, r"group_size=3: R3L samples N/2 base episodes .* must be even and >= 2"),
    ({"recipe_overrides": {"advantage": {"alpha": 0.5}}}, r"alpha=0\.5: the positive amplification factor must be"),
    ({"recipe_overrides": {"objective": {"tau": -1.0}}}, r"tau=-1\.0: OPMD's regularization strength must be"),
    ({"recipe_overrides": {"advantage": {"mode": "both"}}}, r"mode='both' is not one of \['code', 'paper'\]"),
    ({"recipe_overrides": {"rollout": {"template": "{prompt}"}}}, r"must contain both \{prompt\} and \{hint\}"),
])
def test_bad_settings_are_refused_before_training(tmp_path, overrides, match):
    config, _ = task_for("r3l", **{**TINY, **overrides})
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="r3l", **config), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_without_solutions_is_refused_at_start(tmp_path):
    """The pivot's second rule reads the task's solution: a task without one is refused before anything trains."""
    config, _ = task_for("r3l", **TINY)
    trainer = Trainer(make_config("smoke", recipe="r3l", **config), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"rollout:r3l needs a solution per example .* task 'trl' has none\. "):
        trainer.pipeline.check_task(no_solution_task())  # as run_task does
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_on_a_multi_turn_task_and_resumes_exactly(tmp_path):
    config, task = task_for("r3l", **TINY)  # three-turn DigitSteps
    assert resumes_exactly(make_config("smoke", recipe="r3l", **config), tmp_path, task=task)
    rows = metric_rows(tmp_path / "straight")
    assert len(rows) == TINY["steps"] and any(r["grad_norm"] > 0 for r in rows)
    assert any(r["r3l/retries"] > 0 for r in rows) and not unexplained(set().union(*rows))


def test_the_papers_settings_train_as_overrides(tmp_path):
    """mode="paper" (successes alpha, A > 0 scaled), GRPO's z-score, tau = 0, per-trajectory token mean, no KL."""
    paper = {"advantage": {"mode": "paper", "baseline": "grpo"}, "objective": {"tau": 0.0},
             "agg": "seq-mean-token-mean", "regularizers": []}
    config, task = task_for("r3l", **{**TINY, "steps": 2, "recipe_overrides": paper})
    trainer = Trainer(make_config("smoke", recipe="r3l", **config), tmp_path / "run", progress=False)
    assert trainer.pipeline.recipe.regularizers == () and trainer.pipeline.recipe.agg == "seq-mean-token-mean"
    run_task(make_config("smoke", recipe="r3l", **config), tmp_path / "paper", task)
    rows = metric_rows(tmp_path / "paper")
    assert len(rows) == 2 and all("kl/k1_old" in r for r in rows) and any(r["grad_norm"] > 0 for r in rows)
