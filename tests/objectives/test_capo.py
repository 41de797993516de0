"""CAPO: the predicted per-token KL and objective shift, the token masks, and the masked GRPO loss."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from tests.helpers import D, DigitFirst, TINY, grad, random_mask, seeded
from workbench import ops, registry
from workbench.context import Head
from workbench.objectives.capo import (adam_direction, capo, capo_keep, predict_token_updates, predicted_kl_and_shift,
                                  token_gradient, top_k_softmax)
from workbench.objectives.ppo import ppo_clip, ppo_clip_per_token
from workbench.recipes import RECIPES
from workbench.rollout import policy_forward
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

BETAS, EPS = (0.9, 0.999), 1e-8


def head_case(seed, B=5, T=6, V=11, H=4, step=3, lr=0.05, temperature=1.0):
    """A random LM head with Adam state, sampled tokens, per-sequence advantages and a ragged mask."""
    g = seeded(seed)
    mask = random_mask(B, T, g, min_len=2)
    hidden = torch.randn(B, T, H, generator=g, dtype=D)
    weight = 2 * torch.randn(V, H, generator=g, dtype=D)
    exp_avg = 0.3 * torch.randn(V, H, generator=g, dtype=D)
    exp_avg_sq = 0.2 * torch.rand(V, H, generator=g, dtype=D)
    head = Head(hidden=hidden, weight=weight, bias=None, trained=True, lr=lr, betas=BETAS, eps=EPS,
                temperature=temperature, exp_avg=exp_avg if step else None, exp_avg_sq=exp_avg_sq if step else None,
                step=step)
    actions = torch.randint(V, (B, T), generator=g)
    A = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + 0.2 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    return head, actions, A, mask, logp, old


def run_capo(head, actions, A, mask, logp, old, **kw):
    return capo(logp, old, A, mask, head=head, response_ids=actions, **kw)


# ------------------------------------------------------------------------------------- (1) tau -> inf is GRPO


@pytest.mark.covers("capo")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_infinite_thresholds_give_the_base_grpo_loss(agg):
    head, actions, A, mask, logp, old = head_case(0)
    denom = ops.Denominators(float(mask.sum()), float(mask.shape[0]), norm_constant=float(mask.numel()))
    loss, metrics = run_capo(head, actions, A, mask, logp, old, agg=agg, denom=denom, tau_fisher=math.inf,
                             tau_hessian=math.inf)
    base, base_metrics = ppo_clip(logp, old, A, mask, agg=agg, denom=denom)
    assert torch.equal(loss, base) and torch.equal(grad(loss, logp), grad(base, logp))
    assert metrics["capo/masked_frac"] == 0.0 and metrics["capo/kl_mean"] > 0
    assert {k: metrics[k] for k in base_metrics} == base_metrics
    # finite but loose thresholds already keep everything; tight ones do not
    assert run_capo(head, actions, A, mask, logp, old, tau_fisher=1e6, tau_hessian=1e6)[1]["capo/masked_frac"] == 0
    assert run_capo(head, actions, A, mask, logp, old, tau_fisher=1e-12)[1]["capo/masked_frac"] > 0.5


# ----------------------------------------------------------------- (2) predictions vs one real optimizer step


def one_token(seed, V=7, H=5):
    g = seeded(seed)
    return (torch.randn(V, H, generator=g, dtype=D), torch.randn(H, generator=g, dtype=D),
            int(torch.randint(V, (1,), generator=g)), 0.8 if seed % 2 else -1.3)


def realized_and_predicted(W0, h, a, A, lr, *, temperature=0.7, warm_steps=4, optimizer="adam", reference_bug=False):
    """One real optimizer step on the token's surrogate loss -A pi(a)/sg(pi(a)) of a linear softmax head z = W h / T
    (Adam warmed by `warm_steps` steps of random gradients at lr 0, so W is unchanged); returns
    (realized k2 KL 1/2 (log r)^2, realized shift A (r - 1)), (predicted KL, predicted shift)."""
    W = W0.clone().requires_grad_(True)
    opt = (torch.optim.Adam([W], lr=0.0, betas=BETAS, eps=EPS) if optimizer == "adam"
           else torch.optim.SGD([W], lr=0.0))
    g = seeded(99)
    for _ in range(warm_steps):
        W.grad = torch.randn(W.shape, generator=g, dtype=D)
        opt.step()
    state = {k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[W].items()}
    head = Head(hidden=h.reshape(1, 1, -1), weight=W0, bias=None, trained=True, lr=lr, betas=BETAS, eps=EPS,
                temperature=temperature, exp_avg=state.get("exp_avg"), exp_avg_sq=state.get("exp_avg_sq"),
                step=int(state.get("step", 0)))
    kl, shift = predict_token_updates(head, torch.tensor([[a]]), torch.tensor([[A]], dtype=D),
                                      torch.ones(1, 1, dtype=torch.bool), top_k=W0.shape[0],
                                      reference_bug=reference_bug)

    def logp_a():
        return torch.log_softmax(W @ h / temperature, -1)[a]

    before = logp_a()
    opt.param_groups[0]["lr"] = lr
    opt.zero_grad()
    (-A * torch.exp(before - before.detach())).backward()
    opt.step()
    with torch.no_grad():
        log_r = logp_a() - before
    return (0.5 * log_r ** 2, A * torch.expm1(log_r)), (kl[0, 0], shift[0, 0])


def assert_third_order(errors, lrs):
    """err(lr) <= C lr^3 and halving lr divides the error by about 8."""
    ratios = [e1 / e2 for e1, e2 in zip(errors, errors[1:])]
    assert all(6.5 < r < 9.5 for r in ratios), ratios
    assert max(e / lr ** 3 for e, lr in zip(errors, lrs)) < 50 * min(e / lr ** 3 for e, lr in zip(errors, lrs))


@pytest.mark.covers("capo")
@pytest.mark.parametrize("seed,warm_steps", [(0, 4), (1, 4), (2, 0), (3, 12)])
def test_predicted_kl_and_shift_match_one_real_adam_step_to_third_order(seed, warm_steps):
    """Linear softmax head, top_k = V (exact): after one real Adam step from the optimizer's own state (warm_steps = 0:
    no state yet, Adam's first step), the predicted KL is the realized sampled-token KL 1/2 (log r)^2 and the
    predicted shift the realized A (r - 1), both up to O(lr^3)."""
    W0, h, a, A = one_token(seed)
    lrs = [4e-3 / 2 ** i for i in range(4)]
    kl_err, shift_err = [], []
    for lr in lrs:
        (kl_real, shift_real), (kl_pred, shift_pred) = realized_and_predicted(W0, h, a, A, lr, warm_steps=warm_steps)
        assert 0.5 < float(kl_pred / kl_real) < 2  # the leading order agrees
        kl_err.append(float((kl_pred - kl_real).abs()))
        shift_err.append(float((shift_pred - shift_real).abs()))
    assert_third_order(kl_err, lrs)
    assert_third_order(shift_err, lrs)


@pytest.mark.covers("capo")
def test_reference_bug_predicts_an_sgd_step_before_adam_has_moments():
    """Without optimizer state the reference preconditions with the identity: its prediction is a real SGD step's to
    O(lr^3), and not Adam's first step (which the default predicts)."""
    W0, h, a, A = one_token(4)
    lrs = [4e-2 / 2 ** i for i in range(4)]
    errors = []
    for lr in lrs:
        (kl_real, _), (kl_pred, _) = realized_and_predicted(W0, h, a, A, lr, warm_steps=0, optimizer="sgd",
                                                            reference_bug=True)
        errors.append(float((kl_pred - kl_real).abs()))
    assert_third_order(errors, lrs)
    (kl_adam, _), (kl_default, _) = realized_and_predicted(W0, h, a, A, 1e-3, warm_steps=0)
    (kl_sgd, _), (kl_bug, _) = realized_and_predicted(W0, h, a, A, 1e-3, warm_steps=0, reference_bug=True)
    assert abs(float(kl_default / kl_adam) - 1) < 0.05 and abs(float(kl_bug / kl_adam) - 1) > 0.5


# ---------------------------------------------------------------------------- the pieces, by autograd and hand


@pytest.mark.covers("capo")
def test_token_gradient_and_shift_slope_are_the_surrogates_derivatives():
    """g is autograd's gradient of A pi(a)/sg(pi(a)) w.r.t. the top-K rows of W (top_k = V), and <g, D> = A v.u is the
    surrogate's slope along D."""
    g = seeded(3)
    V, H = 6, 4
    W = torch.randn(V, H, generator=g, dtype=D, requires_grad=True)
    x, a, A = torch.randn(H, generator=g, dtype=D), 2, 0.7
    logp = torch.log_softmax(W @ x, -1)[a]
    (autograd,) = torch.autograd.grad(A * torch.exp(logp - logp.detach()), W)
    pi, ids, e_a = top_k_softmax((W @ x).detach()[None], torch.tensor([a]), V)
    ours = token_gradient(x[None], pi, e_a, torch.tensor([A], dtype=D))[0]
    torch.testing.assert_close(ours, autograd[ids[0]], rtol=1e-12, atol=1e-14)
    direction = torch.randn(1, V, H, generator=g, dtype=D)
    eta = 1e-6
    _, shift = predicted_kl_and_shift(x[None], pi, e_a, torch.tensor([A], dtype=D), direction, eta)
    torch.testing.assert_close(shift[0] / eta, (ours * direction[0]).sum(), rtol=1e-5, atol=0)


@pytest.mark.covers("capo")
def test_adam_direction_is_torch_adams_next_step():
    g = seeded(11)
    W = torch.randn(3, 4, generator=g, dtype=D, requires_grad=True)
    opt = torch.optim.Adam([W], lr=1.0, betas=BETAS, eps=EPS)
    for _ in range(3):
        W.grad = torch.randn(3, 4, generator=g, dtype=D)
        opt.step()
    state = opt.state[W]
    before = W.detach().clone()
    ascent = torch.randn(3, 4, generator=g, dtype=D)
    expected_direction = adam_direction(ascent[None], state["exp_avg"][None].clone(), state["exp_avg_sq"][None].clone(),
                                        int(state["step"]), betas=BETAS, eps=EPS)[0]
    W.grad = -ascent  # the loss gradient of an ascent direction
    opt.step()
    torch.testing.assert_close(W.detach() - before, expected_direction, rtol=1e-12, atol=1e-14)


@pytest.mark.covers("capo")
def test_temperature_and_bias_enter_as_the_tempered_linear_model():
    """A head at temperature T predicts exactly what the head with input h / T, bias b / T at temperature 1 does."""
    head, actions, A, mask, *_ = head_case(2, temperature=0.6)
    bias = torch.randn(head.weight.shape[0], generator=seeded(4), dtype=D)
    warm = Head(**{**vars(head), "bias": bias})
    cold = Head(**{**vars(head), "hidden": head.hidden / 0.6, "bias": bias / 0.6, "temperature": 1.0})
    valid = mask > 0
    for x, y in zip(predict_token_updates(warm, actions, A, valid), predict_token_updates(cold, actions, A, valid)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=0)


@pytest.mark.covers("capo")
def test_symmetric_and_one_sided_hessian_tests():
    kl = torch.tensor([0.0, 0.0, 0.0, 0.0, 2.0], dtype=D)
    shift = torch.tensor([-0.5, -0.05, 0.05, 0.5, 0.0], dtype=D)
    fisher_ok, hessian_ok = capo_keep(kl, shift, tau_fisher=1.0, tau_hessian=0.1)
    assert fisher_ok.tolist() == [True] * 4 + [False]
    assert hessian_ok.tolist() == [False, True, True, False, True]
    _, one_sided = capo_keep(kl, shift, tau_fisher=1.0, tau_hessian=0.1, symmetric=False)
    assert one_sided.tolist() == [False, False, True, False, True]


# ------------------------------------------------------------------------------- (3) monotone in tau; zero gradient


@pytest.mark.covers("capo")
@pytest.mark.parametrize("which", ["tau_fisher", "tau_hessian"])
def test_masked_fraction_is_monotone_in_tau(which):
    head, actions, A, mask, logp, old = head_case(1, B=8, T=10)
    kl, shift = predict_token_updates(head, actions, A, mask > 0)
    stat = kl if which == "tau_fisher" else shift.abs()
    taus = torch.quantile(stat[mask > 0], torch.linspace(0, 1, 9, dtype=D)).tolist() + [1e9]
    fracs = [run_capo(head, actions, A, mask, logp, old, **{"tau_fisher": math.inf, "tau_hessian": math.inf,
                                                            which: tau})[1]["capo/masked_frac"] for tau in taus]
    assert all(f1 >= f2 for f1, f2 in zip(fracs, fracs[1:])), fracs
    assert fracs[0] == 1.0 and fracs[-1] == 0.0 and len(set(fracs)) >= 5


@pytest.mark.covers("capo")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_masked_tokens_get_exactly_zero_gradient(agg):
    head, actions, A, mask, _, old = head_case(5, B=6, T=8)
    logp = old.clone().requires_grad_(True)  # r = 1: no token is clipped, every kept token with A != 0 has gradient
    kl, shift = predict_token_updates(head, actions, A, mask > 0)
    tau = float(kl[mask > 0].median())
    denom = ops.Denominators.of(mask)
    loss, metrics = run_capo(head, actions, A, mask, logp, old, agg=agg, denom=denom, tau_fisher=tau,
                             tau_hessian=math.inf)
    dropped = (mask > 0) & (kl >= tau)
    kept = (mask > 0) & ~dropped
    g = grad(loss, logp)
    assert bool((g[dropped] == 0).all()) and bool((g[kept & (A != 0)] != 0).all())
    assert metrics["capo/masked_frac"] == pytest.approx(float(dropped.sum() / mask.sum()))
    per_token, _, _ = ppo_clip_per_token(logp, old, A, eps_low=0.2, eps_high=0.2)
    torch.testing.assert_close(loss, ops.aggregate(per_token, kept.to(D), agg, denom), rtol=1e-12, atol=0)


@pytest.mark.covers("capo")
def test_no_token_kept_gives_zero_loss_and_gradient():
    head, actions, A, mask, logp, old = head_case(6)
    loss, metrics = run_capo(head, actions, A, mask, logp, old, tau_fisher=1e-30, tau_hessian=1e-30)
    assert loss.item() == 0.0 and bool((grad(loss, logp) == 0).all()) and metrics["capo/masked_frac"] == 1.0


# ------------------------------------------------------------------------------------------------- end to end


def capo_trainer(tmp_path, **overrides):
    trainer = Trainer(make_config("smoke", recipe="capo", **{**TINY, **overrides}), tmp_path, progress=False)
    trainer.task = DigitFirst()
    return trainer.setup()


@pytest.mark.covers("capo")
def test_end_to_end_masked_tokens_get_no_gradient(tmp_path):
    """On the tiny model after one real step (Adam has moments): the head the trainer hands CAPO reproduces the
    policy's log-probs, and the model's gradient under CAPO equals that of the GRPO loss on the kept tokens only."""
    trainer = capo_trainer(tmp_path)
    trainer.train_on(trainer.make_batch(0), 0)
    batch = next(b for b in map(trainer.make_batch, range(1, 20)) if bool((b.advantages * b.mask).any()))
    c, model = trainer.config, trainer.model
    logp, _, hidden = policy_forward(model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask,
                                     c.temperature, with_hidden=True)
    head = Head.of(model, trainer.optimizer, hidden, c.temperature)
    assert head.trained and head.step == c.minibatches and head.lr == c.lr
    logits = torch.log_softmax((head.hidden @ head.weight.T) / head.temperature, -1)
    valid = batch.mask > 0
    torch.testing.assert_close(logits.gather(-1, batch.response_ids[..., None])[..., 0][valid], logp.detach()[valid],
                               rtol=1e-5, atol=1e-5)

    kl, _ = predict_token_updates(head, batch.response_ids, batch.advantages, valid)
    signal = valid & (batch.advantages != 0)
    tau = float(kl[signal].median())
    part = trainer.pipeline.parts["objective"][0]  # a new Use: the recipe's own kwargs dict stays untouched
    part.use = dataclasses.replace(part.use, kw={**part.use.kw, "tau_fisher": tau, "tau_hessian": math.inf})
    kept = (valid & (kl < tau)).to(batch.mask.dtype)
    assert 0 < float((signal & (kl >= tau)).sum()) < float(signal.sum())
    denom = trainer.parallel.denominators(batch.mask, c.max_new_tokens)

    def model_grads(loss):
        trainer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return [p.grad.clone() for p in trainer.params]

    loss, metrics = trainer.minibatch_loss(batch, denom, 1)
    capo_grads = model_grads(loss)
    assert 0 < metrics["capo/masked_frac"] < 1

    def grpo_loss(mask):
        logp, _, _ = policy_forward(model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask,
                                    c.temperature)
        per_token, _, _ = ppo_clip_per_token(logp, batch.old_logp, batch.advantages, eps_low=0.2, eps_high=0.2)
        return ops.aggregate(per_token, mask, "seq-mean-token-mean", denom)

    for ours, kept_only in zip(capo_grads, model_grads(grpo_loss(kept))):
        torch.testing.assert_close(ours, kept_only, rtol=1e-5, atol=1e-7)
    assert any(not torch.allclose(x, y) for x, y in zip(capo_grads, model_grads(grpo_loss(batch.mask))))


@pytest.mark.covers("capo")
def test_a_lora_run_is_refused_because_its_head_is_frozen(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="capo", **{**TINY, "steps": 1, "lora_r": 4}), tmp_path,
                      progress=False)
    trainer.task = DigitFirst()
    with pytest.raises(ValueError, match="does not train the head"):
        trainer.run()


# --------------------------------------------------------------------------------------- registration, errors


@pytest.mark.covers("capo")
def test_registered_with_the_catalog_defaults_and_a_recipe():
    entry = registry.get("objective", "capo")
    assert entry.title == registry.catalog()["capo"]["title"] and entry.equation and entry.fn.__doc__
    assert {"tau_fisher": 1e-4, "tau_hessian": 0.01, "top_k": 50, "symmetric": True, "eps_low": 0.2, "eps_high": 0.2,
            "reference_bug": False}.items() <= entry.defaults.items()
    assert entry.reads == ("head", "response_ids") and entry.confidence == "exact"
    recipe = RECIPES["capo"]
    assert recipe.objective.key == "capo" and recipe.agg == "seq-mean-token-mean" and not recipe.regularizers
    assert recipe.advantage[0].kw == {"scale": "none"}
    assert recipe.objective.kw == {"tau_fisher": 5e-3, "tau_hessian": 0.05}


@pytest.mark.covers("capo")
def test_bad_inputs_get_clear_errors():
    head, actions, A, mask, logp, old = head_case(8)
    for kw, match in [({"tau_fisher": 0.0}, "tau_fisher must be > 0"), ({"tau_hessian": -1.0}, "tau_hessian"),
                      ({"top_k": 0}, "top_k must be an integer >= 1"), ({"top_k": 2.5}, "top_k")]:
        with pytest.raises(ValueError, match=match):
            run_capo(head, actions, A, mask, logp, old, **kw)
    with pytest.raises(ValueError, match="capo needs head=context.Head"):
        run_capo(None, actions, A, mask, logp, old)
    cases = [({"trained": False}, "does not train the head"), ({"exp_avg": None}, "keeps none: use Adam"),
             ({"betas": (0.9,)}, "betas"), ({"hidden": head.hidden[:, :-1]}, r"must be \[B, T, H\]")]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            run_capo(Head(**{**vars(head), **change}), actions, A, mask, logp, old)
