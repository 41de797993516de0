"""Held-out evaluation helpers: sequence log-probs of given responses and preference accuracy."""
import pytest
import torch

from workbench.models import build_tiny
from workbench.rollout.engine import encode_responses
from workbench.tasks import get_task
from workbench.train.evaluate import held_out_pairs, list_logps, preference_accuracy, sequence_logps


def test_a_partial_step_is_scored_without_eos():
    model, tok = build_tiny(seed=0)
    full, _ = list_logps(model, tok, ["12+3="], [["15"]])
    partial, n = list_logps(model, tok, ["12+3="], [["15"]], ends=[[False]])
    eos_only, _ = list_logps(model, tok, ["12+3=15"], [[""]])
    assert n.item() == 2
    assert torch.allclose(full - partial, eos_only, atol=1e-5)  # log p(15 EOS) = log p(15) + log p(EOS | 15)
    with pytest.raises(ValueError, match="empty partial response"):
        encode_responses(tok, [""], eos=[False])


def test_preference_accuracy_counts_the_verified_answer_ranked_first():
    model, tok = build_tiny(seed=0)
    task = get_task("addition")
    pairs = held_out_pairs(task, 8)
    assert [p.chosen for p in pairs] == [e.target for e in task.eval_set(8)] and all(
        p.chosen != p.rejected for p in pairs)
    chosen, rejected, _, _ = sequence_logps(model, tok, pairs)
    assert preference_accuracy(model, tok, task, 8) == pytest.approx(float((chosen > rejected).float().mean()))
