"""HBPO's reward for a correct answer, transcribed from ZJU-REAL/HBPO @ 243997e0196d247ee3563ff53d8503383ebeb902
(used by tests/anchors/test_hbpo_reward.py): `rllm/rewards/math_reward.py::RewardMathFn.__call__`, the branch
`if is_correct and valid_response_length <= 4096` with its budget regex, names and order of operations kept.
Left out: the answer grading before it (the tests give correct answers), the tool-call bonus (has_toolcall unset)
and the other branches (format errors, wrong answers, the LLM judge).
"""
from __future__ import annotations

import re

import numpy as np


def correct_answer_reward(model_response: str, valid_response_length: int) -> float:
    pattern = r"<think> I will answer the question with (\d+) tokens"
    match = re.search(pattern, model_response)
    assert valid_response_length <= 4096
    '''hierarchical reward function'''
    PI_APPROX = 3.1416
    result = 4 * np.cos(PI_APPROX * valid_response_length / 8192)
    retval = np.round(result, 2)
    if match:
        number = int(match.group(1))
        standard = 4 * np.cos(PI_APPROX * number / 8192)
        retval = min(result - 1 / 4096 * abs(number - valid_response_length), standard)
    reward = retval
    return float(reward)
