"""The tiny-model HF engine shared by the rollout tests."""
import pytest

from workbench.models import build_tiny
from workbench.rollout import HFEngine


@pytest.fixture(scope="module")
def engine():
    model, tokenizer = build_tiny(seed=0)
    return HFEngine(model, tokenizer)
