"""Reflection rewards: SRPO's answer -> reflection -> answer reward and ReflexiCoder's multi-round self-correction.

Both score each `<answer>` of a completion with a `scorer(answer_text, gold) -> bool | float | None` (None: the
gold does not parse); the default is `accuracy.verify_answer(..., verifier=...)` ("exact" by default, so the toy
tasks need no dependency) against the `answer` / `solution` column. Every parser here uses `str.find` and
`str.count`, never a regex: the references' lazy regexes (`<think>\\s*([\\s\\S]*?)\\s*</think>`) are quadratic on
long inputs.
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.rewards import base
from workbench.rewards.accuracy import ANSWER_VERIFIERS, verify_answer
from workbench.rewards.format import tag_counts_match, tag_layout_ok

SRPO_TITLE = "SRPO: Enhancing Multimodal LLM Reasoning via Reflection-Aware Reinforcement Learning"
REFLEXICODER_TITLE = ("ReflexiCoder: Teaching Large Language Models to Self-Reflect on Generated Code and Self-Correct "
                      "It via Reinforcement Learning")


# ----- shared parsing ------------------------------------------------------------------------------------

def blocks(text: str, tag: str, *, with_tags=False) -> list[str]:
    """`re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL)` (or the whole matches, `with_tags`), in linear time:
    each block closes at the first closing tag after it opens; an unclosed opening ends the search."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    out, pos = [], 0
    while (start := text.find(opening, pos)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        out.append(text[start:end + len(closing)] if with_tags else text[start + len(opening):end])
        pos = end + len(closing)
    return out


def default_scorer(verifier: str):
    def scorer(answer: str, gold: str):
        return verify_answer(answer, gold, verifier=verifier)
    return scorer


def check_scorer(key: str, scorer, verifier) -> None:
    if scorer is not None and not callable(scorer):
        raise ValueError(f"{key}: scorer must be None or a callable scorer(answer_text, gold), got {scorer!r}")
    if scorer is None and verifier not in ANSWER_VERIFIERS:
        raise ValueError(f"{key}: verifier must be 'exact' or 'math', got {verifier!r}")


# ----- SRPO ----------------------------------------------------------------------------------------------

SRPO_LAYOUT = ("think", "answer", "reflection", "think", "answer")
# (first answer right, last answer right) -> accuracy with two or more answers (srpo_reward_func.py)
SRPO_TRANSITIONS = {(False, True): 1.0, (True, True): 0.75, (True, False): 0.25, (False, False): 0.0}
SRPO_SINGLE_RIGHT = 0.5


def srpo_format_ok(text: str) -> bool:
    """SRPO's format regex, in linear time: exactly two `<think>`, two `<answer>`, one `<reflection>` (and as many
    closing tags) in the layout think, answer, reflection, think, answer; every block non-empty; only whitespace
    between blocks and after the last; anything (free of these tags) before the first."""
    return all(tag_counts_match(text, SRPO_LAYOUT)) and tag_layout_ok(text, SRPO_LAYOUT, leading="any",
                                                                      trailing="none", nonempty=True)


def srpo_length_reward(length: float, think1: float, answer1: float) -> float:
    """exp(-(|L - T_target| / (T_max - T_target))^2), T_target = 2 (think1 + answer1), T_max = 2.5 (same): 1 at
    L = T_target, symmetric around it; 0 when the first think and answer are empty (T_max = 0)."""
    t_target, t_max = 2 * (think1 + answer1), 2.5 * (think1 + answer1)
    if t_max == 0:
        return 0.0
    return math.exp(-((abs(length - t_target)) / (t_max - t_target)) ** 2)


def srpo_accuracy(first_right: bool, last_right: bool, n_answers: int) -> float:
    """SRPO's effectiveness table: one answer block scores 0.5 when right; two or more score the transition
    first -> last (wrong -> right 1.0, right -> right 0.75, right -> wrong 0.25, wrong -> wrong 0). With no block
    the whole text is both answers (the reference's `split("<answer>")[-1]` fallback): right -> right."""
    if n_answers == 1:
        return SRPO_SINGLE_RIGHT if first_right else 0.0
    return SRPO_TRANSITIONS[(first_right, last_right)]


def choice_fallback(answer: str, gold: str, choices: str) -> bool:
    """The reference's multiple-choice rescue of a zero accuracy: the gold is one of `choices` (a letter) and the
    last answer contains it and none of the other letters (substring tests, as the reference)."""
    letter = gold.strip().strip("()").lower()
    if len(letter) != 1 or letter not in choices:
        return False
    student = answer.replace("</answer>", "").replace("<answer>", "").strip().lower()
    return letter in student and all(c not in student for c in choices if c != letter)


def srpo_row(text: str, gold: str, whole_right, scorer, *, count_tokens, length_weight, choices, reference_bug):
    """(accuracy, format, length term) of one completion, or None when the gold does not parse."""
    response = text.strip()
    if not response:
        return 0.0, 0.0, 0.0
    answers = blocks(response, "answer", with_tags=True)
    thinks = blocks(response, "think")
    if reference_bug and (len(answers) < 2 or len(thinks) < 2):
        return 0.0, 0.0, 0.0  # the reference's arity crash: reward_func's bare except scores the row 0
    if answers:
        first, last = scorer(answers[0], gold), scorer(answers[-1], gold)
    else:  # the whole response (after any unclosed <answer>) is both answers
        fallback = response.split("<answer>")[-1]
        first = last = whole_right if whole_right is not None and fallback == response else scorer(fallback, gold)
    if first is None or last is None:
        if not reference_bug:
            return None
        acc = 1.0  # the reference: "Failed to parse gold solution" -> reward 1.0
    else:
        acc = srpo_accuracy(float(first) >= 1.0, float(last) >= 1.0, len(answers))
        if acc == 0.0 and choice_fallback(answers[-1] if answers else response.split("<answer>")[-1], gold, choices):
            acc = 1.0
    fmt = 0.5 if srpo_format_ok(response) else 0.0
    length = 0.0
    if len(answers) >= 2 and len(thinks) >= 2:
        answer1 = answers[0][len("<answer>"):-len("</answer>")]
        length = srpo_length_reward(count_tokens(response), count_tokens(thinks[0].strip()),
                                    count_tokens(answer1.strip()))
    return acc, fmt, length_weight * length


SRPO_LOGS = {
    "rewards/srpo-reflection/accuracy": ("SRPO: mean accuracy term (first -> last answer: wrong->right 1, "
                                         "right->right 0.75, right->wrong 0.25, wrong->wrong 0; one right answer 0.5).",
                                         "Rising towards 0.75-1. Mostly 0.25 (right -> wrong): the reflection undoes "
                                         "right answers. A completion without answer tags counts as right -> right."),
    "rewards/srpo-reflection/format": ("SRPO: mean format term (0.5 for think, answer, reflection, think, answer).",
                                       "Rising towards 0.5 as the policy adopts the two-pass layout; 0 throughout on "
                                       "the toy tasks, whose targets have no tags (the accuracy term trains alone)."),
    "rewards/srpo-reflection/length": ("SRPO: mean length term 0.1 exp(-(|L - T| / (T_max - T))^2), T = 2 x the first "
                                       "think + answer (0 without two think and two answer blocks).",
                                       "In [0, 0.1]; near 0.1 when the whole response is about twice the first think "
                                       "+ answer. 0 while no completion has two passes."),
}


@registry.reward(
    "srpo-reflection", title=SRPO_TITLE,
    summary="Reflection-aware reward: first -> last answer correctness transition (1, 0.75, 0.25, 0; one right "
            "answer 0.5) + 0.5 for the think/answer/reflection/think/answer format + 0.1 x a length bell.",
    equation=r"R = R_{acc}(a_1 \to a_2) + 0.5\,\mathbb{1}_{fmt} + 0.1\,e^{-\left(\frac{|L - T|}{T_{max} - T}\right)^2},"
             r"\ T = 2(|think_1| + |a_1|),\ T_{max} = 2.5(|think_1| + |a_1|)", logs=SRPO_LOGS,
    choices={"verifier": ANSWER_VERIFIERS})
def srpo_reflection_reward(completions, *, scorer=None, verifier="exact", length_weight=0.1, count_tokens=None,
                           choices="abcd", reference_bug=False, **columns):
    """SUSTechBruce/SRPO_MLLMs `srpo_reward_func.py::reward_func` per completion: accuracy + format + length.

    accuracy: `srpo_accuracy` of the first and last `<answer>` blocks (each passed to `scorer` with its tags, as
    the reference parses them), then the reference's multiple-choice rescue (`choices`, "" to switch it off).
    A completion with no answer block is verified whole: by the environment's verdict (`scores` >= 1) when the
    caller passes `scores` (it is the same text), else by `scorer`.
    format: 0.5 when `srpo_format_ok`. length: `length_weight` (0.1, the reference's) x `srpo_length_reward` of
    L = tokens of the stripped completion and the stripped first think and answer, counted by `count_tokens`
    (default `len`, characters: our tiny model's tokens; the reference uses Qwen2.5-VL's tokenizer. The bell
    depends only on the ratios of the three counts, so characters approximate any tokenizer).
    reference_bug: the reference as shipped returns two values where three are unpacked (`extract_answer_with_tags`
    with no answer, `extract_token_lengths` with fewer than two think or answer blocks), so its `reward_func`
    scores every such completion 0 in total, including the catalog's "single correct answer 0.5". False
    (default) is the code with the arity fixed; True reproduces the crash. Our reading: a gold that does not parse
    makes the row None (not applicable, TRL's convention); the reference gives accuracy 1.0 (reproduced with
    reference_bug=True).
    Logs rewards/srpo-reflection/accuracy, /format, /length (means over the rows it scores).
    """
    check_scorer("srpo-reflection", scorer, verifier)
    if not length_weight >= 0:
        raise ValueError(f"srpo-reflection: length_weight must be >= 0, got {length_weight!r}")
    if count_tokens is not None and not callable(count_tokens):
        raise ValueError(f"srpo-reflection: count_tokens must be None (characters) or a callable text -> count, got "
                         f"{count_tokens!r}")
    if not isinstance(choices, str):
        raise ValueError(f"srpo-reflection: choices must be a string of answer letters like 'abcd' ('' for none), "
                         f"got {choices!r}")
    scorer = scorer or default_scorer(verifier)
    count_tokens = count_tokens or len
    golds = base.column(columns, "answer", "solution", required="srpo-reflection")
    verdicts = base.correctness(completions, reward="srpo-reflection", **columns) if columns.get("scores") else None
    rows = [srpo_row(text, str(gold), verdicts[i] if verdicts else None, scorer, count_tokens=count_tokens,
                     length_weight=length_weight, choices=choices, reference_bug=reference_bug)
            for i, (text, gold) in enumerate(zip(base.texts(completions), golds, strict=True))]
    scored = [r for r in rows if r is not None]
    for k, name in enumerate(("accuracy", "format", "length")):
        if scored:
            base.log(columns, name, sum(r[k] for r in scored) / len(scored))
    return [None if r is None else sum(r) for r in rows]


# ----- ReflexiCoder --------------------------------------------------------------------------------------

def reflexicoder_answer(text: str, pos: int, language: str | None) -> tuple[str, int] | None:
    """The reference's `answer_re.search(text, pos)`: (content stripped, end) of the first `<answer>` at or after
    `pos` that closes; with a `language`, the content must hold a ```language ... ``` fence, and (as the reference's
    lazy regex) the block then closes at the first `</answer>` after that fence, even past another block's end."""
    start = text.find("<answer>", pos)
    if start < 0:
        return None
    after = start + len("<answer>")
    if language is not None:
        fence = text.find(f"```{language}", after)
        if fence < 0:
            return None
        close_fence = text.find("```", fence + 3 + len(language))
        if close_fence < 0:
            return None
        after = close_fence + 3
    end = text.find("</answer>", after)
    if end < 0:
        return None
    return text[start + len("<answer>"):end].strip(), end + len("</answer>")


def reflexicoder_block(text: str, pos: int, tag: str) -> int | None:
    """End of the first closed `<tag>...</tag>` at or after `pos` (the reference's `*_re.search`), or None."""
    start = text.find(f"<{tag}>", pos)
    end = text.find(f"</{tag}>", start + len(tag) + 2) if start >= 0 else -1
    return None if end < 0 else end + len(tag) + 3


def reflexicoder_parse(text: str, *, language: str | None = None) -> tuple[float, int, list[str]]:
    """`CompletionParser.parse`: (format F, reflections n, answers) of think -> answer -> (reflection -> answer)+,
    text between blocks skipped, nothing after the last answer; (0.0, 0, []) otherwise."""
    text = text.strip()
    pos = reflexicoder_block(text, 0, "think")
    if pos is None or (found := reflexicoder_answer(text, pos, language)) is None:
        return 0.0, 0, []
    answers, pos = [found[0]], found[1]
    reflections = 0
    while pos < len(text) or reflections == 0:
        after = reflexicoder_block(text, pos, "reflection")
        if after is None:
            if reflections == 0:
                return 0.0, 0, []
            break
        found = reflexicoder_answer(text, after, language)
        if found is None:
            return 0.0, 0, []
        reflections += 1
        answers.append(found[0])
        pos = found[1]
    return (1.0, reflections, answers) if pos == len(text) else (0.0, 0, [])


def cycle_regulation(n: int, *, alpha=0.1, beta=2.0, gamma=0.05, delta=0.1) -> float:
    """P(n): 0 for no reflection, 1 for 1..5, then
    1/(1 + alpha (n-3)^beta) e^{-gamma (n-3)} (1 - delta sin(pi/2 (n-3)))."""
    if n == 0:
        return 0.0
    if n <= 5:
        return 1.0
    return (1.0 / (1.0 + alpha * (n - 3) ** beta) * math.exp(-gamma * (n - 3))
            * (1.0 - delta * math.sin(math.pi / 2.0 * (n - 3))))


def step_quality(prev: float, cur: float, *, s=0.1, eps=1e-4, h_pos=0.05, h_neg=1.0, r_max=1.0) -> float:
    """m_t from Δ = r_t - r_{t-1}: tanh(Δ/s) up; h_pos at the max or -h_neg below it when flat; -tanh(|Δ|/s) down."""
    diff = cur - prev
    if diff > eps:
        return math.tanh(diff / s)
    if abs(diff) <= eps:
        return h_pos if abs(prev - r_max) <= eps else -h_neg
    return -math.tanh(abs(diff) / s)


def iterative_quality(r: list[float], *, lam=0.2, eta=0.5, **step_hp) -> float:
    """R_traj = r_T + eta sum_{t=2}^T w_t m_t, w = softmax over t of lam t."""
    weights = [math.exp(lam * t) for t in range(1, len(r))]
    total = sum(weights)
    return r[-1] + eta * sum(w / total * step_quality(r[t - 1], r[t], **step_hp) for t, w in zip(range(1, len(r)),
                                                                                                   weights))


def efficiency(r: list[float], n: int, *, epsilon=1e-6) -> float:
    """E = r_T / n + (r_T - r_1) / (max(1, n - 1) + epsilon)."""
    return r[-1] / n + (r[-1] - r[0]) / (max(1, n - 1) + epsilon)


REFLEXICODER_LOGS = {
    "rewards/reflexicoder/format": ("ReflexiCoder: share of rows with a valid think -> answer -> (reflection -> "
                                    "answer)+ trajectory (F).",
                                    "Rising towards 1 as the structure is learned; 0 on the toy tasks, whose targets "
                                    "have no tags (the verifier's reward drives training there)."),
    "rewards/reflexicoder/reflections": ("ReflexiCoder: mean number of reflection rounds n (0 for invalid rows).",
                                         "Between 1 and 5. Climbing past 5: the policy farms rounds (then P(n) < 1)."),
    "rewards/reflexicoder/cycle": ("ReflexiCoder: mean cycle regulation P(n) (1 for 1..5 rounds, less beyond, 0 "
                                   "invalid).",
                                   "Equal to the format share while rounds stay within 1..5; below it: too many "
                                   "rounds."),
    "rewards/reflexicoder/quality": ("ReflexiCoder: mean P(n) R_traj (last answer's score + weighted per-round "
                                     "progress), before its weight 0.5.",
                                     "Rising with the last answer's score. Negative: answers stagnate below the max "
                                     "(m_t = -1) or regress."),
    "rewards/reflexicoder/efficiency": ("ReflexiCoder: mean P(n) E, E = r_T / n + (r_T - r_1) / max(1, n - 1).",
                                        "Rising as right answers come in fewer rounds. Negative: later answers undo "
                                        "right first ones."),
}


@registry.reward(
    "reflexicoder", title=REFLEXICODER_TITLE,
    summary="Multi-round self-correction reward: format F + 0.5 P(n) R_traj + 1.0 P(n) E, with cycle regulation "
            "P(n), iterative quality R_traj (softmax-weighted per-round progress) and efficiency E.",
    equation=r"R = F + 0.5\,P(n)\Big(r_T + \eta\sum_{t=2}^{T} w_t m_t\Big) + P(n)\Big(\frac{r_T}{n} + "
             r"\frac{r_T - r_1}{\max(1, n-1) + \epsilon}\Big)", logs=REFLEXICODER_LOGS,
    choices={"verifier": ANSWER_VERIFIERS})
def reflexicoder_reward(completions, *, scorer=None, verifier="exact", language=None, alpha=0.1, beta=2.0,
                        gamma=0.05, delta=0.1, lam=0.2, s=0.1, eps=1e-4, h_pos=0.05, h_neg=1.0, r_max=1.0, eta=0.5,
                        epsilon=1e-6, format_weight=1.0, quality_weight=0.5, efficiency_weight=1.0, **columns):
    """juyongjiang/ReflexiCoder: `trajectory_format` + `cycle_count_regulation_iterative_quality` +
    `cycle_count_regulation_efficient`, weighted 1.0 / 0.5 / 1.0 (configs/reflexicoder/config_grpo.yaml).

    `reflexicoder_parse` reads think -> answer -> (reflection -> answer)+; r_1..r_T = `scorer(answer, gold)` of
    each answer's content (the reference: the code sandbox's test pass rate; here by default `verify_answer` with
    `verifier` against the `answer` / `solution` column). Constants (alpha .. epsilon) are the reference's
    (rewards.py); P, R_traj and E are 0 when the format is invalid. A row whose gold does not parse is None.
    P(n) counts reflections, as the code does: n <= 5 reflections (up to 6 answers) keep P = 1, where the catalog
    reads "<= 5 answers" (the system prompt's limit); the code is the reference.
    language: None (default, our reading for non-code tasks) accepts any answer; "python" is the reference's
    `sample_language`, which requires a ```python fence in every answer.
    Not reproduced: the reference caches (format, n, answers, scores) by `hash(completion)` across calls, so an
    identical completion to another problem reuses the first problem's scores.
    Logs rewards/reflexicoder/format, /reflections, /cycle, /quality, /efficiency (means).
    """
    check_scorer("reflexicoder", scorer, verifier)
    if language is not None and (not isinstance(language, str) or not language or "`" in language):
        raise ValueError(f"reflexicoder: language must be None or a fence name like 'python', got {language!r}")
    if not (s > 0 and eps >= 0):
        raise ValueError(f"reflexicoder: need s > 0 and eps >= 0, got s={s}, eps={eps}")
    scorer = scorer or default_scorer(verifier)
    golds = base.column(columns, "answer", "solution", required="reflexicoder")
    step_hp = dict(s=s, eps=eps, h_pos=h_pos, h_neg=h_neg, r_max=r_max)
    out, parts = [], []
    for text, gold in zip(base.texts(completions), golds, strict=True):
        fmt, n, answers = reflexicoder_parse(text, language=language)
        p = cycle_regulation(n, alpha=alpha, beta=beta, gamma=gamma, delta=delta) if fmt else 0.0
        quality = effic = 0.0
        if fmt and n:
            r = [scorer(a, str(gold)) for a in answers]
            if any(x is None for x in r):
                out.append(None)
                continue
            r = [float(x) for x in r]
            quality, effic = iterative_quality(r, lam=lam, eta=eta, **step_hp), efficiency(r, n, epsilon=epsilon)
        parts.append((fmt, n, p, p * quality, p * effic))
        out.append(format_weight * fmt + quality_weight * p * quality + efficiency_weight * p * effic)
    for k, name in enumerate(("format", "reflections", "cycle", "quality", "efficiency")):
        if parts:
            base.log(columns, name, sum(row[k] for row in parts) / len(parts))
    return out
