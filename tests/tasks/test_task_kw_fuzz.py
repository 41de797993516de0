"""Random `task_kw` for every registered task: each case either builds a task that samples, draws its held-out set
and steps its environment, or is refused with a ValueError naming a knob it was given; never another exception,
never a hang (each case runs under a time limit)."""
from __future__ import annotations

import random
import signal

import pytest

import workbench.registrations  # noqa: F401  (every task registered)
from workbench import registry
from workbench.envs.base import knob_kinds
from workbench.tasks import get_task

CASES = 200
SECONDS = 10  # per case; the slowest case (act's held-out set, PROBE_DRAWS examples) takes ~0.5 s here
PROBE_DRAWS = 400  # examples a held-out set is drawn from (2000 in use): every case still draws hundreds
VALUES = [-1, 0, 1, 2, 3, 7, 10**6, 10**12, 0.5, 2.5, "no", "6", "", None, True, [1]]
TYPED = {int: [-1, 0, 1, 2, 3, 5, 7, 10**6, 10**12], float: [-0.5, 0, 0.3, 0.99, 1, 2.5],  # of the knob's own type
         bool: [True, False], str: ["+", "-*", "+-*/", "no", ""]}
MISSPELT = 0.1  # the share of cases that add a key the task does not have


class CaseTimeout(BaseException):
    """A case ran past its time (a BaseException, so no `except Exception` in the code under test swallows it)."""


def fuzz_cases(n: int = CASES, seed: int = 0) -> list[tuple[str, dict]]:
    """n (task name, task_kw) cases, the tasks in turn: 1-3 of the task's knobs set to values of the knob's type
    (negative, zero, small, huge) or of any kind (text like "no", None, floats for ints, a list), sometimes with an
    unknown or misspelt key."""
    rng = random.Random(seed)
    names = [entry.key for entry in registry.entries("env")]
    cases = []
    for i in range(n):
        name = names[i % len(names)]
        kinds = knob_kinds(registry.get("env", name).fn)
        knobs = list(kinds)
        typed = {k: next(t for t in reversed(kinds[k].types) if t in TYPED) for k in knobs}  # int | None: int
        kw = {k: rng.choice(TYPED[typed[k]] if rng.random() < 0.6 else VALUES)
              for k in rng.sample(knobs, rng.randint(1, min(3, len(knobs))))}
        if rng.random() < MISSPELT:
            knob = rng.choice(knobs)
            kw[rng.choice(["foo", knob + "s", knob[:-1]])] = rng.choice(VALUES)
        cases.append((name, kw))
    return cases


def exercise(name: str, kw: dict) -> None:
    """Build the task, sample, draw the held-out set, play one expert step; a ValueError must name a knob of kw."""
    try:
        task = get_task(name, **kw)
        examples = task.sample(4, random.Random(0))
        assert len(examples) == 4 and len(task.eval_set(4)) <= 4
        env = task.make_env()
        env.reset(examples[0], 0)
        env.step(task.expert_actions(examples[0])[0])
    except ValueError as err:
        assert any(knob in str(err) for knob in kw), f"{name} {kw}: the refusal names none of the knobs: {err}"


@pytest.fixture(autouse=True)
def fewer_held_out_draws(monkeypatch):
    """A held-out set in memory is the first distinct prompts of PROBE_DRAWS draws: fewer keep the run short."""
    monkeypatch.setattr("workbench.tasks.base.PROBE_DRAWS", PROBE_DRAWS)


def on_alarm(signum, frame):
    raise CaseTimeout


@pytest.mark.parametrize("name, kw", fuzz_cases(), ids=lambda case: repr(case).replace(" ", "")[:60])
def test_random_knobs_build_and_run_or_are_refused_naming_the_knob(name, kw):
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        exercise(name, kw)
    except CaseTimeout:
        pytest.fail(f"get_task({name!r}, **{kw!r}) did not build, run or refuse within {SECONDS} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_cases_cover_every_task_and_refusals_and_builds():
    cases, knobs = fuzz_cases(), {entry.key: knob_kinds(entry.fn) for entry in registry.entries("env")}
    assert {name for name, _ in cases} == set(knobs)
    assert any(k not in knobs[name] for name, kw in cases for k in kw)  # unknown keys
    assert sum(all(isinstance(v, int) and 1 <= v <= 7 for v in kw.values()) for _, kw in cases) >= 10  # plausible ones
