"""DOTS's selection: p = softmax(-|d^ - alpha|/tau) peaks at alpha and is symmetric; d^ of an unmeasured prompt is
attention over the measured ones (a hand computation on 3 prompts), a measured prompt's is its own; mu*k prompts a
round, without replacement, k = n in the first round and floor(fresh * n) after; only the step's own prompts are
measured; a resumed run draws what the straight one draws; bad settings refused."""
import math
import pickle
import random

import pytest
import torch

from tests.helpers import DigitFirst, group_batch
from workbench import registry
from workbench.samplers.dots import (Dots, check_dots, draw_without_replacement, predicted_difficulty,
                                     selection_logits)
from workbench.text.features import prompt_features

pytestmark = pytest.mark.covers("dots-rr")


def probs(d, alpha, tau):
    return torch.softmax(selection_logits(torch.tensor(d, dtype=torch.float64), alpha, tau), 0)


@pytest.mark.parametrize("alpha, tau", [(0.5, 1e-3), (0.5, 0.1), (0.3, 0.05)])
def test_selection_probability_peaks_at_alpha_and_is_symmetric_around_it(alpha, tau):
    deltas = [0.0, 0.02, 0.1, 0.2, 0.25]
    d = [alpha] + [alpha + s * x for x in deltas[1:] for s in (1, -1)]
    p = probs(d, alpha, tau)
    assert int(p.argmax()) == 0 and bool((p[1:] < p[0]).all())
    for j in range(1, len(deltas)):  # p(alpha + x) == p(alpha - x), and farther is less likely
        assert torch.isclose(p[2 * j - 1], p[2 * j], rtol=1e-9, atol=0)
        if j > 1:
            assert p[2 * j - 1] < p[2 * j - 3]
    # the card's tau = 1e-3 is near-greedy: 0.02 away from alpha already weighs e^-20 of the peak
    assert math.isclose(float(probs([0.5, 0.52], 0.5, 1e-3)[1] / probs([0.5, 0.52], 0.5, 1e-3)[0]),
                        math.exp(-20), rel_tol=1e-6)


def test_attention_prediction_equals_a_hand_computation_on_three_prompts():
    prompts = ["3 4>7:", "5 9 2>16:", "3 4>8:"]
    e = prompt_features(prompts)
    measured, tau_att = {0: 0.25, 1: 0.875}, 0.05  # prompt 2 unmeasured
    d_hat = predicted_difficulty(measured, e, 0.5, tau_att)
    s0, s1 = float(e[2] @ e[0]), float(e[2] @ e[1])
    w0 = math.exp(s0 / tau_att) / (math.exp(s0 / tau_att) + math.exp(s1 / tau_att))
    assert math.isclose(float(d_hat[2]), w0 * 0.25 + (1 - w0) * 0.875, rel_tol=1e-12)
    assert s0 > s1 and float(d_hat[2]) < 0.5  # nearer the puzzle it nearly copies
    # decision: a measured prompt's d^ is its measured difficulty, not its attention prediction
    assert d_hat[:2].tolist() == [0.25, 0.875]
    # nothing measured: every prompt at alpha (uniform selection)
    assert predicted_difficulty({}, e, 0.3, tau_att).tolist() == [0.3] * 3
    assert torch.allclose(probs([0.3] * 3, 0.3, 1e-3), torch.full((3,), 1 / 3, dtype=torch.float64))


def test_draws_are_distinct_and_follow_sequential_softmax_without_replacement():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))
    rng, firsts, pairs, N = random.Random(0), [0, 0, 0], {}, 20000
    for _ in range(N):
        a, b = draw_without_replacement(logits, 2, rng)
        assert a != b
        firsts[a] += 1
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
    p = [0.5, 0.3, 0.2]
    for i in range(3):
        assert abs(firsts[i] / N - p[i]) < 0.015
    assert abs(pairs[(1, 2)] / N - 0.3 * 0.2 / 0.7) < 0.015  # P(1 then 2) = p1 * p2 / (1 - p1)
    assert sorted(draw_without_replacement(logits, 3, rng)) == [0, 1, 2]
    # differences of 500/tau-units would underflow a one-shot softmax; sequential draws still take every id
    assert sorted(draw_without_replacement(torch.tensor([0.0, -900.0, -1000.0]), 3, rng)) == [0, 1, 2]


def outcome(examples, rates, G=4):
    """The step's outcome batch: a group of G rows per example with the given pass rates."""
    rewards = [float(r < rate * G) for rate in rates for r in range(G)]
    batch = group_batch(rewards, [g for g in range(len(examples)) for _ in range(G)])
    batch.scores, batch.prompts = batch.rewards.clone(), [str(e.prompt) for e in examples for _ in range(G)]
    return batch


def test_rounds_take_mu_n_distinct_prompts_then_mu_times_the_fresh_share():
    state, task = Dots.init(size=10, mu=2, fresh=0.5), DigitFirst()
    steps = []
    for step in range(6):
        ex = Dots.select(state, task, 4, random.Random(step))
        steps.append(ex)
        Dots.update(state, outcome(ex, [0.5] * len(ex)))
    assert [len(s) for s in steps] == [4, 4, 2, 2, 2, 2] and state.rounds == 3
    first_round = [str(e.prompt) for s in steps[:2] for e in s]
    assert len(set(first_round)) == 8  # without replacement within a round
    assert len({str(e.prompt) for s in steps[2:4] for e in s}) == 4
    # fresh = 1 (DOTS alone): every step selects all n
    only = Dots.init(size=10, fresh=1.0)
    assert [len(Dots.select(only, task, 4, random.Random(s))) for s in range(4)] == [4, 4, 4, 4]


def test_measured_prompts_near_alpha_are_chosen_over_solved_and_impossible_ones():
    state, task = Dots.init(size=10, mu=1, fresh=1.0), DigitFirst()
    ex = Dots.select(state, task, 10, random.Random(0))  # round 1: every prompt, d^ = alpha for all
    rates = [0.0, 1.0, 0.5, 1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 1.0]
    Dots.update(state, outcome(ex, rates))
    chosen = Dots.select(state, task, 2, random.Random(1))
    assert {str(e.prompt) for e in chosen} == {str(ex[2].prompt), str(ex[5].prompt)}  # the two at 50 %
    assert sorted(state.predicted) == sorted(1 - r for r in rates)


def test_update_records_the_steps_own_prompts_not_replayed_groups():
    state, task = Dots.init(size=10, mu=1, fresh=1.0), DigitFirst()
    ex = Dots.select(state, task, 2, random.Random(0))
    others = [e for e in state.examples if e not in ex][:1]  # a replayed group of another pooled prompt
    Dots.update(state, outcome(ex + others, [0.25, 0.75, 1.0]))
    assert {state.id_of(e.prompt) for e in ex} == set(state.pass_rates)
    assert state.pass_rates[state.id_of(ex[0].prompt)] == [(0, 0.25)] and state.steps == 1


def test_a_resumed_sampler_draws_what_the_straight_one_draws():
    """State round trip by pickle (what a checkpoint does) in the middle of a round: the same later prompts."""
    task = DigitFirst()
    straight = Dots.init(size=10, mu=2, fresh=0.5)
    runs = {"straight": straight}
    for step in range(5):
        if step == 3:
            runs["resumed"] = pickle.loads(pickle.dumps(runs["straight"]))
        for name, state in runs.items():
            ex = Dots.select(state, task, 4, random.Random(f"0-{step}-0"))
            Dots.update(state, outcome(ex, [0.25 * (i % 4) for i in range(len(ex))]))
            if name == "resumed":
                assert [e.prompt for e in ex] == [e.prompt for e in last]
            last = ex
    assert runs["resumed"] == runs["straight"]


def test_registration_and_bad_settings_are_refused():
    entry = registry.get("sampler", "dots-rr")
    assert entry.defaults == {"size": 64, "history": 256, "pool_seed": 0, "alpha": 0.5, "tau": 1e-3,
                              "tau_att": 0.05, "mu": 2, "fresh": 0.5}
    for kw, match in [({"alpha": 1.5}, "alpha must be a target difficulty in"), ({"alpha": -0.1}, "alpha must"),
                      ({"tau": 0}, "tau must be a temperature > 0"), ({"tau_att": -1.0}, "tau_att must be"),
                      ({"mu": 0}, "mu must be an integer >= 1"), ({"mu": 1.5}, "mu must be"),
                      ({"fresh": 0.0}, r"fresh must be in \(0, 1\]"), ({"fresh": 1.2}, "fresh must be"),
                      ({"size": 0}, "size must be an integer >= 1")]:
        with pytest.raises(ValueError, match=match):
            check_dots(**kw)
    with pytest.raises(ValueError, match=r"mu\*prompts_per_step = 2\*6 = 12 .* size=10"):
        Dots.check_run(DigitFirst(), 6, size=10)
    with pytest.raises(ValueError, match=r"fresh=0.2 of prompts_per_step=4 selects no fresh prompt"):
        Dots.check_run(DigitFirst(), 4, size=10, fresh=0.2)
    Dots.check_run(DigitFirst(), 4, size=10)  # fits
