"""Length-aware rewards of public repositories, transcribed (their names and order of operations) where they cannot
be imported: open-r1's and demystify-long-cot's cosine-scaled reward, and ARLCP's reflection / length penalty with
the group statistics of its reward manager.

Answer checking (math-verify, Hendrycks' or DeepScaleR's graders) is the one part replaced: each function here is
given the verdict, so the comparison is of the reward formula. TRL's rewards are installed and called directly.

    huggingface/open-r1 @ 1416fa0cf21595d2083b399a2a0bbddd7f6e9563
        src/open_r1/rewards.py::get_cosine_scaled_reward.cosine_scaled_reward
    eddycmu/demystify-long-cot @ e90cf9b30203bb74b1ea4ba008fa54bf731ad1a4
        openrlhf/openrlhf/reward/cosine.py::CosineScaledSparseReward.reward,
        openrlhf/openrlhf/reward/repetition.py::get_repetition_penalty, zipngram,
        openrlhf/openrlhf/reward/common.py::MAX_LEN_MARGIN
    ZeweiYu1/ARLCP @ d2c0a53653da22c9592aa8ab6390c062e3aeabc6
        src/rm.py::arlcp_rm, count_keywords_counter, sigmoid, extract_answer (last_boxed_only_string, remove_boxed),
        verl/workers/reward_manager/naive.py::NaiveRewardManager.__call__ (the statistics)
"""
from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict

import numpy as np

# --------------------------------------------------------------------------------------------------------- open-r1


def openr1_cosine_scaled_reward(contents, verdicts, min_value_wrong=-1.0, max_value_wrong=-0.5,
                                min_value_correct=0.5, max_value_correct=1.0, max_len=1000):
    """open-r1's `cosine_scaled_reward` loop; `verdicts[i]` stands for `verify(answer_parsed, gold_parsed)`, None
    for an unparseable gold solution (`len(gold_parsed) == 0`)."""
    rewards = []
    for content, is_correct in zip(contents, verdicts):
        if is_correct is None:
            rewards.append(1.0)  # Skip unparseable examples
            continue

        gen_len = len(content)

        # Apply cosine scaling based on length
        progress = gen_len / max_len
        cosine = math.cos(progress * math.pi)

        if is_correct:
            min_value = min_value_correct
            max_value = max_value_correct
        else:
            # Swap min/max for incorrect answers
            min_value = max_value_wrong
            max_value = min_value_wrong

        reward = min_value + 0.5 * (max_value - min_value) * (1.0 + cosine)
        rewards.append(float(reward))

    return rewards


# ---------------------------------------------------------------------------------------------- demystify-long-cot

MAX_LEN_MARGIN = 16


def zipngram(text: str, ngram_size: int):
    words = text.lower().split()
    return zip(*[words[i:] for i in range(ngram_size)])


def get_repetition_penalty(ngram_size: int, max_penalty: float, generation: str) -> float:
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} should not be positive")

    if max_penalty == 0:
        return 0

    ngrams = set()
    total = 0
    for ng in zipngram(generation, ngram_size):
        ngrams.add(ng)
        total += 1

    scaling = 1 - len(ngrams) / total  # ZeroDivisionError below ngram_size words (their bug; off by default)
    return scaling * max_penalty


def demystify_cosine_reward(sequences, gen_lengths, scores, *, min_value_wrong, max_value_wrong, min_value_correct,
                            max_value_correct, max_len, exceed_length=None, repetition_max_penalty=0.0,
                            repetition_ngram_size=20):
    """`CosineScaledSparseReward(...).reward(sequences, gen_lengths, answers, scores, ...)`; `scores` are
    `score_fn`'s verdicts (1 = correct)."""
    exceed_length = exceed_length if exceed_length is not None else 0
    rewards = []
    for gen, gen_len, score in zip(sequences, gen_lengths, scores):
        if gen_len + MAX_LEN_MARGIN >= max_len:
            rewards.append(exceed_length)
            continue

        if score == 1:
            min_value = min_value_correct
            max_value = max_value_correct
            rep_penalty = 0
        else:
            # Yes, they are swapped. This is required for the cosine formula below
            # to work with negative numbers.
            min_value = max_value_wrong
            max_value = min_value_wrong

            rep_penalty = get_repetition_penalty(
                ngram_size=repetition_ngram_size,
                max_penalty=repetition_max_penalty,
                generation=gen)

        progress = gen_len / max_len
        cosine = math.cos(progress * math.pi)
        r = min_value + 0.5 * (max_value - min_value) * (1.0 + cosine)
        r += rep_penalty

        rewards.append(r)

    return rewards


# ----------------------------------------------------------------------------------------------------------- ARLCP


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def count_keywords_counter(text):
    keywords = ["wait", "alternatively", "hold on", "another thought", "verify", "think again", "but", "however",
                "alternative", "check", "double-check", "oh", "hmm"]

    # Build a regular expression pattern
    pattern = r'\b(' + '|'.join(re.escape(keyword) for keyword in keywords) + r')\b'

    # Find all matches and convert them to lowercase
    matches = [match.lower() for match in re.findall(pattern, text, re.IGNORECASE)]

    result = len(matches)

    return result


def last_boxed_only_string(string):
    idx = string.rfind("\\boxed")
    if idx < 0:
        idx = string.rfind("\\fbox")
        if idx < 0:
            return None

    i = idx
    right_brace_idx = None
    num_left_braces_open = 0
    while i < len(string):
        if string[i] == "{":
            num_left_braces_open += 1
        if string[i] == "}":
            num_left_braces_open -= 1
            if num_left_braces_open == 0:
                right_brace_idx = i
                break
        i += 1

    if right_brace_idx is None:
        retval = None
    else:
        retval = string[idx:right_brace_idx + 1]

    return retval


def remove_boxed(s):
    left = "\\boxed{"
    try:
        assert s[:len(left)] == left
        assert s[-1] == "}"
        return s[len(left):-1]
    except Exception:
        return None


def extract_answer(passage: str) -> str:
    if "\\boxed" in passage:
        return remove_boxed(last_boxed_only_string(passage))
    return None


def rule_base_reward(model_answer, label):
    """Stand-in for `_get_deepscaler_rule_base_reward` (mathd / sympy grading): exact match of the answer."""
    return int(model_answer is not None and label != "" and model_answer.strip() == str(label).strip())


def arlcp_rm(data_source, solution_str, ground_truth, extra_info):
    """ARLCP's `arlcp_rm` (its "score")."""
    if "<think>" in solution_str:
        acc = 0
    elif solution_str.count('</think>') != 1:
        acc = 0
    else:
        model_solution = solution_str.split("</think>")[-1]
        pred = extract_answer(model_solution)
        acc = rule_base_reward(pred, ground_truth)

    # Penalty
    epsilon = 1e-6
    count = count_keywords_counter(solution_str)

    # if correct
    if acc == 1:
        ref_score = sigmoid((count - extra_info['information']['mean_refcount'])
                            / (extra_info['information']['std_refcount'] + epsilon))
        len_score = sigmoid((extra_info['information']['solution_len'] - extra_info['information']['mean_corlen'])
                            / (extra_info['information']['std_corlen'] + epsilon))

        # adaptive
        if count <= 40:
            w1 = 0.05
        elif 40 < count <= 80:
            w1 = 0.1
        else:
            w1 = 0.15
        w2 = 0.2 - w1
        acc = acc - w1 * ref_score - w2 * len_score

    return acc


def arlcp_manager(prompt_strs, response_strs, valid_response_lengths, ground_truths):
    """`NaiveRewardManager.__call__`'s two passes: per prompt, the reflection counts and lengths of the responses
    whose answer is right (format not checked), then `arlcp_rm` of every response with those statistics."""
    id2correctRefcounts = defaultdict(list)
    id2correctLens = defaultdict(list)
    for prompt_str, response_str, valid_response_length, ground_truth in zip(
            prompt_strs, response_strs, valid_response_lengths, ground_truths):
        refcount = count_keywords_counter(response_str)
        pred = extract_answer(response_str)
        if rule_base_reward(pred, ground_truth):
            id2correctRefcounts[prompt_str].append(refcount)
            id2correctLens[prompt_str].append(int(valid_response_length))

    scores = []
    for prompt_str, response_str, valid_response_length, ground_truth in zip(
            prompt_strs, response_strs, valid_response_lengths, ground_truths):
        refcounts = id2correctRefcounts[prompt_str]

        mean_refcount = 0.0
        std_refcount = 1.0
        if len(refcounts) >= 1:
            mean_refcount = statistics.mean(refcounts)
            std_refcount = statistics.stdev(refcounts) if len(refcounts) > 1 else 1.0

        cor_lengths = id2correctLens[prompt_str]

        mean_corlen = 0.0
        std_corlen = 1.0
        if len(cor_lengths) >= 1:
            mean_corlen = statistics.mean(cor_lengths)
            std_corlen = statistics.stdev(cor_lengths) if len(cor_lengths) > 1 else 1.0

        extra_info = {'information': {
            'solution_len': int(valid_response_length),
            'mean_refcount': mean_refcount,
            'std_refcount': std_refcount,
            'mean_corlen': mean_corlen,
            'std_corlen': std_corlen,
        }}
        scores.append(arlcp_rm("toy", response_str, ground_truth, extra_info))
    return scores
