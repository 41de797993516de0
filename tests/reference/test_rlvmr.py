"""Agreement with RLVMR's code (tests/reference/formulas_rlvmr.py, zzjweb/digitalhuman @ 789ccd6), float64, on random
tagged trajectories laid out both ways (one row per step there, one row per trajectory here):

    process_trajectory_rlvmr_rewards        `meta_rewards` (reference_bug=True everywhere; False wherever no
                                            trajectory opens with a reflection)
    apply_invalid_action_penalty +
    compute_rlvmr_outcome_advantage         `advantage:rlvmr` (episode_stats="steps") on each step's tokens, both
                                            modes, w in {0, 0.5, 1}
"""
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import D
from tests.reference import formulas_rlvmr as ref
from tests.advantages.test_rlvmr import agent_batch, per_step
from workbench.advantages.rlvmr import rlvmr
from workbench.rewards.rlvmr import meta_rewards

pytestmark = pytest.mark.covers("rlvmr")
CONFIG = SimpleNamespace(algorithm=SimpleNamespace(rlvmr=SimpleNamespace(planning_reward=1.0, exploration_reward=1.0,
                                                                         reflection_reward=1.0)))
TAGS = ["<planning>", "<explore>", "<reflection>", ""]


def random_case(seed, prompts=3, group_size=4):
    """Trajectories of 1-5 steps: a random tag and one of a few <action> texts each (repeats happen), random
    validity and availability, 0/1 episode rewards."""
    g = torch.Generator().manual_seed(seed)

    def pick(n):
        return int(torch.randint(n, (1,), generator=g))

    rows = []
    for p in range(prompts):
        for _ in range(group_size):
            n = 1 + pick(5)
            steps = [dict(full_output=f"{TAGS[pick(4)]}think<action>go {pick(3)}</action>", is_action_valid=pick(4) > 0,
                          action_available=pick(4) > 0, active_masks=True) for _ in range(n)]
            rows.append((p, float(pick(2)), steps))
    return rows


def reference_advantage(rows, *, w, mode, coef=0.1):
    """Per step row, in trajectory order: the reference's advantage (every token of a step row holds it)."""
    trajectories = ref.process_trajectory_rlvmr_rewards([steps for _, _, steps in rows], CONFIG,
                                                        [r for _, r, _ in rows])
    flat = [(p, r, step) for (p, r, _), steps in zip(rows, trajectories) for step in steps]
    N, L = len(flat), 2
    scores = torch.zeros(N, L, dtype=D)
    scores[:, -1] = torch.tensor([r for _, r, _ in flat], dtype=D)
    scores = ref.apply_invalid_action_penalty(scores, [L] * N, [s["is_action_valid"] for _, _, s in flat], coef)
    out = ref.compute_rlvmr_outcome_advantage(
        scores, torch.stack([s["rlvmr_step_reward"].to(D) for _, _, s in flat]), torch.ones(N, L, dtype=D),
        [p for p, _, _ in flat], step_advantage_w=w, mode=mode, tag_types=[s["rlvmr_tag_type"] for _, _, s in flat])
    return out[0][:, 0], trajectories


def our_batch(rows):
    b = agent_batch([r for _, r, _ in rows], [p for p, _, _ in rows],
                    [[s["full_output"] for s in steps] for _, _, steps in rows],
                    valid=[[s["is_action_valid"] for s in steps] for _, _, steps in rows])
    for info, (_, _, steps) in zip(b.turn_info, rows):
        for entry, s in zip(info, steps):
            entry["action_available"] = s["action_available"]
    return b


@pytest.mark.parametrize("seed", range(6))
def test_step_rewards_and_tags_match(seed):
    rows = random_case(seed)
    _, trajectories = reference_advantage(rows, w=1.0, mode="mean_norm")
    for (_, r, _), steps in zip(rows, trajectories):
        outputs = [s["full_output"] for s in steps]
        valid, available = [s["is_action_valid"] for s in steps], [s["action_available"] for s in steps]
        rewards, tags = meta_rewards(outputs, valid, available, r > 0, reference_bug=True)
        assert tags == [s["rlvmr_tag_type"] for s in steps]
        assert rewards == [float(s["rlvmr_step_reward"]) for s in steps]
        if not (valid[0] and "<reflection>" in outputs[0] and "<planning>" not in outputs[0]
                and "<explore>" not in outputs[0]):
            assert meta_rewards(outputs, valid, available, r > 0)[0] == rewards


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
@pytest.mark.parametrize("w", [0.0, 0.5, 1.0])
def test_advantage_matches_on_every_step(seed, mode, w):
    rows = random_case(seed)
    theirs, _ = reference_advantage(rows, w=w, mode=mode)
    b = our_batch(rows)
    ours = per_step(rlvmr(b, w=w, mode=mode, invalid_penalty=0.1, reference_bug=True), b)
    ours = torch.cat([ours[i, :len(steps)] for i, (_, _, steps) in enumerate(rows)])
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
