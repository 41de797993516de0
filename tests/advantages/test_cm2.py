"""CM2 advantages: trajectory / turn / step levels over checklist labels."""
import random

import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.cm2 import cm2_advantage, item_statistics, step_advantages, step_values, turn_advantages
from workbench.advantages.group import grpo
from workbench.rewards.checklist import Item, Row, checklist_reward, eligible

pytestmark = pytest.mark.covers("cm2-advantage")


def row(labels, deps, weights):
    items = [Item(id=str(c), weight=w) for c, w in enumerate(weights)]
    return Row(items, torch.tensor(labels, dtype=torch.bool), list(deps), torch.tensor(weights, dtype=D))


def steps_batch(n_steps, group, tokens=2, rewards=None, **fields):
    """Rows of n_steps[i] steps, `tokens` policy tokens each, with batch.turn step ids."""
    rewards = [0.0] * len(n_steps) if rewards is None else rewards
    b = make_batch(rewards, group, [n * tokens for n in n_steps], **fields)
    T = b.mask.shape[1]
    b.turn = torch.where(b.mask > 0, torch.arange(T)[None].expand(len(n_steps), T) // tokens, -1)
    return b


def random_rows(seed, G=6, C=4):
    rng = random.Random(seed)
    deps = [tuple(d for d in range(c) if rng.random() < 0.4) for c in range(C)]
    raw = [rng.random() + 0.1 for _ in range(C)]
    weights = [r / sum(raw) for r in raw]
    rows = []
    for _ in range(G):
        S = rng.randint(1, 5)
        rows.append(row([[rng.random() < 0.4 for _ in range(C)] for _ in range(S)], deps, weights))
    return rows


def test_registered_with_the_papers_defaults():
    e = registry.get("advantage", "cm2-advantage")
    assert {"level": "trajectory", "f_norm": "std", "min_samples": 2, "step_weights": "mean",
            "step_baseline": "group"}.items() <= e.defaults.items()


@pytest.mark.parametrize("f_norm, scale", [("std", "group"), ("none", "none")])
def test_one_item_one_turn_is_grpo_on_the_binary_reward(f_norm, scale):
    g = torch.Generator().manual_seed(0)
    correct = (torch.rand(12, generator=g) < 0.5).tolist()
    rows = [row([[c]], [()], [1.0]) for c in correct]
    b = steps_batch([1] * 12, torch.arange(3).repeat_interleave(4), rewards=torch.tensor(correct, dtype=D))
    for level in ("trajectory", "turn"):
        torch.testing.assert_close(cm2_advantage(b, level=level, f_norm=f_norm, rows=rows), grpo(b, scale=scale),
                                   rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_step_advantage_is_a_weighted_mean_within_the_per_item_advantages(seed):
    rows = random_rows(seed)
    group = torch.zeros(len(rows), dtype=torch.long)
    stats = item_statistics([(r.sat, r.deps) for r in rows], group)
    for r in rows:
        per_item_stats = [stats.get((0, c)) for c in range(len(r.deps))]
        A = step_values(r.sat, r.deps, r.weights, per_item_stats)
        ok = eligible(r.sat, r.deps)
        for s in range(r.sat.shape[0]):
            if not bool(ok[s].any()):
                assert float(A[s]) == 0.0
                continue
            items = [c for c in range(len(r.deps)) if ok[s, c]]
            singles = []
            for c in items:  # the item alone: its own advantage
                one = torch.zeros_like(r.weights)
                one[c] = 1.0
                singles.append(float(step_values(r.sat, r.deps, one, per_item_stats)[s]))
            assert min(singles) - 1e-12 <= float(A[s]) <= max(singles) + 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_ineligible_items_never_contribute(seed):
    rows = random_rows(seed)
    stats = item_statistics([(r.sat, r.deps) for r in rows], torch.zeros(len(rows), dtype=torch.long))
    for r in rows:
        base = [stats.get((0, c)) for c in range(len(r.deps))]
        ok = eligible(r.sat, r.deps)
        A = step_values(r.sat, r.deps, r.weights, base)
        for c in range(len(r.deps)):  # move item c's baseline: only the steps where c is eligible may change
            moved = list(base)
            moved[c] = (base[c][0] + 0.37, base[c][1], base[c][2])
            changed = step_values(r.sat, r.deps, r.weights, moved) != A
            assert not bool((changed & ~ok[:, c]).any())


def test_hand_computed_step_advantages():
    # two items, item 1 depends on item 0, weights 1/4, 3/4; G = 2 rollouts of 2 steps
    first = row([[True, False], [True, True]], [(), (0,)], [0.25, 0.75])   # both pay (0 at step 0, 1 at step 1)
    second = row([[False, False], [False, False]], [(), (0,)], [0.25, 0.75])  # nothing pays
    out = step_advantages([(first.sat, first.deps), (second.sat, second.deps)], [first.weights, second.weights],
                          torch.tensor([0, 0]), f_norm="none")
    # baselines b_0 = b_1 = 1/2 (paper: over both rollouts); eligible: first: step 0 {0}, step 1 {1};
    # second: steps 0 and 1 {0}
    assert out[0].tolist() == pytest.approx([0.5, 0.5])
    assert out[1].tolist() == pytest.approx([-0.5, -0.5])
    eligible_only = step_advantages([(first.sat, first.deps), (second.sat, second.deps)],
                                    [first.weights, second.weights], torch.tensor([0, 0]), f_norm="none",
                                    step_baseline="eligible")
    assert eligible_only[0].tolist() == pytest.approx([0.5, 0.0])  # item 1 eligible only in the first: b_1 = 1


def test_turn_positions_are_normalized_over_the_rollouts_that_reached_them():
    out = turn_advantages([[1.0, 0.0], [0.0], [0.5, 1.0]], torch.tensor([0, 0, 0]), f_norm="none")
    assert [o.tolist() for o in out] == [pytest.approx([0.5, -0.5]), pytest.approx([-0.5]),
                                         pytest.approx([0.0, 0.5])]
    few = turn_advantages([[1.0, 0.0], [0.0], [0.5, 1.0]], torch.tensor([0, 0, 0]), min_samples=3)
    assert few[0].tolist()[1] == 0.0 and few[2].tolist()[1] == 0.0  # turn 2 reached by 2 < 3 rollouts


def episode(*actions):
    return [{"action": a, "tool_error": None} for a in actions]


def test_on_calculator_episodes_the_step_level_follows_the_reward_labels():
    prompts = ["2*3+4*5="] * 4
    turn_info = [episode("[2*3]", "[4*5]", "[6+20]", "A:26"), episode("[2*3]", "[4*5]", "A:26"),
                 episode("[4*5]", "[2*3]", "A:25"), episode("[6+20]", "[2*3]", "[4*5]", "A:26")]
    scores = [1.0, 1.0, 0.0, 1.0]
    b = steps_batch([4, 3, 3, 4], [0, 0, 0, 0], rewards=torch.tensor(scores, dtype=D),
                    scores=torch.tensor(scores, dtype=D), prompts=prompts, turn_info=turn_info,
                    completions=["t"] * 4)
    R = torch.tensor(checklist_reward(["t"] * 4, prompts=prompts, scores=scores, turn_info=turn_info), dtype=D)
    b.rewards = R
    torch.testing.assert_close(cm2_advantage(b), grpo(b), rtol=0, atol=1e-15)  # trajectory level = GRPO on R
    A = cm2_advantage(b, level="step")
    assert bool((A[b.mask == 0] == 0).all())
    per_step = [A[i][b.mask[i] > 0][::2] for i in range(4)]
    # the expert's first step pays r0 (3 of 4 rollouts compute 6 somewhere): positive
    assert float(per_step[0][0]) > 0
    # the last rollout's first call 6+20 comes before its dependencies: r2 is not eligible there, r0 and r1 are
    # (neither paid at step 0, both paid later: backfilled), so its first step is still positive
    assert float(per_step[3][0]) > 0 and float(per_step[2][-1]) < 0  # the wrong answer's last step: negative


def test_bad_options_are_refused():
    b = steps_batch([1, 1], [0, 0])
    rows = [row([[True]], [()], [1.0]), row([[False]], [()], [1.0])]
    for kw, match in (({"level": "token"}, "level must be"), ({"f_norm": "mad"}, "f_norm must be"),
                      ({"min_samples": 0}, "min_samples"), ({"step_baseline": "all"}, "step_baseline")):
        with pytest.raises(ValueError, match=match):
            cm2_advantage(b, rows=rows, **kw)
    with pytest.raises(ValueError, match="1 checklist rows for 2"):
        cm2_advantage(b, rows=rows[:1])
    mixed = [row([[True]], [()], [1.0]), row([[False, True]], [(), ()], [0.5, 0.5])]
    with pytest.raises(ValueError, match="share its checklist"):
        cm2_advantage(b, rows=mixed, level="step")
