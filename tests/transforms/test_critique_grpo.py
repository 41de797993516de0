"""Critique-GRPO's refinements: the critique and the refinement prompt of every row, which refinement joins the group
and where, the masks and the prompt it is trained under, the loss on it (catalog tests 1-3), the refusals, and a
training run that resumes exactly."""
import random

import pytest
import torch

from tests.helpers import TINY, D, DigitFirst, metric_rows, no_solution_task, random_batch, resumes_exactly
from tests.rollout.scripted import PromptSpy
from workbench import registry
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.models import build_tiny
from workbench.objectives.ppo import ppo_clip
from workbench.recipes import get_recipe
from workbench.rollout import HFEngine, Sampling, turns
from workbench.tasks import get_task
from workbench.tasks.base import Example
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.critique_grpo import (COMPACT_TEMPLATE, REFINE_TEMPLATE, critique_grpo, critique_text,
                                                feedback_text, select_refinement)

pytestmark = pytest.mark.covers("critique-grpo")
G = 4
RECIPE = get_recipe("critique-grpo")
LOSS = registry.get("objective", RECIPE.objective.key)
EXAMPLES = [Example(prompt="q0", answer="", target="S0"), Example(prompt="q1", answer="", target="S1")]
INITIAL = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # the verifier's scores of the sampled responses
REFINED = {"y0/0": 0.0, "y0/1": 1.0, "y0/2": 1.0, "y0/3": 0.5,  # of the refinement of each response: group 0 takes
           "y1/0": 0.25, "y1/1": 0.5, "y1/2": 0.5, "y1/3": 0.0}  # y0/1's (first 1), group 1 y1/1's (first of the best)


def initial_batch(order=None) -> RolloutBatch:
    """G sampled rows per example: completions y<g>/<i>, plain prompt ids 7 (q0) or 8 (q1), T = 3."""
    n = len(INITIAL)
    group = torch.arange(2).repeat_interleave(G)
    s = torch.tensor(INITIAL)
    batch = RolloutBatch(
        response_ids=torch.full((n, 3), 5), mask=torch.ones(n, 3), group=group, rewards=s, scores=s.clone(),
        prompt_ids=(7 + group)[:, None].repeat(1, 2), prompt_mask=torch.ones(n, 2), mu_logp=torch.zeros(n, 3),
        truncated=torch.zeros(n, dtype=torch.bool), completions=[f"y{i // G}/{i % G}" for i in range(n)],
        prompts=[EXAMPLES[i // G].prompt for i in range(n)])
    return batch if order is None else batch.select(torch.tensor(order))


class RefineWorld:
    """ctx.rollout stand-in: one refinement per example copy, scored by REFINED after the response its prompt holds;
    hinted prompt ids 9 (P = 4), T = 5 with 4 policy tokens; records the prompts it was asked with."""

    def __init__(self):
        self.calls = []

    def __call__(self, examples, *, group_size, task, rewarded=False, **_):
        assert group_size == 1 and rewarded  # rows that join the batch must be rewarded as its own
        prompts = [task.opening(e) for e in examples]
        self.calls.append(prompts)
        responses = [p.split("**Previous Solution**: ")[1].split("\n")[0] for p in prompts]
        n = len(examples)
        s = torch.tensor([REFINED[r] for r in responses])
        return RolloutBatch(
            response_ids=100 + torch.arange(n)[:, None].repeat(1, 5), mask=torch.tensor([[1.0] * 4 + [0.0]] * n),
            group=torch.arange(n), rewards=s, scores=s.clone(), prompt_ids=torch.full((n, 4), 9),
            prompt_mask=torch.ones(n, 4), mu_logp=torch.zeros(n, 5), truncated=torch.zeros(n, dtype=torch.bool),
            completions=[f"r/{r}" for r in responses], prompts=prompts)


def context(world):
    return StepContext(step=0, total_steps=10, seed=0, group_size=G, prompts_per_step=2, max_new_tokens=3,
                       examples=EXAMPLES, rollout=world, task=DigitFirst())


def test_registered_with_the_references_settings():
    entry = registry.get("group_transform", "critique-grpo")
    assert entry.defaults == {"critique": "simple_gt", "n_refine": 1, "template": REFINE_TEMPLATE}
    assert entry.needs == ("solution",) and entry.provides == ("offpolicy_mask",)
    assert entry.title == registry.catalog()["critique-grpo"]["title"]
    assert RECIPE.advantage[0].kw == {"scale": "none"} and RECIPE.agg == "token-mean"
    assert RECIPE.objective.key == "policy-shaping" and RECIPE.objective.kw == {"gamma": 0.1, "eps_low": 0.2,
                                                                                 "eps_high": 0.2}


@pytest.mark.parametrize("score, kind, text", [
    (0.0, "simple_gt", "The generated solution is incorrect, the ground truth is 146."),
    (1.0, "simple_gt", "The generated solution is correct, the ground truth is 146."),
    (0.5, "simple", "The generated solution is correct."), (-1.0, "simple", "The generated solution is incorrect."),
])
def test_the_critique_says_correct_or_not_and_with_gt_the_solution(score, kind, text):
    assert critique_text(score, "146", kind) == text


def test_every_row_is_refined_under_its_response_and_critique():
    world = RefineWorld()
    critique_grpo(initial_batch(), context(world), template=COMPACT_TEMPLATE)
    (prompts,) = world.calls  # one call for the whole batch, one refinement per row
    expected = [COMPACT_TEMPLATE.format(prompt=f"q{g}", hint=feedback_text(
        f"y{g}/{i}", critique_text(INITIAL[g * G + i], f"S{g}", "simple_gt"), COMPACT_TEMPLATE))
        for g in range(2) for i in range(G)]
    assert prompts == expected
    assert prompts[1] == ("**Previous Solution**: y0/1\n**Critique**: The generated solution is correct, the ground "
                          "truth is S0.\n**Question**: q0")


def test_the_selected_refinement_replaces_the_groups_first_row_under_the_plain_prompt():
    """Group composition: G - 1 initial responses + the group's selected refinement, in its first row; masks; the
    prompt it is trained under is the group's plain one; known advantages (A = R - mean, no std)."""
    ctx = context(RefineWorld())
    out = critique_grpo(initial_batch(), ctx)
    assert out.group.tolist() == [0] * G + [1] * G
    assert out.completions == ["r/y0/1", "y0/1", "y0/2", "y0/3", "r/y1/1", "y1/1", "y1/2", "y1/3"]
    refined = torch.tensor([i % G == 0 for i in range(2 * G)])
    assert torch.equal(out.offpolicy_mask[refined], out.mask[refined]) and out.offpolicy_mask[~refined].sum() == 0
    assert out.mask[refined].sum(-1).tolist() == [4, 4] and out.mask[~refined].sum(-1).tolist() == [3] * 6
    assert out.prompt_ids[refined].unique().tolist() == [7, 8] and out.prompts[::G] == ["q0", "q1"]  # not 9: plain
    assert out.prompt_mask[refined].sum(-1).tolist() == [2, 2]
    assert out.scores.tolist() == [1.0, 1.0, 0, 0, 0.5, 0, 0, 0]
    A = grpo(out, **RECIPE.advantage[0].kw)[:, 0]
    assert A.tolist() == pytest.approx([0.5, 0.5, -0.5, -0.5, 0.375, -0.125, -0.125, -0.125])
    assert ctx.metrics == pytest.approx({"critique/initial_correct": 1 / 8, "critique/refined_correct": 6 / 8,
                                         "critique/fixed": 5 / 7, "critique/selected_correct": 1.0})


def test_groups_in_any_row_order_get_their_own_refinement():
    order = [4, 0, 5, 1, 6, 2, 7, 3]  # interleaved groups: each group's first row is the first in batch order
    out = critique_grpo(initial_batch(order), context(RefineWorld()))
    assert out.group.tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
    assert out.completions == ["r/y1/1", "r/y0/1", "y1/1", "y0/1", "y1/2", "y0/2", "y1/3", "y0/3"]
    assert out.prompt_ids[:2, 0].tolist() == [8, 7]


def test_with_several_refinement_rows_the_reference_repeats_the_one_selected():
    out = critique_grpo(initial_batch(), context(RefineWorld()), n_refine=2)
    assert out.completions[:G] == ["r/y0/1", "r/y0/1", "y0/2", "y0/3"]
    assert out.offpolicy_mask.sum(-1).tolist() == [4, 4, 0, 0, 4, 4, 0, 0]


@pytest.mark.parametrize("scores, chosen", [([0, 0.5, 1, 1], 2), ([0.2, 0.7, 0.7], 1), ([0, 0], 0), ([1.5, 1.0], 1)])
def test_the_first_perfect_refinement_else_the_first_best(scores, chosen):
    assert select_refinement(scores) == chosen


def on_the_batch(out, seed, scale):
    """Random logp leaf / old over `out`'s mask, with the recipe's advantage."""
    logp, old, _, _ = random_batch(seed, B=out.size, T=out.mask.shape[1], scale=scale)
    return logp, old, grpo(out, **RECIPE.advantage[0].kw).to(D), out.mask.to(D)


def test_catalog_1_no_refinement_is_clipped_grpo_with_a_mean_only_advantage():
    world = RefineWorld()
    out = critique_grpo(initial_batch(), context(world), n_refine=0)
    assert world.calls == [] and out.completions == initial_batch().completions and out.offpolicy_mask.sum() == 0
    logp, old, A, mask = on_the_batch(out, 0, scale=0.6)  # ratios far from 1: the clip binds
    R = out.rewards.to(D)
    assert torch.allclose(A[:, 0], R - R.view(2, G).mean(-1).repeat_interleave(G))  # no std
    ours, _ = LOSS.fn(logp, old, A, mask, offpolicy_mask=out.offpolicy_mask.to(D), **RECIPE.objective.kw)
    clipped, metrics = ppo_clip(logp, old, A, mask, eps_low=0.2, eps_high=0.2)
    assert torch.equal(ours, clipped) and metrics["clip/high"] + metrics["clip/low"] > 0


def test_catalog_2_refinement_tokens_are_never_clipped():
    """At ratios where PPO-clip has no gradient, a refinement token's gradient is -A d f / d logp / N, whatever
    pi_old is."""
    out = critique_grpo(initial_batch(), context(RefineWorld()))
    logp, _, A, mask = on_the_batch(out, 1, scale=0.0)
    off = out.offpolicy_mask.to(D)
    grads = []
    for log_ratio in (3.0, -3.0, 0.0):  # r = 20, 0.05, 1
        loss, _ = LOSS.fn(logp, logp.detach() - log_ratio, A, mask, offpolicy_mask=off, **RECIPE.objective.kw)
        grads.append(torch.autograd.grad(loss, logp)[0])
    assert torch.equal(grads[0] * off, grads[1] * off) and torch.equal(grads[0] * off, grads[2] * off)
    p = torch.exp(logp.detach())
    assert torch.allclose(grads[0] * off, -A * 0.1 * p / (p + 0.1) ** 2 / mask.sum() * off)
    assert bool((grads[0] * off).abs().sum() > 0)
    initial_positive = (1 - off) * mask * (A > 0)  # r = 20 > 1.2 with A > 0: clipped, no gradient
    assert bool(initial_positive.any()) and bool((grads[0] * initial_positive == 0).all())


@pytest.mark.parametrize("p_target", [0.02, 0.1, 0.5, 0.95])
def test_catalog_3_the_weight_on_a_refinement_token_is_gamma_p_1_minus_p_over_p_plus_gamma_squared(p_target):
    """Per-logit derivative of -loss through the recipe's objective, one refinement token with A = 1 under a softmax
    over 5 logits (as tests/objectives/test_policy_shaping.py)."""
    logits = torch.zeros(5, dtype=D)
    logits[2] = torch.log(torch.tensor(p_target / (1 - p_target) * 4, dtype=D))  # p(y = 2) = p_target
    logits.requires_grad_(True)
    logp = torch.log_softmax(logits, -1)[2].reshape(1, 1)
    one = torch.ones(1, 1, dtype=D)
    loss, _ = LOSS.fn(logp, torch.zeros_like(one), one, one, offpolicy_mask=one, **RECIPE.objective.kw)
    (g,) = torch.autograd.grad(-loss, logits)
    p, gamma = p_target, RECIPE.objective.kw["gamma"]
    assert g[2].item() == pytest.approx(gamma * p * (1 - p) / (p + gamma) ** 2, rel=1e-10)


def test_with_the_tiny_model_refinements_are_sampled_hinted_and_trained_plain():
    """The real rollout: the refinements are sampled from the refinement prompts (one per row) and the row that joins
    the group carries the group's plain prompt ids, so the training forward never sees the critique."""
    model, tokenizer = build_tiny(seed=0)
    engine = PromptSpy(HFEngine(model, tokenizer))
    task = get_task("addition")
    examples = task.sample(2, random.Random(0))
    torch.manual_seed(0)
    batch = turns(engine, task, examples, group_size=G, sampling=Sampling(6))
    batch.scores = batch.rewards.clone()

    def rollout(copies, *, group_size, task, rewarded):
        out = turns(engine, task, copies, group_size=group_size, sampling=Sampling(6))
        out.scores = out.rewards.clone()  # the reward stage's `scores`
        return out

    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=2, max_new_tokens=6,
                      pad_id=tokenizer.pad_token_id, examples=examples, rollout=rollout, task=task)
    out = critique_grpo(batch, ctx, template=COMPACT_TEMPLATE)
    plain, refining = engine.prompts
    assert plain == [e.prompt for e in examples] and len(refining) == 2 * G
    for i, prompt in enumerate(refining):
        example = examples[i // G]
        assert prompt.endswith(f"\n**Question**: {example.prompt}")
        assert f"the ground truth is {example.target}." in prompt and batch.completions[i] in prompt
    for g in range(2):
        row = g * G
        assert out.prompts[row] == examples[g].prompt
        ids = out.prompt_ids[row][out.prompt_mask[row] > 0]
        assert torch.equal(ids, batch.prompt_ids[row][batch.prompt_mask[row] > 0])
        assert tokenizer.decode(ids, skip_special_tokens=True) == examples[g].prompt
        assert torch.equal(out.offpolicy_mask[row], out.mask[row]) and out.offpolicy_mask[row + 1:row + G].sum() == 0


@pytest.mark.parametrize("kw, match", [
    (dict(critique="cot"), r"critique='cot'"), (dict(n_refine=4), r"n_refine=4 refinement rows leave no initial"),
    (dict(n_refine=-1), r"n_refine=-1"), (dict(template="{prompt}"), "must contain both"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    config = make_config("smoke", recipe="critique-grpo", **{**TINY, "recipe_overrides": {"group_transforms": kw}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_without_solutions_is_refused_at_start(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="critique-grpo", **TINY), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"group_transform:critique-grpo needs a solution per example"):
        trainer.pipeline.check_task(no_solution_task())
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_and_resumes_exactly(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="critique-grpo", **TINY), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert all(0 < r["shaping/offpolicy_frac"] < 1 for r in rows)  # one refinement row of G per group
    assert all(0 <= r["critique/refined_correct"] <= 1 for r in rows)
