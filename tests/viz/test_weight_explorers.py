"""The weight explorers: the zoo's sliders follow the chosen objective's parameters, the F1/F2 explorer builds one
control per numeric parameter (and per grid input) of the chosen objective and redraws the surface it names."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import registry
from workbench.viz.weight_explorers import NO_CONTROL, beyond_explorer, explorer_spec, zoo_explorer
from workbench.viz.weight_surfaces import GRID_HELD, drawable_keys, gradient_weight_surface, knob_names

KEYS = drawable_keys()


def test_zoo_explorer_switches_objective_and_sliders():
    pytest.importorskip("ipywidgets")
    box = zoo_explorer("ppo-clip")
    c = box.controls
    assert c["tau_pos"].disabled and not c["eps_high"].disabled
    c["eps_high"].value = 0.5
    plus = lambda: np.asarray(box.figure.data[2].y, dtype=float)  # noqa: E731 (slice at A = +1)
    x = np.asarray(box.figure.data[2].x, dtype=float)
    assert np.all(plus()[(x > 1.25) & (x < 1.45)] > 0)
    c["objective"].value = "sapo"
    assert not c["tau_pos"].disabled and c["eps_low"].disabled and c["tau_pos"].value == pytest.approx(1.0)
    assert box.figure.layout.title.text.startswith("sapo")
    c["objective"].value = "dual-clip"
    assert c["dual_clip_c"].value == 3.0 and "dual_clip_c=3" in box.figure.layout.title.text
    c["objective"].value = "cispo"  # eps sliders off (cap_abs convention), CISPO's cap on
    assert c["eps_low"].disabled and not c["cap_abs"].disabled and c["cap_abs"].value == 5.0


@pytest.mark.parametrize("key", KEYS)
def test_explorer_has_one_control_per_numeric_parameter_of_the_objective(key):
    spec = explorer_spec(key)
    defaults = registry.get("objective", key).defaults
    held = GRID_HELD.get(key, ({}, ""))[0]
    numeric = {n for n, d in defaults.items() if n not in NO_CONTROL and n not in held
               and (n == "dual_clip_c" or isinstance(d, (bool, int, float)))}  # dual_clip_c: "off" or a cap
    assert set(spec["params"]) == numeric
    assert set(spec["params"]) | set(spec["held"]) == set(defaults)  # every parameter shown or listed as held
    assert [k.name for k in spec["knobs"]] == knob_names(key)


def test_explorer_rebuilds_controls_per_objective_and_redraws():
    pytest.importorskip("ipywidgets")
    box = beyond_explorer("bapo")
    assert set(box.controls) == {"objective", "c_low", "c_high", "dual_clip_c", "reference_bug"}
    box.controls["c_high"].value = 1.6
    z = np.asarray(box.figure.data[0].z, float)
    np.testing.assert_allclose(z, gradient_weight_surface("bapo", c_high=1.6), atol=1e-5)
    box.controls["objective"].value = "hapo"
    assert {"entropy", "clip_alpha", "adv_beta", "entropy_pivot", "eps_low", "eps_high"} <= set(box.controls)
    assert "c_low" not in box.controls and box.figure.layout.title.text.startswith("hapo")
    box.controls["entropy"].value = 0.05
    np.testing.assert_allclose(np.asarray(box.figure.data[0].z, float),
                               gradient_weight_surface("hapo", inputs={"entropy": 0.05}), atol=1e-5)
    box.controls["objective"].value = "policy-shaping"
    box.controls["off_policy"].value = False
    assert "on-policy" in box.figure.layout.title.text
    box.controls["objective"].value = "hapo"
    box.controls["eps_low"].value = 0.6
    box.controls["clip_alpha"].value = 2.0  # eps_low (1 + alpha) >= 1: refused by hapo, shown in the title
    assert "ValueError" in box.figure.layout.title.text
    box.controls["clip_alpha"].value = 0.0
    assert box.figure.layout.title.text.startswith("hapo: per-token")
