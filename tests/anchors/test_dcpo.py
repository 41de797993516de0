"""Agreement with DCPO's reference (597358816/DCPO @ 33f8073e, `verl/trainer/ray_trainer.py` branch "DCPO"),
transcribed in tests/anchors/formulas_dcpo.py: values and gradients, float64, random inputs.

The reference mixes the advantage after verl-EasyR1's GRPO and trains with its clipped loss (clip 0.2 / 0.2, dual
clip 3, token mean); ours is grpo -> dcpo in the advantage chain, then `ppo-clip` with dual_clip_c = 3.
"""
import pytest
import torch

from tests.helpers import D, anchor_mask, assert_agree, batch_with_mask, seeded
from tests.anchors import formulas_dcpo as ref
from workbench import ops, registry
from workbench.advantages.dcpo import dcpo, temperature_weight
from workbench.advantages.group import grpo
from workbench.controllers.entropy_target import target_temperature

pytestmark = pytest.mark.covers("dcpo")
F32_TOL = dict(rtol=1e-5, atol=1e-5)  # the trainer's log-prob and entropy ops compute in float32
ENTROPIES = [0.0, 0.2, 0.45, 0.5, 0.55, 0.58, 0.7, 1.3]  # both sides of entropy_base = 0.5, the cap, equality


def case(seed, G=5, groups=4, T=7, all_wrong=False):
    g = seeded(seed)
    B = G * groups
    mask = anchor_mask(B, T, g, holes=True)
    scores = (torch.rand(B, generator=g) < 0.4).to(D) * (0.0 if all_wrong else 1.0)
    scores[-1] = 0.05  # exactly the threshold: not correct in either
    group = torch.arange(groups).repeat_interleave(G)
    batch = batch_with_mask(scores, group, mask, scores=scores)
    batch.old_logp = -2.0 * torch.rand(B, T, generator=g, dtype=D) * mask
    batch.temp_logp = (batch.old_logp + 0.4 * torch.randn(B, T, generator=g, dtype=D)) * mask
    token_level_scores = torch.zeros(B, T, dtype=D)
    last = (mask * torch.arange(1, T + 1)).argmax(-1)
    token_level_scores[torch.arange(B), last] = scores  # the reward manager puts the score on the last token
    return batch, token_level_scores, group.tolist()


@pytest.mark.parametrize("seed", range(3))
def test_grpo_matches_easyr1(seed):
    batch, tls, index = case(seed)
    theirs = ref.compute_grpo_outcome_advantage(tls.clone(), batch.mask, index)
    assert_agree(grpo(batch), theirs * batch.mask)


@pytest.mark.parametrize("entropy", ENTROPIES)
@pytest.mark.parametrize("seed", range(3))
def test_mixed_advantage_and_temperature_match_the_reference(seed, entropy):
    batch, tls, index = case(seed)
    advantages = ref.compute_grpo_outcome_advantage(tls.clone(), batch.mask, index)
    temperature, alpha, theirs = ref.dcpo_advantages(advantages, batch.old_logp, batch.temp_logp, tls, entropy)
    assert target_temperature(entropy, entropy_base=0.5, t_high=1.2, t_low=0.8) == temperature
    batch.advantages = grpo(batch)
    ours = dcpo(batch, entropy_gap=0.5 - entropy)
    assert_agree(ours, theirs * batch.mask)  # the reference leaves values on padding; no loss reads them


@pytest.mark.parametrize("seed", range(3))
def test_clipped_loss_on_the_mixed_advantage_matches_value_and_gradient(seed):
    """The "double IS": the online ratio of the PPO loss on top of rho_T inside the advantage."""
    batch, tls, index = case(seed)
    g = seeded(50 + seed)
    advantages = ref.compute_grpo_outcome_advantage(tls.clone(), batch.mask, index)
    _, _, theirs_adv = ref.dcpo_advantages(advantages, batch.old_logp, batch.temp_logp, tls, entropy=0.1)
    batch.advantages = grpo(batch)
    ours_adv = dcpo(batch, entropy_gap=0.4)
    logp = (batch.old_logp + 0.5 * torch.randn(batch.old_logp.shape, generator=g, dtype=D)).requires_grad_(True)
    ours, _ = registry.get("objective", "ppo-clip").fn(logp, batch.old_logp, ours_adv, batch.mask,
                                                       agg="token-mean", dual_clip_c=3.0)
    theirs = ref.compute_policy_loss(batch.old_logp, logp, theirs_adv, batch.mask)
    assert_agree(ours, theirs, leaf=logp, rtol=1e-6, atol=1e-6)


def test_no_correct_sample_reference_bug():
    """The reference divides by p_correct = 0: alpha and every advantage NaN. Ours keeps GRPO unless asked."""
    batch, tls, index = case(7, all_wrong=True)
    advantages = ref.compute_grpo_outcome_advantage(tls.clone(), batch.mask, index)
    _, alpha, theirs = ref.dcpo_advantages(advantages, batch.old_logp, batch.temp_logp, tls, entropy=0.2)
    assert torch.isnan(alpha) and torch.isnan(theirs).all()
    batch.advantages = grpo(batch)
    assert torch.isnan(dcpo(batch, entropy_gap=0.3, reference_bug=True)).all()
    assert torch.equal(dcpo(batch, entropy_gap=0.3), batch.advantages)


@pytest.mark.parametrize("temperature", [0.8, 1.0, 1.2])
def test_scoring_at_a_temperature_matches_the_actor(temperature):
    """Our trainer's log-probs at T (`ops.logprobs_from_logits`, what ctx.score uses; float32 by design) are the
    actor's logits.div_(T) log-probs, and rho_T is theirs exp(old_t - old)."""
    g = seeded(9)
    logits = torch.randn(4, 6, 11, generator=g, dtype=D)
    responses = torch.randint(0, 11, (4, 6), generator=g)
    mask = anchor_mask(4, 6, g)
    ours_t = ops.logprobs_from_logits(logits, responses, temperature)
    theirs_t = ref.log_probs_at_temperature(logits, responses, temperature)
    theirs_1 = ref.log_probs_at_temperature(logits, responses, 1.0)
    torch.testing.assert_close(ours_t.double(), theirs_t, **F32_TOL)
    rho = temperature_weight(ours_t * mask, ops.logprobs_from_logits(logits, responses) * mask, mask)
    torch.testing.assert_close(rho.double(), torch.exp(theirs_t - theirs_1) * mask, **F32_TOL)


def test_our_entropy_reading_has_the_expectation_of_theirs():
    """The reference switches on `actor/entropy_loss` = -mean log pi of the sampled tokens; we read the mean
    full-vocabulary entropy. Over the policy's own samples the first is an unbiased estimate of the second."""
    g = seeded(11)
    logits = torch.randn(3, 5, 7, generator=g, dtype=D)
    full = ops.entropy_from_logits(logits)  # [3, 5]
    probs = logits.softmax(-1)
    expected_nll = -(probs * probs.log()).sum(-1)  # E_{y ~ pi}[-log pi(y)] per position
    torch.testing.assert_close(full.double(), expected_nll, **F32_TOL)
    y = torch.multinomial(probs.reshape(-1, 7), 20000, replacement=True, generator=g)  # [15, N]
    log_probs = probs.reshape(-1, 7).log().gather(-1, y)  # the sampled tokens' log-probs
    assert float(ref.entropy_loss(log_probs, torch.ones_like(log_probs))) == pytest.approx(float(full.mean()), abs=0.02)
