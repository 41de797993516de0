"""XRPO novelty sharpening: correct answers less likely than their group's average get a capped bonus."""
import math

import pytest
import torch

from tests.helpers import D, make_batch, seeded
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.xrpo import novelty, sequence_loglik, xrpo_sharpening

pytestmark = pytest.mark.covers("xrpo-sharpening")


def chained(rewards, group, lengths, logp):
    b = make_batch(rewards, group, lengths)
    b.old_logp = torch.as_tensor(logp, dtype=D) * b.mask
    b.advantages = grpo(b)
    return b


def random_case(seed, P=5, G=6, T=7):
    g = seeded(seed)
    B = P * G
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    logp = -3 * torch.rand(B, T, generator=g, dtype=D)
    return chained((torch.rand(B, generator=g) < 0.5).double(), torch.arange(P).repeat_interleave(G), lengths, logp)


def test_registered_as_a_chain_entry_reading_old_logp_with_partial_confidence():
    e = registry.get("advantage", "xrpo-sharpening")
    assert e.reads == ("advantages", "old_logp") and e.confidence == "partial"
    assert e.defaults == {"lam": 1.0, "kappa": 0.5, "threshold": 0.5}


@pytest.mark.parametrize("seed", range(3))
def test_lambda_zero_is_grpo(seed):
    b = random_case(seed)
    assert torch.equal(xrpo_sharpening(b, lam=0.0), grpo(b))


@pytest.mark.parametrize("seed", range(3))
def test_the_bonus_is_zero_for_likely_answers_and_at_most_kappa_a(seed):
    b = random_case(seed)
    kappa = 0.5
    bonus = xrpo_sharpening(b, lam=3.0, kappa=kappa) - b.advantages
    eta = novelty(sequence_loglik(b.old_logp, b.mask), b.group)
    assert bool((bonus >= 0).all())
    assert bool((bonus <= kappa * b.advantages.clamp(min=0) + 1e-15).all())
    assert float(bonus[eta >= 1].abs().sum()) == 0.0
    assert float(bonus.sum()) > 0  # some correct answer was unlikely enough


@pytest.mark.parametrize("seed", range(3))
def test_incorrect_answers_are_unchanged_and_no_sign_flips(seed):
    b = random_case(seed)
    out = xrpo_sharpening(b, lam=2.0, kappa=1.0)
    wrong = b.rewards <= 0.5
    assert torch.equal(out[wrong], b.advantages[wrong])
    assert bool((torch.sign(out) == torch.sign(b.advantages)).all())


def test_hand_computed_bonus():
    # one group: two correct (mean log-lik -1 and -3), two wrong (-2, -2): mean_g s = -2
    lengths = [2, 2, 2, 2]
    logp = torch.tensor([[-1.0, -1.0], [-3.0, -3.0], [-2.0, -2.0], [-2.0, -2.0]])
    b = chained([1.0, 1.0, 0.0, 0.0], [0, 0, 0, 0], lengths, logp)
    a = float(b.advantages[0, 0])  # (1 - 0.5) / (std 0.577.. + eps)
    out = xrpo_sharpening(b, lam=1.0, kappa=0.5)
    eta_low = math.exp(-1.0)  # the unlikely correct answer: s - mean = -1
    assert float(out[0, 0]) == pytest.approx(a)                            # eta = e > 1: no bonus
    assert float(out[1, 0]) == pytest.approx(a + min(1.0 - eta_low, 0.5 * a))
    assert float(out[1, 1]) == float(out[1, 0])                            # every token of the row


def test_padding_does_not_change_the_sequence_log_likelihood():
    b = make_batch([1.0, 0.0], [0, 0], [2, 4])
    logp = torch.tensor([[-1.0, -1.0, -50.0, -50.0], [-2.0, -2.0, -2.0, -2.0]], dtype=D)
    assert sequence_loglik(logp, b.mask).tolist() == [-1.0, -2.0]


def test_bad_inputs_are_refused():
    b = random_case(0)
    with pytest.raises(ValueError, match="lam and kappa must be >= 0"):
        xrpo_sharpening(b, kappa=-1.0)
    b.old_logp = None
    with pytest.raises(ValueError, match="old_logp"):
        xrpo_sharpening(b)
