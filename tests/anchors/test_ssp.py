"""Agreement with SSP's `_compute_proposer_rewards` (tests/anchors/formulas_ssp.py, Alibaba-Quark/SSP @ b4797e1): the
proposer reward of every row from random solver reward grids and extraction failures, for each reward type, float64
on our side against the reference's float32 (1e-6). The reference places the value at the row's last response token;
ours is the row's sequence reward, the sum over its tokens."""
from __future__ import annotations

import pytest
import torch

from tests.anchors import formulas_ssp as ref
from tests.helpers import anchor_mask, assert_agree, seeded
from workbench.rewards.ssp import proposer_rewards, success_rate

pytestmark = pytest.mark.covers("ssp")
TOL = dict(rtol=1e-6, atol=1e-6)
OUTCOMES = torch.tensor([-1.0, 0.0, 0.0, 0.5, 1.0, 1.0])  # solver rewards: > 0 counts as a success, 0 and < 0 not


def case(seed, B=12, n=5, L=7, Ls=4):
    """(proposer response mask [B, L], solver sequence rewards [B, n], their token-level layout [B n, Ls] with the
    reward at each attempt's last token, extraction success [B] bool)."""
    g = seeded(seed)
    mask = anchor_mask(B, L, g)
    grid = OUTCOMES[torch.randint(len(OUTCOMES), (B, n), generator=g)].double()
    grid[0], grid[1] = 1.0, 0.0  # p = 1 and p = 0 always present
    lengths = torch.randint(1, Ls + 1, (B * n,), generator=g)
    tokens = torch.zeros(B * n, Ls, dtype=torch.float32)
    tokens[torch.arange(B * n), lengths - 1] = grid.flatten().float()
    ok = torch.rand(B, generator=g) < 0.7
    ok[:2] = True
    return mask, grid, tokens, ok


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("reward_type, left, right", [
    ("1-acc", 0.0, 1.0), ("intermediate_difficulty", 0.0, 1.0), ("intermediate_difficulty", 0.1, 0.8),
    ("format_only", 0.0, 1.0)])
@pytest.mark.parametrize("penalty", [0.0, -1.0])
def test_proposer_rewards_match_the_reference(seed, reward_type, left, right, penalty):
    mask, grid, tokens, ok = case(seed)
    theirs = ref.compute_proposer_rewards(mask.long(), tokens, grid.shape[1], reward_type=reward_type, left=left,
                                          right=right, format_penalty=penalty,
                                          current_extraction_success_mask=ok.tolist())  # verl's masks are long
    ours = proposer_rewards(success_rate(grid), ok, reward_type=reward_type, left=left, right=right,
                            format_penalty=penalty)
    assert_agree(ours, theirs.sum(-1), **TOL)
    last = (mask.sum(-1) - 1).long()
    assert bool((theirs[torch.arange(len(last)), last] == theirs.sum(-1)).all())  # one value per row, at its end


def test_a_dummy_problem_gets_the_penalty_as_a_failed_extraction_does():
    """The reference's other route to the penalty: no extraction mask, a 'dummy' data source (the stand-in problem a
    failed extraction gets) -- the same rewards as marking those rows failed."""
    mask, grid, tokens, ok = case(7)
    problems = [{"data_source": "search" if good else "dummy"} for good in ok.tolist()]
    theirs = ref.compute_proposer_rewards(mask.long(), tokens, grid.shape[1], format_penalty=-1.0,
                                          generate_problem=problems)
    assert_agree(proposer_rewards(success_rate(grid), ok, format_penalty=-1.0), theirs.sum(-1), **TOL)
