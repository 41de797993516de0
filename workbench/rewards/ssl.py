"""SSL's sweet-spot tiered rewards: a continuous quality signal cut into K zones, better zones paying more.

    distance (Gaussian tiers):  r = v_k for the first k with d <= e_k sigma, 0 beyond e_K sigma
                                e = (0, 0.5, 1, 2), v = (1, 0.6, 0.3, 0.1)          (K = 4: exact, then 3 rings)
    progress (quantile tiers):  r = floor(K p) / K                                   (K = 4: quartiles)
    K = 1 is the binary reward: 1 iff d = 0 (exact), or iff p = 1 (done).

Our reading (the paper is abstract-only, no code; the catalog's "decide values"): the sweet spot is the exact
answer (d = 0) and the full progress (p = 1); zone edges at 0.5, 1 and 2 sigma around it and rewards 1, 0.6, 0.3,
0.1 (the catalog's values); the K used are the first K tiers. Progress departs from the catalog's list on purpose:
the catalog pays the quartiles {0.25, 0.5, 0.75, 1} (four levels, the lowest quartile earning 0.25); ours has the
K + 1 levels {0, 1/K, ..., 1}: floor(K p) / K pays those four values from the second quartile on, reserves 1 for
p = 1 (an unsolved episode never reaches the sweet spot) and gives no progress 0. This is what makes K = 1 the
binary reward (the catalog's test); with the catalog's levels K = 1 would pay every row 1. Toy quality signals: the
relative numeric distance of the answer from the gold, |pred - gold| / max(|gold|, 1) (addition, countdown: the
value of the expression, calculator: the final answer), with sigma = 0.1; and the share of the expert's
intermediate results a calculator episode's tool calls produced (1 when solved).
"""
from __future__ import annotations

import math
from fractions import Fraction

from workbench import registry
from workbench.rewards import base
from workbench.rewards.accuracy import NUMBER, as_number, final_answer, last_number
from workbench.rewards.milestones import episode_actions, reached_milestones
from workbench.text.answers import countdown_answer
from workbench.text.arithmetic import evaluate

KEY = "ssl"
EDGES = (0.0, 0.5, 1.0, 2.0)         # zone edges in units of sigma, innermost first
VALUES = (1.0, 0.6, 0.3, 0.1)        # the reward of each zone
SIGNALS = ("distance", "progress")
UNSOLVED_MIN_DISTANCE = 1e-12  # an unsolved row never lands in the exact tier


def check_zones(K, most: int | None = None) -> None:
    """K, the number of zones: an int in [1, most]."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1 or (most is not None and K > most):
        bound = f"in [1, {most}]" if most is not None else ">= 1"
        raise ValueError(f"{KEY}: K (the number of zones) must be an int {bound}, got {K!r}")


def check_tiers(K: int, edges=EDGES, values=VALUES) -> None:
    if len(edges) != len(values):
        raise ValueError(f"{KEY}: one value per edge, got {len(edges)} edges, {len(values)} values")
    check_zones(K, len(edges))
    if edges[0] < 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{KEY}: edges must start at >= 0 and increase, got {edges}")
    if not 0 < values[-1] or any(b >= a for a, b in zip(values, values[1:])) or values[0] > 1:
        raise ValueError(f"{KEY}: values must decrease within (0, 1], got {values}")


def check_sigma(sigma) -> None:
    if not sigma > 0:
        raise ValueError(f"{KEY}: sigma must be > 0, got {sigma}")


def check_ssl(*, signal="distance", K=4, sigma=0.1, edges=EDGES, values=VALUES, **_) -> None:
    if signal not in SIGNALS:
        raise ValueError(f"{KEY}: signal must be one of {SIGNALS}, got {signal!r}")
    if signal == "distance":
        check_tiers(K, edges, values)
        check_sigma(sigma)
    else:
        check_zones(K)


def distance_tier(d: float, *, sigma=0.1, K=4, edges=EDGES, values=VALUES) -> float:
    """v_k of the innermost zone with d <= edges[k] sigma among the first K, 0 beyond them (d = inf: no answer)."""
    check_tiers(K, edges, values)
    check_sigma(sigma)
    if math.isnan(d) or d < 0:
        raise ValueError(f"{KEY}: a distance is >= 0 (inf for no answer), got {d}")
    return next((v for e, v in zip(edges[:K], values[:K]) if d <= e * sigma), 0.0)


def progress_tier(p: float, *, K=4) -> float:
    """floor(K p) / K: the zone of progress p in [0, 1], K + 1 levels {0, 1/K, ..., 1} with 1 only at p = 1
    (quartile steps for K = 4; K = 1: 1 iff p = 1; see the module docstring for the catalog's four levels)."""
    check_zones(K)
    if not 0 <= p <= 1:
        raise ValueError(f"{KEY}: progress must be in [0, 1], got {p}")
    return math.floor(K * p + 1e-9) / K  # 1e-9: K p = 3 computed as 2.9999... stays in its zone


def stated_value(text: str) -> Fraction | None:
    """The number the final answer states, read as the exact verifier reads it (`accuracy.final_answer`): the first
    number after a marker ("A:46", "the answer is 46. Then 12"), else the last one of the span ("10-3" -> 3)."""
    span, source = final_answer(text)
    if source == "marker":
        first = NUMBER.search(span)
        return None if first is None else as_number(first.group())
    return last_number(span)


def answer_distance(text: str, gold: str) -> float | None:
    """|pred - gold| / max(|gold|, 1); inf when the answer gives no value, None when the gold has none. A
    countdown gold "22|3 5 7" compares the value of the expression (over exactly those numbers); any other gold
    one number ("46", "-3", "0.5", "1/2", "1,000") is compared with `stated_value` of the text."""
    if "|" in gold:
        try:
            target, numbers = countdown_answer(gold)
        except ValueError:
            return None
        pred = evaluate(text, numbers)
    else:
        target = as_number(gold)
        if target is None:
            return None
        pred = stated_value(text)
    if pred is None:
        return math.inf
    try:
        return float(abs(pred - target) / max(abs(target), 1))
    except OverflowError:  # a value past float range ("A:" and 400 nines) is beyond every zone
        return math.inf


def episode_progress(actions: list[str], prompt, solved: bool, *, inline: bool) -> float:
    """(intermediate results of the expert's solution the episode's tool calls produced + [solved]) / (their
    number + 1): below 1 for any unsolved episode, 1 when solved; [solved] for a prompt without intermediates."""
    reached = reached_milestones(actions, prompt, inline=inline)
    return (sum(reached) + solved) / (len(reached) + 1)


def row_distance(text: str, gold, solved: bool | None) -> float | None:
    """d of one row: 0 when solved; else the answer's distance, kept off the exact tier (a value equal to the gold
    that the verifier rejects, e.g. "046", is not the sweet spot), inf without a value; None when neither the
    verdict nor the gold tells."""
    if solved:
        return 0.0
    d = answer_distance(text, str(gold)) if gold is not None else None
    if d is None:
        return math.inf if solved is False else None
    return max(d, UNSOLVED_MIN_DISTANCE) if solved is False else d


def given_progress(progress) -> list[float | None]:
    """The `progress` column, each value None or in [0, 1] (a ValueError naming the row otherwise)."""
    out = []
    for i, p in enumerate(progress):
        if p is not None and not (isinstance(p, (int, float)) and 0 <= p <= 1):
            raise ValueError(f"{KEY}: the progress column holds values in [0, 1] (or None); row {i} has {p!r}")
        out.append(p)
    return out


@registry.reward(
    KEY, title="SSL: Sweet Spot Learning for Differentiated Guidance in Agentic Optimization",
    summary="Tiered reward from a continuous quality signal: distance to the gold in Gaussian zones (exact 1, "
            "then 0.6 / 0.3 / 0.1 within 0.5 / 1 / 2 sigma) or progress in quartile zones; K = 1 is binary.",
    equation=r"r = \begin{cases} v_k,\ k = \min\{k : d \le e_k\sigma\} & \text{distance} \\ "
             r"\lfloor K p \rfloor / K & \text{progress} \end{cases},\ e = (0, .5, 1, 2),\ v = (1, .6, .3, .1)",
    choices={"signal": SIGNALS, "verifier": base.CORRECTNESS_VERIFIERS}, check=check_ssl)
def ssl(completions, *, signal="distance", K=4, sigma=0.1, edges=EDGES, values=VALUES, verifier="auto",
        **columns) -> list[float | None]:
    """Tiered reward per row; a row the environment marks solved (`scores` >= 1) is in the sweet spot (d = 0,
    p = 1), so the tiers only refine the failures. None when the row has no signal (no gold number and no
    verdict; for "progress", no verdict).

    signal "distance" reads `answer` / `solution` (and `scores`; without them, d = 0 is the sweet spot);
    "progress" reads `prompts` (plain or conversational), `turn_info` (each step's action; without it the
    completion cut at each "]") and `scores`, or a `progress` column of values in [0, 1]. verifier: how
    "progress" judges success without `scores` (TRL): "auto" the dependency-free exact verifier (reads the toy's
    "A:26"), "math" math-verify (`base.correctness`). Defaults: K = 4 (the paper: four zones work best),
    sigma = 0.1 (relative error; our reading), the tiers above. The task reward is inside r (a solved row gets 1):
    the recipe sets task_reward = 0.
    """
    check_ssl(signal=signal, K=K, sigma=sigma, edges=edges, values=values)
    texts = base.texts(completions)
    scores = columns.get("scores")
    if signal == "distance":
        golds = base.column(columns, "answer", "solution", required=KEY)
        solved = base.correctness(completions, reward=KEY, **columns) if scores is not None else [None] * len(texts)
        distances = [row_distance(t, g, ok) for t, g, ok in zip(texts, golds, solved, strict=True)]
        return [None if d is None else distance_tier(d, sigma=sigma, K=K, edges=edges, values=values)
                for d in distances]
    progress = columns.get("progress")
    if progress is None:
        solved = base.correctness(completions, reward=KEY, verifier=verifier, **columns)
        prompts = base.column(columns, "prompts", required=KEY)
        actions, inline = episode_actions(completions, columns, reward=KEY)
        progress = [None if ok is None else episode_progress(a, p, ok, inline=inline)
                    for a, p, ok in zip(actions, prompts, solved, strict=True)]
    else:
        progress = given_progress(progress)
        solved = base.correctness(completions, reward=KEY, **columns) if scores is not None else [None] * len(texts)
    return [None if p is None else progress_tier(1.0 if ok else float(p), K=K)
            for p, ok in zip(progress, solved, strict=True)]
