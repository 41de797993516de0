"""AdaSearch: the search-or-not decision reward, its oracle, the decision as the family's tool-call detector reads it,
and F1_aware."""
import itertools
import random
from types import SimpleNamespace

import pytest

from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.models import char_tokenizer
from workbench.rewards.adasearch import adasearch_reward, f1_aware, group_oracle
from workbench.rewards.stage import reward_columns
from workbench.rollout import Sampling, turns
from workbench.tasks import get_task
from workbench.text.answers import search_answer

pytestmark = pytest.mark.covers("adasearch")

SEARCHED = [{"action": "[Bov]"}, {"action": "A:Zar"}]   # an episode that searched, then answered
DIRECT = [{"action": "A:Zar"}]                           # one that answered from memory


def logged():
    out = {}
    return out, lambda name, value: out.__setitem__(name, value)


def test_registered_as_a_reward_with_catalog_metadata():
    entry = registry.get("reward", "adasearch")
    assert entry.defaults == {"oracle": None} and entry.confidence == "abstract-only"
    assert entry.family == "rewards" and entry.equation and entry.fn.__doc__


@pytest.mark.parametrize("searched, solvable, correct", itertools.product([False, True], repeat=3))
def test_decision_term_is_one_iff_the_decision_matches_the_oracle(searched, solvable, correct):
    """Catalog test (1): r - EM = 1[decision = oracle], decision = 'no search', oracle = solvable parametrically."""
    r = adasearch_reward(["A:Zar"], turn_info=[SEARCHED if searched else DIRECT], scores=[float(correct)],
                         parametric_correct=[solvable])
    assert r == [float((not searched) == solvable) + float(correct)]


def test_f1_aware_known_values():
    """Catalog tests (2), (3): a perfect decider has F1_aware 1; always searching has 0 on the positive class."""
    solvable = [True, True, False, True, False]
    assert f1_aware(solvable, solvable) == 1.0
    assert f1_aware([False] * 5, solvable) == 0.0                     # TP = 0, FN = 3
    assert f1_aware([True] * 5, solvable) == pytest.approx(2 * 3 / (2 * 3 + 2))  # never searching: FP = 2
    assert f1_aware([True, False, True, True, False], solvable) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert f1_aware([False, False], [False, False]) == 1.0            # nothing to find, nothing wrongly claimed
    with pytest.raises(ValueError, match="decisions"):
        f1_aware([True], [True, False])


def test_logged_f1_aware_and_decision_accuracy_are_those_of_the_batch():
    metrics, log = logged()
    turn_info = [DIRECT, SEARCHED, DIRECT, SEARCHED]
    labels = [True, True, False, False]
    adasearch_reward(["x"] * 4, turn_info=turn_info, scores=[1.0, 1.0, 0.0, 1.0], parametric_correct=labels,
                     log_metric=log)
    assert metrics["search_rate"] == 0.5
    assert metrics["decision_acc"] == 0.5                              # rows 0 and 3 decided right
    assert metrics["f1_aware"] == f1_aware([True, False, True, False], labels) == pytest.approx(0.5)


def test_the_decision_is_a_search_in_our_episodes_in_search_r1_tags_and_in_trl_messages():
    """`tools.calls` decides 'searched': the episode's actions, Search-R1 tags, TRL's structured tool_calls."""
    conversational = [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "search"}}]},
                      {"role": "tool", "content": "Bov>Kel"}, {"role": "assistant", "content": "A:Kel"}]
    completions = ["A:Zar", "<search>Bov</search> A:Zar", "<search>unclosed A:Zar", conversational]
    metrics, log = logged()
    out = adasearch_reward(completions, scores=[1.0] * 4, parametric_correct=[True] * 4, log_metric=log)
    assert out == [2.0, 1.0, 2.0, 1.0] and metrics["search_rate"] == 0.5
    rejected = [{"action": "[Bov Kel]", "tool_error": "malformed search: [name]"}, {"action": "A:Zar"}]
    assert adasearch_reward(["x"] * 3, turn_info=[SEARCHED, DIRECT, rejected], scores=[1.0] * 3,
                            parametric_correct=[False] * 3) == [2.0, 1.0, 1.0]  # a rejected call searched nothing


def test_group_oracle_is_the_parametric_mode_seen_in_the_group():
    keys = ["p", "p", "p", "q", "q", "r"]
    searched = [False, False, True, False, True, True]
    correct = [False, True, True, False, True, True]
    # p: a no-search row was right; q: the no-search row was wrong; r: every row searched (unknown)
    assert group_oracle(keys, searched, correct) == [True, True, True, False, False, None]
    assert group_oracle(["p", "p"], [False, False], [None, False]) == [False, False]


def test_the_oracle_comes_from_a_callable_a_column_or_the_group():
    prompts = ["easy?", "easy?", "hard?", "hard?"]
    turn_info = [DIRECT, SEARCHED, DIRECT, SEARCHED]
    scores = [1.0, 1.0, 0.0, 1.0]
    by_group = adasearch_reward(["x"] * 4, prompts=prompts, turn_info=turn_info, scores=scores)
    assert by_group == [2.0, 1.0, 0.0, 2.0]  # easy: skipping search was right; hard: searching was
    known = {"easy?": True, "hard?": False}
    assert adasearch_reward(["x"] * 4, prompts=prompts, turn_info=turn_info, scores=scores,
                            oracle=lambda p, a: known[p]) == by_group
    # the column beats the group: all four claimed solvable -> the searching rows decided wrong
    assert adasearch_reward(["x"] * 4, prompts=prompts, turn_info=turn_info, scores=scores,
                            parametric_correct=[1.0, 1.0, 0.5, 0.5]) == [2.0, 1.0, 1.0, 1.0]
    assert adasearch_reward(["x"], turn_info=[SEARCHED], scores=[0.0], parametric_correct=[0.4]) == [1.0]
    # every row of the prompt searched: oracle unknown, decision term 0
    assert adasearch_reward(["x", "x"], prompts=["a", "a"], turn_info=[SEARCHED, SEARCHED],
                            scores=[1.0, 0.0]) == [1.0, 0.0]


def test_unknown_correctness_is_none_and_bad_oracles_are_clear_errors():
    assert adasearch_reward(["x", "y"], turn_info=[DIRECT, DIRECT], scores=[None, 1.0],
                            parametric_correct=[True, True]) == [None, 2.0]
    with pytest.raises(ValueError, match="parametric_correct.*row 1"):
        adasearch_reward(["x", "y"], scores=[1.0, 1.0], parametric_correct=[True, 1.5])
    with pytest.raises(ValueError, match="parametric_correct.*row 0 is 'yes'"):
        adasearch_reward(["x"], scores=[1.0], parametric_correct=["yes"])
    with pytest.raises(ValueError, match="oracle must be None or a callable"):
        adasearch_reward(["x"], scores=[1.0], oracle="yes")
    with pytest.raises(ValueError, match="'adasearch' needs a 'answer' or 'solution' column"):
        adasearch_reward(["x"])


def test_without_scores_the_answer_term_is_exact_match_of_the_answer_span():
    """TRL on QA data passes no `scores`: EM of the final answer span against `solution` (math-verify would give
    None for the text gold "Zar" and False for "A:46")."""
    completions = ["A:Zar", "the answer is zar.", "A:Kel", "A:46", "<search>Bov</search> A:46"]
    out = adasearch_reward(completions, solution=["Zar", "Zar", "Zar", "46", "46"],
                           parametric_correct=[True] * 5)
    assert out == [2.0, 2.0, 1.0, 2.0, 1.0]


def test_robust_to_empty_surrogate_and_huge_completions():
    texts = ["", "caf\udce9", "[" + "x" * 1_000_000 + "]", "<search>" * 300_000]
    out = adasearch_reward(texts, scores=[0.0, 1.0, 0.0, 1.0])
    # no prompts: each row its own question. The unclosed tags are no search: rows 1 and 3 answered right without
    # searching (2.0), row 0 wrong without (0.0); row 2 searched, so its oracle is unknown and it was wrong (0.0)
    assert out == [0.0, 2.0, 0.0, 2.0]


def test_on_the_search_environment_searching_is_rewarded_and_the_answer_counted():
    """Episodes of the search task through `turns` and the pipeline's reward columns: expert rows search and
    answer right (1 + 1), direct guesses neither search nor answer right, and the group oracle says 'needs
    search' (a guess was wrong), so searching is the right decision."""
    task = get_task("search", hops=1)
    examples = task.sample(2, random.Random(0))
    plans = {e.prompt: iter([True, True, False, False]) for e in examples}

    def policy(history):
        example = next(e for e in examples if e.prompt in history)
        expert = task.expert_actions(example)  # ["[Bov]", "A:Kel"]
        if "]" in history:
            return expert[-1] + "<eos>"
        return expert[0] if next(plans[example.prompt]) else "A:Nope<eos>"

    engine = ScriptedEngine(char_tokenizer(), policy)
    batch = turns(engine, task, examples, group_size=4, sampling=Sampling(max_new_tokens=12))
    batch.scores = batch.rewards.clone()
    ctx = SimpleNamespace(max_new_tokens=12, step=0, total_steps=1)
    columns = reward_columns(batch, examples, ctx)
    metrics, log = logged()
    out = adasearch_reward(**columns, log_metric=log)
    searched = [len(steps) > 1 for steps in batch.turn_info]
    assert searched == [True, True, False, False] * 2
    assert batch.scores.tolist() == [1.0, 1.0, 0.0, 0.0] * 2
    assert out == [2.0, 2.0, 0.0, 0.0] * 2
    assert metrics == {"search_rate": 0.5, "decision_acc": 0.5, "f1_aware": 0.0}
    assert search_answer(examples[0].answer)[0] in batch.completions[0]
