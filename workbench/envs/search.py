"""Multi-hop questions over a small generated fact corpus, answered with a search tool.

Every example has its own corpus of facts "subject>object" over random short names (a person lives in a
city, a city is in a country, a country is on a continent, ...), so the answer cannot be memorized: it has to
be looked up, one hop per search. Format, e.g. with hops=2 (the default is 3: one more search):
    prompt        "Bov?"                          which country does Bov live in?
    action        "[Bov]"                         search (stop string "]"): every fact naming Bov
    observation   "Bov>Kel\n"
    action        "[Kel]"
    observation   "Mip>Kel Kel>Zar\n"             distractors: other people living in Kel
    action        "A:Zar" + EOS                   the final answer (any action that is not a search)
The verifier is exact: reward 1 iff the text after the last "A:" is the end of the question's chain. The
corpus rides in the example's answer ("Zar|Bov>Kel,Kel>Zar,...": answer, then the facts, read by
`workbench.text.answers.search_answer`), like countdown's.
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import Env, tool, user
from workbench.envs.calculator import final_answer
from workbench.tasks.base import Example, Task
from workbench.text.answers import chain, search_answer

CONSONANTS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"
MAX_QUERY_CHARS = 12


def random_name(rng: random.Random, length: int) -> str:
    """A pronounceable capitalized name: consonant-vowel alternation, e.g. "Bov"."""
    letters = [rng.choice(VOWELS if i % 2 else CONSONANTS) for i in range(length)]
    return "".join(letters).capitalize()


def search(facts: list[tuple[str, str]], query: str, k: int) -> list[str]:
    """The first k facts (corpus order) naming `query` as subject or object, as "subject>object"."""
    return [f"{s}>{o}" for s, o in facts if query in (s, o)][:k]


@registry.env(
    "search", title="Search tool: multi-hop questions over a generated fact corpus", family="canonical",
    summary="Answer 'which country does X live in' by searching a per-example corpus one hop at a time "
            "('[X]' -> 'X>city', '[city]' -> 'city>country' among distractors); reward 1 iff exact.")
class SearchTask(Task):
    """Chains entity_0 > entity_1 > ... > entity_hops (person > city > country > continent for hops=3), with
    distractors.

    Knobs (`task_kw`): hops (3), entities per level (`width`, default 4: people, cities, ... of which one chain
    is asked about; the others share its nodes or not, at random), name_len (3), k (most results per search, 4;
    examples whose chain would not show within k results are redrawn),
    slack (extra turns beyond the expert's hops searches + answer, 2). Held-out set: data/eval/search.jsonl.
    """

    name = "search"
    DEFAULTS = {"hops": 3, "width": 4, "name_len": 3, "k": 4}  # what the examples depend on

    def __init__(self, *, hops: int = 3, width: int = 4, name_len: int = 3, k: int = 4, slack: int = 2):
        if hops < 1 or width < 1 or name_len < 2 or k < 1 or slack < 0:
            raise ValueError(f"need hops >= 1, width >= 1, name_len >= 2, k >= 1, slack >= 0; got "
                             f"{hops}, {width}, {name_len}, {k}, {slack}")
        self.hops, self.width, self.name_len, self.k, self.slack = hops, width, name_len, k, slack
        self.max_turns = hops + 1 + slack
        params = {"hops": hops, "width": width, "name_len": name_len, "k": k}
        self.eval_file = "search.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def make_example(self, rng: random.Random) -> Example:
        names: list[str] = []
        while len(names) < (self.hops + 1) * self.width:
            name = random_name(rng, self.name_len)
            if name not in names:
                names.append(name)
        levels = [names[j * self.width:(j + 1) * self.width] for j in range(self.hops + 1)]
        person = rng.choice(levels[0])
        for _ in range(10_000):  # every entity of a level points to one of the next (the last level: the answers)
            facts = [(e, rng.choice(levels[j + 1])) for j in range(self.hops) for e in levels[j]]
            rng.shuffle(facts)
            path = chain(facts, person)
            # each hop's fact must be among the k results of its search, or the question has no visible answer
            if all(f"{a}>{b}" in search(facts, a, self.k) for a, b in zip(path, path[1:])):
                break
        else:
            raise RuntimeError(f"{self!r}: no corpus shows its chain within k={self.k} results")
        value = path[-1]
        answer = value + "|" + ",".join(f"{s}>{o}" for s, o in facts)
        return Example(prompt=f"{person}?", answer=answer, target=f"A:{value}")

    def score(self, completion: str, example: Example) -> float:
        return 1.0 if final_answer(completion) == search_answer(example.answer)[0] else 0.0

    def expert_actions(self, example: Example) -> list[str]:
        _, facts = search_answer(example.answer)
        path = chain(facts, example.prompt.rstrip("?"))
        return [f"[{e}]" for e in path[:-1]] + [example.target]

    def make_env(self) -> "SearchEnv":
        return SearchEnv(self)

    def __repr__(self) -> str:
        return (f"SearchTask(hops={self.hops}, width={self.width}, name_len={self.name_len}, k={self.k}, "
                f"slack={self.slack})")


class SearchEnv(Env):
    """One episode of a SearchTask example; the state is the set of entities searched so far."""

    stop = ("]",)

    def __init__(self, task: SearchTask):
        self.task = task
        self.max_turns = task.max_turns
        self.example, self.facts, self.searched = None, [], frozenset()

    def reset(self, example: Example, seed: int | None = None):
        self.example, self.searched = example, frozenset()
        self.facts = search_answer(example.answer)[1]
        return [user(example.prompt)], {"state": self.searched}

    def step(self, action: str):
        if self.example is None:
            raise RuntimeError("step before reset")
        if not action.endswith("]"):  # not a search: the final answer
            return [], self.task.score(action, self.example), True, {"state": None}
        query = action.strip()
        if not (query.startswith("[") and 0 < len(query) - 2 <= MAX_QUERY_CHARS and "[" not in query[1:]):
            return [tool("ERR\n")], 0.0, False, {"state": self.searched, "tool_error": "malformed search: [name]"}
        query = query[1:-1]
        self.searched = self.searched | {query}
        results = search(self.facts, query, self.task.k)
        return [tool(" ".join(results) + "\n" if results else "none\n")], 0.0, False, \
            {"state": self.searched, "tool_error": None}
