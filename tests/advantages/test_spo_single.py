"""Single-stream PO: the per-prompt Beta tracker (reward shaping), the batch z-scored advantage, the sampling
weights."""
import math
import random
from collections import Counter

import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.spo_single import (SpoTracker, batch_zscore, forgetting_rate, offline_init,
                                             prioritized_sample, sampling_weights, spo_single, spo_single_tracker)
from workbench.context import StepContext

pytestmark = pytest.mark.covers("spo-single")


def ctx(state, step=0, score=None, rollout=None, examples=()):
    return StepContext(step=step, total_steps=10, seed=0, group_size=1, prompts_per_step=4, max_new_tokens=4,
                       state=state, score=score, rollout=rollout, examples=list(examples))


def one_per_prompt(rewards, prompts, lengths=None):
    b = make_batch(rewards, list(range(len(rewards))), lengths)
    b.prompts = list(prompts)
    return b


def test_registered_as_tracker_and_advantage_with_the_codes_defaults():
    shaping = registry.get("reward_shaping", "spo-single")
    assert shaping.state is SpoTracker and shaping.provides == ("baseline_rewards",)
    assert {"rho": "kl", "rho_value": 0.875, "rho_min": 0.875, "rho_max": 0.96, "d_half": 0.06,
            "offline_n": 8}.items() <= shaping.defaults.items()
    adv = registry.get("advantage", "spo-single")
    assert adv.reads == ("baseline_rewards",) and adv.defaults == {"eps": 1e-8, "unbiased": True}


def test_offline_init_and_forgetting_rate_by_hand():
    assert offline_init([1, 0, 1, 0, 0, 0, 0, 1]) == pytest.approx((8 * 3.5 / 9, 8 * 5.5 / 9))  # N_init = 8
    assert offline_init([]) == (0.5, 0.5)
    assert offline_init([0.3, 0.0]) == pytest.approx((8 * 1.5 / 3, 8 * 1.5 / 3))  # binarized > 0
    D_inside = 0.06 * math.log2(1 / 0.9)
    assert forgetting_rate(torch.tensor([0.0, D_inside, 5.0])).tolist() == pytest.approx([0.96, 0.9, 0.875])


def test_rho_one_is_the_exact_beta_bernoulli_posterior_mean():
    state, rng = SpoTracker(), random.Random(0)
    seen = {"a": [], "b": []}
    for step in range(12):
        prompts = ["a", "b"]
        r = [float(rng.random() < 0.7), float(rng.random() < 0.2)]
        out = spo_single_tracker(one_per_prompt(r, prompts), ctx(state, step), rho="constant", rho_value=1.0,
                                 offline_n=0)
        for j, p in enumerate(prompts):  # Beta(1/2, 1/2) prior, the outcomes of the earlier visits
            assert float(out.baseline_rewards[j]) == pytest.approx((0.5 + sum(seen[p])) / (1 + len(seen[p])))
            seen[p].append(r[j])
    assert state.visits == {"a": 12, "b": 12}


@pytest.mark.parametrize("seed", range(3))
def test_advantages_have_zero_mean_and_unit_std_over_the_batch(seed):
    g = torch.Generator().manual_seed(seed)
    b = one_per_prompt((torch.rand(16, generator=g) < 0.5).to(D), [f"p{k}" for k in range(16)],
                       torch.randint(1, 5, (16,), generator=g))
    b.baseline_rewards = torch.rand(16, generator=g, dtype=D)
    A = spo_single(b)[:, 0]
    assert float(A.mean()) == pytest.approx(0.0, abs=1e-12) and float(A.std()) == pytest.approx(1.0, abs=1e-6)
    assert torch.equal(spo_single(b), A[:, None] * b.mask)


def test_no_sample_whose_reward_differs_from_its_baseline_gets_zero():
    # every prompt answered once and every reward equal: GRPO groups of one would give 0 everywhere
    g = torch.Generator().manual_seed(3)
    b = one_per_prompt([1.0] * 8, [f"p{k}" for k in range(8)])
    b.baseline_rewards = torch.rand(8, generator=g, dtype=D)
    assert bool((spo_single(b)[:, 0] != 0).all())
    assert batch_zscore(torch.tensor([0.3], dtype=D)).tolist() == [0.0]  # a batch of one row: nothing to compare


def test_the_baseline_is_read_before_the_update_and_all_rows_of_a_prompt_count_once_decayed():
    state = SpoTracker()
    b = one_per_prompt([1.0, 1.0, 0.0], ["x", "x", "y"])
    out = spo_single_tracker(b, ctx(state), rho="constant", rho_value=0.5, offline_n=0)
    assert out.baseline_rewards.tolist() == [0.5, 0.5, 0.5]
    assert (state.alpha["x"], state.beta["x"]) == (0.5 * 0.5 + 2.0, 0.5 * 0.5 + 0.0)
    assert (state.alpha["y"], state.beta["y"]) == (0.25, 1.25)


def test_kl_rate_from_the_drift_of_the_stored_response():
    drift = 0.06 * math.log2(1 / 0.9)  # rho = 0.9, inside the clip band
    state, step_logp = SpoTracker(), {0: -1.0, 1: -1.0 - drift, 2: -1.0 - drift}

    def score(batch, temperature):
        return torch.full(batch.mask.shape, step_logp[current[0]], dtype=D) * batch.mask
    current = [0]
    for step in range(3):
        current[0] = step
        spo_single_tracker(one_per_prompt([1.0], ["x"], [3]), ctx(state, step, score=score), offline_n=0)
        if step == 0:  # first visit: D = 0, rho = 0.96
            assert (state.alpha["x"], state.beta["x"]) == pytest.approx((0.96 * 0.5 + 1, 0.96 * 0.5))
            alpha, beta = state.alpha["x"], state.beta["x"]
        if step == 1:  # D = drift -> rho = 0.9
            rho = 0.9
            assert (state.alpha["x"], state.beta["x"]) == pytest.approx((rho * alpha + 1, rho * beta))
            alpha, beta = state.alpha["x"], state.beta["x"]
        if step == 2:  # the policy did not move: D = 0, rho = 0.96
            assert (state.alpha["x"], state.beta["x"]) == pytest.approx((0.96 * alpha + 1, 0.96 * beta))


def test_new_prompts_start_from_offline_rollouts_or_given_scores():
    state, calls = SpoTracker(), []

    def rollout(examples, group_size):
        calls.append((list(examples), group_size))
        return make_batch([1.0, 0.0, 1.0, 1.0] * len(examples), [0] * (4 * len(examples)))
    b = one_per_prompt([0.0, 1.0], ["new", "known"])
    spo_single_tracker(b, ctx(state, rollout=rollout, examples=["ex-new", "ex-known"]), rho="constant",
                       rho_value=1.0, offline_n=4, offline_values={"known": [0, 0]})
    assert calls == [(["ex-new"], 4)]
    a0, b0 = offline_init([1.0, 0.0, 1.0, 1.0])
    assert (state.alpha["new"], state.beta["new"]) == pytest.approx((a0, b0 + 1.0))
    a0, b0 = offline_init([0, 0])
    assert (state.alpha["known"], state.beta["known"]) == pytest.approx((a0 + 1.0, b0))


def test_least_recently_seen_prompts_are_forgotten_beyond_max_prompts():
    state = SpoTracker()
    for step, p in enumerate(["a", "b", "c"]):
        spo_single_tracker(one_per_prompt([1.0], [p]), ctx(state, step), rho="constant", offline_n=0, max_prompts=2)
    assert sorted(state.alpha) == ["b", "c"] and sorted(state.seen) == ["b", "c"]


def test_sampling_weights_and_prioritized_draws():
    p = torch.tensor([0.0, 0.5, 0.9, 1.0], dtype=D)
    assert sampling_weights(p).tolist() == pytest.approx([0.05, 0.55, 0.35, 0.05])
    rng = random.Random(0)
    w = [0.0, 1.0, 3.0]
    counts = Counter(prioritized_sample(w, 4000, rng))  # with replacement: frequencies follow the weights
    assert counts[0] == 0 and counts[2] / counts[1] == pytest.approx(3.0, rel=0.1)
    picks = prioritized_sample([0.0, 1.0, 3.0, 1.0], 3, rng)  # without replacement: distinct, zero weight last
    assert sorted(picks) == [1, 2, 3]
    firsts = Counter(prioritized_sample(w, 1, rng)[0] for _ in range(4000))
    assert firsts[2] / firsts[1] == pytest.approx(3.0, rel=0.1)
    assert sorted(prioritized_sample([0.0, 0.0], 2, rng)) == [0, 1]  # every weight 0: uniform


def test_bad_inputs_are_refused():
    state = SpoTracker()
    with pytest.raises(ValueError, match=r"rewards must lie in \[0, 1\]"):
        spo_single_tracker(one_per_prompt([1.5], ["x"]), ctx(state), offline_n=0)
    with pytest.raises(ValueError, match="rho must be one of"):
        spo_single_tracker(one_per_prompt([1.0], ["x"]), ctx(state), rho="ema")
    with pytest.raises(ValueError, match="needs the step context's rollout"):
        spo_single_tracker(one_per_prompt([1.0], ["x"]), ctx(state), rho="constant", offline_n=8)
    with pytest.raises(ValueError, match="baseline_rewards"):
        spo_single(one_per_prompt([1.0], ["x"]))
    with pytest.raises(ValueError, match="weights must be finite"):
        prioritized_sample([1.0, -1.0], 1, random.Random(0))


def test_a_one_response_per_prompt_recipe_trains_and_resumes_with_its_tracker(tmp_path, monkeypatch):
    from tests.helpers import TINY, DigitFirst, resumes_exactly
    from workbench.recipes import RECIPES, Recipe, use
    from workbench.train import make_config

    recipe = Recipe(key="probe", title="Single-stream Policy Optimization", summary="s", agg="token-mean",
                    reward_shaping=[use("spo-single", offline_n=2)], advantage=["spo-single"])
    monkeypatch.setitem(RECIPES, "probe", recipe)
    config = make_config("smoke", recipe="probe", **{**TINY, "group_size": 1, "minibatches": 1})
    # ten prompts, four per step: prompts come back, so the resumed run needs the tracker restored exactly
    assert resumes_exactly(config, tmp_path, stop_after_step=2, task=DigitFirst())
