"""Tasks over a local data file (JSONL / JSON / Parquet / CSV), loaded with `datasets` (optional dependency).

    get_task("file:data/train.jsonl")                                    # columns "prompt", "answer"
    get_task("file:qa.parquet", prompt_field="q", answer_field="a", verifier="math")
    get_task("file:gsm8k_test.jsonl", style="gsm8k")                     # GSM8K's question / "#### n" rows

Format: prompt = `template` filled with the row (`{prompt}` is the prompt column, any other column by
its name); answer = the answer column; target (the SFT completion) = `target_field`, default the answer.
The held-out set is either `eval_path` (a second file with the same columns) or the `eval_fraction` of
distinct prompts with the smallest seeded hash, so it is the same on every machine and in every row
order; training rows are the rows whose prompt is not held out. Nothing is fetched from the hub.

Verifiers (`verifier=`): "exact" (stripped string equality) and "math" (math-verify: `1/2`, `0.5` and
`\\frac{1}{2}` are one answer; the last `\\boxed{}` or expression of a completion is what counts).
math-verify bounds each parse/compare with SIGALRM, which only the main thread may use: scored from
any other thread it runs without a time limit. In the main thread it replaces any alarm already set.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import random
import re
import string
import threading
from pathlib import Path

from workbench.envs.base import Knob, check_knob_types, check_knobs, knob_kinds
from workbench.files import read_jsonl
from workbench.tasks.base import Example, Task

FILE_PREFIX = "file:"
BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}  # extension -> datasets builder
DEFAULT_EVAL_FRACTION = 0.1
MATH_TIMEOUT_S = 5  # math-verify's own default, per parse and per comparison

INSTALL_HINT = "pip install datasets math-verify  (or, from a checkout: pip install -e '.[tasks]')"


def import_optional(module: str):
    """`module`, or an ImportError that says how to install the file tasks' dependencies."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"file tasks need the {module} package: {INSTALL_HINT}") from err


# ----- loading -----------------------------------------------------------------------------------

def load_rows(path: str | Path) -> list[dict]:
    """Every row of a local data file as a dict, read by `datasets.load_dataset` with the builder
    its extension names; errors say which file is missing, empty or of an unknown kind."""
    path = Path(path)
    builder = BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{path}: unknown extension {path.suffix!r}; supported: {', '.join(BUILDERS)}")
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} does not exist")
    if path.stat().st_size == 0:
        raise ValueError(f"data file {path} is empty")
    if path.suffix.lower() == ".jsonl":
        read_jsonl(path)  # a malformed line: an error naming it, not the JSON builder's traceback
    datasets = import_optional("datasets")
    with quiet_progress(datasets):
        try:
            table = datasets.load_dataset(builder, data_files=str(path), split="train")
        except ValueError as err:  # e.g. a CSV with a header and no rows: "corresponds to no data"
            raise ValueError(f"data file {path} has no rows ({err})") from err
    if len(table) == 0:
        raise ValueError(f"data file {path} has no rows")
    return table.to_list()


@contextlib.contextmanager
def quiet_progress(datasets):
    """Hide `datasets`' progress bars while loading (a local file loads in milliseconds), then restore."""
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def template_fields(template: str) -> set[str]:
    """Names a `str.format` template refers to, e.g. {"prompt", "context"}."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


def check_columns(path: Path, rows: list[dict], needed: dict[str, str]) -> None:
    """Raise a ValueError naming the file and the option whose column it lacks."""
    columns = set(rows[0])
    for option, column in needed.items():
        if column not in columns:
            raise ValueError(f"{path}: no column {column!r} (from {option}); columns: {sorted(columns)}")
    for i, row in enumerate(rows):
        for column in set(needed.values()):
            if row.get(column) is None:
                raise ValueError(f"{path}: row {i} has no value in column {column!r}")


# ----- held-out split ----------------------------------------------------------------------------

def prompt_rank(prompt: str, seed: int) -> str:
    """A seeded hash: stable across processes and machines (unlike `hash`)."""
    return hashlib.sha256(f"{seed}\0{prompt}".encode()).hexdigest()


def held_out_prompts(prompts: list[str], fraction: float, seed: int) -> set[str]:
    """The `fraction` of distinct prompts that hash lowest, at least one and never all of them.

    Ranking by hash (rather than shuffling by position) keeps the split independent of row order,
    and keeps it mostly unchanged when rows are appended to the file.
    """
    if not 0 <= fraction < 1:
        raise ValueError(f"eval_fraction must be in [0, 1), got {fraction}")
    distinct = sorted(set(prompts), key=lambda p: prompt_rank(p, seed))
    if fraction == 0 or len(distinct) < 2:
        return set()
    k = min(max(1, round(fraction * len(distinct))), len(distinct) - 1)
    return set(distinct[:k])


def first_per_prompt(examples: list[Example]) -> list[Example]:
    """The first example of each prompt, in file order: held-out sets have distinct prompts."""
    first: dict[str, Example] = {}
    for e in examples:
        first.setdefault(e.prompt, e)
    return list(first.values())


# ----- verifiers ---------------------------------------------------------------------------------

def exact_match(completion: str, answer: str) -> bool:
    return completion.strip() == answer.strip()


def math_timeout() -> int | None:
    """math-verify's SIGALRM limit only works in the main thread; elsewhere run unbounded."""
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=4096)
def parsed_gold(answer: str, timeout: int | None):
    """The gold answer parsed once per distinct answer: plain answers are read as LaTeX math."""
    mv = import_optional("math_verify")
    gold = answer if "$" in answer or "\\boxed" in answer else f"${answer}$"
    return mv.parse(gold, parsing_timeout=timeout)


def math_match(completion: str, answer: str) -> bool:
    """math-verify equivalence of the completion's final expression to the gold answer."""
    mv = import_optional("math_verify")
    timeout = math_timeout()
    try:
        return bool(mv.verify(parsed_gold(answer.strip(), timeout), mv.parse(completion, parsing_timeout=timeout),
                              timeout_seconds=timeout))
    except Exception:  # a verifier must never crash training on junk model output
        return False


VERIFIERS = {"exact": exact_match, "math": math_match}


# ----- tasks -------------------------------------------------------------------------------------

class DatasetTask(Task):
    """Rows of a local file as a task; see the module docstring for the format and the split."""

    def __init__(self, path: str | Path, *, prompt_field: str = "prompt", answer_field: str = "answer",
                 target_field: str | None = None, verifier: str = "exact", template: str = "{prompt}",
                 eval_fraction: float | None = None, eval_path: str | Path | None = None, seed: int = 0):
        if verifier not in VERIFIERS:
            raise ValueError(f"unknown verifier {verifier!r}; valid: {', '.join(VERIFIERS)}")
        if eval_path is not None and eval_fraction is not None:
            raise ValueError("give eval_fraction or eval_path, not both")
        if verifier == "math":
            import_optional("math_verify")  # fail now, not at the first reward
        self.path, self.eval_path = Path(path), None if eval_path is None else Path(eval_path)
        self.name = FILE_PREFIX + str(path)
        self.fields = {"prompt_field": prompt_field, "answer_field": answer_field,
                       "target_field": target_field or answer_field}
        self.verifier, self.template, self.seed = verifier, template, seed
        self.eval_fraction = DEFAULT_EVAL_FRACTION if eval_fraction is None and eval_path is None else eval_fraction

        examples = self.load_examples(self.path)
        if self.eval_path is not None:
            held_out_rows = first_per_prompt(self.load_examples(self.eval_path))
            held_out = {e.prompt for e in held_out_rows}
        else:
            held_out = held_out_prompts([e.prompt for e in examples], self.eval_fraction, seed)
            held_out_rows = first_per_prompt([e for e in examples if e.prompt in held_out])
        self.held_out_rows = held_out_rows
        self.train_rows = [e for e in examples if e.prompt not in held_out]
        if not self.train_rows:
            raise ValueError(f"{self.path}: every prompt is held out; nothing left to train on")

    def known_examples(self) -> list[Example]:
        return self.train_rows + self.held_out_rows

    def data_digest(self) -> str:
        """sha256 of the data file and the held-out file, by content (an edit in place changes it)."""
        digest = hashlib.sha256()
        for path in (self.path, self.eval_path):
            if path is not None:
                digest.update(file_sha256(path).encode())
        return digest.hexdigest()[:16]

    def needed_columns(self) -> dict[str, str]:
        """Option -> column for every column a row must have, template fields included."""
        needed = dict(self.fields)
        for name in sorted(template_fields(self.template) - {"prompt"}):
            needed[f"template field {{{name}}}"] = name
        return needed

    def load_examples(self, path: Path) -> list[Example]:
        rows = load_rows(path)
        check_columns(path, rows, self.needed_columns())
        try:
            return [self.to_example(row) for row in rows]
        except ValueError as err:  # a row this task's format cannot read: say which file
            raise ValueError(f"{path}: {err}") from err

    def to_example(self, row: dict) -> Example:
        f = self.fields
        prompt = self.template.format_map({**row, "prompt": str(row[f["prompt_field"]])})
        return Example(prompt=prompt, answer=str(row[f["answer_field"]]), target=str(row[f["target_field"]]))

    def make_example(self, rng: random.Random) -> Example:
        return self.train_rows[rng.randrange(len(self.train_rows))]

    def score(self, completion: str, example: Example) -> float:
        return 1.0 if VERIFIERS[self.verifier](completion, example.answer) else 0.0

    def eval_set(self, n: int | None = None) -> list[Example]:
        rows = self.held_out_rows
        return rows[:n] if n else list(rows)

    def __repr__(self) -> str:
        split = f"eval_path={str(self.eval_path)!r}" if self.eval_path else f"eval_fraction={self.eval_fraction}"
        return (f"{type(self).__name__}({str(self.path)!r}, verifier={self.verifier!r}, {split}, "
                f"template={self.template!r}, " + ", ".join(f"{k}={v!r}" for k, v in self.fields.items()) + ")")


GSM8K_FINAL = re.compile(r"####\s*(.+?)\s*$", re.S)
CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")  # GSM8K's "<<48/2=24>>" calculator annotations


def gsm8k_final_answer(solution: str) -> str | None:
    """The number after GSM8K's "####" marker, thousands separators removed; None when absent."""
    match = GSM8K_FINAL.search(solution)
    return match.group(1).replace(",", "") if match else None


def gsm8k_target(solution: str, answer: str) -> str:
    """The worked solution without calculator notes, ending in a boxed answer the math verifier reads."""
    steps = CALCULATOR_NOTE.sub("", solution[:solution.rindex("####")]).rstrip()
    return f"{steps}\nThe answer is \\boxed{{{answer}}}."


class GSM8KStyleTask(DatasetTask):
    """A file in GSM8K's layout: "question", and "answer" = worked solution ending "#### <number>".

    Defaults to the math verifier; the gold is the number after "####" and the SFT target is the
    solution with that number boxed, so SFT targets score 1.0.
    """

    def __init__(self, path: str | Path, *, prompt_field: str = "question", answer_field: str = "answer",
                 verifier: str = "math", template: str = "{prompt}\n", **kwargs):
        if kwargs.get("target_field") is not None:
            raise ValueError("gsm8k-style targets come from the answer column; target_field is not used")
        super().__init__(path, prompt_field=prompt_field, answer_field=answer_field, verifier=verifier,
                         template=template, **kwargs)

    def to_example(self, row: dict) -> Example:
        example = super().to_example(row)
        answer = gsm8k_final_answer(example.answer)
        if answer is None:
            raise ValueError(f"gsm8k-style answer without a '#### <answer>' line: {example.answer[:80]!r}")
        return Example(prompt=example.prompt, answer=answer, target=gsm8k_target(example.answer, answer))


STYLES: dict[str, type[DatasetTask]] = {"plain": DatasetTask, "gsm8k": GSM8KStyleTask}


def file_task(path: str, style: str = "plain", **kwargs) -> DatasetTask:
    """The task for `get_task("file:<path>", style=..., **kwargs)`, its knobs checked first: those of the style's
    class (a GSM8K-style file takes every plain one too)."""
    name = FILE_PREFIX + str(path)
    check_knob_types(name, {"style": style}, {"style": str})
    if style not in STYLES:
        raise ValueError(f"{name}: unknown file-task style {style!r}; valid: {', '.join(STYLES)}")
    if not path:
        raise ValueError(f"give a path after {FILE_PREFIX!r}, e.g. 'file:data/train.jsonl'")
    knobs = {**knob_kinds(DatasetTask), **knob_kinds(STYLES[style]), "style": Knob((str,), "plain")}
    check_knobs(name, kwargs, file_task, extra=knobs)
    return STYLES[style](path, **kwargs)
