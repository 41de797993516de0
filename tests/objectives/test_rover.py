"""ROVER: the gradient at theta = theta_old, the target, the zero loss at Q = y, the next-state term from the LM head,
the rarity-weighted reward shaping, and the claim on enumerable trees (greedy on Q^uniform finds a correct leaf)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from tests.helpers import D, TINY, DigitFirst, grad, random_mask, seeded
from workbench import ops, registry
from workbench.advantages.exact import random_tree
from workbench.batch import RolloutBatch
from workbench.context import Head
from workbench.objectives.rover import (at_next_policy_token, head_stats, next_policy_index, rover, rover_clip,
                                        rover_policy, rover_target, uniform_next_value, uniform_q)
from workbench.recipes import RECIPES, Recipe, use
from workbench.rollout import policy_forward
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("rover")


def head_case(seed, B=5, T=6, V=11, H=4, temperature=0.6):
    """A random LM head, the sampled tokens' log-probs under it (a leaf), r~ broadcast over a ragged mask."""
    g = seeded(seed)
    mask = random_mask(B, T, g, min_len=2)
    head = Head(hidden=torch.randn(B, T, H, generator=g, dtype=D), weight=2 * torch.randn(V, H, generator=g, dtype=D),
                bias=None, trained=True, lr=0.0, betas=(0.9, 0.999), eps=1e-8, temperature=temperature)
    tokens = torch.randint(V, (B, T), generator=g)
    lp = torch.log_softmax(head.hidden @ head.weight.T / temperature, -1)
    logp = lp.gather(-1, tokens[..., None])[..., 0].clone().requires_grad_(True)
    adv = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    return head, tokens, logp, adv, mask, lp.mean(-1) * mask


def run(head, tokens, logp, old, adv, mask, old_mean, **kw):
    return rover(logp, old, adv, mask, head=head, response_ids=tokens, old_vocab_mean_logp=old_mean, **kw)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rho", [1.0, 0.3])
def test_at_theta_old_the_gradient_is_reinforce_with_the_centred_reward(seed, rho):
    """Q = 0 and V_unif = 0 at theta = theta_old, so dL/dlogp_t = -2 rho r~ / N per valid token (token mean)."""
    head, tokens, logp, adv, mask, vocab_mean = head_case(seed)
    loss, metrics = run(head, tokens, logp, logp.detach(), adv, mask, vocab_mean, rho=rho)
    assert loss.item() == pytest.approx(float((adv[mask > 0] ** 2).mean()))
    torch.testing.assert_close(grad(loss, logp), -2 * rho * adv * mask / mask.sum())
    assert metrics["rover/q_mean"] == 0.0 and abs(metrics["rover/next_v_mean"]) < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_the_target_is_r_tilde_at_the_last_token_and_bootstraps_the_next_policy_token(seed):
    g = seeded(seed)
    mask = random_mask(5, 7, g, min_len=3)
    mask[:, 1] = 0.0                                        # a hole (an observation token) inside every row
    mean_now, mean_old = torch.randn(5, 7, generator=g, dtype=D), torch.randn(5, 7, generator=g, dtype=D)
    adv = torch.randn(5, 1, generator=g, dtype=D).expand(5, 7) * mask
    v = uniform_next_value(mean_now, mean_old, mask, rho=0.5)
    y = rover_target(adv, v)
    for i in range(5):
        valid = (mask[i] > 0).nonzero().flatten().tolist()
        assert y[i, valid[-1]] == adv[i, valid[-1]]                          # y = r~ at the last token
        for t, u in zip(valid, valid[1:]):                                   # across the hole: the next policy token
            assert v[i, t] == pytest.approx(0.5 * float(mean_now[i, u] - mean_old[i, u]))
    index, has_next = next_policy_index(mask)
    assert bool((index[:, 0] == 2).all()) and bool(has_next[:, 0].all())
    assert torch.equal(at_next_policy_token(torch.ones(1, 3, dtype=D), torch.ones(1, 3, dtype=D)),
                       torch.tensor([[1.0, 1.0, 0.0]], dtype=D))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kw", [{}, {"rho": 2.0}, {"agg": "seq-mean-token-mean"}])
def test_loss_and_gradient_are_zero_when_q_equals_the_target(seed, kw):
    head, tokens, logp, adv, mask, vocab_mean = head_case(seed)
    g = seeded(100 + seed)
    old_mean = (vocab_mean + 0.3 * torch.randn(mask.shape, generator=g, dtype=D)) * mask
    rho = kw.get("rho", 1.0)
    y = rover_target(adv, uniform_next_value(vocab_mean, old_mean, mask, rho))
    old = logp.detach() - y / rho                                           # Q = rho (logp - old) = y
    loss, _ = run(head, tokens, logp, old, adv, mask, old_mean, **kw)
    assert loss.item() == pytest.approx(0.0, abs=1e-20)
    assert float(grad(loss, logp).abs().max()) < 1e-15
    # off the target: the gradient is 2 rho (Q - y) / N
    loss, _ = run(head, tokens, logp, old + 0.1, adv, mask, old_mean, rho=rho)
    torch.testing.assert_close(grad(loss, logp), 2 * rho * (-0.1 * rho) * mask / mask.sum())


@pytest.mark.parametrize("seed", range(3))
def test_the_current_term_comes_from_the_head(seed):
    """mean_v log pi_theta(v | s) recomputed from the head is the forward's vocabulary mean (ROVER's sum_log_softmax of
    the tempered logits), and the loss moves with it as y does."""
    head, tokens, logp, adv, mask, vocab_mean = head_case(seed)
    mean, best, (picked,) = head_stats(head, mask > 0, (tokens,))
    logits = head.hidden @ head.weight.T
    torch.testing.assert_close(mean, ops.mean_logprob_from_logits(logits, head.temperature).double() * mask,
                               rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(picked, logp.detach() * mask)
    assert bool((best >= picked).all())
    old_mean = vocab_mean - 0.2 * mask                                      # V_unif = 0.2 rho on every non-last token
    loss, metrics = run(head, tokens, logp, logp.detach(), adv, mask, old_mean)
    last = torch.zeros_like(mask)
    last[torch.arange(mask.shape[0]), mask.sum(-1).long() - 1] = 1.0
    expected_y = adv + 0.2 * (mask - last)
    assert loss.item() == pytest.approx(float(((expected_y ** 2) * mask).sum() / mask.sum()))
    assert metrics["rover/next_v_mean"] == pytest.approx(float((0.2 * (mask - last)).sum() / mask.sum()))


def test_use_rover_clip_stops_only_the_moves_away_from_pi_old():
    logp = torch.tensor([[0.5, 0.5, -0.5, -0.5, 0.01]], dtype=D, requires_grad=True)
    y = torch.tensor([[1.0, 0.0, -1.0, 0.0, 1.0]], dtype=D)               # above Q, below Q, below, above, above
    q, high, low = rover_clip(0.8 * logp, y, 0.2)
    assert high.tolist() == [[True, False, False, False, False]]          # Q > log 1.2 and y > Q
    assert low.tolist() == [[False, False, True, False, False]]           # Q < log 0.8 and y < Q
    assert q[0, 0].item() == pytest.approx(math.log(1.2)) and q[0, 2].item() == pytest.approx(math.log(0.8))
    g = grad(((q - y) ** 2).sum(), logp)
    assert g[0, 0] == 0 and g[0, 2] == 0 and bool((g[0, [1, 3, 4]] != 0).all())


def test_refuses_missing_inputs_and_bad_parameters():
    head, tokens, logp, adv, mask, vocab_mean = head_case(0)
    with pytest.raises(ValueError, match="old_vocab_mean_logp"):
        run(head, tokens, logp, logp.detach(), adv, mask, None)
    with pytest.raises(ValueError, match="rho"):
        run(head, tokens, logp, logp.detach(), adv, mask, vocab_mean, rho=0.0)
    with pytest.raises(ValueError, match="clip_ratio"):
        run(head, tokens, logp, logp.detach(), adv, mask, vocab_mean, clip_ratio=1.5)
    with pytest.raises(ValueError, match="context.Head"):
        run(None, tokens, logp, logp.detach(), adv, mask, vocab_mean)
    shifted = torch.roll(tokens, 1, dims=1)                                  # the head gives other log-probs
    with pytest.raises(ValueError, match="differ from the forward"):
        run(head, shifted, logp, logp.detach(), adv, mask * (shifted != tokens), vocab_mean)


def test_response_level_regresses_the_mean_q_on_r_tilde():
    head, tokens, logp, adv, mask, vocab_mean = head_case(1)
    old = logp.detach() - 0.3
    loss, _ = run(head, tokens, logp, old, adv, mask, vocab_mean, response_level=True)
    r = (adv * mask).sum(-1) / mask.sum(-1)
    assert loss.item() == pytest.approx(float(((0.3 - r) ** 2).mean()))


# --------------------------------------------------------------------------------- the rarity-weighted shaping


def shaping_batch(rewards, group):
    mask = torch.ones(len(rewards), 2, dtype=D)
    return RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask,
                        group=torch.tensor(group), rewards=torch.tensor(rewards, dtype=D))


def test_shaping_weighs_rare_outcomes_within_the_group_and_the_code_over_the_batch():
    batch = shaping_batch([1, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    fn = registry.get("advantage", "rover").fn
    ours = fn(batch)[:, 0].tolist()
    assert ours == pytest.approx([3.75, -0.5, -0.5, -0.5, 2.5, 2.5, -1.0, -1.0])   # p = 1/4, then 1/2
    code = fn(batch, reference_bug=True)[:, 0].tolist()                               # p = 3/8 over the batch
    assert code == pytest.approx([3.125, -0.75, -0.75, -0.75, 3.125, 3.125, -0.75, -0.75])
    assert torch.equal(fn(batch)[:, 1], fn(batch)[:, 0])                              # broadcast over the response
    with pytest.raises(ValueError, match="must be >= 0"):
        fn(batch, wrong_weight=-1.0)


# ------------------------------------------------------------------------- the claim on enumerable trees


def greedy_path(mdp, q):
    h = ()
    while True:
        a = max(range(len(mdp.actions)), key=lambda x: q[h][x])
        reward, done, _ = mdp.step(h, a)
        h = h + (a,)
        if done:
            return h, reward


@pytest.mark.parametrize("depth, branching, p", [(3, 2, 0.15), (4, 2, 0.08), (3, 3, 0.05)])
def test_greedy_on_q_uniform_reaches_a_correct_leaf_whenever_one_exists(depth, branching, p):
    found = 0
    for seed in range(40):
        mdp = random_tree(depth=depth, branching=branching, p_success=p, seed=seed)
        q = uniform_q(mdp).Q
        leaves = {h: mdp.step(h[:-1], h[-1])[0] for h in itertools.product(range(branching), repeat=depth)}
        _, reward = greedy_path(mdp, q)
        assert reward == max(leaves.values())
        found += reward == 1.0
        # Q^uniform(h, a) is the share of correct leaves below h + a
        for h, row in q.items():
            for a, value in enumerate(row):
                below = [r for leaf, r in leaves.items() if leaf[:len(h) + 1] == h + (a,)]
                assert value == pytest.approx(sum(below) / len(below))
    assert 0 < found < 40  # some trees have no correct leaf at all, most have one


def test_rover_policy_is_softmax_of_q_over_rho():
    q = [0.5, 0.0, 0.25]
    torch.testing.assert_close(rover_policy(q, 0.5), torch.softmax(torch.tensor(q, dtype=D) / 0.5, -1))
    assert rover_policy(q, 1e-3).argmax() == 0


def test_registered_with_the_catalog_title_defaults_and_reads():
    entry = registry.get("objective", "rover")
    assert entry.title == registry.catalog()["rover"]["title"] and entry.equation and entry.fn.__doc__
    assert {"rho": 1.0, "use_rover_clip": False, "clip_ratio": 0.2, "response_level": False,
            "next_q_scale": 1.0}.items() <= entry.defaults.items()
    assert entry.reads == ("head", "response_ids", "old_vocab_mean_logp")
    shaping = registry.get("advantage", "rover")
    assert shaping.defaults == {"correct_weight": 5.0, "wrong_weight": 2.0, "reference_bug": False}


# ------------------------------------------------------------------------------------------------- end to end


@pytest.mark.covers("rover", "b-coder")
def test_the_trainer_fills_the_logit_statistics_and_both_objectives_train(tmp_path, monkeypatch):
    """On the tiny model: the old pass's vocabulary mean and the reference's greedy tokens are those of a fresh
    forward, the on-policy shortcut is off for ROVER, and one update of each recipe runs with finite metrics (at
    theta = theta_old: Q = 0 for ROVER; the policy's greedy token is the reference's everywhere for B-Coder)."""
    recipes = {"rover": Recipe(key="probe", title="t", summary="s", advantage=[use("grpo")], objective=use("rover")),
               "b-coder": Recipe(key="probe", title="t", summary="s", advantage=[use("gae", gamma=1.0, lam=1.0)],
                                 value=use("value-loss"), objective=use("b-coder"))}
    for key, recipe in recipes.items():
        monkeypatch.setitem(RECIPES, "probe", recipe)
        trainer = Trainer(make_config("smoke", recipe="probe", **{**TINY, "steps": 1, "minibatches": 1}),
                          tmp_path / key, progress=False)
        trainer.task = DigitFirst()
        trainer.setup()
        batch = trainer.make_batch(0)
        args = (batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask, trainer.config.temperature)
        valid = batch.mask > 0
        if key == "rover":
            assert not trainer.on_policy and batch.ref_argmax is None
            *_, stats = policy_forward(trainer.model, *args, stats=("vocab_mean_logp",))
            torch.testing.assert_close(batch.old_vocab_mean_logp[valid], stats["vocab_mean_logp"][valid])
        else:
            assert batch.old_vocab_mean_logp is None
            *_, stats = policy_forward(trainer.ref, *args, stats=("argmax",))
            assert torch.equal(batch.ref_argmax[valid], stats["argmax"][valid])
        metrics = trainer.train_on(batch, 0)
        assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith(key))
        if key == "rover":
            assert abs(metrics["rover/q_mean"]) < 1e-5 and metrics["loss/policy"] > 0
        else:
            assert metrics["b-coder/ref_greedy_frac"] == 1.0 and metrics["b-coder/td_abs"] > 0


def rows_of(head, rows):
    return Head(hidden=head.hidden[rows], weight=head.weight, bias=None, trained=True, lr=0.0, betas=(0.9, 0.999),
                eps=1e-8, temperature=head.temperature)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_micro_batched_loss_and_gradient_equal_the_full_batch(agg):
    head, tokens, logp, adv, mask, old_mean = head_case(5, B=6)
    old = logp.detach() - 0.1 * mask
    denom = ops.Denominators.of(mask)
    full = run(head, tokens, logp, old, adv, mask, old_mean, agg=agg, denom=denom)[0]
    parts = sum(run(rows_of(head, slice(i, i + 2)), tokens[i:i + 2], logp[i:i + 2], old[i:i + 2], adv[i:i + 2],
                    mask[i:i + 2], old_mean[i:i + 2], agg=agg, denom=denom)[0] for i in range(0, 6, 2))
    (g_full,), (g_parts,) = torch.autograd.grad(full, logp), torch.autograd.grad(parts, logp)
    assert torch.allclose(full, parts, atol=1e-12) and torch.allclose(g_full, g_parts, atol=1e-12)
