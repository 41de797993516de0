"""Agreement with CM2's advantages (tests/anchors/formulas_cm2_advantage.py, namezhenzhang/CM2-RLCR-Tool-Agent
@ 2758991), with `cm2-advantage` set to the code's conventions:

    turn level   per turn-position statistics, > 4 samples needed (min_samples=5), std or not
                 (norm_adv_by_std_in_grpo), rollouts reaching different numbers of user turns
    step level   item statistics over the rollouts where the item was eligible (step_baseline="eligible"), > 4
                 needed (threthod_num 4), no std (f_norm="none"), sum or weighted mean over the eligible items
                 (do_norm_in_adv False / True), eta = 1

on labels that respect the dependencies strictly (`ordered_labels`, tests/anchors/test_cm2.py) and flip nothing
at a rollout's last step: there the code's dependency bookkeeping and the paper's eligibility agree (the code
counts an item whose dependency completes at the same step as eligible one step early, which only matters when
that step is the last)."""
import random

import pytest
import torch

from tests.helpers import D
from tests.anchors import formulas_cm2_advantage as ref
from tests.anchors.test_cm2 import ordered_labels
from workbench.advantages.cm2 import step_advantages, turn_advantages

pytestmark = pytest.mark.covers("cm2-advantage")


def rollouts(rng: random.Random, G: int, C: int):
    """One prompt's G rollouts of one user turn: C items (deps on lower indices), 1..5 steps each."""
    deps = [tuple(d for d in range(c) if rng.random() < 0.4) for c in range(C)]
    raw = [rng.random() + 0.1 for _ in range(C)]
    weights = [r / sum(raw) for r in raw]
    labels = []
    for _ in range(G):
        S = rng.randint(1, 5)
        steps = ordered_labels(rng, deps, S)
        labels.append(steps + [steps[-1]])  # a last step that flips nothing
    return deps, weights, labels


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("do_norm", [False, True])
def test_step_level_matches_the_reward_managers_step_advantage(seed, do_norm):
    rng = random.Random(seed)
    for G in (4, 8):
        deps, weights, labels = rollouts(rng, G, rng.randint(1, 5))
        turns = [(torch.tensor(lab, dtype=torch.bool), deps) for lab in labels]
        ours = step_advantages(turns, [torch.tensor(weights, dtype=D)] * G, torch.zeros(G, dtype=torch.long),
                               f_norm="none", min_samples=5, step_weights="mean" if do_norm else "sum",
                               step_baseline="eligible")
        results = [(i, lab, [0] * len(lab), [deps], [weights]) for i, lab in enumerate(labels)]
        theirs = ref.step_level_advantage(results, do_norm_in_adv=do_norm)
        for i, lab in enumerate(labels):
            expected = torch.tensor([theirs[i].get(s, 0.0) for s in range(len(lab))], dtype=D)
            torch.testing.assert_close(ours[i], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("norm", [False, True])
def test_turn_level_matches_the_per_position_statistics(seed, norm):
    g = torch.Generator().manual_seed(seed)
    P, G, L, T = 3, 7, 3, 12
    index = [f"u{q}" for q in range(P) for _ in range(G)]
    reached = torch.randint(1, L + 1, (P * G,), generator=g)
    turn_rewards = [torch.rand(int(n), generator=g, dtype=D).tolist() for n in reached]
    rewards, ends = torch.zeros(P * G, T, dtype=D), torch.zeros(P * G, T, dtype=torch.bool)
    for i, r in enumerate(turn_rewards):
        pos = sorted(torch.randperm(T, generator=g)[:len(r)].tolist())  # each turn's last token
        rewards[i, pos], ends[i, pos] = torch.tensor(r, dtype=D), True
    theirs = ref.turn_level_advantage(rewards, ends, index, norm_adv_by_std_in_grpo=norm)
    ours = turn_advantages(turn_rewards, torch.arange(P).repeat_interleave(G), f_norm="std" if norm else "none",
                           min_samples=5)
    for i in range(P * G):
        torch.testing.assert_close(ours[i], theirs[i, ends[i]], rtol=0, atol=1e-12)
    assert bool((theirs[ends] == 0).any()) and bool((theirs[ends] != 0).any())  # both kinds of positions occur
