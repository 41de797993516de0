"""The metric glossary (workbench.train.glossary): every metric has a definition and a healthy-curve note.

That every metric a recipe logs is a GLOSSARY key is checked on real runs in tests/train/test_trainer.py and
tests/train/test_pipeline.py.
"""
import re

import pytest

from workbench.train import glossary
from workbench.train.glossary import GLOSSARY, HEALTHY


def test_every_glossary_key_has_a_healthy_note_and_no_note_is_orphaned():
    assert set(HEALTHY) == set(GLOSSARY), {"no note": sorted(set(GLOSSARY) - set(HEALTHY)),
                                           "not in the glossary": sorted(set(HEALTHY) - set(GLOSSARY))}
    assert list(HEALTHY) == list(GLOSSARY), "HEALTHY follows GLOSSARY's order"


@pytest.mark.parametrize("table", ["GLOSSARY", "HEALTHY"])
def test_every_entry_is_a_non_empty_line_of_plain_text(table):
    for key, text in getattr(glossary, table).items():
        assert isinstance(text, str) and text.strip(), f"{table}[{key!r}] is empty"
        assert text == text.strip() and "\n" not in text, f"{table}[{key!r}] is not one line of text"
        assert "(no note yet)" not in text and "TODO" not in text, f"{table}[{key!r}] is a placeholder"


def test_healthy_notes_stay_short():
    long = {key: len(note) for key, note in HEALTHY.items() if len(note) > 240}
    assert not long, f"healthy-curve notes should be one or two sentences: {long}"


NAMESPACES = {key.split("/")[0] for key in GLOSSARY if "/" in key}  # reward, clip, mismatch, ...


def named_metrics(text: str) -> set[str]:
    """What a note refers to as a metric: anything in backticks, and plain names in a metric namespace
    ("clip/region"; not "pi_theta/pi_old" or "1/(2 beta)")."""
    plain = re.findall(r"(?<![\w/])([a-z][a-z_]*/[a-z_][\w-]*)", text)
    return set(re.findall(r"`([^`]+)`", text)) | {name for name in plain if name.split("/")[0] in NAMESPACES}


def test_metrics_a_note_refers_to_are_glossary_keys():
    for table in (GLOSSARY, HEALTHY):
        for key, text in table.items():
            unknown = sorted(named_metrics(text) - set(GLOSSARY))
            assert not unknown, f"{key!r} refers to metrics that are not in the glossary: {unknown}"


def test_the_reference_check_catches_a_misspelt_metric():
    assert named_metrics("Equal to `clip/region`; compare with clip/regoin and pi_theta/pi_old.") == {
        "clip/region", "clip/regoin"}


def test_metrics_module_no_longer_holds_the_glossary():
    from workbench.train import metrics

    assert not hasattr(metrics, "GLOSSARY") and not hasattr(metrics, "HEALTHY")
