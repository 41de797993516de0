"""The self-imitation recipes train: SPEAR's buffer fills and replays inside a short run (a small capacity), its
replay weight follows the schedule, and a killed run resumes row for row; RAPO's settings are its three parts."""
import pytest

from tests.helpers import TINY, resumes_exactly, task_for
from workbench import registry
from workbench.recipes import get_recipe
from workbench.train import make_config
from workbench.train.metrics import read_rows

registry.entries()  # every recipe module registered (data_self_imitation among them)


@pytest.mark.covers("spear")
def test_spear_replays_within_a_short_run_and_resumes_exactly(tmp_path):
    overrides, task = task_for("spear", **{**TINY, "steps": 6, "checkpoint_every": 3})
    overrides["recipe_overrides"] = {"group_transforms": {"capacity": 1, "trigger": 1.0}}
    config = make_config("smoke", recipe="spear", **overrides)
    assert resumes_exactly(config, tmp_path, stop_after_step=3, task=task)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert any(r["spear/replayed_rows"] > 0 for r in rows)
    coefs = [r["spear/sil_coef"] for r in rows]  # T = half of 6 steps: 0, 1/4, 3/4, 1, 1, 1
    assert coefs == pytest.approx([0.0, 0.25, 0.75, 1.0, 1.0, 1.0])


@pytest.mark.covers("rapo", "spear")
def test_the_recipes_compose_their_parts():
    rapo, spear = get_recipe("rapo"), get_recipe("spear")
    assert (rapo.sampler.key, [u.key for u in rapo.group_transforms], [u.key for u in rapo.advantage]) == \
        ("rapo", ["rapo"], ["grpo", "rapo"])
    assert not rapo.rewards  # the tool-call step reward is left out on countdown (no tool calls)
    assert spear.regularizers == () and spear.agg == "seq-mean-token-sum-norm"
    assert spear.objective.kw == {"eps_low": 0.2, "eps_high": 0.28} and spear.advantage[0].kw == {"norm_by_std": False}
    assert spear.schedules[0].into == "loss_weight:spear.coef"
