"""CM2 checklist rewards: step rewards at the first eligible flip, backfilled steps, trajectory reward, toy judge."""
import random

import pytest
import torch

from workbench.rewards.checklist import (Item, State, backfilled, calculator_checklist, checklist_reward,
                                         checklist_rows, eligible, rule_judge, step_rewards, trajectory_reward)

pytestmark = pytest.mark.covers("cm2-checklist")


def random_turn(rng: random.Random, monotone=False):
    C, S = rng.randint(1, 5), rng.randint(0, 6)
    rank = rng.sample(range(C), C)  # a random topological order: c may depend on the items ranked before it
    deps = [tuple(d for d in range(C) if rank[d] < rank[c] and rng.random() < 0.3) for c in range(C)]
    sat = torch.rand(S, C, generator=torch.Generator().manual_seed(rng.randrange(10**6))) < 0.35
    if monotone:
        sat = sat.long().cummax(0).values.bool()
    w = torch.rand(C, dtype=torch.float64, generator=torch.Generator().manual_seed(rng.randrange(10**6))) + 0.05
    return sat, deps, w / w.sum()


def test_trajectory_reward_is_in_unit_interval_and_each_item_pays_at_most_once():
    rng = random.Random(0)
    for _ in range(300):
        turns = [random_turn(rng) for _ in range(rng.randint(1, 3))]
        strict = [[rng.random() < 0.3 for _ in range(len(deps))] for _, deps, _ in turns]
        R = float(trajectory_reward(turns, strict=strict))
        assert 0.0 <= R <= 1.0 + 1e-12
        for sat, deps, _ in turns:
            assert bool((step_rewards(sat, deps).sum(0) <= 1).all())  # noisy labels flip back and forth


def test_an_item_pays_only_when_it_flips_from_a_state_with_its_dependencies():
    # items: 0 (none), 1 (needs 0); steps: 0 satisfies item 0, 1 satisfies item 1
    sat = torch.tensor([[True, False], [True, True]])
    assert step_rewards(sat, [(), (0,)]).tolist() == [[True, False], [False, True]]
    assert eligible(sat, [(), (0,)]).tolist() == [[True, False], [False, True]]
    # item 1 satisfied in the same step as item 0: its dependency did not hold in x_s, so it never pays
    assert step_rewards(torch.tensor([[True, True]]), [(), (0,)]).tolist() == [[True, False]]
    # a label taken back by a noisy judge and given again pays once, at the first flip
    assert step_rewards(torch.tensor([[True], [False], [True]]), [()]).flatten().tolist() == [True, False, False]


def test_backfilled_steps_are_the_eligible_steps_up_to_the_paying_step():
    rng = random.Random(1)
    for _ in range(300):
        sat, deps, _ = random_turn(rng)
        paid, filled, ok = step_rewards(sat, deps), backfilled(sat, deps), eligible(sat, deps)
        for c in range(sat.shape[1]):
            if bool(paid[:, c].any()):
                k = int(paid[:, c].long().argmax())
                assert filled[:, c].tolist() == [bool(ok[s, c]) and s <= k for s in range(sat.shape[0])]
                assert bool(filled[k, c])  # including the paying step
            else:
                assert not bool(filled[:, c].any())


def test_backfilled_is_the_papers_formula_for_a_judge_that_never_takes_a_label_back():
    rng = random.Random(2)
    for _ in range(300):
        sat, deps, _ = random_turn(rng, monotone=True)
        S = sat.shape[0]
        later = torch.stack([sat[s:].any(0) for s in range(S)]) if S else sat  # exists u >= s: Sat(x_{u+1})
        assert torch.equal(backfilled(sat, deps), eligible(sat, deps) & later)


def test_a_failed_strict_item_ends_the_dialogue():
    w = torch.tensor([0.5, 0.5], dtype=torch.float64)
    first = (torch.tensor([[True, False]]), [(), ()], w)     # item 1 never satisfied in turn 0
    second = (torch.tensor([[True, True]]), [(), ()], w)     # would earn 1
    assert float(trajectory_reward([first, second])) == pytest.approx((0.5 + 1.0) / 2)
    assert float(trajectory_reward([first, second], strict=[[False, True], [False, False]])) == pytest.approx(0.25)
    assert float(trajectory_reward([first, second], strict=[[True, False], [False, False]])) == pytest.approx(0.75)


def test_bad_checklists_are_refused():
    with pytest.raises(ValueError, match="sum"):
        trajectory_reward([(torch.tensor([[True]]), [()], torch.tensor([0.5], dtype=torch.float64))])
    with pytest.raises(ValueError, match="depends"):
        step_rewards(torch.tensor([[True]]), [(0,)])
    # a cycle (0 <- 1 <- 2 <- 0) and an item behind it (3 needs 2) can never pay: refused, naming them
    with pytest.raises(ValueError, match=r"cycle: items \[0, 1, 2, 3\]"):
        step_rewards(torch.ones(2, 5, dtype=torch.bool), [(2,), (0,), (1,), (2,), ()])
    with pytest.raises(ValueError, match="cycle"):
        checklist_reward(["t"], prompts=["1+2="], scores=[1.0],
                         checklist=lambda p: [Item("a", 0.5, deps=("b",)), Item("b", 0.5, deps=("a",))])
    with pytest.raises(ValueError, match="noise"):
        checklist_reward(["A:3"], prompts=["1+2="], scores=[1.0], noise=1.5)
    with pytest.raises(ValueError, match="prompts"):
        checklist_reward(["A:3"], scores=[1.0])


def test_calculator_checklist_follows_the_data_flow_of_the_expression():
    items = calculator_checklist("2*3+4*5=")
    assert [(i.id, i.value, i.deps) for i in items[:-1]] == [("r0", 6, ()), ("r1", 20, ()), ("r2", 26, ("r0", "r1"))]
    assert items[-1].kind == "answer" and items[-1].strict and not items[-1].deps
    assert sum(i.weight for i in items) == pytest.approx(1.0)
    assert [i.kind for i in calculator_checklist("3?")] == ["answer"]  # not an expression: the answer alone
    assert rule_judge(items[0], State(results=(6,))) and not rule_judge(items[-1], State(answered=True))


def episode(*actions):
    return [{"action": a, "tool_error": None} for a in actions]


def test_reward_on_calculator_episodes():
    prompts = ["2*3+4*5="] * 4
    turn_info = [episode("[2*3]", "[4*5]", "[6+20]", "A:26"),   # the expert: every item
                 episode("[2*3]", "[4*5]", "A:26"),            # right answer without the last call
                 episode("[4*5]", "[2*3]", "A:25"),            # intermediates in another order, wrong answer
                 episode("[6+20]", "[2*3]", "[4*5]", "A:26")]  # r2 before its dependencies: never pays
    out = checklist_reward(["t"] * 4, prompts=prompts, scores=[1.0, 1.0, 0.0, 1.0], turn_info=turn_info)
    assert out == pytest.approx([1.0, 0.75, 0.5, 0.75])
    # without turn_info (TRL) the completion is cut into steps at each "]", observations and all
    transcript = "[2*3]6\n[4*5]20\n[6+20]26\nA:26"
    assert checklist_reward([transcript], prompts=prompts[:1], scores=[1.0]) == pytest.approx([1.0])
    assert checklist_reward(["[6+20][2*3][4*5]A:26"], prompts=prompts[:1], scores=[1.0]) == pytest.approx([0.75])
    assert checklist_reward(["7", "x"], prompts=["3?", "3?"], scores=[1.0, 0.0]) == [1.0, 0.0]
    assert checklist_reward(["x"], prompts=["3?"], scores=[float("nan")]) == [None]


def test_as_trl_calls_it_conversational_prompts_and_no_scores():
    """TRL: prompts as chat messages (the question is the last user message), completions as assistant messages,
    no `scores` (the answer item is judged by the exact verifier, which reads "A:26"; math-verify does not)."""
    prompt = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "2*3+4*5="}]
    chat = [[{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
             {"role": "assistant", "content": "[4*5]"}, {"role": "tool", "content": "20"},
             {"role": "assistant", "content": "[6+20]"}, {"role": "tool", "content": "26"},
             {"role": "assistant", "content": "A:26"}],
            [{"role": "assistant", "content": "[2*3]"}, {"role": "assistant", "content": "A:25"}]]
    assert checklist_reward(chat, prompts=[prompt] * 2, solution=["26"] * 2) == pytest.approx([1.0, 0.25])
    assert checklist_reward(chat, prompts=[prompt] * 2, solution=["26"] * 2, verifier="math") == \
        pytest.approx([0.75, 0.25])  # math-verify reads no "A:26": the answer item never pays
    calls = [[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "mul"}}]},
              {"role": "assistant", "content": "A:26"}]]
    with pytest.raises(ValueError, match=r"'cm2-checklist'.*structured tool_calls"):
        checklist_reward(calls, prompts=[prompt], solution=["26"])
    with pytest.raises(ValueError, match="turn_info has 1 rows for 2 completions"):
        checklist_reward(["t", "u"], prompts=["1+2="] * 2, scores=[1.0, 1.0], turn_info=[episode("A:3")])


def test_judge_noise_is_seeded_and_a_custom_judge_plugs_in():
    kw = dict(prompts=["2*3+4*5="] * 8, scores=[1.0] * 8, turn_info=[episode("[2*3]", "[4*5]", "[6+20]", "A:26")] * 8)
    clean = checklist_reward(["t"] * 8, **kw)
    noisy = checklist_reward(["t"] * 8, noise=0.3, seed=1, step=5, **kw)
    assert noisy == checklist_reward(["t"] * 8, noise=0.3, seed=1, step=5, **kw)  # same seed, step: same flips
    assert noisy != clean and noisy != checklist_reward(["t"] * 8, noise=0.3, seed=1, step=6, **kw)
    flipped = checklist_rows(["t"], noise=1.0, **{k: v[:1] for k, v in kw.items()})[0]
    exact = checklist_rows(["t"], **{k: v[:1] for k, v in kw.items()})[0]
    assert torch.equal(flipped.sat, ~exact.sat)  # noise 1 inverts every label
    never = checklist_reward(["t"], judge=lambda item, state: False, **{k: v[:1] for k, v in kw.items()})
    assert never == [0.0]
    custom = [Item("done", 1.0, kind="answer")]
    assert checklist_reward(["t"], checklist=lambda prompt: custom, **{k: v[:1] for k, v in kw.items()}) == [1.0]
