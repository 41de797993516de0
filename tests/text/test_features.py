"""Prompt features: deterministic, unit length, equal for equal text, closer for texts that share their n-grams."""
import torch

from workbench.text.features import prompt_features


def test_features_are_unit_rows_and_deterministic():
    x = prompt_features(["3 5 7 -> 15", "12 4 -> 3", ""])
    assert x.shape == (3, 256) and torch.allclose(x[:2].norm(dim=1), torch.ones(2, dtype=torch.float64))
    assert torch.equal(x[2], torch.zeros(256, dtype=torch.float64))  # empty text: the zero vector, not NaN
    assert torch.equal(x, prompt_features(["3 5 7 -> 15", "12 4 -> 3", ""]))


def test_shared_ngrams_make_prompts_closer():
    a, b, c = prompt_features(["numbers 3 5 7 target 15", "numbers 3 5 8 target 16", "zzzz"])
    assert torch.isclose(a @ a, torch.tensor(1.0, dtype=torch.float64))
    assert a @ b > a @ c and a @ b < 1
