"""metrics.jsonl on resume: a torn last line is repaired, any other damage refused with its line number."""
import json

import pytest

from workbench.train.metrics import MetricsError, MetricsLog, read_rows, resumable_rows


def write_rows(path, n, tail=""):
    path.write_text("".join(json.dumps({"step": i, "loss": 0.1 * i}) + "\n" for i in range(n)) + tail)


def test_a_torn_last_line_is_dropped_and_earlier_rows_kept(tmp_path, capsys):
    path = tmp_path / "metrics.jsonl"
    write_rows(path, 5, tail='{"step": 5, "lo')
    MetricsLog(path).truncate(4)
    assert [r["step"] for r in resumable_rows(path)] == [0, 1, 2, 3]
    assert "torn last line 6" in capsys.readouterr().err
    assert path.read_text().endswith("\n")


def test_a_bad_line_before_others_is_refused_and_the_file_left_as_it_was(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write_rows(path, 6)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "garbage\n"
    path.write_text("".join(lines))
    before = path.read_text()
    with pytest.raises(MetricsError, match=r"metrics.jsonl:3: not a metrics row .*3 lines follow it.*line 3"):
        MetricsLog(path).truncate(6)
    assert path.read_text() == before  # never silently shortened
    assert [r["step"] for r in read_rows(path)] == [0, 1, 3, 4, 5]  # readers skip the bad line


def test_rows_that_are_json_but_not_metrics_rows_count_as_damage(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n[1, 2]\n{"step": 1}\n')
    with pytest.raises(MetricsError, match=":2:"):
        resumable_rows(path)


def test_tensorboard_log_writes_one_scalar_per_numeric_metric_and_skips_the_rest(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=tmp_path / "tb")
    assert not (tmp_path / "tb").exists()  # the writer starts with the first row (only the main process logs)
    log.append({"step": 0, "loss": 0.5, "count": 3, "kl": None, "bad": float("nan"), "name": "x", "flag": True})
    log.append({"step": 1, "loss": 0.25, "count": 4, "kl": 0.125})
    log.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["count", "kl", "loss"]
    assert [(s.step, s.value) for s in events.Scalars("loss")] == [(0, 0.5), (1, 0.25)]
    assert [(s.step, s.value) for s in events.Scalars("kl")] == [(1, 0.125)]
    assert [r["kl"] for r in read_rows(tmp_path / "metrics.jsonl")] == [None, 0.125]
