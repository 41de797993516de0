"""PCL's sampler: of k m candidates from the pool, the m whose predicted pass rate V(x) is closest to tau; the effective
ratio 1 - p^n - (1 - p)^n peaks at p = 1/2; V, fit by MSE after each step, converges to a fixed policy's pass rates.
No reference implementation was located: the properties are the paper's (and the catalog card's)."""
import copy
import itertools
import random
from fractions import Fraction

import pytest
import torch

from tests.helpers import TINY, DigitFirst, group_batch, resumes_exactly, task_for
from workbench.text.features import prompt_features
from workbench.samplers.pcl import (PromptCurriculum, check_pcl, closest_to_tau, effective_ratio, init_params,
                                    value)
from workbench.samplers.pool import PromptPool, ensure
from workbench.train import make_config
from workbench.train.metrics import read_rows

pytestmark = pytest.mark.covers("pcl")
D = torch.float64


def values_of(state, ids):
    return value(state.params, prompt_features([str(state.examples[i].prompt) for i in ids]))


def fake_update(state, examples, rates, rows=4):
    """The step's outcomes: `rows` rows per prompt, round(rate * rows) of them right."""
    scores = [float(j < round(rates[e.prompt] * rows)) for e in examples for j in range(rows)]
    batch = group_batch(scores, [g for g in range(len(examples)) for _ in range(rows)])
    batch.scores, batch.prompts = batch.rewards.clone(), [e.prompt for e in examples for _ in range(rows)]
    PromptCurriculum.update(state, batch)


# ------------------------------------------------------------------ card test 1: the selection

def test_the_chosen_prompts_are_exactly_the_m_candidates_minimizing_the_gap_to_tau():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        values, ids = torch.rand(8, generator=g, dtype=D), list(range(10, 18))
        chosen = closest_to_tau(values, ids, 3, 0.5)
        best = min(itertools.combinations(range(8), 3), key=lambda s: sum(abs(float(values[j]) - 0.5) for j in s))
        assert sorted(chosen) == sorted(ids[j] for j in best)
    assert closest_to_tau(torch.tensor([0.4, 0.6, 0.6, 0.4], dtype=D), [7, 3, 5, 1], 2, 0.5) == [1, 3]  # ties: low id
    values = torch.tensor([0.1, 0.45, 0.9], dtype=D)
    assert closest_to_tau(values, [0, 1, 2], 1, 0.5) == [1] and closest_to_tau(values, [0, 1, 2], 1, 0.15) == [0]


def test_the_sampler_keeps_the_m_of_its_candidates_closest_to_tau():
    state, task = PromptCurriculum.init(size=10, k=2), DigitFirst()
    ensure(state, task)
    for step in range(6):
        rng = random.Random(step)
        candidates = sorted(random.Random(step).sample(range(10), 8))   # what the sampler draws with the same rng
        ranked = sorted(zip((values_of(state, candidates) - 0.5).abs().tolist(), candidates))
        examples = PromptCurriculum.select(state, task, 4, rng)
        assert [state.id_of(e.prompt) for e in examples] == [i for _, i in ranked[:4]]
        assert state.metrics["pcl/chosen_gap"] <= state.metrics["pcl/candidate_gap"]
        fake_update(state, examples, {e.prompt: (state.id_of(e.prompt) % 5) / 4 for e in examples})


def test_with_k_one_the_step_is_the_random_pools_draw():
    state, pool, task = PromptCurriculum.init(size=10, k=1), PromptPool.init(size=10, order="random"), DigitFirst()
    for step in range(5):
        ours = PromptCurriculum.select(state, task, 4, random.Random(step))
        theirs = PromptPool.select(pool, task, 4, random.Random(step))
        assert sorted(e.prompt for e in ours) == sorted(e.prompt for e in theirs)


# ------------------------------------------------------------------ card test 2: the effective ratio

def test_the_effective_ratio_is_maximal_at_one_half():
    grid = [Fraction(i, 200) for i in range(201)]   # exact: in floats 1 - 2^-63 rounds to 1 near p = 1/2
    for n in (2, 3, 4, 8, 16, 64):
        ratios = [effective_ratio(p, n) for p in grid]
        assert max(ratios) == effective_ratio(Fraction(1, 2), n) == 1 - Fraction(2, 2 ** n)
        assert [p for p, r in zip(grid, ratios) if r == max(ratios)] == [Fraction(1, 2)]   # the only maximum
        assert ratios == ratios[::-1] and ratios[0] == ratios[-1] == 0
    p = torch.linspace(0, 1, 101, dtype=D)
    assert float(p[effective_ratio(p, 4).argmax()]) == pytest.approx(0.5)   # tensors too
    assert effective_ratio(0.5, 2) == pytest.approx(0.5) and effective_ratio(0.3, 2) == pytest.approx(0.42)
    assert effective_ratio(0.5, 8) == pytest.approx(1 - 2 / 256)


# ------------------------------------------------------------------ card test 3: V learns a fixed policy's pass rates

def test_the_value_model_converges_to_the_pass_rates_of_a_fixed_policy():
    state, task = PromptCurriculum.init(size=10, k=1), DigitFirst()
    PromptCurriculum.select(state, task, 4, random.Random(0))
    rates = {e.prompt: [0.0, 0.25, 0.5, 0.75, 1.0][i % 5] for i, e in enumerate(state.examples)}
    errors = []
    for step in range(400):   # online: 4 prompts a step, each seen about 160 times
        examples = PromptCurriculum.select(state, task, 4, random.Random(step))
        fake_update(state, examples, rates)
        errors.append(state.metrics["pcl/value_mse"])
    predicted = values_of(state, range(10))
    target = torch.tensor([rates[e.prompt] for e in state.examples], dtype=D)
    assert (predicted - target).abs().max() < 0.05, (predicted, target)
    assert sum(errors[-10:]) < 0.05 * sum(errors[:10])


def test_the_value_model_starts_from_the_pool_seed_not_the_global_rng():
    torch.manual_seed(1)
    a = PromptCurriculum.init(size=8)
    torch.manual_seed(2)
    b = PromptCurriculum.init(size=8)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    c = PromptCurriculum.init(size=8, pool_seed=1)
    assert not torch.equal(a.params["W1"], c.params["W1"])
    features = prompt_features(["3 5 7>22:", "1 2>3:"])
    assert torch.allclose(value(init_params(32, 0), features), torch.full((2,), 0.5, dtype=D), atol=0.15)


def test_a_copied_state_continues_identically():
    """The state (parameters, Adam moments, pool) is all a resumed run needs: a deep copy mid-run chooses and fits the
    same from there on."""
    state, task = PromptCurriculum.init(size=10, k=2), DigitFirst()
    rates = lambda examples: {e.prompt: (len(e.prompt) % 3) / 2 for e in examples}  # noqa: E731
    for step in range(4):
        examples = PromptCurriculum.select(state, task, 4, random.Random(step))
        fake_update(state, examples, rates(examples))
    twin = copy.deepcopy(state)
    for s in (state, twin):
        for step in range(4, 8):
            examples = PromptCurriculum.select(s, task, 4, random.Random(step))
            fake_update(s, examples, rates(examples))
    assert state.chosen == twin.chosen and all(torch.equal(state.params[k], twin.params[k]) for k in state.params)
    assert state.adam_steps == 8 * state.fit_steps


def test_trains_and_resumes_exactly(tmp_path):
    overrides, task = task_for("pcl", **{**TINY, "steps": 6, "checkpoint_every": 3})
    assert resumes_exactly(make_config("smoke", recipe="pcl", **overrides), tmp_path, stop_after_step=3, task=task)
    assert len(read_rows(tmp_path / "straight" / "metrics.jsonl")) == 6


@pytest.mark.parametrize("kw, match", [
    ({"k": 0}, "k must be an integer >= 1"), ({"hidden": 1.5}, "hidden must be an integer >= 1"),
    ({"fit_steps": 0}, "fit_steps must be an integer >= 1"), ({"tau": 1.0}, "tau must be a target pass rate"),
    ({"tau": 0}, "tau must be a target pass rate"), ({"lr": 0}, "lr must be the value model's Adam learning rate"),
    ({"size": 0}, "size must be an integer >= 1")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        check_pcl(**kw)
    with pytest.raises(ValueError, match=match):
        PromptCurriculum.init(**kw)


def test_the_samplers_metrics_reach_the_logged_rows(tmp_path):
    """The loop logs a sampler's `state.metrics` with the step that chose (Pipeline.sampler_metrics)."""
    from tests.helpers import TINY
    from workbench.train import make_config, train
    from workbench.train.metrics import read_rows

    config = make_config("smoke", recipe="pcl", **{**TINY, "steps": 2, "checkpoint_every": 2, "group_size": 4,
                                                   "recipe_overrides": {"sampler": {"size": 8}}})
    train(config, tmp_path / "run", progress=False)
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert all(0 <= r["pcl/chosen_gap"] <= r["pcl/candidate_gap"] for r in rows)
    assert "pcl/value_mse" not in rows[0] and rows[1]["pcl/value_mse"] >= 0  # V's error once it has been fit
