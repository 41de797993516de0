"""Interactive explorers update their figures without a browser."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.viz import advantage_explorer, clipping_explorer


def test_advantage_explorer_update_changes_figure():
    pytest.importorskip("ipywidgets")
    box = advantage_explorer((1, 0, 0, 1))
    grpo_bars = lambda: np.asarray(box.figure.data[1].y, dtype=float)  # noqa: E731
    before = grpo_bars()
    box.controls["R1"].value = 1.0  # observe() triggers update
    after = grpo_bars()
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, grpo(RolloutBatch.from_rewards([1, 1, 0, 1]))[:, 0].numpy(), atol=1e-12)
    box.controls["divide"].value = False
    np.testing.assert_allclose(grpo_bars(), [0.25, 0.25, -0.75, 0.25], atol=1e-12)
    assert box.controls["bessel"].disabled
    box.update()  # callable directly, as a notebook cell would


def test_clipping_explorer_update_changes_figure():
    pytest.importorskip("ipywidgets")
    box = clipping_explorer()
    weight = lambda: np.asarray(box.figure.data[1].y, dtype=float)  # noqa: E731  (A > 0 gradient weight)
    x = np.asarray(box.figure.data[1].x, dtype=float)
    assert np.all(weight()[x > 1.21] == 0)
    box.controls["eps_high"].value = 0.5
    assert np.all(weight()[(x > 1.21) & (x < 1.49)] > 0)
    assert any(s.type == "rect" and s.x1 == pytest.approx(1.5) for s in box.figure.layout.shapes)
    box.controls["dual_clip_c"].value = 2.0
    assert any(s.type == "line" and s.x0 == 2.0 for s in box.figure.layout.shapes)
    box.controls["dual_clip_c"].value = 0.0
    assert not any(s.type == "line" and s.x0 == 2.0 for s in box.figure.layout.shapes)
    box.controls["sign"].value = "A < 0"
    assert box.figure.data[0].visible is False and box.figure.data[2].visible is True


def test_live_curves_draw_every_row_as_it_arrives():
    from workbench.viz.widgets import LiveCurves

    live = LiveCurves(["reward/mean", "entropy", "kl"])
    assert len(live.figure.data) == 3 and all(len(t.x) == 0 for t in live.figure.data)
    for step in range(4):
        live.add({"step": step, "reward/mean": 0.1 * step, "entropy": 1.0 - 0.1 * step, "kl": None})
    reward, entropy, kl = live.figure.data
    assert list(reward.x) == [0, 1, 2, 3] and list(entropy.y) == pytest.approx([1.0, 0.9, 0.8, 0.7])
    assert len(kl.x) == 0  # no KL logged (no reference): its subplot stays empty, the others still draw
    live.add({"step": 2, "reward/mean": 0.9, "entropy": 0.5})  # resumed from step 2: recomputed steps replace theirs
    assert list(reward.x) == [0, 1, 2] and reward.y[-1] == pytest.approx(0.9)


def test_live_curves_leave_a_static_figure_of_the_finished_run():
    import plotly.graph_objects as go

    from workbench.viz.style import PLOTLY_MIME
    from workbench.viz.widgets import LiveCurves

    class Handle:  # IPython's DisplayHandle: `update` replaces the displayed output
        def update(self, obj, raw=False):
            self.shown, self.raw = obj, raw

    live = LiveCurves(["reward/mean"])
    live.handle = Handle()
    for step in range(3):
        live.add({"step": step, "reward/mean": 0.5 * step})
    live.finish()
    assert live.handle.raw  # a plain figure's bundle, which a saved notebook keeps in place of the widget
    shown = go.Figure(live.handle.shown[PLOTLY_MIME])
    assert list(shown.data[0].x) == [0, 1, 2] and list(shown.data[0].y) == pytest.approx([0.0, 0.5, 1.0])


def test_refresh_carries_the_axes_of_the_new_figure():
    import plotly.graph_objects as go

    from workbench.viz.widgets import refresh

    widget = go.FigureWidget(go.Scatter(x=[1, 2], y=[1, 10]))
    widget.update_yaxes(type="log", tickvals=[1, 10])
    new = go.Figure(go.Scatter(x=[1, 2], y=[1, 1000]))
    new.update_yaxes(type="log", tickvals=[1, 10, 100, 1000], title_text="weight")
    refresh(widget, new)
    assert list(widget.layout.yaxis.tickvals) == [1, 10, 100, 1000] and widget.layout.yaxis.title.text == "weight"
    assert list(widget.data[0].y) == [1, 1000]
