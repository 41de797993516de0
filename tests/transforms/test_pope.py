"""POPE: hard problems get a guided copy with the shortest oracle prefix that succeeds; the oracle sits in the prompt
only; no prefix is GRPO; a run with guided copies resumes exactly."""
import itertools

import pytest
import torch

from tests.helpers import TINY, DigitFirst, metric_rows, resumes_exactly
from tests.transforms.test_ghpo import G, SOLUTION, rows
from workbench import registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.tasks.base import Example
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.pope import POPE_TEMPLATE, pope, shortest_solving

pytestmark = pytest.mark.covers("pope")
SENTENCE = POPE_TEMPLATE.split("{hint}")[0].split("{prompt}")[1]


class PrefixWorld:
    """ctx.rollout stand-in: the first sample of a guided group succeeds when the prompt shows at least
    `needed[question]` characters of the solution (None: never)."""

    def __init__(self, needed):
        self.needed, self.calls = needed, []

    def __call__(self, examples, *, group_size, task, rewarded=False, **_):
        assert rewarded and group_size == G
        prompts = [task.opening(e) for e in examples]
        self.calls.append(prompts)
        scores = []
        for p in prompts:
            question, shown = p.split(SENTENCE)
            need = self.needed[question]
            scores += [float(need is not None and len(shown) >= need and i == 0) for i in range(G)]
        return rows(prompts, scores, f"g{len(self.calls)}", list(range(len(prompts))))


NEEDED = {"q0": None, "q1": 2, "q2": 5, "q3": None}  # q0 is solved alone (not hard), q3 never
EXAMPLES = [Example(prompt=q, answer="", target=SOLUTION) for q in NEEDED]


def context(world):
    return StepContext(step=0, total_steps=10, seed=0, group_size=G, prompts_per_step=4, max_new_tokens=3,
                       examples=list(EXAMPLES), rollout=world, task=DigitFirst())


def first_batch():
    return rows(list(NEEDED), [float(q == "q0" and i == 0) for q in NEEDED for i in range(G)], "b", [0, 1, 2, 3])


def test_registered_with_the_catalogs_reading():
    entry = registry.get("group_transform", "pope")
    assert entry.defaults == {"fractions": (0.25, 0.5, 0.75), "template": POPE_TEMPLATE}
    assert entry.needs == ("solution",) and entry.title == registry.catalog()["pope"]["title"]


def test_hard_problems_get_a_guided_copy_with_the_shortest_prefix_that_succeeds():
    world = PrefixWorld(NEEDED)
    ctx = context(world)
    batch = first_batch()
    out = pope(first_batch(), ctx)
    assert [[p.split(SENTENCE)[0] for p in call] for call in world.calls] == [["q1", "q2", "q3"], ["q2", "q3"],
                                                                            ["q2", "q3"]]
    assert out.completions[:4 * G] == batch.completions  # the unguided groups stay
    assert out.group.tolist() == batch.group.tolist() + [4] * G + [5] * G  # q1's and q2's copies, new groups
    assert [p.split(SENTENCE)[1] for p in out.prompts[4 * G::G]] == ["ab", "abcdef"]  # 25 % and 75 % of 8 chars
    assert [e.prompt for e in ctx.examples[4:]] == ["q1", "q2"]  # group g answers ctx.examples[g]
    assert ctx.metrics == {"pope/hard_groups": 0.75, "pope/guided_groups": 0.5, "pope/prefix_fraction": 0.5}


def test_the_oracle_is_in_the_prompt_never_in_the_trained_response():
    """Catalog (2): the guided rows' responses are the policy's own samples (their masks the rollout's); the oracle
    text appears only in their prompts."""
    out = pope(first_batch(), context(PrefixWorld(NEEDED)))
    guided = out.select(torch.arange(4 * G, out.size))
    assert all(SOLUTION[:2] in p for p in guided.prompts)
    assert all(c.startswith("g") for c in guided.completions) and torch.equal(guided.mask, torch.ones(2 * G, 3))


@pytest.mark.parametrize("kw", [dict(fractions=())])
def test_no_prefix_is_grpo(kw):
    """Catalog (1)."""
    world = PrefixWorld(NEEDED)
    out = pope(first_batch(), context(world), **kw)
    assert world.calls == [] and out.completions == first_batch().completions
    assert torch.equal(grpo(out), grpo(first_batch()))


def test_the_search_returns_the_smallest_solving_fraction_and_is_monotone():
    """Catalog (3): a larger set of solving fractions never gives a longer prefix."""
    grid = (0.25, 0.5, 0.75)
    assert shortest_solving({0.25: False, 0.5: True, 0.75: True}, grid) == 0.5
    assert shortest_solving({0.25: False, 0.5: False, 0.75: False}, grid) is None
    for a in itertools.product([False, True], repeat=3):
        for b in itertools.product([False, True], repeat=3):
            if all(y or not x for x, y in zip(a, b)):  # b succeeds wherever a does
                fa, fb = shortest_solving(dict(zip(grid, a)), grid), shortest_solving(dict(zip(grid, b)), grid)
                assert fa is None or (fb is not None and fb <= fa)


@pytest.mark.parametrize("kw, match", [
    (dict(fractions=(0.0, 0.5)), r"increasing fractions in \(0, 1\]"), (dict(fractions=(0.75, 0.25)), "increasing"),
    (dict(template="{prompt}"), "must contain both"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="pope", **{**TINY, "recipe_overrides": {"group_transforms": kw}}),
                tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_run_with_guided_copies_resumes_exactly(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="pope", **TINY), tmp_path)
    assert all(r["pope/hard_groups"] > 0 for r in metric_rows(tmp_path / "straight"))
