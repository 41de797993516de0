"""The SFT warm start: it lowers the loss and is cached."""
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
