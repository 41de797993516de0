"""Agreement with HGPO's code (zzj1111/alfworldauto @ 37aec78, `recipe/hgpo/core_hgpo.py`, transcribed in
tests/anchors/formulas_hgpo.py) on random episodes: per-step advantages from the anchor observations, prompt and
trajectory ids and step rewards, K in {0, 1, 2, 4}, alpha in {0, 1}, base group on/off, both modes.

The code stores one row per step; ours one row per trajectory, so the comparison flattens our [B, S] steps in
their order. `reference_bug=True` gives their weight normalization w / (sum w + eps) and their base group (one
sample per step); with `reference_bug=False` they differ only by that factor when no base group is used.
Rewards are multiples of 1/4 and gamma = 1/2, so returns are exact in their float32 and our float64 and ties
(zero-advantage levels, dropped from the weights) are exact on both sides.
"""
import random

import numpy as np
import pytest
import torch

from tests.helpers import D, make_batch
from tests.anchors import formulas_hgpo as ref
from workbench.advantages.hgpo import hgpo

pytestmark = pytest.mark.covers("hgpo")
F32 = dict(rtol=1e-5, atol=1e-5)


def episodes(seed, groups=3, G=4, max_steps=5, n_obs=3, lone=()):
    """Random trajectories over a few observations (histories collide) with quarter-integer step rewards; `lone`:
    the step counts of extra prompts sampled once."""
    rng = random.Random(seed)
    states, rewards, group = [], [], []
    for g, size in [(g, G) for g in range(groups)] + [(groups + j, 1) for j in range(len(lone))]:
        for _ in range(size):
            n = rng.randint(1, max_steps) if g < groups else lone[g - groups]
            states.append([f"o{rng.randrange(n_obs)}" for _ in range(n)])
            rewards.append([rng.choice([0.0, 0.0, 0.25, 0.5, 1.0]) for _ in range(n)])
            group.append(g)
    return states, rewards, group


def ours_and_theirs(seed, K, alpha, base_group, mode, reference_bug=True, lone=(), allow_singletons=False):
    states, rewards, group = episodes(seed, lone=lone)
    B, S = len(states), max(len(r) for r in rewards)
    n_steps = [len(r) for r in rewards]
    step_r = torch.zeros(B, S, dtype=D)
    for i, r in enumerate(rewards):
        step_r[i, :len(r)] = torch.tensor(r, dtype=D)
    episode_R = step_r.sum(-1)
    batch = make_batch(episode_R.tolist(), group, [n for n in n_steps])  # one token per step
    batch.turn = torch.where(batch.mask > 0, torch.arange(S)[None].expand(B, S), torch.full((B, S), -1))
    A = hgpo(batch, states=states, step_rewards=step_r, history_length=K, length_weight_alpha=alpha,
             gamma=0.5, mode=mode, base_group=base_group, reference_bug=reference_bug,
             allow_singletons=allow_singletons)
    ours = torch.cat([A[i, :n] for i, n in enumerate(n_steps)])
    # their layout: one row per step, in step order; the episode reward on every step row's last token
    flat_obs = np.array([o for row in states for o in row], dtype=object)
    index = np.array([group[i] for i, n in enumerate(n_steps) for _ in range(n)])
    traj_index = np.array([i for i, n in enumerate(n_steps) for _ in range(n)])
    flat_r = np.array([x for r in rewards for x in r], dtype=np.float32)
    step_returns_theirs = ref.compute_step_discounted_returns(flat_r, traj_index, 0.5)
    N, L = len(flat_obs), 3
    response_mask = torch.ones(N, L)
    token_level_rewards = torch.zeros(N, L)
    token_level_rewards[:, -1] = torch.tensor([float(episode_R[i]) for i in traj_index])
    theirs = ref.hgpo_advantage_estimate(token_level_rewards, step_returns_theirs, response_mask, flat_obs, index,
                                         traj_index, K, mode=mode, length_weight_alpha=alpha,
                                         base_group=base_group)[:, 0]
    return ours, theirs, (states, step_r, group, n_steps)


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
@pytest.mark.parametrize("base_group", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("K", [0, 1, 2, 4])
def test_step_advantages_match_the_authors_code(K, alpha, base_group, mode):
    for seed in range(4):
        ours, theirs, _ = ours_and_theirs(seed, K, alpha, base_group, mode)
        assert torch.count_nonzero(theirs) > 0
        torch.testing.assert_close(ours, theirs.double(), **F32)


@pytest.mark.parametrize("K", [0, 2])
def test_the_paper_reading_differs_only_by_the_weight_epsilon(K):
    """Without the base group ours normalizes the weights exactly; theirs divides by sum w + eps: every non-zero
    step advantage is theirs times (sum w + eps) / sum w, in (1, 1 + eps/2] since sum w >= 2 (alpha = 1, k >= 1)."""
    for seed in range(4):
        paper, theirs, _ = ours_and_theirs(seed, K, 1.0, False, "mean_std_norm", reference_bug=False)
        code, _, _ = ours_and_theirs(seed, K, 1.0, False, "mean_std_norm", reference_bug=True)
        nonzero = code != 0
        assert torch.equal(nonzero, paper != 0) and nonzero.any()
        ratio = paper[nonzero] / code[nonzero]
        assert torch.all(ratio > 1) and torch.all(ratio <= 1 + 0.5e-6 + 1e-15)
        torch.testing.assert_close(paper, theirs.double(), **F32)


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_lone_trajectories_in_the_base_group_follow_the_code_with_allow_singletons_keep(mode):
    """Two prompts sampled once (1 and 3 steps): the code's base group (one sample per step) gives a pool of one
    sample mean 0 and std 1, and a lone 3-step trajectory 3 equal samples (A_E = 0): allow_singletons="keep"."""
    for seed in range(4):
        ours, theirs, _ = ours_and_theirs(seed, 2, 1.0, True, mode, lone=(1, 3), allow_singletons="keep")
        torch.testing.assert_close(ours, theirs.double(), **F32)
        with pytest.raises(ValueError, match="group of one"):
            ours_and_theirs(seed, 2, 1.0, True, mode, lone=(1, 3))
