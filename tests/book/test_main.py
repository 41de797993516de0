"""`python -m workbench.book`: its command line refuses bad input with a clear message."""
from __future__ import annotations

import pytest


def test_book_check_refuses_an_impossible_window_and_a_missing_book(tmp_path, capsys):
    from workbench.book.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["check", "--html", str(tmp_path), "--width", "0"])
    assert exit_.value.code == 2 and "--width 0" in capsys.readouterr().err
    assert main(["check", "--html", str(tmp_path / "nothing")]) == 2
    assert "no built book" in capsys.readouterr().err
