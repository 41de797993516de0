"""FAPO: the flawed-positive penalty, and the reward its step-error GenRM is trained with.

    r = +1 correct, -1 incorrect                     (the rule reward)
    r <- r - penalty  if correct and the flaw detector finds an erroneous step ("flawed positive"); penalty = 1
    GenRM reward (label j = earliest wrong step, -1 none; prediction p, T steps):
        p invalid -> -1;   j = -1: +1 iff p = -1, else -1;   j >= 0: -1 if p = -1, else 1 - |p - j| / T

The paper's detector is a generative reward model (FAPO-GenRM-4B) that reads the problem, the ground truth and
the solution split into steps and answers the index of the earliest wrong step. Toy stand-in (`detector`
parameter): `first_wrong_step`, a rule-based checker of the arithmetic steps written in the completion
("3+4=7, 7*2=14": a step whose equation is false is a flaw).

References: yyDing1/FAPO `fapo/fapo_reasoning/reward_fn.py::compute_score_fapo` and
`fapo/fapo_genrm/reward_fn.py::compute_score_fapo_genrm`; volcengine's verl-recipe `fapo/reward_fn_reasoning.py`
(`FLAWED_REWARD_PENALTY = 1.0`) and `fapo/reward_fn_genrm.py` (tests/anchors/formulas_fapo.py).
"""
from __future__ import annotations

import itertools
import re
from typing import Protocol

from workbench import registry
from workbench.rewards import base
from workbench.text.arithmetic import apply

KEY = "fapo"
# "a op b = " consumed, c only looked at (it may open the next step of a chain); bounded numbers keep it linear.
# Only whole integers: a is no step start after a letter, digit, "_", ".", ",", "^", "/" or an operator (the tail of
# "1.5", "1,000", "x2", "2^3", "6/2", "2*3"), c no whole number before a digit, "^" or a decimal / thousands part.
STEP = re.compile(r"(?<![\w.,^/+\-*])(-?\d{1,18})\s*([+\-*])\s*(-?\d{1,18})\s*=\s*"
                  r"(?=(-?\d{1,18})(?![\d^]|[.,]\d))")
MAX_STEPS = 1000        # the toy reads at most this many steps (a GenRM's context is bounded too)
GENRM_TAIL = 300        # the reference parses the GenRM's answer from its last 300 characters


class Detector(Protocol):
    """The flaw detector: the 0-based index of the earliest erroneous step of `completion`, -1 when it finds
    none, None when its own output is unusable (counted as "no flaw", as the reference does). A GenRM gets the
    problem (`prompt`) and the ground truth (`answer`) too."""

    def __call__(self, completion: str, *, prompt: str | None = None, answer: str | None = None) -> int | None: ...


# ----------------------------------------------------------------------------- the toy detector

def arithmetic_steps(text: str, *, limit=MAX_STEPS) -> list[tuple[int, str, int, int]]:
    """The first `limit` single operations "a op b = c" written in `text` (op in + - *, integers of up to 18
    digits, spaces allowed), in order; a chain "3+4=7*2=14" is two steps (the result opens the next one). An
    operand right after another operator is no step start ("2*3+4=10" is no step "3+4=10"), and neither is part of
    a decimal, a thousands-separated number, a name or a power ("1.5+2=3.5", "1,000+1=1001", "a2+2=4", "2^3+1=9"
    hold no step: the toy checks integer arithmetic only)."""
    steps = []
    for match in itertools.islice(STEP.finditer(text), limit):
        a, op, b, c = match.groups()
        steps.append((int(a), op, int(b), int(c)))
    return steps


def first_wrong_step(completion: str, **_) -> int:
    """The toy detector: index of the earliest false step among `arithmetic_steps`, -1 if none is false (or there
    are none)."""
    for index, (a, op, b, c) in enumerate(arithmetic_steps(completion)):
        if apply(a, op, b) != c:
            return index
    return -1


# ----------------------------------------------------------------------------- the policy's reward

def fapo_score(correct: bool, flaw: int | None, *, penalty=1.0) -> float:
    """+1 / -1 by correctness; a correct answer with a flagged step (flaw not in {-1, None}) loses `penalty`."""
    if not correct:
        return -1.0
    return 1.0 - penalty if flaw is not None and flaw != -1 else 1.0


FAPO_LOGS = {
    "rewards/fapo/flawed_frac": ("FAPO: share of flawed positives (correct answers whose steps the detector flags) "
                                 "among the correct rows.",
                                 "Falling as training shifts from shortcut answers to reliable steps (the paper's "
                                 "dynamics). Rising: the policy reaches right answers through wrong steps."),
}


@registry.reward(
    KEY, title="FAPO: Flawed-Aware Policy Optimization for Efficient and Reliable Reasoning",
    summary="Rule reward +1/-1, and a correct answer whose reasoning a step-error detector flags (a flawed "
            "positive) gets 0. Toy stand-in for the GenRM: a checker of the arithmetic steps in the completion.",
    equation=r"r = \begin{cases} -1 & \text{incorrect} \\ 0 & \text{correct},\ \mathrm{GenRM}(x, y) \ne -1 \\ "
             r"+1 & \text{correct},\ \mathrm{GenRM}(x, y) = -1 \end{cases}", logs=FAPO_LOGS,
    choices={"verifier": base.CORRECTNESS_VERIFIERS})
def fapo(completions, *, detector=None, penalty=1.0, verifier="auto", **columns) -> list[float | None]:
    """FAPO's reward per row; None when correctness is unknown (no `scores` and the gold does not parse).

    Reads `scores` or `answer` (correctness, `base.correctness`) and passes `prompts` / `answer` to the detector
    when present. Incorrect answers never reach the detector (the reference returns before calling the GenRM).
    verifier: how correctness is judged without `scores` (TRL): "auto" the dependency-free exact verifier (reads
    the toy's "A:26"), "math" math-verify. detector: a `Detector`, default `first_wrong_step` (toy stand-in for
    FAPO-GenRM; a served GenRM's answer text becomes a step index with `flaw_index`). penalty = 1.0 (verl-recipe
    `FLAWED_REWARD_PENALTY`; the paper's r <- 0) keeps r in {-1, 0, +1}. The task reward is inside r: the recipe
    sets task_reward = 0. Logs `flawed_frac`: the share of flawed positives among the correct rows.
    """
    if penalty < 0:
        raise ValueError(f"{KEY}: penalty must be >= 0 (a flawed positive earns 1 - penalty), got {penalty}")
    detect = detector or first_wrong_step
    correct = base.correctness(completions, reward=KEY, verifier=verifier, **columns)
    prompts, answers = columns.get("prompts"), base.column(columns, "answer", "solution")
    out, n_correct, n_flawed = [], 0, 0
    for i, (text, ok) in enumerate(zip(base.texts(completions), correct, strict=True)):
        flaw = None
        if ok:
            flaw = detect(text, prompt=prompts[i] if prompts else None, answer=answers[i] if answers else None)
            n_correct, n_flawed = n_correct + 1, n_flawed + (flaw is not None and flaw != -1)
        out.append(None if ok is None else fapo_score(ok, flaw, penalty=penalty))
    if n_correct:
        base.log(columns, "flawed_frac", n_flawed / n_correct)
    return out


# ----------------------------------------------------------------------------- the GenRM's reward

def last_boxed(text: str) -> str | None:
    r"""Content of the last "\boxed{...}" (balanced braces), None if there is none (verl `last_boxed_only_string`
    + `remove_boxed`)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == "{"
        depth -= text[i] == "}"
        if text[i] == "}" and depth == 0:
            return text[start + len("\\boxed{"):i]
    return None


def flaw_index(response: str) -> int | None:
    """The step index a GenRM answers: int of the content of its last \\boxed{}, None without a box or an int in
    it; no range check (verl-recipe's policy path, `int(remove_boxed(last_boxed_only_string(grm_response)))`). The
    detector a served GenRM gives `fapo`: `lambda completion, **kw: flaw_index(genrm(completion, **kw))`."""
    try:
        return int(last_boxed(response))
    except (TypeError, ValueError):
        return None


def parse_step_index(text: str, total_steps: int) -> int | None:
    """The GenRM's predicted step when it is trained: `flaw_index` of its last 300 characters if it is -1 or in
    [0, total_steps), else None (invalid)."""
    index = flaw_index(text[-GENRM_TAIL:])
    return index if index is not None and (index == -1 or 0 <= index < total_steps) else None


def genrm_score(pred: int | None, label: int, total_steps: int) -> float:
    """The GenRM's RL reward: 1 only for the exact step, linear in |pred - label| / T, -1 for a missed error, a
    false alarm or an invalid answer."""
    if pred is None:
        return -1.0
    if label == -1:
        return 1.0 if pred == -1 else -1.0
    return -1.0 if pred == -1 else 1.0 - abs(pred - label) / total_steps


def fapo_genrm(completions, **columns) -> list[float]:
    """The GenRM's reward in TRL's signature (not a catalog key, so not registered): per row `genrm_score` of
    its parsed prediction. Reads the label (earliest wrong step, -1 none) from `ground_truth` (the reference's
    name; not `answer` / `solution`, which hold the policy's gold answers in our pipeline), and the solution's step
    count from `num_steps` or `extra_info["total_steps"]` (the reference's name; our columns use `total_steps` for
    the run's length)."""
    labels = base.column(columns, "ground_truth", required="fapo_genrm")
    steps = columns.get("num_steps")
    if steps is None:
        extra = base.column(columns, "extra_info", required="fapo_genrm")
        steps = [e["total_steps"] for e in extra]
    out = []
    for i, (text, label, n) in enumerate(zip(base.texts(completions), labels, steps, strict=True)):
        if int(n) < 1:
            raise ValueError(f"fapo_genrm: num_steps must be >= 1, got {n} in row {i}")
        if not -1 <= int(label) < int(n):
            raise ValueError(f"fapo_genrm: a ground_truth label is the earliest wrong step in [0, num_steps) or -1 "
                             f"(no error); row {i} has {label!r} with num_steps = {n}")
        out.append(genrm_score(parse_step_index(text, int(n)), int(label), int(n)))
    return out
