"""LLDS: the likelihood-preserving penalty, its action / response gates, and agreement with the released code
(vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1, commit c19a0942, transcribed in
tests/anchors/formulas_entropy.py)."""
import pytest
import torch

from tests.helpers import D, anchor_mask, batch_with_mask, seeded
from workbench import registry
from workbench.context import Forward
from workbench.objectives.ppo import ppo_clip
from workbench.regularizers.llds import llds, llds_penalty, runs
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


def run(logp, old, A, mask, **kw):
    return llds(Forward(logp=logp), batch_with_mask([0.0] * mask.shape[0], list(range(mask.shape[0])), mask,
                                                    old_logp=old, advantages=A), **kw)


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


def hand_case():
    """Four rows of 4 tokens, old = 0, logp = old - d (d > 0: the token's likelihood fell):
    row 0  A > 0, one action, sum d > 0 with one rising token      -> its falling tokens are penalized
    row 1  A > 0, one action, sum d < 0 (falls outweighed by a rise) -> nothing
    row 2  A < 0, every token falls                                 -> nothing (not in the preserving set)
    row 3  A = 0, two actions split by an observation token: the first falls, the second rises in total."""
    d = torch.tensor([[0.3, -0.1, 0.2, 0.0],
                      [0.1, -0.5, 0.1, 0.1],
                      [0.4, 0.4, 0.4, 0.4],
                      [0.2, 0.1, 9.9, -0.25]], dtype=D)
    old = torch.zeros(4, 4, dtype=D)
    logp = (old - d).requires_grad_(True)
    A = torch.tensor([1.0, 0.5, -1.0, 0.0], dtype=D)[:, None].expand(4, 4).clone()
    mask = torch.ones(4, 4, dtype=D)
    mask[3, 2] = 0.0  # an observation token between row 3's two actions
    return logp, old, A, mask


@pytest.mark.covers("llds")
def test_registered_with_the_catalog_lambda_and_the_released_gate():
    e = registry.get("regularizer", "llds")
    assert e.defaults == {"agg": "token-mean", "denom": None, "coef": 0.1, "gate": "action",
                          "preserve": "non-negative"}
    assert e.confidence == "abstract-only" and set(e.reads) == {"old_logp", "advantages"} and e.equation


@pytest.mark.covers("llds")
def test_runs_number_contiguous_stretches_of_the_mask():
    mask = torch.tensor([[1, 1, 0, 1, 0, 0, 1], [0, 1, 1, 1, 0, 1, 1]], dtype=D)
    assert runs(mask).tolist() == [[1, 1, 0, 2, 0, 0, 3], [0, 1, 1, 1, 0, 2, 2]]


@pytest.mark.covers("llds")
def test_no_penalty_when_no_likelihood_decreased():
    g = seeded(0)
    mask = anchor_mask(6, 7, g, holes=True)
    old = -2 * torch.rand(6, 7, generator=g, dtype=D)
    logp = (old + torch.rand(6, 7, generator=g, dtype=D)).requires_grad_(True)  # every token rose
    A = torch.randn(6, 1, generator=g, dtype=D).expand(6, 7)
    for gate in ("action", "response"):
        for preserve in ("non-negative", "all"):
            loss, m = run(logp, old, A, mask, gate=gate, preserve=preserve)
            assert loss.item() == 0 and torch.all(grad(loss, logp) == 0) and m["llds/fell_frac"] == 0
    loss, _ = run(old.clone().requires_grad_(True), old, A, mask)  # on-policy: logp = old on the first minibatch
    assert loss.item() == 0


@pytest.mark.covers("llds")
def test_gradient_only_on_falling_tokens_of_preserving_units_whose_likelihood_fell():
    logp, old, A, mask = hand_case()
    loss, m = run(logp, old, A, mask, coef=0.5)
    g = grad(loss, logp)
    n = float(mask.sum())
    expected = torch.zeros(4, 4, dtype=D)
    expected[0, [0, 2]] = -0.5 / n          # d/dlogp of 0.5 relu(old - logp) / N on the falling tokens
    expected[3, [0, 1]] = -0.5 / n          # row 3's first action fell; its second (9.9 is masked) rose
    assert torch.allclose(g, expected, atol=1e-15)
    assert loss.item() == pytest.approx(0.5 * (0.3 + 0.2 + 0.2 + 0.1) / n)
    assert m["llds/fell_frac"] == pytest.approx(2 / 4)  # preserving units: row 0, row 1, row 3 a and b
    assert m["llds/token_frac"] == pytest.approx(4 / n) and m["llds/penalty"] == pytest.approx(0.8 / n)


@pytest.mark.covers("llds")
def test_response_gate_and_all_responses():
    logp, old, A, mask = hand_case()
    g_resp = grad(run(logp, old, A, mask, gate="response")[0], logp)
    assert torch.all(g_resp[3, [0, 1]] < 0) and g_resp[3, 3] == 0  # row 3 is one unit: 0.2 + 0.1 - 0.25 > 0
    g_all = grad(run(logp, old, A, mask, preserve="all")[0], logp)
    assert torch.all(g_all[2] < 0) and torch.equal(g_all[:2], grad(run(logp, old, A, mask)[0], logp)[:2])
    # the catalog's literal formula: lambda sum_i [sum_t m (logp - old) < 0] sum_t m relu(old - logp) / N
    d = (old - logp).detach()
    fell = (d * mask).sum(-1) > 0
    literal = 0.1 * (fell[:, None] * torch.relu(d) * mask).sum() / mask.sum()
    loss, _ = run(logp, old, A, mask, gate="response", preserve="all")
    assert loss.item() == pytest.approx(literal.item(), rel=1e-12)


@pytest.mark.covers("llds")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_lambda_zero_is_grpo(agg):
    logp, old, A, mask = hand_case()
    base, _ = ppo_clip(logp, old, A, mask, agg=agg)
    reg, m = run(logp, old, A, mask, coef=0.0, agg=agg)
    total = base + reg
    assert total.item() == base.item() and torch.equal(grad(total, logp), grad(base, logp)) and m["llds/penalty"] > 0


@pytest.mark.covers("llds")
def test_bad_parameters_are_refused():
    logp, old, A, mask = hand_case()
    with pytest.raises(ValueError, match="coef"):
        run(logp, old, A, mask, coef=-0.1)
    with pytest.raises(ValueError, match="gate"):
        llds_penalty(logp, old, A, mask, gate="turn")
    with pytest.raises(ValueError, match="preserve"):
        llds_penalty(logp, old, A, mask, preserve="correct")
    with pytest.raises(ValueError, match="all zero"):
        llds_penalty(logp, old, A, torch.zeros_like(mask))


@pytest.mark.parametrize("overrides, message", [
    ({"gate": "actions"}, r"regularizer 'llds': gate='actions' is not one of \['action', 'response'\] \(did you "
                          r"mean 'action'\?\)"),
    ({"preserve": "positive"}, r"preserve='positive' is not one of \['non-negative', 'all'\]"),
])
def test_its_named_options_are_refused_when_the_recipe_is_built(overrides, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("llds"), {"regularizers:llds": overrides}))
