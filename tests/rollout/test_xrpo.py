"""XRPO's rollout planning: the t quantile and priority (known values), where the extra samples go, the budget kept,
and exemplars only for prompts with no success."""
import math
import random

import pytest

from tests.helpers import TINY, metric_rows, resumes_exactly
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.context import StepContext
from workbench.models import char_tokenizer
from workbench.rollout import Sampling
from workbench.rollout.xrpo import allocate, half_width, priority, t_quantile, xrpo_rollout
from workbench.tasks import get_task
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("xrpo")


@pytest.mark.parametrize("dof, t", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (7, 2.3646), (10, 2.2281),
                                    (15, 2.1314), (30, 2.0423)])
def test_t_quantile_is_the_tables(dof, t):
    assert t_quantile(0.95, dof) == pytest.approx(t, abs=5e-5)
    assert t_quantile(0.99, 5) == pytest.approx(4.0321, abs=5e-5)


def test_priority_is_ci_shrinkage_plus_the_exploration_bonus():
    h3, h4 = t_quantile(0.95, 2) * 0.5 / math.sqrt(3), t_quantile(0.95, 3) * 0.5 / math.sqrt(4)
    assert half_width(0.5, 3, 0.05) == pytest.approx(h3) and half_width(0.5, 1, 0.05) == 0.0
    assert priority(0.5, 3, 10, alpha=0.05, lam=0.1) == pytest.approx(h3 - h4 + 0.1 * math.sqrt(math.log(11) / 3))
    assert priority(0.0, 3, 10, alpha=0.05, lam=0.0) == 0.0


def test_prompts_without_spread_get_nothing_once_the_bonus_is_below_every_shrinkage():
    """Catalog (1): with the bonus off (or small), only prompts with reward spread receive extra samples."""
    assert allocate([0.0, 0.5, 0.0, 0.3], [2, 2, 2, 2], 8, 8, alpha=0.05, lam=0.0)[::2] == [0, 0]
    extra = allocate([0.0, 0.5, 0.0, 0.3], [2, 2, 2, 2], 8, 8, alpha=0.05, lam=0.01)
    assert extra[0] == extra[2] == 0 and sum(extra) == 8
    assert allocate([0.0] * 4, [2] * 4, 8, 8, alpha=0.05, lam=0.1) == [2, 2, 2, 2]  # the bonus alone spreads them


def scripted(solved: set[str]):
    """Answers the prompts in `solved` correctly, every other one wrongly."""
    def policy(history):
        question = history.split("Question: ")[-1].split("\n")[0] if "Question: " in history else history
        question = question.replace("<bos>", "").strip()
        if question in solved:
            a, b = question.rstrip("=").split("+")
            return f"{int(a) + int(b)}<eos>"
        return "x<eos>"
    return policy


def test_the_budget_is_kept_and_only_unsolved_prompts_get_exemplars():
    """Catalog (2) and (3)."""
    tok = char_tokenizer()
    task = get_task("addition")
    examples = task.sample(4, random.Random(2))
    engine = ScriptedEngine(tok, scripted({examples[0].prompt, examples[2].prompt}))
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=4, prompts_per_step=4, max_new_tokens=6,
                      component="rollout:xrpo")
    batch = xrpo_rollout(engine, task, examples, group_size=4, sampling=Sampling(6), ctx=ctx, initial=2, lam=0.1)
    assert batch.size == 16 and sorted(batch.group.tolist()) == batch.group.tolist()
    for row in range(batch.size):
        seeded = "Question: " in batch.prompts[row]
        q = int(batch.group[row])
        assert not seeded or q in (1, 3)  # prompts 0 and 2 were solved: never seeded
        assert seeded or batch.prompts[row] == examples[q].prompt
    assert ctx.metrics["xrpo/seeded"] == sum("Question: " in p for p in batch.prompts) > 0
    assert ctx.metrics["xrpo/extra_share"] == 0.5


@pytest.mark.parametrize("override, match", [
    ({"initial": 5}, r"initial=5 samples per prompt exceed the budget of group_size=4"),
    ({"alpha": 1.5}, "alpha=1.5"), ({"rounds": 0}, "rounds=0"),
])
def test_bad_settings_are_refused_before_training(tmp_path, override, match):
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="xrpo", **{**TINY, "recipe_overrides": {"rollout": override}}),
                tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_registered_and_the_recipe_resumes_exactly(tmp_path):
    assert registry.get("rollout", "xrpo").defaults == {"initial": 2, "rounds": 2, "alpha": 0.05, "lam": 0.1,
                                                        "n_exemplars": 1}
    assert resumes_exactly(make_config("smoke", recipe="xrpo", **TINY), tmp_path)
    assert all(r["xrpo/extra_share"] == 0.5 for r in metric_rows(tmp_path / "straight"))
