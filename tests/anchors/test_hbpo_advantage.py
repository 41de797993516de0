"""Agreement with HBPO's released advantage (tests/anchors/formulas_hbpo_advantage.py, ZJU-REAL/HBPO @ 5c8991d):
`hbpo-advantage` with reference_bug=True (A_intra added twice), beta = 4 and L_max = 4096 (the code's
4 cos(pi b / 8192)), on groups of 8 rows over the paper's budgets 512 / 1024 / 2048 / 2560 with rewards in [0, 4].

Tolerance 3e-5: the code takes pi as 3.1416 (|4 cos(3.1416 b/8192) - 4 cos(pi b/8192)| <= 4 (pi - 3.1416) 2560/8192
< 1e-5) and its cosine in float32."""
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask, seeded
from tests.anchors import formulas_hbpo_advantage as ref
from workbench.advantages.hbpo import hbpo_advantage, intra_budget

pytestmark = pytest.mark.covers("hbpo-advantage")

BUDGETS = (512, 1024, 2048, 2560)
TOL = dict(rtol=0, atol=3e-5)


def case(seed, P=4, G=8, T=6):
    g = seeded(seed)
    B = P * G
    group = torch.arange(P).repeat_interleave(G)
    budgets = torch.tensor(BUDGETS).repeat_interleave(G // len(BUDGETS)).repeat(P)
    rewards = 4 * torch.rand(B, generator=g, dtype=D) * (torch.rand(B, generator=g) < 0.7)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)
    return batch_with_mask(rewards, group, mask), group, budgets


@pytest.mark.parametrize("seed", range(8))
def test_reference_bug_mode_matches_the_released_double_add(seed):
    batch, group, budgets = case(seed)
    ours = hbpo_advantage(batch, max_len=4096, beta=4.0, budgets=budgets, reference_bug=True)
    token_level = batch.rewards[:, None] * (torch.arange(batch.mask.shape[1]) == batch.lengths[:, None] - 1)
    theirs, _ = ref.compute_grpo_outcome_advantage(token_level.to(D), batch.mask, group.numpy(),
                                                   budgets.to(D)[:, None])
    assert_agree(ours, theirs, **TOL)


@pytest.mark.parametrize("seed", range(4))
def test_the_paper_default_is_the_code_minus_one_a_intra(seed):
    batch, group, budgets = case(seed)
    paper = hbpo_advantage(batch, max_len=4096, beta=4.0, budgets=budgets)
    token_level = batch.rewards[:, None] * (torch.arange(batch.mask.shape[1]) == batch.lengths[:, None] - 1)
    theirs, _ = ref.compute_grpo_outcome_advantage(token_level.to(D), batch.mask, group.numpy(),
                                                   budgets.to(D)[:, None])
    a_intra = intra_budget(batch.rewards, group, budgets.to(D), max_len=4096, beta=4.0)
    assert_agree(paper, theirs - a_intra[:, None] * batch.mask, **TOL)
    assert float(a_intra.abs().max()) > 1e-3
