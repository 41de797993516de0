"""ReMix's policy reincarnation: the base becomes the policy after step s_r - 1 and only then (s_r = round(0.5 T)), so
right after it the reference equals the policy and the KL to it is 0; in a training run the logged KL is 0 exactly at
s_r; the schedule gives s_r; refusals."""
import pytest
import torch

from tests.helpers import TINY, DigitFirst, run_task
from workbench import registry
from workbench.kl import estimate
from workbench.references.remix import check_at, reincarnated, reincarnation_step, remix_reincarnation
from workbench.train import make_config
from workbench.train.metrics import read_rows

pytestmark = pytest.mark.covers("remix")


def linear(v):
    m = torch.nn.Linear(2, 2, bias=False)
    torch.nn.init.constant_(m.weight, v)
    return m


def test_right_after_reincarnation_the_reference_is_the_policy_and_the_kl_is_zero():
    """Catalog test (3)."""
    ref, policy = linear(0.0), linear(1.0)
    moves = registry.get("reference", "remix").moves
    x = torch.tensor([[0.3, -0.7]])
    for step in range(4):
        moves({"ref": ref}, policy, step, reincarnate_step=5)
    assert ref.weight.abs().max().item() == 0.0  # steps 0..3 of s_r = 5 leave the warm start
    with torch.no_grad():
        policy.weight.add_(torch.tensor([[0.5, -0.2], [0.1, 0.3]]))
    moves({"ref": ref}, policy, 4, reincarnate_step=5)
    assert torch.equal(ref.weight, policy.weight)
    logp = torch.log_softmax(policy(x), -1)
    ref_logp = torch.log_softmax(ref(x), -1)
    assert estimate(logp, ref_logp, "k2").abs().max().item() == 0.0
    moves({"ref": ref}, linear(9.0), 7, reincarnate_step=5)  # once only
    moves({"ref": ref}, linear(9.0), 3, reincarnate_step=None)
    assert torch.equal(ref.weight, policy.weight)


def test_the_schedule_gives_the_reincarnation_step_and_the_transform_agrees():
    assert [remix_reincarnation(s, 200) for s in (0, 150)] == [100, 100]
    assert remix_reincarnation(0, 4) == 2 and remix_reincarnation(0, 5, at=0.5) == 2  # round half to even
    assert remix_reincarnation(0, 10, at=None) == -1 and reincarnation_step(10, None) is None
    assert [reincarnated(s, 4, 0.5) for s in range(4)] == [False, False, True, True]


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, True, "half"])
def test_bad_reincarnation_shares_are_refused_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="at="):
        check_at(at=bad)


def test_in_a_run_the_logged_kl_to_the_base_is_zero_exactly_at_the_reincarnation_step(tmp_path):
    """TINY: 4 steps, s_r = 2. The batch's kl (old policy vs reference) is > 0 at step 1 and 0 at step 2."""
    import workbench.recipes.data_offpolicy  # noqa: F401  (registers the recipe)

    config = make_config("smoke", recipe="remix", **{**TINY, "lr": 1e-2})
    run_task(config, tmp_path, DigitFirst())
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert rows[1]["kl"] > 0 and rows[2]["kl"] == 0.0
    assert rows[1]["remix/offpolicy_frac"] == 0.5 and rows[2]["remix/offpolicy_frac"] == 0.0
    assert rows[3]["rollouts"] == TINY["prompts_per_step"] * TINY["group_size"]
