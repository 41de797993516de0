"""Search self-play's proposer: given an answer, search the corpus backwards and pose a question that leads to it.

Every example is a `search` example's corpus and answer (the end of its chain: an entity of the last level, which
points nowhere); the proposer sees only the answer, searches with the solver's tool, and poses a subject. Format:
    prompt        "?>Zar"                         pose a question whose answer is Zar
    action        "[Zar]"                         search (the `search` tool, stop string "]"): the first k facts
    observation   "Kel>Zar Lon>Zar\n"             naming Zar, as the solver's searches show them
    action        "[Kel]"
    observation   "Bov>Kel Kel>Zar\n"
    action        "Q:Bov" + EOS                   the question: the `search` prompt "Bov?", ground truth Zar
Any action that is not a search ends the episode; the question is what follows its last "Q:", stripped.

Validity (the environment's reward: 1 valid, 0 not), the RAG check made exact. The retrieved documents are the facts
every search of the episode returned (the observations, nothing the proposer wrote itself). A proposal is valid iff
    (1) it poses a name: the text after the last "Q:" is letters only, 1 to 12 of them (the tool's longest query);
    (2) following the chain from that subject through the retrieved facts only ends at the answer; and
    (3) the chain has at least one hop (subject != answer, the reference's "the answer is not in the question").
Sound: retrieved facts are true facts and every entity points to one other, so the retrieved chain is a prefix of
the subject's true chain; ending at the answer, which points nowhere, it is the whole chain. A valid question's
ground truth under `search`'s verifier is therefore the answer: the solver's example is `search`'s format over the
same corpus, prompt "<subject>?", answer unchanged.

Decisions (the reference judges answerability with an LLM reading the proposer's retrieved documents, and gives
the proposer a ground truth from a QA data set; its code at Alibaba-Quark/SSP @ b4797e1,
`quarl/utils/problem_extraction.py::_is_valid_search_question`):
  - The proposer is given the answer (the reference's ground truth), not a free choice: a chosen answer could be a
    middle entity of a chain (a "country" asked as if it were the chain's end), which the retrieved documents cannot
    show to be wrong without the whole corpus. It poses only the subject; the hop count is its choice (1 to `hops`).
  - The reference's other filters (question length, >= 2 distinct search queries, the answer not among the queries)
    guard an LLM judge against trivial questions; here (3) is the only one: a one-hop question is legitimate.
  - The expert (for the SFT warm start) follows, from the answer, the first fact pointing in among each search's
    results, for up to `hops` searches, and poses the last entity reached: a rule that reads only the observations
    (a learnable policy), so its questions have 1 to `hops` hops (fewer where a search shows nothing pointing in).
  - The environment also plays `search` questions (a prompt without the "?>" mark) exactly as `search`, so that one
    warm start can teach both roles of the one policy: `sft_sample` mixes proposals and questions half and half (the
    warm start reads it where it offers one; `sample`, what training draws, gives proposals only).
  - The opening info carries the example's answer string (`ANSWER_KEY`, kept in the row's turn_info[0]): the group
    transform `ssp` builds the solver's question from a row alone, also for rows of a resampled round.
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import check_knob_types, knob_kinds
from workbench.envs.search import MAX_QUERY_CHARS, SearchEnv, SearchTask, search
from workbench.paths import DATA_DIR
from workbench.rewards.ssp import SSP_TITLE
from workbench.tasks.base import Example, Task, generated_eval_set, redraw
from workbench.text.answers import chain, search_answer

PROPOSE_MARK = "?>"            # a proposal's prompt: "?>Zar"
POSE = "Q:"                    # the proposal's final action: "Q:Bov"
ANSWER_KEY = "example_answer"  # the opening info's copy of the example's answer ("Zar|Bov>Kel,...")
DRAW_TRIES = 100               # search examples drawn per proposal at most (an answer nothing points into: never)
EVAL_FILE = "search-propose.jsonl"  # the held-out set at the default knobs (`make_eval` writes it)


def is_proposal(example: Example) -> bool:
    return example.prompt.startswith(PROPOSE_MARK)


def proposal_prompt(answer: str) -> str:
    return f"{PROPOSE_MARK}{answer}"


def posed(text: str) -> str | None:
    """The subject a final action poses: the text after its last "Q:", stripped, if it is a name (letters only, 1 to
    MAX_QUERY_CHARS of them); else None."""
    if POSE not in text:
        return None
    subject = text.rsplit(POSE, 1)[1].strip()
    return subject if subject.isalpha() and len(subject) <= MAX_QUERY_CHARS else None


def facts_of(results: list[str]) -> list[tuple[str, str]]:
    """["Bov>Kel", ...] (the tool's results) -> [("Bov", "Kel"), ...]."""
    return [tuple(f.split(">")) for f in results]


def retrieved(facts: list[tuple[str, str]], queries, k: int) -> list[tuple[str, str]]:
    """Every fact the searches `queries` returned (the tool's first k facts naming each query), each once."""
    return list(dict.fromkeys(f for q in sorted(queries) for f in facts_of(search(facts, q, k))))


def valid_question(subject: str | None, answer: str, documents: list[tuple[str, str]]) -> int | None:
    """The question's hops when it is valid (module docstring: a name whose chain through `documents` ends at
    `answer` after >= 1 hop), else None."""
    if subject is None:
        return None
    path = chain(documents, subject)  # followed through the retrieved documents only
    return len(path) - 1 if len(path) >= 2 and path[-1] == answer else None


def pointing_into(results: list[str], entity: str) -> list[str]:
    """Subjects of the results' facts whose object is `entity`, in the tool's order."""
    return [s for s, o in facts_of(results) if o == entity]


def expert_proposal(facts: list[tuple[str, str]], answer: str, hops: int, k: int) -> tuple[list[str], str]:
    """(queries, subject) of the expert's proposal: from the answer, search, step to the first fact pointing in,
    search that, ..., for up to `hops` searches; the subject is the last entity reached."""
    queries, path = [], [answer]
    while len(queries) < hops:
        queries.append(path[-1])
        into = pointing_into(search(facts, path[-1], k), path[-1])
        if not into:
            break
        path.append(into[0])
    return queries, path[-1]


@registry.env(
    "search-propose", title=SSP_TITLE, family="multiagent",
    summary="Search self-play's proposer: given an answer ('?>Zar'), search a per-example corpus with the search "
            "tool and pose a subject ('Q:Bov') whose chain ends there; reward 1 iff the facts the searches returned "
            "show the chain (RAG check, >= 1 hop). The solver's question is search's 'Bov?' over the same corpus.")
class ProposeTask(Task):
    """Proposals over `search` corpora (its knobs, checked by it: hops 3, width 4, name_len 3, k 4, slack 2): the
    answer is the end of a `search` example's chain. `solver` is that `search` task, which the solver's questions are
    asked in; `question(completion, opening)` is the solver example a proposing episode poses. Held-out set:
    data/eval/search-propose.jsonl at the default knobs, held out by prompt (the answer's name)."""

    name = "search-propose"
    DEFAULTS = SearchTask.DEFAULTS  # what the examples depend on

    def __init__(self, *, hops: int = 3, width: int = 4, name_len: int = 3, k: int = 4, slack: int = 2):
        check_knob_types("search-propose", locals(), knob_kinds(ProposeTask))
        self.solver = SearchTask(hops=hops, width=width, name_len=name_len, k=k, slack=slack)
        self.hops, self.width, self.name_len, self.k, self.slack = hops, width, name_len, k, slack
        self.max_turns = self.solver.max_turns  # at most `hops` searches and the question, with the same slack
        params = {"hops": hops, "width": width, "name_len": name_len, "k": k}
        self.eval_file = EVAL_FILE if params == self.DEFAULTS else None  # see AdditionTask

    def eval_set(self, n: int | None = None) -> list[Example]:
        """The shipped held-out file, or before `make_eval` has written it, the same draw made in memory
        (`draw_eval_set`, which `make_eval` saves)."""
        if self.eval_file and (DATA_DIR / "eval" / self.eval_file).exists():
            return super().eval_set(n)
        return generated_eval_set(self, n)

    def make_example(self, rng: random.Random) -> Example:
        return redraw(lambda: self.proposal(self.solver.make_example(rng)), DRAW_TRIES,
                      f"{self!r}: no search example whose answer has a fact pointing in")

    def proposal(self, question: Example) -> Example | None:
        """The proposal over a `search` example's corpus and answer (None if its expert poses no valid question)."""
        value, facts = search_answer(question.answer)
        _, subject = expert_proposal(facts, value, self.hops, self.k)
        if subject == value:
            return None
        return Example(prompt=proposal_prompt(value), answer=question.answer, target=f"{POSE}{subject}")

    def sft_sample(self, n: int, rng: random.Random) -> list[Example]:
        """Warm-start examples for both roles of the one policy: proposals and `search` questions alternating
        (questions from `search`'s own distribution, its held-out set excluded)."""
        proposals, questions = self.sample((n + 1) // 2, rng), self.solver.sample(n // 2, rng)
        return [e for pair in zip(proposals, questions + [None]) for e in pair if e is not None][:n]

    def score(self, completion: str, example: Example) -> float:
        """A proposal's validity from its episode's transcript (searches, observations, question), replayed through
        the environment (`replayed_reward`); a question's: `search`'s verifier."""
        if not is_proposal(example):
            return self.solver.score(completion, example)
        return replayed_reward(self.make_env(), example, completion)

    def expert_actions(self, example: Example) -> list[str]:
        if not is_proposal(example):
            return self.solver.expert_actions(example)
        value, facts = search_answer(example.answer)
        queries, _ = expert_proposal(facts, value, self.hops, self.k)
        return [f"[{q}]" for q in queries] + [example.target]

    def question(self, completion: str, opening: dict) -> Example | None:
        """The solver's example a proposing episode poses (its transcript `completion`, its opening info `opening` =
        turn_info[row][0]): `search`'s prompt "<subject>?" over the proposal's corpus and answer; None when the
        episode poses no name. Call it on valid proposals (the environment's reward 1)."""
        subject = posed(completion)
        answer = opening.get(ANSWER_KEY)
        if subject is None or answer is None:
            return None
        return Example(prompt=f"{subject}?", answer=answer, target=f"A:{search_answer(answer)[0]}")

    def make_env(self) -> "ProposeEnv":
        return ProposeEnv(self.solver)

    def __repr__(self) -> str:
        return (f"ProposeTask(hops={self.hops}, width={self.width}, name_len={self.name_len}, k={self.k}, "
                f"slack={self.slack})")


def replayed_reward(env: "ProposeEnv", example: Example, transcript: str) -> float:
    """The reward the environment gives the episode a plain transcript records: each search action ends at its "]"
    (the stop string; no action holds one elsewhere) and is followed by the observation the tool gives it; what is
    left is the final action. A transcript this corpus's tool did not produce scores 0."""
    env.reset(example)
    rest = transcript
    while "]" in rest:
        action, rest = rest.split("]", 1)
        observations, _, _, _ = env.step(action + "]")
        shown = observations[0]["content"] if observations else ""
        if not rest.startswith(shown):
            return 0.0
        rest = rest[len(shown):]
    return env.step(rest)[1]


class ProposeEnv(SearchEnv):
    """A proposing episode (a proposal example) or a solving one (a `search` question, played as `search` plays it).
    The tool, its observations, the state and the turn limit are `search`'s; a proposal's final action is scored by
    the RAG check on the facts its searches returned."""

    def reset(self, example: Example, seed: int | None = None):
        messages, info = super().reset(example, seed)
        return messages, {**info, ANSWER_KEY: example.answer}

    def step(self, action: str):
        if self.example is None or not is_proposal(self.example) or action.endswith("]"):
            return super().step(action)
        answer = search_answer(self.example.answer)[0]
        hops = valid_question(posed(action), answer, retrieved(self.facts, self.searched, self.task.k))
        return [], float(hops is not None), True, {"state": None, "hops": hops}
