"""Agreement with ROVER's code (tests/anchors/formulas_rover.py, yuxiaooye/ROVER @ ea5ce63) on random logits:

    sum_log_softmax                  ops.mean_logprob_from_logits (the old pass's statistic)
    the actor's ROVER block          the `rover` objective: loss and gradient w.r.t. the LM head's weight, token level
                                     (clip on and off), response level, and on-policy (old = logp.detach())
    compute_rover_outcome_advantage  the `rover` advantage with reference_bug=True (batch-wide shares)
    Math's adv_estimator=grpo        the `grpo` advantage (the r~ the Math recipe regresses onto)
    Countdown's compute_rover_reward `grpo` with scale="none" (group mean, no std)
"""
import pytest
import torch

from tests.helpers import D, assert_agree, random_mask, seeded
from tests.anchors import formulas_rover as ref
from workbench import ops, registry
from workbench.advantages.base import last_token_mask
from workbench.batch import RolloutBatch
from workbench.context import Head

pytestmark = pytest.mark.covers("rover")


def logits_case(seed, B=6, T=7, V=13, H=5, temperature=0.6):
    """A head W [V, H] (leaf) over hidden states, old logits nearby, sampled tokens, GRPO advantages, ragged mask."""
    g = seeded(seed)
    mask = random_mask(B, T, g, min_len=2)
    hidden = torch.randn(B, T, H, generator=g, dtype=D)
    W = torch.randn(V, H, generator=g, dtype=D).requires_grad_(True)
    W_old = W.detach() + 0.3 * torch.randn(V, H, generator=g, dtype=D)
    tokens = torch.randint(V, (B, T), generator=g)
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    group = torch.arange(B) // 3
    adv, _ = ref.compute_grpo_outcome_advantage(rewards[:, None] * ops_last(mask), mask, group.tolist())
    return dict(mask=mask, hidden=hidden, W=W, W_old=W_old, tokens=tokens, adv=adv, rewards=rewards, group=group,
                temperature=temperature)


def ops_last(mask):
    return last_token_mask(mask).double()


def forward(c, W):
    logits = c["hidden"] @ W.T / c["temperature"]                                   # tempered, [B, T, V]
    logp = torch.log_softmax(logits, -1).gather(-1, c["tokens"][..., None])[..., 0]
    return logits, logp


def ours_and_theirs(c, on_policy=False, **kw):
    logits, logp = forward(c, c["W"])
    old_logits, old_logp = forward(c, c["W_old"])
    mask = c["mask"]
    if on_policy:
        old_logp, old_logits = logp.detach(), logits.detach()
    head = Head(hidden=c["hidden"], weight=c["W"].detach(), bias=None, trained=True, lr=0.0, betas=(0.9, 0.999),
                eps=1e-8, temperature=c["temperature"])
    old_mean = torch.log_softmax(old_logits.detach(), -1).mean(-1) * mask  # mean_v log pi_old(v | s_t), float64
    ours, _ = registry.get("objective", "rover").fn(
        logp, old_logp.detach() * mask, c["adv"], mask, head=head, response_ids=c["tokens"],
        old_vocab_mean_logp=old_mean, agg="token-mean", **kw)
    theirs_kw = {"rover_t": kw.get("rho", 1.0), "use_rover_clip": kw.get("use_rover_clip", False),
                 "clip_ratio": kw.get("clip_ratio", 0.2), "response_level_rover_loss": kw.get("response_level", False),
                 "next_q_scale_factor": kw.get("next_q_scale", 1.0)}
    theirs, _, _ = ref.rover_actor_loss(logp, old_logp.detach(), ref.sum_log_softmax(logits),
                                        ref.sum_log_softmax(old_logits.detach()), c["adv"], mask, **theirs_kw)
    return ours, theirs


@pytest.mark.parametrize("seed", range(6))
def test_sum_log_softmax_is_the_vocabulary_mean_log_prob(seed):
    logits = 3 * torch.randn(4, 5, 17, generator=seeded(seed), dtype=D)
    torch.testing.assert_close(ops.mean_logprob_from_logits(logits, 0.7).double(), ref.sum_log_softmax(logits / 0.7),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kw", [{}, {"rho": 0.5}, {"use_rover_clip": True, "clip_ratio": 0.1},
                                {"next_q_scale": 0.3}, {"response_level": True},
                                {"response_level": True, "use_rover_clip": True}])
def test_loss_and_gradient_match_the_actor(seed, kw):
    c = logits_case(seed)
    ours, theirs = ours_and_theirs(c, **kw)
    assert_agree(ours, theirs, leaf=c["W"])


def test_clip_is_active_on_these_cases():
    """The clip comparison above is not vacuous: over its seeds, some tokens are clipped high and some low."""
    high = low = 0
    for seed in range(6):
        c = logits_case(seed)
        logits, logp = forward(c, c["W"])
        old_logits, old_logp = forward(c, c["W_old"])
        _, h, lo = ref.rover_actor_loss(logp, old_logp, ref.sum_log_softmax(logits), ref.sum_log_softmax(old_logits),
                                        c["adv"], c["mask"], use_rover_clip=True, clip_ratio=0.1)
        high, low = high + h, low + lo
    assert high > 0 and low > 0


@pytest.mark.parametrize("seed", range(4))
def test_on_policy_matches_the_actor_with_old_set_to_logp(seed):
    c = logits_case(seed)
    ours, theirs = ours_and_theirs(c, on_policy=True)
    assert_agree(ours, theirs, leaf=c["W"])


def batch_of(rewards, group, mask):
    return RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask,
                        group=torch.as_tensor(group), rewards=rewards)


@pytest.mark.parametrize("seed", range(8))
def test_batch_shaping_matches_compute_rover_outcome_advantage(seed):
    g = seeded(seed)
    B = 12
    mask = random_mask(B, 5, g)
    rewards = torch.randint(0, 2, (B,), generator=g).double() * torch.rand(B, generator=g, dtype=D)
    group = torch.arange(B) // 4
    ours = registry.get("advantage", "rover").fn(batch_of(rewards, group, mask), reference_bug=True)
    theirs, _ = ref.compute_rover_outcome_advantage(rewards[:, None] * ops_last(mask), mask, group.tolist())
    assert_agree(ours.double(), theirs)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("std", [True, False])
def test_the_math_and_countdown_r_tilde_are_grpo(seed, std):
    g = seeded(seed)
    B = 12
    mask = random_mask(B, 5, g)
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    group = torch.arange(B) // 4
    ours = registry.get("advantage", "grpo").fn(batch_of(rewards, group, mask), scale="group" if std else "none")
    token_rewards = rewards[:, None] * ops_last(mask)
    if std:
        theirs, _ = ref.compute_grpo_outcome_advantage(token_rewards, mask, group.tolist())
    else:
        theirs, _ = ref.compute_rover_reward(token_rewards, mask, group.tolist())
    assert_agree(ours.double(), theirs)
