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

import functools
import random

from workbench import registry
from workbench.envs.base import Env, check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.envs.calculator import final_answer
from workbench.tasks.base import PROBE_SEED, Example, Task, redraw
from workbench.text.answers import chain, search_answer

CONSONANTS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"
MAX_QUERY_CHARS = 12  # the tool refuses a longer query, so no name may be longer
MAX_HOPS = 20  # a draw checks every hop against the whole corpus: keeps examples fast to draw
MAX_ENTITIES = 1000  # names per example ((hops + 1) * width): the corpus rides in every example's answer
NAME_SHARE = 2  # draw at most 1/2 of the distinct names of a length: distinct ones keep coming fast
CORPUS_TRIES = 10_000  # corpora drawn per example at most
PROBE_CORPORA, MIN_HITS = 500, 10  # a corpus shows its chain 2% of the time or more (checked when built)


def random_name(rng: random.Random, length: int) -> str:
    """A pronounceable capitalized name: consonant-vowel alternation, e.g. "Bov"."""
    letters = [rng.choice(VOWELS if i % 2 else CONSONANTS) for i in range(length)]
    return "".join(letters).capitalize()


def name_count(length: int) -> int:
    """How many distinct names `random_name` makes of `length` letters (consonants and vowels alternate)."""
    return len(CONSONANTS) ** ((length + 1) // 2) * len(VOWELS) ** (length // 2)


def search(facts: list[tuple[str, str]], query: str, k: int) -> list[str]:
    """The first k facts (corpus order) naming `query` as subject or object, as "subject>object"."""
    return [f"{s}>{o}" for s, o in facts if query in (s, o)][:k]


def draw_levels(rng: random.Random, hops: int, width: int, name_len: int) -> list[list[str]]:
    """hops + 1 levels of `width` distinct random names (people, cities, ...), drawn until distinct within a bound
    (`check_names` keeps the names plentiful, so the bound is never reached)."""
    needed, names, seen = (hops + 1) * width, [], set()
    for _ in range(50 * needed):
        name = random_name(rng, name_len)
        if name not in seen:
            names.append(name)
            seen.add(name)
            if len(names) == needed:
                return [names[j * width:(j + 1) * width] for j in range(hops + 1)]
    raise RuntimeError(f"no {needed} distinct names of {name_len} letters within {50 * needed} draws")


def draw_corpus(rng: random.Random, levels: list[list[str]], person: str, k: int):
    """(facts, the person's chain) of one random corpus if each hop's fact shows within k results, else None."""
    # every entity of a level points to one of the next (the last level: the answers)
    facts = [(e, rng.choice(levels[j + 1])) for j in range(len(levels) - 1) for e in levels[j]]
    rng.shuffle(facts)
    path = chain(facts, person)
    # each hop's fact must be among the k results of its search, or the question has no visible answer
    visible = all(f"{a}>{b}" in search(facts, a, k) for a, b in zip(path, path[1:]))
    return (facts, path) if visible else None


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
    Refused when built: hops > 20, name_len > 12 (the tool's longest query), more names per example than
    min(1000, half the names of name_len letters), a k that shows fewer than 2% of corpora's chains.
    """

    name = "search"
    DEFAULTS = {"hops": 3, "width": 4, "name_len": 3, "k": 4}  # what the examples depend on

    def __init__(self, *, hops: int = 3, width: int = 4, name_len: int = 3, k: int = 4, slack: int = 2):
        check_knob_types("search", locals(), knob_kinds(SearchTask))
        check_knob_rules("search", [
            (not 1 <= hops <= MAX_HOPS, f"1 <= hops <= {MAX_HOPS}, got hops={hops}"),
            (width < 1, f"width >= 1, got width={width}"),
            (not 2 <= name_len <= MAX_QUERY_CHARS,
             f"2 <= name_len <= {MAX_QUERY_CHARS} (the tool refuses longer queries), got name_len={name_len}"),
            (k < 1, f"k >= 1, got k={k}"),
            (slack < 0, f"slack >= 0, got slack={slack}"),
        ])
        self.hops, self.width, self.name_len, self.k, self.slack = hops, width, name_len, k, slack
        check_names(self)
        check_visible_chains(self)
        self.max_turns = hops + 1 + slack
        params = {"hops": hops, "width": width, "name_len": name_len, "k": k}
        self.eval_file = "search.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def make_example(self, rng: random.Random) -> Example:
        levels = draw_levels(rng, self.hops, self.width, self.name_len)
        person = rng.choice(levels[0])
        facts, path = redraw(lambda: draw_corpus(rng, levels, person, self.k), CORPUS_TRIES,
                             f"{self!r}: no corpus shows its chain within k={self.k} results")
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


def check_names(task: SearchTask) -> None:
    """Refuse more names per example than can be drawn distinct quickly: (hops + 1) * width of them, at most
    MAX_ENTITIES and at most 1/NAME_SHARE of the names of name_len letters (beyond, a draw waits on rare new ones)."""
    needed, exist = (task.hops + 1) * task.width, name_count(task.name_len)
    most = min(MAX_ENTITIES, exist // NAME_SHARE)
    if needed <= most:
        return
    share = exist // NAME_SHARE
    longer = next((n for n in range(task.name_len + 1, MAX_QUERY_CHARS + 1) if needed <= name_count(n) // NAME_SHARE),
                  None)
    why = ([f"at most {MAX_ENTITIES} fit an example"] if needed > MAX_ENTITIES else []) + (
        [f"name_len={task.name_len} makes {exist} distinct names and drawing more than 1/{NAME_SHARE} of them "
         f"({share}) takes too long"] if needed > share else [])
    fix = f"at most width={most // (task.hops + 1)} with hops={task.hops}, name_len={task.name_len}" + (
        f", or raise name_len (name_len={longer} makes {name_count(longer)})"
        if longer and needed <= MAX_ENTITIES else "")
    raise ValueError(f"search: width={task.width} with hops={task.hops} needs {needed} distinct names "
                     f"({task.width} per level, {task.hops + 1} levels), but {' and '.join(why)}; {fix}")


@functools.lru_cache(maxsize=256)
def probe_corpora(hops: int, width: int, name_len: int, k: int) -> tuple[int, int]:
    """(corpora drawn, how many show their chain within k results) of up to PROBE_CORPORA seeded draws, stopping
    at MIN_HITS."""
    rng, drawn, hits = random.Random(PROBE_SEED), 0, 0
    levels = draw_levels(rng, hops, width, name_len)
    while drawn < PROBE_CORPORA and hits < MIN_HITS:
        drawn, hits = drawn + 1, hits + (draw_corpus(rng, levels, rng.choice(levels[0]), k) is not None)
    return drawn, hits


def check_visible_chains(task: SearchTask) -> None:
    """Refuse a k too small for the hops: a corpus whose chain does not show within k results per search is
    redrawn, and with k=1 and many hops nearly every corpus is (a seeded probe must find MIN_HITS good ones)."""
    drawn, hits = probe_corpora(task.hops, task.width, task.name_len, task.k)
    if hits >= MIN_HITS:
        return
    enough = next((k for k in range(task.k + 1, task.width + 2)
                   if probe_corpora(task.hops, task.width, task.name_len, k)[1] >= MIN_HITS), task.width + 1)
    raise ValueError(f"search: k={task.k} with hops={task.hops}, width={task.width}: only {hits} of {drawn} random "
                     f"corpora show every hop's fact within k results (at least {MIN_HITS} are needed, or drawing "
                     f"examples takes too long); use k >= {enough}, or fewer hops")


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
