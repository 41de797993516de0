"""format-reward: TRL's think format by default, tag layouts, whitespace, partial credit, and weight 0."""

import pytest
import torch

from workbench import registry
from workbench.rewards import aggregate
from workbench.rewards.format import format_reward, tag_count_score, tag_layout_ok

pytestmark = pytest.mark.covers("format-reward")


def test_registered_with_trl_defaults():
    e = registry.get("reward", "format-reward")
    assert e.defaults == {"tags": ("think",), "strip": False, "trailing": "any", "partial": False}
    assert e.family == "rewards" and e.equation


def test_one_think_block_then_anything():
    good = ["<think>a</think>b", "<think></think>", "<think>\nreason\n</think>\n\nanswer 46",
            "<think>a</think></think>"]
    bad = ["think</think>", "<think>a", "a<think>b</think>", "</think><think>a</think>", "<THINK>a</THINK>"]
    assert format_reward(good) == [1.0] * len(good)
    assert format_reward(bad) == [0.0] * len(bad)


def test_nested_or_duplicated_tags_score_zero():
    """Catalog test (1)."""
    texts = ["<think><think>a</think></think>b", "<think>a</think><think>b</think>c", "<think>a</think>b<think>",
             "<think>a</think><answer>1</answer><answer>2</answer>"]
    assert format_reward(texts[:3]) == [0.0] * 3
    assert format_reward(texts[3:]) == [1.0]  # the think layout says nothing about what follows the block
    assert format_reward(texts[3:], tags=("think", "answer")) == [0.0]
    nested = "<think>a<answer>1</answer></think><answer>2</answer>"
    assert format_reward([nested], tags=("think", "answer")) == [0.0]


def test_whitespace_insensitive_inside_and_between_blocks():
    """Catalog test (2): whitespace inside and between blocks never matters; around the completion, TRL's
    default is sensitive to leading whitespace (`^<think>`) and strip=True is not."""
    layouts = ["<think>a</think><answer>1</answer>", "<think>\n a \n</think>\n\n <answer>\n1\n</answer>\n",
               "<think>a</think>\t\u2003<answer>1</answer>  "]
    assert format_reward(layouts, tags=("think", "answer"), trailing="none") == [1.0] * 3
    assert format_reward(["<think>a</think> x <answer>1</answer>"], tags=("think", "answer")) == [0.0]
    assert format_reward(["  \n<think>a</think>b"]) == [0.0]
    assert format_reward(["  \n<think>a</think>b", "<think>a</think>b\n\n"], strip=True) == [1.0, 1.0]


def test_trailing_text_after_the_last_block():
    assert format_reward(["<think>a</think><answer>1</answer> more"], tags=("think", "answer")) == [1.0]
    assert format_reward(["<think>a</think><answer>1</answer> more"], tags=("think", "answer"),
                         trailing="none") == [0.0]


def test_repeated_tags_in_a_layout_need_exactly_that_many_blocks():
    srpo = ("think", "answer", "reflection", "think", "answer")
    text = "<think>a</think><answer>1</answer><reflection>r</reflection><think>b</think><answer>2</answer>"
    assert tag_layout_ok(text, srpo, trailing="none")
    assert not tag_layout_ok(text + "<answer>3</answer>", srpo)
    assert not tag_layout_ok(text.replace("<reflection>r</reflection>", ""), srpo)


def test_partial_credit_is_the_share_of_tags_present_once():
    """open-r1 tag_count_reward's quarters, whitespace-insensitive."""
    tags = ("think", "answer")
    assert tag_count_score("<think>a</think><answer>1</answer>", tags) == 1.0
    assert tag_count_score("<think>a</think>1", tags) == 0.5
    assert tag_count_score("<think>a</think><answer>1", tags) == 0.75
    assert tag_count_score("<think><think>a</think>", tags) == 0.25
    assert format_reward(["<think>a</think>"], tags=tags, partial=True) == [0.5]


def test_partial_credit_counts_a_repeated_tag_as_often_as_the_layout_holds_it():
    """SRPO's layout holds two think and two answer blocks: its own layout gets full credit, not 2/10."""
    srpo = ("think", "answer", "reflection", "think", "answer")
    text = "<think>a</think><answer>1</answer><reflection>r</reflection><think>b</think><answer>2</answer>"
    assert format_reward([text], tags=srpo, partial=True) == [1.0]
    assert tag_count_score(text.replace("<think>b</think>", ""), srpo) == pytest.approx(4 / 6)  # think: 1 of 2
    assert tag_count_score(text + "<reflection>", srpo) == pytest.approx(5 / 6)
    assert tag_count_score("", srpo) == 0.0


def test_leading_text_and_empty_blocks_are_options_of_the_layout():
    """leading="any": anything before the first block (SRPO's `.*<think>`); nonempty: a block holds at least one
    character (a regex's `.+?`)."""
    assert not tag_layout_ok("so: <think>a</think>b")
    assert tag_layout_ok("so: <think>a</think>b", leading="any")
    assert not tag_layout_ok("no tags", leading="any")
    assert tag_layout_ok("<think></think>b") and not tag_layout_ok("<think></think>b", nonempty=True)
    assert tag_layout_ok("<think> </think>b", nonempty=True)    # whitespace is a character


def test_weight_zero_has_no_effect_on_the_total():
    """Catalog test (3): the pipeline's sum (either aggregation) with the format column at weight 0."""
    task = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    texts = ["<think>a</think>1", "x", "<think>b</think>", "<think>c</think>2", "y", "z"]
    fmt = torch.tensor(format_reward(texts), dtype=torch.float64)
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    for mode in aggregate.AGGREGATIONS:
        alone, _ = aggregate.combine(task[:, None], torch.tensor([1.0]), group, mode)
        with_zero, _ = aggregate.combine(torch.stack([task, fmt], 1), torch.tensor([1.0, 0.0]), group, mode)
        with_weight, _ = aggregate.combine(torch.stack([task, fmt], 1), torch.tensor([1.0, 0.1]), group, mode)
        assert torch.equal(alone, with_zero) and not torch.equal(alone, with_weight), mode


def test_bad_options_are_refused():
    for tags in ["think", (), ("<think>",), ("a b",), ("",)]:
        with pytest.raises(ValueError, match="format-reward: tags"):
            format_reward(["x"], tags=tags)
    with pytest.raises(ValueError, match="trailing"):
        format_reward(["x"], trailing="some")


def test_adversarial_input_gets_its_format_score():
    """Inputs that make a backtracking pattern quadratic (unclosed and half-closed tags, a million spaces or newlines)
    are scored exactly; the scans are linear (their time per size: bench/bench_parsers.py)."""
    texts = ["<think>" + "<think" * 150_000, "<think>" + " " * 1_000_000, "<think>" + "</think" * 140_000,
             "<think>a</think>" + "\n" * 1_000_000 + "x"]
    out = format_reward(texts, tags=("think", "answer"), trailing="none") + format_reward(texts)
    assert out == [0.0] * 4 + [0.0, 0.0, 0.0, 1.0]
