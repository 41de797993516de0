"""HBPO's budget rollout: groups split into budget subgroups whose prompts announce the budget."""
import random

import pytest
import torch

from workbench import registry
from workbench.envs.base import Env, user
from workbench.episodes import episode_seed
from workbench.rewards.hbpo import budget_of, row_budgets
from workbench.rollout import Sampling
from workbench.rollout.hbpo import Budgeted, BudgetEnv, budgets_for, hbpo_rollout, with_budget
from workbench.tasks import Example, Task, get_task
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("hbpo-reward")


def test_budgets_default_to_fractions_of_max_new_tokens_rounded_half_up_and_at_least_one():
    assert budgets_for(4096) == (512, 1024, 2048, 2560)                 # the paper's, over its 4096 context
    assert budgets_for(16) == (2, 4, 8, 10)
    assert budgets_for(6) == (1, 2, 3, 4)                               # 0.75, 1.5, 3, 3.75 rounded half up
    assert budgets_for(1) == (1, 1, 1, 1)
    assert budgets_for(4096, budgets=[512, 1024, 2048, 2560]) == (512, 1024, 2048, 2560)  # given
    assert budgets_for(8, fractions=(1.0,)) == (8,)                     # b = max_new_tokens is allowed
    for bad in (dict(budgets=[]), dict(budgets=[0, 4]), dict(fractions=(0.5, 0.0))):
        with pytest.raises(ValueError, match="hbpo-reward"):
            budgets_for(8, **bad)
    for bad in (dict(budgets=[4, 9]), dict(fractions=(0.5, 1.2))):    # a budget above the cap: never met
        with pytest.raises(ValueError, match="exceed max_new_tokens = 8"):
            budgets_for(8, **bad)


def test_rows_keep_their_examples_group_and_announce_their_subgroups_budget(engine):
    task, G = get_task("addition"), 6
    examples = task.sample(3, random.Random(0))
    torch.manual_seed(0)
    batch = hbpo_rollout(engine, task, examples, group_size=G, sampling=Sampling(6))
    assert batch.size == 3 * G and batch.group.tolist() == [g for g in range(3) for _ in range(G)]
    budgets = [1, 1, 2, 2, 3, 4] * 3                                    # sizes [2, 2, 1, 1] of budgets (1, 2, 3, 4)
    assert [budget_of(p) for p in batch.prompts] == budgets
    assert row_budgets({"prompts": batch.prompts}, batch.size) == budgets  # what hbpo-reward reads back
    for i, p in enumerate(batch.prompts):
        assert p.startswith(examples[i // G].prompt + "\n")
    scores = [task.score(c, examples[i // G]) for i, c in enumerate(batch.completions)]
    assert batch.rewards.tolist() == scores                             # scored against the original example
    assert int(batch.mask.sum(-1).max()) <= 6                           # the cap stays max_new_tokens


def test_registered_under_the_reward_key_and_refuses_a_bad_template(engine):
    entry = registry.get("rollout", "hbpo-reward")
    assert entry.defaults["budgets"] is None and tuple(entry.defaults["fractions"]) == (0.125, 0.25, 0.5, 0.625)
    task = get_task("addition")
    with pytest.raises(ValueError, match="template"):
        hbpo_rollout(engine, task, task.sample(1, random.Random(0)), group_size=4, sampling=Sampling(4),
                     template="{prompt} in {budget} steps")


class Recorder(Env):
    """Remembers what reset was given; two opening messages, the user's last."""

    def reset(self, example, seed=None):
        self.seen = (example, seed)
        return [{"role": "system", "content": "be brief"}, user(example.prompt)], {"state": 0}

    def step(self, action):
        return [], 1.0, True, {"state": None}


def test_the_env_sees_the_original_example_and_the_plain_rollouts_seed():
    example = Example(prompt="1+1=", answer="2", target="2")
    env = BudgetEnv(Recorder(), "{prompt} | I will answer the question within {budget} tokens")
    messages, _ = env.reset(Budgeted(example, 7, 3), seed=123)
    assert env.env.seen == (example, episode_seed(example, 3))
    assert messages == [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": "1+1= | I will answer the question within 7 tokens"}]
    assert with_budget([], 5, "{prompt}\nI will answer the question within {budget} tokens") == [
        {"role": "user", "content": "I will answer the question within 5 tokens"}]


class EchoTask(Task):
    name = "echo"

    def make_example(self, rng):
        return Example(prompt=f"{rng.randrange(10)}?", answer="", target="1")

    def score(self, completion, example):
        return float(completion[:1].isdigit())

    def make_env(self):
        return Recorder()


def test_multi_message_environments_get_the_sentence_in_their_last_user_message(engine):
    task = EchoTask()
    examples = task.sample(2, random.Random(1))
    batch = hbpo_rollout(engine, task, examples, group_size=4, sampling=Sampling(3), budgets=[1, 3])
    assert batch.group.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [budget_of(p) for p in batch.prompts] == [1, 1, 3, 3] * 2
    assert all("be brief" in p for p in batch.prompts)


@pytest.mark.parametrize("overrides, message", [
    ({"fractions": []}, r"rollout 'hbpo-reward': hbpo-reward: fractions must be a non-empty list of numbers > 0"),
    ({"fractions": [0.5, -0.25]}, r"fractions must be a non-empty list of numbers > 0, got \[0.5, -0.25\]"),
    ({"budgets": [4, 0]}, r"budgets must be a non-empty list of ints >= 1, got \[4, 0\]"),
])
def test_budgets_it_cannot_take_are_refused_when_the_recipe_is_built(overrides, message):
    """They were checked against the run's max_new_tokens inside the rollout, i.e. at the first step."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("hbpo-advantage"), {"rollout": overrides}))
