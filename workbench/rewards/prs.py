"""PRS: progressive (staged) reward shaping for agentic QA. Abstract-only: the stages are the paper's, every
number below is our reading.

    stage 1   r = r_format                                   well-formed (parseable) tool calls and answer
    stage 2   r = 0.2 r_format + 0.8 r_answer                r_answer = length-aware BLEU of a span answer vs the
                                                             gold (short-form QA), else the verifier's verdict
    s(t)      1 -> 2 at progress t / T >= switch_at, or once format compliance exceeds 0.9 (controller `prs`)

r_format is the share of a trajectory's steps that are well formed: a tool call that parses and runs (no
`tool_error`; without turn_info, one that parses in our syntax), a final answer that is a non-empty span and not
cut by the budget. r_answer is 0 unless the final answer is well formed, so any fully well-formatted trajectory
scores at least any unparseable one in every stage. The stage never goes back from 2 to 1.

r_answer (`answer_metric`): the paper scores short-form QA answers with a length-aware BLEU. BLEU measures an answer
that should reproduce the gold's words (search's entity, a QA span); it says nothing about an answer that must reach
a value (countdown's "5*3+2" for the target 17, grid-world moves for a budget, arithmetic): there the environment's
verifier is the answer's quality. "auto" picks per row: BLEU for a span gold (it has a letter), the verifier for a
numeric one.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from workbench import registry
from workbench.rewards import base
from workbench.rewards.accuracy import answer_tokens, final_answer
from workbench.rewards.tools import action_calls, steps_of, written_calls
from workbench.text.tool_calls import OPEN, parse_tool_call

PRS_TITLE = "Enhancing Agentic RL with Progressive Reward Shaping and Value-based Sampling Policy Optimization"
MAX_CALL_CHARS = 10_000  # a longer TRL tool call counts as malformed (bounds the parse)
ANSWER_METRICS = ("auto", "verifier", "bleu")


# ----------------------------------------------------------------------------- format

def call_parses(action: str) -> bool:
    """A TRL-style call parses (`parse_tool_call`, as the environment reads it); a bracket call is a call by form."""
    if OPEN not in action:
        return True
    if len(action) > MAX_CALL_CHARS:
        return False
    try:
        return parse_tool_call(action) is not None
    except ValueError:
        return False


def answer_span(action: str) -> str:
    """The final answer of an action: the span after its last "A:" / "answer is" / inside <answer> (accuracy's
    `final_answer`), else the whole stripped action."""
    return final_answer(action)[0].strip()


def step_well_formed(action: str, info: dict, cut: bool) -> bool:
    """A tool call (`written_calls`, or any step the env rejected: "12]" is a malformed calculator call): it parses
    and the env ran it (`action_calls`: no tool_error). An answer: non-empty and not cut by the budget."""
    if written_calls(action) or info.get("tool_error"):
        return action_calls(action, info) > 0 and call_parses(action)
    return bool(answer_span(action)) and not cut


def format_scores(completions, turn_info=None, truncated=None) -> list[tuple[float, bool]]:
    """Per row (r_format, whether its final answer is well formed): the share of well-formed steps."""
    out = []
    for i, steps in enumerate(steps_of(completions, turn_info)):
        cut = bool(truncated[i]) if truncated is not None else False
        ok = [step_well_formed(a, info, cut and s == len(steps) - 1) for s, (a, info) in enumerate(steps)]
        answered = bool(steps) and not written_calls(steps[-1][0]) and ok[-1]
        out.append((sum(ok) / max(len(ok), 1), answered))
    return out


# ----------------------------------------------------------------------------- answer quality

def ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(zip(*(tokens[k:] for k in range(n))))


def length_aware_bleu(prediction: str, gold: str, *, max_n=4) -> float:
    """BLEU of a short answer: n-gram orders up to min(max_n, |gold|) (a one-word gold is unigram precision),
    add-one smoothing above unigrams (Lin & Och 2004), and the brevity penalty exp(1 - |gold| / |pred|) when the
    prediction is shorter. Tokens: SQuAD's normalization (`answer_tokens`). 1 for an exact match, 0 for an empty
    prediction or no shared word."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return 0.0
    orders = min(max_n, len(ref))
    log_precision = 0.0
    for n in range(1, orders + 1):
        ref_counts = ngrams(ref, n)
        matched = sum(min(c, ref_counts[g]) for g, c in ngrams(pred, n).items() if g in ref_counts)
        total = max(len(pred) - n + 1, 0)
        if n == 1 and matched == 0:
            return 0.0
        log_precision += math.log(matched / total if n == 1 else (matched + 1) / (total + 1))
    brevity = 1.0 if len(pred) >= len(ref) else math.exp(1 - len(ref) / len(pred))
    return brevity * math.exp(log_precision / orders)


def gold_text(answer) -> str:
    """The gold answer's text; our tasks put side data after "|" (search's corpus, countdown's numbers)."""
    return str(answer).split("|", 1)[0].strip() if answer is not None else ""


def span_gold(gold: str) -> bool:
    """Is the gold a span of words the answer should reproduce (search's entity, a QA answer: it has a letter),
    rather than a value the answer must reach (a number: countdown's target, the grid world's budget)?"""
    return any(ch.isalpha() for ch in gold)


# ----------------------------------------------------------------------------- the stage

def stage_at(*, stage=None, switch_at=0.5, **columns) -> int:
    """s(t): 2 from progress t / T >= switch_at (`base.training_progress`: `step` / `total_steps` or TRL's
    trainer_state), or when the controller has set stage = 2; else 1. Monotone in t."""
    if stage not in (None, 1, 2):
        raise ValueError(f"prs: stage must be 1, 2 or None, got {stage!r}")
    if switch_at is not None and not switch_at >= 0:
        raise ValueError(f"prs: switch_at must be >= 0 (a fraction of the run) or None, got {switch_at}")
    timed = 2 if switch_at is not None and base.training_progress(**columns) >= switch_at else 1
    return max(stage or 1, timed)


PRS_LOGS = {
    "rewards/prs/stage": ("PRS: the reward's stage this step (1: format only; 2: 0.2 format + 0.8 answer BLEU).",
                          "1, then 2 from the switch on; never back to 1."),
    "rewards/prs/format": ("PRS: mean r_format, the share of well-formed steps (parsed calls, uncut answer).",
                           "Rising towards 1 in stage 1. Falling in stage 2: answers bought with malformed calls."),
    "rewards/prs/compliance": ("PRS: share of rows whose every step is well formed (stage 2 once it passes 0.9).",
                               "Rising; stage 2 once it passes 0.9. Stuck low: the format is not learned."),
    "rewards/prs/answer": ("PRS (stage 2): mean r_answer: length-aware BLEU of a span answer, else the verifier's 0/1.",
                           "Rising in stage 2 with accuracy. Flat near 0: answers are well formed but wrong."),
}


@registry.reward(
    "prs", title=PRS_TITLE,
    summary="Staged reward: stage 1 rewards well-formed tool calls and answers (r_format); stage 2 adds answer "
            "quality, 0.2 r_format + 0.8 r_answer (length-aware BLEU of a span answer, else the verifier); the "
            "stage switches once, at half the run or when format compliance passes 0.9 (controller prs). "
            "Abstract-only: weights are our reading.",
    equation=r"r = \begin{cases} r_{fmt} & s(t) = 1 \\ 0.2\,r_{fmt} + 0.8\,r_{ans},\ r_{ans} = "
             r"\mathrm{BLEU}_{len}(\hat a, a^*)\ \text{or}\ \mathrm{verify}(\hat a) & s(t) = 2 \end{cases}",
    logs=PRS_LOGS, choices={"answer_metric": ANSWER_METRICS})
def prs_reward(completions, *, stage=None, switch_at=0.5, format_weight=0.2, answer_metric="auto", max_n=4,
               **columns) -> list[float]:
    """r per row (the recipe sets task_reward = 0: r_answer stands for correctness).

    Our reading (abstract-only): stage = None lets the run's progress decide (stage 2 from switch_at = 0.5 of the
    run; None: never by time); the controller `prs` sets stage = 2 once compliance (the share of fully well-formed
    rows) exceeds 0.9. format_weight = 0.2 (the answer weighs 1 - 0.2 = 0.8); max_n = 4 (BLEU-4, fewer orders for
    shorter golds). answer_metric (r_answer, module docstring): "auto" (BLEU for a span gold, the verifier for a
    numeric or empty one), "verifier" (`base.correctness`: the environment's `scores`, else the exact verifier
    on the answer against the gold; 1 or 0, 0 when unknown) or "bleu" (the paper's, on any gold). Reads `turn_info` and
    `truncated` when given (format), and in stage 2 `answer` / `solution` and `scores`.
    Logs stage, format (mean r_format), compliance and, in stage 2, answer (mean r_answer).
    """
    if not 0 <= format_weight <= 1:
        raise ValueError(f"prs: format_weight must be in [0, 1], got {format_weight}")
    if answer_metric not in ANSWER_METRICS:
        raise ValueError(f"prs: answer_metric must be one of {ANSWER_METRICS}, got {answer_metric!r}")
    if not (isinstance(max_n, int) and max_n >= 1):
        raise ValueError(f"prs: max_n must be an integer >= 1, got {max_n!r}")
    s = stage_at(stage=stage, switch_at=switch_at, **columns)
    formats = format_scores(completions, columns.get("turn_info"), columns.get("truncated"))
    fmt = [f for f, _ in formats]
    base.log(columns, "stage", s)
    base.log(columns, "format", sum(fmt) / max(len(fmt), 1))
    base.log(columns, "compliance", sum(f == 1.0 for f in fmt) / max(len(fmt), 1))
    if s == 1:
        return fmt
    quality = answer_quality(completions, formats, answer_metric=answer_metric, max_n=max_n, **columns)
    base.log(columns, "answer", sum(quality) / max(len(quality), 1))
    return [format_weight * f + (1 - format_weight) * q for f, q in zip(fmt, quality)]


def answer_quality(completions, formats, *, answer_metric="auto", max_n=4, **columns) -> list[float]:
    """r_answer per row (0 when the final answer is not well formed): length-aware BLEU of the final answer vs the
    gold where `answer_metric` says BLEU for that row, else the verifier's verdict (1 right, 0 wrong or unknown)."""
    golds = base.column(columns, "answer", "solution", required="prs" if answer_metric == "bleu" else "")
    golds = [gold_text(g) for g in (golds or [None] * len(formats))]
    bleu = [answer_metric == "bleu" or (answer_metric == "auto" and span_gold(g)) for g in golds]
    verdicts = ([None] * len(formats) if all(bleu) else
                base.correctness(completions, reward="prs", verifier="auto", **columns))
    out = []
    for steps, (_, answered), gold, by_bleu, verdict in zip(steps_of(completions, columns.get("turn_info")), formats,
                                                            golds, bleu, verdicts, strict=True):
        if not answered:
            out.append(0.0)
        elif by_bleu:
            out.append(length_aware_bleu(answer_span(steps[-1][0]), gold, max_n=max_n))
        else:
            out.append(float(bool(verdict)))
    return out


# ----------------------------------------------------------------------------- the stage controller

@dataclass
class Stage:
    """The current stage (1 or 2) and the compliance above which it switches."""

    stage: int = 1
    threshold: float = 0.9


def batch_compliance(batch) -> float:
    """The share of the batch's rows whose every step is well formed (`format_scores`)."""
    truncated = batch.truncated.tolist() if batch.truncated is not None else None
    formats = format_scores(batch.completions, batch.turn_info or None, truncated)
    return sum(f == 1.0 for f, _ in formats) / max(len(formats), 1)


PRS_STAGE_LOGS = {
    "reward:prs.stage": ("PRS: the stage its controller set this step (2 once compliance passed the threshold).",
                         "1 until compliance passes the threshold, then 2 for good (or the time switch)."),
}


@registry.controller(
    "prs", title=PRS_TITLE,
    summary="PRS's stage switch: drives the reward's stage (into='reward:prs.stage') from 1 to 2 after the first "
            "step whose format compliance exceeds the threshold (0.9); it never switches back.",
    equation=r"s \leftarrow 2 \ \text{once}\ \tfrac{1}{B}\sum_i [r_{fmt,i} = 1] > 0.9", logs=PRS_STAGE_LOGS)
class PRSStage:
    """State: `Stage`, starting from the reward's `stage` (None: 1). Updated after each step from that step's
    compliance: the logged `rewards/prs/compliance` when the row has it, else recomputed from the batch."""

    @staticmethod
    def init(*, initial, threshold=0.9):
        if not 0 <= threshold <= 1:
            raise ValueError(f"prs: threshold must be in [0, 1], got {threshold}")
        return Stage(stage=int(initial or 1), threshold=threshold)

    @staticmethod
    def update(state, batch, metrics):
        compliance = metrics.get("rewards/prs/compliance")
        if compliance is None:
            compliance = batch_compliance(batch)
        if compliance > state.threshold:
            state.stage = 2
        return state

    @staticmethod
    def value(state):
        return state.stage
