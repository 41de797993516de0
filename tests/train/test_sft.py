"""The SFT warm start: it lowers the loss and is cached, by content."""
import pytest

from workbench.models import build_tiny
from workbench.tasks import get_task
from workbench.train import make_config
from workbench.train.sft import sft_loss, train_sft, warm_start


def test_sft_lowers_the_loss_and_the_warm_start_is_cached(tmp_path, monkeypatch):
    model, tokenizer = build_tiny(seed=0)
    task = get_task("addition", digits=1)
    before = sft_loss(model, tokenizer, task.eval_set()).item()
    train_sft(model, tokenizer, task, steps=40, lr=3e-3, batch_size=32, seed=0, progress=False)
    assert sft_loss(model, tokenizer, task.eval_set()).item() < before - 0.5
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    config = make_config("smoke", task="addition", task_kw={"digits": 1}, sft_steps=3)
    folder = warm_start(config, task, progress=False)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert warm_start(config, task, progress=False) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not retrained
    assert warm_start(make_config("smoke", sft_steps=0), task) is None


def test_a_file_tasks_warm_start_is_keyed_by_content_and_killed_builds_are_cleared(tmp_path, monkeypatch):
    import json
    import os

    from workbench.train.sft import warm_start_key

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(10) for b in range(10)]
    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = make_config("smoke", task=f"file:{data}", sft_steps=2, sft_batch=4)
    key = warm_start_key(config, get_task(config.task))
    moved = tmp_path / "moved.jsonl"
    moved.write_text(data.read_text())
    moved_config = make_config("smoke", task=f"file:{moved}", sft_steps=2, sft_batch=4)
    assert warm_start_key(moved_config, get_task(moved_config.task)) == key  # the same content elsewhere
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[::-1]))  # the same path, other content
    assert warm_start_key(config, get_task(config.task)) != key
    killed = tmp_path / "cache" / "sft" / f".abc.tmp-{2 ** 22 + 12345}-1"  # a pid no process has
    killed.mkdir(parents=True)
    folder = warm_start(moved_config, get_task(moved_config.task), progress=False)
    assert folder.is_dir() and not killed.exists()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name] and os.listdir(folder)


def folder_state(folder):
    """Every file under `folder` with its bytes and mtime: what a refused run must leave as it was (the lock file
    aside: it names whichever process holds the folder)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def addition_rows(answer=lambda a, b: a + b):
    return [{"prompt": f"{a}+{b}=", "answer": str(answer(a, b))} for a in range(10) for b in range(10)]


def write_rows(path, rows):
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_characters_the_tiny_tokenizer_cannot_represent_are_refused_before_sft(tmp_path, monkeypatch):
    """The tiny model's character tokenizer knows printable ASCII and newline: "café" and "cafè" both became
    "caf<unk>", one prompt with two answers. Refused, counting the characters and naming the first texts."""
    from workbench.train.sft import check_task_prompts

    rows = [{"prompt": f"{w} {i}?", "answer": str(i)} for i in range(20) for w in ("cafe", "tea")]
    rows += [{"prompt": "café 1?", "answer": "1"}, {"prompt": "cafè 1?", "answer": "2"},
             {"prompt": "naïve?", "answer": "ü"}]
    task = get_task(f"file:{write_rows(tmp_path / 'cafe.jsonl', rows)}")
    model, tokenizer = build_tiny(seed=0)
    with pytest.raises(ValueError, match=r"task 'file:.*cafe\.jsonl': 4 distinct characters \(4 in all, in 4 prompts "
                                         r"or targets\) are not in the tokenizer's vocabulary and would all become "
                                         r"'<unk>', merging distinct texts: 'è' x1, 'é' x1, 'ï' x1, 'ü' x1; first in "
                                         r"'caf[éè] 1\?'"):
        check_task_prompts(task, model, tokenizer, max_new_tokens=4)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    config = make_config("smoke", task=task.name, sft_steps=2, sft_batch=4)
    with pytest.raises(ValueError, match="not in the tokenizer's vocabulary"):
        warm_start(config, task, progress=False)
    assert not list((tmp_path / "cache").rglob("config.json"))  # refused before a warm start was trained


def test_a_byte_level_tokenizer_represents_every_character_and_is_not_refused(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from workbench.train.sft import check_representable, check_task_prompts

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    byte_level = PreTrainedTokenizerFast(tokenizer_object=core)
    rows = [{"prompt": f"café {i}?", "answer": f"ü{i}"} for i in range(20)]
    task = get_task(f"file:{write_rows(tmp_path / 'cafe.jsonl', rows)}")
    check_task_prompts(task, None, byte_level, max_new_tokens=4)
    with pytest.raises(ValueError, match=r"'é' x20, 'ü' x20"):  # the same rows, for the tiny model
        check_representable(build_tiny(seed=0)[1], task.known_examples(), "t")


TINY_RUN = dict(steps=3, prompts_per_step=2, group_size=2, max_new_tokens=4, eval_size=4, checkpoint_every=1,
                minibatches=1, sft_batch=4)


def test_a_resumed_run_whose_data_file_changed_is_refused_and_nothing_is_rewritten(tmp_path, monkeypatch):
    from tests.helpers import Interrupt, run_task
    from workbench.train.checkpoint import kept_checkpoints

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    data, out = tmp_path / "add.jsonl", tmp_path / "run"
    write_rows(data, addition_rows())
    config = make_config("smoke", recipe="grpo", task=f"file:{data}", sft_steps=3, **TINY_RUN)
    with pytest.raises(Interrupt):
        run_task(config, out, stop_after_step=1)  # stopped in step 1 (of 0-2), as if killed
    assert [p.name for p in kept_checkpoints(out)] == ["step_000001"]  # what a rerun resumes from
    before, cache = folder_state(out), folder_state(tmp_path / "cache")
    write_rows(data, addition_rows(lambda a, b: a * b))  # the data file edited in place
    with pytest.raises(ValueError, match=rf"{out} holds a run that started from other inputs: the data files of task "
                                         rf"'file:{data}' \(recorded \w+, now \w+\) changed since.*choose another --out"):
        run_task(config, out)
    assert folder_state(out) == before and folder_state(tmp_path / "cache") == cache  # no new warm start either
    write_rows(data, addition_rows())  # restored: the run resumes
    run_task(config, out)
    assert (out / "summary.json").exists()


def test_a_resumed_run_whose_model_folder_was_saved_over_is_refused(tmp_path, monkeypatch):
    from tests.helpers import run_task
    from workbench.models import save_model

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    model, out = tmp_path / "model", tmp_path / "run"
    save_model(*build_tiny(seed=0), model)
    config = make_config("smoke", recipe="grpo", task="addition", model=str(model), sft_steps=0,
                         **{**TINY_RUN, "steps": 1})
    run_task(config, out)
    before = folder_state(out)
    save_model(*build_tiny(seed=1), model)  # other weights under the same name
    with pytest.raises(ValueError, match=rf"started from other inputs: the model folder {model} \(recorded"):
        run_task(config, out)
    assert folder_state(out) == before


def test_a_bad_preference_data_file_is_refused_before_the_warm_start_and_before_config_json(tmp_path, monkeypatch,
                                                                                            capsys):
    from workbench import cli

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "run"
    args = ["run", "dpo", "--task", "addition", "--quiet", "--out", str(out), "--set", f"data_path={pairs}",
            "--set", "sft_steps=20", "--set", "steps=1", "--set", "eval_size=4", "--set", "max_new_tokens=4"]
    good = {"prompt": "1+1=", "chosen": "2", "rejected": "3"}
    for rows, problem in (([good, {"prompt": "2+2=", "chosen": "4"}], "row 2: missing fields ['rejected']"),
                          ([good, {**good, "prompt": "1+" * 2000 + "1="}], "prompt 1 ('1+1+"),
                          ([good, {**good, "chosen": "9" * 300}], "row 2 ('1+1='...) is")):
        write_rows(pairs, rows)
        assert cli.main(args) == 2
        err = capsys.readouterr().err
        assert problem in err and "Traceback" not in err, err
        assert not (tmp_path / "cache" / "sft").exists()  # no warm start was trained
        assert not (out / "config.json").exists()
    write_rows(pairs, [good, {"prompt": "2+2=", "chosen": "4", "rejected": "5"}])
    assert cli.main(args) == 0


def test_prompts_longer_than_the_vllm_engine_takes_are_refused_before_sft(tmp_path, monkeypatch):
    """engine="vllm" refused such prompts only when it first sampled, after the warm start and the evaluation."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    config = make_config("smoke", task="addition", engine="vllm", vllm_max_model_len=8, max_new_tokens=6,
                         sft_steps=5)
    with pytest.raises(ValueError, match=r"task 'addition' on the vLLM engine \(max_model_len=8: vllm_max_model_len\)"
                                         r": prompt .* needs \d+ positions, and the model takes 8"):
        warm_start(config, get_task("addition"), progress=False)
    assert not (tmp_path / "cache" / "sft").exists() or not any((tmp_path / "cache" / "sft").iterdir())


def test_a_games_warm_start_plays_a_new_game_each_time_a_deal_comes_back():
    """The random expert's hands of one deal differ from sample to sample (seeded per sample), so SFT imitates the
    uniform strategy, not one fixed game per deal."""
    import random as _random

    from workbench.envs.poker import KuhnTask
    from workbench.models import char_tokenizer
    from workbench.tasks import Example
    from workbench.train.sft import expert_batch

    tok, rng = char_tokenizer(), _random.Random(0)
    deals = [Example("", "QK", "")] * 200
    _, _, fixed, _ = expert_batch(tok, KuhnTask(), deals)
    _, _, seeded, mask = expert_batch(tok, KuhnTask(), deals, seeds=[rng.getrandbits(32) for _ in deals])
    assert len({tuple(row.tolist()) for row in fixed}) <= 2  # one game per deal: player 0's row and player 1's
    first = [tok.convert_ids_to_tokens(int(row[0])) for row in seeded]
    assert 0.4 < first.count("b") / len(first) < 0.6  # each first action a fair coin
