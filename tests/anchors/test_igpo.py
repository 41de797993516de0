"""Agreement with IGPO's two official versions (tests/anchors/formulas_igpo.py): GuoqingWang1/IGPO @ 745078b (the
authors' Feb-2026 update, seen in the fork debajoycs98/IGPO) and @ bff163b (the stored public HEAD).

Inputs: random multi-turn rows (actions and observations of random lengths, groups of 4), information gains (some
exactly 0) on the non-final turns and an F1 in {0, 0.5, 1} on the last, with groups where every F1 is equal (their
`separate` normalization then erases the last turn's boundary). Their token rewards are laid out by their
`info_gain.py` (IG on each turn's last token, observation included; F1 on the last token) over a response mask that
covers actions and observations, as their GRPO mask does; the advantages are compared on our policy tokens.
"""
import random

import numpy as np
import pytest
import torch

from tests.helpers import D
from tests.anchors import formulas_igpo as ref
from workbench.advantages.igpo import igpo, info_gain_rewards
from workbench.batch import RolloutBatch

pytestmark = pytest.mark.covers("igpo")
F32 = dict(rtol=1e-4, atol=1e-5)


def case(seed, groups=3, G=4, max_turns=4):
    rng = random.Random(seed)
    layouts, rewards, group = [], [], []
    for g in range(groups):
        same_f1 = g == 0  # every row of group 0 ends with the same F1
        for _ in range(G):
            n = rng.randint(1, max_turns)
            layouts.append([(rng.randint(1, 3), rng.randint(1, 3) if s < n - 1 else 0) for s in range(n)])
            ig = [rng.choice([0.0, round(rng.uniform(-0.3, 0.3), 3)]) for _ in range(n - 1)]
            rewards.append(ig + [1.0 if same_f1 else rng.choice([0.0, 0.5, 1.0])])
            group.append(g)
    B, T = len(layouts), max(sum(a + o for a, o in row) for row in layouts) + 1
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1)
    last_of_turn = []
    for i, row in enumerate(layouts):
        t, ends = 0, []
        for s, (a, o) in enumerate(row):
            mask[i, t:t + a] = 1
            turn[i, t:t + a + o] = s
            t += a + o
            ends.append(t - 1)
        last_of_turn.append(ends)
    S = max(len(r) for r in rewards)
    turn_r = torch.zeros(B, S, dtype=D)
    for i, r in enumerate(rewards):
        turn_r[i, :len(r)] = torch.tensor(r, dtype=D)
    batch = RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask, group=torch.tensor(group),
                         rewards=torch.tensor([r[-1] for r in rewards], dtype=D), turn=turn, turn_rewards=turn_r,
                         turn_info=[[{"belief": 0.0}] * len(r) for r in rewards])
    # their layout: token rewards over the response (actions + observations), float32
    valid = (turn >= 0).float()
    tlr = torch.zeros(B, T)
    for i, r in enumerate(rewards):
        length = int(valid[i].sum())
        tlr[i, :length] = torch.tensor(ref.place_rewards(length, last_of_turn[i], r[:-1], r[-1]))
    return batch, tlr, valid, np.array(group)


@pytest.mark.parametrize("norm", ["joint", "separate"])
@pytest.mark.parametrize("gamma", [1.0, 0.5])
@pytest.mark.parametrize("scale", [True, False])
def test_745078b_normalization_and_turn_accumulation(norm, gamma, scale):
    for seed in range(6):
        batch, tlr, valid, index = case(seed)
        theirs, _ = ref.compute_grpo_outcome_advantage(tlr, valid, index, gamma=gamma, info_gain_norm_mode=norm,
                                                       norm_adv_by_std_in_grpo=scale)
        ours = igpo(batch, norm=norm, gamma=gamma, scale=scale, version="745078b")
        torch.testing.assert_close(ours, theirs.double() * batch.mask, **F32)
        if norm == "separate" and scale:
            # group 0's equal F1s normalize to 0: its rows' last turns are merged away (advantage 0)
            for i in range(4):
                last = (batch.turn[i] == int(batch.turn[i].max())) & (batch.mask[i] > 0)
                assert torch.all(ours[i][last] == 0)


def test_bff163b_position_baseline():
    for seed in range(6):
        batch, tlr, valid, index = case(seed)
        theirs, _ = ref.compute_grpo_outcome_advantage_bff163b(tlr, valid, index)
        ours = igpo(batch, version="bff163b")
        torch.testing.assert_close(ours, theirs.double() * batch.mask, **F32)


@pytest.mark.parametrize("kind, belief", [("prob_diff", "prob"), ("log_prob_diff", "log_prob")])
def test_information_gain_from_the_ground_truths_mean_log_probs(kind, belief):
    """generation.py's per-turn gains from the mean log-prob before each turn; ours from the beliefs."""
    rng = random.Random(0)
    for _ in range(20):
        n = rng.randint(1, 6)
        mean_logp = [-rng.uniform(0.01, 5.0) for _ in range(n)]
        theirs = ref.gain_from_mean_logprobs(mean_logp, kind)
        values = torch.tensor(mean_logp, dtype=D)
        beliefs = (values.exp() if belief == "prob" else values).tolist()
        ours = info_gain_rewards([beliefs], torch.tensor([0.0], dtype=D), n)[0, :n - 1]
        assert ours.tolist() == pytest.approx(theirs, rel=1e-6, abs=1e-7)
