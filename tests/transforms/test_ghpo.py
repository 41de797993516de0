"""GHPO's staged hints: which groups are re-sampled at which hint length, what replaces them, the reduction to GRPO,
the refusals, and a training run that hints and resumes exactly."""
import pytest
import torch

from tests.helpers import TINY, DigitFirst, metric_rows, no_solution_task, resumes_exactly
from workbench import registry
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.tasks.base import Example
from workbench.tasks.guidance import GHPO_TEMPLATE
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.ghpo import all_wrong_groups, ghpo

pytestmark = pytest.mark.covers("ghpo")
G = 4
SOLUTION = "abcdefgh"  # 8 characters: hints of 2, 4 and 6 at 0.25, 0.5, 0.75
HINT = GHPO_TEMPLATE.split("{hint}")[0].split("{prompt}")[1]  # the sentence between the problem and the hint


def hint_of(prompt: str) -> str:
    return prompt.split(HINT)[1] if HINT in prompt else ""


def rows(prompts: list[str], scores: list[float], tag: str, groups: list[int]) -> RolloutBatch:
    """G rows per prompt (what a rollout returns), completions named tag/group/row, P = 2, T = 3."""
    n = len(scores)
    s = torch.tensor(scores, dtype=torch.float32)
    return RolloutBatch(
        response_ids=torch.full((n, 3), 5), mask=torch.ones(n, 3), group=torch.tensor(groups).repeat_interleave(G),
        rewards=s, scores=s.clone(), prompt_ids=torch.full((n, 2), 7), prompt_mask=torch.ones(n, 2),
        mu_logp=torch.zeros(n, 3), truncated=torch.zeros(n, dtype=torch.bool),
        completions=[f"{tag}/{groups[i // G]}/{i % G}" for i in range(n)], prompts=[p for p in prompts for _ in range(G)])


class HintWorld:
    """ctx.rollout stand-in: a group's first sample solves its prompt when the hint holds at least `needed[prompt]`
    characters of the solution (None: never); records the prompts it was asked with."""

    def __init__(self, needed: dict):
        self.needed, self.calls = needed, []

    def solves(self, prompt: str) -> bool:
        plain = prompt.split(HINT)[0]
        return self.needed[plain] is not None and len(hint_of(prompt)) >= self.needed[plain]

    def __call__(self, examples, *, group_size, task, rewarded=False, **_):
        assert group_size == G and rewarded  # replacing rows must be rewarded as the batch's own
        prompts = [task.opening(e) for e in examples]
        self.calls.append(prompts)
        scores = [float(self.solves(p) and i == 0) for p in prompts for i in range(G)]
        return rows(prompts, scores, f"h{len(self.calls)}", list(range(len(examples))))


NEEDED = {"q0": 0, "q1": 2, "q2": 4, "q3": 6, "q4": None}  # q0 solved alone; q4 never
EXAMPLES = [Example(prompt=q, answer="", target=SOLUTION) for q in NEEDED]


def context(world, step=0):
    return StepContext(step=step, total_steps=10, seed=0, group_size=G, prompts_per_step=len(EXAMPLES),
                       max_new_tokens=3, examples=EXAMPLES, rollout=world, task=DigitFirst())


def first_batch():
    scores = [float(q == "q0" and i == 1) for q in NEEDED for i in range(G)]
    return rows(list(NEEDED), scores, "b", list(range(len(NEEDED))))


def test_registered_with_the_references_stages():
    entry = registry.get("group_transform", "ghpo")
    assert entry.defaults == {"fractions": (0.25, 0.5, 0.75), "template": GHPO_TEMPLATE, "start_step": 0}
    assert entry.needs == ("solution",) and entry.title == registry.catalog()["ghpo"]["title"]


def test_all_wrong_groups_are_those_without_a_positive_score():
    scores = torch.tensor([0.0, 0, 1, 0, -1, -0.5, 0, 0.5])
    assert all_wrong_groups(scores, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])) == [0, 2]


def test_hints_escalate_until_a_sample_succeeds():
    """Catalog (2): a hint is round(omega * len(solution)) characters, longer at each stage, and only the groups
    still all wrong are re-sampled."""
    world = HintWorld(NEEDED)
    ctx = context(world)
    out = ghpo(first_batch(), ctx)
    assert [[p.split(HINT)[0] for p in call] for call in world.calls] == [
        ["q1", "q2", "q3", "q4"], ["q2", "q3", "q4"], ["q3", "q4"]]
    assert [[hint_of(p) for p in call] for call in world.calls] == [
        ["ab"] * 4, ["abcd"] * 3, ["abcdef"] * 2]
    assert [hint_of(p) for p in out.prompts[::G]] == ["", "ab", "abcd", "abcdef", "abcdef"]  # trained prompts
    assert out.scores.tolist() == [0, 1, 0, 0] + [1, 0, 0, 0] * 3 + [0] * 4
    assert ctx.metrics == {"ghpo/hinted_groups": 4 / 5, "ghpo/hint_fraction": (0.25 + 0.5 + 0.75 + 0.75) / 5,
                           "ghpo/unsolved_groups": 1 / 5}


def test_groups_with_a_correct_sample_are_never_touched():
    """Catalog (1): rows, order and group ids of solved groups are the batch's own; groups stay together in order."""
    batch = first_batch()
    out = ghpo(first_batch(), context(HintWorld(NEEDED)))
    assert out.completions[:G] == batch.completions[:G] and torch.equal(out.scores[:G], batch.scores[:G])
    assert out.group.tolist() == batch.group.tolist() and out.size == batch.size
    assert out.completions[G:2 * G] == [f"h1/0/{i}" for i in range(G)]  # q1: the first stage's samples
    assert out.completions[4 * G:] == [f"h3/1/{i}" for i in range(G)]   # q4: the last stage's failures


@pytest.mark.parametrize("kw, step", [(dict(fractions=()), 0), (dict(start_step=5), 4)])
def test_without_hints_it_is_grpo(kw, step):
    """Catalog (3): no stage (or a step before start_step) samples nothing and leaves GRPO's advantages."""
    world = HintWorld(NEEDED)
    batch = first_batch()
    out = ghpo(first_batch(), context(world, step), **kw)
    assert world.calls == [] and out.completions == batch.completions
    assert torch.equal(grpo(out), grpo(batch))


@pytest.mark.parametrize("kw, match", [
    (dict(fractions=(0.5, 0.25)), "increasing fractions"), (dict(fractions=(0.5, 1.5)), r"in \[0, 1\]"),
    (dict(template="{prompt}"), "must contain both"), (dict(start_step=-1), "start_step=-1"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    config = make_config("smoke", recipe="ghpo", **{**TINY, "recipe_overrides": {"group_transforms": kw}})
    with pytest.raises(ValueError, match=match):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_without_solutions_is_refused_at_start(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="ghpo", **TINY), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"group_transform:ghpo needs a solution per example .* task 'trl' has none\. "
                                         r"Train it on a task that does: --task .*addition"):
        trainer.pipeline.check_task(no_solution_task())  # as run_task does
    assert not (tmp_path / "run").exists()


def test_a_run_hints_its_failed_groups_and_resumes_exactly(tmp_path):
    """The untrained tiny model fails every addition: every group is re-sampled at each stage, on hinted prompts."""
    config = make_config("smoke", recipe="ghpo", **TINY)
    assert resumes_exactly(config, tmp_path)
    metrics = metric_rows(tmp_path / "straight")
    assert all(0 < r["ghpo/hinted_groups"] <= 1 for r in metrics)
    assert all(r["ghpo/unsolved_groups"] <= r["ghpo/hinted_groups"] for r in metrics)
