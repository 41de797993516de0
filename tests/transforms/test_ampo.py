"""AMPO's teacher injection: which groups get teachers, the comprehension score and the best-k choice (known values),
what a teacher row is (forced reward, off-policy mask, mu_logp), the reduction to GRPO, the teacher pool, the
refusals, and a training run that injects and resumes exactly."""
import math
import random

import pytest
import torch

from tests.helpers import TINY, metric_rows, no_solution_task, resumes_exactly, sampled_step
from workbench import registry
from workbench.advantages.ampo import ampo_advantage
from workbench.advantages.group import grpo
from workbench.models import build_tiny
from workbench.rollout.engine import HFEngine, policy_forward
from workbench.tasks import get_task
from workbench.tasks.teachers import DEFAULT_POOL, TEACHERS, teacher_solutions
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.ampo import (AMPO_TITLE, ampo, best_k, comprehension_score, correct_rows, groups_to_guide,
                                       mean_answer_probability, reasoning_of)

pytestmark = pytest.mark.covers("ampo")
G = 4


@pytest.fixture(scope="module")
def engine():
    return HFEngine(*build_tiny(seed=0))


def policy_score(engine):
    """The trainer's `score`: the current policy's log-probs of a batch's responses, 0 off the mask."""
    def score(batch, temperature):
        logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                    batch.mask, temperature)
        return logp.detach() * batch.mask
    return score


def probability_of_context(engine, probability):
    """A `score` stand-in: every answer token gets probability `probability(context)`, the context being the decoded
    tokens before the probe's first answer token ("" for scoreA's probe)."""
    def score(batch, temperature):
        out = torch.zeros(batch.mask.shape)
        for i in range(batch.size):
            before = int((batch.mask[i].cumsum(0) == 0).sum())
            out[i] = math.log(probability(engine.tokenizer.decode(batch.response_ids[i, :before].tolist())))
        return out * batch.mask
    return score


def step(engine, task_name, scores, score=None, seed=0):
    """A sampled batch of len(scores) // G groups of `task_name` with the given verifier scores (rewards = scores, as
    the reward stage leaves them), and its step context."""
    return sampled_step(engine, get_task(task_name), scores, seed=seed, group_size=G,
                        score=score or policy_score(engine))


def test_registered_with_the_references_settings():
    entry = registry.get("group_transform", "ampo")
    assert entry.title == AMPO_TITLE == registry.catalog()["ampo"]["title"]
    assert entry.defaults == {"k": 2, "teachers": DEFAULT_POOL, "format_coefficient": 0.1, "score_a": "policy",
                              "temperature": 1.0}
    assert entry.needs == ("solution",) and entry.provides == ("offpolicy_mask",) and entry.reads == ("scores", "group")


def test_correct_means_above_format_coefficient_plus_half():
    """The reference's score > c + 0.5 (c = 0.1): our 0/1 verifiers' 1 is correct, 0 is not; a group is guided only
    when none of its rows is correct (success rate below 1/n)."""
    scores = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.6, 0.1, 0.0, 0.0, 0.61, 0.0, 0.0, 0.0])
    assert correct_rows(scores, 0.1).tolist() == [False, True] + [False] * 6 + [True] + [False] * 3
    assert groups_to_guide(scores, torch.arange(3).repeat_interleave(4), 0.1) == [1]


def test_reasoning_is_the_solution_without_its_trailing_answer():
    assert reasoning_of(["46"], "46") == ""          # addition: the solution is the answer
    assert reasoning_of([" 46"], "46") == " "
    assert reasoning_of(["5*3+2"], "17|2 3 5") == "5*3+2"  # countdown: the answer never appears in the solution
    assert reasoning_of(["go;", "end"], "") == "go;end"


def test_mean_answer_probability_and_the_score_known_values():
    logp = torch.log(torch.tensor([[0.5, 0.2, 0.4, 1.0], [0.3, 0.3, 0.3, 0.3]], dtype=torch.float64))
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(mean_answer_probability(logp, mask), torch.tensor([0.3, 0.0], dtype=torch.float64))
    score = comprehension_score(torch.tensor([0.7, 0.2, 0.5]), torch.tensor([0.2, 0.4, 0.5]), torch.tensor([1.0, 1, 0]),
                                0.1)
    assert torch.allclose(score, torch.tensor([0.9 * 0.5 + 0.1, 0.1, 0.0]))  # a negative gain counts as 0


def test_best_k_picks_the_highest_scores_ties_in_order():
    assert best_k(torch.tensor([0.1, 0.7, 0.3, 0.9]), 2) == [3, 1]
    assert best_k(torch.tensor([0.1, 0.7, 0.3, 0.9]), 9) == [3, 1, 2, 0]
    assert best_k(torch.tensor([0.1, 0.1, 0.1]), 2) == [0, 1]


def test_the_teacher_pool_offers_distinct_correct_solutions():
    countdown, addition = get_task("countdown"), get_task("addition")
    for example in countdown.sample(20, random.Random(0)):
        pool = teacher_solutions(countdown, example, DEFAULT_POOL)
        texts = ["".join(a) for _, a in pool]
        assert pool[0] == ("expert", [example.target]) and len(set(texts)) == len(texts) >= 2
        assert all(countdown.score(t, example) == 1.0 for t in texts)
    example = addition.sample(1, random.Random(0))[0]
    assert teacher_solutions(addition, example, DEFAULT_POOL) == [("expert", [example.answer]),
                                                                  ("padded", [" " + example.answer])]


def test_groups_with_a_correct_sample_are_untouched(engine):
    """Catalog (1): group 0 has a correct sample: its rows (and so its GRPO advantages) are the batch's own; group 1
    has none and gets k = 2 teacher rows; the batch keeps its size and every group G rows."""
    batch, ctx = step(engine, "addition", [0, 1, 0, 0] + [0] * 4)
    before = batch.select(torch.arange(G))
    out = ampo(batch, ctx)
    assert out.size == 2 * G and out.group.tolist() == [0] * G + [1] * G
    assert out.completions[:G] == before.completions and torch.equal(out.rewards[:G], before.rewards)
    T = before.response_ids.shape[1]
    assert torch.equal(out.response_ids[:G, :T], before.response_ids) and (out.offpolicy_mask[:G] == 0).all()
    assert torch.equal(ampo_advantage(out)[:G, :T], grpo(before))
    example = ctx.examples[1]
    assert sorted(out.completions[G:]).count(example.answer) == 1 and " " + example.answer in out.completions[G:]
    assert ctx.metrics["ampo/guided_groups"] == 0.5 and ctx.metrics["ampo/teacher_rows"] == 2


def test_teacher_rows_are_marked_scored_and_forced_to_reward_one(engine, monkeypatch):
    """A teacher whose solution the verifier rejects: its reward is forced to 1 (the reference), `scores` keeps the
    verifier's 0; offpolicy_mask is exactly the teacher rows' response mask; their mu_logp are the policy's own."""
    monkeypatch.setitem(TEACHERS, "wrong", lambda task, example: ["x" + example.answer])
    batch, ctx = step(engine, "addition", [0.0] * (2 * G))
    out = ampo(batch, ctx, teachers=("wrong", "expert"), score_a="zero")
    teacher = out.offpolicy_mask.sum(-1) > 0
    assert teacher.sum() == 4 and (teacher.reshape(2, G).sum(-1) == 2).all()
    assert torch.equal(out.offpolicy_mask[teacher], out.mask[teacher]) and (out.offpolicy_mask[~teacher] == 0).all()
    wrong = torch.tensor([c.startswith("x") for c in out.completions])
    assert wrong.sum() == 2 and (out.rewards[teacher] == 1).all()
    assert out.scores[wrong].tolist() == [0.0, 0.0] and (out.scores[teacher & ~wrong] == 1).all()
    rows = out.select(torch.nonzero(teacher).flatten())
    assert torch.allclose(rows.mu_logp, engine.logprobs(rows, 1.0), atol=1e-6)
    assert ctx.metrics["ampo/teacher/wrong"] == 2 and ctx.metrics["ampo/teacher/expert"] == 2


def test_the_score_is_zero_when_the_reasoning_does_not_change_the_answer_probability(engine, monkeypatch):
    """Catalog (2): answer tokens equally likely whatever precedes them -> scoreB = scoreA for every teacher, a zero
    comprehension gain, and the choice falls back to the format term (the rejected solution loses), then the pool's
    order."""
    monkeypatch.setitem(TEACHERS, "wrong", lambda task, example: ["9" + example.target])
    batch, ctx = step(engine, "countdown", [0.0] * G, score=probability_of_context(engine, lambda context: 0.3))
    out = ampo(batch, ctx, teachers=("wrong", "search-desc", "search", "expert"))
    pool = dict(teacher_solutions(ctx.task, ctx.examples[0], ("wrong", "search-desc", "search", "expert")))
    assert ctx.metrics["ampo/comprehension_gain"] == 0.0 and ctx.metrics["ampo/teacher/wrong"] == 0
    firsts = [name for name in ("search-desc", "search", "expert") if name in pool][:2]
    assert sorted(c for c, m in zip(out.completions, out.offpolicy_mask.sum(-1)) if m > 0) == sorted(
        pool[name][0] for name in firsts)


def test_the_best_k_by_comprehension_take_the_teacher_rows(engine):
    """Known probabilities of the answer after each teacher's reasoning: scoreA = 0.2 (no reasoning); the two
    highest scoreB (search-desc 0.8, padded 0.5; expert 0.1 is below scoreA) take the rows, best into the lowest."""
    batch, ctx = step(engine, "countdown", [0.0] * G, seed=2)
    pool = dict(teacher_solutions(ctx.task, ctx.examples[0], DEFAULT_POOL))
    assert set(pool) == set(DEFAULT_POOL)  # seed 2: four distinct solutions
    after = {"": 0.2, pool["expert"][0]: 0.1, pool["padded"][0]: 0.5, pool["search"][0]: 0.3,
             pool["search-desc"][0]: 0.8}
    ctx.score = probability_of_context(engine, after.__getitem__)
    out = ampo(batch, ctx)
    rows = torch.nonzero(out.offpolicy_mask.sum(-1) > 0).flatten().tolist()
    assert [out.completions[r] for r in rows] == [pool["search-desc"][0], pool["padded"][0]]
    assert ctx.metrics["ampo/comprehension_gain"] == pytest.approx(((0.8 - 0.2) + (0.5 - 0.2)) / 2, abs=1e-6)
    assert [ctx.metrics[f"ampo/teacher/{n}"] for n in DEFAULT_POOL] == [0, 1, 0, 1]
    again, ctx2 = step(engine, "countdown", [0.0] * G, seed=2)
    ctx2.score = ctx.score
    assert torch.nonzero(ampo(again, ctx2).offpolicy_mask.sum(-1) > 0).flatten().tolist() == rows  # seeded draw


def test_k_zero_is_grpo(engine):
    batch, ctx = step(engine, "addition", [0.0] * (2 * G))
    before = batch.select(torch.arange(batch.size))
    out = ampo(batch, ctx, k=0)
    assert out.completions == before.completions and (out.offpolicy_mask == 0).all()
    assert torch.equal(ampo_advantage(out), grpo(before)) and ctx.metrics["ampo/teacher_rows"] == 0


@pytest.mark.parametrize("kw, match", [
    (dict(k=-1), r"k=-1 is how many teacher solutions .* give k >= 0"),
    (dict(k=4), r"k=4 teacher rows in a group of group_size=4 would leave no on-policy sample .* k <= group_size - 1"),
    (dict(teachers=["expret"]), r"unknown teacher 'expret' \(did you mean 'expert'\?\)"),
    (dict(teachers=[]), r"teachers=\[\] must be a non-empty list"),
    (dict(score_a="zeros"), r"score_a='zeros' is not one of \['policy', 'zero'\]"),
    (dict(format_coefficient=2.0), r"format_coefficient=2.0 .* give a number in \[0, 1\]"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    config = make_config("smoke", recipe="ampo", **{**TINY, "recipe_overrides": {"group_transforms": kw}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_without_solutions_is_refused_at_start(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="ampo", **TINY), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"group_transform:ampo needs a solution per example .* task 'trl' has none\. "
                                         r"Train it on a task that does: --task .*addition"):
        trainer.pipeline.check_task(no_solution_task())  # as run_task does
    assert not (tmp_path / "run").exists()


def test_a_run_guides_its_failed_groups_and_resumes_exactly(tmp_path):
    """The untrained tiny model fails every addition: every group gets the expert's and the padded answer."""
    config = make_config("smoke", recipe="ampo", **TINY)
    assert resumes_exactly(config, tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert all(r["ampo/guided_groups"] == 1.0 and r["ampo/teacher_rows"] == 2 * TINY["prompts_per_step"] for r in rows)
    assert all(r["ampo/teacher/expert"] + r["ampo/teacher/padded"] == r["ampo/teacher_rows"] for r in rows)
    assert any(r["grad_norm"] > 0 for r in rows) and all(r["shaping/offpolicy_frac"] > 0 for r in rows)
