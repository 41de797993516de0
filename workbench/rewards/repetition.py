"""The n-gram repetition penalty of "Demystifying Long Chain-of-Thought Reasoning in LLMs" (Appendix C.2).

    r = (1 - #unique n-grams / #n-grams) * p_max,   p_max <= 0;   r = 0 with fewer than n units

Two units, one formula: words (huggingface/open-r1 `get_repetition_penalty_reward`, language "en": the text
lower-cased and split on whitespace, as the paper's reference eddycmu/demystify-long-cot does) or token ids
(TRL 1.16 `get_repetition_penalty_reward`: the completion's token ids, tokenizer-defined and language-agnostic).
"""
from __future__ import annotations

from workbench import registry
from workbench.rewards import base
from workbench.rewards.length import DEMYSTIFY_TITLE

UNITS = ("words", "tokens")


def repeated_fraction(units, n: int) -> float:
    """1 - #unique n-grams / #n-grams over the sequence `units`; 0.0 with fewer than n units."""
    if len(units) < n:
        return 0.0
    ngrams = list(zip(*[units[i:] for i in range(n)]))
    return 1.0 - len(set(ngrams)) / len(ngrams)


def words(text: str) -> list[str]:
    """open-r1's word units: `text.lower().split()`."""
    return text.lower().split()


def check_options(unit, n, max_penalty) -> None:
    if unit not in UNITS:
        raise ValueError(f"repetition-penalty: unit must be one of {UNITS}, got {unit!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"repetition-penalty: n must be an integer >= 1, got {n!r}")
    if not max_penalty <= 0:
        raise ValueError(f"repetition-penalty: max_penalty must be <= 0 (a penalty), got {max_penalty!r}")


@registry.reward(
    "repetition-penalty", title=DEMYSTIFY_TITLE,
    summary="Penalty (1 - unique/total n-grams) * p_max over word n-grams (open-r1) or token-id n-grams (TRL), "
            "in [p_max, 0].",
    equation=r"r = \Big(1 - \frac{|\mathrm{set}(\mathrm{ngrams}_n(y))|}{|\mathrm{ngrams}_n(y)|}\Big)\,p_{max}",
    choices={"unit": UNITS})
def repetition_penalty(completions, *, unit="words", n=3, max_penalty=-1.0, **columns) -> list[float]:
    """The penalty of each completion, in [max_penalty, 0].

    unit: "words" (default, the catalog's word n-grams; open-r1) or "tokens" (TRL 1.16; reads `completion_ids`,
    which our pipeline passes with EOS included, as TRL's do). n = 3 and max_penalty = -1.0 are TRL's and the
    catalog's defaults (`unverified` against the paper, which reports no values). A completion with no repeated
    n-gram, or fewer than n units, gets 0.
    """
    check_options(unit, n, max_penalty)
    if unit == "tokens":
        seqs = base.column(columns, "completion_ids", required="repetition-penalty")
    else:
        seqs = [words(t) for t in base.texts(completions)]
    return [repeated_fraction(list(s), n) * max_penalty or 0.0 for s in seqs]
