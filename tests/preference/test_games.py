"""The toy preference games of workbench.preference.games: oracles, exact equilibria, and the exact policy
dynamics of SPPO, INPO, Nash-MP, online DPO and SPO through the registered losses."""
import math

import pytest
import torch

from tests.helpers import SKEWED_REF, D, close
from workbench.preference import games as G

UNIFORM3 = torch.full((3,), 1 / 3, dtype=D)
START = torch.tensor([0.6, 0.3, 0.1], dtype=D)  # a non-uniform start (mostly "rock")


# ============================================================================================== oracles


@pytest.mark.covers("sppo", "inpo", "nash-mp", "spo-minimax")
def test_oracles_are_consistent_preference_matrices():
    oracles = [G.bradley_terry([0.3, -1.0, 2.0, 0.0]), G.rock_paper_scissors(1.0), G.rock_paper_scissors(0.4),
               G.rock_paper_scissors(0.7, n=5), G.random_intransitive(3, seed=0), G.random_intransitive(5, seed=1)]
    for P in oracles:
        K = P.shape[0]
        assert P.dtype == D
        assert close(P + P.T, torch.ones(K, K), 1e-15)
        assert close(P.diagonal(), torch.full((K,), 0.5), 0)
        assert bool(((P >= 0) & (P <= 1)).all())
        assert G.check_preference_matrix(P) is not None
    rps = G.rock_paper_scissors(1.0)  # rows/cols: rock, paper, scissors
    assert rps[1, 0] == 1 and rps[2, 1] == 1 and rps[0, 2] == 1
    # random intransitive: no Condorcet winner, for several seeds and sizes
    for K, seed in [(3, 0), (3, 7), (4, 2), (5, 1)]:
        P = G.random_intransitive(K, seed=seed)
        assert not bool(((P > 0.5) | torch.eye(K, dtype=torch.bool)).all(1).any())
    assert torch.equal(G.random_intransitive(4, seed=5), G.random_intransitive(4, seed=5))


@pytest.mark.covers("sppo", "inpo", "nash-mp", "spo-minimax")
def test_win_rate_and_sampled_oracle_labels():
    P = G.random_intransitive(4, seed=2)
    pi = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=D)
    assert close(G.win_rate(P, pi), P @ pi)
    assert float(pi @ G.win_rate(P, pi)) == pytest.approx(0.5, abs=1e-15)  # constant-sum: P(π ≻ π) = ½
    n = 40_000
    i, j = torch.full((n,), 1), torch.full((n,), 3)
    labels = G.sample_oracle(P, i, j, torch.Generator().manual_seed(0))
    p = float(P[1, 3])
    assert abs(float(labels.mean()) - p) < 5 * math.sqrt(p * (1 - p) / n)
    assert set(labels.unique().tolist()) <= {0.0, 1.0}
    again = G.sample_oracle(P, i, j, torch.Generator().manual_seed(0))
    assert torch.equal(labels, again)
    assert float(G.sample_oracle(G.rock_paper_scissors(1.0), 1, 0)) == 1.0  # paper always beats rock


@pytest.mark.covers("sppo", "inpo", "nash-mp", "spo-minimax")
def test_exact_nash_equilibria():
    # RPS (3 and 5 responses): uniform; transitive BT: the best response, pure
    assert close(G.nash_equilibrium(G.rock_paper_scissors(1.0)), UNIFORM3)
    assert close(G.nash_equilibrium(G.rock_paper_scissors(0.3, n=5)), torch.full((5,), 0.2, dtype=D))
    assert close(G.nash_equilibrium(G.bradley_terry([0.0, 2.0, 1.0])), [0.0, 1.0, 0.0])
    # random intransitive games: the defining property max_y P(y ≻ π*) = ½, with equality on the support
    for K, seed in [(3, 0), (4, 3), (5, 1)]:
        P = G.random_intransitive(K, seed=seed)
        nash = G.nash_equilibrium(P)
        assert float(nash.sum()) == pytest.approx(1.0, abs=1e-14) and bool((nash >= 0).all())
        assert abs(G.exploitability(P, nash)) < 1e-12
        wr = G.win_rate(P, nash)
        assert close(wr[nash > 0], torch.full_like(wr[nash > 0], 0.5), 1e-12)
        assert int((nash > 0).sum()) >= 3  # intransitive: mixed
    # a 5-response game whose Nash leaves two responses out
    P5 = G.random_intransitive(5, seed=1)
    assert int((G.nash_equilibrium(P5) == 0).sum()) == 2


@pytest.mark.covers("nash-mp", "inpo")
def test_regularized_nash_solves_its_fixed_point_and_tends_to_the_nash():
    P = G.random_intransitive(4, seed=3)
    for beta in (0.05, 0.5, 5.0):
        pi = G.regularized_nash(P, SKEWED_REF, beta)
        assert close(pi, torch.softmax(SKEWED_REF.log() + P @ pi / beta, 0), 1e-12)
        assert G.regularized_gap(P, pi, SKEWED_REF, beta) < 1e-12
    # β → 0: the regularized equilibrium approaches the (unregularized) Nash
    gaps = [G.exploitability(P, G.regularized_nash(P, SKEWED_REF, b)) for b in (0.1, 0.01, 0.001)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.01
    # RPS with a uniform reference: uniform at every β
    assert close(G.regularized_nash(G.rock_paper_scissors(1.0), None, 0.1), UNIFORM3)


@pytest.mark.covers("sppo", "inpo", "nash-mp", "spo-minimax")
def test_oracle_and_game_bad_inputs():
    with pytest.raises(ValueError, match=r"P \+ P\^T = 1"):
        G.check_preference_matrix(torch.tensor([[0.5, 0.7], [0.7, 0.5]]))
    with pytest.raises(ValueError, match=r"\[K, K\]"):
        G.check_preference_matrix(torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        G.check_preference_matrix(torch.tensor([[0.5, 1.5], [-0.5, 0.5]]))
    with pytest.raises(ValueError, match="NaN"):
        G.check_preference_matrix(torch.tensor([[0.5, float("nan")], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="strength"):
        G.rock_paper_scissors(1.5)
    with pytest.raises(ValueError, match="odd"):
        G.rock_paper_scissors(1.0, n=4)
    with pytest.raises(ValueError, match="K >= 3"):
        G.random_intransitive(2)
    with pytest.raises(ValueError, match="sum to 1"):
        G.win_rate(G.rock_paper_scissors(), torch.tensor([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match="full support"):
        G.sppo_iterate(G.rock_paper_scissors(), torch.tensor([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="indices"):
        G.sample_oracle(G.rock_paper_scissors(), 0, 3)
    with pytest.raises(ValueError, match="K <= 10"):
        G.nash_equilibrium(G.bradley_terry(torch.arange(11.0)))


# ================================================================== exact dynamics: derivatives are right


@pytest.mark.covers("sppo", "inpo", "nash-mp", "online-dpo")
@pytest.mark.parametrize("make", ["sppo", "inpo", "nash-mp", "dpo", "ipo"])
def test_pair_objective_derivatives_match_autograd_of_the_exact_expectation(make):
    P = G.random_intransitive(3, seed=0)
    pi = torch.tensor([0.5, 0.2, 0.3], dtype=D)
    ref = torch.tensor([0.2, 0.5, 0.3], dtype=D)
    obj = {"sppo": lambda: G.sppo_objective(P, pi, eta=2.0),
           "inpo": lambda: G.inpo_objective(P, pi, ref, eta=1.0, tau=0.3),
           "nash-mp": lambda: G.nash_mp_objective(P, pi, torch.tensor([0.3, 0.3, 0.4], dtype=D), ref, beta=0.2, eta=2),
           "dpo": lambda: G.dpo_objective(P, pi, ref, beta=0.7),
           "ipo": lambda: G.dpo_objective(P, pi, ref, beta=0.7, loss_type="ipo")}[make]()
    z = torch.tensor([0.3, -0.4, 1.1], dtype=D)
    g, H = obj.derivatives(z)
    assert close(g, torch.autograd.functional.jacobian(obj.value, z), 1e-12)
    assert close(H, torch.autograd.functional.hessian(obj.value, z), 1e-11)
    # the minimizer is stationary and beats nearby policies
    best = obj.argmin(pi.log())
    assert float(obj.derivatives(best, hessian=False).abs().max()) < 1e-10
    v = float(obj.value(best))
    for k in range(3):
        bump = torch.zeros(3, dtype=D)
        bump[k] = 1e-3
        assert float(obj.value(best + bump)) >= v and float(obj.value(best - bump)) >= v


# ================================================================================================= sppo


@pytest.mark.covers("sppo")
def test_sppo_dynamics_nash_is_fixed_point_and_transitive_game_converges_to_the_winner():
    # the (interior) Nash of intransitive games is a fixed point of the exact SPPO update
    for P in (G.rock_paper_scissors(1.0), G.random_intransitive(3, seed=0), G.random_intransitive(3, seed=7)):
        nash = G.nash_equilibrium(P)
        assert close(G.sppo_iterate(P, nash, eta=2.0), nash, 1e-12)
    # one exact step ≈ the idealized multiplicative-weights update (SPPO approximates log Z by η/2)
    P = G.random_intransitive(3, seed=0)
    assert close(G.sppo_iterate(P, START, eta=0.5), G.exp_weights_step(P, START, eta=0.5), 2e-3)
    # transitive (Bradley–Terry) preferences: from a start favouring the worst response, the iterates converge
    # to the Condorcet winner, the game's pure Nash
    bt = G.bradley_terry([0.0, 1.0, 2.0])
    traj = G.trajectory(lambda p: G.sppo_iterate(bt, p, eta=3.0), START, 14)
    assert close(G.nash_equilibrium(bt), [0.0, 0.0, 1.0])
    assert float(traj[-1, 2]) > 0.999 and bool((traj[1:, 2] > traj[:-1, 2]).all())


@pytest.mark.covers("sppo")
def test_sppo_last_iterate_cycles_outward_on_rock_paper_scissors_its_average_does_not():
    """SPPO's guarantee is for the average iterate (no-regret); the last iterate of the exact update moves away
    from the uniform Nash on RPS, like multiplicative weights."""
    rps = G.rock_paper_scissors(1.0)
    traj = G.trajectory(lambda p: G.sppo_iterate(rps, p, eta=1.0), START, 24)
    kls = [G.kl(UNIFORM3, p) for p in traj]
    assert kls[-1] > 2 * kls[0]
    leaders = traj.argmax(1).tolist()
    assert {0, 1, 2} <= set(leaders)  # rock, paper and scissors each lead in turn
    assert G.exploitability(rps, traj.mean(0)) < G.exploitability(rps, traj[-1]) / 3


# ================================================================================================= inpo


@pytest.mark.covers("inpo")
def test_inpo_exact_update_is_the_omd_step_and_converges_to_the_regularized_nash():
    P = G.random_intransitive(4, seed=3)
    start = torch.tensor([0.55, 0.25, 0.15, 0.05], dtype=D)
    eta, tau = 1.0, 0.5
    assert close(G.inpo_iterate(P, start, SKEWED_REF, eta=eta, tau=tau),
                 G.omd_step(P, start, SKEWED_REF, eta=eta, tau=tau), 1e-12)
    # fixed point: the τ-regularized Nash π ∝ π_ref exp(P(y ≻ π)/τ); converged to from a non-uniform start
    star = G.regularized_nash(P, SKEWED_REF, tau)
    assert close(G.inpo_iterate(P, star, SKEWED_REF, eta=eta, tau=tau), star, 1e-12)
    traj = G.trajectory(lambda p: G.inpo_iterate(P, p, SKEWED_REF, eta=eta, tau=tau), start, 25)
    kls = torch.tensor([G.kl(star, p) for p in traj])
    assert float(kls[-1]) < 1e-10 and float(kls[-1]) < 1e-8 * float(kls[0])


@pytest.mark.covers("inpo", "online-dpo")
def test_inpo_moves_to_the_uniform_nash_on_rock_paper_scissors_while_a_bt_fit_is_degenerate():
    rps = G.rock_paper_scissors(1.0)
    traj = G.trajectory(lambda p: G.inpo_iterate(rps, p, eta=1.0, tau=0.5), START, 25)
    kls = [G.kl(UNIFORM3, p) for p in traj]
    assert all(b < a for a, b in zip(kls, kls[1:])) and kls[-1] < 1e-10
    assert close(G.inpo_iterate(rps, UNIFORM3, eta=1.0, tau=0.5), UNIFORM3, 1e-14)
    # offline DPO on pairs spread evenly over RPS: the Bradley–Terry fit is flat (all implicit rewards equal),
    # so DPO returns its reference whatever it is — it learns nothing about the game
    ref = torch.tensor([0.5, 0.3, 0.2], dtype=D)
    assert close(G.dpo_iterate(G.rock_paper_scissors(0.8), START, ref, beta=1.0, pairs_from=UNIFORM3), ref, 1e-10)


# ============================================================================================== nash-mp


@pytest.mark.covers("nash-mp")
def test_nash_mp_regularized_nash_is_a_fixed_point_of_both_half_steps():
    P = G.random_intransitive(4, seed=3)
    beta, eta = 0.1, 4.0
    star = G.regularized_nash(P, SKEWED_REF, beta)
    full, half = G.nash_mp_iterate(P, star, SKEWED_REF, beta=beta, eta=eta, return_half=True)
    assert close(half, star, 1e-12) and close(full, star, 1e-12)
    start = torch.tensor([0.55, 0.25, 0.15, 0.05], dtype=D)
    got = G.nash_mp_iterate(P, start, SKEWED_REF, beta=beta, eta=eta, return_half=True)
    want = G.mirror_prox_step(P, start, SKEWED_REF, beta=beta, eta=eta, return_half=True)
    assert all(close(a, b, 1e-12) for a, b in zip(got, want))


@pytest.mark.covers("nash-mp")
def test_nash_mp_converges_geometrically_and_faster_than_one_step_mirror_descent():
    P = G.random_intransitive(4, seed=3)
    beta, eta, steps = 0.1, 4.0, 16
    star = G.regularized_nash(P, SKEWED_REF, beta)

    def mirror_descent(p):  # the half step alone: one prox step against the current iterate
        return G.nash_mp_objective(P, p, p, SKEWED_REF, beta=beta, eta=eta).argmin(p.log()).exp()

    mp = [G.kl(star, p) for p in G.trajectory(lambda p: G.nash_mp_iterate(P, p, SKEWED_REF, beta=beta, eta=eta),
                                              SKEWED_REF, steps)]
    md = [G.kl(star, p) for p in G.trajectory(mirror_descent, SKEWED_REF, steps)]
    assert all(b < a for a, b in zip(mp, mp[1:]))
    rate = (mp[-1] / mp[0]) ** (1 / steps)
    assert rate < 0.6 and mp[-1] < 1e-5
    assert mp[-1] < md[-1] / 5


@pytest.mark.covers("nash-mp")
def test_nash_mp_converges_to_the_uniform_nash_of_rock_paper_scissors_where_mirror_descent_cycles():
    rps = G.rock_paper_scissors(1.0)
    mp = G.trajectory(lambda p: G.nash_mp_iterate(rps, p, beta=0.0, eta=2.0), START, 30)
    md = G.trajectory(lambda p: G.mirror_descent_step(rps, p, beta=0.0, eta=2.0), START, 30)
    kl_mp = [G.kl(UNIFORM3, p) for p in mp]
    assert all(b < a for a, b in zip(kl_mp, kl_mp[1:])) and kl_mp[-1] < 1e-3 * kl_mp[0]
    assert G.exploitability(rps, mp[-1]) < 1e-2
    assert G.kl(UNIFORM3, md[-1]) > 5 * G.kl(UNIFORM3, md[0])  # extragradient removes the outward cycling


# =========================================================================================== online-dpo


@pytest.mark.covers("online-dpo")
def test_online_dpo_on_intransitive_preferences_cycles_or_lands_off_the_nash():
    # RPS (strong preferences): the online BT fit chases the current leader's counter; no iterate settles
    rps = G.rock_paper_scissors(0.9)
    traj = G.trajectory(lambda p: G.dpo_iterate(rps, p, beta=1.0), START, 12)
    assert min(G.exploitability(rps, p) for p in traj[3:]) > 0.1
    leaders = traj.argmax(1).tolist()
    # the leader is replaced by the response that beats it: rock → paper → scissors → rock → …
    changes = [(a, b) for a, b in zip(leaders, leaders[1:]) if a != b]
    assert len(changes) >= 6 and all(rps[b, a] > 0.5 for a, b in changes)
    # a random intransitive game: online DPO settles, but off the Nash; Nash-MP (β → 0) gets close to it
    P = G.random_intransitive(3, seed=0)
    nash = G.nash_equilibrium(P)
    dpo_traj = G.trajectory(lambda p: G.dpo_iterate(P, p, beta=1.0), UNIFORM3, 10)
    assert close(dpo_traj[-1], dpo_traj[-2], 1e-6)
    assert G.exploitability(P, dpo_traj[-1]) > 0.03 and G.kl(nash, dpo_traj[-1]) > 0.1
    # the fit cannot be consistent: its implied ranking contradicts at least one of the oracle's majorities
    g = dpo_traj[-1].log()  # log π − log π_ref up to a constant (π_ref uniform), i.e. implicit rewards / β
    assert any((g[i] > g[j]) != bool(P[i, j] > 0.5) for i in range(3) for j in range(3) if i != j)
    assert G.exploitability(P, G.regularized_nash(P, None, 0.001)) < 0.003


# ========================================================================================== spo-minimax


@pytest.mark.covers("spo-minimax")
def test_spo_uniform_is_a_fixed_point_of_self_play_on_rock_paper_scissors():
    rps = G.rock_paper_scissors(1.0)
    for n in (2, 3):
        assert close(G.spo_expected_rewards(rps, UNIFORM3, n=n), torch.full((3,), 0.5), 1e-15)
        assert close(G.spo_expected_rewards(rps, START, n=n), rps @ START, 1e-14)  # = P(y ≻ π)
    assert close(G.spo_iterate(rps, UNIFORM3, lr=2.0), UNIFORM3, 1e-15)
    moved = G.spo_iterate(rps, START, lr=2.0)
    assert float(moved[1]) > float(START[1])  # paper, which beats the popular rock, gains
