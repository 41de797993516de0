"""Verifiable answer correctness (DeepSeek-R1's accuracy reward) and the answer verifiers other rewards reuse.

    verify_answer(text, gold)                     math-verify equivalence, TRL `accuracy_reward`'s configuration
    verify_answer(text, gold, verifier="exact")   dependency-free: the final answer span against the gold
    answer_f1(text, gold)                         SQuAD token F1 of the final answer span (span answers, IGPO)

The final answer span of a text (`final_answer`): the content of its last `<answer>...</answer>` block, else the
first line after its last "answer is" / "A:" marker, else the whole text. "exact" compares the number the span
states with a numeric gold by value (so "1/2" = "0.5" = "0.50"), any other gold as text (case and spacing ignored).
"""
from __future__ import annotations

import functools
import re
import string
import threading
from collections import Counter
from fractions import Fraction

from workbench import registry
from workbench.rewards import base

R1_TITLE = "DeepSeek-R1: Incentivizing Reasoning Capability in LLMs via Reinforcement Learning"
VERIFIERS = ("auto", "math", "exact", "f1")
ANSWER_VERIFIERS = ("math", "exact")  # `verify_answer`'s: math-verify, or the dependency-free exact verifier
INSTALL_HINT = "pip install math-verify"
# math-verify's regexes are about quadratic on adversarial text (700k chars of "\boxed{" take its 10 s timeout);
# only this many trailing characters are parsed. Its extraction prefers the rightmost match, so this changes the
# verdict only when the answer lies before the tail of a longer completion.
MATH_MAX_CHARS = 20_000
NUMBER = re.compile(r"(?:(?<![\w)\]])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?")  # "-3", "1,000", "0.5", "1/2"
DIGIT = re.compile(r"\d")
NUMBER_CHARS = frozenset("0123456789,./-")  # characters a NUMBER match can contain
ANSWER_IS_REVERSED = re.compile("answer is"[::-1], re.IGNORECASE)  # searched in the reversed text: the last one


# ----- the final answer span ---------------------------------------------------------------------------

def final_answer(text: str) -> tuple[str, str]:
    """(span, source): the last `<answer>` block's content ("answer"), else the first line after the last marker
    ("marker"), else the whole text ("text"). Linear time: rfind only."""
    close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, close) if close >= 0 else -1
    if start >= 0:
        return text[start + len("<answer>"):close], "answer"
    cut = marker_end(text)
    if cut >= 0:
        return text[cut:].strip().split("\n", 1)[0], "marker"
    return text, "text"


def marker_end(text: str) -> int:
    """Where the text after the last marker starts: "answer is" (any case) or "A:" (as in "Q: ... A: 46", not
    preceded by a letter or digit); -1 without one."""
    found = ANSWER_IS_REVERSED.search(text[::-1])
    answer_is = len(text) - found.start() if found else -1
    a_colon = text.rfind("A:")
    while a_colon > 0 and text[a_colon - 1].isalnum():
        a_colon = text.rfind("A:", 0, a_colon)
    return max(answer_is, a_colon + 2 if a_colon >= 0 else -1)


def as_number(text: str) -> Fraction | None:
    """The value of a text that is one number ("46", "-3", "1,000", "0.5", "1/2"), else None."""
    text = text.strip()
    if not NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def last_number(text: str) -> Fraction | None:
    """The value of the last number in `text` (None when it has none). Searches growing tails of the text, so a
    long completion ending in a number costs little; a match is accepted once nothing that can belong to a number
    precedes it inside the tail (then the whole text's last match is the same)."""
    digit = DIGIT.search(text[::-1])  # the last digit, found from the end
    if digit is None:
        return None
    text, size = text[:len(text) - digit.start()], 64  # nothing after the last digit belongs to a number
    while True:
        start = max(0, len(text) - size)
        tail, match = text[start:], None
        for match in NUMBER.finditer(tail):
            pass
        if start == 0 or (match is not None and match.start() > 0 and tail[match.start() - 1] not in NUMBER_CHARS):
            return None if match is None else as_number(match.group())
        size *= 4


def normalized(text: str) -> str:
    """Text answers compare case- and spacing-insensitively, without a trailing period or enclosing `$`."""
    return " ".join(text.strip().strip("$").strip().rstrip(".").split()).casefold()


def exact_verify_answer(text: str, gold: str) -> bool | None:
    """The final answer span against `gold`. A numeric gold is compared by value with the number the span
    states: the first after a marker ("the answer is 46. Then 12"), else the last ("x = 3 + 4 = 7"); any other
    gold with the normalized span. None: empty gold."""
    if not gold.strip():
        return None
    span, source = final_answer(text)
    value = as_number(gold)
    if value is None:
        return normalized(span) == normalized(gold)
    if source == "marker":
        first = NUMBER.search(span)
        return first is not None and as_number(first.group()) == value
    return last_number(span) == value


# ----- math-verify (TRL's configuration) ---------------------------------------------------------------

def math_verify():
    """The math_verify module, or an ImportError saying how to install it."""
    try:
        import math_verify  # noqa: PLC0415  (optional dependency)
    except ImportError as err:
        raise ImportError(f"verifier='math' needs the math-verify package: {INSTALL_HINT} (or use verifier='exact', "
                          "which needs nothing)") from err
    return math_verify


def math_timeouts() -> tuple[int | None, int | None]:
    """TRL's (parsing, verify) timeouts: math-verify's SIGALRM works in the main thread only; elsewhere none."""
    return (10, 5) if threading.current_thread() is threading.main_thread() else (None, None)


@functools.lru_cache(maxsize=4096)
def parsed_gold(gold: str, timeout: int | None):
    """The gold parsed plainly (TRL: `parse(sol)`), once per distinct gold; () when it does not parse."""
    try:
        return tuple(math_verify().parse(gold, parsing_timeout=timeout))
    except ImportError:
        raise
    except Exception:  # noqa: BLE001  (an unparsable gold is "not applicable", never a crash)
        return ()


@functools.lru_cache(maxsize=1)
def answer_extraction():
    """TRL `accuracy_reward`'s extraction of the completion: LaTeX only, `\\boxed` first, no anchor-less match."""
    from latex2sympy2_extended import NormalizationConfig  # noqa: PLC0415  (comes with math-verify)

    return [math_verify().LatexExtractionConfig(normalization_config=NormalizationConfig(units=True),
                                                boxed_match_priority=0, try_extract_without_anchor=False)]


def math_verify_answer(text: str, gold: str, *, max_chars: int = MATH_MAX_CHARS) -> bool | None:
    """math-verify equivalence of the completion's answer to `gold` (TRL 1.16 `accuracy_reward`); None when the
    gold does not parse. Reads the last `max_chars` characters of `text` (see MATH_MAX_CHARS)."""
    mv = math_verify()
    parse_timeout, verify_timeout = math_timeouts()
    gold_parsed = parsed_gold(gold, parse_timeout)
    if not gold_parsed:
        return None
    try:
        answer = mv.parse(text[-max_chars:], extraction_config=answer_extraction(), extraction_mode="first_match",
                          parsing_timeout=parse_timeout)
        return bool(mv.verify(list(gold_parsed), answer, timeout_seconds=verify_timeout))
    except Exception:  # noqa: BLE001  (junk model output scores 0, it never stops training)
        return False


def verify_answer(text: str, gold: str, *, verifier: str = "math") -> bool | None:
    """Is the answer of `text` the gold? "math": math-verify (TRL's configuration; an ImportError naming
    `pip install math-verify` when it is missing); "exact": `exact_verify_answer`. None: the gold does not parse."""
    if verifier == "math":
        return math_verify_answer(text, gold)
    if verifier == "exact":
        return exact_verify_answer(text, gold)
    raise ValueError(f"verify_answer: verifier must be 'math' or 'exact', got {verifier!r}")


# ----- token F1 (span answers) -------------------------------------------------------------------------

def answer_tokens(text: str) -> list[str]:
    """SQuAD's `normalize_answer`: lower case, no punctuation, no articles, whitespace-split."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return re.sub(r"\b(a|an|the)\b", " ", text).split()


def answer_f1(text: str, gold: str) -> float | None:
    """SQuAD token F1 between the final answer span of `text` and `gold` (None: empty gold)."""
    if not gold.strip():
        return None
    pred, truth = answer_tokens(final_answer(text)[0]), answer_tokens(gold)
    if not pred or not truth:
        return float(pred == truth)
    common = sum((Counter(pred) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(truth)
    return 2 * precision * recall / (precision + recall)


# ----- the reward --------------------------------------------------------------------------------------

def after_reasoning(text: str, delimiters) -> str | None:
    """TRL `reasoning_accuracy_reward`: the text after the last occurrence of the first delimiter (in the given
    order) that `text` contains; None when it contains none (the reasoning never finished)."""
    for delim in delimiters:
        if delim in text:
            return text.split(delim)[-1]
    return None


def check_options(verifier, reasoning_delimiters) -> None:
    if verifier not in VERIFIERS:
        raise ValueError(f"accuracy-reward: verifier must be one of {VERIFIERS}, got {verifier!r}")
    if reasoning_delimiters is not None and (
            isinstance(reasoning_delimiters, str)
            or not all(isinstance(d, str) and d for d in reasoning_delimiters)):
        raise ValueError("accuracy-reward: reasoning_delimiters must be None or a list of non-empty strings, got "
                         f"{reasoning_delimiters!r}")


def text_score(text: str, gold: str, verifier: str) -> float | None:
    if verifier == "f1":
        return answer_f1(text, gold)
    verdict = verify_answer(text, gold, verifier="math" if verifier == "auto" else verifier)
    return None if verdict is None else float(verdict)


@registry.reward(
    "accuracy-reward", title=R1_TITLE,
    summary="1 if the final answer verifies against the gold, else 0 (±1 with signed=True, token F1 for spans); "
            "None when the gold does not parse (TRL accuracy_reward / reasoning_accuracy_reward).",
    equation=r"r = \mathbb{1}[\mathrm{verify}(\hat a(y), a^\star)] \quad(\pm 1:\ 2r - 1)",
    choices={"verifier": VERIFIERS})
def accuracy_reward(completions, *, verifier="auto", signed=False, reasoning_delimiters=None, **columns):
    """Correctness of each completion's final answer.

    verifier: "auto" (default) takes the environment's verdict (`scores` >= 1) when the caller passes `scores`
    (our pipeline), else math-verify as TRL 1.16 `accuracy_reward` does (gold parsed plainly; the answer read as
    LaTeX, `\\boxed` first, no anchor-less match); "math" always math-verify; "exact" the dependency-free
    `exact_verify_answer` (the toy tasks' "46", "The answer is 46"); "f1" SQuAD token F1 of the answer span
    (IGPO's span-answer outcome), in [0, 1]. The gold is the `solution` (TRL's name) or `answer` column.
    signed: map r in [0, 1] to 2r - 1, so a wrong answer gets -1 (FAPO's ±1).
    reasoning_delimiters: None (default) reads the whole text (TRL `accuracy_reward`); a list behaves like TRL
    `reasoning_accuracy_reward` (its default is ["</think>"]): only the text after the last delimiter is verified,
    and a completion containing none scores as wrong (0, or -1 signed) before the gold is looked at.
    Returns None for a row whose gold does not parse (TRL skips it; the pipeline leaves it out of the sum).
    """
    check_options(verifier, reasoning_delimiters)
    texts = base.texts(completions)
    scores = columns.get("scores") if verifier == "auto" else None
    verdicts = None if scores is None else base.correctness(completions, reward="accuracy-reward", scores=scores)
    golds = None if verdicts is not None else base.column(columns, "solution", "answer", required="accuracy-reward")
    out = []
    for i, text in enumerate(texts):
        answer = text if reasoning_delimiters is None else after_reasoning(text, reasoning_delimiters)
        if answer is None:
            r = 0.0
        elif verdicts is not None:
            r = None if verdicts[i] is None else float(verdicts[i])
        else:
            r = text_score(answer, str(golds[i]), verifier)
        out.append(r if r is None or not signed else 2.0 * r - 1.0)
    return out
