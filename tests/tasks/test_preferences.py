"""Preference data from tasks: verified pairs, JSONL files, corrupted answers, degraded copies, pairs from
samples and from a reward function."""
import json

import pytest

from workbench.tasks import get_task
from workbench.tasks.preferences import DIGITS, corrupt, degraded_lists, read_pairs, task_lists, task_pairs, write_pairs


def test_task_pairs_are_verified_and_never_use_held_out_prompts():
    task = get_task("addition")
    held_out = {e.prompt for e in task.eval_set()}
    pairs = task_pairs(task, 50, seed=1)
    assert len(pairs) == 50 and not {p.prompt for p in pairs} & held_out
    for p in pairs:  # chosen is the verified sum, rejected a wrong one
        a, b = p.prompt.rstrip("=").split("+")
        assert p.chosen == str(int(a) + int(b)) != p.rejected
    lists = task_lists(get_task("countdown"), 5, 4)
    assert all(len(responses) == 4 and len(set(responses)) == 4 for _, responses in lists)


def test_jsonl_round_trip_and_bad_files(tmp_path):
    pairs = task_pairs(get_task("addition"), 3)
    write_pairs(pairs, tmp_path / "p.jsonl")
    assert read_pairs(tmp_path / "p.jsonl") == pairs
    (tmp_path / "bad.jsonl").write_text(json.dumps({"prompt": "1+1=", "chosen": "2"}) + "\n")
    with pytest.raises(ValueError, match="missing fields \\['rejected'\\]"):
        read_pairs(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text(json.dumps({"prompt": "1+1=", "chosen": "", "rejected": "3"}) + "\n")
    with pytest.raises(ValueError, match="empty response"):
        read_pairs(tmp_path / "empty.jsonl")


def test_corruption_changes_exactly_one_digit():
    import random

    rng = random.Random(0)
    for answer in ("46", "100", "3*5+7"):
        wrong = corrupt(answer, rng)
        assert len(wrong) == len(answer) and sum(a != b for a, b in zip(answer, wrong)) == 1


def test_pairs_from_samples_never_prefer_a_shorter_wrong_answer():
    from workbench.tasks.base import Example
    from workbench.tasks.preferences import pair_from

    task = get_task("countdown")
    example = Example("3 5 7>22:", "22|3 5 7", "3*5+7")
    assert pair_from(task, example, ["3+5", "3+5+7+1"]) is None            # both wrong: no pair
    assert pair_from(task, example, ["3*5+7", "(3*5)+7"]) == \
        __import__("workbench.tasks.preferences", fromlist=["x"]).PreferencePair("3 5 7>22:", "3*5+7", "(3*5)+7")
    assert pair_from(task, example, ["3+5", "3*5+7"]).chosen == "3*5+7"   # correct beats wrong


def test_pairs_from_a_reward_function():
    from workbench.tasks.preferences import reward_pairs

    def brevity(completions, prompts):  # TRL-style reward: shorter is better
        return [-float(len(c)) for c in completions]

    pairs = reward_pairs(["a", "b"], [["xx", "x", "xxx"], ["y", "z"]], brevity)
    assert [(p.chosen, p.rejected) for p in pairs] == [("x", "xxx")]  # "y"/"z" tie: no pair
    with pytest.raises(ValueError, match="returned"):
        reward_pairs(["a"], [["x", "y"]], lambda completions, prompts: [float("nan"), 0.0])


@pytest.mark.covers("spo-prefdeg")
def test_degraded_copies_drop_nested_growing_shares_of_the_digits():
    pairs = task_pairs(get_task("countdown"), 20, seed=1)
    for (prompt, responses), pair in zip(degraded_lists(pairs, (1 / 3, 2 / 3), seed=0), pairs):
        chosen, light, heavy, rejected = responses
        assert (prompt, chosen, rejected) == (pair.prompt, pair.chosen, pair.rejected)
        digits = lambda s: sum(ch in DIGITS for ch in s)  # noqa: E731
        n = digits(chosen)
        assert digits(light) == n - round(n / 3) and digits(heavy) == n - round(2 * n / 3)
        strip = lambda s: "".join(ch for ch in s if ch not in DIGITS)  # noqa: E731
        assert strip(light) == strip(heavy) == strip(chosen)  # only key content is removed
