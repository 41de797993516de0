"""DCPO: the target-temperature weight, alpha, the mixed advantage, and the scoring step."""
import math

import pytest
import torch

from tests.helpers import TINY, D, DigitFirst, anchor_mask, batch_with_mask, seeded
from workbench import registry
from workbench.advantages.dcpo import correct_rows, dcpo, dcpo_alpha, dcpo_mix, dcpo_score, temperature_weight
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.rollout import policy_forward
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("dcpo")


def random_case(seed, G=4, groups=3, T=6, correct=None):
    """A batch with 0/1 scores (rewards = scores), GRPO advantages, random old and target-temperature log-probs."""
    g = seeded(seed)
    B = G * groups
    mask = anchor_mask(B, T, g)
    scores = (torch.rand(B, generator=g) < 0.5).to(D) if correct is None else torch.as_tensor(correct, dtype=D)
    batch = batch_with_mask(scores, torch.arange(groups).repeat_interleave(G), mask, scores=scores)
    batch.old_logp = -2 * torch.rand(B, T, generator=g, dtype=D) * mask
    batch.temp_logp = (batch.old_logp + 0.3 * torch.randn(B, T, generator=g, dtype=D)) * mask
    batch.advantages = grpo(batch)
    return batch


def entropy(z):
    p = z.softmax(-1)
    return float(-(p * p.log()).sum())


def toy(z0, T):
    """One row per vocabulary token y, all correct (GRPO A = 0): old log pi(y) and log pi^T(y) of softmax(z0)."""
    V = z0.shape[0]
    mask = torch.ones(V, 1, dtype=D)
    batch = batch_with_mask(torch.ones(V, dtype=D), torch.zeros(V), mask, scores=torch.ones(V, dtype=D))
    y = torch.arange(V)
    batch.old_logp = z0.log_softmax(-1)[y, None]
    batch.temp_logp = (z0 / T).log_softmax(-1)[y, None]
    batch.advantages = grpo(batch)
    return batch, y


def test_registered_as_scoring_step_and_advantage_with_the_reference_constants():
    adv, shaping = registry.get("advantage", "dcpo"), registry.get("reward_shaping", "dcpo")
    assert adv.defaults == {"entropy_gap": 0.0, "cap": 0.1, "threshold": 0.05, "reference_bug": False}
    assert shaping.defaults == {"temperature": 1.0} and shaping.provides == ("temp_logp",)
    assert set(adv.reads) == {"advantages", "temp_logp", "old_logp", "scores"}
    for e in (adv, shaping):
        assert e.title == registry.catalog()["dcpo"]["title"] and e.equation and e.fn.__doc__


def test_alpha_zero_gives_grpo():
    """Catalog (1): H = H_0 (gap 0), or a zero cap, gives alpha = 0 and exactly the GRPO advantage."""
    for seed in range(3):
        batch = random_case(seed)
        assert torch.equal(dcpo(batch, entropy_gap=0.0), batch.advantages)
        assert torch.equal(dcpo(batch, entropy_gap=0.3, cap=0.0), batch.advantages)
    assert dcpo_alpha(0.0, 0.5) == 0.0


def test_temperature_one_gives_rho_one():
    """Catalog (2): scored at T = 1 the old logits give pi^T = pi_old (ctx.score at 1 is the trainer's forward:
    tests/train/test_trainer.py), so rho = 1 and A' = (1 - alpha) A + alpha c."""
    batch = random_case(4)
    batch.temp_logp = batch.old_logp.clone()
    alpha = dcpo_alpha(0.3, float((batch.scores > 0.05).double().mean()))
    expected = ((1 - alpha) * batch.advantages + alpha * batch.scores[:, None]) * batch.mask
    torch.testing.assert_close(dcpo(batch, entropy_gap=0.3), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("gap, p, expected", [(0.3, 0.25, 2 / 7), (-0.3, 0.25, 2 / 7), (0.05, 0.5, 0.1 / 1.1),
                                              (0.1, 1.0, 0.1 / 1.1), (0.02, 0.1, 0.2 / 1.2), (1e-12, 1.0, 1e-12)])
def test_alpha_known_values(gap, p, expected):
    """a = min(|gap|, 0.1) / p_correct, alpha = a / (1 + a): the sign of the gap does not matter, the cap does."""
    assert dcpo_alpha(gap, p) == pytest.approx(expected, rel=1e-12)


def test_alpha_lies_in_0_1_and_grows_with_the_gap_up_to_the_cap():
    gaps = torch.linspace(0, 0.3, 31, dtype=D).tolist()
    for p in (0.01, 0.3, 1.0):
        alphas = [dcpo_alpha(x, p) for x in gaps]
        assert all(0 <= a < 1 for a in alphas)
        assert all(b > a for a, b in zip(alphas[:10], alphas[1:11]))      # below the cap 0.1: increasing
        assert all(b == alphas[10] for b in alphas[10:])                  # at and past the cap: constant
    assert dcpo_alpha(0.1, 0.01) > dcpo_alpha(0.1, 0.3) > dcpo_alpha(0.1, 1.0)  # fewer correct: larger alpha


def test_no_correct_sample_keeps_grpo_while_the_reference_gives_nan():
    batch = random_case(5, correct=[0.0] * 12)
    assert dcpo_alpha(0.3, 0.0) == 0.0 and math.isnan(dcpo_alpha(0.3, 0.0, reference_bug=True))
    assert torch.equal(dcpo(batch, entropy_gap=0.3), batch.advantages)
    assert torch.isnan(dcpo(batch, entropy_gap=0.3, reference_bug=True)).all()


def test_mixed_advantage_matches_its_formula_on_random_batches():
    for seed in range(4):
        batch = random_case(10 + seed)
        c = batch.scores > 0.05
        alpha = dcpo_alpha(-0.07, float(c.double().mean()))
        rho = torch.exp(batch.temp_logp - batch.old_logp)
        expected = ((1 - alpha) * batch.advantages + alpha * c.to(D)[:, None] * rho) * batch.mask
        out = dcpo(batch, entropy_gap=-0.07)
        torch.testing.assert_close(out, expected, rtol=1e-14, atol=1e-14)
        assert torch.all(out[batch.mask == 0] == 0)
        # the weight goes to correct samples only: wrong ones keep (1 - alpha) A
        torch.testing.assert_close(out[~c], (1 - alpha) * batch.advantages[~c], rtol=0, atol=1e-15)


def test_correct_means_score_strictly_above_the_threshold():
    assert correct_rows(torch.tensor([0.0, 0.05, 0.0500001, 1.0], dtype=D)).tolist() == [False, False, True, True]
    with pytest.raises(ValueError, match="finite"):
        correct_rows(torch.tensor([float("nan")], dtype=D))


def test_exact_expected_gradient_pulls_the_policy_toward_pi_T():
    """E_{y ~ pi}[alpha rho_T(y) grad log pi(y)] = alpha (pi^T - pi) in logit space: the update is a step of
    cross-entropy toward the target-temperature distribution."""
    z0 = torch.tensor([3.0, 1.0, 0.5, 0.0, -1.0, -2.0], dtype=D)
    for T, gap in ((1.2, 0.4), (0.8, -0.4)):
        batch, y = toy(z0, T)
        A = dcpo(batch, entropy_gap=gap)
        alpha = dcpo_alpha(gap, 1.0)
        z = z0.clone().requires_grad_(True)
        logp = z.log_softmax(-1)[y, None]
        pi_old = batch.old_logp.exp()
        loss = -(pi_old * A * torch.exp(logp - batch.old_logp)).sum()  # the expected surrogate at r = 1
        (grad,) = torch.autograd.grad(loss, z)
        torch.testing.assert_close(grad, -alpha * ((z0 / T).softmax(-1) - z0.softmax(-1)), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("T, direction", [(1.2, 1), (0.8, -1)])
def test_one_ppo_step_on_a_toy_softmax_moves_entropy_toward_the_target(T, direction):
    """Catalog (3): H < H_0 gives T = 1.2 and one update on samples of pi raises the entropy (toward pi^1.2);
    H > H_0 gives T = 0.8 and lowers it. The update is the recipe's: dcpo advantage, then PPO-clip token mean."""
    z0 = torch.tensor([3.0, 1.0, 0.5, 0.0, -1.0, -2.0], dtype=D)
    h0 = entropy(z0)
    entropy_base = h0 + 0.3 if direction > 0 else h0 - 0.3  # the controller's T for this entropy
    assert (T == 1.2) == (h0 <= entropy_base)
    y = torch.multinomial(z0.softmax(-1), 4000, replacement=True, generator=seeded(0))
    mask = torch.ones(len(y), 1, dtype=D)
    batch = batch_with_mask(torch.ones(len(y), dtype=D), torch.zeros(len(y)), mask, scores=torch.ones(len(y), dtype=D))
    batch.old_logp, batch.temp_logp = z0.log_softmax(-1)[y, None], (z0 / T).log_softmax(-1)[y, None]
    batch.advantages = grpo(batch)  # all correct: GRPO alone gives A = 0 and no update
    assert torch.all(batch.advantages == 0)
    A = dcpo(batch, entropy_gap=entropy_base - h0)
    z = z0.clone().requires_grad_(True)
    loss, _ = registry.get("objective", "ppo-clip").fn(z.log_softmax(-1)[y, None], batch.old_logp, A, mask)
    (g,) = torch.autograd.grad(loss, z)
    z1 = z0 - 5.0 * g
    target = (z0 / T).softmax(-1)
    kl = [float((target * (target.log() - w.log_softmax(-1))).sum()) for w in (z0, z1)]
    assert direction * (entropy(z1) - h0) > 1e-3 and kl[1] < kl[0]


def test_scoring_step_stores_the_log_probs_at_the_driven_temperature():
    batch = random_case(20)
    seen = []

    def score(b, temperature):
        seen.append(temperature)
        return b.old_logp - 0.1 * b.mask  # a known answer: rho = e^-0.1 on valid tokens

    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=4, prompts_per_step=3, max_new_tokens=6, score=score)
    out = dcpo_score(batch, ctx, temperature=0.8)
    assert seen == [0.8] and torch.equal(out.temp_logp, batch.old_logp - 0.1 * batch.mask)
    assert ctx.metrics["dcpo/rho_mean"] == pytest.approx(math.exp(-0.1), rel=1e-12)
    assert ctx.metrics["dcpo/correct_frac"] == pytest.approx(float((batch.scores > 0.05).double().mean()))
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="temperature must be finite and > 0"):
            dcpo_score(batch, ctx, temperature=bad)


def test_bad_inputs_are_clear_errors():
    batch = random_case(30)
    with pytest.raises(ValueError, match="p_correct"):
        dcpo_alpha(0.1, 1.5)
    with pytest.raises(ValueError, match="cap must be finite and >= 0"):
        dcpo(batch, entropy_gap=0.1, cap=-0.1)
    with pytest.raises(ValueError, match="entropy_gap must be finite"):
        dcpo(batch, entropy_gap=float("nan"))
    batch.temp_logp = None
    with pytest.raises(ValueError, match=r"needs batch fields \['temp_logp'\]"):
        dcpo(batch, entropy_gap=0.1)
    with pytest.raises(ValueError, match="temp_logp has shape"):
        temperature_weight(torch.zeros(2, 3, dtype=D), torch.zeros(2, 4, dtype=D), torch.ones(2, 4, dtype=D))


def test_mix_is_linear_in_alpha():
    batch = random_case(40)
    rho = temperature_weight(batch.temp_logp, batch.old_logp, batch.mask)
    c = correct_rows(batch.scores)
    a, b = dcpo_mix(batch.advantages, rho, c, 0.0), dcpo_mix(batch.advantages, rho, c, 1.0)
    torch.testing.assert_close(dcpo_mix(batch.advantages, rho, c, 0.25), 0.75 * a + 0.25 * b, rtol=0, atol=1e-14)
    assert torch.equal(a, batch.advantages) and torch.equal(b, c.to(D)[:, None] * rho)


def test_in_a_training_step_the_batch_is_scored_at_T_and_mixed(tmp_path):
    """The recipe's stages on the test task: step 0 sees the initial entropy 0 <= H_0, so T = 1.2 and gap = 0.5."""
    trainer = Trainer(make_config("smoke", recipe="dcpo", **TINY), tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.setup()
    batch = trainer.make_batch(0)
    with torch.no_grad():
        at_t, _, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                    batch.mask, 1.2)
    assert torch.equal(batch.temp_logp, at_t * batch.mask)
    c = batch.scores > 0.05
    alpha = dcpo_alpha(0.5, float(c.double().mean()))
    rho = torch.exp(batch.temp_logp - batch.old_logp) * batch.mask
    expected = ((1 - alpha) * grpo(batch) + alpha * c[:, None] * rho) * batch.mask
    torch.testing.assert_close(batch.advantages, expected.float(), rtol=1e-6, atol=1e-6)
    assert trainer.rollout_info["dcpo/correct_frac"] == pytest.approx(float(c.double().mean()))
