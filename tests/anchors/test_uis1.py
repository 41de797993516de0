"""Agreement with UI-S1's advantage (X-PLUG/MobileAgent @ 11cea57, `UI-S1/uis1/core_uis1.py`, transcribed in
tests/anchors/formulas_uis1.py) on random semi-online episodes: step scores, expert matches (a mismatch mid-way
resets the returns), prompt / trajectory / step ids, both modes, gamma in {0, 0.5, 0.9}.

Their rows are steps, ours trajectories: our [B, S] per-step advantages are flattened in their order.
  - `reference_bug=True` is their estimator: the "episode" term normalizes each step's own score over the
    prompt group's step samples;
  - the default (the paper: an episode return per trajectory) equals their functions fed the episode return on
    every step row with `compute_mean_std_cross_all_data=False` (one sample per trajectory); their step term is
    ours in both.
Scores are multiples of 1/4 and gamma is dyadic, so the returns are exact in their float32.
"""
import random

import numpy as np
import pytest
import torch

from tests.helpers import D, make_batch
from tests.anchors import formulas_uis1 as ref
from workbench.advantages.uis1 import uis1

pytestmark = pytest.mark.covers("ui-s1")
F32 = dict(rtol=1e-5, atol=1e-5)


def episodes(seed, groups=3, G=4, max_steps=5):
    rng = random.Random(seed)
    scores, matches, group = [], [], []
    for g in range(groups):
        for _ in range(G):
            n = rng.randint(1, max_steps)
            scores.append([rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(n)])
            matches.append([rng.random() < 0.7 for _ in range(n)])
            group.append(g)
    return scores, matches, group


def our_batch(scores, group):
    n_steps = [len(r) for r in scores]
    B, S = len(scores), max(n_steps)
    step_r = torch.zeros(B, S, dtype=D)
    for i, r in enumerate(scores):
        step_r[i, :len(r)] = torch.tensor(r, dtype=D)
    batch = make_batch(step_r.sum(-1).tolist(), group, n_steps)  # one token per step
    batch.turn = torch.where(batch.mask > 0, torch.arange(S)[None].expand(B, S), torch.full((B, S), -1))
    return batch, step_r, n_steps


def their_layout(scores, matches, group, gamma):
    n_steps = [len(r) for r in scores]
    index = np.array([group[i] for i, n in enumerate(n_steps) for _ in range(n)])
    traj_index = np.array([i for i, n in enumerate(n_steps) for _ in range(n)])
    step_index = np.array([s for n in n_steps for s in range(n)])
    flat = np.array([x for r in scores for x in r], dtype=np.float32)
    extract_match = np.array([m for row in matches for m in row])
    returns = ref.compute_step_discounted_returns(flat, traj_index, extract_match, gamma)
    return index, traj_index, step_index, flat, returns


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9])
def test_the_authors_estimator(gamma, mode):
    for seed in range(5):
        scores, matches, group = episodes(seed)
        batch, step_r, n_steps = our_batch(scores, group)
        A = uis1(batch, matches=matches, step_rewards=step_r, gamma=gamma, mode=mode, reference_bug=True)
        ours = torch.cat([A[i, :n] for i, n in enumerate(n_steps)])
        index, traj_index, step_index, flat, returns = their_layout(scores, matches, group, gamma)
        N = len(flat)
        tls = torch.zeros(N, 2)
        tls[:, -1] = torch.tensor(flat)  # each step row: its own score on its last token
        theirs, _ = ref.compute_uis1_outcome_advantage(tls, returns, torch.ones(N, 2), index, traj_index, step_index,
                                                       mode=mode)
        torch.testing.assert_close(ours, theirs[:, 0].double(), **F32)


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_the_paper_reading_is_their_functions_on_episode_returns(mode):
    for seed in range(5):
        scores, matches, group = episodes(seed + 10)
        batch, step_r, n_steps = our_batch(scores, group)
        A = uis1(batch, matches=matches, step_rewards=step_r, gamma=0.5, mode=mode)
        ours = torch.cat([A[i, :n] for i, n in enumerate(n_steps)])
        index, traj_index, step_index, flat, returns = their_layout(scores, matches, group, 0.5)
        N = len(flat)
        tls = torch.zeros(N, 1)
        tls[:, 0] = torch.tensor([float(sum(scores[i])) for i in traj_index])
        remove_std = mode == "mean_norm"
        episode = ref.episode_norm_reward(tls, torch.ones(N, 1), index, traj_index, 1e-6, remove_std,
                                          compute_mean_std_cross_all_data=False)
        step = ref.step_norm_reward(returns, torch.ones(N, 1), index, step_index, 1e-6, remove_std)
        torch.testing.assert_close(ours, (episode + step)[:, 0].double(), **F32)
        # their default (every step sample counts) is our episode_stats="steps"
        A_steps = uis1(batch, matches=matches, step_rewards=step_r, gamma=0.5, mode=mode, episode_stats="steps")
        episode_all = ref.episode_norm_reward(tls, torch.ones(N, 1), index, traj_index, 1e-6, remove_std)
        torch.testing.assert_close(torch.cat([A_steps[i, :n] for i, n in enumerate(n_steps)]),
                                   (episode_all + step)[:, 0].double(), **F32)


def with_lone_trajectories(seed):
    """`episodes` plus two prompts sampled once: one trajectory of 1 step (a pool of one sample in every reading)
    and one of 3 steps (a pool of 3 equal samples when each step counts)."""
    scores, matches, group = episodes(seed)
    rng = random.Random(seed)
    for n, g in ((1, max(group) + 1), (3, max(group) + 2)):
        scores.append([rng.choice([0.25, 0.5, 1.0]) for _ in range(n)])
        matches.append([rng.random() < 0.7 for _ in range(n)])
        group.append(g)
    return scores, matches, group


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_lone_trajectories_follow_the_code_with_allow_singletons_keep(mode):
    """The code's episode functions keep verl's rule for a pool of one sample (mean 0, std 1): allow_singletons="keep",
    in its estimator (reference_bug=True) and in the paper reading, per trajectory or per step; True zeroes the
    episode term of a lone trajectory (its step term stays), False refuses it."""
    remove_std = mode == "mean_norm"
    for seed in range(3):
        scores, matches, group = with_lone_trajectories(seed + 20)
        batch, step_r, n_steps = our_batch(scores, group)
        flat_ours = lambda A: torch.cat([A[i, :n] for i, n in enumerate(n_steps)])
        index, traj_index, step_index, flat, returns = their_layout(scores, matches, group, 0.5)
        N = len(flat)
        own = torch.zeros(N, 2)
        own[:, -1] = torch.tensor(flat)
        theirs, _ = ref.compute_uis1_outcome_advantage(own, returns, torch.ones(N, 2), index, traj_index, step_index,
                                                       mode=mode)
        kw = dict(matches=matches, step_rewards=step_r, gamma=0.5, mode=mode)
        torch.testing.assert_close(flat_ours(uis1(batch, reference_bug=True, allow_singletons="keep", **kw)),
                                   theirs[:, 0].double(), **F32)
        tls = torch.tensor([float(sum(scores[i])) for i in traj_index])[:, None]
        step = ref.step_norm_reward(returns, torch.ones(N, 1), index, step_index, 1e-6, remove_std)
        for stats, cross in (("trajectory", False), ("steps", True)):
            episode = ref.episode_norm_reward(tls, torch.ones(N, 1), index, traj_index, 1e-6, remove_std,
                                              compute_mean_std_cross_all_data=cross)
            ours = flat_ours(uis1(batch, allow_singletons="keep", episode_stats=stats, **kw))
            torch.testing.assert_close(ours, (episode + step)[:, 0].double(), **F32)
            lone = torch.tensor([group[i] >= max(group) - 1 for i in traj_index])
            zeroed = flat_ours(uis1(batch, allow_singletons=True, episode_stats=stats, **kw))
            torch.testing.assert_close(zeroed[lone], step[lone, 0].double(), **F32)
            torch.testing.assert_close(zeroed[~lone], ours[~lone])
            with pytest.raises(ValueError, match="group of one"):
                uis1(batch, episode_stats=stats, **kw)
        with pytest.raises(ValueError, match="group of one"):
            uis1(batch, reference_bug=True, **kw)
