"""Plan, then act: a two-agent cooperative arithmetic task (CORY's pioneer and observer, MARFT's planner and actor).

The pioneer (agent 0) sees the problem and answers first; the observer (agent 1) sees the problem and the pioneer's
answer, then answers. Each answer is checked exactly:

    pioneer    prompt "12+34="        action "46"
    observer   prompt "12+34=46?"     action "46"        (the problem, then the pioneer's answer, stripped, and "?")

    r(x, y) = 1                 y (stripped) is the sum's decimal text ("046" is not)
              0                 y is another integer
              -illegal_penalty  y is not an integer at all ("4a", "", "--3"): its author is told " illegal: ..."

Each agent's reward is its own r, on its own action (the environment's rewards per agent, as MARFT's setting wants
them). CORY's collective reward R = r(x, y_P) + r(x, y_O), paid to both, is the trainer's: the reward shaping
`cory` (workbench/rewards/cory.py) sums an episode's rows, so this environment stays a plain two-agent task.

Bad input never crashes an episode: an answer that is not an integer is refused with an observation to its author
and the penalty (default 1, so "not a number" is worse than a wrong number); the episode goes on (the observer of an
illegal pioneer answer sees that text and answers on its own). The pioneer sees nothing of the observer's answer: its
row is its one answer, exactly a one-agent task's row on the same prompt (CORY's "either agent can be deployed
alone": the pioneer's prompt is the plain problem).

Python players: "solver" (the sum), "random" (a near miss: the sum plus a nonzero offset in [-9, 9], never negative:
always wrong, always an integer), "copy" (the observer repeats the pioneer's answer; as pioneer, with nothing to copy,
it plays "random"), "noisy" (the SFT expert: the sum with probability `expert_accuracy` (0.5), else the pioneer
plays a near miss and the observer copies the pioneer, so the warm start leaves both roles something to learn:
solving, and reading the hint without trusting a wrong one); "scripted" is "noisy" (the name the rollout's
fixed-opponent recipes ask for).

Evaluation is exact, read off the model (`GamePolicy.action_probs`, one call per held-out problem): the probability
that a sampled answer (temperature 1) is exactly the sum's text followed by EOS, for each of the two policies (the
two LoRA adapters of separate policies; one shared policy reads the same twice) deployed alone as the pioneer, and as
the observer after a correct hint ("46?") and after a near miss ("47?"), with the probability that it repeats the
near miss. accuracy = the pioneers' mean: how well either agent does deployed alone. (Exact text only: an answer
with surrounding spaces also scores 1 in training, so the numbers are lower bounds of the sampled accuracy.)

Decisions (the issue's "one plans, one acts" in its smallest form, for the character-level tiny model, context 256):
addition of two `digits`-digit numbers (the `addition` task's problems, so the pioneer alone is that task); the hint
is written as the answer and "?" (short: the observer's prompt is under 20 characters at the defaults); problems of
the held-out set (the first distinct prompts of a seeded draw, as one-agent tasks) are never trained on.
"""
from __future__ import annotations

import random
import re

from workbench import registry
from workbench.envs.base import check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.envs.multiagent import GameTask, MultiAgentEnv
from workbench.tasks.base import Example, Task, generated_eval_set

PIONEER, OBSERVER = 0, 1  # agent ids
INTEGER = re.compile(r"-?\d+")
MAX_DIGITS = 9  # a+b= with 9-digit terms is a 20-character prompt, the longest the tasks' checks allow


def hint(answer: str) -> str:
    """What the observer sees of the pioneer's answer (before its own turn)."""
    return f"{answer.strip()}?"


def verdict(action: str, answer: str) -> tuple[bool, bool]:
    """(legal, correct) of an answer: an integer, and exactly the sum's text once stripped."""
    text = action.strip()
    return INTEGER.fullmatch(text) is not None, text == answer


def near_miss(answer: str, rng: random.Random) -> str:
    """A wrong integer close to the answer: answer + d, d in [-9, 9] \\ {0}, reflected to stay >= 0."""
    value = int(answer)
    offset = rng.choice([d for d in range(-9, 10) if d])
    return str(value + offset if value + offset >= 0 else value - offset)


def mean_of(records: list[dict], key: str) -> float:
    return sum(r[key] for r in records) / len(records)


def solver(env: "PlanActEnv", rng: random.Random) -> str:
    return env.answer


def random_player(env: "PlanActEnv", rng: random.Random) -> str:
    return near_miss(env.answer, rng)


def copy_player(env: "PlanActEnv", rng: random.Random) -> str:
    return env.answers[PIONEER].strip() if env.to_move() == OBSERVER else near_miss(env.answer, rng)


def noisy_player(env: "PlanActEnv", rng: random.Random) -> str:
    if rng.random() < env.expert_accuracy:
        return env.answer
    return copy_player(env, rng)  # the pioneer: a near miss; the observer: the pioneer's answer


class PlanActEnv(MultiAgentEnv):
    agents = ("pioneer", "observer")
    stop = ()         # an answer ends at EOS
    max_turns = 1     # each agent answers once
    players = {"solver": solver, "random": random_player, "copy": copy_player, "noisy": noisy_player,
               "scripted": noisy_player}

    def __init__(self, task=None):
        self.task, self.example, self.answers = task, None, []
        self.penalty = task.illegal_penalty if task is not None else 1.0
        self.expert_accuracy = task.expert_accuracy if task is not None else 0.5

    @property
    def answer(self) -> str:
        return self.example.answer

    def reset(self, example: Example, seed: int | None = None):
        self.example, self.answers = example, []
        return [[user(example.prompt)], [user(example.prompt)]], {"state": example.prompt}

    def to_move(self) -> int | None:
        return len(self.answers) if self.example is not None and len(self.answers) < 2 else None

    def state(self) -> str | None:
        """The next mover's view: the problem, then (the observer's) the hint; None at the end."""
        mover = self.to_move()
        if mover is None:
            return None
        return self.example.prompt + (hint(self.answers[PIONEER]) if mover == OBSERVER else "")

    def step(self, action: str):
        if self.example is None:
            raise RuntimeError("step before reset")
        mover = self.to_move()
        if mover is None:
            return [[], []], [0.0, 0.0], True, {"state": None, "tool_error": "the episode is over"}
        legal, correct = verdict(action, self.answer)
        self.answers.append(action)
        error = None if legal else f"{action.strip()[:12]!r} is not an integer"
        observations, rewards = [[], []], [0.0, 0.0]
        rewards[mover] = 1.0 if correct else 0.0 if legal else -self.penalty
        if error:
            observations[mover].append(tool(f" illegal: {error}"))
        if mover == PIONEER:
            observations[OBSERVER].append(tool(hint(action)))  # the observer's input holds the pioneer's output
        return observations, rewards, mover == OBSERVER, {"state": self.state(), "tool_error": error,
                                                          "mover": mover, "correct": correct}


PLAN_ACT_LOGS = {
    "eval/pioneer_policy0": ("Probability that policy 0, deployed alone as the pioneer, samples the exact sum "
                             "(held-out problems; only on evaluation steps).",
                             "Rises from the warm start's level (about expert_accuracy); falling while the observer "
                             "metrics rise: the pair leans on the observer."),
    "eval/pioneer_policy1": ("Probability that policy 1 (the second LoRA adapter; the same policy when it is shared), "
                             "deployed alone as the pioneer, samples the exact sum.",
                             "With role swaps it tracks eval/pioneer_policy0 (either agent can be deployed alone); "
                             "without, it stays at the warm start's level or drifts."),
    "eval/observer_after_right": ("Probability that an observer (mean of the two policies) answers the exact sum "
                                  "after a correct hint.",
                                  "Near 1 once the observer reads the hint; falling: it ignores its partner."),
    "eval/observer_after_wrong": ("Probability that an observer (mean of the two policies) answers the exact sum "
                                  "after a near-miss hint.",
                                  "Rises as the observer solves for itself; at most the pioneer's own accuracy is "
                                  "expected early on."),
    "eval/observer_copies_wrong": ("Probability that an observer (mean of the two policies) repeats a near-miss hint.",
                                   "About half the wrong-hint mass after the warm start (the expert copies); falling: "
                                   "the observer stops trusting wrong hints."),
}


@registry.env(
    "plan-act", title="Plan then act: two agents answer one arithmetic problem in turn", family="multiagent",
    summary="A pioneer answers 'a+b='; an observer sees the problem and the pioneer's answer, then answers; each "
            "answer scores 1 iff exact (a non-integer is refused with a penalty). Evaluated exactly: each policy's "
            "probability of the exact sum alone and as the observer after a right or a wrong hint.",
    logs=PLAN_ACT_LOGS)
class PlanActTask(GameTask):
    """Examples are addition problems of two `digits`-digit numbers (prompt "12+34=", answer "46").

    Knobs (`task_kw`): digits (2); expert, the Python player whose games warm-start the policy ("noisy"); its
    expert_accuracy (0.5); illegal_penalty, what a non-integer answer costs (1); eval_problems, the held-out problems
    evaluation reads (32)."""

    name = "plan-act"
    accuracy_is = "probability of the exact sum from either policy deployed alone as the pioneer (mean of the two)"

    def __init__(self, *, digits: int = 2, expert: str = "noisy", expert_accuracy: float = 0.5,
                 illegal_penalty: float = 1.0, eval_problems: int = 32):
        check_knob_types("plan-act", locals(), knob_kinds(PlanActTask))
        check_knob_rules("plan-act", [
            (not 1 <= digits <= MAX_DIGITS, f"1 <= digits <= {MAX_DIGITS}, got digits={digits}"),
            (expert not in PlanActEnv.players, f"expert one of {sorted(PlanActEnv.players)}, got {expert!r}"),
            (not 0 <= expert_accuracy <= 1, f"0 <= expert_accuracy <= 1, got expert_accuracy={expert_accuracy}"),
            (not 0 <= illegal_penalty < float("inf"), f"illegal_penalty >= 0, got {illegal_penalty}"),
            (not 1 <= eval_problems <= 10_000, f"1 <= eval_problems <= 10000, got eval_problems={eval_problems}")])
        self.digits, self.expert, self.expert_accuracy = digits, expert, float(expert_accuracy)
        self.illegal_penalty, self.eval_problems = float(illegal_penalty), eval_problems

    def make_example(self, rng: random.Random) -> Example:
        high = 10 ** self.digits
        a, b = rng.randrange(high), rng.randrange(high)
        return Example(prompt=f"{a}+{b}=", answer=str(a + b), target=str(a + b))

    def make_env(self) -> PlanActEnv:
        return PlanActEnv(self)

    def eval_set(self, n: int | None = None) -> list[Example]:
        """Held-out problems (a one-agent task's: the first distinct prompts of a seeded draw)."""
        return generated_eval_set(self, n)

    def held_out_prompts(self) -> set[str]:
        return Task.held_out_prompts(self)  # unlike a game's deals, problems are held out of training

    def contexts(self, example: Example, wrong: str) -> list:
        """(prompt messages, []) of the pioneer, the observer after the right hint, after the near miss."""
        opening = [user(example.prompt)]
        return [(opening, []), (opening + [tool(hint(example.answer))], []), (opening + [tool(hint(wrong))], [])]

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        """(accuracy = mean over the two policies of P(exact sum) as the pioneer alone, one record per problem and
        policy, the `PLAN_ACT_LOGS` metrics); the near miss of each problem is seeded by its prompt."""
        records = []
        for example in self.eval_set(self.eval_problems):
            wrong = near_miss(example.answer, random.Random(example.prompt))
            probs = policy.action_probs(self, self.contexts(example, wrong) * 2, [example.answer, wrong],
                                        [0, 0, 0, 1, 1, 1])  # [6][2]: (policy, context) x (right, wrong)
            for k in (0, 1):
                alone, after_right, after_wrong = probs[3 * k:3 * k + 3]
                records.append({"prompt": example.prompt, "answer": example.answer, "near_miss": wrong, "policy": k,
                                "pioneer": alone[0], "after_right": after_right[0], "after_wrong": after_wrong[0],
                                "copies_wrong": after_wrong[1]})
        metrics = {f"pioneer_policy{k}": mean_of([r for r in records if r["policy"] == k], "pioneer") for k in (0, 1)}
        metrics.update({f"observer_{key}": mean_of(records, key) for key in ("after_right", "after_wrong",
                                                                             "copies_wrong")})
        return (metrics["pioneer_policy0"] + metrics["pioneer_policy1"]) / 2, records, metrics
