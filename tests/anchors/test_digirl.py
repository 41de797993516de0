"""Agreement with DigiRL (tests/anchors/formulas_digirl.py, DigiRL-agent/digirl @ c74ec34):

    Monte Carlo returns   `digirl_targets` == add_mc_return on each episode's rewards
    code advantage        `digirl(mode="code")` == actor_loss's indicator, one critic (v1 = v2: the code's min of
                          two is then the one), the next-state logit of the last step -inf (no next state)
    AWR loss              `gpg` with agg seq-mean-token-sum on one-action rows == actor_loss's -mean(log_prob * A)
    critic loss           `values.digirl` == critic_loss's 2-class cross-entropy with logits [0, z]
    trajectory filter     `top_quantile_keep(R - clamp(p))` == filter_buffer's kept trajectories
"""
import random

import pytest
import torch

from tests.advantages.step_batches import D, episode_batch
from tests.helpers import assert_agree
from tests.anchors import formulas_digirl as ref
from workbench import registry
from workbench.advantages.digirl import digirl, digirl_targets, top_quantile_keep
from workbench.advantages.step_critic import turn_spans
from workbench.values.digirl import digirl_value

pytestmark = pytest.mark.covers("digirl")


def random_episodes(rng: random.Random, n: int):
    actions = [[rng.randint(1, 3) for _ in range(rng.randint(1, 5))] for _ in range(n)]
    rewards = [[0.0] * (len(a) - 1) + [rng.choice([0.0, 1.0])] for a in actions]
    for row in rewards:  # an occasional intermediate reward
        if len(row) > 1 and rng.random() < 0.3:
            row[0] = 0.5
    return actions, rewards


@pytest.mark.parametrize("seed", range(6))
def test_monte_carlo_returns_and_the_code_advantage_match_the_trainer(seed):
    rng = random.Random(seed)
    gamma = rng.choice([0.95, 0.5, 0.9])
    actions, rewards = random_episodes(rng, 5)
    b = episode_batch(actions, rewards, seed=seed)
    first, _, _valid = turn_spans(b)
    returns, _ = digirl_targets(b, gamma=gamma)
    ours = digirl(b, mode="code", gamma=gamma)
    for i, row in enumerate(rewards):
        traj = ref.add_mc_return([{"reward": r} for r in row], gamma=gamma)
        mc = torch.tensor([d["mc_return"] for d in traj], dtype=D)
        assert torch.allclose(returns[i].gather(0, first[i, :len(row)]), mc, atol=1e-12)
        z = b.values[i].gather(0, first[i, :len(row)])
        logits = torch.stack([torch.zeros_like(z), z], -1)                       # [n, 2]
        next_logits = torch.cat([logits[1:], torch.tensor([[0.0, -float("inf")]], dtype=D)])  # p(s_{H+1}) = 0
        theirs = ref.actor_advantage(logits, logits, next_logits, next_logits, torch.tensor(row, dtype=D), mc)
        assert ours[i].gather(0, first[i, :len(row)]).tolist() == theirs.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_awr_loss_is_gpg_with_token_sums_over_one_action_rows(seed):
    g = torch.Generator().manual_seed(seed)
    n, T = 6, 4
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)
    logp = (torch.randn(n, T, generator=g, dtype=D) - 1).requires_grad_(True)
    adv = (torch.rand(n, generator=g, dtype=D) > 0.5).to(D)
    ours, _ = registry.get("objective", "gpg").fn(logp, logp.detach(), adv[:, None] * mask, mask,
                                                  agg="seq-mean-token-sum")
    theirs = ref.actor_pg_loss((logp * mask).sum(1), adv)
    assert_agree(ours, theirs, leaf=logp)


@pytest.mark.parametrize("seed", range(4))
def test_critic_loss_is_the_two_class_cross_entropy(seed):
    rng = random.Random(seed)
    actions, rewards = random_episodes(rng, 6)
    b = episode_batch(actions, rewards, seed=seed)
    b.returns, b.value_mask = digirl_targets(b)
    logits = b.values.clone().requires_grad_(True)
    ours, _ = digirl_value(logits, b, agg="token-mean")
    m = b.value_mask > 0
    z = logits[m]
    theirs = ref.critic_v1_loss(torch.stack([torch.zeros_like(z), z], -1), b.returns[m])
    assert_agree(ours, theirs, leaf=logits)


@pytest.mark.parametrize("seed", range(6))
def test_trajectory_filter_keeps_what_filter_buffer_keeps(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 60)
    R = [rng.choice([0.0, 1.0]) for _ in range(n)]
    p = [rng.random() for _ in range(n)]
    p[0] = 1.0  # clamped to 1 - 1e-4 by both
    kept = top_quantile_keep(torch.tensor(R, dtype=D) - torch.tensor(p, dtype=D).clamp(1e-4, 1 - 1e-4))
    assert torch.nonzero(kept).flatten().tolist() == ref.filter_kept(R, p)
