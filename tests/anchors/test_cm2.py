"""Agreement with CM2's checklist scoring (tests/anchors/formulas_cm2.py, namezhenzhang/CM2-RLCR-Tool-Agent
@ 2758991), on the same judge labels:

    per-step scores (interaction)     sum_c w_c r_{s,c} of `step_rewards`, any labels, no dependencies
    early termination                 a strict item never judged satisfied in its turn (`trajectory_reward`)
    trajectory score (reward manager) `trajectory_reward` over several turns, no dependencies
    completion pass (step level)      the step each item pays at, for labels that respect the dependencies strictly

and the two documented departures of the code from the paper's Eq. 2-3 (which ours follows) with dependencies.
"""
import random

import pytest
import torch

from tests.anchors import formulas_cm2 as ref
from workbench.rewards.checklist import step_rewards, trajectory_reward

pytestmark = pytest.mark.covers("cm2-checklist")


def random_weights(rng: random.Random, n: int) -> list[float]:
    raw = [rng.random() + 0.1 for _ in range(n)]
    return [r / sum(raw) for r in raw]


def random_labels(rng: random.Random, steps: int, items: int) -> list[list[bool]]:
    return [[rng.random() < 0.3 for _ in range(items)] for _ in range(steps)]


@pytest.mark.parametrize("seed", range(10))
def test_per_step_scores_and_termination_match_the_interaction(seed):
    rng = random.Random(seed)
    for _ in range(20):
        C, S = rng.randint(1, 5), rng.randint(1, 6)
        weights, labels = random_weights(rng, C), random_labels(rng, S, C)
        strict = [rng.random() < 0.4 for _ in range(C)]
        sat = torch.tensor(labels)
        ours = (step_rewards(sat, [()] * C).double() * torch.tensor(weights, dtype=torch.float64)).sum(-1)
        theirs, terminate = ref.per_step_scores(labels, weights, [not s for s in strict])
        torch.testing.assert_close(ours, torch.tensor(theirs, dtype=torch.float64), rtol=0, atol=1e-8)
        assert terminate == bool((torch.tensor(strict) & ~sat.any(0)).any())


@pytest.mark.parametrize("seed", range(10))
def test_trajectory_reward_matches_the_reward_manager_over_turns(seed):
    rng = random.Random(seed)
    for _ in range(20):
        L = rng.randint(1, 4)
        checklist = [(random_weights(rng, C), [rng.random() < 0.3 for _ in range(C)])
                     for C in (rng.randint(1, 4) for _ in range(L))]
        turns, strict, per_step_standards, per_step_turn_indices = [], [], [], []
        terminated = False
        for t, (weights, flags) in enumerate(checklist):
            S = 0 if terminated else rng.randint(1, 4)  # a terminated dialogue never reaches its later turns
            labels = random_labels(rng, S, len(weights))
            turns.append((torch.tensor(labels, dtype=torch.bool).reshape(S, len(weights)), [()] * len(weights),
                          torch.tensor(weights, dtype=torch.float64)))
            strict.append(flags)
            per_step_standards += labels
            per_step_turn_indices += [t] * S
            if S:
                terminated = ref.per_step_scores(labels, weights, [not f for f in flags])[1]
        ours = float(trajectory_reward(turns, strict=strict))
        theirs = ref.trajectory_score(per_step_standards, per_step_turn_indices, [w for w, _ in checklist])
        assert ours == pytest.approx(theirs, abs=1e-12)


def ordered_labels(rng: random.Random, deps: list[tuple[int, ...]], steps: int) -> list[list[bool]]:
    """Monotone labels (once True, True) whose items turn True strictly after everything they depend on."""
    first = {}
    for c, ds in enumerate(deps):  # deps point to lower indices: a topological order
        earliest = max((first[d] for d in ds), default=-1) + 1
        first[c] = rng.randint(earliest, steps + 1) if earliest < steps else steps  # steps: never
    return [[first[c] <= s for c in range(len(deps))] for s in range(steps)]


@pytest.mark.parametrize("seed", range(10))
def test_paying_steps_match_the_completion_pass_when_labels_respect_dependencies(seed):
    rng = random.Random(seed)
    for _ in range(30):
        C, S = rng.randint(1, 6), rng.randint(1, 6)
        deps = [tuple(d for d in range(c) if rng.random() < 0.4) for c in range(C)]
        labels = ordered_labels(rng, deps, S)
        paid = step_rewards(torch.tensor(labels, dtype=torch.bool).reshape(S, C), deps)
        ours = {c: int(paid[:, c].long().argmax()) for c in range(C) if bool(paid[:, c].any())}
        assert ours == ref.completion_steps(labels, deps)


def test_where_the_code_departs_from_the_paper():
    # Item 1 depends on item 0 but is judged satisfied first (step 0); item 0 follows at step 1.
    labels = [[False, True], [True, True]]
    deps = [(), (0,)]
    paid = step_rewards(torch.tensor(labels), deps)
    assert paid.tolist() == [[False, False], [True, False]]   # paper: item 1 never flips from a state with item 0
    assert ref.completion_steps(labels, deps) == {0: 1, 1: 1}  # code: completes once item 0 is complete
    weights = torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert float(trajectory_reward([(torch.tensor(labels), deps, weights)])) == 0.5
    assert ref.trajectory_score(labels, [0, 0], [[0.5, 0.5]]) == 1.0  # the score ignores dependencies
    # Both items satisfied by the same step: the code counts the dependency as complete within the step.
    same = [[True, True]]
    assert step_rewards(torch.tensor(same), deps).tolist() == [[True, False]]
    assert ref.completion_steps(same, deps) == {0: 0, 1: 0}
