"""iGRPO's two-stage rollout: the drafts never reach the batch, the best draft is appended to the prompt the GRPO group
is sampled from and trained under, no draft is GRPO (catalog tests 1-3), the refusals, and a run that resumes."""
import random

import pytest
import torch

from tests.helpers import TINY, metric_rows, resumes_exactly
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.models import char_tokenizer
from workbench.recipes import get_recipe
from workbench.rollout import Sampling, turns
from workbench.rollout.igrpo import IGRPO_TEMPLATE, best_drafts, igrpo_rollout
from workbench.tasks import get_task
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("igrpo")
G = 4


class Spy:
    """An engine that records each call's prompts and samples per prompt."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, prompts, n=1, **kw):
        self.calls.append((list(prompts), n))
        return self.engine.generate(prompts, n=n, **kw)


def conditioned(prompt: str, draft: str) -> str:
    return IGRPO_TEMPLATE.format(prompt=prompt, hint=draft)


def test_registered_with_the_catalogs_reading():
    entry = registry.get("rollout", "igrpo")
    assert entry.defaults == {"n_drafts": None, "template": IGRPO_TEMPLATE}
    assert IGRPO_TEMPLATE == "{prompt}\nPrevious attempt: {hint}\nImprove it."
    assert entry.title == registry.catalog()["igrpo"]["title"] and get_recipe("igrpo").rollout.key == "igrpo"


def test_the_best_draft_is_the_first_argmax_of_each_prompt():
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5])
    assert best_drafts(rewards, 4).tolist() == [1, 6]
    assert best_drafts(rewards, 2).tolist() == [1, 2, 4, 6]  # ties: the first


def test_the_best_draft_conditions_the_groups_prompt():
    """Two drafts per prompt (G / 2), scripted: prompt 0's second is right, prompt 1's two are wrong (a tie: the
    first). The refinements are sampled from, and carry, the prompt with the best draft appended."""
    task = get_task("addition")
    examples = task.sample(2, random.Random(0))
    right = str(sum(int(x) for x in examples[0].prompt.rstrip("=").split("+")))
    drafts = iter(["1<eos>", right + "<eos>", "2<eos>", "3<eos>"])

    def policy(history):
        return "7<eos>" if "Previous attempt" in history else next(drafts)

    engine = Spy(ScriptedEngine(char_tokenizer(), policy))
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=2, max_new_tokens=6)
    batch = igrpo_rollout(engine, task, examples, group_size=G, sampling=Sampling(6), ctx=ctx)
    (plain, n_drafts), (hinted, n_refined) = engine.calls
    assert plain == [e.prompt for e in examples] and n_drafts == 2
    assert hinted == [conditioned(examples[0].prompt, right), conditioned(examples[1].prompt, "2")] and n_refined == 2
    assert batch.group.tolist() == [0, 0, 1, 1] and batch.completions == ["7"] * 4
    assert batch.prompts == [p for p in hinted for _ in range(2)]  # trained under the draft-conditioned prompt
    tok = engine.tokenizer
    decoded = [tok.decode(ids[m > 0], skip_special_tokens=True) for ids, m in zip(batch.prompt_ids, batch.prompt_mask)]
    assert decoded == batch.prompts
    assert ctx.metrics == {"igrpo/draft_reward": 0.25, "igrpo/best_draft_reward": 0.5, "igrpo/refined_reward": 0.0}


def test_catalog_1_no_draft_is_the_grpo_rollout(engine):
    task = get_task("addition")
    examples = task.sample(2, random.Random(1))
    torch.manual_seed(3)
    batch = igrpo_rollout(engine, task, examples, group_size=G, sampling=Sampling(6), n_drafts=0)
    torch.manual_seed(3)
    plain = turns(engine, task, examples, group_size=G, sampling=Sampling(6))
    for name in ("response_ids", "mask", "prompt_ids", "prompt_mask", "rewards", "group", "mu_logp"):
        assert torch.equal(getattr(batch, name), getattr(plain, name)), name
    assert batch.completions == plain.completions and batch.prompts == plain.prompts
    greedy = igrpo_rollout(engine, task, examples, group_size=1, sampling=Sampling(6, greedy=True))
    assert greedy.prompts == [e.prompt for e in examples]  # evaluation and baselines draft nothing


def test_catalog_2_drafts_are_not_in_the_batch(engine):
    """Every row of the batch is a stage-2 sample: its prompt ids are a draft-conditioned prompt, so no stage-1 token
    is in the training forward (zero gradient); G - N_d rows per prompt."""
    spy = Spy(engine)
    task = get_task("addition")
    examples = task.sample(3, random.Random(2))
    torch.manual_seed(0)
    batch = igrpo_rollout(spy, task, examples, group_size=G, sampling=Sampling(6))
    (plain, n_drafts), (hinted, n_refined) = spy.calls
    assert plain == [e.prompt for e in examples] and (n_drafts, n_refined) == (2, 2)
    assert batch.size == 3 * 2 and batch.group.tolist() == [0, 0, 1, 1, 2, 2]
    tok = engine.tokenizer
    for i, (ids, m) in enumerate(zip(batch.prompt_ids, batch.prompt_mask)):
        prompt = tok.decode(ids[m > 0], skip_special_tokens=True)
        assert prompt == hinted[i // 2] and prompt.startswith(examples[i // 2].prompt + "\nPrevious attempt: ")


def test_catalog_3_refinement_advantages_are_zero_mean_in_the_group(engine):
    task = get_task("addition")
    torch.manual_seed(1)
    batch = igrpo_rollout(engine, task, task.sample(3, random.Random(3)), group_size=8, sampling=Sampling(6))
    assert batch.group.tolist() == [g for g in range(3) for _ in range(4)]
    batch.rewards = torch.rand(batch.size, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    A = grpo(batch, **get_recipe("igrpo").advantage[0].kw)[:, 0]
    assert A.view(3, 4).sum(-1).abs().max() < 1e-6 and A.abs().sum() > 0  # float32: the batch mask's dtype


@pytest.mark.parametrize("override, match", [
    ({"n_drafts": 3}, r"n_drafts=3 drafts leave 1 refinement\(s\) in a group of 4"),
    ({"n_drafts": -1}, r"n_drafts=-1"), ({"n_drafts": 1.5}, r"n_drafts=1.5"),
    ({"template": "{prompt} Improve it."}, "must contain both"),
])
def test_bad_settings_are_refused_before_training(tmp_path, override, match):
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="igrpo", **{**TINY, "recipe_overrides": {"rollout": override}}),
                tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_group_of_two_has_no_room_for_drafts(tmp_path):
    with pytest.raises(ValueError, match=r"n_drafts=1 drafts leave 1 refinement\(s\) in a group of 2"):
        Trainer(make_config("smoke", recipe="igrpo", **{**TINY, "group_size": 2}), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_and_resumes_exactly(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="igrpo", **TINY), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert all(r["igrpo/best_draft_reward"] >= r["igrpo/draft_reward"] for r in rows)
