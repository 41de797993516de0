"""Length-aware rewards against their references, value for value on random inputs.

TRL 1.16's `get_cosine_scaled_reward` and `get_soft_overlong_punishment` are called directly (TRL's correctness is
math-verify on `solution`; the same verdicts reach ours as `scores`). open-r1's and demystify-long-cot's cosine
rewards and ARLCP's scoring with its reward manager's group statistics are transcribed in
`formulas_rewards_length.py` (repositories, files, functions and commits cited there), each given the verdicts.
"""
from __future__ import annotations

import random

import pytest
import torch

from tests.anchors import formulas_rewards_length as ref
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.rewards.arlcp import arlcp_rewards, reflection_count
from workbench.rewards.length import cosine_length_reward, soft_overlong_reward

TOL = dict(rel=1e-12, abs=1e-12)


def boxed_case(seed, n=40, max_ids=1500):
    """Conversational completions with a boxed answer (right for even rows), their solutions, random token ids
    up to 1.5 L_max (past the clamp), and which rows are right."""
    rng = random.Random(seed)
    solutions, completions, ids, right = [], [], [], []
    for i in range(n):
        gold = rng.randrange(1, 50)
        answer = gold if i % 2 == 0 else gold + rng.randrange(1, 9)
        solutions.append(f"${gold}$")
        completions.append([{"role": "assistant", "content": f"Working it out. The answer is $\\boxed{{{answer}}}$."}])
        ids.append([7] * rng.randrange(0, max_ids))
        right.append(answer == gold)
    return completions, solutions, ids, right


@pytest.mark.covers("cosine-length")
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("bounds", [{}, dict(min_value_wrong=-2.0, max_value_wrong=-0.1, min_value_correct=0.2,
                                             max_value_correct=3.0)])
@pytest.mark.usefixtures("math_verify")  # TRL's accuracy verdicts
def test_cosine_length_matches_trl_get_cosine_scaled_reward(seed, bounds, trl_rewards):
    completions, solutions, ids, right = boxed_case(seed)
    theirs = trl_rewards.get_cosine_scaled_reward(max_len=1000, **bounds)(completions, solutions, ids)
    verdicts = trl_rewards.accuracy_reward(completions, solutions)
    assert verdicts == [float(r) for r in right]  # math-verify agrees with how the rows were built
    ours = cosine_length_reward(completions, ids, scores=verdicts, **bounds)  # max_len defaults to TRL's 1000
    assert ours == pytest.approx(theirs, **TOL)
    assert any(len(i) > 1000 for i in ids)  # the clamp was exercised


@pytest.mark.covers("cosine-length")
@pytest.mark.usefixtures("math_verify")  # TRL's accuracy verdicts
def test_cosine_length_as_a_trl_reward_checks_answers_against_solution_as_trl_does(trl_rewards):
    """Called as TRL calls it (completions, solution, completion_ids; no `scores`): our correctness is math-verify in
    TRL's configuration, so the values match, None for an unparseable gold included."""
    completions, solutions, ids, _ = boxed_case(5, n=24)
    solutions[3] = solutions[10] = "no number here"
    theirs = trl_rewards.get_cosine_scaled_reward(max_len=1000)(completions, solutions, ids)
    ours = cosine_length_reward(completions=completions, solution=solutions, completion_ids=ids)
    assert [o is None for o in ours] == [t is None for t in theirs] and ours[3] is None
    assert [o for o in ours if o is not None] == pytest.approx([t for t in theirs if t is not None], **TOL)


@pytest.mark.covers("soft-overlong")
@pytest.mark.parametrize("max_len,buffer", [(20, 4), (100, 20), (12, 12), (16, 0)])
def test_soft_overlong_matches_trl_get_soft_overlong_punishment(max_len, buffer, trl_rewards):
    rng = random.Random(max_len)
    ids = [[3] * rng.randrange(0, 2 * max_len) for _ in range(60)] + [[3] * (max_len - buffer), [3] * max_len]
    theirs = trl_rewards.get_soft_overlong_punishment(max_len, buffer)(ids)
    ours = soft_overlong_reward(["x"] * len(ids), ids, max_completion_len=max_len, buffer=buffer)  # no max_new_tokens
    assert ours == pytest.approx(theirs, **TOL)


@pytest.mark.covers("cosine-length")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cosine_length_matches_open_r1_with_its_conventions(seed):
    """open-r1: no clamp (clamp=False), 1.0 for an unparseable gold answer (reference_bug=True), |y| in characters
    (our token ids are given one per character here)."""
    rng = random.Random(seed)
    contents = ["y" * rng.randrange(0, 2600) for _ in range(50)]
    verdicts = [rng.choice([True, False, None]) for _ in contents]
    theirs = ref.openr1_cosine_scaled_reward(contents, verdicts, max_len=1000)
    scores = [None if v is None else float(v) for v in verdicts]
    ours = cosine_length_reward(contents, [list(c) for c in contents], scores=scores, clamp=False, reference_bug=True)
    assert ours == pytest.approx(theirs, **TOL)
    # TRL's and our default conventions differ exactly there
    default = cosine_length_reward(contents, [list(c) for c in contents], scores=scores)
    assert [d is None for d in default] == [v is None for v in verdicts]
    assert any(d is not None and d != pytest.approx(t) for d, t in zip(default, theirs))


@pytest.mark.covers("cosine-length")
@pytest.mark.parametrize("bounds,exceed", [
    (dict(min_value_wrong=-10.0, max_value_wrong=0.0, min_value_correct=1.0, max_value_correct=2.0), -10.0),  # paper
    (dict(min_value_wrong=-1.0, max_value_wrong=0.0, min_value_correct=0.0, max_value_correct=1.0), None),  # CLI
])
def test_cosine_length_matches_demystify_long_cot(bounds, exceed):
    """demystify-long-cot: L_max = max_new_tokens (max_len=None), no clamp, |y| + 16 >= L_max gets exceed_length
    (0 when unset), repetition penalty off (its default)."""
    rng = random.Random(3)
    max_new_tokens = 64
    lengths = [rng.randrange(0, max_new_tokens + 1) for _ in range(80)] + [max_new_tokens - 16, max_new_tokens - 17]
    scores = [float(rng.random() < 0.5) for _ in lengths]
    texts = ["w " * n for n in lengths]
    theirs = ref.demystify_cosine_reward(texts, lengths, scores, max_len=max_new_tokens, exceed_length=exceed,
                                         **bounds)
    ours = cosine_length_reward(texts, [[5] * n for n in lengths], scores=scores, max_new_tokens=max_new_tokens,
                                max_len=None, clamp=False, exceed_reward=0.0 if exceed is None else exceed,
                                exceed_margin=16, **bounds)
    assert ours == pytest.approx(theirs, **TOL)


# ----------------------------------------------------------------------------------------------------------- ARLCP

WORDS = ["wait", "Wait", "but", "butter", "check", "checking", "double-check", "hold on", "Hold On", "hmm", "oh",
         "ohm", "alternatively", "alternative", "another thought", "think again", "verify", "however", "so", "x", "7",
         "rebut", "hmmm", "oh,", "(wait)", "WAIT!"]


def random_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.mark.covers("arlcp")
def test_reflection_count_matches_arlcp_count_keywords_counter():
    rng = random.Random(0)
    for _ in range(200):
        text = random_text(rng, rng.randrange(0, 60))
        assert reflection_count(text) == ref.count_keywords_counter(text), text


def arlcp_case(seed, groups=4, G=8, malformed=True):
    """R1-style responses: reasoning with reflection words, one </think> (sometimes none, two, or an opening
    <think> when `malformed`), then a boxed answer, right about half the time; random token lengths."""
    rng = random.Random(seed)
    prompts, texts, lengths, golds = [], [], [], []
    for g in range(groups):
        gold = str(rng.randrange(100))
        for _ in range(G):
            think = random_text(rng, rng.randrange(0, 120))
            answer = gold if rng.random() < 0.6 else str(int(gold) + 1)
            form = rng.choice(["ok", "ok", "ok", "none", "two", "open"]) if malformed else "ok"
            head = {"ok": f"{think}</think>", "none": think, "two": f"{think}</think> hmm </think>",
                    "open": f"<think>{think}</think>"}[form]
            prompts.append(f"question {g}")
            texts.append(f"{head} So \\boxed{{{answer}}}")
            lengths.append(rng.randrange(1, 400))
            golds.append(gold)
    return prompts, texts, lengths, golds


def arlcp_ours(texts, lengths, golds, groups, G, **hp):
    answered = [float(ref.rule_base_reward(ref.extract_answer(t), g)) for t, g in zip(texts, golds)]
    batch = RolloutBatch.from_rewards(answered, torch.arange(groups).repeat_interleave(G), lengths)
    batch.scores = batch.rewards.clone()
    batch.completions = list(texts)
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=groups, max_new_tokens=400)
    return arlcp_rewards(batch, ctx, **hp).rewards.tolist()


@pytest.mark.covers("arlcp")
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_arlcp_matches_arlcp_rm_with_its_reward_manager_statistics(seed):
    """reference_bug=True: statistics over every right answer (the manager does not check the format)."""
    prompts, texts, lengths, golds = arlcp_case(seed)
    theirs = ref.arlcp_manager(prompts, texts, lengths, golds)
    ours = arlcp_ours(texts, lengths, golds, 4, 8, require_think=True, reference_bug=True)
    assert ours == pytest.approx(theirs, **TOL)


@pytest.mark.covers("arlcp")
@pytest.mark.parametrize("seed", [0, 1])
def test_arlcp_fix_only_differs_from_the_reference_when_a_right_answer_is_malformed(seed):
    prompts, texts, lengths, golds = arlcp_case(seed, malformed=False)
    theirs = ref.arlcp_manager(prompts, texts, lengths, golds)
    for hp in (dict(require_think=True), dict(require_think=False)):  # well-formed rows: every reading agrees
        assert arlcp_ours(texts, lengths, golds, 4, 8, **hp) == pytest.approx(theirs, **TOL)
    prompts, texts, lengths, golds = arlcp_case(seed)  # now with malformed right answers
    theirs = ref.arlcp_manager(prompts, texts, lengths, golds)
    fixed = arlcp_ours(texts, lengths, golds, 4, 8, require_think=True)
    assert fixed != pytest.approx(theirs, **TOL)
    assert [f == 0 for f in fixed] == [t == 0 for t in theirs]  # the same rows score 0; only penalties move
