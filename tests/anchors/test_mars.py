"""Agreement with thu-nics/MARS @ 5979f75 (`roll/utils/functionals.py` and the agentic pipeline's advantage block,
transcribed in formulas_mars.py) on toy two-player self-play batches: our rows laid out as the authors' sequences (a
prompt position, the row's actions and observations, padding), turn scores on each turn's last action token
(`<|im_end|>` there), players as `group_ids` suffixes _p0 / _p1.

The authors compute in float32 and take distinct values by exact equality, so a rounding residue splits one value into
several (e.g. a per-player mean that is not exact leaves a token mean of ~1e-8 after centring, which whitening puts on
every token; see the module docstring of workbench.advantages.mars). The toy rewards are multiples of 1/8 whose sum is 0
for every (prompt group, player): then their arithmetic is exact up to the whitening's scale, and the comparison
checks the method, not float32 residues."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.advantages.step_batches import episode_batch
from tests.anchors import formulas_mars as ref
from tests.helpers import assert_agree
from workbench.advantages.mars import distinct_values, mars, mars_returns
from workbench.advantages.step_critic import turn_spans

pytestmark = pytest.mark.covers("mars")
PAD = 2  # padding positions after every row (the authors pad to sequence_length)


def self_play(seed: int, groups: int = 2, games: int = 3):
    """`games` episodes per prompt group, both players' rows, 1-3 turns each, turn rewards k/8 (k in +-1..40) with the
    last row of each (group, player) making its sum 0."""
    g = torch.Generator().manual_seed(seed)
    actions, rewards, group, agent, episode = [], [], [], [], []
    for q in range(groups):
        for e in range(games):
            for k in range(2):
                n = int(torch.randint(1, 4, (1,), generator=g))
                actions.append([int(x) for x in torch.randint(1, 4, (n,), generator=g)])
                sign = torch.randint(0, 2, (n,), generator=g) * 2 - 1
                rewards.append([float(x) / 8 for x in sign * torch.randint(1, 41, (n,), generator=g)])
                group.append(q), agent.append(k), episode.append(games * q + e)
        for k in range(2):
            rows = [i for i in range(len(rewards)) if group[i] == q and agent[i] == k]
            rewards[rows[-1]][-1] -= sum(sum(rewards[i]) for i in rows)
    b = episode_batch(actions, rewards, group=torch.tensor(group))
    b.agent, b.episode = torch.tensor(agent), torch.tensor(episode)
    return b


def authors_data(b, tags):
    """The authors' DataProto of our rows: position 0 is the prompt's last token, then our T positions, then PAD."""
    _, last, valid = turn_spans(b)
    B, T = b.mask.shape
    scores = torch.zeros(B, 1 + T + PAD, dtype=torch.float32)
    ends = torch.zeros(B, 1 + T + PAD, dtype=torch.bool)
    rows, steps = torch.nonzero(valid, as_tuple=True)
    scores[rows, 1 + last[rows, steps]] = b.turn_rewards[rows, steps].float()
    ends[rows, 1 + last[rows, steps]] = True
    response_mask = torch.zeros(B, 1 + T + PAD)
    response_mask[:, 1:1 + T] = b.mask.float()
    group_ids = [f"{int(q)}_p{int(k)}" for q, k in zip(b.group, b.agent)]
    return ref.DataProto({"scores": scores, "turn_end_positions": ends, "response_mask": response_mask},
                         {"group_ids": group_ids, "tags": tags})


CONFIGS = [  # (ours, theirs): the self-play yaml, then the other normalizations and switches
    (dict(), dict()),
    (dict(scope="group"), dict(grouping="tags")),  # tags per prompt group: the traj_group_id reading
    (dict(normalize="mean_std", advantage_norm="mean_std", whiten_rewards=False),  # z-scores do not sum to 0 exactly
     dict(method="mean_std", advantage_norm="mean_std", whiten_rewards=False)),
    (dict(normalize="none"), dict(method="identity")),
    (dict(whiten_rewards=False, whiten_advantages=False), dict(whiten_rewards=False, whiten_advantages=False)),
    (dict(advantage_norm="none"), dict(advantage_norm=None)),
]


@pytest.mark.parametrize("ours_kw, theirs_kw", CONFIGS)
@pytest.mark.parametrize("seed", range(4))  # seeds whose float32 sums split no value (seed 4 does: test below)
def test_mars_matches_the_authors_pipeline(seed, ours_kw, theirs_kw):
    b = self_play(seed)
    tags = [f"g{int(q)}" for q in b.group] if ours_kw.get("scope") == "group" else ["TicTacToe"] * b.size
    theirs = ref.pipeline_advantages(authors_data(b, tags), **theirs_kw)        # [B, T + PAD], float32
    T = b.mask.shape[1]
    assert bool((theirs[:, T:] == 0).all())
    ours = mars(b, **ours_kw)
    assert_agree(ours, theirs[:, :T] * b.mask, rtol=1e-5, atol=1e-5)
    assert float(ours.abs().max()) > 0.1


def test_the_authors_unique_values_include_the_padding_zero():
    """count_padding=False (the policy tokens' values only) departs from the authors' tensor-wide set."""
    b = self_play(0)
    theirs = ref.pipeline_advantages(authors_data(b, ["TicTacToe"] * b.size), whiten_advantages=False)
    T = b.mask.shape[1]
    ours = mars(b, count_padding=False, whiten_advantages=False)
    assert not torch.allclose(ours, (theirs[:, :T] * b.mask).double(), atol=1e-3)


def authors_returns(b):
    """The authors' per-token returns (compute_reinforce_return on the whitened, per-player normalized turn scores)
    under the self-play configuration."""
    d = authors_data(b, ["TicTacToe"] * b.size)
    d.batch["token_level_rewards"] = d.batch["scores"].clone()
    config = SimpleNamespace(use_turn_scores=True, reward_normalization=SimpleNamespace(
        grouping="tags", method="mean", separate_norm_for_selfplay=True))
    d = ref.reward_postprocess_agentic(d, config)
    response_mask = d.batch["response_mask"][:, 1:]
    x = ref.masked_whiten(d.batch["token_level_rewards"].float(), response_mask) * response_mask
    return ref.compute_reinforce_return(x, 1.0, 0.95)[0]


def test_where_the_authors_differ_it_is_float32_splitting_one_value_into_two():
    """Seed 4: the authors' float32 sums give one turn value as two numbers 1e-7 apart, which their exact-equality
    `torch.unique` counts twice; every one of their distinct values is within 1e-6 of one of ours."""
    b = self_play(4)
    ours = mars_returns(b, 1.0, "mean", "batch", True)
    theirs = authors_returns(b)
    extra = 0
    for k in (0, 1):
        rows = b.agent == k
        mine = distinct_values(torch.cat([ours[rows][b.mask[rows] > 0], ours.new_zeros(1)]))
        their = torch.unique(theirs[rows]).double()
        assert float((their[:, None] - mine[None, :]).abs().min(1).values.max()) < 1e-6
        extra += their.numel() - mine.numel()
    assert extra > 0
