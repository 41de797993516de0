"""FAPO's reward functions transcribed from its two public codebases (used by tests/anchors/test_fapo.py).

Sources:
    yyDing1/FAPO @ e6d1164d1b005ffb19fc6879ecd215016ee32744
        fapo/fapo_genrm/reward_fn.py       parse_ans, compute_score_fapo_genrm
        fapo/fapo_reasoning/reward_fn.py   judge_fp_process, compute_score_fapo
    verl-project/verl-recipe @ 48ea0a797fa29867ea0ad92aff7d284eec7d4be3 (the catalog's "volcengine/verl-recipe")
        fapo/reward_fn_genrm.py            parse_ans, compute_score_fapo_genrm
        fapo/reward_fn_reasoning.py        compute_score_fapo (FLAWED_REWARD_PENALTY = 1.0)
    verl/utils/reward_score/math_dapo.py   last_boxed_only_string, remove_boxed (both import them from verl; text
                                           as vendored in namezhenzhang/CM2-RLCR-Tool-Agent verl_v0.6.1_checklist
                                           @ 2758991a6b755738605bf66a70c259c2d6f961cf)

Variable names and branches are the code's. Two things are inputs here instead of calls: the rule verdict
`correct` (their `verify`: boxed answer vs ground truth after `normalize_final_answer`; ours is the environment's
verifier) and the GenRM's `response` text (their HTTP call to the served FAPO-GenRM). The returned dicts are cut
to the score (and the flawed flag).
"""
from __future__ import annotations


def last_boxed_only_string(string):
    idx = string.rfind("\\boxed{")
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

    return string[idx: right_brace_idx + 1] if right_brace_idx is not None else None


def remove_boxed(s):
    left = "\\boxed{"
    assert s[: len(left)] == left, f"box error: {s}"
    assert s[-1] == "}", f"box error: {s}"
    return s[len(left): -1]


# ----------------------------------------------------------------------------- yyDing1/FAPO

def parse_ans(solution_str, total_steps):
    """fapo/fapo_genrm/reward_fn.py::parse_ans (its bare `except:` kept as `except Exception`)."""
    try:
        boxed_answer = last_boxed_only_string(solution_str)
        extracted_answer = int(remove_boxed(boxed_answer))
        if extracted_answer == -1 or 0 <= extracted_answer < total_steps:
            return extracted_answer
        else:
            return None
    except Exception:
        return None


def compute_score_fapo_genrm(solution_str, ground_truth, extra_info):
    """fapo/fapo_genrm/reward_fn.py::compute_score_fapo_genrm -> score."""
    solution_str = solution_str[-300:]
    total_steps = extra_info["total_steps"]
    extracted_answer = parse_ans(solution_str, total_steps)
    if extracted_answer is None:
        reward = -1.0
    elif ground_truth == -1:
        reward = 1.0 if extracted_answer == -1 else -1.0
    else:
        if extracted_answer == -1:
            reward = -1.0
        else:
            reward = 1.0
            reward -= abs(extracted_answer - ground_truth) / total_steps
    return reward


def judge_fp_process(response, return_err_step=False):
    """fapo/fapo_reasoning/reward_fn.py::judge_fp_process (note `eval`)."""
    try:
        boxed_result = last_boxed_only_string(response)
        result = remove_boxed(boxed_result)
        reward_score = int(eval(result)) != -1
        if return_err_step:
            return reward_score, int(result)
        return reward_score
    except Exception:
        if return_err_step:
            return None, None
        return None


def compute_score_fapo(correct, response):
    """fapo/fapo_reasoning/reward_fn.py::compute_score_fapo -> (score, flawed_positive); `correct` replaces
    compute_score_rule's verdict, `response` the GenRM's answer (None: the call failed)."""
    result = {"score": 1.0 if correct else -1.0, "acc": correct}
    result["flawed_positive"] = False
    if result["acc"] == 0:
        return result["score"], result["flawed_positive"]
    else:
        if response is not None and judge_fp_process(response):  # flawed positive
            result["score"] = 0.0
            result["flawed_positive"] = True
    return result["score"], result["flawed_positive"]


# ----------------------------------------------------------------------------- verl-recipe

FLAWED_REWARD_PENALTY = 1.0


def recipe_parse_ans(solution_str, total_steps):
    """fapo/reward_fn_genrm.py::parse_ans."""
    try:
        boxed_answer = last_boxed_only_string(solution_str[-300:])
        extracted_answer = int(remove_boxed(boxed_answer))
        if extracted_answer == -1 or 0 <= extracted_answer < total_steps:
            return extracted_answer
        else:
            return None
    except Exception:
        return None


def recipe_compute_score_fapo_genrm(solution_str, ground_truth, extra_info):
    """fapo/reward_fn_genrm.py::compute_score_fapo_genrm -> score."""
    total_steps = extra_info["total_steps"]
    extracted_answer = recipe_parse_ans(solution_str, total_steps)
    if extracted_answer is None:
        reward = -1.0
    elif ground_truth == -1:
        reward = 1.0 if extracted_answer == -1 else -1.0
    else:
        if extracted_answer == -1:
            reward = -1.0
        else:
            reward = 1.0
            reward -= abs(extracted_answer - ground_truth) / total_steps
    return reward


def recipe_compute_score_fapo(correct, grm_response, split="train"):
    """fapo/reward_fn_reasoning.py::compute_score_fapo -> (score, is_flawed_positive); `grm_response` is the
    decoded GenRM output (None: no output_ids came back)."""
    reward_score = 1.0 if correct else -1.0
    is_flawed_positive = False
    if split == "test" or not correct:
        return reward_score, is_flawed_positive
    if grm_response is not None:
        try:
            err_location = remove_boxed(last_boxed_only_string(grm_response))
            is_flawed_positive = int(err_location) != -1
        except Exception:
            is_flawed_positive = False
        if is_flawed_positive:
            reward_score -= FLAWED_REWARD_PENALTY
    return reward_score, is_flawed_positive
