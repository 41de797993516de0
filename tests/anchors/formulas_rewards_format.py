"""Answer, format, repetition and reflection rewards, transcribed from their references (used by
tests/anchors/test_rewards_format.py). TRL 1.16's rewards are not transcribed: the test calls `trl.rewards`.

huggingface/open-r1 at commit 1416fa0cf21595d2083b399a2a0bbddd7f6e9563, src/open_r1/rewards.py:
  `accuracy_reward`, `format_reward`, `tag_count_reward`, `get_repetition_penalty_reward` (language "en").
  Removed: the `print` calls; the zh (jieba) branch.

SUSTechBruce/SRPO_MLLMs at commit 23dab542f2d798419dbfd9142086d61b88474493,
spro_rl_train/openrlhf_srpo/srpo_runs/scripts/srpo_reward_func.py:
  `extract_answer_with_tags`, `extract_token_lengths`, `length_reward_func`, `accuracy_reward_func`,
  `format_reward_func`, and `reward_func`'s per-row body (`reward_func_row`; its `get_response_from_query` strips the
  response, kept as `.strip()`). The module-level Qwen2.5-VL tokenizer becomes the argument `encode` (text -> ids).
  Removed: the log file, `print`. `*_fixed` are the same functions with the return arity fixed (one value per name
  the caller unpacks); the shipped ones raise ValueError there, which `reward_func`'s bare except turns into 0.

juyongjiang/ReflexiCoder at commit af90cb5c581edb94e8ef1dd3aec94cf5f02d76d7:
  rewards_code/reflection.py `CompletionParser` and the bodies of `async_cycle_count_regulation_reward_fn`,
  `async_iterative_quality_reward_fn`, `async_efficiency_reward_fn`, made synchronous; the sandbox's
  `code_reward_fn(data_source, ans, ground_truth)` becomes the argument `score_fn(ans, ground_truth)`; the trajectory
  cache is left out. src/open_r1/rewards.py: the constants each wrapper passes, and the reward weights 1.0 / 0.5 /
  1.0 of configs/reflexicoder/config_grpo.yaml (`reflexicoder_total`).

math-verify is imported inside the functions that call it (open-r1's and SRPO's accuracy, `srpo_verify_scorer`), not
at the top as in the references, so the other transcriptions load (and their tests run) without it.
"""
from __future__ import annotations

import math
import re


# ----- open-r1 -------------------------------------------------------------------------------------------

def open_r1_accuracy_reward(completions: list[list[dict[str, str]]], solution: list[str], **kwargs):
    """Reward function that checks if the completion is the same as the ground truth."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    contents = [completion[0]["content"] for completion in completions]
    rewards = []
    for content, sol in zip(contents, solution):
        gold_parsed = parse(
            sol,
            extraction_mode="first_match",
        )
        if len(gold_parsed) != 0:
            # We require the answer to be provided in correct latex (no malformed operators)
            answer_parsed = parse(
                content,
                extraction_config=[
                    LatexExtractionConfig(
                        normalization_config=NormalizationConfig(
                            nits=False,
                            malformed_operators=False,
                            basic_latex=True,
                            equations=True,
                            boxed="all",
                            units=True,
                        ),
                        # Ensures that boxed is tried first
                        boxed_match_priority=0,
                        try_extract_without_anchor=False,
                    )
                ],
                extraction_mode="first_match",
            )
            # Compute binary rewards if verifiable, `None` otherwise to skip this example
            try:
                reward = float(verify(gold_parsed, answer_parsed))
            except Exception:
                reward = None
        else:
            # If the gold solution is not parseable, we assign `None` to skip this example
            reward = None
        rewards.append(reward)

    return rewards


def open_r1_format_reward(completions, **kwargs):
    """Reward function that checks if the reasoning process is enclosed within <think> and </think> tags, while the
    final answer is enclosed within <answer> and </answer> tags."""
    pattern = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, content, re.DOTALL | re.MULTILINE) for content in completion_contents]
    return [1.0 if match else 0.0 for match in matches]


def open_r1_tag_count_reward(completions, **kwargs) -> list[float]:
    def count_tags(text: str) -> float:
        count = 0.0
        if text.count("<think>\n") == 1:
            count += 0.25
        if text.count("\n</think>\n") == 1:
            count += 0.25
        if text.count("\n<answer>\n") == 1:
            count += 0.25
        if text.count("\n</answer>") == 1:
            count += 0.25
        return count

    contents = [completion[0]["content"] for completion in completions]
    return [count_tags(c) for c in contents]


def open_r1_get_repetition_penalty_reward(ngram_size: int, max_penalty: float, language: str = "en"):
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} should not be positive")

    def zipngram(text: str, ngram_size: int):
        words = text.lower().split()
        return zip(*[words[i:] for i in range(ngram_size)]), words

    def repetition_penalty_reward(completions, **kwargs) -> float:
        contents = [completion[0]["content"] for completion in completions]
        rewards = []
        for completion in contents:
            if completion == "":
                rewards.append(0.0)
                continue

            ngrams = set()
            total = 0
            ngram_array, words = zipngram(completion, ngram_size)

            if len(words) < ngram_size:
                rewards.append(0.0)
                continue

            for ng in ngram_array:
                ngrams.add(ng)
                total += 1

            scaling = 1 - len(ngrams) / total
            reward = scaling * max_penalty
            rewards.append(reward)
        return rewards

    return repetition_penalty_reward


# ----- SRPO ----------------------------------------------------------------------------------------------

choices = ["a", "b", "c", "d"]


def extract_answer_with_tags(text):
    matches = re.findall(r"<answer>.*?</answer>", text, re.DOTALL)

    if not matches:
        return None, None
    elif len(matches) == 1:
        return matches[0], matches[0], matches
    else:
        return matches[0], matches[-1], matches  # return first response and second response


def extract_answer_with_tags_fixed(text):
    matches = re.findall(r"<answer>.*?</answer>", text, re.DOTALL)

    if not matches:
        return None, None, matches
    elif len(matches) == 1:
        return matches[0], matches[0], matches
    else:
        return matches[0], matches[-1], matches


def extract_token_lengths(completion, encode):
    think_matches = re.findall(r"<think>(.*?)</think>", completion, re.DOTALL)
    answer_matched = re.findall(r"<answer>(.*?)</answer>", completion, re.DOTALL)

    if len(answer_matched) < 2:
        return None, None

    if len(think_matches) < 2:
        return None, None

    think1 = think_matches[0].strip()
    answer1 = answer_matched[0].strip()

    think1 = len(encode(think1))
    answer1 = len(encode(answer1))

    L = len(encode(completion))
    T_target = 2 * (think1 + answer1)
    T_max = 2.5 * (think1 + answer1)
    return L, T_target, T_max


def extract_token_lengths_fixed(completion, encode):
    out = extract_token_lengths(completion, encode)
    return (None, None, None) if len(out) == 2 else out


def length_reward_func(completion, encode, fixed=False):
    try:
        L, T_target, T_max = (extract_token_lengths_fixed if fixed else extract_token_lengths)(completion, encode)

        if L is None or T_target is None or T_max == 0:
            return 0.0

        reward = math.exp(-((abs(L - T_target)) / (T_max - T_target)) ** 2)
    except Exception:
        pass
    return reward  # UnboundLocalError after the caught exception, as the reference


def accuracy_reward_func(completion, answer, fixed=False):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, StringExtractionConfig, parse, verify

    extract = extract_answer_with_tags_fixed if fixed else extract_answer_with_tags
    reward = 0.0
    response_1, response_2, matches = extract(completion)

    if response_1 is not None and response_2 is not None:  # have first answer and and second answer
        response_1 = response_1
        response_2 = response_2
    else:
        try:
            response_1 = completion.split("<answer>")[-1]  # set to the same answer if extract_answer wrong
            response_2 = completion.split("<answer>")[-1]

        except Exception:
            response_1 = completion.split("\n")[-1]  # set to the same answer if extract_answer wrong
            response_2 = completion.split("\n")[-1]

    content_1, sol = response_1, answer
    content_2, sol = response_2, answer
    answer_parsed_1 = content_1
    answer_parsed_2 = content_2

    sol = f"${str(sol)}$"
    gold_parsed = parse(sol)
    if len(gold_parsed) != 0:
        answer_parsed_1 = parse(
            content_1,
            extraction_config=[StringExtractionConfig(), LatexExtractionConfig(), ExprExtractionConfig()],
        )

        answer_parsed_2 = parse(
            content_2,
            extraction_config=[StringExtractionConfig(), LatexExtractionConfig(), ExprExtractionConfig()],
        )

        if len(matches) == 1:  # only have first answer

            try:

                if verify(answer_parsed_1, gold_parsed):
                    reward = 0.5
            except Exception:
                pass

        else:  # get first and the second answer

            try:

                if (verify(answer_parsed_1, gold_parsed) == False  # noqa: E712
                        and verify(answer_parsed_2, gold_parsed) == True):  # noqa: E712
                    reward = 0.5 + 0.5  # correct the wrong answer after relfection

                elif verify(answer_parsed_1, gold_parsed) and verify(answer_parsed_2, gold_parsed):  # both truth
                    reward = 0.5 + 0.25  # keep the corrected answer

                elif (verify(answer_parsed_1, gold_parsed) == True  # noqa: E712
                      and verify(answer_parsed_2, gold_parsed) == False):  # noqa: E712

                    reward = 0.5 - 0.25  # mislead the corrected answer

                else:  # change nothing

                    reward = 0.0

            except Exception:
                pass

        if reward == 0.0:  # only check the final answer after reflection
            try:
                content_match_1, content_match_2, matches = extract(completion)
                content_match = content_match_2

                # using findall not search
                student_answer = content_match.strip() if content_match else content_2.strip()

                student_answer = student_answer.replace("</answer>", "").replace("<answer>", "").strip()
                for answer in gold_parsed:
                    if str(answer).lower() in choices:
                        if str(answer).lower() in student_answer.lower():
                            choices_other = [choice for choice in choices if choice != str(answer).lower()]
                            if all(choice not in student_answer.lower() for choice in choices_other):
                                reward = 1.0
            except Exception:
                pass
    else:
        reward = 1.0

    return reward, answer_parsed_1  # not use


def format_reward_func(completion, **kwargs):
    pattern = (
        r"^(?=(?:.*<think>){2})(?=(?:.*<\/think>){2})"  # Require exactly two <think>
        r"(?=(?:.*<answer>){2})(?=(?:.*<\/answer>){2})"  # Require exactly two <answer>
        r"(?=(?:.*<reflection>){1})(?=(?:.*<\/reflection>){1})"  # Require exactly one <reflection>
        r"(?!.*<think>.*<think>.*<think>)"               # Prevent three or more <think>
        r"(?!.*<\/think>.*<\/think>.*<\/think>)"        # Prevent three or more </think>
        r"(?!.*<answer>.*<answer>.*<answer>)"           # Prevent three or more <answer>
        r"(?!.*<\/answer>.*<\/answer>.*<\/answer>)"     # Prevent three or more </answer>
        r"(?!.*<reflection>.*<reflection>)"             # Prevent two or more <reflection>
        r"(?!.*<\/reflection>.*<\/reflection>)"         # Prevent two or more </reflection>
        r".*<think>(.+?)</think>\s*"                    # The first think, non-empty
        r"<answer>(.+?)</answer>\s*"                   # The first answer, non-empty
        r"<reflection>(.+?)</reflection>\s*"            # The reflection, non-empty
        r"<think>(.+?)</think>\s*"                     # The second think, non-empty
        r"<answer>(.+?)</answer>\s*$"                  # The second answer, non-empty, strictly at the end
    )

    matches = re.search(pattern, completion, re.DOTALL)
    return 0.5 if matches else 0.0


def reward_func_row(query_response, answer, encode, fixed=False):
    """`reward_func`'s loop body for one (response, label); the response as `get_response_from_query` gives it."""
    try:
        response = query_response.strip()
        if response == "":
            return 0.0
        accuracy_reward, answer_parsed = accuracy_reward_func(response, answer, fixed=fixed)
        format_reward = format_reward_func(response)
        length_reward = length_reward_func(response, encode, fixed=fixed) * 0.1
        return accuracy_reward + format_reward + length_reward
    except Exception:
        return 0.0


def srpo_verify_scorer(answer_text, gold):
    """The reference's verification of one answer (`parse` with String/Latex/Expr against `parse("$gold$")`) as a
    workbench scorer: None when the gold does not parse."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, StringExtractionConfig, parse, verify

    gold_parsed = parse(f"${str(gold)}$")
    if len(gold_parsed) == 0:
        return None
    parsed = parse(answer_text, extraction_config=[StringExtractionConfig(), LatexExtractionConfig(),
                                                   ExprExtractionConfig()])
    try:
        return bool(verify(parsed, gold_parsed))
    except Exception:
        return False


# ----- ReflexiCoder --------------------------------------------------------------------------------------

class CompletionParser:
    def __init__(self, sample_language: str = 'python'):
        self.reason_re = re.compile(r'<think>\s*([\s\S]*?)\s*</think>', re.MULTILINE)
        self.answer_re = re.compile(
            fr'<answer>\s*([\s\S]*?```{re.escape(sample_language)}[\s\S]*?```[\s\S]*?)\s*</answer>',
            re.MULTILINE
        )
        self.reflection_re = re.compile(r'<reflection>\s*([\s\S]*?)\s*</reflection>', re.MULTILINE)

    def parse(self, text: str):
        text = text.strip()
        pos = 0
        reflection_count = 0
        answers = []

        # reason
        m_reason = self.reason_re.search(text, pos)
        if not m_reason:
            return 0.0, 0, []
        pos = m_reason.end()

        # answer
        m_answer = self.answer_re.search(text, pos)
        if not m_answer:
            return 0.0, 0, []
        answers.append(m_answer.group(1))
        pos = m_answer.end()

        # reflection-answer pair
        m_ref = self.reflection_re.search(text, pos)
        if not m_ref:
            return 0.0, 0, []

        reflection_count += 1
        pos = m_ref.end()

        m_answer = self.answer_re.search(text, pos)
        if not m_answer:
            return 0.0, 0, []
        answers.append(m_answer.group(1))
        pos = m_answer.end()

        # more reflection-answer pairs (optional)
        while pos < len(text):
            m_ref = self.reflection_re.search(text, pos)
            if not m_ref:
                break
            reflection_count += 1
            pos = m_ref.end()

            m_answer = self.answer_re.search(text, pos)
            if not m_answer:
                return 0.0, 0, []
            answers.append(m_answer.group(1))
            pos = m_answer.end()

        return (1.0, reflection_count, answers) if pos == len(text) else (0.0, 0, [])


def cycle_count_regulation_reward_fn(format_reward, reflection_count, alpha, beta, gamma, delta):
    n = reflection_count
    if format_reward == 0.0 or n == 0:
        return 0.0
    elif n <= 5:  # number of maximum reflection
        return 1.0
    return (
        1.0 / (1.0 + alpha * (n - 3) ** beta) *
        math.exp(-gamma * (n - 3)) *
        (1.0 - delta * math.sin(math.pi / 2.0 * (n - 3)))
    )


def iterative_quality_reward_fn(format_reward, reflection_count, r_scores, lambda_, s, eps, h_pos, h_neg, r_max,
                                eta):
    # Early returns for invalid trajectories
    if format_reward == 0.0 or reflection_count == 0:
        return 0.0
    if not r_scores:
        return 0.0

    # Time weights
    weights = [math.exp(lambda_ * t) for t in range(1, len(r_scores))]
    weight_sum = sum(weights)
    weights = [w / weight_sum for w in weights]

    m = [0.0]  # m_1 = 0 since no previous answer
    for t in range(1, len(r_scores)):
        diff = r_scores[t] - r_scores[t - 1]  # 0, 1

        if diff > eps:
            m_t = math.tanh(diff / s)  # +1.0
        elif abs(diff) <= eps:
            if abs(r_scores[t - 1] - r_max) <= eps:
                m_t = h_pos  # +0.05
            else:
                m_t = -h_neg  # -1.0
        else:  # diff < -eps
            m_t = -math.tanh(abs(diff) / s)  # -0.1

        m.append(m_t)

    # Trajectory reward
    return r_scores[-1] + eta * sum(weights[t - 1] * m[t] for t in range(1, len(r_scores)))


def efficiency_reward_fn(format_reward, reflection_count, r_scores, epsilon):
    if format_reward == 0.0 or reflection_count == 0:
        return 0.0

    if not r_scores:
        return 0.0

    avg_score = r_scores[-1] / reflection_count
    if len(r_scores) < 2:
        return 0.0
    return avg_score + (r_scores[-1] - r_scores[0]) / (max(1, reflection_count - 1) + epsilon)


def reflexicoder_total(completion, ground_truth, score_fn, sample_language="python"):
    """trajectory_format (1.0) + cycle_count_regulation_iterative_quality (0.5) + cycle_count_regulation_efficient
    (1.0), with the constants src/open_r1/rewards.py passes."""
    format_reward, reflection_count, answers = CompletionParser(sample_language).parse(completion)
    r_scores = [score_fn(ans, ground_truth) for ans in answers]
    P_n = cycle_count_regulation_reward_fn(format_reward, reflection_count, alpha=0.1, beta=2.0, gamma=0.05,
                                           delta=0.1)
    R_traj = iterative_quality_reward_fn(format_reward, reflection_count, r_scores, lambda_=0.2, s=0.1, eps=0.0001,
                                         h_pos=0.05, h_neg=1.0, r_max=1.0, eta=0.5)
    E_traj = efficiency_reward_fn(format_reward, reflection_count, r_scores, epsilon=1e-6)
    return 1.0 * format_reward + 0.5 * (P_n * R_traj) + 1.0 * (P_n * E_traj)
