"""Agreement of accuracy-reward, format-reward, repetition-penalty, srpo-reflection and reflexicoder with their
references, value for value on the same inputs (rewards have no gradient).

TRL 1.16 (`trl.rewards`, the `trl_rewards` fixture) is called directly, with its conversational completions; open-r1,
SRPO and ReflexiCoder are transcribed in `tests/anchors/formulas_rewards_format.py` (repositories and commits cited
there). grpo-ptr has no public reward code (abstract-only), so nothing to compare. Only the tests that call TRL or
math-verify (the accuracy references) skip without them.
"""
from __future__ import annotations

import random
import re

import pytest

from tests.anchors import formulas_rewards_format as ref
from workbench.rewards.accuracy import accuracy_reward
from workbench.rewards.format import format_reward
from workbench.rewards.reflection import reflexicoder_parse, reflexicoder_reward, srpo_reflection_reward
from workbench.rewards.repetition import repetition_penalty


def chat(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def random_texts(pieces, n, max_len, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, max_len))) for _ in range(n)]


# (completion, solution): boxed / inline / display LaTeX, units, equivalent forms, junk, unparsable golds
ACCURACY_CASES = [
    (r"\boxed{\frac{1}{3}}", r"\frac{1}{3}"), (r"My answer is \boxed{\frac{1}{2}}", r"\frac{1}{3}"),
    (r"\boxed{0.5}", "1/2"), (r"The answer is $\frac{2}{4}$", "0.5"), ("The final answer is $46$", "46"),
    ("46", "46"), ("The answer is 46", "46"), (r"\boxed{46} and later $47$", "46"), ("$47$ then \\boxed{46}", "46"),
    (r"\boxed{10\%}", "0.1"), (r"\boxed{3\text{ cm}}", "3"), (r"\[ x = \frac{\pi}{2} \]", r"\frac{\pi}{2}"),
    (r"\boxed{x^2+2x+1}", "(x+1)^2"), (r"\boxed{\{1, 2\}}", r"\{1,2\}"), (r"\boxed{(1, 2]}", "(1,2]"),
    (r"$\sqrt{2}$ is it", r"\sqrt{2}"), (r"\boxed{2}", "Paris"), ("", "46"), ("caf\udce9 \\boxed{3}", "3"),
    (r"\boxed{", "3"), (r"\boxed{1}\boxed{2}", "2"), (r"answer: $-7$", "-7"), (r"\boxed{1,000}", "1000"),
    (r"<think>\boxed{5}</think> so \boxed{6}", "6"), (r"<think>\boxed{5}</think> so \boxed{6}", "5"),
    (r"<think>no close \boxed{5}", "5"), (r"a </think> b </think> \boxed{9}", "9"), (r"$\infty$", r"\infty"),
    (r"\[ x = \frac{\pi}{2} \]", r"$\frac{\pi}{2}$"), (r"\boxed{x^2+2x+1}", "$(x+1)^2$"),
    (r"\boxed{\{1, 2\}}", r"$\{1,2\}$"), (r"\boxed{(1, 2]}", "$(1,2]$"), (r"\boxed{[1, 2]}", "$(1,2]$"),
]


@pytest.mark.covers("accuracy-reward")
@pytest.mark.usefixtures("math_verify")
def test_accuracy_reward_matches_trl(trl_rewards):
    texts, golds = zip(*ACCURACY_CASES)
    theirs = trl_rewards.accuracy_reward(chat(texts), list(golds))
    assert {1.0, 0.0, None} <= set(theirs)
    assert accuracy_reward(list(texts), solution=list(golds)) == theirs
    assert accuracy_reward(chat(texts), solution=list(golds), verifier="math") == theirs  # conversational input
    assert accuracy_reward(list(texts), answer=list(golds)) == theirs                     # our column name


@pytest.mark.covers("accuracy-reward")
@pytest.mark.parametrize("delimiters", [None, ["</think>"], ["</reason>", "</think>"], ["</think>", "so"]])
@pytest.mark.usefixtures("math_verify")
def test_reasoning_accuracy_reward_matches_trl(delimiters, trl_rewards):
    texts, golds = zip(*ACCURACY_CASES)
    theirs = trl_rewards.reasoning_accuracy_reward(chat(texts), list(golds), reasoning_delimiters=delimiters)
    ours = accuracy_reward(list(texts), solution=list(golds), reasoning_delimiters=delimiters or ["</think>"])
    assert ours == theirs


@pytest.mark.covers("accuracy-reward")
@pytest.mark.usefixtures("math_verify")
def test_accuracy_reward_agrees_with_open_r1_on_common_inputs():
    """open-r1 normalizes a little differently (boxed="all", no malformed-operator fixes); on these it agrees."""
    cases = [c for c in ACCURACY_CASES if c[0] != "caf\udce9 \\boxed{3}"]
    texts, golds = zip(*cases)
    assert accuracy_reward(list(texts), solution=list(golds)) == ref.open_r1_accuracy_reward(chat(texts), list(golds))


FORMAT_PIECES = ["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "\t", "\u2003", "a", "1", "<", ">",
                 "think", "/", "<think", "</think"]


@pytest.mark.covers("format-reward")
def test_think_format_reward_matches_trl_on_random_text(trl_rewards):
    texts = random_texts(FORMAT_PIECES, 4000, 8, seed=0)
    texts += ["<think>" + t for t in random_texts(FORMAT_PIECES, 2000, 8, seed=1)]
    theirs = trl_rewards.think_format_reward(chat(texts))
    assert sum(theirs) > 300  # the sample holds many matches, not only failures
    assert format_reward(texts) == theirs
    # strip=True is TRL on the stripped completion
    assert format_reward(texts, strip=True) == trl_rewards.think_format_reward(chat([t.strip() for t in texts]))


@pytest.mark.covers("format-reward")
def test_think_format_regex_and_ours_agree_on_leading_whitespace(trl_rewards):
    """The one whitespace sensitivity of TRL's pattern: leading whitespace before <think> fails (re.match + ^)."""
    texts = [" <think>a</think>", "\n<think>a</think>", "<think>a</think> ", "<think>\n\na\n</think>\n\nb"]
    assert trl_rewards.think_format_reward(chat(texts)) == format_reward(texts) == [0.0, 0.0, 1.0, 1.0]


@pytest.mark.covers("format-reward")
def test_open_r1_format_reward_is_ours_on_its_layout():
    """open-r1 wants `<think>\\n..\\n</think>\\n<answer>\\n..\\n</answer>` exactly; on texts with every tag once and
    nothing after </answer>, everything it accepts we accept, and we also accept other whitespace (whitespace-
    insensitive); on its exact layout the two agree."""
    rng = random.Random(2)
    body = ["a", "1", " ", "\n", "<", ">", "x y"]
    layout = [f"<think>\n{b1}\n</think>\n<answer>\n{b2}\n</answer>" for b1, b2 in
              zip(random_texts(body, 300, 5, 3), random_texts(body, 300, 5, 4))]
    assert ref.open_r1_format_reward(chat(layout)) == format_reward(layout, tags=("think", "answer"),
                                                                    trailing="none") == [1.0] * 300
    tags = ["<think>", "</think>", "<answer>", "</answer>"]
    fillers = random_texts(["\n", " ", "a", "\n\n"], 5 * 4000, 3, seed=5)
    texts = []
    for i in range(4000):  # the four tags once each, in a random order (mostly the right one), fillers between
        order = tags if rng.random() < 0.7 else rng.sample(tags, 4)
        text = "".join(f + t for f, t in zip(fillers[5 * i:5 * i + 4], order))
        if text.endswith("</answer>"):
            texts.append(text + fillers[5 * i + 4].replace("a", ""))
    assert len(texts) > 1000
    theirs = ref.open_r1_format_reward(chat(texts))
    ours = format_reward(texts, tags=("think", "answer"), trailing="none")
    assert all(o >= t for o, t in zip(ours, theirs)) and sum(ours) > sum(theirs) > 0
    squeezed = [re.sub(r"\s+", "", t) for t, th in zip(texts, theirs) if th == 1.0]
    assert format_reward(squeezed, tags=("think", "answer"), trailing="none") == [1.0] * len(squeezed)


@pytest.mark.covers("format-reward")
def test_open_r1_tag_count_is_our_partial_credit_on_newline_delimited_tags():
    segments = ["<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>", "x", "y z"]
    texts = random_texts(segments, 3000, 7, seed=6)
    assert format_reward(texts, tags=("think", "answer"), partial=True) == ref.open_r1_tag_count_reward(chat(texts))


@pytest.mark.covers("repetition-penalty")
def test_token_repetition_penalty_matches_trl(trl_rewards):
    rng = random.Random(7)
    ids = [[rng.randint(0, rng.choice([2, 5, 50])) for _ in range(rng.randint(0, 30))] for _ in range(500)]
    for n, p_max in [(3, -1.0), (2, -0.5), (1, -2.0), (5, 0.0)]:
        theirs = trl_rewards.get_repetition_penalty_reward(ngram_size=n, max_penalty=p_max)(completion_ids=ids)
        ours = repetition_penalty([""] * len(ids), unit="tokens", n=n, max_penalty=p_max, completion_ids=ids)
        assert ours == theirs


@pytest.mark.covers("repetition-penalty")
def test_word_repetition_penalty_matches_open_r1():
    texts = random_texts(["the ", "The ", "cat ", "CAT\n", "sat", " ", "\t", "on ", "mat. "], 1000, 25, seed=8)
    for n, p_max in [(3, -1.0), (2, -0.5), (4, -1.5)]:
        theirs = ref.open_r1_get_repetition_penalty_reward(n, p_max)(chat(texts))
        assert repetition_penalty(texts, n=n, max_penalty=p_max) == pytest.approx(theirs, abs=1e-15)


# ----- SRPO ----------------------------------------------------------------------------------------------

SRPO_PIECES = ["<think>", "</think>", "<answer>", "</answer>", "<reflection>", "</reflection>", " ", "\n", "t", "r",
               "46", "47", r"$\boxed{46}$", "x"]


def srpo_texts(seed):
    rng = random.Random(seed)
    texts = random_texts(SRPO_PIECES, 600, 14, seed)
    for _ in range(600):  # near-valid layouts: right or wrong answers, some blocks empty, junk around
        a1, a2 = rng.choice(["46", "47", r"$\boxed{46}$", " 46 ", "", "(b)"]), rng.choice(["46", "48", "", "b c"])
        t1, r1, t2 = (rng.choice(["", "t", "think " * rng.randint(1, 9)]) for _ in range(3))
        sep = rng.choice(["", " ", "\n", " x "])
        text = (f"{rng.choice(['', 'pre ', '  '])}<think>{t1}</think>{sep}<answer>{a1}</answer>{sep}"
                f"<reflection>{r1}</reflection>{sep}<think>{t2}</think>{sep}<answer>{a2}</answer>")
        cut = rng.choice([len(text), len(text), rng.randint(0, len(text))])
        texts.append(text[:cut] + rng.choice(["", " ", "\n", " tail"]))
    return texts


def char_encode(text):
    return list(text)  # one token per character: our `count_tokens=len`


@pytest.mark.covers("srpo-reflection")
@pytest.mark.parametrize("fixed", [True, False])
@pytest.mark.usefixtures("math_verify")
def test_srpo_reward_matches_the_reference(fixed):
    """reference_bug=False is the reference with its return arity fixed; True is the reference as shipped."""
    texts = srpo_texts(9)
    golds = [random.Random(i).choice(["46", "b", "(B)"]) for i in range(len(texts))]
    theirs = [ref.reward_func_row(t, g, char_encode, fixed=fixed) for t, g in zip(texts, golds)]
    ours = srpo_reflection_reward(texts, answer=golds, scorer=ref.srpo_verify_scorer, reference_bug=not fixed)
    assert ours == pytest.approx(theirs, abs=1e-12)
    assert len({round(v, 6) for v in theirs}) > 10  # the sample covers many reward values


@pytest.mark.covers("srpo-reflection")
@pytest.mark.usefixtures("math_verify")
def test_srpo_unparsable_gold_only_differs_by_the_documented_none():
    texts = srpo_texts(10)[:300]
    theirs = [ref.reward_func_row(t, "", char_encode, fixed=True) for t in texts]
    ours = srpo_reflection_reward(texts, answer=[""] * len(texts), scorer=ref.srpo_verify_scorer)
    for t, o, th in zip(texts, ours, theirs):
        assert o is None or (o == th == 0.0 and not t.strip())
    shipped = [ref.reward_func_row(t, "", char_encode, fixed=False) for t in texts]
    assert srpo_reflection_reward(texts, answer=[""] * len(texts), scorer=ref.srpo_verify_scorer,
                                  reference_bug=True) == pytest.approx(shipped, abs=1e-12)


@pytest.mark.covers("srpo-reflection")
def test_srpo_format_matches_the_reference_regex():
    texts = srpo_texts(11)
    from workbench.rewards.reflection import srpo_format_ok

    theirs = [ref.format_reward_func(t.strip()) for t in texts]
    assert [0.5 if srpo_format_ok(t.strip()) else 0.0 for t in texts] == theirs
    assert 30 < sum(v > 0 for v in theirs) < len(texts) - 30


# ----- ReflexiCoder --------------------------------------------------------------------------------------

def reflexicoder_texts(seed, code):
    rng = random.Random(seed)
    pieces = ["<think>", "</think>", "<answer>", "</answer>", "<reflection>", "</reflection>", " ", "\n", "x",
              "1", "2", code]
    texts = random_texts(pieces, 800, 12, seed)
    for _ in range(800):
        options = [f"{code} 2", f"1 {code}", f"{code}\n1"] + ([] if rng.random() < 0.5 else ["1", "2", " 1 ", ""])
        answers = [rng.choice(options) for _ in range(rng.randint(1, 9))]
        junk = lambda: rng.choice(["", "", " ", "\n", " junk "])  # noqa: E731
        text = f"{junk()}<think>{rng.choice(['', 'plan'])}</think>{junk()}<answer>{answers[0]}</answer>"
        for a in answers[1:]:
            text += f"{junk()}<reflection>{rng.choice(['', 'r'])}</reflection>{junk()}<answer>{a}</answer>"
        texts.append(text[:rng.choice([len(text), len(text), rng.randint(0, len(text))])] + junk())
    return texts


def pass_rate(answer, gold):
    """A stand-in for the code sandbox: the share of '1', '2' characters that equal the gold digit."""
    digits = [c for c in answer if c in "12"]
    return digits.count(gold) / len(digits) if digits else 0.0


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_matches_the_reference_with_code_fences():
    code = "```python\nprint(1)\n```"
    texts = reflexicoder_texts(12, code)
    parser = ref.CompletionParser("python")
    parsed = [parser.parse(t) for t in texts]
    assert [reflexicoder_parse(t, language="python") for t in texts] == parsed
    assert 50 < sum(p[0] for p in parsed) < len(texts) - 50 and max(p[1] for p in parsed) >= 6
    theirs = [ref.reflexicoder_total(t, "1", pass_rate) for t in texts]
    ours = reflexicoder_reward(texts, answer=["1"] * len(texts), scorer=pass_rate, language="python")
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_without_fences_is_the_reference_parser_without_them():
    """language=None (our reading for non-code answers) = the reference's parser with the fence dropped from its
    answer pattern; everything else unchanged."""
    parser = ref.CompletionParser("python")
    parser.answer_re = re.compile(r"<answer>\s*([\s\S]*?)\s*</answer>", re.MULTILINE)
    texts = reflexicoder_texts(13, "`")
    assert [reflexicoder_parse(t) for t in texts] == [parser.parse(t) for t in texts]
