"""The exact answer: hand-computed values on a 2-level tree, and what known estimators must show against it."""
import pytest
import torch

from workbench.advantages import exact as ce

def test_exact_values_on_a_two_level_tree_match_the_hand_computed_ones():
    mdp, policy = ce.two_level_tree()
    exact = ce.exact_values(mdp, policy)
    assert exact.V == pytest.approx({(): 0.875, (0,): 0.5, (1,): 1.0})
    assert exact.advantage((), 0) == pytest.approx(-0.375) and exact.advantage((), 1) == pytest.approx(0.125)
    assert exact.advantage((0,), 0) == pytest.approx(0.5) and exact.advantage((0,), 1) == pytest.approx(-0.5)
    assert exact.advantage((1,), 0) == pytest.approx(0.0) and exact.advantage((1,), 1) == pytest.approx(0.0)
    assert ce.exact_values(mdp, policy, gamma=0.5).V[()] == pytest.approx(0.4375)  # leaves one turn later: x 0.5


def test_one_step_td_with_the_exact_critic_is_the_exact_advantage_on_every_visit():
    mdp, policy = ce.two_level_tree()
    exact = ce.exact_values(mdp, policy)
    groups = ce.sample_groups(mdp, policy, n_groups=20, group_size=4)
    td = ce.Estimator("td", "gae", {"gamma": 1.0, "lam": 0.0, "whiten": False}, critic=True)
    for (h, a), values in ce.estimates_per_pair(mdp, policy, td, groups, exact).items():
        assert values == pytest.approx([exact.advantage(h, a)] * len(values), abs=1e-6)


def test_rloo_is_unbiased_at_the_first_turn_and_off_by_v_of_the_history_later():
    """RLOO broadcasts R_i - mean of the others: E[A_hat | h, a] = Q(h, a) - V(root), so at turn 0 it is A(root, a)
    and at turn 1 it is A(h, a) + V(h) - V(root)."""
    mdp, policy = ce.two_level_tree()
    exact = ce.exact_values(mdp, policy)
    groups = ce.sample_groups(mdp, policy, n_groups=2000, group_size=4, seed=1)
    means = {pair: sum(v) / len(v) for pair, v in
             ce.estimates_per_pair(mdp, policy, ce.Estimator("rloo", "rloo"), groups, exact).items()}
    for (h, a), mean in means.items():
        expected = exact.Q[h][a] - exact.V[()]
        assert mean == pytest.approx(expected, abs=0.04), (h, a)
    assert means[((0,), 0)] - exact.advantage((0,), 0) == pytest.approx(0.5 - 0.875, abs=0.04)


def test_the_keydoor_observation_recurs_with_and_without_the_key_at_different_values():
    mdp = ce.keydoor_mdp(length=3, slack=1)
    K, R = mdp.actions.index("K"), mdp.actions.index("R")
    assert mdp.observation((K, R)) == mdp.observation((R,)) == "cell1"
    exact = ce.exact_values(mdp, ce.noisy_optimal_policy(mdp, eps=0.3))
    assert exact.V[(K, R)] > 0.3 and exact.V[(R,)] == 0.0  # without the key the door never opens
    assert [mdp.actions[a] for a in ce.optimal_actions(mdp).values()][0] == "K"


def test_bias_variance_rows_rank_a_perfect_critic_first():
    mdp = ce.keydoor_mdp(length=2, slack=1)
    rows = {r["estimator"]: r for r in ce.bias_variance(mdp, ce.noisy_optimal_policy(mdp, eps=0.4), n_groups=40,
                                                        group_size=4)}
    assert rows["gae λ=0, exact V"]["mse"] == pytest.approx(0.0, abs=1e-10)
    assert rows["gae λ=0, exact V"]["corr"] == pytest.approx(1.0)
    assert rows["gae λ=1, exact V"]["mse"] < rows["rloo"]["mse"]
    assert all(r["visits"] == rows["grpo"]["visits"] for r in rows.values())


def test_every_credit_key_is_compared_or_says_why_not():
    from workbench import registry

    credit = {key for key, row in registry.catalog().items() if row["family"] == "credit"}
    compared = {e.key for e in ce.ESTIMATORS}
    assert credit <= compared | set(ce.NOT_HERE), sorted(credit - compared - set(ce.NOT_HERE))
    assert not compared & set(ce.NOT_HERE)


def test_spo_with_the_exact_value_at_every_cut_is_the_exact_advantage():
    mdp = ce.keydoor_mdp(length=2, slack=1)
    policy = ce.noisy_optimal_policy(mdp, eps=0.4)
    exact = ce.exact_values(mdp, policy)
    spo = next(e for e in ce.ESTIMATORS if e.key == "spo-segment")
    groups = ce.sample_groups(mdp, policy, n_groups=5, group_size=4)
    for (h, a), values in ce.estimates_per_pair(mdp, policy, spo, groups, exact).items():
        assert values == pytest.approx([exact.advantage(h, a)] * len(values), abs=1e-6)


def test_proact_reads_the_uniform_policys_q_not_the_current_policys():
    mdp, policy = ce.two_level_tree()
    uniform = ce.exact_values(mdp, ce.uniform_policy(mdp))
    assert uniform.Q[()] == pytest.approx([0.5, 1.0])  # V_unif(a) = .5, V_unif(b) = 1
    batch_episodes = ce.sample_groups(mdp, policy, n_groups=1, group_size=4)[0]
    batch = ce.episode_batch(mdp, batch_episodes, 4, policy)
    ce.uniform_q(batch, batch_episodes, mdp, ce.exact_values(mdp, policy))
    for i, e in enumerate(batch_episodes):
        assert batch.turn_q[i, 0] == pytest.approx(uniform.Q[()][e.actions[0]])
        assert batch.turn_info[i][1]["q_moves"] == pytest.approx(dict(zip("ab", uniform.Q[(e.actions[0],)])))


def test_the_command_prints_the_table(capsys):
    ce.main(["--length", "2", "--groups", "3", "--group-size", "2"])
    out = capsys.readouterr().out
    assert out.startswith("keydoor(length=2, slack=1)") and "| gae λ=0, exact V | 0.000 | 0.000 | 0.000 | 1.00 |" in out
    with pytest.raises(SystemExit):
        ce.main(["--group-size", "1"])
