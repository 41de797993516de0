"""SPIRAL's role-conditioned baseline: per-role EMA of the return (decay 0.95, from 0.0), each row baselined before its
own update, kept across steps and through a checkpoint; with remax, A = R - b_role. Agreement with SPIRAL's
`EMA` and `prepare_trajectories` loop (transcribed below)."""
from __future__ import annotations

import copy
import io

import pytest
import torch

from tests.advantages.test_marft import kuhn_self_play
from tests.helpers import make_batch, step_context
from workbench import registry
from workbench.advantages.baselines import remax
from workbench.transforms.role_baseline import role_baseline

D = torch.float64


# ---------------------------------------------------------------------------------------------------------------------
# Transcribed from spiral-rl/spiral @ a02d0ed8d11c57e0ee4a4096e9881866d69a052b: `spiral/utils.py::EMA` (L18-32) and the
# role-baseline lines of `train_spiral.py` (L158-163 the per-player EMAs; L485-495 in `prepare_trajectories`, for each
# trained player of a game in order: baseline = get(), update(reward), reward -= baseline), reward_scaling 1.

class EMA:
    def __init__(self, decay: float):
        assert 0.0 < decay < 1.0, "Decay must be between 0 and 1"
        self.decay = decay
        self.value = 0.0

    def update(self, x: float) -> float:
        if self.value is None:
            self.value = x
        else:
            self.value = self.decay * self.value + (1 - self.decay) * x
        return self.value

    def get(self) -> float:
        return self.value


def spiral_shaped_rewards(games, gamma=0.95):
    """games: [(reward of player 0, reward of player 1)] in order -> the shaped reward of each (game, player)."""
    role_baseline_ema = {0: EMA(gamma), 1: EMA(gamma)}
    out = []
    for rewards in games:
        for player_id in [0, 1]:
            player_reward = rewards[player_id] * 1.0
            baseline = role_baseline_ema[player_id].get()
            role_baseline_ema[player_id].update(player_reward)
            player_reward -= baseline
            out.append(player_reward)
    return out

# ---------------------------------------------------------------------------------------------------------------------


def games_batch(games):
    """Rows (game, player) in the rollout `agents`' order, the game's rewards."""
    rewards = [r for game in games for r in game]
    b = make_batch(rewards, [0] * len(rewards), lengths=[2] * len(rewards))
    b.agent = torch.tensor([0, 1] * len(games))
    b.episode = torch.arange(len(games)).repeat_interleave(2)
    return b


def run_steps(steps, state, **kw):
    """role-baseline then remax over consecutive steps sharing `state`; the per-row advantages of each step."""
    out = []
    for t, games in enumerate(steps):
        ctx = step_context(step=t, state=state)
        b = role_baseline(games_batch(games), ctx, **kw)
        out.append(remax(b)[:, 0])
    return out


STEPS = [[(1.0, -1.0), (-1.0, 1.0), (1.0, -1.0)], [(1.0, -1.0), (0.0, 0.0)], [(-1.0, 1.0), (1.0, -1.0), (1.0, -1.0)]]


def test_remax_on_the_role_baseline_is_spirals_shaped_reward_across_steps():
    ours = torch.cat(run_steps(STEPS, state={}))
    theirs = spiral_shaped_rewards([g for step in STEPS for g in step])
    torch.testing.assert_close(ours, torch.tensor(theirs, dtype=D), rtol=0, atol=1e-12)


def test_on_kuhn_self_play_rows_each_role_has_its_own_average():
    b = kuhn_self_play()
    state = {}
    out = role_baseline(b, step_context(state=state))
    theirs = spiral_shaped_rewards([tuple(b.rewards[b.episode == e].tolist()) for e in b.episode.unique()])
    torch.testing.assert_close(remax(out)[:, 0].double(), torch.tensor(theirs, dtype=D), rtol=0, atol=1e-6)
    assert state["averages"][0] == pytest.approx(-state["averages"][1])  # zero-sum: the roles mirror each other
    assert out.baseline_rewards.dtype == b.rewards.dtype


def test_a_row_is_baselined_by_its_roles_average_before_its_own_return():
    state = {}
    b = role_baseline(games_batch([(1.0, -1.0), (1.0, -1.0)]), step_context(state=state))
    assert b.baseline_rewards.tolist() == pytest.approx([0.0, 0.0, 0.05, -0.05])
    assert state["averages"] == pytest.approx({0: 0.0975, 1: -0.0975})


def test_first_value_seeds_a_roles_average_with_its_first_return():
    state = {}
    b = role_baseline(games_batch([(1.0, -1.0), (0.0, 0.0)]), step_context(state=state), first_value=True)
    assert b.baseline_rewards.tolist() == pytest.approx([0.0, 0.0, 1.0, -1.0])
    assert state["averages"] == pytest.approx({0: 0.95, 1: -0.95})


def test_the_state_survives_a_checkpoint_and_the_run_resumes_exactly():
    straight = torch.cat(run_steps(STEPS, state={}))
    state = {}
    first = run_steps(STEPS[:1], state)
    buffer = io.BytesIO()
    torch.save(copy.deepcopy(state), buffer)  # what the pipeline writes (state_dict deep-copies, save_atomic)
    buffer.seek(0)
    resumed = torch.load(buffer, weights_only=True)
    rest = [remax(role_baseline(games_batch(games), step_context(step=t + 1, state=resumed)))[:, 0]
            for t, games in enumerate(STEPS[1:])]
    assert torch.equal(torch.cat(first + rest), straight)


def test_the_state_is_updated_with_every_ranks_rows():
    """Under data parallelism the averages take every rank's rows (gathered), so each rank keeps the same state; this
    rank's baselines start from the step's averages."""
    state = {}
    ctx = step_context(state=state)
    ctx.gather_objects = lambda rows: list(rows) + [(0, 1.0), (1, -1.0)]  # another rank's game
    b = role_baseline(games_batch([(0.0, 0.0)]), ctx)
    assert b.baseline_rewards.tolist() == [0.0, 0.0]
    assert state["averages"] == pytest.approx({0: 0.05, 1: -0.05})


def test_clear_refusals_and_the_registration():
    b = games_batch([(1.0, -1.0)])
    with pytest.raises(ValueError, match="decay must be a number in \\(0, 1\\)"):
        role_baseline(b, step_context(state={}), decay=1.0)
    b.agent = None
    with pytest.raises(ValueError, match="one baseline per role: the batch has no agent ids"):
        role_baseline(b, step_context(state={}))
    entry = registry.get("group_transform", "role-baseline")
    assert entry.family == "multiagent" and entry.state is dict and entry.defaults == {"decay": 0.95,
                                                                                       "first_value": False}
    assert "baseline_rewards" in entry.provides and "agents" in entry.needs
    assert entry.declares("role_baseline/0")
