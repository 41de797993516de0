"""Agreement with ADORA's code (tests/anchors/formulas_adora.py, ShadeCloak/ADORA @ c518485): the Logic-RL
estimator `compute_grpo_outcome_advantage_ADORA` = `grpo` (verl conventions, singletons kept) then `adora`, and the
VL code's `weight_func` = `adora(empty="vl")`, on groups with and without correct / incorrect / untruncated answers
and singleton groups."""
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask, seeded
from tests.anchors import formulas_adora as ref
from workbench.advantages.adora import adora
from workbench.advantages.group import grpo

pytestmark = pytest.mark.covers("adora")


def case(seed, n_groups=6, G=4, T=8):
    """Rewards on the Logic-RL scale (correct > 1.01), lengths 1..T, groups: all wrong, all right, one singleton."""
    g = seeded(seed)
    group = torch.arange(n_groups).repeat_interleave(G)[: n_groups * G - (G - 1)]  # the last group is a singleton
    B = group.shape[0]
    rewards = torch.randint(-2, 4, (B,), generator=g).to(D) + 0.25 * torch.rand(B, generator=g, dtype=D)
    rewards[group == 0] = -1.0          # no correct answer
    rewards[group == 1] = 3.0           # no incorrect answer
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)
    return batch_with_mask(rewards, group, mask), group


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("lam", [0.1, 0.5])
def test_grpo_then_adora_matches_the_logic_rl_estimator(seed, lam):
    batch, group = case(seed)
    batch.advantages = grpo(batch, allow_singletons="keep")
    ours = adora(batch, lam=lam, threshold=1.01, max_length=7)
    token_level = batch.rewards[:, None] * (torch.arange(batch.mask.shape[1]) == batch.lengths[:, None] - 1)
    theirs, _ = ref.compute_grpo_outcome_advantage_ADORA(token_level.to(D), batch.mask, group.tolist(), lamda=lam,
                                                         max_length_threshold=7)
    assert_agree(ours, theirs)


@pytest.mark.parametrize("seed", range(8))
def test_adora_vl_weights_match_weight_func(seed):
    g = seeded(100 + seed)
    P, G, T = 6, 4, 4100                                 # lengths around the code's truncation length 4094
    rewards = (torch.rand(P, G, generator=g, dtype=D) < 0.5).to(D)
    rewards[0] = 0.0                                     # no correct answer: kept by the VL code
    rewards[1] = 1.0                                     # no incorrect answer: damped by the VL code
    lengths = torch.randint(4085, T + 1, (P, G), generator=g)
    lengths[2] = 4094                                    # every response truncated (length >= 4094)
    mask = (torch.arange(T)[None, :] < lengths.flatten()[:, None]).to(D)
    batch = batch_with_mask(rewards.flatten(), torch.arange(P).repeat_interleave(G), mask)
    batch.advantages = batch.mask.clone()
    ours = adora(batch, lam=0.1, threshold=0.5, max_length=4094, empty="vl")[:, 0]
    assert_agree(ours, ref.weight_func(rewards, lengths.to(D), lamda=0.1).flatten())
