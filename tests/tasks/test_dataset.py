"""File tasks: local JSONL/Parquet/JSON/CSV through `datasets`, held-out split, verifiers, errors, training."""
from __future__ import annotations

import json
import random
import sys
import threading

import pytest

pytest.importorskip("datasets", reason="file tasks need datasets: pip install -e '.[tasks]'")

from tests.helpers import TINY  # noqa: E402
from workbench.tasks import Example, get_task  # noqa: E402
from workbench.tasks.dataset import GSM8KStyleTask, held_out_prompts  # noqa: E402

N_ROWS = 60


def addition_rows(n: int = N_ROWS, seed: int = 0) -> list[dict]:
    """Distinct "a+b=" prompts: only characters the tiny model's tokenizer knows."""
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        a, b = rng.randrange(100), rng.randrange(100)
        if (a, b) not in seen:
            seen.add((a, b))
            rows.append({"prompt": f"{a}+{b}=", "answer": a + b})  # an int: answers are read as strings
    return rows


def write_jsonl(rows: list[dict], path):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_parquet(rows: list[dict], path):
    from datasets import Dataset

    Dataset.from_list(rows).to_parquet(str(path))
    return path


@pytest.fixture
def jsonl(tmp_path):
    return write_jsonl(addition_rows(), tmp_path / "add.jsonl")


def prompts(examples: list[Example]) -> set[str]:
    return {e.prompt for e in examples}


# ----- loading and the split -------------------------------------------------------------------

def test_jsonl_task_splits_samples_and_scores(jsonl):
    task = get_task(f"file:{jsonl}")
    assert task.name == f"file:{jsonl}"
    held_out = task.eval_set()
    assert len(held_out) == 6 and len(prompts(held_out)) == 6  # default 10% of 60 distinct prompts
    assert task.eval_set(2) == held_out[:2]
    assert len(task.train_rows) == N_ROWS - 6
    train = task.sample(500, random.Random(0))
    assert not prompts(held_out) & prompts(train)
    assert prompts(train) == prompts(task.train_rows)  # every training row is reachable
    assert task.sample(20, random.Random(1)) == task.sample(20, random.Random(1))
    assert task.sample(20, random.Random(1)) != task.sample(20, random.Random(2))
    for e in held_out + train[:50]:
        assert isinstance(e.answer, str) and e.target == e.answer
        assert task.score(e.target, e) == 1.0 and task.score(f" {e.answer}\n", e) == 1.0
        assert task.score(str(int(e.answer) + 1), e) == 0.0 and task.score("", e) == 0.0
    assert task.rewards([e.target for e in held_out], held_out) == [1.0] * 6


def test_parquet_gives_the_same_task_as_jsonl(jsonl, tmp_path):
    rows = addition_rows()
    from_jsonl = get_task(f"file:{jsonl}")
    from_parquet = get_task(f"file:{write_parquet(rows, tmp_path / 'add.parquet')}")
    assert from_parquet.eval_set() == from_jsonl.eval_set()
    assert from_parquet.train_rows == from_jsonl.train_rows
    assert from_parquet.sample(30, random.Random(3)) == from_jsonl.sample(30, random.Random(3))


def test_json_array_and_csv_files(tmp_path):
    rows = addition_rows(20)
    json_file = tmp_path / "add.json"
    json_file.write_text(json.dumps(rows))
    csv_file = tmp_path / "add.csv"
    csv_file.write_text("prompt,answer\n" + "".join(f"{r['prompt']},{r['answer']}\n" for r in rows))
    reference = get_task(f"file:{write_jsonl(rows, tmp_path / 'add.jsonl')}")
    for path in (json_file, csv_file):
        task = get_task(f"file:{path}")
        assert task.eval_set() == reference.eval_set() and task.train_rows == reference.train_rows, path


def test_split_is_deterministic_and_independent_of_row_order(tmp_path):
    rows = addition_rows()
    shuffled = rows[:]
    random.Random(9).shuffle(shuffled)
    a = get_task(f"file:{write_jsonl(rows, tmp_path / 'a.jsonl')}")
    b = get_task(f"file:{write_jsonl(shuffled, tmp_path / 'b.jsonl')}")
    assert a.eval_set() == get_task(f"file:{tmp_path / 'a.jsonl'}").eval_set()
    assert prompts(a.eval_set()) == prompts(b.eval_set())
    other_seed = get_task(f"file:{tmp_path / 'a.jsonl'}", seed=1)
    assert prompts(other_seed.eval_set()) != prompts(a.eval_set())
    assert len(get_task(f"file:{tmp_path / 'a.jsonl'}", eval_fraction=0.25).eval_set()) == 15


def test_held_out_prompts_edge_cases():
    assert held_out_prompts(["1", "2", "3"], 0.01, 0) and len(held_out_prompts(["1", "2", "3"], 0.99, 0)) == 2
    assert held_out_prompts(["1", "1"], 0.5, 0) == set()  # one distinct prompt: it must stay trainable
    assert held_out_prompts(["1", "2"], 0.0, 0) == set()
    with pytest.raises(ValueError, match="eval_fraction"):
        held_out_prompts(["1", "2"], 1.0, 0)


def test_duplicate_prompts_never_straddle_the_split(tmp_path):
    rows = addition_rows(30)
    path = write_jsonl(rows + rows[:15], tmp_path / "dup.jsonl")
    task = get_task(f"file:{path}", eval_fraction=0.3)
    assert len(task.eval_set()) == 9 and len(prompts(task.eval_set())) == 9
    assert not prompts(task.eval_set()) & prompts(task.train_rows)
    assert len(task.train_rows) == 45 - sum(1 for r in rows + rows[:15] if r["prompt"] in prompts(task.eval_set()))


def test_explicit_eval_file_is_held_out_of_training(tmp_path):
    rows = addition_rows(40)
    train_file = write_jsonl(rows, tmp_path / "train.jsonl")
    eval_file = write_parquet(rows[:5] + addition_rows(45)[40:], tmp_path / "eval.parquet")  # 5 overlap
    task = get_task(f"file:{train_file}", eval_path=str(eval_file))
    assert prompts(task.eval_set()) == {r["prompt"] for r in rows[:5] + addition_rows(45)[40:]}
    assert len(task.train_rows) == 35
    assert not prompts(task.eval_set()) & prompts(task.sample(300, random.Random(0)))
    with pytest.raises(ValueError, match="not both"):
        get_task(f"file:{train_file}", eval_path=str(eval_file), eval_fraction=0.1)


def test_custom_columns_target_and_template(tmp_path):
    rows = [{"q": r["prompt"], "gold": str(r["answer"]), "sft": f"{r['answer']}.", "tag": "add"}
            for r in addition_rows(20)]
    task = get_task(f"file:{write_jsonl(rows, tmp_path / 'c.jsonl')}", prompt_field="q", answer_field="gold",
                    target_field="sft", template="{tag}:{prompt}")
    e = task.sample(1, random.Random(0))[0]
    source = next(r for r in rows if f"add:{r['q']}" == e.prompt)
    assert e == Example(prompt=f"add:{source['q']}", answer=source["gold"], target=source["gold"] + ".")
    assert task.score(source["gold"], e) == 1.0


# ----- errors ----------------------------------------------------------------------------------

def test_missing_column_names_the_file_and_the_column(jsonl):
    with pytest.raises(ValueError, match=r"add\.jsonl: no column 'question' \(from prompt_field\)"):
        get_task(f"file:{jsonl}", prompt_field="question")
    with pytest.raises(ValueError, match=r"add\.jsonl: no column 'why' \(from target_field\)"):
        get_task(f"file:{jsonl}", target_field="why")
    with pytest.raises(ValueError, match=r"no column 'context' \(from template field \{context\}\)"):
        get_task(f"file:{jsonl}", template="{context}\n{prompt}")


def test_null_value_names_the_row(tmp_path):
    path = write_jsonl([{"prompt": "1+1=", "answer": "2"}, {"prompt": "1+2=", "answer": None}], tmp_path / "n.jsonl")
    with pytest.raises(ValueError, match=r"n\.jsonl: row 1 has no value in column 'answer'"):
        get_task(f"file:{path}")


@pytest.mark.parametrize("name, content, match", [
    ("empty.jsonl", "", r"empty\.jsonl is empty"),
    ("blank.jsonl", "\n\n", r"blank\.jsonl has no rows"),
    ("header.csv", "prompt,answer\n", r"header\.csv has no rows"),
    ("data.txt", "1+1=,2\n", r"data\.txt: unknown extension '\.txt'; supported: \.jsonl, \.json, \.parquet, \.csv"),
])
def test_unusable_files_say_why(tmp_path, name, content, match):
    (tmp_path / name).write_text(content)
    with pytest.raises(ValueError, match=match):
        get_task(f"file:{tmp_path / name}")


def test_a_malformed_jsonl_line_is_named_without_a_traceback(jsonl):
    lines = jsonl.read_text().splitlines(keepends=True)
    lines[4] = '{"prompt": "1+2=", "answer": 3\n'
    jsonl.write_text("".join(lines))
    with pytest.raises(ValueError, match=r"add\.jsonl:5: not valid JSON"):
        get_task(f"file:{jsonl}")


def test_the_data_digest_follows_the_content_not_the_path(jsonl, tmp_path):
    copy = tmp_path / "elsewhere.jsonl"
    copy.write_text(jsonl.read_text())
    digest = get_task(f"file:{jsonl}").data_digest()
    assert get_task(f"file:{copy}").data_digest() == digest
    jsonl.write_text(jsonl.read_text() + json.dumps({"prompt": "99+99=", "answer": 198}) + "\n")  # edited in place
    assert get_task(f"file:{jsonl}").data_digest() != digest
    assert get_task("addition").data_digest() is None


def test_bad_arguments(jsonl, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl does not exist"):
        get_task(f"file:{tmp_path / 'nope.jsonl'}")
    with pytest.raises(ValueError, match="unknown verifier 'fuzzy'; valid: exact, math"):
        get_task(f"file:{jsonl}", verifier="fuzzy")
    with pytest.raises(ValueError, match="unknown file-task style 'mmlu'"):
        get_task(f"file:{jsonl}", style="mmlu")
    with pytest.raises(ValueError, match="give a path"):
        get_task("file:")
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*file:<path>"):
        get_task("nope")


@pytest.mark.parametrize("kw, message", [
    ({"prompt_feild": "q"}, r"file:.*add\.jsonl: unknown task_kw key 'prompt_feild' \(did you mean 'prompt_field'\?\); "
                            r"file:.*'s knobs: style, prompt_field, answer_field, target_field, verifier, template, "
                            r"eval_fraction, eval_path, seed"),
    ({"eval_fraction": "0.2"}, r"wrong type for eval_fraction='0.2' \(str; need int or float or null\)"),
    ({"seed": 1.5}, r"wrong type for seed=1.5 \(float; need int\)"),
    ({"style": 3}, r"wrong type for style=3 \(int; need text\)"),
    ({"style": "gsm8k", "foo": 1}, r"unknown task_kw key 'foo'; .*prompt_field, answer_field, target_field"),
])
def test_unknown_and_mistyped_knobs_are_refused_with_the_file_tasks_knobs(jsonl, kw, message):
    with pytest.raises(ValueError, match=message):
        get_task(f"file:{jsonl}", **kw)


def test_missing_datasets_package_says_how_to_install(jsonl, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ImportError, match=r"pip install datasets"):
        get_task(f"file:{jsonl}")


# ----- the math verifier -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def math_task(tmp_path_factory):
    pytest.importorskip("math_verify", reason="the math verifier needs math-verify: pip install -e '.[tasks]'")
    path = tmp_path_factory.mktemp("math") / "m.jsonl"
    return get_task(f"file:{write_jsonl([{'prompt': 'p', 'answer': 'a'}, {'prompt': 'q', 'answer': 'b'}], path)}",
                    verifier="math")


def math_example(answer: str) -> Example:
    return Example(prompt="?", answer=answer, target=answer)


@pytest.mark.parametrize("gold", ["1/2", "0.5", r"\frac{1}{2}", r"$\frac{1}{2}$", r"\boxed{\frac12}"])
@pytest.mark.parametrize("completion", ["1/2", "0.5", r"\frac{1}{2}", r"$\dfrac{1}{2}$", " 0.50 ",
                                        r"so the answer is \boxed{0.5}.", r"Half: $\frac{2}{4}$"])
def test_math_verifier_accepts_equivalent_forms(math_task, gold, completion):
    assert math_task.score(completion, math_example(gold)) == 1.0


@pytest.mark.parametrize("gold, completion", [
    ("3", r"First 1+1=2, then we add one. The answer is \boxed{3}."),
    ("3", "2, no wait: 3"),           # the last expression counts
    ("1,000", "1000"),
    ("1000", "1,000"),
    (r"\sqrt{2}", r"$\sqrt{2}$"),
    ("x+1", "$1+x$"),
])
def test_math_verifier_reads_the_final_answer(math_task, gold, completion):
    assert math_task.score(completion, math_example(gold)) == 1.0


@pytest.mark.parametrize("gold, completion", [
    ("1/2", "1/3"),
    ("1/2", "2"),
    ("3", r"\boxed{4}"),
    ("3", "3, no wait: 4"),
    (r"\frac{1}{2}", "12"),
    ("3", ""),
    ("3", "no idea"),
    ("3", "\x00\xff\u2603" * 100),
    ("3", "(" * 200),
])
def test_math_verifier_rejects_wrong_answers_without_raising(math_task, gold, completion):
    assert math_task.score(completion, math_example(gold)) == 0.0


def test_math_verifier_works_outside_the_main_thread(math_task):
    """math-verify's SIGALRM timeout raises off the main thread; there we score without one."""
    results = []
    worker = threading.Thread(target=lambda: results.append(
        [math_task.score(c, math_example("1/2")) for c in ("0.5", "0.4")]))
    worker.start()
    worker.join()
    assert results == [[1.0, 0.0]]


GSM8K_ROWS = [
    {"question": "Natalia sold clips to 48 friends in April, and half as many in May. How many in all?",
     "answer": "In May she sold 48/2 = <<48/2=24>>24.\nIn all 48+24 = <<48+24=72>>72.\n#### 72"},
    {"question": "Weng earns $12 an hour. She did 50 minutes of babysitting. How much did she earn?",
     "answer": "Per minute 12/60 = $<<12/60=0.2>>0.2.\nSo 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"},
    {"question": "A shop sells 1,200 pens a day for 2 days. How many pens?",
     "answer": "1,200 * 2 = <<1200*2=2400>>2,400\n#### 2,400"},
    {"question": "Half of 7?", "answer": "7/2 = <<7/2=3.5>>3.5\n#### 3.5"},
]


def test_gsm8k_style_file(tmp_path):
    pytest.importorskip("math_verify")
    path = write_jsonl(GSM8K_ROWS, tmp_path / "gsm8k_test.jsonl")
    task = get_task(f"file:{path}", style="gsm8k", eval_fraction=0.25)
    assert isinstance(task, GSM8KStyleTask) and task.verifier == "math"
    examples = task.eval_set() + task.train_rows
    assert sorted(e.answer for e in examples) == ["10", "2400", "3.5", "72"]
    assert len(task.eval_set()) == 1 and not prompts(task.eval_set()) & prompts(task.train_rows)
    for e in examples:
        assert e.prompt.endswith("?\n") and "<<" not in e.target and e.target.endswith(f"\\boxed{{{e.answer}}}.")
        assert task.score(e.target, e) == 1.0
    by_answer = {e.answer: e for e in examples}
    assert task.score("So she earned $10.", by_answer["10"]) == 1.0
    assert task.score("2,400 pens", by_answer["2400"]) == 1.0
    assert task.score(r"\boxed{7/2}", by_answer["3.5"]) == 1.0
    assert task.score("71", by_answer["72"]) == 0.0
    bad = write_jsonl([{"question": "1+1?", "answer": "2"}], tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match=r"bad\.jsonl: gsm8k-style answer without a '#### <answer>' line"):
        get_task(f"file:{bad}", style="gsm8k")


# ----- training --------------------------------------------------------------------------------

def test_a_prompt_longer_than_the_model_takes_is_refused_before_anything_is_trained(tmp_path, monkeypatch):
    from workbench.train import make_config, train

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    rows = addition_rows() + [{"prompt": "1+" * 200_000 + "1=", "answer": 200_001}]  # 400 kB, 2000x the context
    path = write_jsonl(rows, tmp_path / "long.jsonl")
    for sft_steps in (0, 5):
        config = make_config("smoke", recipe="grpo", **{**TINY, "task": f"file:{path}", "sft_steps": sft_steps})
        with pytest.raises(ValueError, match=r"prompt \d+ .* is 4000\d\d tokens; with max_new_tokens=6 it needs 4000\d\d "
                                             r"positions, and the model takes \d+\. Shorten or drop"):
            train(config, tmp_path / f"run{sft_steps}", progress=False, report=False)
        assert not (tmp_path / f"run{sft_steps}" / "metrics.jsonl").exists()
    assert not list((tmp_path / "cache").glob("sft/*"))  # no warm start was trained


def test_rl_trainer_runs_on_a_file_task(tmp_path):
    from workbench.train import make_config, train
    from workbench.train.metrics import read_rows

    rows = [{"question": r["prompt"], "sum": str(r["answer"])} for r in addition_rows()]
    path = write_parquet(rows, tmp_path / "add.parquet")
    config = make_config("smoke", recipe="grpo", **{**TINY, "steps": 2, "task": f"file:{path}", "eval_size": 4,
                                                    "task_kw": {"prompt_field": "question", "answer_field": "sum"}})
    summary = train(config, tmp_path / "run", progress=False, report=False)
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    assert all(0 <= r["reward/mean"] <= 1 for r in rows)
    assert 0 <= summary["accuracy_before"] <= 1 and 0 <= summary["accuracy_after"] <= 1
    assert json.loads((tmp_path / "run" / "config.json").read_text())["task"] == f"file:{path}"
