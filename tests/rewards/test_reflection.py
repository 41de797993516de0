"""srpo-reflection and reflexicoder: parsing, the reward terms, and the catalog's properties."""
import math

import pytest

from workbench import registry
from workbench.rewards.reflection import (blocks, cycle_regulation, efficiency, iterative_quality, reflexicoder_parse,
                                          reflexicoder_reward, srpo_format_ok, srpo_length_reward,
                                          srpo_reflection_reward, step_quality)


def srpo_text(a1="46", a2="46", think1="think one", reflection="check it", think2="think two"):
    return (f"<think>{think1}</think><answer>{a1}</answer><reflection>{reflection}</reflection>"
            f"<think>{think2}</think><answer>{a2}</answer>")


# ----- SRPO ----------------------------------------------------------------------------------------------

@pytest.mark.covers("srpo-reflection")
def test_srpo_registered_with_reference_defaults():
    e = registry.get("reward", "srpo-reflection")
    assert e.defaults == {"scorer": None, "verifier": "exact", "length_weight": 0.1, "count_tokens": None,
                          "choices": "abcd", "reference_bug": False}


@pytest.mark.covers("srpo-reflection")
def test_srpo_transition_order_at_fixed_format_and_length():
    """Catalog test (1): wrong -> right > right -> right > right -> wrong > wrong -> wrong; same layout and lengths."""
    pairs = [("47", "46"), ("46", "46"), ("46", "47"), ("47", "48")]
    out = srpo_reflection_reward([srpo_text(a, b) for a, b in pairs], answer=["46"] * 4)
    assert out[0] > out[1] > out[2] > out[3]
    assert [r - out[3] for r in out] == pytest.approx([1.0, 0.75, 0.25, 0.0])  # the reference's table


@pytest.mark.covers("srpo-reflection")
def test_srpo_length_bell_peaks_at_the_target_and_is_symmetric():
    """Catalog test (2): exp(-(|L - T| / (T_max - T))^2), T = 2 (think1 + answer1), T_max = 2.5 (same)."""
    assert srpo_length_reward(20, 6, 4) == 1.0
    for d in (1, 3, 7.5):
        assert srpo_length_reward(20 + d, 6, 4) == pytest.approx(srpo_length_reward(20 - d, 6, 4))
        assert srpo_length_reward(20 + d, 6, 4) < 1.0
    assert srpo_length_reward(25, 6, 4) == pytest.approx(math.exp(-1))  # L = T_max
    assert srpo_length_reward(5, 0, 0) == 0.0
    # in the reward: L = len(text) = 184 characters = 2 (82 + 10), the first think + answer: the full 0.1
    text = srpo_text("1" * 10, "2", think1="t" * 82, reflection="r", think2="u")
    assert len(text) == 184 and srpo_format_ok(text)
    (r,) = srpo_reflection_reward([text], answer=["7"], choices="")
    assert r == pytest.approx(0.0 + 0.5 + 0.1)


@pytest.mark.covers("srpo-reflection")
def test_srpo_malformed_structure_gets_no_format_reward():
    """Catalog test (3): exactly two think, two answer, one reflection, non-empty, whitespace between."""
    good = [srpo_text(), "free text first " + srpo_text(), srpo_text().replace("><", ">\n \t<") + "\n"]
    bad = [srpo_text(think1=""), srpo_text(reflection=""), srpo_text(a2=""), srpo_text() + " trailing",
           srpo_text().replace("</answer><reflection>", "</answer> x <reflection>"),
           srpo_text() + "<answer>3</answer>", srpo_text().replace("<reflection>check it</reflection>", ""),
           "<think>a</think>" + srpo_text(), srpo_text(reflection="<think>r"), "<reflection>" + srpo_text(),
           srpo_text().replace("<think>think two</think>", "") + "<think>x</think>"]
    assert [srpo_format_ok(t) for t in good] == [True] * len(good)
    assert [srpo_format_ok(t) for t in bad] == [False] * len(bad)
    assert srpo_format_ok(srpo_text(think1=" "))  # `.+?`: one whitespace character is not empty


@pytest.mark.covers("srpo-reflection")
def test_srpo_single_answer_and_tagless_completions():
    """One answer block scores 0.5 when right; a tagless completion is verified whole, by the environment's verdict
    when given: right -> right 0.75. The reference as shipped (reference_bug=True) scores all of them 0."""
    texts = ["<think>x</think><answer>46</answer>", "<think>x</think><answer>4</answer>", "46", "45", ""]
    assert srpo_reflection_reward(texts, answer=["46"] * 5) == [0.5, 0.0, 0.75, 0.0, 0.0]
    assert srpo_reflection_reward(texts, answer=["46"] * 5, scores=[0.0, 1.0, 0.0, 1.0, 1.0]) == \
        [0.5, 0.0, 0.0, 0.75, 0.0]
    assert srpo_reflection_reward(texts, answer=["46"] * 5, reference_bug=True) == [0.0] * 5


@pytest.mark.covers("srpo-reflection")
def test_srpo_unparsable_gold_is_none_or_the_references_one():
    text = srpo_text("x", "y")
    assert srpo_reflection_reward([text], answer=[""]) == [None]
    (r,) = srpo_reflection_reward([text], answer=[""], reference_bug=True)
    length = 0.1 * srpo_length_reward(len(text), len("think one"), 1)
    assert r == pytest.approx(1.0 + 0.5 + length)


@pytest.mark.covers("srpo-reflection")
def test_srpo_multiple_choice_rescue_and_custom_scorer():
    """A zero accuracy becomes 1.0 when the gold is a letter the last answer alone contains (the reference)."""
    texts = [srpo_text("(b)", "(c)"), srpo_text("(c)", "(c) or b"), srpo_text("c", "(C)")]
    out = srpo_reflection_reward(texts, answer=["C"] * 3, scorer=lambda answer, gold: False)
    fixed = [r - 1.0 for r in out]
    assert fixed[0] == pytest.approx(fixed[2]) and out[1] < 1.0 and out[0] > 1.0
    assert srpo_reflection_reward(texts[:1], answer=["C"], scorer=lambda a, g: False, choices="") == \
        pytest.approx([out[0] - 1.0])
    seen = []
    srpo_reflection_reward([srpo_text("1", "2")], answer=["2"], scorer=lambda a, g: seen.append((a, g)) or True)
    assert seen == [("<answer>1</answer>", "2"), ("<answer>2</answer>", "2")]  # blocks with their tags, as parsed


@pytest.mark.covers("srpo-reflection")
def test_srpo_logs_its_terms_and_refuses_bad_options():
    logged = {}
    srpo_reflection_reward([srpo_text("47", "46"), "x"], answer=["46", "46"],
                           log_metric=lambda k, v: logged.__setitem__(k, v))
    assert set(logged) == {"accuracy", "format", "length"}
    assert logged["accuracy"] == 0.5 and logged["format"] == 0.25
    with pytest.raises(ValueError, match="srpo-reflection.*'answer' or 'solution'"):
        srpo_reflection_reward(["x"])
    with pytest.raises(ValueError, match="scorer"):
        srpo_reflection_reward(["x"], answer=["1"], scorer="exact")
    with pytest.raises(ValueError, match="verifier"):
        srpo_reflection_reward(["x"], answer=["1"], verifier="f1")
    with pytest.raises(ValueError, match="length_weight"):
        srpo_reflection_reward(["x"], answer=["1"], length_weight=-1)
    with pytest.raises(ValueError, match="count_tokens"):
        srpo_reflection_reward(["x"], answer=["1"], count_tokens=3)
    with pytest.raises(ValueError, match="choices"):
        srpo_reflection_reward(["x"], answer=["1"], choices=["a", "b"])


# ----- ReflexiCoder --------------------------------------------------------------------------------------

def trajectory(*answers, think="plan", reflection="check"):
    body = f"<think>{think}</think>\n<answer>{answers[0]}</answer>"
    for a in answers[1:]:
        body += f"\n<reflection>{reflection}</reflection>\n<answer>{a}</answer>"
    return body


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_registered_with_reference_constants():
    e = registry.get("reward", "reflexicoder")
    assert {"alpha": 0.1, "beta": 2.0, "gamma": 0.05, "delta": 0.1, "lam": 0.2, "s": 0.1, "eps": 1e-4, "h_pos": 0.05,
            "h_neg": 1.0, "r_max": 1.0, "eta": 0.5, "epsilon": 1e-6, "format_weight": 1.0, "quality_weight": 0.5,
            "efficiency_weight": 1.0}.items() <= e.defaults.items()


@pytest.mark.covers("reflexicoder")
def test_cycle_regulation_is_one_up_to_five_reflections_then_below():
    """Catalog test (1), with the sin ripple beyond."""
    assert cycle_regulation(0) == 0.0
    assert [cycle_regulation(n) for n in range(1, 6)] == [1.0] * 5
    tail = [cycle_regulation(n) for n in range(6, 30)]
    assert all(0 < p < 1 for p in tail)
    assert tail[0] == pytest.approx(1 / 1.9 * math.exp(-0.15) * 1.1)  # n = 6: sin(3 pi / 2) = -1


@pytest.mark.covers("reflexicoder")
def test_step_quality_stagnation_improvement_and_decline():
    """Catalog test (2): stagnation below the max -1, at the max +h_pos; 0 -> 1 gives tanh(10)."""
    assert step_quality(0.0, 0.0) == -1.0 and step_quality(0.4, 0.40005) == -1.0
    assert step_quality(1.0, 1.0) == 0.05
    assert step_quality(0.0, 1.0) == math.tanh(10)
    assert step_quality(0.5, 0.3) == pytest.approx(-math.tanh(2))


@pytest.mark.covers("reflexicoder")
def test_efficiency_grows_with_the_last_score_and_the_gain():
    """Catalog test (3)."""
    assert efficiency([0.0, 1.0], 1) > efficiency([0.0, 0.5], 1) > efficiency([0.0, 0.0], 1)
    assert efficiency([0.0, 1.0], 2) > efficiency([0.5, 1.0], 2) > efficiency([1.0, 1.0], 2)
    assert efficiency([0.0, 0.5, 1.0], 2) == pytest.approx(1 / 2 + 1 / (1 + 1e-6))


@pytest.mark.covers("reflexicoder")
def test_iterative_quality_weights_later_rounds_more():
    r = [0.0, 0.0, 1.0]
    w2, w3 = math.exp(0.2), math.exp(0.4)
    expected = 1.0 + 0.5 * (w2 * -1.0 + w3 * math.tanh(10)) / (w2 + w3)
    assert iterative_quality(r) == pytest.approx(expected)


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_parse():
    assert reflexicoder_parse(trajectory("1", "2", "3")) == (1.0, 2, ["1", "2", "3"])
    assert reflexicoder_parse("  junk <think> p </think> x <answer> 1 </answer> y <reflection>r</reflection>"
                              "<answer>\n2\n</answer> \n") == (1.0, 1, ["1", "2"])  # text between blocks is skipped
    invalid = [trajectory("1"), trajectory("1", "2") + " trailing", "<answer>1</answer>" + trajectory("2", "3")[16:],
               trajectory("1", "2").replace("</think>", ""), trajectory("1", "2") + "<reflection>r</reflection>",
               trajectory("1", "2").replace("<answer>2</answer>", "<answer>2")]
    assert [reflexicoder_parse(t) for t in invalid] == [(0.0, 0, [])] * len(invalid)


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_language_fence():
    """language='python' (the reference's): every answer needs a ```python fence; the block then closes at the first
    </answer> after the fence (the reference's lazy regex)."""
    code = "```python\nprint(1)\n```"
    good = trajectory(code, code)
    assert reflexicoder_parse(good, language="python") == (1.0, 1, [code, code])
    # the first "answer" (no fence of its own) runs on to the second's fence and swallows the reflection
    assert reflexicoder_parse(trajectory("1", code), language="python") == (0.0, 0, [])
    assert reflexicoder_parse(trajectory("1", code))[:2] == (1.0, 1)
    assert reflexicoder_parse(trajectory("1", "2"), language="python") == (0.0, 0, [])


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_total_on_known_trajectories():
    """R = F + 0.5 P R_traj + P E with r_t from the exact verifier."""
    (wrong_then_right, invalid, right_right) = reflexicoder_reward(
        [trajectory("45", "46"), "46", trajectory("46", "46")], answer=["46"] * 3)
    assert wrong_then_right == pytest.approx(1.0 + 0.5 * (1.0 + 0.5 * math.tanh(10)) + (1.0 + 1 / (1 + 1e-6)))
    assert invalid == 0.0
    assert right_right == pytest.approx(1.0 + 0.5 * (1.0 + 0.5 * 0.05) + 1.0)
    (six,) = reflexicoder_reward([trajectory(*["46"] * 7)], answer=["46"])
    p6 = cycle_regulation(6)
    assert six == pytest.approx(1.0 + 0.5 * p6 * (1.0 + 0.5 * 0.05) + p6 * (1 / 6))


@pytest.mark.covers("reflexicoder")
def test_reflexicoder_scorer_none_gold_and_logs():
    rates = {"a": 0.25, "b": 0.75}
    (r,) = reflexicoder_reward([trajectory("a", "b")], answer=["-"], scorer=lambda ans, gold: rates[ans])
    expected_q = 0.75 + 0.5 * math.tanh(5)
    assert r == pytest.approx(1.0 + 0.5 * expected_q + (0.75 + 0.5 / (1 + 1e-6)))
    assert reflexicoder_reward([trajectory("1", "2"), "x"], answer=["", ""]) == [None, 0.0]
    logged = {}
    reflexicoder_reward([trajectory("1", "2"), "x"], answer=["2", "2"],
                        log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged == {"format": 0.5, "reflections": 0.5, "cycle": 0.5,
                      "quality": pytest.approx(0.5 * (1 + 0.5 * math.tanh(10))),
                      "efficiency": pytest.approx(0.5 * (1 + 1 / (1 + 1e-6)))}
    for kw in [{"scorer": 3}, {"verifier": "f1"}, {"language": ""}, {"s": 0.0}]:
        with pytest.raises(ValueError, match="reflexicoder"):
            reflexicoder_reward(["x"], answer=["1"], **kw)


@pytest.mark.covers("srpo-reflection", "reflexicoder")
def test_parsers_score_adversarial_input():
    """Unclosed tags and fences by the 100k, a million spaces: no answer block to read, so 0 from both rewards (their
    time per size: bench/bench_parsers.py)."""
    texts = ["<think>" + " " * 1_000_000, "<think>a</think>" + "<answer>" * 100_000, "<answer> " * 100_000,
             "<think>x</think><answer>" + "```python" * 100_000, "caf\udce9", ""]
    for text in texts:
        assert reflexicoder_reward([text], answer=["1"], language="python") == [0.0]
        assert reflexicoder_reward([text], answer=["1"]) == [0.0]
        assert srpo_reflection_reward([text], answer=["1"]) == [0.0]
    assert blocks("<a>1</a><a>2<a>3</a><a>4", "a") == ["1", "2<a>3"]
