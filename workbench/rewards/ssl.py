"""SSL's sweet-spot tiered rewards: a continuous quality signal cut into K zones, better zones paying more.

    distance (Gaussian tiers):  r = v_k for the first k with d <= e_k sigma, 0 beyond e_K sigma
                                e = (0, 0.5, 1, 2), v = (1, 0.6, 0.3, 0.1)          (K = 4: exact, then 3 rings)
    progress (quantile tiers):  r = floor(K p) / K                                   (K = 4: quartiles)
    K = 1 is the binary reward: 1 iff d = 0 (exact), or iff p = 1 (done).

Our reading (the paper is abstract-only, no code; the catalog's "decide values"): the sweet spot is the exact
answer (d = 0) and the full progress (p = 1); zone edges at 0.5, 1 and 2 sigma around it and rewards 1, 0.6, 0.3,
0.1 (the catalog's values); the K used are the first K tiers. Toy quality signals: the relative numeric distance
of the answer from the gold, |pred - gold| / max(|gold|, 1) (addition, countdown: the value of the expression,
calculator: the final answer), with sigma = 0.1; and the share of the expert's intermediate results a calculator
episode's tool calls produced (1 when solved).
"""
from __future__ import annotations

import math
import re

from workbench import registry
from workbench.envs.calculator import final_answer
from workbench.rewards import base
from workbench.rewards.milestones import episode_actions, solution_steps, step_results
from workbench.tasks.countdown import evaluate, parse_answer

KEY = "ssl"
EDGES = (0.0, 0.5, 1.0, 2.0)         # zone edges in units of sigma, innermost first
VALUES = (1.0, 0.6, 0.3, 0.1)        # the reward of each zone
NUMBER_REVERSED = re.compile(r"\d+-?")  # "-?\d+" read backwards
MAX_NUMBER_CHARS = 18
SIGNALS = ("distance", "progress")
UNSOLVED_MIN_DISTANCE = 1e-12  # an unsolved row never lands in the exact tier


def check_tiers(K: int, edges=EDGES, values=VALUES) -> None:
    if len(edges) != len(values) or not 1 <= K <= len(edges):
        raise ValueError(f"{KEY}: K must be in [1, {len(edges)}] with one value per edge, got K={K}, "
                         f"{len(edges)} edges, {len(values)} values")
    if edges[0] < 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{KEY}: edges must start at >= 0 and increase, got {edges}")
    if not 0 < values[-1] or any(b >= a for a, b in zip(values, values[1:])) or values[0] > 1:
        raise ValueError(f"{KEY}: values must decrease within (0, 1], got {values}")


def distance_tier(d: float, *, sigma=0.1, K=4, edges=EDGES, values=VALUES) -> float:
    """v_k of the innermost zone with d <= edges[k] sigma among the first K, 0 beyond them (d = inf: no answer)."""
    check_tiers(K, edges, values)
    if not sigma > 0:
        raise ValueError(f"{KEY}: sigma must be > 0, got {sigma}")
    if math.isnan(d) or d < 0:
        raise ValueError(f"{KEY}: a distance is >= 0 (inf for no answer), got {d}")
    return next((v for e, v in zip(edges[:K], values[:K]) if d <= e * sigma), 0.0)


def progress_tier(p: float, *, K=4) -> float:
    """floor(K p) / K: the quantile zone of progress p in [0, 1] (quartiles for K = 4; K = 1: 1 iff p = 1)."""
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"{KEY}: K must be an integer >= 1, got {K}")
    if not 0 <= p <= 1:
        raise ValueError(f"{KEY}: progress must be in [0, 1], got {p}")
    return math.floor(K * p + 1e-9) / K  # 1e-9: K p = 3 computed as 2.9999... stays in its zone


def last_number(text: str) -> int | None:
    """The last integer written in `text` (None if there is none or it is longer than 18 digits); searched in the
    reversed text, so one regex pass finds it however long the text is."""
    found = NUMBER_REVERSED.search(text[::-1])
    if found is None or len(found.group().rstrip("-")) > MAX_NUMBER_CHARS:
        return None
    return int(found.group()[::-1])


def answer_distance(text: str, gold: str) -> float | None:
    """|pred - gold| / max(|gold|, 1); inf when the answer gives no value, None when the gold has none. A
    countdown gold "22|3 5 7" compares the value of the expression (over exactly those numbers); otherwise the
    last integer of the final answer ("A:" of the calculator, else the whole text)."""
    if "|" in gold:
        try:
            target, numbers = parse_answer(gold)
        except ValueError:
            return None
        pred = evaluate(text, numbers)
    else:
        target = last_number(gold) if gold.strip().lstrip("-").isdigit() else None
        if target is None:
            return None
        answer = final_answer(text)
        pred = last_number(answer if answer is not None else text)
    return math.inf if pred is None else abs(pred - target) / max(abs(target), 1)


def episode_progress(actions: list[str], prompt, solved: bool, *, inline: bool) -> float:
    """(intermediate results of the expert's solution the episode's tool calls produced + [solved]) / (their
    number + 1): below 1 for any unsolved episode, 1 when solved; [solved] for a prompt without intermediates."""
    milestones = [value for value, _ in solution_steps(prompt)]
    produced = set(step_results(actions, inline=inline)) - {None}
    return (sum(v in produced for v in milestones) + solved) / (len(milestones) + 1)


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


@registry.reward(
    KEY, title="SSL: Sweet Spot Learning for Differentiated Guidance in Agentic Optimization",
    summary="Tiered reward from a continuous quality signal: distance to the gold in Gaussian zones (exact 1, "
            "then 0.6 / 0.3 / 0.1 within 0.5 / 1 / 2 sigma) or progress in quartile zones; K = 1 is binary.",
    equation=r"r = \begin{cases} v_k,\ k = \min\{k : d \le e_k\sigma\} & \text{distance} \\ "
             r"\lfloor K p \rfloor / K & \text{progress} \end{cases},\ e = (0, .5, 1, 2),\ v = (1, .6, .3, .1)")
def ssl(completions, *, signal="distance", K=4, sigma=0.1, edges=EDGES, values=VALUES,
        **columns) -> list[float | None]:
    """Tiered reward per row; a row the environment marks solved (`scores` >= 1) is in the sweet spot (d = 0,
    p = 1), so the tiers only refine the failures. None when the row has no signal (no gold number and no
    verdict; for "progress", no verdict).

    signal "distance" reads `answer` / `solution` (and `scores`); "progress" reads `prompts`, `turn_info` (each
    step's action; without it the completion cut at each "]") and `scores`, or a `progress` column in [0, 1].
    Defaults: K = 4 (the paper: four zones work best), sigma = 0.1 (relative error; our reading), the tiers
    above. The task reward is inside r (a solved row gets 1): the recipe sets task_reward = 0.
    """
    if signal not in SIGNALS:
        raise ValueError(f"{KEY}: signal must be one of {SIGNALS}, got {signal!r}")
    if signal == "distance":
        check_tiers(K, edges, values)
    else:
        progress_tier(0.0, K=K)  # checks K
    texts = base.texts(completions)
    scores = columns.get("scores")
    solved = [None] * len(texts) if scores is None else [None if s is None or math.isnan(s) else s >= 1 for s in scores]
    if signal == "distance":
        golds = base.column(columns, "answer", "solution", required=KEY)
        distances = [row_distance(t, g, ok) for t, g, ok in zip(texts, golds, solved, strict=True)]
        return [None if d is None else distance_tier(d, sigma=sigma, K=K, edges=edges, values=values)
                for d in distances]
    progress = columns.get("progress")
    if progress is None:
        if scores is None:  # the verdict from the gold answer instead
            solved = base.correctness(completions, reward=KEY, **columns)
        prompts = base.column(columns, "prompts", required=KEY)
        actions, inline = episode_actions(completions, columns)
        progress = [None if ok is None else episode_progress(a, p, ok, inline=inline)
                    for a, p, ok in zip(actions, prompts, solved, strict=True)]
    return [None if p is None else progress_tier(1.0 if ok else min(max(float(p), 0.0), 1.0), K=K)
            for p, ok in zip(progress, solved, strict=True)]
