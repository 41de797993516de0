"""Who carries the gradient on a real batch: every token's weight is the objective's own autograd weight (the same
call as the surfaces'), the shares and silenced fractions follow the objectives' own metrics."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.viz.test_weight_surfaces import ppo_weight
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.viz.gradient_shares import (batch_inputs, contribution_figure, contribution_summary, silenced_scatter,
                                           token_gradient_weights)
from workbench.viz.weight_surfaces import NotDrawable, gradient_weight_surface


def toy_batch():
    """Two groups of three one-to-three-token answers, old log-probs, and a moved policy's log-probs."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.float64)
    batch = RolloutBatch(response_ids=torch.zeros(6, 3, dtype=torch.long), mask=mask,
                         group=torch.tensor([0, 0, 0, 1, 1, 1]),
                         rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=torch.float64))
    batch.advantages = registry.get("advantage", "grpo").fn(batch)
    gen = torch.Generator().manual_seed(0)
    batch.old_logp = -torch.rand(6, 3, generator=gen, dtype=torch.float64) * 3 * mask
    batch.entropy = torch.rand(6, 3, generator=gen, dtype=torch.float64) * mask
    logp = batch.old_logp + torch.tensor([[0.5, -0.1, 0.05], [0.3, -0.4, 0], [0.1, 0, 0], [-0.5, 0.15, 0.6],
                                          [0.02, -0.3, 0], [0.4, 0, 0]], dtype=torch.float64)
    return batch, logp * mask


@pytest.mark.parametrize("key", ["ppo-clip", "dual-clip", "cispo", "sapo", "gspo", "tis"])
def test_a_batch_of_one_token_rows_gets_the_surfaces_weights(key):
    """The weight call both the surfaces and the real-batch shares make: on a batch of one-token rows (logp = log r,
    old_logp = 0, no engine log-probs: mu_logp = old_logp) a token's weight is its (r, A) cell of the surface."""
    r = np.array([0.3, 0.75, 1.1, 1.5, 2.5, 3.5, 0.9, 1.25])
    a = np.array([-1.0, 1.0, -0.3, 1.0, -1.0, 0.4, 1.0, -1.0])
    batch = RolloutBatch.from_rewards(list(a), list(range(len(a))), [1] * len(a))
    batch.advantages = torch.tensor(a, dtype=torch.float64)[:, None]
    batch.old_logp = torch.zeros(len(a), 1, dtype=torch.float64)
    w, _ = token_gradient_weights(key, batch, torch.tensor(np.log(r), dtype=torch.float64)[:, None])
    cells = [gradient_weight_surface(key, [ri], [ai])[0, 0] for ri, ai in zip(r, a)]
    np.testing.assert_allclose(w[:, 0], cells, atol=1e-12)


@pytest.mark.covers("bapo")
def test_token_gradient_weights_follow_the_objective_and_bapos_own_share():
    batch, logp = toy_batch()
    r, A = np.exp((logp - batch.old_logp).numpy()), batch.advantages.numpy()
    w, _ = token_gradient_weights("ppo-clip", batch, logp)
    np.testing.assert_allclose(w, ppo_weight(r, A, 0.2, 0.2) * batch.mask.numpy(), atol=1e-12)
    w, metrics = token_gradient_weights("bapo", batch, logp)
    summary = contribution_summary(w, batch.advantages, batch.mask)
    assert summary["pos_share"] == pytest.approx(metrics["bapo/pos_share"], abs=1e-9)  # BAPO's rho is this share
    valid = batch.mask.numpy() > 0
    assert summary["pos"] == pytest.approx(np.abs(w[valid & (A > 0)]).sum())
    assert summary["tokens"] == int((valid & (A != 0)).sum())
    # cispo never silences a token; ppo-clip silences exactly its clipped ones
    w_cispo, _ = token_gradient_weights("cispo", batch, logp)
    assert contribution_summary(w_cispo, batch.advantages, batch.mask)["silenced"] == 0
    w_ppo, _ = token_gradient_weights("ppo-clip", batch, logp)
    clipped = valid & (A != 0) & (((A > 0) & (r > 1.2)) | ((A < 0) & (r < 0.8)))
    assert contribution_summary(w_ppo, batch.advantages, batch.mask)["silenced"] == pytest.approx(
        clipped.sum() / (valid & (A != 0)).sum())


def test_batch_inputs_fill_what_a_grpo_batch_lacks():
    batch, logp = toy_batch()
    from workbench.advantages.gbpo import target_advantage

    kw = batch_inputs("gbpo", batch)
    expected = target_advantage(batch.rewards, batch.group)[:, None] * batch.mask
    torch.testing.assert_close(kw["target_adv"], expected)
    assert torch.equal(batch_inputs("r2vpo", batch)["mu_logp"], batch.old_logp)  # no engine log-probs: no mismatch
    assert torch.equal(batch_inputs("policy-shaping", batch)["offpolicy_mask"], torch.zeros_like(batch.mask))
    v = batch_inputs("vspo", batch)["task_value"]
    torch.testing.assert_close(v, torch.tensor([2 / 9] * 6, dtype=torch.float64))  # p = 1/3 and 2/3: p (1 - p)
    assert batch_inputs("ppo-clip", batch) == {}
    for key in ("hapo", "aepo-agentic-clip", "dispo", "vspo", "hispo", "dots-rr-clip", "policy-shaping"):
        w, _ = token_gradient_weights(key, batch, logp)
        assert w.shape == (6, 3) and np.all(w[batch.mask.numpy() == 0] == 0)
    with pytest.raises(NotDrawable, match="LM head"):
        batch_inputs("capo", batch)


def test_contribution_and_scatter_figures():
    batch, logp = toy_batch()
    weights = {k: token_gradient_weights(k, batch, logp)[0] for k in ("ppo-clip", "bapo", "cispo")}
    summaries = {k: contribution_summary(w, batch.advantages, batch.mask) for k, w in weights.items()}
    fig = contribution_figure(summaries)
    assert list(fig.data[0].x) == pytest.approx([s["pos_share"] for s in summaries.values()])
    assert list(fig.data[1].base) == pytest.approx([s["pos_share"] for s in summaries.values()])
    assert list(fig.data[2].x) == pytest.approx([s["silenced_pos"] for s in summaries.values()])
    fig = silenced_scatter(weights, batch)
    valid = (batch.mask.numpy() > 0) & (batch.advantages.numpy() != 0)
    for i, key in enumerate(weights):
        points = sum(len(t.x) for t in fig.data[3 * i:3 * i + 3])
        assert points == valid.sum()
        assert len(fig.data[3 * i + 2].x) == int((valid & (weights[key] == 0)).sum())
