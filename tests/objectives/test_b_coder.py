"""B-Coder: the conservative Bellman operator on enumerable toy problems (a gamma-contraction whose fixed point is Q of
the pi_ref-greedy policy; value iteration reaches it; exact values rerank a correct program first), and the token
loss (its target, gradient, zero at the fixed point, and the TD(0) target where the policy's greedy is pi_ref's)."""
from __future__ import annotations

import itertools
import random

import pytest
import torch

from tests.helpers import D, grad, random_mask, seeded
from workbench import ops, registry
from workbench.advantages.exact import exact_values, keydoor_mdp, random_tree, tabular_policy
from workbench.context import Head
from workbench.objectives.b_coder import (b_coder, conservative_bellman, conservative_value_iteration, dueling_q,
                                          greedy_actions, program_score, rerank, sup_distance)
from workbench.objectives.rover import at_next_policy_token, head_stats

pytestmark = pytest.mark.covers("b-coder")

PROBLEMS = [lambda s: random_tree(depth=3, branching=3, p_success=0.3, seed=s),
            lambda s: random_tree(depth=4, branching=2, p_success=0.3, seed=s),
            lambda s: keydoor_mdp(length=2, slack=1)]
NAMES = ["tree-3x3", "tree-4x2", "keydoor"]


def random_q(mdp, g):
    return {h: (3 * torch.randn(len(mdp.actions), generator=g, dtype=D)).tolist() for h in mdp.histories()}


def greedy_policy(mdp, ref_greedy):
    """The deterministic policy h -> a*(h) as a table of one-hot probabilities."""
    return {h: torch.nn.functional.one_hot(torch.tensor(a), len(mdp.actions)).double() for h, a in ref_greedy.items()}


# ------------------------------------------------------------------------------------ (1) contraction, fixed point


@pytest.mark.parametrize("make", PROBLEMS, ids=NAMES)
@pytest.mark.parametrize("gamma", [0.5, 0.9, 1.0])
def test_the_operator_is_a_gamma_contraction_with_the_ref_greedy_q_as_fixed_point(make, gamma):
    g = seeded(0)
    for seed in range(3):
        mdp = make(seed)
        ref_greedy = greedy_actions(tabular_policy(mdp, seed=seed))
        for _ in range(3):
            q1, q2 = random_q(mdp, g), random_q(mdp, g)
            gap = sup_distance(conservative_bellman(mdp, q1, ref_greedy, gamma),
                               conservative_bellman(mdp, q2, ref_greedy, gamma))
            assert gap <= gamma * sup_distance(q1, q2) + 1e-12
        fixed = exact_values(mdp, greedy_policy(mdp, ref_greedy), gamma).Q
        assert sup_distance(conservative_bellman(mdp, fixed, ref_greedy, gamma), fixed) < 1e-12


# ------------------------------------------------------------------------------------ (2) value iteration converges


@pytest.mark.parametrize("make", PROBLEMS, ids=NAMES)
@pytest.mark.parametrize("gamma", [0.8, 1.0])
def test_value_iteration_reaches_the_fixed_point_within_the_horizon(make, gamma):
    g = seeded(1)
    for seed in range(3):
        mdp = make(seed)
        ref_greedy = greedy_actions(tabular_policy(mdp, seed=seed))
        fixed = exact_values(mdp, greedy_policy(mdp, ref_greedy), gamma).Q
        start = random_q(mdp, g)
        q, sweeps = conservative_value_iteration(mdp, ref_greedy, gamma, q0=start)
        assert sup_distance(q, fixed) < 1e-12 and sweeps <= mdp.horizon + 1
        # geometric on the way: each sweep shrinks the distance to the fixed point by gamma at least
        current = start
        for _ in range(mdp.horizon):
            nxt = conservative_bellman(mdp, current, ref_greedy, gamma)
            assert sup_distance(nxt, fixed) <= gamma * sup_distance(current, fixed) + 1e-12
            current = nxt


def test_bootstrapping_on_the_reference_action_is_more_conservative_than_the_max():
    """B_c Q <= B* Q (Q-learning's max) everywhere, and equal where a* is Q's argmax."""
    mdp = random_tree(depth=3, branching=3, p_success=0.3, seed=3)
    ref_greedy = greedy_actions(tabular_policy(mdp, seed=3))
    q = random_q(mdp, seeded(2))
    best = {h: max(range(len(mdp.actions)), key=lambda a: row[a]) for h, row in q.items()}
    conservative, optimistic = (conservative_bellman(mdp, q, ref_greedy), conservative_bellman(mdp, q, best))
    assert all(c <= o + 1e-12 for h in q for c, o in zip(conservative[h], optimistic[h]))
    assert sup_distance(conservative_bellman(mdp, q, best), optimistic) == 0.0


# ------------------------------------------------------------------------------------------------ (3) reranking


@pytest.mark.parametrize("seed", range(20))
def test_reranking_by_the_exact_value_puts_a_correct_program_first(seed):
    rng = random.Random(seed)
    mdp = random_tree(depth=4, branching=2, p_success=0.25, seed=seed)
    q = exact_values(mdp, tabular_policy(mdp, seed=seed)).Q             # the exact Q of some policy
    programs = [tuple(rng.randrange(2) for _ in range(4)) for _ in range(5)]
    rewards = {p: mdp.step(p[:-1], p[-1])[0] for p in programs}
    ranked = rerank(mdp, q, programs)
    assert rewards[ranked[0]] == max(rewards.values())
    assert [program_score(mdp, q, p) for p in ranked] == sorted((rewards[p] for p in programs), reverse=True)


# ------------------------------------------------------------------------------------------------ the token loss


def loss_case(seed, B=5, T=6, V=9, H=4, temperature=0.8):
    """A head, sampled tokens with their log-probs (a leaf), reference greedy tokens, critic values, 0/1 rewards."""
    g = seeded(seed)
    mask = random_mask(B, T, g, min_len=2)
    head = Head(hidden=torch.randn(B, T, H, generator=g, dtype=D), weight=2 * torch.randn(V, H, generator=g, dtype=D),
                bias=None, trained=True, lr=0.0, betas=(0.9, 0.999), eps=1e-8, temperature=temperature)
    lp = torch.log_softmax(head.hidden @ head.weight.T / temperature, -1)
    tokens = torch.randint(V, (B, T), generator=g)
    logp = lp.gather(-1, tokens[..., None])[..., 0].clone().requires_grad_(True)
    ref_argmax = torch.randint(V, (B, T), generator=g)
    values = torch.rand(B, T, generator=g, dtype=D) * mask
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    return dict(head=head, tokens=tokens, logp=logp, ref_argmax=ref_argmax, values=values, rewards=rewards, mask=mask,
                lp=lp)


def run(c, **kw):
    return b_coder(c["logp"], c["logp"].detach(), torch.zeros_like(c["mask"]), c["mask"], head=c["head"],
                   response_ids=c["tokens"], ref_argmax=c["ref_argmax"], values=c["values"], rewards=c["rewards"], **kw)


def expected_target(c, gamma, alpha):
    """y_t = r_t + gamma (V_{t+1} + alpha (log pi(a*_{t+1} | s_{t+1}) - max log pi(. | s_{t+1}))), by a loop."""
    lp, mask = c["lp"], c["mask"]
    y = torch.zeros_like(mask)
    for i in range(mask.shape[0]):
        valid = (mask[i] > 0).nonzero().flatten().tolist()
        for t, u in itertools.zip_longest(valid, valid[1:]):
            if u is None:
                y[i, t] = c["rewards"][i]
            else:
                adv = lp[i, u, c["ref_argmax"][i, u]] - lp[i, u].max()
                y[i, t] = gamma * (c["values"][i, u] + alpha * adv)
    return y


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gamma, alpha", [(1.0, 1.0), (0.9, 0.5), (0.0, 2.0)])
def test_the_target_and_the_gradient(seed, gamma, alpha):
    c = loss_case(seed)
    loss, metrics = run(c, gamma=gamma, alpha=alpha)
    y = expected_target(c, gamma, alpha)
    mask = c["mask"]
    q = c["values"] + alpha * (c["logp"].detach() - c["lp"].max(-1).values)
    assert loss.item() == pytest.approx(float((((q - y) ** 2) * mask).sum() / mask.sum()))
    torch.testing.assert_close(grad(loss, c["logp"]), 2 * alpha * (q - y) * mask / mask.sum())
    assert metrics["b-coder/target_mean"] == pytest.approx(float((y * mask).sum() / mask.sum()))


@pytest.mark.parametrize("seed", range(4))
def test_loss_and_gradient_are_zero_at_the_bellman_fixed_point(seed):
    """Choose the critic's values so that Q(s_t, a_t) = y_t along every row (solved from the last token back)."""
    c, gamma, alpha = loss_case(seed), 0.9, 0.7
    _, best, (_, ref_lp) = head_stats(c["head"], c["mask"] > 0, (c["tokens"], c["ref_argmax"]))
    a_taken = c["logp"].detach() - best
    values = torch.zeros_like(c["mask"])
    for i in range(values.shape[0]):
        valid = (c["mask"][i] > 0).nonzero().flatten().tolist()
        y = float(c["rewards"][i])
        for t, u in reversed(list(itertools.zip_longest(valid, valid[1:]))):
            if u is not None:
                y = gamma * (float(values[i, u]) + alpha * float(ref_lp[i, u] - best[i, u]))
            values[i, t] = y - alpha * float(a_taken[i, t])
    c["values"] = values
    loss, metrics = run(c, gamma=gamma, alpha=alpha)
    assert loss.item() < 1e-24 and float(grad(loss, c["logp"]).abs().max()) < 1e-12
    assert metrics["b-coder/td_abs"] < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_where_the_policy_is_greedy_like_the_reference_the_target_is_td0(seed):
    c = loss_case(seed)
    c["ref_argmax"] = c["lp"].argmax(-1)
    _, metrics = run(c, gamma=0.95)
    y = expected_target(c, 0.95, 1.0)
    r = torch.zeros_like(c["mask"])
    last = c["mask"].sum(-1).long() - 1
    r[torch.arange(r.shape[0]), last] = c["rewards"]
    td0 = r + 0.95 * at_next_policy_token(c["values"], c["mask"])
    torch.testing.assert_close(y * c["mask"], td0 * c["mask"])
    assert metrics["b-coder/ref_greedy_frac"] == 1.0


def test_argmax_of_the_dueling_q_is_the_policy_greedy_token():
    c = loss_case(0)
    lp = c["lp"]
    q_all = dueling_q(c["values"][..., None], lp, lp.max(-1, keepdim=True).values, alpha=0.3)   # [B, T, V]
    assert torch.equal(q_all.argmax(-1), lp.argmax(-1))
    assert torch.allclose(q_all.max(-1).values, c["values"])                  # V(s) = max_a Q(s, a)


def test_refuses_missing_inputs_and_bad_parameters():
    c = loss_case(0)
    with pytest.raises(ValueError, match="gamma"):
        run(c, gamma=1.5)
    with pytest.raises(ValueError, match="alpha"):
        run(c, alpha=0.0)
    with pytest.raises(ValueError, match="values"):
        run({**c, "values": None})
    with pytest.raises(ValueError, match="ref_argmax"):
        run({**c, "ref_argmax": c["ref_argmax"][:, :2]})
    with pytest.raises(ValueError, match="differ from the forward"):
        run({**c, "tokens": (c["tokens"] + 1) % 9})


def test_registered_with_the_catalog_title_defaults_and_reads():
    entry = registry.get("objective", "b-coder")
    assert entry.title == registry.catalog()["b-coder"]["title"] and entry.equation and entry.fn.__doc__
    assert entry.confidence == "abstract-only"
    assert {"gamma": 1.0, "alpha": 1.0}.items() <= entry.defaults.items()
    assert entry.reads == ("head", "response_ids", "ref_argmax", "values", "rewards")


def test_micro_batched_loss_and_gradient_equal_the_full_batch():
    c = loss_case(5, B=6)
    denom = ops.Denominators.of(c["mask"])
    full = run(c, denom=denom)[0]
    parts = 0
    for i in range(0, 6, 2):
        rows = slice(i, i + 2)
        head = Head(hidden=c["head"].hidden[rows], weight=c["head"].weight, bias=None, trained=True, lr=0.0,
                    betas=(0.9, 0.999), eps=1e-8, temperature=c["head"].temperature)
        part = {**{k: v[rows] for k, v in c.items() if k not in ("head",)}, "head": head, "logp": c["logp"][rows]}
        parts = parts + run(part, denom=denom)[0]
    (g_full,), (g_parts,) = torch.autograd.grad(full, c["logp"]), torch.autograd.grad(parts, c["logp"])
    assert torch.allclose(full, parts, atol=1e-12) and torch.allclose(g_full, g_parts, atol=1e-12)
