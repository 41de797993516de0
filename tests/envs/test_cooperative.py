"""Plan-act, the two-agent cooperative task: exact per-agent rewards, the observer's input holding the pioneer's answer
(CORY's card test 2), refused answers told and penalized (never a crash), the Python players, the SFT rows and the
exact evaluation's bookkeeping."""
import random

import pytest

from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.envs.base import tool, user
from workbench.envs.cooperative import OBSERVER, PIONEER, PlanActEnv, PlanActTask, hint, near_miss, verdict
from workbench.models import char_tokenizer
from workbench.rollout import Sampling
from workbench.rollout.agents import agents, expert_rows
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("cory")

TOK = char_tokenizer()
PROBLEM = Example(prompt="12+34=", answer="46", target="46")


def play(pioneer: str, observer: str, task=None):
    env = PlanActEnv(task)
    env.reset(PROBLEM, 0)
    first = env.step(pioneer)
    second = env.step(observer)
    return env, first, second


@pytest.mark.parametrize("answer, reward", [("46", 1.0), (" 46\n", 1.0), ("47", 0.0), ("046", 0.0), ("-46", 0.0),
                                            ("4a", -1.0), ("", -1.0), ("--46", -1.0), ("46?", -1.0)])
def test_each_agent_is_paid_its_own_exact_verdict(answer, reward):
    _, (_, r_pioneer, done0, _), (_, r_observer, done1, _) = play(answer, "46")
    assert r_pioneer == [reward, 0.0] and r_observer == [0.0, 1.0]  # each reward on its own agent only
    assert not done0 and done1
    _, (_, r_pioneer, _, _), (_, r_observer, _, _) = play("46", answer)
    assert r_pioneer == [1.0, 0.0] and r_observer == [0.0, reward]


def test_the_observer_sees_the_pioneers_answer_and_the_pioneer_sees_nothing_of_the_observer():
    env, (obs0, _, _, info0), (obs1, _, _, info1) = play(" 47 ", "46")
    assert obs0 == [[], [tool("47?")]]  # the pioneer's output (stripped) reaches the observer before its turn
    assert obs1 == [[], []]
    assert info0["state"] == "12+34=47?" and info1["state"] is None and env.to_move() is None


def test_a_non_integer_is_told_penalized_and_the_episode_goes_on():
    task = PlanActTask(illegal_penalty=0.5)
    env, (obs0, r0, done0, info0), (obs1, r1, done1, info1) = play("forty", "x", task)
    assert r0 == [-0.5, 0.0] and r1 == [0.0, -0.5] and not done0 and done1
    assert obs0[PIONEER][0]["content"].startswith(" illegal: 'forty' is not an integer")
    assert obs0[OBSERVER] == [tool("forty?")]  # the observer still sees what the pioneer wrote, and answers alone
    assert obs1[OBSERVER][0]["content"].startswith(" illegal:") and info1["tool_error"]
    assert info0["tool_error"] and info0["correct"] is False
    assert env.step("46") == ([[], []], [0.0, 0.0], True, {"state": None, "tool_error": "the episode is over"})
    with pytest.raises(RuntimeError, match="step before reset"):
        PlanActEnv().step("1")


def test_python_players():
    env, rng = PlanActEnv(PlanActTask()), random.Random(0)
    env.reset(PROBLEM, 0)
    assert env.play("solver", rng) == "46"
    misses = [env.play("random", rng) for _ in range(300)]
    assert all(verdict(m, "46") == (True, False) and 1 <= abs(int(m) - 46) <= 9 for m in misses)
    assert env.play("copy", rng) != "46"  # as pioneer, nothing to copy: a near miss
    env.step("41")
    assert env.play("copy", rng) == "41" and env.players["scripted"] is env.players["noisy"]
    solved = sum(env.play("noisy", rng) == "46" for _ in range(2000))  # the observer: solves, or copies "41"
    assert 900 < solved < 1100
    assert {env.play("noisy", rng) for _ in range(50)} == {"46", "41"}
    assert near_miss("3", random.Random(1)) != "3" and int(near_miss("0", random.Random(2))) > 0
    with pytest.raises(ValueError, match="no player 'minimax'"):
        env.play("minimax", rng)


def scripted_answers(pioneer: str, observer: str):
    """A scripted policy: the pioneer (its prompt ends with '=') says `pioneer`, the observer `observer`."""
    return lambda history: (observer if history.endswith("?") else pioneer) + "<eos>"


@pytest.mark.covers("agents")
def test_in_the_rollout_the_observers_prompt_holds_the_pioneers_completion():
    batch = agents(ScriptedEngine(TOK, scripted_answers("45", "46")), PlanActTask(), [PROBLEM], group_size=2,
                   sampling=Sampling(6))
    assert batch.agent.tolist() == [0, 1, 0, 1] and batch.episode.tolist() == [0, 0, 1, 1]
    assert batch.completions == ["45", "46", "45", "46"]
    assert batch.prompts == ["12+34=", "12+34=45?"] * 2  # card test 2: the pioneer's output in the observer's input
    assert batch.rewards.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert batch.mask[0].tolist()[:3] == [1, 1, 1]  # the pioneer's row is its answer and EOS, nothing observed


def test_the_warm_start_rows_are_the_experts_games():
    task = PlanActTask(expert="copy")
    rows = expert_rows(TOK, task, PROBLEM, seed=3)
    (p_ids, pioneer), (o_ids, observer) = rows
    assert TOK.decode(o_ids, skip_special_tokens=True) == "12+34=" + hint(pioneer.completion)
    assert observer.completion == pioneer.completion and verdict(pioneer.completion, "46") == (True, False)


def test_held_out_problems_are_never_trained_on_and_bad_knobs_are_refused():
    task = get_task("plan-act")
    assert task.eval_set(5) == task.eval_set()[:5] and len(task.eval_set()) == 200
    held = {e.prompt for e in task.eval_set()}
    assert not held & {e.prompt for e in task.sample(2000, random.Random(1))}
    assert get_task("plan-act", digits=1).sample(3, random.Random(0))[0].prompt.count("+") == 1
    for knobs, problem in [({"digits": 0}, "1 <= digits <= 9"), ({"expert": "oracle"}, "expert one of"),
                           ({"expert_accuracy": 1.5}, "0 <= expert_accuracy <= 1"),
                           ({"illegal_penalty": -1.0}, "illegal_penalty >= 0"),
                           ({"eval_problems": 0}, "1 <= eval_problems")]:
        with pytest.raises(ValueError, match=rf"plan-act: need {problem}"):
            PlanActTask(**knobs)
    with pytest.raises(ValueError, match="wrong type for digits"):
        PlanActTask(digits="2")


class TablePolicy:
    """A stand-in for `GamePolicy`: action_probs returns 0.1 * policy + 0.01 * context for the right answer and
    0.5 - that for the near miss, and records what it was asked."""

    def __init__(self):
        self.calls = []

    def action_probs(self, task, contexts, actions, agents):
        self.calls.append((contexts, actions, agents))
        return [[0.1 * k + 0.01 * (i % 3), 0.5 - 0.1 * k - 0.01 * (i % 3)] for i, k in enumerate(agents)]


def test_evaluation_reads_each_policy_alone_and_as_observer_after_a_right_and_a_wrong_hint():
    task, policy = PlanActTask(eval_problems=4), TablePolicy()
    accuracy, records, metrics = task.evaluate(policy)
    assert len(policy.calls) == 4 and len(records) == 8
    contexts, actions, who = policy.calls[0]
    example = task.eval_set(1)[0]
    wrong = near_miss(example.answer, random.Random(example.prompt))
    assert actions == [example.answer, wrong] and who == [0, 0, 0, 1, 1, 1]
    assert [messages for messages, _ in contexts[:3]] == [
        [user(example.prompt)], [user(example.prompt), tool(example.answer + "?")],
        [user(example.prompt), tool(wrong + "?")]]
    assert metrics == pytest.approx({"pioneer_policy0": 0.0, "pioneer_policy1": 0.1, "observer_after_right": 0.06,
                                     "observer_after_wrong": 0.07, "observer_copies_wrong": 0.43})
    assert accuracy == pytest.approx(0.05)
    assert {f"eval/{k}" for k in metrics} == {m.name for m in registry.get("env", "plan-act").logs}
