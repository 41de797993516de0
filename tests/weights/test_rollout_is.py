"""The rollout importance correction as a loss weight: TIS / MIS weights of the minibatch, with their metrics."""
import pytest
import torch

from tests.helpers import make_batch
from workbench import registry
from workbench.objectives.tis import tis_weights
from workbench.recipes import Recipe, use
from workbench.train.pipeline import Pipeline


def mismatched_batch():
    batch = make_batch([1.0, 0.0, 1.0], [0, 0, 0], lengths=[3, 2, 3])
    g = torch.Generator().manual_seed(0)
    batch.old_logp = -torch.rand(batch.mask.shape, generator=g, dtype=torch.float64) * batch.mask
    noise = 0.3 * torch.randn(batch.mask.shape, generator=g, dtype=torch.float64)
    batch.mu_logp = (batch.old_logp + noise) * batch.mask
    return batch


@pytest.mark.covers("tis")
@pytest.mark.parametrize("mode,low", [("token_truncate", None), ("token_mask", 0.8), ("sequence_mask", None)])
def test_its_weights_are_the_tis_weights_of_the_minibatch(mode, low):
    batch = mismatched_batch()
    w, metrics = registry.get("loss_weight", "rollout-is").fn(batch, mode=mode, cap=1.2, low=low)
    assert torch.equal(w, tis_weights(batch.old_logp, batch.mu_logp, batch.mask, mode=mode, cap=1.2, low=low))
    assert metrics["rollout_is/mean_weight"] > 0 and 0 <= metrics["rollout_is/masked_frac"] <= 1
    assert registry.get("loss_weight", "rollout-is").reads == ("old_logp", "mu_logp")


@pytest.mark.parametrize("kw, message", [
    ({"mode": "token_trunc"}, r"loss_weight 'rollout-is': mode='token_trunc' is not one of \['token_truncate', "
                              r"'token_mask', 'sequence_truncate', 'sequence_mask'\]"),
    ({"mode": "token_truncate", "low": 0.5}, r"low=0.5 only applies to the mask modes"),
    ({"mode": "token_mask", "cap": 2.0, "low": 3.0}, r"need 0 <= low < cap, got low=3.0, cap=2.0"),
])
def test_settings_it_cannot_take_are_refused_when_the_recipe_is_built(kw, message):
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"], loss_weights=[use("rollout-is", **kw)])
    with pytest.raises(ValueError, match=message):
        Pipeline(recipe)
