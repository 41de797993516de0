"""The proposer's environment: the search tool as the solver has it, the exact RAG check (valid iff the facts the
searches returned chain the posed subject to the answer, >= 1 hop), expert proposals that pass it and pose questions
`search` answers with the same ground truth, transcripts replayed to the same verdict, both roles in one warm start."""
import random

import pytest

from workbench import registry
from workbench.envs.search import SearchEnv
from workbench.envs.search_propose import (ANSWER_KEY, ProposeEnv, ProposeTask, expert_proposal, posed, retrieved,
                                           valid_question)
from workbench.tasks import Example, get_task
from workbench.text.answers import chain, search_answer

pytestmark = pytest.mark.covers("ssp")

TASK = get_task("search-propose")
# Bov and Mip live in Kel, Kel is in Zar; Dut lives in Lon, in Zar too; Fip lives in Lon (Zar: Kel and Lon point in)
CORPUS = "Zar|Mip>Kel,Bov>Kel,Kel>Zar,Dut>Lon,Lon>Zar,Fip>Lon"
EX = Example("?>Zar", CORPUS, "Q:Mip")


def play(example, actions, task=TASK):
    env = task.make_env()
    env.reset(example, 0)
    return [env.step(a) for a in actions]


def test_registered_as_a_multiagent_task_with_searchs_knobs():
    entry = registry.get("env", "search-propose")
    assert entry.fn is ProposeTask and entry.family == "multiagent"
    assert entry.defaults == registry.get("env", "search").defaults
    assert isinstance(TASK.make_env(), ProposeEnv) and TASK.solver.name == "search"
    assert TASK.max_turns == TASK.solver.max_turns == 3 + 1 + 2
    with pytest.raises(ValueError, match="hops"):
        get_task("search-propose", hops=0)
    with pytest.raises(ValueError, match="search-propose: wrong type for k='4'"):
        get_task("search-propose", k="4")


def test_the_proposer_searches_with_the_solvers_tool():
    """Same observations, states and tool errors as a `search` episode over the corpus; the opening info carries the
    example's answer (the group transform builds the solver's question from it)."""
    env = TASK.make_env()
    _, info = env.reset(EX, 0)
    assert info[ANSWER_KEY] == CORPUS and info["state"] == frozenset()
    solver = SearchEnv(TASK.solver)
    solver.reset(Example("Bov?", CORPUS, "A:Zar"), 0)
    for action in ["[Zar]", "[Kel]", "[Nobody]", "[]"]:
        assert env.step(action) == solver.step(action)


@pytest.mark.parametrize("actions, hops", [
    (["[Zar]", "[Kel]", "Q:Mip"], 2),        # Mip>Kel, Kel>Zar: both retrieved
    (["[Kel]", "Q:Bov"], 2),                 # one search shows both hops
    (["[Zar]", "Q:Lon"], 1),                 # one hop is enough
    (["[Zar]", "[Lon]", "Q: Fip \n"], 2),    # the question is stripped
    (["[Zar]", "Q:Kel Q:Dut"], None),        # the last "Q:" counts: Dut>Lon was never retrieved
    (["[Bov]", "Q:Bov"], None),              # Bov>Kel only: the documents do not reach Zar (though the corpus does)
    (["[Zar]", "Q:Zar"], None),              # zero hops
    (["Q:Bov"], None),                       # nothing retrieved
    (["[Zar]", "Bov>Kel Kel>Zar Q:Bov"], None),  # facts the proposer wrote itself are not retrieved documents
    (["[Zar]", "[Kel]", "Q:Bov?"], None),    # not a name
    (["[Zar]", "[Kel]", "A:Bov"], None),     # no question
    (["[Kel]", "Q:Kel"], 1),                 # the question may be any entity whose chain ends at the answer
])
def test_the_rag_check_is_the_reward(actions, hops):
    steps = play(EX, actions)
    assert all(s[1:3] == (0.0, False) for s in steps[:-1])
    assert steps[-1][1:3] == (float(hops is not None), True) and steps[-1][3]["hops"] == hops


def test_the_check_reads_only_the_retrieved_documents():
    facts = search_answer(CORPUS)[1]
    docs = retrieved(facts, {"Zar", "Kel"}, 4)
    assert docs == [("Mip", "Kel"), ("Bov", "Kel"), ("Kel", "Zar"), ("Lon", "Zar")]  # each once, queries sorted
    assert retrieved(facts, {"Zar"}, 1) == [("Kel", "Zar")]  # the tool's first k only
    assert valid_question("Dut", "Zar", docs) is None and valid_question("Dut", "Zar", facts) == 2
    assert valid_question(None, "Zar", facts) is None
    assert [posed(t) for t in ["Q:Bov", "x Q:Kel ", "Q:", "Q:Bo v", "Bov", "Q:Abcdefghijklm"]] == \
        ["Bov", "Kel", None, None, None, None]


@pytest.mark.parametrize("kw", [{}, {"hops": 2, "width": 3}, {"hops": 1, "width": 1}, {"width": 6, "k": 3}])
def test_expert_proposals_are_valid_and_pose_questions_search_answers_the_same(kw):
    """The expert's question passes the RAG check, and its ground truth under `search`'s own verifier is the answer:
    `search`'s expert solves the solver's example built from the episode."""
    task = get_task("search-propose", **kw)
    seen_hops = set()
    for ex in task.sample(80, random.Random(0)) + task.eval_set(20):
        actions = task.expert_actions(ex)
        steps = play(ex, actions, task)
        assert steps[-1][1:3] == (1.0, True) and len(actions) <= task.max_turns
        hops = steps[-1][3]["hops"]
        seen_hops.add(hops)
        assert 1 <= hops <= task.hops
        transcript = "".join(a + (s[0][0]["content"] if s[0] else "") for a, s in zip(actions, steps))
        question = task.question(transcript, {ANSWER_KEY: ex.answer})
        value, facts = search_answer(ex.answer)
        assert question.prompt == f"{posed(ex.target)}?" and question.answer == ex.answer
        assert chain(facts, posed(ex.target))[-1] == value  # the true chain ends there too
        solved = play(question, task.solver.expert_actions(question), task)  # a question episode, as `search` plays
        assert solved[-1][1:3] == (1.0, True) and task.solver.score(question.target, question) == 1.0
        assert ex.prompt == f"?>{value}"  # the proposer sees the answer only
    assert task.hops in seen_hops


def test_the_expert_follows_the_first_fact_pointing_in():
    facts = search_answer(CORPUS)[1]
    assert expert_proposal(facts, "Zar", 3, 4) == (["Zar", "Kel", "Mip"], "Mip")  # Mip: nothing points in, stop
    assert expert_proposal(facts, "Zar", 1, 4) == (["Zar"], "Kel")
    assert TASK.expert_actions(EX) == ["[Zar]", "[Kel]", "[Mip]", "Q:Mip"]


def test_a_transcript_replays_to_the_environments_verdict():
    """score(transcript) is the reward the environment gives the episode it records; a transcript this corpus's tool
    did not produce scores 0."""
    rng = random.Random(1)
    for ex in TASK.sample(30, rng):
        for actions in (TASK.expert_actions(ex), TASK.expert_actions(ex)[:-2] + ["Q:" + ex.prompt[2:]],
                        ["[Bob]", f"[{ex.prompt[2:]}]", "Q:Nobody"]):
            steps = play(ex, actions)
            transcript = "".join(a + (s[0][0]["content"] if s[0] else "") for a, s in zip(actions, steps))
            assert TASK.score(transcript, ex) == steps[-1][1]
    good = "[Zar]Kel>Zar Lon>Zar\n[Kel]Mip>Kel Bov>Kel Kel>Zar\nQ:Mip"
    assert TASK.score(good, EX) == 1.0
    assert TASK.score(good.replace("Mip>Kel Bov>Kel", "Bov>Kel"), EX) == 0.0  # an observation the tool never gave
    assert TASK.score("Q:Mip", EX) == 0.0
    assert TASK.score("A:Zar", Example("Bov?", CORPUS, "A:Zar")) == 1.0  # a question: search's verifier


def test_the_warm_start_teaches_both_roles_and_training_draws_proposals_only():
    mixed = TASK.sft_sample(9, random.Random(0))
    roles = [e.prompt.startswith("?>") for e in mixed]
    assert roles == [True, False] * 4 + [True]
    for ex in mixed:
        assert play(ex, TASK.expert_actions(ex))[-1][1:3] == (1.0, True)
    held_out = {e.prompt for e in TASK.solver.eval_set()}
    assert not held_out & {e.prompt for e in mixed}
    assert all(e.prompt.startswith("?>") for e in TASK.sample(50, random.Random(2)))
    assert not {e.prompt for e in TASK.eval_set()} & {e.prompt for e in TASK.sample(300, random.Random(3))}


def test_a_mixed_warm_start_batch_encodes_both_roles_for_sft():
    """The SFT path (`expert_batch`, `sft_loss`) takes the mixed examples through the one environment: loss on the
    action tokens of proposals and of answers alike."""
    from workbench.models import build_tiny
    from workbench.train.sft import expert_batch, sft_loss

    model, tokenizer = build_tiny()
    examples = TASK.sft_sample(4, random.Random(0))
    _, _, ids, mask = expert_batch(tokenizer, TASK, examples)
    actions = ["".join(tokenizer.decode(int(t)) for t, m in zip(row, keep) if m > 0) for row, keep in zip(ids, mask)]
    assert [a.replace("<eos>", "|") for a in actions] == \
        ["".join(x if x.endswith("]") else x + "|" for x in TASK.expert_actions(e)) for e in examples]
    assert float(sft_loss(model, tokenizer, examples, TASK).detach()) > 0
