"""Vision-Zero's phase mask: a scheduled phase keeps exactly its turns' action tokens (the two phases partition the
action tokens; observations and padding stay out), 'both' keeps every action token, clear errors."""
from __future__ import annotations

import pytest
import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.masks.vision_zero import BOTH, CLUE, VOTE

pytestmark = pytest.mark.covers("vision-zero")
MASK = registry.get("token_mask", "vision-zero").fn


def row(turns):
    """(mask, turn, info) of one row from its turns: (phase, action tokens, observation tokens after it)."""
    mask, turn, info = [], [], []
    for s, (phase, act, obs) in enumerate(turns):
        mask += [1.0] * act + [0.0] * obs
        turn += [s] * (act + obs)
        info.append({"phase": phase})
    return mask, turn, info


def batch() -> RolloutBatch:
    rows = [row([("clue", 3, 2), ("clue", 2, 0)]),             # a player giving two clues
            row([("vote", 2, 0)]),                             # a judge
            row([("clue", 2, 3), ("clue", 3, 1), ("vote", 2, 0)])]  # a player who also votes
    T = max(len(m) for m, _, _ in rows)
    mask = torch.tensor([m + [0.0] * (T - len(m)) for m, _, _ in rows])
    turn = torch.tensor([t + [-1] * (T - len(t)) for _, t, _ in rows])
    return RolloutBatch(response_ids=torch.zeros_like(turn), mask=mask, group=torch.zeros(3, dtype=torch.long),
                        turn=turn, turn_info=[i for _, _, i in rows])


def test_each_phase_keeps_its_own_turns_action_tokens_only():
    b = batch()
    clue, vote = MASK(b, phase=CLUE), MASK(b, phase=VOTE)
    assert clue[0].tolist()[:5] == [1, 1, 1, 0, 0] and clue[0].sum() == 5 and clue[1].sum() == 0
    assert vote[0].sum() == 0 and vote[1].tolist()[:2] == [1, 1]
    assert clue[2].sum() == 5 and vote[2].sum() == 2 and vote[2, -2:].tolist() == [1, 1]
    assert torch.equal(clue + vote, b.mask)  # the phases partition the action tokens
    assert torch.all((clue <= b.mask) & (vote <= b.mask))  # never an observation or a pad token


def test_both_phases_keep_every_action_token_and_a_float_phase_from_the_schedule_works():
    b = batch()
    assert torch.equal(MASK(b, phase=BOTH), b.mask) and torch.equal(MASK(b), b.mask)
    assert torch.equal(MASK(b, phase=1.0), MASK(b, phase=VOTE))


def test_errors_name_the_problem():
    b = batch()
    with pytest.raises(ValueError, match=r"phase=3: .* 0 \(clue turns\), 1 \(vote turns\) or 2"):
        MASK(b, phase=3)
    b.turn_info[1][0] = {"state": 5}
    with pytest.raises(ValueError, match="row 1, turn 0: turn_info has phase None"):
        MASK(b, phase=VOTE)
    b.turn_info = []
    with pytest.raises(ValueError, match="reads turn_info .* roll out a game"):
        MASK(b, phase=CLUE)
