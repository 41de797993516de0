"""F7 game-theoretic preference objectives (sppo, inpo, nash-mp, online-dpo, spo-minimax): optima, limits,
bad input, registration."""
import pytest
import torch

from tests.helpers import SKEWED_REF, D, close, grads
from workbench import registry
from workbench.preference import games as G
from workbench.preference.selfplay import geometric_mixture, inpo, nash_mp, online_dpo, spo_minimax, sppo


def pairs(seed, B=5, scale=1.0):
    """Leaf chosen/rejected log-probs and fixed reference log-probs, [B] each."""
    g = torch.Generator().manual_seed(seed)
    c, r, rc, rr = (-(torch.rand(B, generator=g, dtype=D) * 3 + 0.5) * scale for _ in range(4))
    return c.requires_grad_(True), r.requires_grad_(True), rc, rr


# ================================================================================================= sppo


@pytest.mark.covers("sppo")
def test_sppo_optimum_is_eta_times_win_rate_minus_half_per_response():
    c, r, rc, rr = pairs(0)
    pw, pl = torch.tensor([0.9, 0.7, 0.5, 0.6, 0.8], dtype=D), torch.tensor([0.1, 0.5, 0.2, 0.4, 0.3], dtype=D)
    beta = 0.25  # η = 4
    # at a = η(P̂_w − ½), b = η(P̂_l − ½) the loss and both gradients vanish
    c_opt = (rc + (pw - 0.5) / beta).requires_grad_(True)
    r_opt = (rr + (pl - 0.5) / beta).requires_grad_(True)
    loss, m = sppo(c_opt, r_opt, rc, rr, beta=beta, chosen_winrate=pw, rejected_winrate=pl)
    assert float(loss.detach()) == pytest.approx(0.0, abs=1e-28)
    assert all(float(x.abs().max()) < 1e-14 for x in grads(loss, c_opt, r_opt))
    assert m["sppo/target_chosen"] == pytest.approx(float((pw - 0.5).mean() / beta))
    # value and gradient against the uclaml form ½[(a − (P̂_w − ½)/β)² + (b − (P̂_l − ½)/β)²], mean over pairs
    loss, _ = sppo(c, r, rc, rr, beta=beta, chosen_winrate=pw, rejected_winrate=pl)
    ref = (0.5 * ((c - rc - (pw - 0.5) / beta) ** 2 + (r - rr - (pl - 0.5) / beta) ** 2)).mean()
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-14)
    assert all(close(a, b, 1e-13) for a, b in zip(grads(loss, c, r), grads(ref, c, r)))


@pytest.mark.covers("sppo")
def test_sppo_win_rate_half_keeps_probability_and_moves_chosen_up_rejected_down():
    c, r = torch.zeros(2, dtype=D, requires_grad=True), torch.zeros(2, dtype=D, requires_grad=True)
    zeros = torch.zeros(2, dtype=D)
    # win rate ½: a = 0 is optimal (the response keeps its probability)
    loss, _ = sppo(c, r, zeros, zeros, beta=0.1, chosen_winrate=[0.5, 0.5], rejected_winrate=[0.5, 0.5])
    assert all(float(g.abs().max()) == 0 for g in grads(loss, c, r))
    # P̂_w > ½ > P̂_l: a gradient step raises log π(y_w) and lowers log π(y_l) individually
    loss, _ = sppo(c, r, zeros, zeros, beta=0.1, chosen_winrate=[0.8, 0.6], rejected_winrate=[0.3, 0.45])
    gc, gr = grads(loss, c, r)
    assert bool((gc < 0).all()) and bool((gr > 0).all())


@pytest.mark.covers("sppo")
def test_sppo_variants_single_and_hard():
    c, r, rc, rr = pairs(1)
    p = torch.tensor([0.9, 0.6, 0.7, 0.55, 0.8], dtype=D)
    single, _ = sppo(c, r, rc, rr, beta=0.5, loss_type="sppo_single", pair_prob=p)
    as_winrates, _ = sppo(c, r, rc, rr, beta=0.5, chosen_winrate=p, rejected_winrate=1 - p)
    assert float(single.detach()) == pytest.approx(float(as_winrates.detach()), rel=1e-14)
    hard, _ = sppo(c, r, rc, rr, beta=0.5, loss_type="sppo_hard")
    ones = torch.ones(5, dtype=D)
    soft, _ = sppo(c, r, rc, rr, beta=0.5, chosen_winrate=ones, rejected_winrate=0 * ones)
    trl = ((c - rc - 0.5 / 0.5) ** 2 + (r - rr + 0.5 / 0.5) ** 2).mean()  # TRL sppo_hard
    assert float(hard.detach()) == pytest.approx(float(trl.detach()), rel=1e-14)
    assert float(hard.detach()) == pytest.approx(2 * float(soft.detach()), rel=1e-14)


@pytest.mark.covers("sppo")
def test_sppo_bad_inputs():
    c, r, rc, rr = pairs(2, B=3)
    w = torch.full((3,), 0.6, dtype=D)
    with pytest.raises(ValueError, match="chosen_winrate is required"):
        sppo(c, r, rc, rr)
    with pytest.raises(ValueError, match="probability"):
        sppo(c, r, rc, rr, chosen_winrate=w + 1, rejected_winrate=w)
    with pytest.raises(ValueError, match="shape"):
        sppo(c, r, rc, rr, chosen_winrate=w[:2], rejected_winrate=w)
    with pytest.raises(ValueError, match="loss_type"):
        sppo(c, r, rc, rr, loss_type="dpo", chosen_winrate=w, rejected_winrate=w)
    with pytest.raises(ValueError, match="beta"):
        sppo(c, r, rc, rr, beta=0.0, chosen_winrate=w, rejected_winrate=w)
    with pytest.raises(ValueError, match="pair_prob"):
        sppo(c, r, rc, rr, chosen_winrate=w, rejected_winrate=w, pair_prob=w)
    with pytest.raises(ValueError, match="NaN"):
        sppo(c, r, rc, rr * float("nan"), chosen_winrate=w, rejected_winrate=w)


# ================================================================================================= inpo


@pytest.mark.covers("inpo")
def test_inpo_limits_are_ipo_anchored_at_the_iterate_or_the_reference():
    c, r, rc, rr = pairs(3)
    pc, pr = pairs(4)[2:]
    ipo = registry.get("preference", "ipo").fn
    eta = 0.4
    at_prev, _ = inpo(c, r, rc, rr, beta=eta, tau=0.0, prev_chosen_logp=pc, prev_rejected_logp=pr)
    ipo_prev, _ = ipo(c, r, pc, pr, beta=eta)
    at_ref, _ = inpo(c, r, rc, rr, beta=eta, tau=eta, prev_chosen_logp=pc, prev_rejected_logp=pr)
    ipo_ref, _ = ipo(c, r, rc, rr, beta=eta)
    for ours, theirs in ((at_prev, ipo_prev), (at_ref, ipo_ref)):
        assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-14)
        assert all(close(a, b, 1e-13) for a, b in zip(grads(ours, c, r), grads(theirs, c, r)))
    # general τ: the catalog formula; no prev = first iteration (π_0 = π_ref)
    tau = 0.1
    loss, m = inpo(c, r, rc, rr, beta=eta, tau=tau, prev_chosen_logp=pc, prev_rejected_logp=pr)
    h = (c - r) - tau / eta * (rc - rr) - (eta - tau) / eta * (pc - pr)
    assert float(loss.detach()) == pytest.approx(float(((h.detach() - 1 / (2 * eta)) ** 2).mean()), rel=1e-14)
    assert m["inpo/target"] == pytest.approx(1 / (2 * eta))
    first, _ = inpo(c, r, rc, rr, beta=eta, tau=tau)
    assert float(first.detach()) == pytest.approx(float(ipo_ref.detach()), rel=1e-14)


@pytest.mark.covers("inpo")
def test_inpo_zero_gradient_at_the_target_and_bad_inputs():
    c, r, rc, rr = pairs(5, B=3)
    pc, pr = pairs(6, B=3)[2:]
    eta, tau = 7.5e-3, 2.5e-3
    assert registry.get("preference", "inpo").defaults == {"beta": eta, "tau": tau, "prev_chosen_logp": None,
                                                           "prev_rejected_logp": None}
    # choose the chosen log-prob so that h = 1/(2η)
    c0 = (r + tau / eta * (rc - rr) + (eta - tau) / eta * (pc - pr) + 1 / (2 * eta)).detach().requires_grad_(True)
    loss, _ = inpo(c0, r, rc, rr, prev_chosen_logp=pc, prev_rejected_logp=pr)
    assert float(loss.detach()) < 1e-20 and all(float(g.abs().max()) < 1e-9 for g in grads(loss, c0, r))
    with pytest.raises(ValueError, match="tau <= beta"):
        inpo(c, r, rc, rr, beta=0.1, tau=0.2)
    with pytest.raises(ValueError, match="tau <= beta"):
        inpo(c, r, rc, rr, beta=0.1, tau=-0.01)
    with pytest.raises(ValueError, match="beta"):
        inpo(c, r, rc, rr, beta=0.0, tau=0.0)
    with pytest.raises(ValueError, match="both prev"):
        inpo(c, r, rc, rr, prev_chosen_logp=pc)
    with pytest.raises(ValueError, match="prev_chosen_logp has shape"):
        inpo(c, r, rc, rr, prev_chosen_logp=pc[:2], prev_rejected_logp=pr[:2])


# ============================================================================================== nash-mp


@pytest.mark.covers("nash-mp")
def test_nash_mp_loss_is_inpo_with_mapped_constants_and_keeps_pi_ref_as_beta_grows():
    c, r, rc, rr = pairs(7)
    pc, pr = pairs(8)[2:]
    beta, eta = 0.3, 2.0
    ours, m = nash_mp(c, r, rc, rr, beta=beta, eta=eta, prev_chosen_logp=pc, prev_rejected_logp=pr)
    theirs, _ = inpo(c, r, rc, rr, beta=1 / eta + beta, tau=beta, prev_chosen_logp=pc, prev_rejected_logp=pr)
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-13)
    assert all(close(a, b, 1e-12) for a, b in zip(grads(ours, c, r), grads(theirs, c, r)))
    assert m["nash_mp/target"] == pytest.approx(eta / (2 * (1 + eta * beta)))
    # β → ∞: the update stays at π_ref whatever the iterate and the game
    P = G.random_intransitive(4, seed=3)
    start = torch.tensor([0.55, 0.25, 0.15, 0.05], dtype=D)
    assert close(G.nash_mp_iterate(P, start, SKEWED_REF, beta=1e9, eta=1.0), SKEWED_REF, 1e-8)
    with pytest.raises(ValueError, match="beta >= 0 and eta > 0"):
        nash_mp(c, r, rc, rr, beta=-1.0)
    with pytest.raises(ValueError, match="beta >= 0 and eta > 0"):
        nash_mp(c, r, rc, rr, eta=0.0)


# =========================================================================================== online-dpo


@pytest.mark.covers("online-dpo")
def test_online_dpo_on_a_fixed_pair_set_is_dpo_and_ipo():
    c, r, rc, rr = pairs(9)
    for loss_type, key, kw in (("sigmoid", "dpo", {}), ("ipo", "ipo", {}),
                               ("ipo", "ipo", {"length_average": True, "chosen_len": torch.full((5,), 3.0),
                                               "rejected_len": torch.full((5,), 4.0)})):
        ours, m = online_dpo(c, r, rc, rr, beta=0.2, loss_type=loss_type, **kw)
        theirs, m_ref = registry.get("preference", key).fn(c, r, rc, rr, beta=0.2, **kw)
        assert float(ours.detach()) == float(theirs.detach())
        assert all(torch.equal(a, b) for a, b in zip(grads(ours, c, r), grads(theirs, c, r)))
        assert m == m_ref
    defaults = registry.get("preference", "online-dpo").defaults
    assert defaults["beta"] == registry.get("preference", "dpo").defaults["beta"] and defaults["loss_type"] == "sigmoid"


@pytest.mark.covers("online-dpo")
def test_online_dpo_refuses_an_unknown_loss_type_and_mismatched_shapes():
    c, r, rc, rr = pairs(10, B=2)
    with pytest.raises(ValueError, match="loss_type"):
        online_dpo(c, r, rc, rr, loss_type="hinge")
    with pytest.raises(ValueError, match="shape"):
        online_dpo(c, r[:1], rc, rr)


@pytest.mark.covers("online-dpo")
def test_nash_md_geometric_mixture():
    g = torch.Generator().manual_seed(0)
    pol, ref = torch.randn(2, 4, 7, generator=g, dtype=D), torch.randn(2, 4, 7, generator=g, dtype=D)
    assert close(geometric_mixture(pol, ref, 0.0), torch.log_softmax(pol, -1), 1e-15)
    assert close(geometric_mixture(pol, ref, 1.0), torch.log_softmax(ref, -1), 1e-15)
    mix = geometric_mixture(pol, ref, 0.5)
    # geometric mixture: π_mix ∝ π^(1−α) π_ref^α
    want = torch.log_softmax(0.5 * torch.log_softmax(pol, -1) + 0.5 * torch.log_softmax(ref, -1), -1)
    assert close(mix, want, 1e-14)
    with pytest.raises(ValueError, match="mixture_coef"):
        geometric_mixture(pol, ref, 1.5)


# ========================================================================================== spo-minimax


@pytest.mark.covers("spo-minimax")
def test_spo_reward_is_the_win_rate_against_the_rest_of_the_group():
    P = G.random_intransitive(5, seed=1)
    rewards, m = spo_minimax(P)
    off = P - torch.diag(P.diagonal())
    assert close(rewards, off.sum(1) / 4, 1e-15)
    assert registry.get("reward_shaping", "spo-minimax").defaults == {"include_self": False}
    with_self, _ = spo_minimax(P, include_self=True)
    assert close(with_self, P.mean(1), 1e-15)  # SPPO's convention: mean over all N, P(ξ_i ≻ ξ_i) = ½
    # antisymmetric judgments: group-mean reward exactly ½, for a batch of contexts
    batch = torch.stack([G.random_intransitive(4, seed=s) for s in range(6)])
    rewards, m = spo_minimax(batch)
    assert rewards.shape == (6, 4)
    assert close(rewards.mean(1), torch.full((6,), 0.5), 1e-15) and m["spo/antisymmetry_gap"] < 1e-15
    # sampled 0/1 labels with ties as ½
    labels = torch.tensor([[0.5, 1.0, 0.5], [0.0, 0.5, 1.0], [0.5, 0.0, 0.5]])
    assert close(spo_minimax(labels)[0], [0.75, 0.5, 0.25], 0)


@pytest.mark.covers("spo-minimax")
def test_spo_reward_ranking_under_bradley_terry_is_the_utility_ranking_and_invariant_to_monotone_transforms():
    s = torch.tensor([0.3, -1.2, 2.0, 0.9, -0.1], dtype=D)
    order = torch.argsort(s)
    for transform in (lambda x: x, lambda x: x ** 3 + 2 * x, torch.exp, lambda x: 5 * x - 1):
        rewards, _ = spo_minimax(G.bradley_terry(transform(s)))
        assert torch.equal(torch.argsort(rewards), order)


@pytest.mark.covers("spo-minimax")
def test_spo_bad_inputs():
    with pytest.raises(ValueError, match=r"\[N, N\]"):
        spo_minimax(torch.full((3, 4), 0.5))
    with pytest.raises(ValueError, match="N >= 2"):
        spo_minimax(torch.full((1, 1), 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        spo_minimax(torch.tensor([[0.5, 2.0], [0.0, 0.5]]))
    with pytest.raises(ValueError, match="NaN"):
        spo_minimax(torch.tensor([[0.5, float("nan")], [0.0, 0.5]]))


@pytest.mark.covers("spo-minimax")
def test_preferences_from_scores_give_rank_win_rates():
    from workbench.preference.selfplay import preferences_from_scores, spo_minimax

    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    P = preferences_from_scores(scores)
    assert torch.equal(P + P.transpose(-1, -2), torch.ones_like(P))  # a consistent judge
    rewards, _ = spo_minimax(P)
    # a correct sample beats the two wrong ones and ties the other correct one: (1 + 1 + 1/2) / 3
    assert torch.allclose(rewards[0], torch.tensor([5 / 6, 1 / 6, 1 / 6, 5 / 6], dtype=rewards.dtype))
    assert torch.allclose(rewards[1], torch.full((4,), 0.5, dtype=rewards.dtype))


@pytest.mark.covers("sppo", "inpo", "nash-mp", "online-dpo", "spo-minimax")
def test_registration_metadata():
    kinds = {"spo-minimax": "reward_shaping"}  # a reward for any RL recipe, not a pairwise loss
    for key in ("sppo", "inpo", "nash-mp", "online-dpo", "spo-minimax"):
        entry = registry.get(kinds.get(key, "preference"), key)
        row = registry.catalog()[key]
        assert entry.family == "preference" and entry.confidence == row["confidence"]
        assert entry.equation and entry.summary and entry.title == row["title"]
    assert registry.get("preference", "sppo").defaults["beta"] == 1e-3
