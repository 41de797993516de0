"""What every notebook's exercise checks share: reading a learner's answer (a number, several numbers, or None while
the answers cell is still empty) and printing each exercise's verdict."""
from __future__ import annotations


def near(answer, value: float, tol: float = 1e-3) -> bool:
    """An exercise's numeric answer (None while the learner's cell is still empty) within `tol` of `value`."""
    return answer is not None and abs(float(answer) - float(value)) <= tol


def as_numbers(answer) -> list[float] | None:
    """An exercise's answer made of several numbers as a list of floats; None if it is not one."""
    if isinstance(answer, str):
        return None
    try:
        return [float(x) for x in answer]
    except (TypeError, ValueError):
        return None


def as_number(answer) -> float | None:
    """A one-number answer as a float; None if it is not one."""
    if isinstance(answer, (str, bool)) or answer is None:
        return None
    try:
        return float(answer)
    except (TypeError, ValueError):
        return None


def all_near(answer, values, tol: float = 1e-3) -> bool:
    """An answer of several numbers, as many as `values`, each within `tol` of its value."""
    given = as_numbers(answer)
    return given is not None and len(given) == len(values) and all(near(a, v, tol) for a, v in zip(given, values))


def check_answers(exercises) -> None:
    """Print each exercise's verdict: "no answer yet" for an answer still None, else what its check says (which
    explains a wrong answer by raising). `exercises`: (number, answer, check) triples, in order."""
    for number, answer, check in exercises:
        if answer is None:
            print(f"exercise {number}: no answer yet: replace None in the answers cell above and run it and this cell "
                  f"(or execute the notebook with -p solutions=True to see the solutions)")
        else:
            print(f"exercise {number}: {check(answer)}")
