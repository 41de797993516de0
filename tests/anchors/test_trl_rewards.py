"""Reward functions across the TRL boundary, both ways, and TRL's multi-reward aggregation.

Ours in TRL 1.16: `GRPOTrainer(reward_funcs=[as_trl(...)])` trains a step on a tiny model built in code; TRL's
logged per-row rewards equal our function's on the same completions, and TRL's advantages equal our
`combine(...)` + `grpo(scale="batch", eps=1e-4)` of TRL's per-function values (both aggregations).
Theirs in ours: TRL's `think_format_reward` and `get_repetition_penalty_reward` as "module:function" reward keys.
"""
import warnings

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL reference not installed; `make install` installs the `refs` extra")
datasets = pytest.importorskip("datasets")

from tests.helpers import TINY, metric_rows, run_task  # noqa: E402
from workbench.advantages.group import grpo  # noqa: E402
from workbench.batch import RolloutBatch  # noqa: E402
from workbench.rewards.aggregate import combine  # noqa: E402
from workbench.rewards.interop import as_trl  # noqa: E402
from workbench.train.config import make_config  # noqa: E402

G = 4


def digit_share(completions, **_):
    """A TRL-style reward of our own test: the share of digits in the text (varies on random text)."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def vowel_count(completions, **_):
    return [float(sum(ch in "aeiou" for ch in c)) for c in completions]


class Recorded:
    """A reward function that remembers the last keyword arguments TRL called it with."""

    def __init__(self, fn):
        self.fn, self.__name__, self.seen = fn, fn.__name__, {}

    def __call__(self, **kwargs):
        self.seen = kwargs
        return self.fn(**kwargs)


def trl_step(tmp_path, reward_funcs, aggregation):
    from trl import GRPOConfig, GRPOTrainer

    from workbench.models import build_tiny

    model, tok = build_tiny(seed=0)
    data = datasets.Dataset.from_list([{"prompt": f"{a}+{b}=", "solution": str(a + b)}
                                       for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]])
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=G,
                      max_completion_length=12, max_steps=1, report_to=[], logging_steps=1, use_cpu=True,
                      save_strategy="no", scale_rewards="batch", beta=0.0, temperature=1.5,
                      multi_objective_aggregation=aggregation, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=data,
                              processing_class=tok)
        trainer.train()
    return trainer, tok


@pytest.mark.covers("soft-overlong", "grpo")
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_ours_train_inside_trl_and_trl_aggregates_as_we_do(tmp_path, aggregation):
    ours = Recorded(as_trl("soft-overlong", max_completion_len=12, buffer=8, max_new_tokens=12))
    trainer, _ = trl_step(tmp_path, [digit_share, vowel_count, ours], aggregation)
    logs = trainer._logs
    completions = list(logs["completion"])
    assert ours.seen["completions"] == completions and "trainer_state" in ours.seen   # TRL's signature reached us
    lengths = [len(ids) for ids in ours.seen["completion_ids"]]
    expected = [0.0 if n <= 4 else -1.0 if n > 12 else (4 - n) / 8 for n in lengths]  # DAPO Eq. 13, L=12, C=8
    assert list(logs["rewards"]["soft-overlong"]) == pytest.approx(expected) and len(set(lengths)) > 1
    table = torch.tensor([list(logs["rewards"][name]) for name in ("digit_share", "vowel_count", "soft-overlong")],
                         dtype=torch.float64).T                                    # [B, K]
    assert table[:, 1].std() > 0                                                   # the check has something to see
    group = torch.arange(len(completions) // G).repeat_interleave(G)
    rewards, _ = combine(table, torch.ones(3), group, aggregation)
    batch = RolloutBatch.from_rewards(rewards, group=group)
    expected = grpo(batch, scale="batch", eps=1e-4)[:, 0]
    assert torch.allclose(torch.tensor(list(logs["advantages"]), dtype=torch.float64), expected, atol=1e-5)


@pytest.mark.covers("format-reward", "repetition-penalty")
def test_trl_rewards_run_in_our_pipeline_as_module_function_keys():
    from trl.rewards import get_repetition_penalty_reward, think_format_reward

    from tests.train.test_pipeline import reward_stage

    completions = ("<think>a</think>12", "345 345 345", "<think>x<think>y</think>6")
    metrics = {}
    out = reward_stage([["trl.rewards:think_format_reward", {"weight": 0.5}],
                        ["trl.rewards:get_repetition_penalty_reward", {"build": {"ngram_size": 2}}]],
                       completions=completions, metrics=metrics)
    chats = [[{"role": "assistant", "content": c}] for c in completions]
    fmt = think_format_reward(chats)
    ids = [r[m > 0].tolist() for r, m in zip(out.response_ids, out.mask)]
    rep = get_repetition_penalty_reward(ngram_size=2)(completion_ids=ids)
    assert fmt == [1.0, 0.0, 0.0]
    expected = out.scores + 0.5 * torch.tensor(fmt) + torch.tensor(rep)
    assert torch.allclose(out.rewards, expected.float())
    assert metrics["rewards/think_format_reward/mean"] == pytest.approx(1 / 3)
    assert metrics["rewards/repetition_penalty_reward/mean"] == pytest.approx(sum(rep) / 3)


@pytest.mark.covers("format-reward")
def test_a_run_trains_on_a_trl_reward_and_logs_it(tmp_path):
    overrides = {"rewards": [["trl.rewards:think_format_reward", {"weight": 0.5}]]}
    config = make_config("smoke", recipe="grpo", **{**TINY, "steps": 2, "recipe_overrides": overrides})
    run_task(config, tmp_path)
    rows = metric_rows(tmp_path)
    assert all(r["rewards/think_format_reward/mean"] == 0.0 for r in rows)  # a random policy writes no <think>
    assert all(r["rewards/task/mean"] == pytest.approx(r["accuracy"]) for r in rows)
