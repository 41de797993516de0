"""The search environment: per-example corpora, multi-hop expert episodes, exact verifier."""
import random

import pytest

from workbench import registry
from workbench.envs.search import SearchEnv, search
from workbench.tasks import Example, get_task
from workbench.text.answers import chain, search_answer

pytestmark = pytest.mark.covers("search")

TASK = get_task("search")
# Bov lives in Kel (with Mip), Kel is in Zar; Dut lives in Lon, in Zar too
EX = Example("Bov?", "Zar|Mip>Kel,Bov>Kel,Kel>Zar,Dut>Lon,Lon>Zar", "A:Zar")


def play(env, example, actions):
    env.reset(example, 0)
    return [env.step(a) for a in actions]


def test_registered_as_task_and_env():
    assert registry.get("env", "search").fn is type(TASK) and isinstance(TASK.make_env(), SearchEnv)
    assert registry.get("env", "search").defaults == {"hops": 3, "width": 4, "name_len": 3, "k": 4, "slack": 2}
    with pytest.raises(ValueError, match="hops"):
        get_task("search", hops=0)


def test_search_returns_every_fact_naming_the_query_and_the_answer_needs_two_hops():
    _, facts = search_answer(EX.answer)
    assert search(facts, "Kel", 4) == ["Mip>Kel", "Bov>Kel", "Kel>Zar"] and search(facts, "Kel", 1) == ["Mip>Kel"]
    assert chain(facts, "Bov") == ["Bov", "Kel", "Zar"]
    steps = play(SearchEnv(TASK), EX, ["[Bov]", "[Kel]", "[Nobody]", "[]", "A:Zar"])
    assert [s[0][0]["content"] for s in steps[:3]] == ["Bov>Kel\n", "Mip>Kel Bov>Kel Kel>Zar\n", "none\n"]
    assert steps[3][3]["tool_error"] and steps[2][3]["tool_error"] is None
    assert [s[3]["state"] for s in steps[:2]] == [frozenset({"Bov"}), frozenset({"Bov", "Kel"})]
    assert steps[-1][1:3] == (1.0, True)
    for wrong in ["A:Kel", "A:zar", "Zar", "[Zar"]:
        assert play(SearchEnv(TASK), EX, [wrong])[0][1:3] == (0.0, True), wrong


@pytest.mark.parametrize("kw", [{}, {"hops": 2, "width": 3}, {"hops": 1, "width": 1}, {"width": 6, "k": 3}])
def test_expert_episodes_solve_every_example_with_one_search_per_hop(kw):
    task = get_task("search", **kw)
    for ex in task.sample(100, random.Random(0)) + task.eval_set(50):
        actions = task.expert_actions(ex)
        assert len(actions) == task.hops + 1 <= task.max_turns
        steps = play(task.make_env(), ex, actions)
        assert steps[-1][1:3] == (1.0, True) and not any(s[2] for s in steps[:-1])
        # every hop's fact is in the observation of its search: the answer is findable, not only the expert's
        for (a, b), step in zip(zip(actions, actions[1:]), steps):
            assert f"{a[1:-1]}>{b[1:-1] if b.startswith('[') else b[2:]}" in step[0][0]["content"]
        # the answer is not in the prompt: it takes the searches to find it
        assert search_answer(ex.answer)[0] not in ex.prompt and task.score(ex.target, ex) == 1.0


def test_corpora_differ_per_example_and_the_held_out_set_is_fixed():
    examples = TASK.sample(50, random.Random(0))
    assert len({e.answer for e in examples}) == 50
    assert [e.prompt for e in get_task("search").eval_set()] == [e.prompt for e in TASK.eval_set()]
    held_out = {e.prompt for e in TASK.eval_set()}
    assert not held_out & {e.prompt for e in TASK.sample(300, random.Random(1))}


def test_name_count_is_what_random_name_makes():
    from workbench.envs.search import name_count, random_name

    rng = random.Random(0)
    assert name_count(2) == 85 and name_count(3) == 1445
    assert len({random_name(rng, 2) for _ in range(5000)}) == 85


@pytest.mark.parametrize("kw, message", [
    ({"width": 400}, r"search: width=400 with hops=3 needs 1600 distinct names \(400 per level, 4 levels\), but at "
                     r"most 1000 fit an example and name_len=3 makes 1445 distinct names .*; at most width=180 with "
                     r"hops=3, name_len=3"),
    ({"name_len": 2, "width": 30}, r"search: width=30 with hops=3 needs 120 distinct names .* name_len=2 makes 85 "
                                   r"distinct names .*; at most width=10 with hops=3, name_len=2, or raise name_len "
                                   r"\(name_len=3 makes 1445\)"),
    ({"name_len": 13}, r"search: need 2 <= name_len <= 12 \(the tool refuses longer queries\), got name_len=13"),
    ({"k": 1, "hops": 6}, r"search: k=1 with hops=6, width=4: only 0 of 500 random corpora show every hop's fact "
                          r"within k results .*; use k >= 2"),
    ({"hops": 21}, r"search: need 1 <= hops <= 20"),
])
def test_knobs_no_example_can_be_drawn_for_are_refused_before_generation(kw, message):
    """width=400 (or name_len=2 with width=30) asks for more distinct names than exist: the name draw looped
    forever. Refused in the constructor, with the widest width that works."""
    with pytest.raises(ValueError, match=message):
        get_task("search", **kw)


@pytest.mark.parametrize("kw", [{"width": 180}, {"name_len": 2, "width": 10}, {"k": 2, "hops": 6}])
def test_the_limits_a_refusal_names_are_accepted_and_draw(kw):
    task = get_task("search", **kw)
    ex = task.make_example(random.Random(0))
    facts = search_answer(ex.answer)[1]
    assert len(facts) == len({s for s, _ in facts}) == task.hops * task.width  # distinct names, one fact each
    env = task.make_env()
    env.reset(ex, 0)
    for action in task.expert_actions(ex)[:-1]:
        assert env.step(action)[3]["tool_error"] is None
    assert env.step(ex.target)[1] == 1.0
