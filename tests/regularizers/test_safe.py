"""SAFE's entropy-gated KL excess penalty (`safe-kl-control`) and SAFE's loss terms (`safe`)."""
import pytest
import torch

from tests.helpers import D, batch_with_mask, random_mask
from workbench import ops, registry
from workbench.context import Forward
from workbench.regularizers.entropy import entropy_bonus
from workbench.regularizers.safe import entropy_gate, kl_excess_penalty, rollout_entropy, safe, safe_kl_control


def safe_case(seed, B=6, T=7, kl=0.5, entropy=1.0):
    """logp leaf whose token-mean KL to ref is about `kl`, a ragged mask and a sampling entropy of about `entropy`."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=2)
    ref = -2 * torch.rand(B, T, generator=g, dtype=D)
    logp = (ref + kl + 0.1 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    ent = (entropy + 0.2 * torch.rand(B, T, generator=g, dtype=D)) * mask
    H = (entropy + 0.5 * torch.rand(B, T, generator=g, dtype=D)).requires_grad_(True)
    batch = batch_with_mask([0.0] * B, list(range(B)), mask, ref_logp=ref, entropy=ent)
    return Forward(logp=logp, entropy=H), batch


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True, allow_unused=True)[0]


@pytest.mark.covers("safe", "safe-kl-control")
def test_registered_with_the_reference_defaults():
    for key in ("safe", "safe-kl-control"):
        e = registry.get("regularizer", key)
        assert {"coef": 0.1, "kl_short_decay": 0.9, "entropy_floor": 2.0, "threshold": 0.45, "kl_short_prev": 0.0,
                "reference_bug": False}.items() <= e.defaults.items()
        assert set(e.reads) == {"ref_logp", "entropy"} and e.equation and e.title == registry.catalog()[key]["title"]
    assert registry.get("regularizer", "safe").defaults["entropy_coef"] == 0.01
    assert registry.get("regularizer", "safe-kl-control").family == "surrogate"


@pytest.mark.covers("safe")
def test_entropy_gate_amplifies_low_entropy_and_is_non_increasing():
    hs = [0.0, 0.1, 0.5, 1.0, 1.9, 3.0, 3.9, 5.0, 50.0]
    gates = [entropy_gate(h) for h in hs]
    assert gates[0] == pytest.approx(20.0) and gates[3] == pytest.approx(2 / 1.1) and gates[-1] == 0.5
    assert all(a >= b for a, b in zip(gates, gates[1:])) and min(gates) == 0.5


@pytest.mark.covers("safe", "safe-kl-control")
@pytest.mark.parametrize("reference_bug", [False, True])
def test_no_penalty_at_or_below_the_threshold(reference_bug):
    fwd, batch = safe_case(0, kl=0.2)
    kl = ops.masked_mean(fwd.logp - batch.ref_logp, batch.mask)
    prev = 0.1
    threshold = 0.9 * prev + (1 - 0.9) * kl.item()  # kl_s exactly at the threshold: still inactive
    for th in (threshold, threshold + 0.05):
        loss, m = safe_kl_control(fwd, batch, threshold=th, kl_short_prev=prev, reference_bug=reference_bug)
        assert loss.item() == 0 and m["safe/penalty"] == 0 and m["safe/active"] == 0 and m["safe/gate"] == 1.0
        assert loss.requires_grad != reference_bug  # kl.item(): no graph at all
        if loss.requires_grad:
            assert torch.all(grad(loss, fwd.logp) == 0)


@pytest.mark.covers("safe", "safe-kl-control")
def test_penalty_value_and_gradient_above_the_threshold_and_the_reference_bug():
    fwd, batch = safe_case(1, kl=0.5, entropy=1.0)
    prev, th = 0.4, 0.3
    loss, m = safe_kl_control(fwd, batch, threshold=th, kl_short_prev=prev)
    kl = ops.masked_mean(fwd.logp.detach() - batch.ref_logp, batch.mask)
    kl_s = 0.9 * prev + 0.1 * float(kl)
    H = float(ops.aggregate(batch.entropy, batch.mask, "seq-mean-token-mean"))
    gate = max(0.5, 2.0 / (H + 0.1))
    assert kl_s > th and gate > 1
    assert loss.item() == pytest.approx(0.1 * (kl_s - th) ** 2 * gate, rel=1e-12)
    assert m["safe/kl"] == pytest.approx(float(kl)) and m["safe/kl_short"] == pytest.approx(kl_s)
    assert m["safe/active"] == 1.0 and m["safe/gate"] == pytest.approx(gate)
    # dP/dlogp_t = 0.1 * 2 (kl_s - th) * 0.1 * g / N on every valid token: the fix gives the policy a gradient
    expected = 0.1 * 2 * (kl_s - th) * 0.1 * gate / float(batch.mask.sum()) * batch.mask
    assert torch.allclose(grad(loss, fwd.logp), expected, atol=1e-15)
    bugged, m_bug = safe_kl_control(fwd, batch, threshold=th, kl_short_prev=prev, reference_bug=True)
    assert bugged.item() == pytest.approx(loss.item(), rel=1e-12) and m_bug == m
    assert not bugged.requires_grad  # kl.item(): the penalty only shifts the loss


@pytest.mark.covers("safe")
def test_penalty_is_non_increasing_in_entropy():
    values = []
    for h in (0.05, 0.3, 1.0, 2.0, 3.8, 4.0, 8.0):
        fwd, batch = safe_case(2, kl=0.8, entropy=h)
        values.append(safe_kl_control(fwd, batch, threshold=0.2, kl_short_prev=0.5)[0].item())
    assert values[0] > values[2] > values[4] and all(a >= b for a, b in zip(values, values[1:]))
    assert values[-1] == values[-2] > 0  # the gate bottoms out at 0.5


@pytest.mark.covers("safe")
def test_safe_adds_the_entropy_bonus_to_the_penalty():
    fwd, batch = safe_case(3, kl=0.6)
    kw = dict(threshold=0.2, kl_short_prev=0.3)
    loss, m = safe(fwd, batch, agg="seq-mean-token-mean", **kw)
    penalty, m_ctl = safe_kl_control(fwd, batch, **kw)
    bonus = entropy_bonus(fwd.entropy, batch.mask, coef=0.01, agg="seq-mean-token-mean")
    assert loss.item() == pytest.approx((penalty + bonus).item(), rel=1e-12) and m == m_ctl and penalty.item() > 0
    assert torch.allclose(grad(loss, fwd.entropy), grad(bonus, fwd.entropy))
    assert torch.allclose(grad(loss, fwd.logp), grad(penalty, fwd.logp))
    zero, _ = safe(fwd, batch, entropy_coef=0.0, **kw)
    assert zero.item() == pytest.approx(penalty.item(), rel=1e-12)


@pytest.mark.covers("safe")
def test_rollout_entropy_is_the_batch_mean_of_per_sequence_means():
    _, batch = safe_case(4)
    per_seq = [float(batch.entropy[i][batch.mask[i] > 0].mean()) for i in range(batch.size)]
    assert rollout_entropy(batch.entropy, batch.mask) == pytest.approx(sum(per_seq) / len(per_seq), rel=1e-12)


@pytest.mark.covers("safe-kl-control")
def test_kl_short_is_the_ema_of_the_live_kl():
    kl = torch.tensor(0.7, dtype=D, requires_grad=True)
    p, kl_s, gate = kl_excess_penalty(kl, 0.2, 0.1, entropy=1.0, kl_short_decay=0.8)
    assert kl_s.item() == pytest.approx(0.8 * 0.2 + 0.2 * 0.7)
    (g,) = torch.autograd.grad(p, kl)
    assert g.item() == pytest.approx(0.1 * 2 * (kl_s.item() - 0.1) * 0.2 * gate)


@pytest.mark.covers("safe", "safe-kl-control")
@pytest.mark.parametrize("bad, match", [(dict(coef=-0.1), "coef"), (dict(kl_short_decay=1.0), "kl_short_decay"),
                                        (dict(entropy_floor=0.0), "entropy_floor"), (dict(threshold=0.0), "threshold")])
def test_bad_parameters_are_refused(bad, match):
    fwd, batch = safe_case(5)
    with pytest.raises(ValueError, match=match):
        safe_kl_control(fwd, batch, **bad)
    with pytest.raises(ValueError, match="entropy_coef"):
        safe(fwd, batch, entropy_coef=-1.0)
