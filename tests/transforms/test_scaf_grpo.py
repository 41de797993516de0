"""Scaf-GRPO's tiered hints: which groups get them, which level wins, which rows it replaces and under which prompt,
the refusals, and a training run that hints and resumes exactly."""
import pytest
import torch

from tests.helpers import TINY, DigitFirst, metric_rows, resumes_exactly
from tests.transforms.test_ghpo import G, rows
from workbench import registry
from workbench.context import StepContext
from workbench.tasks import get_task
from workbench.tasks.base import Example
from workbench.tasks.guidance import solution_parts
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.scaf_grpo import (SCAF_TEMPLATE, cliff_groups, hint_levels, lowest_solving_level,
                                            scaf_grpo)

pytestmark = pytest.mark.covers("scaf-grpo")
LABEL = "Solution Hints: "


class LevelWorld:
    """ctx.rollout stand-in for one sample per prompt: a hinted prompt is solved when its hint shows at least
    `needed[question]` characters of the solution (None: never)."""

    def __init__(self, needed: dict):
        self.needed, self.calls = needed, []

    def __call__(self, examples, *, group_size, task, rewarded=False, **_):
        assert group_size == 1 and rewarded
        prompts = [task.opening(e) for e in examples]
        self.calls.append(prompts)
        scores = [float(self.solved(p)) for p in prompts]
        batch = rows(prompts, [s for s in scores for _ in range(G)], f"h{len(self.calls)}", list(range(len(prompts))))
        return batch.select(torch.arange(0, batch.size, G))  # one row per prompt

    def solved(self, prompt):
        question = prompt.split("\n")[0].removeprefix("Question: ")
        shown = prompt.split(LABEL)[1]
        return self.needed[question] is not None and len(shown) >= self.needed[question]


NEEDED = {"q0": 1, "q1": 3, "q2": 8, "q3": None}  # q0 solves with 1 character shown, q2 with the whole solution
EXAMPLES = [Example(prompt=q, answer="", target="abcdefgh") for q in NEEDED]


def context(world, step=60):
    return StepContext(step=step, total_steps=100, seed=0, group_size=G, prompts_per_step=len(EXAMPLES),
                       max_new_tokens=3, examples=EXAMPLES, rollout=world, task=DigitFirst())


def first_batch(solved=("q3",)):
    scores = [float(q in solved and i == 2) for q in NEEDED for i in range(G)]
    return rows(list(NEEDED), scores, "b", list(range(len(NEEDED))))


def test_registered_with_the_references_settings():
    entry = registry.get("group_transform", "scaf-grpo")
    assert entry.defaults == {"warmup_steps": 50, "replace_num": 1, "plain_prompt": False, "template": SCAF_TEMPLATE}
    assert entry.needs == ("solution",) and entry.title == registry.catalog()["scaf-grpo"]["title"]


@pytest.mark.parametrize("actions, parts", [
    (["abcdefgh"], ["ab", "cd", "ef", "gh"]), (["46"], ["4", "6"]), (["abcde"], ["a", "b", "cd", "e"]),
    (["[1+2]", "[3*4]", "A:12"], ["[1+2]", "[3*4]", "A:12"]), (["a", "b", "c", "d", "e"], ["a", "b", "cd", "e"]),
])
def test_the_solution_is_cut_into_at_most_four_parts_that_rejoin_to_it(actions, parts):
    assert solution_parts(actions, 4) == parts and "".join(parts) == "".join(actions)


def test_levels_grow_one_part_at_a_time():
    task = get_task("calculator")
    example = task.eval_set(1)[0]
    levels = hint_levels(task, example)
    parts = solution_parts(task.expert_actions(example), 4)
    assert levels == [LABEL + "".join(parts[:k]) for k in range(1, len(parts) + 1)]
    assert hint_levels(DigitFirst(), EXAMPLES[0]) == [LABEL + "ab", LABEL + "abcd", LABEL + "abcdef", LABEL + "abcdefgh"]


def test_cliffs_are_groups_scored_all_zero_and_the_lowest_correct_level_wins():
    scores = torch.tensor([0.0, 0, 0, 0.5, -1, 0])
    assert cliff_groups(scores, torch.tensor([0, 0, 1, 1, 2, 2])) == [0]  # -1 is not 0: not a cliff (the reference)
    assert lowest_solving_level([0, 0, 1, 1]) == 2 and lowest_solving_level([0, 0.5, 1]) == 1
    assert lowest_solving_level([0, 0.5, 0.5]) is None  # no exactly-correct sample: not solved (the reference)


def test_the_least_hint_that_works_replaces_the_first_row_of_a_cliff_group():
    world = LevelWorld(NEEDED)
    ctx = context(world)
    batch = first_batch()
    out = scaf_grpo(first_batch(), ctx)
    assert [len(call) for call in world.calls] == [3, 3, 3, 3]  # q0, q1, q2 at every level; q3 was no cliff
    assert world.calls[0][0] == SCAF_TEMPLATE.format(prompt="q0", hint=LABEL + "ab")
    assert out.scores.tolist() == [1, 0, 0, 0] * 3 + batch.scores[12:].tolist()
    assert [out.prompts[g * G].split(LABEL)[1] for g in range(3)] == ["ab", "abcd", "abcdefgh"]  # levels 1, 2, 4
    assert out.completions[1:G] == batch.completions[1:G] and out.completions[12:] == batch.completions[12:]
    assert out.group.tolist() == batch.group.tolist()  # catalog (2): the group keeps its G rows
    assert ctx.metrics == {"scaf/cliff_groups": 0.75, "scaf/rescued_groups": 0.75, "scaf/hint_level": (1 + 2 + 4) / 3}


def test_no_level_succeeds_leaves_the_group_and_before_the_warm_up_nothing_is_sampled():
    world = LevelWorld({**NEEDED, "q0": None, "q1": None, "q2": None})
    batch = first_batch()
    out = scaf_grpo(first_batch(), context(world))
    assert out.completions == batch.completions and len(world.calls) == 4  # catalog (3)
    world = LevelWorld(NEEDED)
    ctx = context(world, step=49)
    out = scaf_grpo(first_batch(), ctx)
    assert world.calls == [] and out.completions == batch.completions  # catalog (1): only after the warm-up
    assert ctx.metrics["scaf/cliff_groups"] == 0.0


def test_plain_prompt_and_two_replacements():
    plain = scaf_grpo(first_batch(), context(LevelWorld(NEEDED)), plain_prompt=True)
    assert plain.prompts[::G] == ["q0", "q1", "q2", "q3"] and plain.scores[0] == 1  # hinted sample, plain prompt
    two = scaf_grpo(first_batch(), context(LevelWorld(NEEDED)), replace_num=2)
    assert two.scores.tolist()[:G] == [1, 1, 0, 0] and two.prompts[0] == "q0"
    assert two.prompts[1] == SCAF_TEMPLATE.format(prompt="q0", hint=LABEL + "ab")  # "6+1+1": plain, then hinted


@pytest.mark.parametrize("kw, match", [
    (dict(warmup_steps=-1), "warmup_steps=-1"), (dict(replace_num=3), "replace_num=3"),
    (dict(template="{hint}"), "must contain both"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    config = make_config("smoke", recipe="scaf-grpo", **{**TINY, "recipe_overrides": {"group_transforms": kw}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_run_with_hints_from_the_start_resumes_exactly(tmp_path):
    config = make_config("smoke", recipe="scaf-grpo", **{
        **TINY, "recipe_overrides": {"group_transforms": {"warmup_steps": 0}}})
    assert resumes_exactly(config, tmp_path)
    metrics = metric_rows(tmp_path / "straight")
    assert all(r["scaf/cliff_groups"] > 0 for r in metrics)  # the untrained model solves no addition
    assert all(r["scaf/rescued_groups"] <= r["scaf/cliff_groups"] for r in metrics)
