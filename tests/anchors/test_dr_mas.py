"""Agreement with langfengQ/DrMAS @ 19c632bc `compute_grpo_outcome_advantage` (transcribed in formulas_dr_mas.py) on
toy multi-agent batches laid out as the authors lay them out: one row per agent invocation carrying its reward, group
index f"{uid}_{agent_id}" (Dr. MAS) or the uid (their vanilla mode)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.advantages.step_batches import episode_batch
from tests.anchors import formulas_dr_mas as ref
from tests.helpers import assert_agree
from workbench.advantages.dr_mas import dr_mas
from workbench.advantages.step_critic import turn_spans

pytestmark = pytest.mark.covers("dr-mas")
D = torch.float64


def game_batch(seed: int):
    """3 prompts x 3 episodes x 2 agents; each agent's row has 1-3 turns; rewards drawn per (episode, agent) (the
    agents on different scales); a few agent rows dropped so that some (prompt, agent) groups are singletons."""
    g = torch.Generator().manual_seed(seed)
    actions, rewards, group, agent, episode = [], [], [], [], []
    for q in range(3):
        for e in range(3):
            for k in range(2):
                if (q, e, k) in {(2, 0, 1), (2, 1, 1)}:  # agent 1 of prompt 2 acted in one episode only
                    continue
                n = int(torch.randint(1, 4, (1,), generator=g))
                actions.append([2] * n)
                r = float(torch.randint(0, 3, (1,), generator=g)) * (1.0 if k == 0 else 5.0)
                rewards.append([0.0] * (n - 1) + [r])
                group.append(q), agent.append(k), episode.append(3 * q + e)
    b = episode_batch(actions, rewards, group=torch.tensor(group))
    b.agent, b.episode = torch.tensor(agent), torch.tensor(episode)
    return b


def authors_rows(b):
    """The authors' rows: each of our rows repeated once per turn (invocation), with its reward, uid, agent, traj."""
    n = turn_spans(b)[2].sum(-1)
    rows = torch.repeat_interleave(torch.arange(b.size), n)
    token_level = torch.zeros(len(rows), 3, dtype=D)
    token_level[:, -1] = b.rewards[rows]
    uid = np.array([f"q{int(q)}" for q in b.group[rows]], dtype=object)
    agent_id = np.array([["Solver Agent", "Verifier Agent"][int(k)] for k in b.agent[rows]], dtype=object)
    traj = np.array([f"t{int(e)}" for e in b.episode[rows]], dtype=object)
    return rows, token_level, torch.ones(len(rows), 3, dtype=D), uid, agent_id, traj


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_agent_groups_match_the_authors_with_group_by_agent_id(seed, norm):
    b = game_batch(seed)
    rows, token_level, mask, uid, agent_id, traj = authors_rows(b)
    theirs, _ = ref.compute_grpo_outcome_advantage(token_level, mask, ref.group_index(uid, agent_id, True), traj,
                                                   norm_adv_by_std_in_grpo=norm, group_by_agent_id=True)
    ours = dr_mas(b, norm_by_std=norm)
    first = turn_spans(b)[0][:, 0]
    assert_agree(ours.gather(1, first[:, None])[:, 0][rows], theirs[:, 0])
    assert bool((theirs[:, 0] != 0).any())


@pytest.mark.parametrize("seed", range(4))
def test_vanilla_mode_matches_the_authors_without_group_by_agent_id(seed):
    b = game_batch(seed)
    rows, token_level, mask, uid, agent_id, traj = authors_rows(b)
    theirs, _ = ref.compute_grpo_outcome_advantage(token_level, mask, ref.group_index(uid, agent_id, False), traj,
                                                   group_by_agent_id=False)
    ours = dr_mas(b, group_by_agent=False)
    first = turn_spans(b)[0][:, 0]
    assert_agree(ours.gather(1, first[:, None])[:, 0][rows], theirs[:, 0])
