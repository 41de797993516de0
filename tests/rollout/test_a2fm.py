"""A^2FM's mode-stratified rollout: every group holds every mode, forced by a prompt tag, under its own group id."""
import random

import pytest
import torch

from tests.rollout.scripted import ScriptedEngine
from workbench.models import char_tokenizer
from workbench.rewards.a2fm import MODES, a2fm_reward, mode_tag, row_modes
from workbench.rewards.stage import reward_columns
from workbench.rollout import Sampling, turns
from workbench.rollout.a2fm import a2fm_rollout, mode_split
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("apo-a2fm")

SAMPLING = Sampling(max_new_tokens=16)


def mode_policy(task, examples):
    """Right answers at a mode-dependent cost: instant "A:46", reasoning "hmm A:46", agentic a calculator call
    "[12+34]" first, then "A:46"."""
    def policy(history):
        example = next(e for e in examples if e.prompt in history)
        if "<agentic>" in history and "]" not in history:
            return task.expert_actions(example)[0]
        return ("hmm " if "<reasoning>" in history else "") + example.target + "<eos>"
    return policy


@pytest.mark.parametrize("group_size", [3, 4, 5, 7])
def test_every_group_holds_every_mode_in_order_under_its_id(group_size):
    """Catalog test (3)."""
    task = get_task("calculator", n_operands=2)
    examples = task.sample(3, random.Random(0))
    engine = ScriptedEngine(char_tokenizer(), mode_policy(task, examples))
    batch = a2fm_rollout(engine, task, examples, group_size=group_size, sampling=SAMPLING)
    sizes = mode_split(group_size)
    assert sum(sizes) == group_size and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert batch.group.tolist() == [g for g in range(3) for _ in range(group_size)]
    expected = [m for m, n in zip(MODES, sizes) for _ in range(n)]
    for g, example in enumerate(examples):
        rows = range(g * group_size, (g + 1) * group_size)
        assert [row_modes([""], {"prompts": [batch.prompts[i]]})[0] for i in rows] == expected
        assert all(batch.prompts[i].endswith(example.prompt) for i in rows)
        assert batch.rewards[list(rows)].tolist() == [1.0] * group_size  # the env verifies the tagged prompt's answer


def test_rows_are_the_per_mode_turns_rollouts_merged_and_rewarded_by_mode():
    task = get_task("calculator", n_operands=2)
    examples = task.sample(2, random.Random(1))
    engine = ScriptedEngine(char_tokenizer(), mode_policy(task, examples))
    batch = a2fm_rollout(engine, task, examples, group_size=3, sampling=SAMPLING)
    tagged = [turns(engine, task, [e.__class__(mode_tag(m) + e.prompt, e.answer, e.target) for e in examples],
                    group_size=1, sampling=SAMPLING) for m in MODES]
    for g in range(2):
        for k in range(3):
            row, ref = batch.select(torch.tensor([3 * g + k])), tagged[k].select(torch.tensor([g]))
            assert row.completions == ref.completions and row.prompts == ref.prompts
            assert torch.equal(row.response_ids[:, :ref.response_ids.shape[1]], ref.response_ids)
    batch.scores = batch.rewards.clone()
    columns = reward_columns(batch, examples, type("Ctx", (), {"max_new_tokens": 16, "step": 0, "total_steps": 1}))
    out = a2fm_reward(**columns)
    assert [len(steps) for steps in batch.turn_info] == [1, 1, 2] * 2 and batch.scores.tolist() == [1.0] * 6
    for g in range(2):  # all right: the cheapest mode earns the most (agentic: more tokens and a tool call)
        instant, reasoning, agentic = out[3 * g:3 * g + 3]
        assert instant > reasoning > agentic >= 0.9


def test_the_tiny_model_samples_every_mode_with_masks_and_mu(engine):
    task = get_task("addition")
    examples = task.sample(2, random.Random(2))
    torch.manual_seed(0)
    batch = a2fm_rollout(engine, task, examples, group_size=4, sampling=SAMPLING)
    assert batch.size == 8 and batch.group.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert batch.prompt_ids.shape[0] == 8 and (batch.mask.sum(-1) > 0).all()
    assert torch.equal(batch.mu_logp != 0, batch.mask > 0)
    assert [row_modes([""], {"prompts": [p]})[0] for p in batch.prompts[:4]] == ["instant", "instant", "reasoning",
                                                                                  "agentic"]


def test_bad_group_sizes_and_modes_are_clear_errors():
    task = get_task("addition")
    engine = ScriptedEngine(char_tokenizer(), lambda h: "1<eos>")
    with pytest.raises(ValueError, match="group_size must be >= 3"):
        a2fm_rollout(engine, task, task.sample(1, random.Random(0)), group_size=2, sampling=SAMPLING)
    with pytest.raises(ValueError, match="modes must be distinct"):
        a2fm_rollout(engine, task, task.sample(1, random.Random(0)), group_size=4, sampling=SAMPLING,
                     modes=("instant", "instant"))
    assert mode_split(2, modes=("instant", "agentic")) == [1, 1]
