"""SAC's temperature controller: Adam / SGD on log alpha, its direction, and entropy driven to the target on a toy."""
import math
import statistics

import pytest
import torch

from tests.helpers import D, batch_with_mask, step_context
from workbench import registry
from workbench.controllers.sac_temperature import SACTemperature
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


def entropy_batch(values, mask=None):
    H = torch.as_tensor(values, dtype=D).reshape(1, -1)
    mask = torch.ones_like(H) if mask is None else torch.as_tensor(mask, dtype=D).reshape(1, -1)
    return batch_with_mask([0.0], [0], mask, entropy=H * mask)


@pytest.mark.covers("sac-temperature")
def test_registered_with_cleanrl_sac_atari_defaults():
    e = registry.get("controller", "sac-temperature")
    assert e.defaults == {"target_entropy": 0.5, "lr": 3e-4, "optimizer": "adam", "betas": (0.9, 0.999),
                          "eps": 1e-4, "agg": "token-mean"}
    assert SACTemperature.value(SACTemperature.init(initial=0.2)) == pytest.approx(0.2)


@pytest.mark.covers("sac-temperature")
def test_adam_on_log_alpha_is_torch_adam_on_the_temperature_loss():
    entropies = [[1.3, 0.2, 0.9], [0.1, 0.2, 0.05], [2.0, 2.5, 0.1], [0.5, 0.5, 0.5], [0.0, 0.3, 0.2]]
    state = SACTemperature.init(initial=0.3, target_entropy=0.6, lr=0.1, eps=1e-4)
    log_alpha = torch.tensor(math.log(0.3), dtype=D, requires_grad=True)
    opt = torch.optim.Adam([log_alpha], lr=0.1, eps=1e-4)
    for h in entropies:
        state = SACTemperature.update(state, entropy_batch(h), {})
        opt.zero_grad()
        (log_alpha.exp() * (torch.tensor(h, dtype=D) - 0.6).mean()).backward()  # J = alpha (H - Hbar)
        opt.step()
        assert state.log_alpha == pytest.approx(log_alpha.item(), abs=1e-12)
    assert SACTemperature.value(state) == pytest.approx(log_alpha.exp().item(), rel=1e-12)


@pytest.mark.covers("sac-temperature")
def test_sgd_step_is_minus_lr_alpha_times_the_entropy_gap():
    state = SACTemperature.init(initial=0.5, target_entropy=1.0, lr=0.2, optimizer="sgd")
    state = SACTemperature.update(state, entropy_batch([1.5, 2.5, 9.0], mask=[1, 1, 0]), {})  # masked 9 ignored
    assert state.log_alpha == pytest.approx(math.log(0.5) - 0.2 * 0.5 * (2.0 - 1.0), abs=1e-15)


@pytest.mark.covers("sac-temperature")
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_alpha_falls_above_the_target_rises_below_and_holds_at_it(optimizer):
    for h, direction in ((1.2, -1), (0.1, 1), (0.5, 0)):
        state = SACTemperature.init(initial=0.1, target_entropy=0.5, lr=0.05, optimizer=optimizer)
        alphas = [SACTemperature.value(state)]
        for _ in range(5):
            state = SACTemperature.update(state, entropy_batch([h, h]), {})
            alphas.append(SACTemperature.value(state))
        steps = [b - a for a, b in zip(alphas, alphas[1:])]
        assert all((s > 0) - (s < 0) == direction for s in steps), (h, steps)


def sharpen_with_auto_alpha(target, steps=1500, lr=0.05, optimizer="adam", initial=0.01, fixed_alpha=None):
    """Softmax policy over 8 tokens trained on -log p_0 (a sharpening objective that collapses entropy) minus
    alpha H; after each step the controller sees the policy's entropy."""
    logits = (0.1 * torch.randn(8, generator=torch.Generator().manual_seed(0), dtype=D)).requires_grad_(True)
    opt = torch.optim.SGD([logits], lr=0.5)
    state = SACTemperature.init(initial=initial, target_entropy=target, lr=lr, optimizer=optimizer)
    trace = []
    for _ in range(steps):
        logp = torch.log_softmax(logits, -1)
        H = -(logp.exp() * logp).sum()
        alpha = fixed_alpha if fixed_alpha is not None else SACTemperature.value(state)
        opt.zero_grad()
        (-logp[0] - alpha * H).backward()
        opt.step()
        state = SACTemperature.update(state, entropy_batch([H.item()]), {})
        trace.append(H.item())
    return trace


@pytest.mark.covers("sac-temperature")
@pytest.mark.parametrize("target", [0.5, 1.0, 1.5])
# SGD steps log alpha by lr alpha (H - Hbar): from a tiny alpha it barely moves, so it starts at 0.5 (Adam's steps
# are about lr whatever alpha is, so it starts from the recipe's 0.01)
@pytest.mark.parametrize("optimizer, lr, initial", [("adam", 0.05, 0.01), ("sgd", 0.5, 0.5)])
def test_controller_drives_the_toy_policys_entropy_to_the_target(target, optimizer, lr, initial):
    trace = sharpen_with_auto_alpha(target, lr=lr, optimizer=optimizer, initial=initial)
    assert abs(statistics.mean(trace[-200:]) - target) < 0.01 and max(abs(h - target) for h in trace[-200:]) < 0.05


@pytest.mark.covers("sac-temperature")
def test_without_the_controller_the_toy_policys_entropy_collapses():
    assert sharpen_with_auto_alpha(0.5, fixed_alpha=0.01)[-1] < 0.1


@pytest.mark.covers("sac-temperature")
def test_the_recipe_drives_and_logs_alpha():
    pipe = Pipeline(get_recipe("sac-temperature"))
    reg = pipe.find("regularizer:sac-temperature")
    assert pipe.kwargs(reg, 0, 10)["alpha"] == pytest.approx(0.01)
    # far above the 0.5 nats target: alpha falls by ~lr
    pipe.after_step(entropy_batch([3.0, 3.0]), {"step": 0}, step_context())
    alpha = pipe.kwargs(reg, 1, 10)["alpha"]
    assert alpha == pytest.approx(0.01 * math.exp(-0.05), rel=1e-3)
    assert pipe.driven_metrics(1, 10) == {"regularizer:sac-temperature.alpha": alpha}


@pytest.mark.covers("sac-temperature")
@pytest.mark.parametrize("bad, match", [(dict(initial=0.0), "start > 0"), (dict(optimizer="rmsprop"), "optimizer"),
                                        (dict(lr=0.0), "lr"), (dict(target_entropy=-1.0), "target_entropy")])
def test_bad_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        SACTemperature.init(**{"initial": 0.1, **bad})


def test_an_unknown_optimizer_is_refused_when_the_recipe_is_built():
    with pytest.raises(ValueError, match=r"controller 'sac-temperature': optimizer='adamw' is not one of \['adam', "
                                         r"'sgd'\] \(did you mean 'adam'\?\)"):
        Pipeline(with_overrides(get_recipe("sac-temperature"), {"controllers:sac-temperature": {"optimizer": "adamw"}}))
