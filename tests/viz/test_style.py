"""What every figure shares: run colours a reader can tell apart, log ticks that never crowd."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.viz.style import RUN_COLORS, log_tickvals


def test_run_colors_give_every_series_of_the_largest_comparison_its_own_colour():
    from plotly.colors import qualitative

    from workbench import registry
    from workbench.results.stored_runs import COMPARISONS

    one_turn = [e for e in registry.entries("advantage")  # notebook 05's (F4's: notebook 13, F8's: notebook 16)
                if e.family not in ("credit", "multiagent")]
    largest = max([len(r.recipes) for r in COMPARISONS.values()] + [len(one_turn)])
    assert len({c.lower() for c in RUN_COLORS}) == len(RUN_COLORS) >= largest
    assert RUN_COLORS[:10] == list(qualitative.Plotly)  # the first colours, and so every small figure, unchanged


def test_log_tickvals_never_crowd():
    assert log_tickvals([0.11, 0.17]) is None  # less than a factor 3: plotly's own ticks
    assert log_tickvals([0.5, 20]) == [0.5, 1, 2, 5, 10, 20]
    assert log_tickvals([5e-4, 0.5]) == pytest.approx([1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3])
    wide = log_tickvals([1e-9, 1.0])
    assert len(wide) <= 6 and all(np.isclose(np.log10(t), round(np.log10(t))) for t in wide)
