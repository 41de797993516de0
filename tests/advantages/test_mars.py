"""MARS: turn rewards normalized per player, token reward-to-go, advantages centred per player over their distinct
values; the card's tests (reward-to-go at gamma 1, mean 0 over distinct values, zero-sum rescaling), and each switch."""
from __future__ import annotations

import pytest
import torch

from tests.advantages.step_batches import episode_batch, returns_to_go
from tests.advantages.test_marft import kuhn_self_play
from workbench import registry
from workbench.advantages.mars import distinct_values, mars, normalize_by_player, scope_keys
from workbench.advantages.step_critic import broadcast_steps, step_rewards, turn_spans

pytestmark = pytest.mark.covers("mars")
D = torch.float64
PLAIN = dict(normalize="none", whiten_rewards=False, advantage_norm="none", whiten_advantages=False)
ACTIONS = [[2, 1], [1, 3, 1], [2], [1, 1], [3, 2, 2], [1, 2]]
REWARDS = [[0.0, 1.0], [0.5, -0.5, -1.0], [2.0], [0.0, -1.0], [1.5, 0.25, 1.0], [-2.0, 0.75]]


def game(rewards=REWARDS, agent=(0, 1, 0, 1, 0, 1), group=(0, 0, 0, 0, 1, 1)):
    b = episode_batch(ACTIONS, [list(r) for r in rewards], group=torch.tensor(group))
    b.agent, b.episode = torch.tensor(agent), torch.arange(len(agent)) // 2
    return b


def per_turn(b, rewards):
    """[B, T] each turn's value on its policy tokens, from per-row lists."""
    S = max(map(len, rewards))
    x = torch.zeros(b.size, S, dtype=D)
    for i, r in enumerate(rewards):
        x[i, :len(r)] = torch.tensor(r, dtype=D)
    return broadcast_steps(x, b)


def test_with_gamma_one_the_return_is_the_sum_of_the_remaining_turn_rewards():
    b = game()
    torch.testing.assert_close(mars(b, **PLAIN), per_turn(b, returns_to_go(REWARDS)), rtol=0, atol=1e-12)


def test_gamma_discounts_per_policy_token():
    """One-token turns: G_s = sum_k gamma^k r_{s+k} (observation tokens between turns are not discounted)."""
    b = episode_batch([[1, 1, 1], [1, 1]], [[1.0, 0.0, 2.0], [0.5, -1.0]])
    torch.testing.assert_close(mars(b, gamma=0.5, **PLAIN), per_turn(b, returns_to_go([[1.0, 0.0, 2.0], [0.5, -1.0]],
                                                                                     0.5)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("scope", ["batch", "group"])
@pytest.mark.parametrize("method", ["mean", "mean_std"])
def test_turn_rewards_are_centred_per_player_within_the_scope(scope, method):
    b = game()
    _, _, valid = turn_spans(b)
    r = step_rewards(b, valid.shape[1])
    keys = scope_keys(b, scope)
    out = normalize_by_player(r, valid, keys, method)
    for key in keys.unique():
        turns = out[keys == key][valid[keys == key]]
        assert abs(float(turns.mean())) < 1e-12
        if method == "mean_std" and turns.numel() > 1:
            assert float(turns.std()) == pytest.approx(1.0, rel=1e-5)
    assert not torch.equal(out, r * valid)


@pytest.mark.parametrize("count_padding", [True, False])
@pytest.mark.parametrize("mode", ["mean", "mean_std"])
def test_each_players_distinct_values_have_mean_zero_before_the_batch_whitening(mode, count_padding):
    """The distinct values of a player's advantages on its policy tokens, with the padding's (A where G = 0) when
    count_padding, have mean 0; the batch whitening then moves every player by one shift and scale, so it no longer
    holds."""
    b = game()
    G_all = mars(b, advantage_norm="none", whiten_advantages=False)
    A_all = mars(b, advantage_norm=mode, count_padding=count_padding, whiten_advantages=False)
    for k in (0, 1):
        rows = b.agent == k
        G, A = G_all[rows][b.mask[rows] > 0], A_all[rows][b.mask[rows] > 0]
        j = int(torch.nonzero(G != G[0])[0])
        slope = (A[0] - A[j]) / (G[0] - G[j])   # A = (G - m) / s is affine in G: read its value at G = 0
        values = torch.cat([A, (A[0] - slope * G[0]).reshape(1)]) if count_padding else A
        assert abs(float(distinct_values(values).mean())) < 1e-9
    whitened = mars(b, advantage_norm=mode, count_padding=count_padding)
    means = [float(distinct_values(whitened[b.agent == k][b.mask[b.agent == k] > 0]).mean()) for k in (0, 1)]
    assert max(abs(m) for m in means) > 1e-3


def scaled_player_one(c):
    return [[c * x for x in r] if i % 2 else list(r) for i, r in enumerate(REWARDS)]


@pytest.mark.parametrize("c", [0.25, 4.0])
def test_rescaling_player_ones_rewards_leaves_player_zeros_advantages_unchanged(c):
    b, scaled = game(), game(scaled_player_one(c))
    zero = b.agent == 0
    for kw in (dict(whiten_rewards=False, whiten_advantages=False),                       # per-player steps alone
               dict(whiten_rewards=False, whiten_advantages=False, normalize="mean_std"),
               dict(normalize="mean_std", advantage_norm="mean_std")):                    # scale-free per player
        torch.testing.assert_close(mars(b, **kw)[zero], mars(scaled, **kw)[zero], rtol=1e-9, atol=1e-9)
    # the self-play configuration couples the players through the batch whitenings' std
    assert not torch.allclose(mars(b)[zero], mars(scaled)[zero], atol=1e-6)


def test_on_kuhn_self_play_rows_the_return_is_the_rows_remaining_turn_rewards():
    b = kuhn_self_play()
    G = mars(b, **PLAIN)
    first, _, valid = turn_spans(b)
    r = b.turn_rewards.double() * valid
    to_go = r.flip(-1).cumsum(-1).flip(-1) * valid
    torch.testing.assert_close(G.gather(1, first).double() * valid, to_go)
    G, A = mars(b, advantage_norm="none", whiten_advantages=False), mars(b, whiten_advantages=False)
    for k in (0, 1):
        rows = b.agent == k
        g, a = G[rows][b.mask[rows] > 0].double(), A[rows][b.mask[rows] > 0].double()
        shift = float(g[0] - a[0])  # A = G - m: the padding's value (G = 0) is -m
        U = distinct_values(torch.cat([a, torch.tensor([-shift], dtype=D)]))
        assert U.numel() > 2 and abs(float(U.mean())) < 1e-5
    assert mars(b).dtype == b.mask.dtype


def test_without_agent_ids_the_batch_is_one_player():
    b = game()
    one = game(agent=(0,) * 6)
    b.agent = None
    torch.testing.assert_close(mars(b), mars(one), rtol=0, atol=0)


def test_the_group_scope_centres_within_each_prompt_group():
    b = game()
    assert not torch.allclose(mars(b, scope="group"), mars(b))
    # one prompt group: the scopes coincide
    b.group = torch.zeros(6, dtype=torch.long)
    torch.testing.assert_close(mars(b, scope="group"), mars(b), rtol=0, atol=0)


def test_equal_values_up_to_rounding_are_one_value():
    v = torch.tensor([0.1 + 0.2, 0.3, 1.0, 1.0 + 1e-12, 2.0], dtype=D)
    assert 0.1 + 0.2 != 0.3 and distinct_values(v).numel() == 3


def test_bad_settings_are_refused_and_the_registration_is_the_catalogs():
    b = game()
    for kw, message in ((dict(normalize="std"), "normalize must be one of"), (dict(scope="tag"), "scope must be"),
                        (dict(advantage_norm=None), "advantage_norm must be one of"),
                        (dict(gamma=1.5), r"gamma \(the discount\) must be in \[0, 1\]")):
        with pytest.raises(ValueError, match=message):
            mars(b, **kw)
    b.turn = None
    with pytest.raises(ValueError, match="turn"):
        mars(b)
    entry = registry.get("advantage", "mars")
    assert entry.family == "multiagent" and entry.defaults["gamma"] == 1.0 and entry.defaults["normalize"] == "mean"
    assert entry.equation and entry.fn.__doc__
