"""DeepSeek-R1's format reward: one reasoning block, then the answer, in a given tag layout.

TRL 1.16 `think_format_reward` matches `^<think>(?!.*<think>)(.*?)</think>.*$` (DOTALL | MULTILINE, `re.match`):
the completion starts with `<think>` (no leading whitespace), holds no second `<think>` anywhere, closes the block,
and anything may follow. `tag_layout_ok` is that pattern generalized to a sequence of tags and written with
`str.find` / `str.count` instead of a regex, so it is linear on any input (a lookahead `.*<think>` per position
would not be).
"""
from __future__ import annotations

from workbench import registry
from workbench.rewards import base
from workbench.rewards.accuracy import R1_TITLE

TRAILING = ("any", "none")


def skip_space(text: str, pos: int) -> int:
    """The first index at or after `pos` that is not whitespace (`str.isspace`, as the regex `\\s`)."""
    return len(text) - len(text[pos:].lstrip())


def tag_layout_ok(text: str, tags=("think",), *, strip=False, leading="none", trailing="any",
                  nonempty=False) -> bool:
    """Does `text` consist of the blocks `<t>...</t>` for t in `tags`, in that order?

    Each opening tag occurs in the whole text exactly as often as in `tags` (a duplicated or nested block fails),
    each block closes at the first closing tag after it opens (and holds at least one character when `nonempty`,
    a regex's `.+?`), blocks are separated by whitespace only, the text starts with the first block
    (`leading="none"`, TRL's `^<think>`; after leading whitespace only when `strip`) or at its first opening tag
    with anything before (`leading="any"`, SRPO's `.*<think>`), and after the last block comes anything
    (`trailing="any"`, TRL's `.*$`: the answer) or only whitespace (`trailing="none"`).
    """
    if strip:
        text = text.strip()
    if any(text.count(f"<{t}>") != tags.count(t) for t in set(tags)):
        return False
    pos = max(text.find(f"<{tags[0]}>"), 0) if leading == "any" else 0
    for k, tag in enumerate(tags):
        opening, closing = f"<{tag}>", f"</{tag}>"
        pos = pos if k == 0 else skip_space(text, pos)
        if not text.startswith(opening, pos):
            return False
        end = text.find(closing, pos + len(opening))
        if end < 0 or (nonempty and end == pos + len(opening)):
            return False
        pos = end + len(closing)
    return trailing == "any" or skip_space(text, pos) == len(text)


def tag_counts_match(text: str, tags=("think",)) -> list[bool]:
    """For each distinct tag of the layout (in layout order), its opening then (after all openings) its closing
    tag: does the text hold it exactly as often as the layout does (once each in open-r1's think/answer; twice
    for SRPO's think and answer)?"""
    distinct = dict.fromkeys(tags)
    return [text.count(f"<{t}>") == tags.count(t) for t in distinct] + \
        [text.count(f"</{t}>") == tags.count(t) for t in distinct]


def tag_count_score(text: str, tags=("think",)) -> float:
    """Partial credit (open-r1 `tag_count_reward`, whitespace-insensitive): the share of the layout's distinct
    opening and closing tags that occur as often as the layout holds them (`tag_counts_match`)."""
    found = tag_counts_match(text, tags)
    return sum(found) / len(found)


def check_tags(tags, trailing) -> tuple:
    if isinstance(tags, str) or not tags or not all(
            isinstance(t, str) and t and not set(t) & set("<>/") and not any(c.isspace() for c in t) for t in tags):
        raise ValueError(f"format-reward: tags must be a non-empty sequence of tag names like ('think', 'answer') "
                         f"(no '<', '>', '/' or spaces), got {tags!r}")
    if trailing not in TRAILING:
        raise ValueError(f"format-reward: trailing must be one of {TRAILING}, got {trailing!r}")
    return tuple(tags)


@registry.reward(
    "format-reward", title=R1_TITLE,
    summary="1 if the completion is one <think> block then the answer (TRL think_format_reward), else 0; "
            "configurable tag layouts, partial tag-count credit.",
    equation=r"r = \mathbb{1}\big[y = \texttt{<think>}\,c\,\texttt{</think>}\,a,\ \texttt{<think>} \notin c\,a\big]",
    choices={"trailing": TRAILING})
def format_reward(completions, *, tags=("think",), strip=False, trailing="any", partial=False, **columns):
    """1.0 when `tag_layout_ok(text, tags, strip=, trailing=)`, else 0.0.

    Defaults reproduce TRL 1.16 `think_format_reward` exactly, including its one whitespace sensitivity: a
    completion with whitespace before `<think>` scores 0 (`^<think>` under `re.match`). The catalog asks for
    whitespace-insensitivity; TRL's behaviour wins by default, `strip=True` ignores leading/trailing whitespace.
    Whitespace inside blocks and between blocks never matters.
    tags: e.g. ("think", "answer") with trailing="none" for open-r1's `<think>...</think><answer>...</answer>$`
    layout (without its exact newlines); ("think", "answer", "reflection", "think", "answer") for SRPO's.
    partial: open-r1 `tag_count_reward` instead: the share of the layout's tags that occur as often as in the
    layout (`tag_count_score`).
    The weight (GHPO 0.5, Countdown/TinyZero 0.1) is the recipe's `weight`.
    """
    tags = check_tags(tags, trailing)
    if partial:
        return [tag_count_score(t, tags) for t in base.texts(completions)]
    return [float(tag_layout_ok(t, tags, strip=strip, trailing=trailing)) for t in base.texts(completions)]
