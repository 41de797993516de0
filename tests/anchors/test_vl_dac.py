"""Agreement with VL-DAC (tests/anchors/formulas_vl_dac.py, corl-team/VL-DAC @ 5da2783):

    step GAE + z-score     `vl-dac` on episodes as rows == compute_returns + PPO.update's normalization on the same
                           episodes laid end to end in storage streams (masks 0 after each episode's last step)
    value targets          `vl_dac_targets` == the storage's returns, one per environment step
    action loss + guard    `vl-dac` objective, one action, token mean == PPO.update's per-token action loss (value
                           and gradient), with and without a ratio above 10
"""
import random

import pytest
import torch

from tests.advantages.step_batches import D, episode_batch
from tests.helpers import assert_agree
from tests.anchors import formulas_vl_dac as ref
from workbench.advantages.step_critic import turn_spans
from workbench.advantages.vl_dac import vl_dac, vl_dac_targets
from workbench.objectives.vl_dac import vl_dac_objective

pytestmark = pytest.mark.covers("vl-dac")


def random_episodes(rng: random.Random, n: int):
    actions = [[rng.randint(1, 3) for _ in range(rng.randint(1, 5))] for _ in range(n)]
    rewards = [[rng.choice([0.0, 0.0, 0.5, 1.0, -1.0]) for _ in a] for a in actions]
    values = [[rng.gauss(0, 1) for _ in a] for a in actions]
    return actions, rewards, values


def our_batch(actions, rewards, values):
    b = episode_batch(actions, rewards)
    first, _, _valid = turn_spans(b)
    V = torch.zeros(b.mask.shape, dtype=D)
    for i, vs in enumerate(values):
        V[i, first[i, :len(vs)]] = torch.tensor(vs, dtype=D)
    b.values = b.old_values = V
    return b


def storage(episodes, processes: int):
    """The episodes dealt round-robin to `processes` streams of equal length (padded by one-step dummy episodes
    that are dropped from the comparison): (rewards, value_preds, masks, bad_masks, index of each real step)."""
    streams = [[] for _ in range(processes)]
    for k, (rewards, values) in enumerate(episodes):
        streams[k % processes].append((k, rewards, values))
    length = max(sum(len(r) for _, r, _ in s) for s in streams)
    R, V = torch.zeros(length, processes, 1, dtype=D), torch.zeros(length + 1, processes, 1, dtype=D)
    masks = torch.ones(length + 1, processes, 1, dtype=D)
    where = {}
    for p, stream in enumerate(streams):
        t = 0
        for k, rewards, values in stream:
            for s, (r, v) in enumerate(zip(rewards, values)):
                R[t, p], V[t, p] = r, v
                where[(k, s)] = (t, p)
                t += 1
            masks[t, p] = 0.0
        while t < length:  # dummy one-step episodes: reward 0, value 0
            masks[t + 1, p] = 0.0
            t += 1
    return R, V, masks, torch.ones_like(masks), where


@pytest.mark.parametrize("seed", range(8))
def test_step_gae_returns_and_batch_zscore_match_the_storage(seed):
    rng = random.Random(seed)
    actions, rewards, values = random_episodes(rng, rng.randint(2, 7))
    b = our_batch(actions, rewards, values)
    first, _, _valid = turn_spans(b)
    R, V, masks, bad, where = storage(list(zip(rewards, values)), processes=1)
    returns = ref.compute_returns(R, V, masks, bad, next_value=torch.tensor([[rng.gauss(0, 1)]], dtype=D),
                                  gamma=0.99, gae_lambda=0.95)
    theirs_adv = ref.normalized_advantages(returns, V)
    ours_adv = vl_dac(b).gather(1, first)
    ours_ret, vmask = vl_dac_targets(b)
    for (k, s), (t, p) in where.items():
        assert ours_adv[k, s].item() == pytest.approx(theirs_adv[t, p, 0].item(), abs=1e-9)
        assert ours_ret[k, first[k, s]].item() == pytest.approx(returns[t, p, 0].item(), abs=1e-12)
    assert int(vmask.sum()) == len(where)


@pytest.mark.parametrize("seed", range(4))
def test_unnormalized_step_gae_matches_over_several_process_streams(seed):
    rng = random.Random(100 + seed)
    actions, rewards, values = random_episodes(rng, 6)
    b = our_batch(actions, rewards, values)
    first, _, _ = turn_spans(b)
    R, V, masks, bad, where = storage(list(zip(rewards, values)), processes=3)
    returns = ref.compute_returns(R, V, masks, bad, next_value=torch.zeros(3, 1, dtype=D), gamma=0.9,
                                  gae_lambda=0.7)
    ours = vl_dac(b, gamma=0.9, lam=0.7, whiten=False).gather(1, first)
    for (k, s), (t, p) in where.items():
        assert ours[k, s].item() == pytest.approx((returns[t, p, 0] - V[t, p, 0]).item(), abs=1e-12)


@pytest.mark.parametrize("runaway", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_action_loss_and_its_gradient_match_the_ppo_update(seed, runaway):
    g = torch.Generator().manual_seed(seed)
    n = 6
    old = torch.randn(n, generator=g, dtype=D) - 2
    logp = (old + 0.3 * torch.randn(n, generator=g, dtype=D)).requires_grad_(True)
    shift = torch.zeros(n, dtype=D)
    if runaway:
        shift[2] = 3.0  # ratio e^3 > 10 on one token
    adv = torch.randn(1, generator=g, dtype=D).expand(n)  # one action: one advantage
    theirs = ref.per_token_action_loss(logp + shift, old, adv, clip_param=0.1).mean()
    ours, _ = vl_dac_objective((logp + shift)[None], old[None], adv[None], torch.ones(1, n, dtype=D),
                               turn=torch.zeros(1, n, dtype=torch.long), agg="token-mean")
    assert_agree(ours, theirs, leaf=logp)
