"""How a task packs what its verifier needs into an example's `answer` string, so that a verifier (or a reward
grading the same example) needs nothing but the example:

    countdown   "22|3 5 7"                  the target, then the numbers to use
    search      "Zar|Bov>Kel,Kel>Zar,..."   the answer, then the example's fact corpus "subject>object"
"""
from __future__ import annotations


def countdown_answer(answer: str) -> tuple[int, list[int]]:
    """`"22|3 5 7"` -> `(22, [3, 5, 7])`."""
    value, numbers = answer.split("|")
    return int(value), [int(x) for x in numbers.split()]


def search_answer(answer: str) -> tuple[str, list[tuple[str, str]]]:
    """"Zar|Bov>Kel,Kel>Zar" -> ("Zar", [("Bov", "Kel"), ("Kel", "Zar")])."""
    value, facts = answer.split("|")
    return value, [tuple(f.split(">")) for f in facts.split(",")]


def chain(facts: list[tuple[str, str]], start: str) -> list[str]:
    """start, the entity it points to, ... until an entity that points nowhere."""
    points = dict(facts)
    path = [start]
    while path[-1] in points:
        path.append(points[path[-1]])
    return path
