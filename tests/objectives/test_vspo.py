"""VSPO's value-smoothing clip: the PPO band of each sequence scaled by its prompt's task value."""
import pytest
import torch

from tests.helpers import D, grad, group_batch, random_batch
from workbench import ops, registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.vspo import clip_scale, vspo
from workbench.transforms.vspo import PassRates, vspo_resample


def values(seed, B):
    return torch.rand(B, generator=torch.Generator().manual_seed(seed), dtype=D) * 0.25


@pytest.mark.covers("vspo")
def test_vspo_objective_registered_reading_task_value():
    e = registry.get("objective", "vspo")
    assert e.reads == ("task_value",) and e.confidence == "abstract-only"
    assert e.defaults == {"agg": "token-mean", "denom": None, "eps_low": 0.2, "eps_high": 0.2,
                          "value_smoothing": 0.5, "dual_clip_c": None, "logr_clamp": None}
    assert "Our reading" in e.fn.__doc__ and "TODO" not in e.fn.__doc__


@pytest.mark.covers("vspo", "ppo-clip")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_no_smoothing_or_full_value_is_ppo_clip(agg):
    logp, old, A, mask = random_batch(0, scale=0.4)
    ref, m_ref = ppo_clip(logp, old, A, mask, agg=agg)
    assert m_ref["clip/region"] > 0  # the clip is active somewhere
    for v, lam in ((values(1, A.shape[0]), 0.0), (torch.full((A.shape[0],), 0.25, dtype=D), 0.7)):
        loss, m = vspo(logp, old, A, mask, task_value=v, agg=agg, value_smoothing=lam)
        assert loss.item() == ref.item() and torch.equal(grad(loss, logp), grad(ref, logp))
        assert m["clip/region"] == m_ref["clip/region"] and m["vspo/clip_scale_mean"] == 1.0


@pytest.mark.covers("vspo")
def test_each_sequence_is_clipped_at_its_value_smoothed_bound():
    r = torch.tensor([1.15, 1.15, 0.88, 0.88], dtype=D)[:, None]
    A = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=D)[:, None]
    v = torch.tensor([0.0, 0.25, 0.0, 0.25], dtype=D)  # scale 0.5 (band +-0.1) and 1 (band +-0.2)
    logp = torch.log(r).requires_grad_(True)
    mask = torch.ones_like(r)
    loss, m = vspo(logp, torch.zeros_like(r), A, mask, task_value=v, value_smoothing=0.5)
    g = grad(loss * 4, logp)[:, 0]
    assert g[0] == 0 and g[2] == 0  # past the narrowed band in A's direction
    assert torch.allclose(g[[1, 3]], (-r * A)[[1, 3], 0], rtol=1e-14)  # inside the full band: -r A
    assert m["clip/high"] == 0.25 and m["clip/low"] == 0.25 and m["vspo/clip_scale_mean"] == 0.75
    assert torch.allclose(clip_scale(v, value_smoothing=0.5), torch.tensor([0.5, 1.0, 0.5, 1.0], dtype=D))


@pytest.mark.covers("vspo")
def test_clipped_share_falls_as_the_task_value_rises():
    logp, old, A, mask = random_batch(2, B=8, scale=0.3)
    shares = [vspo(logp, old, A, mask, task_value=torch.full((8,), v, dtype=D))[1]["clip/region"]
              for v in (0.0, 0.05, 0.1, 0.2, 0.25)]
    assert all(a >= b for a, b in zip(shares, shares[1:])) and shares[0] > shares[-1]


@pytest.mark.covers("vspo", "grpo", "ppo-clip")
def test_resampling_off_and_no_smoothing_is_grpo():
    """The vspo transform with max_rounds = 1 and the clip with value_smoothing = 0 give GRPO's loss exactly."""
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    batch = group_batch(rewards, [0] * 4 + [1] * 4 + [2] * 4, [3, 2, 4, 1, 2, 3, 3, 1, 4, 4, 2, 3])
    batch.scores, batch.prompts = batch.rewards.clone(), [f"p{i // 4}" for i in range(12)]
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=4, prompts_per_step=3, max_new_tokens=4,
                      state=PassRates())
    out = vspo_resample(batch, ctx, max_rounds=1)
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(out.mask.shape, generator=g, dtype=D)
    logp = (old + torch.randn(out.mask.shape, generator=g, dtype=D) * 0.3).requires_grad_(True)
    ours, _ = vspo(logp, old, grpo(out), out.mask, task_value=out.task_value, agg="seq-mean-token-mean",
                   value_smoothing=0.0)
    ref, _ = ppo_clip(logp, old, grpo(batch), batch.mask, agg="seq-mean-token-mean")
    assert ours.item() == ref.item() and torch.equal(grad(ours, logp), grad(ref, logp))
    # with smoothing on, the same batch trains differently (group 1 has v = 0 and group 0 v = 1/4)
    smoothed, _ = vspo(logp, old, grpo(out), out.mask, task_value=out.task_value, agg="seq-mean-token-mean")
    assert not torch.equal(grad(smoothed, logp), grad(ref, logp))
    assert ops.masked_mean(grpo(out).abs(), out.mask) > 0


@pytest.mark.covers("vspo")
def test_bad_inputs_are_refused_by_name():
    logp, old, A, mask = random_batch(4, B=3)
    v = torch.full((3,), 0.1, dtype=D)
    with pytest.raises(ValueError, match=r"value_smoothing must be in \[0, 1\]"):
        vspo(logp, old, A, mask, task_value=v, value_smoothing=1.5)
    with pytest.raises(ValueError, match=r"task_value must lie in \[0, 1/4\]"):
        vspo(logp, old, A, mask, task_value=torch.full((3,), 0.3, dtype=D))
    with pytest.raises(ValueError, match=r"task_value must have shape \[B\]=3"):
        vspo(logp, old, A, mask, task_value=v[:2])
    with pytest.raises(ValueError, match="eps_low and eps_high must be >= 0"):
        vspo(logp, old, A, mask, task_value=v, eps_high=-0.1)
