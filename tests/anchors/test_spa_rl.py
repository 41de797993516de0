"""Agreement with SPA-RL (tests/anchors/formulas_spa_rl.py, WangHanLinHenry/SPA-RL-Agent @ ed20087):

    estimator loss   `values.spa_rl.progress_loss` == prm_model.forward's MSE of the summed turn-end outputs (value
                     and gradient), turn ends found from the agent-token mask
    grounding        `spa_step_rewards(c, grounding)` == rl_data_org.py's turn values + grounding ("Nothing happens"
                     in the next observation <=> the step's tool_error)
    step rewards     `reference_bug=True`, placed on each turn's last token == compute_rewards with zero KL
"""
import random

import pytest
import torch

from tests.advantages.step_batches import D, episode_batch
from tests.helpers import assert_agree
from tests.anchors import formulas_spa_rl as ref
from workbench.advantages.spa_rl import grounding, progress_readings, spa_step_rewards
from workbench.advantages.step_critic import turn_spans, turn_token_rewards, write_steps
from workbench.values.spa_rl import progress_loss

pytestmark = pytest.mark.covers("spa-rl")


def random_batch(rng: random.Random, n: int, seed: int):
    actions = [[rng.randint(1, 4) for _ in range(rng.randint(1, 5))] for _ in range(n)]
    errors = [[rng.choice([None, None, "no such tool"]) for _ in a] for a in actions]
    infos = [[{"state": s, "tool_error": e} for s, e in enumerate(row)] for row in errors]
    rewards = [[0.0] * (len(a) - 1) + [rng.random()] for a in actions]
    return episode_batch(actions, rewards, infos=infos, obs=rng.randint(1, 3), seed=seed), errors


@pytest.mark.parametrize("seed", range(6))
def test_estimator_loss_matches_prm_forward(seed):
    rng = random.Random(seed)
    b, _ = random_batch(rng, rng.randint(1, 6), seed)
    values = b.values.clone().requires_grad_(True)
    ours, predicted = progress_loss(values, b)
    unmask = torch.where(b.mask > 0, torch.zeros_like(b.mask), torch.full_like(b.mask, -100.0))
    theirs, theirs_pred = ref.prm_forward(values, unmask, b.rewards)
    assert_agree(ours, theirs, leaf=values)
    assert torch.allclose(predicted, theirs_pred)


@pytest.mark.parametrize("seed", range(6))
def test_grounded_step_rewards_match_rl_data_org(seed):
    rng = random.Random(seed)
    b, errors = random_batch(rng, 5, seed)
    _, _, valid = turn_spans(b)
    c = progress_readings(b.values, b)
    ours = spa_step_rewards(c, grounding(b, valid), valid)
    for i, row in enumerate(errors):
        conversation = []
        for s, error in enumerate(row):  # user turn s carries the observation after step s - 1
            seen = "Nothing happens." if s > 0 and row[s - 1] is not None else f"You see room {s}."
            conversation += [{"value": seen}, {"value": f"action {s}"}]
        theirs = ref.grounded_rewards(conversation, c[i, :len(row)].tolist())
        assert ours[i, :len(row)].tolist() == pytest.approx(theirs)


@pytest.mark.parametrize("seed", range(6))
def test_reference_bug_token_rewards_match_compute_rewards(seed):
    rng = random.Random(seed)
    b, _ = random_batch(rng, 4, seed)
    _, last, valid = turn_spans(b)
    scores = spa_step_rewards(progress_readings(b.values, b), grounding(b, valid), valid)
    ours = write_steps(spa_step_rewards(progress_readings(b.values, b), grounding(b, valid), valid,
                                        reference_bug=True), last, valid, b.mask.shape[1])
    logp = torch.randn(b.mask.shape, generator=torch.Generator().manual_seed(seed), dtype=D)
    theirs, _, _ = ref.compute_rewards([scores[i, :int(n)] for i, n in enumerate(valid.sum(-1))], logp, logp,
                                       b.mask.long(), kl_coef=0.05)
    assert torch.allclose(ours, theirs, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_with_kl_each_turns_summed_token_rewards_match_compute_rewards(seed):
    """The code adds -kl_coef * KL on every token; `spa-rl` adds each turn's sum of `token_rewards` (the
    kl-in-reward shaping's -beta * KL) to that step's reward: the per-turn sums agree."""
    rng = random.Random(10 + seed)
    b, _ = random_batch(rng, 4, seed)
    _, _, valid = turn_spans(b)
    g = torch.Generator().manual_seed(seed)
    logp, ref_logp = torch.randn(b.mask.shape, generator=g, dtype=D), torch.randn(b.mask.shape, generator=g, dtype=D)
    b.token_rewards = -0.05 * (logp - ref_logp) * b.mask
    scores = spa_step_rewards(progress_readings(b.values, b), grounding(b, valid), valid)
    theirs, _, _ = ref.compute_rewards([scores[i, :int(n)] for i, n in enumerate(valid.sum(-1))], logp, ref_logp,
                                       b.mask.long(), kl_coef=0.05)
    ours = spa_step_rewards(progress_readings(b.values, b), grounding(b, valid), valid, reference_bug=True)
    ours = ours + turn_token_rewards(b, valid.shape[1])
    per_turn = torch.zeros_like(ours).scatter_add(1, b.turn.clamp(min=0), theirs * b.mask)
    assert torch.allclose(ours, per_turn, atol=1e-12)
