"""EAPO's sample set: one row per round with its history as the prompt (the trainer scores exactly the sampled
tokens), and the adaptive downsampling to a multiple of the data-parallel size."""
from collections import Counter

import pytest
import torch

from tests.helpers import seeded
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.envs.base import Env, tool, user
from workbench.models import build_tiny
from workbench.rewards.eapo import ROUND, ROUNDS
from workbench.rollout import HFEngine, Sampling, policy_forward, turns
from workbench.tasks import Example, Task
from workbench.transforms.eapo import downsample, split_rounds

pytestmark = pytest.mark.covers("eapo")
PAD = 0


def ctx(**kw) -> StepContext:
    return StepContext(**{**dict(step=0, total_steps=10, seed=0, group_size=2, prompts_per_step=2,
                                 max_new_tokens=8, pad_id=PAD), **kw})


def episode_batch() -> RolloutBatch:
    """Four hand-made episodes (3, 1, 2 and 2 rounds; observations are the 9x tokens), two groups."""
    rows = [  # (prompt, [(action tokens, observation tokens), ...])
        ([5, 6, 7], [([11, 12], [90, 91]), ([13], [92]), ([14, 15, 2], [])]),
        ([8, 9], [([21, 22, 2], [])]),
        ([5, 6, 7], [([31], [93, 94]), ([32, 33], [])]),
        ([5, 6, 7], [([41, 42], [95]), ([43, 2], [])]),
    ]
    return build_episodes(rows, group=[0, 0, 1, 1], rewards=[1.0, 0.5, 1.0, 0.0],
                          turn_rewards=[[0.0, 0.0, 1.0], [0.5, 0, 0], [0.0, 1.0, 0], [0.0, 0.0, 0]],
                          truncated=[False, False, True, False])


def build_episodes(rows, *, group, rewards, turn_rewards=None, truncated=None) -> RolloutBatch:
    """A multi-turn batch as `turns` lays it out: rows of (prompt tokens, [(action tokens, observation tokens)]),
    left-padded prompts, per-step turn ids and step infos, random rollout log-probs on the action tokens."""
    B, P = len(rows), max(len(prompt) for prompt, _ in rows)
    T = max(sum(len(a) + len(o) for a, o in steps) for _, steps in rows)
    ids, mask = torch.full((B, T), PAD), torch.zeros(B, T)
    turn, prompt_ids, prompt_mask = torch.full((B, T), -1), torch.full((B, P), PAD), torch.zeros(B, P)
    turn_info = []
    for i, (prompt, steps) in enumerate(rows):
        prompt_ids[i, P - len(prompt):], prompt_mask[i, P - len(prompt):] = torch.tensor(prompt), 1
        pos, info = 0, []
        for s, (action, obs) in enumerate(steps):
            for tokens, m in ((action, 1.0), (obs, 0.0)):
                ids[i, pos:pos + len(tokens)], mask[i, pos:pos + len(tokens)] = torch.tensor(tokens), m
                turn[i, pos:pos + len(tokens)] = s
                pos += len(tokens)
            info.append({"state": (i, s), "tool_error": None, "action": f"a{i}{s}"})
        turn_info.append(info)
    mu = -torch.rand(B, T, generator=seeded(0)) * mask
    S = max(len(steps) for _, steps in rows)
    return RolloutBatch(
        response_ids=ids, mask=mask, group=torch.tensor(group), rewards=torch.tensor(rewards),
        scores=torch.tensor(rewards), prompt_ids=prompt_ids, prompt_mask=prompt_mask, mu_logp=mu, turn=turn,
        turn_rewards=torch.tensor(turn_rewards) if turn_rewards is not None else torch.zeros(B, S),
        truncated=torch.tensor(truncated if truncated is not None else [False] * B),
        completions=[f"c{i}" for i in range(B)], prompts=[f"p{i}" for i in range(B)], turn_info=turn_info)


def test_each_round_becomes_a_row_with_its_history_as_prompt():
    batch = episode_batch()
    out = split_rounds(batch, pad_id=PAD)
    assert out.size == 8 and out.group.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    rounds = [(r[0][ROUND], r[0][ROUNDS]) for r in out.turn_info]
    assert rounds == [(0, 3), (1, 3), (2, 3), (0, 1), (0, 2), (1, 2), (0, 2), (1, 2)]
    prompt = [ids[m > 0].tolist() for ids, m in zip(out.prompt_ids, out.prompt_mask)]
    assert prompt[:3] == [[5, 6, 7], [5, 6, 7, 11, 12, 90, 91], [5, 6, 7, 11, 12, 90, 91, 13, 92]]
    assert prompt[3] == [8, 9] and prompt[5] == [5, 6, 7, 31, 93, 94]
    response = [ids[m > 0].tolist() for ids, m in zip(out.response_ids, out.mask)]
    assert response[:3] == [[11, 12], [13], [14, 15, 2]] and response[5] == [32, 33]
    for r in range(out.size):  # the prompt is left-padded, the response right-padded, mask = the action
        n = int(out.mask[r].sum())
        assert out.mask[r, :n].eq(1).all() and out.mask[r, n:].eq(0).all() and out.turn[r, :n].eq(0).all()
        assert out.turn[r, n:].eq(-1).all() and out.response_ids[r, n:].eq(PAD).all()
    # the rollout log-probs travel with their tokens
    assert torch.equal(out.mu_logp[1, :1], batch.mu_logp[0, 4:5])
    assert torch.equal(out.mu_logp[2, :3], batch.mu_logp[0, 6:9])
    assert out.completions == ["a00", "a01", "a02", "c1", "a20", "a21", "a30", "a31"]
    assert out.rewards.tolist() == [1, 1, 1, 0.5, 1, 1, 0, 0] and out.scores.tolist() == out.rewards.tolist()
    assert out.truncated.tolist() == [False] * 5 + [True, False, False]  # only the cut episode's last round
    assert out.turn_rewards.flatten().tolist() == [0, 0, 1, 0.5, 0, 1, 0, 0]
    assert out.prompts == ["p0"] * 3 + ["p1"] + ["p2"] * 2 + ["p3"] * 2


def test_a_one_turn_batch_comes_back_as_it_was():
    batch = episode_batch().select(torch.tensor([1, 1]))
    out = split_rounds(batch, pad_id=PAD)
    width = int(batch.mask.sum(-1).max())
    tokens = [[ids[m > 0].tolist() for ids, m in zip(b.prompt_ids, b.prompt_mask)] for b in (out, batch)]
    assert tokens[0] == tokens[1] == [[8, 9], [8, 9]]
    for name in ("group", "rewards", "scores", "truncated"):
        assert torch.equal(getattr(out, name), getattr(batch, name)), name
    assert torch.equal(out.turn_rewards, batch.turn_rewards[:, :1])  # (this batch was cut from a wider one)
    for name in ("response_ids", "mask", "mu_logp", "turn"):
        assert torch.equal(getattr(out, name), getattr(batch, name)[:, :width]), name
    assert out.completions == batch.completions
    assert [r[0][ROUNDS] for r in out.turn_info] == [1, 1]


class CountEnv(Env):
    """Every letter ends an action; a tool answer "ok<n>\\n" follows; the 4th call (or max_turns) ends it."""

    stop = tuple("abcdefghijklmnopqrstuvwxyz")
    max_turns = 5

    def reset(self, example, seed=None):
        self.calls = 0
        return [user(example.prompt)], {"state": 0}

    def step(self, action):
        self.calls += 1
        return [tool(f"ok{self.calls}\n")], 0.0, self.calls >= 4, {"state": self.calls, "tool_error": None}


class CountTask(Task):
    name = "count"

    def make_env(self):
        return CountEnv()


def test_round_rows_score_exactly_the_sampled_tokens_in_their_context():
    model, tok = build_tiny(seed=0)
    engine = HFEngine(model.double(), tok)
    torch.manual_seed(0)
    batch = turns(engine, CountTask(), [Example("12+34=", "", ""), Example("7*8=", "", "")], group_size=3,
                  sampling=Sampling(6, temperature=0.9))
    assert max(len(r) for r in batch.turn_info) >= 3  # several rounds: the case this test is about
    out = split_rounds(batch, pad_id=tok.pad_token_id)
    assert out.size == sum(len(r) for r in batch.turn_info)
    logp, _, _ = policy_forward(engine.model, out.prompt_ids, out.prompt_mask, out.response_ids, out.mask, 0.9)
    torch.testing.assert_close(logp * out.mask, out.mu_logp, rtol=0, atol=1e-5)
    every_token_once = out.mu_logp.double().sum(), batch.mu_logp.double().sum()
    assert float(every_token_once[1]) < 0
    torch.testing.assert_close(*every_token_once, rtol=0, atol=1e-9)


def test_downsampling_keeps_the_largest_multiple_of_the_dp_size():
    batch = episode_batch()
    rows = split_rounds(batch.select(torch.tensor([0, 1, 2, 3, 0])))  # 11 rows: groups of 7 and 4
    assert rows.size == 11
    for dp in (1, 2, 3, 4, 5, 8, 11):
        out, dropped = downsample(rows, dp, seeded(dp))
        assert out.size % dp == 0 and out.size == rows.size - dropped and 0 <= dropped < dp
        assert min(Counter(out.group.tolist()).values()) >= 2  # no group left without a baseline
    same = [downsample(rows, 4, seeded(7))[0].completions for _ in range(2)]
    assert same[0] == same[1] and downsample(rows, 1, seeded(0))[0] is rows
    drawn = {tuple(downsample(rows, 4, seeded(s))[0].completions) for s in range(20)}
    assert len(drawn) > 1  # which rows go is random
    with pytest.raises(ValueError, match="dp_size"):
        downsample(rows, 0, seeded(0))
    with pytest.raises(ValueError, match="dp_size"):
        downsample(rows, 12, seeded(0))


def test_registered_transform_splits_downsamples_and_logs():
    fn = registry.get("group_transform", "eapo").fn
    c = ctx(component="group_transform:eapo")
    out = fn(episode_batch(), c, dp_size=3)
    assert out.size == 6 and c.metrics == {"eapo/rounds": 2.0, "eapo/dropped": 2.0}
    whole = fn(episode_batch(), ctx(), per_round=False, dp_size=1)
    assert whole.size == 4 and torch.equal(whole.response_ids, episode_batch().response_ids)
