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
