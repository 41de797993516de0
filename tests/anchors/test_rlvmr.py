"""Agreement with RLVMR's code (tests/anchors/formulas_rlvmr.py, zzjweb/digitalhuman @ 789ccd6), float64, on random
tagged trajectories laid out both ways (one row per step there, one row per trajectory here):

    process_trajectory_rlvmr_rewards        `meta_rewards` (reference_bug=True everywhere; False wherever no
                                            trajectory opens with a reflection)
    apply_invalid_action_penalty +
    compute_rlvmr_outcome_advantage         `advantage:rlvmr` (episode_stats="steps") on each step's tokens, both
                                            modes, w in {0, 0.5, 1}

The random outputs carry zero to three meta tags in any order (the elif chain's priority decides), zero to two
<action> blocks, and episode rewards of 0, 0.5 or 1. Two conventions differ, each shown by a test of its own:
success (the reference's is an episode reward > 0, ALFWorld paying 10 or 0; ours the verifier's verdict
scores >= 1, so the cases pass scores = [reward > 0]), and an output without an <action> block (the reference's
action is [], equal to every other such output; such an output is invalid there, RLVMR's
`alfworld_projection_rlvmr` requiring exactly one action block, so the random cases mark it invalid; ours compares
the text after the tags, what our environments' untagged actions need).
"""
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import D
from tests.anchors import formulas_rlvmr as ref
from tests.advantages.test_rlvmr import agent_batch, per_step
from workbench.advantages.rlvmr import rlvmr
from workbench.rewards.rlvmr import meta_rewards

pytestmark = pytest.mark.covers("rlvmr")
CONFIG = SimpleNamespace(algorithm=SimpleNamespace(rlvmr=SimpleNamespace(planning_reward=1.0, exploration_reward=1.0,
                                                                         reflection_reward=1.0)))
TAGS = ["<planning>", "<explore>", "<reflection>"]
EPISODE_REWARDS = [0.0, 0.5, 1.0]


def random_case(seed, prompts=3, group_size=4):
    """Trajectories of 1-5 steps: 0-3 meta tags in a random order, then 0-2 of a few <action> texts (repeats
    happen); random validity (always invalid without an action block, as RLVMR's projection) and availability;
    episode rewards 0, 0.5 or 1."""
    g = torch.Generator().manual_seed(seed)

    def pick(n):
        return int(torch.randint(n, (1,), generator=g))

    def output():
        tags = [TAGS[i] for i in torch.randperm(3, generator=g)[:pick(4)].tolist()]
        actions = [f"<action>go {pick(3)}</action>" for _ in range(pick(6) // 2)]  # 0, 1 or 2 blocks
        return "".join(tags) + "think" + "".join(actions)

    rows = []
    for p in range(prompts):
        for _ in range(group_size):
            steps = []
            for _ in range(1 + pick(5)):
                text = output()
                steps.append(dict(full_output=text, is_action_valid="<action>" in text and pick(4) > 0,
                                  action_available=pick(4) > 0, active_masks=True))
            rows.append((p, EPISODE_REWARDS[pick(3)], steps))
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
    """Our layout of the same case; success as the reference reads it: scores = [episode reward > 0]."""
    b = agent_batch([r for _, r, _ in rows], [p for p, _, _ in rows],
                    [[s["full_output"] for s in steps] for _, _, steps in rows],
                    valid=[[s["is_action_valid"] for s in steps] for _, _, steps in rows],
                    scores=[float(r > 0) for _, r, _ in rows])
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


def test_cases_cover_tag_mixes_missing_actions_and_partial_rewards():
    rows = [row for seed in range(6) for row in random_case(seed)]
    outputs = [s["full_output"] for _, _, steps in rows for s in steps]
    assert any(sum(tag in o for tag in TAGS) >= 2 for o in outputs)
    assert any("<action>" not in o for o in outputs) and any(o.count("<action>") == 2 for o in outputs)
    assert {r for _, r, _ in rows} == set(EPISODE_REWARDS)


def test_success_is_a_reward_above_zero_there_and_the_verdict_here():
    """A partial episode reward (0.5) is a success for the reference's planning reward (> 0), not for ours
    (scores >= 1, the verifier's verdict), unless the verifier says solved."""
    steps = [dict(full_output="<planning>p<action>go 1</action>", is_action_valid=True, action_available=True,
                  active_masks=True)]
    (theirs,) = ref.process_trajectory_rlvmr_rewards([[dict(steps[0])]], CONFIG, [0.5])
    assert float(theirs[0]["rlvmr_step_reward"]) == 1.0
    assert meta_rewards([steps[0]["full_output"]], [True], success=0.5 >= 1)[0] == [0.0]
    partial = agent_batch([0.5, 0.0], [0, 0], [[steps[0]["full_output"]], ["<explore>x<action>go 2</action>"]],
                          scores=[0.5, 0.0])
    solved = agent_batch([0.5, 0.0], [0, 0], [[steps[0]["full_output"]], ["<explore>x<action>go 2</action>"]],
                         scores=[1.0, 0.0])
    a_step = per_step(rlvmr(solved, w=1.0), solved) - per_step(rlvmr(partial, w=1.0), partial)
    assert float(a_step[0, 0]) == pytest.approx(1 / (1 + 1e-6))  # the lone planning step: reward 1 vs 0


def test_a_valid_output_without_an_action_block_is_compared_by_its_text_here():
    """Our environments' actions carry no <action> tags ("[2*3]"), so two different untagged explorations are two
    actions; the reference reads both as [] (a repeat), but there such an output is invalid anyway."""
    outputs = ["<explore>[2*3]", "<explore>[4*5]"]
    traj = [dict(full_output=o, is_action_valid=True, action_available=True, active_masks=True) for o in outputs]
    (theirs,) = ref.process_trajectory_rlvmr_rewards([traj], CONFIG, [0.0])
    assert [float(s["rlvmr_step_reward"]) for s in theirs] == [1.0, 0.0]
    assert meta_rewards(outputs, [True, True])[0] == [1.0, 1.0]
