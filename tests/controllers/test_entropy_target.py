"""The entropy-target controller (DCPO, AEPO-arbitrary): the temperature switch, what it drives, its state."""
import copy
import io

import pytest
import torch

from tests.helpers import D
from workbench import registry
from workbench.controllers.entropy_target import EntropyTarget, EntropyTargetState, target_temperature
from workbench.recipes import get_recipe
from workbench.train.pipeline import Pipeline

KEYS = ("dcpo", "aepo-arbitrary")
BOTH = {"temperature": 1.0, "entropy_gap": 0.0, "resample_frac": 0.25}  # a driven component's parameters


def entropy(z: torch.Tensor) -> float:
    p = z.softmax(-1)
    return float(-(p * p.log()).sum())


def run(entropies, **hp):
    """(temperature, gap) each step sees, the controller updated after each step with that step's entropy."""
    state = EntropyTarget.init(initial=BOTH, **hp)
    seen = []
    for h in entropies:
        v = EntropyTarget.value(state)
        seen.append((v["temperature"], v["entropy_gap"]))
        state = EntropyTarget.update(state, None, {"entropy": h})
    return seen


@pytest.mark.covers(*KEYS)
def test_one_controller_registered_under_both_keys_with_the_reference_defaults():
    for key in KEYS:
        entry = registry.get("controller", key)
        assert entry.fn is EntropyTarget and entry.reads == ("entropy",) and entry.equation
        assert entry.title == registry.catalog()[key]["title"] and entry.family == "entropy"
        assert entry.defaults == {"entropy_base": 0.5, "t_high": 1.2, "t_low": 0.8, "initial_entropy": 0.0}


@pytest.mark.covers(*KEYS)
@pytest.mark.parametrize("h", [0.0, 0.25, 0.4999999, 0.5, 0.5000001, 0.75, 3.0])
def test_temperature_is_high_at_or_below_the_target_and_low_above(h):
    expected = 1.2 if h <= 0.5 else 0.8
    assert target_temperature(h, entropy_base=0.5, t_high=1.2, t_low=0.8) == expected
    (_, first), (second, gap) = run([h, h])
    assert second == expected and gap == pytest.approx(0.5 - h, abs=0)


@pytest.mark.covers(*KEYS)
def test_temperature_switches_exactly_when_the_entropy_crosses_the_target():
    hs = [0.1, 0.3, 0.5, 0.51, 0.9, 0.7, 0.5, 0.2, 0.6]
    seen = run(hs, entropy_base=0.5)
    # step 0 sees the references' initial entropy 0 (hot); step k the entropy logged at step k - 1
    assert [t for t, _ in seen] == [1.2, 1.2, 1.2, 1.2, 0.8, 0.8, 0.8, 1.2, 1.2]
    assert [g for _, g in seen] == pytest.approx([0.5] + [0.5 - h for h in hs[:-1]])


@pytest.mark.covers(*KEYS)
def test_on_a_toy_softmax_the_switch_holds_the_entropy_near_any_target():
    """Each step moves the logits toward pi^T (the expected positive-REINFORCE step on samples at T): from a
    peaked and from a flat start, the entropy reaches the target and then oscillates in a narrow band around it."""
    for target in (0.5, 1.0, 1.5):
        for z0 in (torch.linspace(0, 16, 10, dtype=D), torch.linspace(0, 0.5, 10, dtype=D)):
            z, state, hs = z0.clone(), EntropyTarget.init(initial=BOTH, entropy_base=target), []
            for _ in range(400):
                t = EntropyTarget.value(state)["temperature"]
                z = z + 2.0 * ((z / t).softmax(-1) - z.softmax(-1))
                hs.append(entropy(z))
                state = EntropyTarget.update(state, None, {"entropy": hs[-1]})
            assert max(abs(h - target) for h in hs[200:]) < 0.25, (target, hs[-5:])
            assert min(hs[200:]) < target < max(hs[200:])  # it keeps switching, both sides of the target


@pytest.mark.covers(*KEYS)
def test_value_sets_only_the_parameters_the_driven_component_takes():
    assert EntropyTarget.value(EntropyTarget.init(initial={"temperature": 1.0})) == {"temperature": 1.2}
    assert EntropyTarget.value(EntropyTarget.init(initial={"entropy_gap": 0.0, "cap": 0.1})) == {"entropy_gap": 0.5}
    assert EntropyTarget.value(EntropyTarget.init(initial=BOTH, initial_entropy=0.7)) == pytest.approx(
        {"temperature": 0.8, "entropy_gap": -0.2})


@pytest.mark.covers(*KEYS)
def test_bad_settings_and_missing_entropy_are_clear_errors():
    with pytest.raises(ValueError, match="whole component"):
        EntropyTarget.init(initial=1.0)
    with pytest.raises(ValueError, match="takes none of"):
        EntropyTarget.init(initial={"beta": 0.1})
    with pytest.raises(ValueError, match="t_low <= t_high"):
        EntropyTarget.init(initial=BOTH, t_high=0.8, t_low=1.2)
    with pytest.raises(ValueError, match="t_low <= t_high"):
        EntropyTarget.init(initial=BOTH, t_low=0.0)
    with pytest.raises(ValueError, match="entropy_base"):
        EntropyTarget.init(initial=BOTH, entropy_base=-0.1)
    with pytest.raises(ValueError, match="initial_entropy"):
        EntropyTarget.init(initial=BOTH, initial_entropy=float("nan"))
    state = EntropyTarget.init(initial=BOTH)
    for row in ({}, {"entropy": None}, {"entropy": float("inf")}):
        with pytest.raises(ValueError, match="finite mean entropy"):
            EntropyTarget.update(state, None, row)


@pytest.mark.covers(*KEYS)
@pytest.mark.parametrize("key", KEYS)
def test_state_round_trips_through_a_checkpoint_and_goes_on_identically(key):
    pipeline = Pipeline(get_recipe(key))
    for part in pipeline.parts["controllers"]:
        pipeline.state[part.name] = part.fn.update(pipeline.state[part.name], None, {"entropy": 0.9})
    buffer = io.BytesIO()
    torch.save(pipeline.state_dict(), buffer)  # the checkpoint holds the pipeline state as torch.save writes it
    restored = Pipeline(get_recipe(key))
    restored.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=False))
    assert restored.state == pipeline.state and restored.driven_metrics(3, 4) == pipeline.driven_metrics(3, 4)
    assert all(isinstance(restored.state[p.name], EntropyTargetState) for p in restored.parts["controllers"])
    for p in (pipeline, restored):
        for part in p.parts["controllers"]:
            p.state[part.name] = part.fn.update(p.state[part.name], None, {"entropy": 0.3})
    assert restored.driven_metrics(4, 4) == pipeline.driven_metrics(4, 4)
    assert sorted(restored.driven_metrics(4, 4).values()) == pytest.approx([0.2, 1.2])  # gap 0.5 - 0.3, T_high
    assert copy.deepcopy(pipeline.state) == pipeline.state


@pytest.mark.covers("dcpo")
def test_dcpo_recipe_drives_the_temperature_into_scoring_and_the_gap_into_the_advantage():
    pipeline = Pipeline(get_recipe("dcpo"))
    assert pipeline.driven_metrics(0, 1) == {"reward_shaping:dcpo.temperature": 1.2, "advantage:dcpo.entropy_gap": 0.5}
    shaping, advantage = pipeline.find("reward_shaping:dcpo"), pipeline.find("advantage:dcpo")
    assert pipeline.kwargs(shaping, 0, 1) == {"temperature": 1.2}
    assert pipeline.kwargs(advantage, 0, 1) == {"entropy_gap": 0.5}


@pytest.mark.covers("aepo-arbitrary")
def test_aepo_recipe_drives_temperature_and_gap_into_the_resampling():
    pipeline = Pipeline(get_recipe("aepo-arbitrary"))
    transform = pipeline.find("group_transform:aepo-arbitrary")
    assert pipeline.kwargs(transform, 0, 1) == {"temperature": 1.2, "entropy_gap": 0.5}
    part = pipeline.parts["controllers"][0]
    pipeline.state[part.name] = part.fn.update(pipeline.state[part.name], None, {"entropy": 0.8})
    assert pipeline.kwargs(transform, 1, 1) == pytest.approx({"temperature": 0.8, "entropy_gap": -0.3})
