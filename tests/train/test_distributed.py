"""Data parallelism on CPU: two ranks (torchrun / accelerate launch, gloo) take exactly the one-process step."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench.batch import concat
from workbench.train import make_config
from workbench.train.distributed import DataParallel
from workbench.train.trainer import Trainer

WORKER = Path(__file__).parent / "workers" / "ddp_step.py"
ROOT = Path(__file__).resolve().parents[2]


def union_advantages(ranks):
    return torch.cat([r["batch"].advantages.flatten() for r in ranks])


def launch(recipe: str, out: Path, launcher: str, port: int, mode: str = "ddp") -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
               str(port)]
    done = subprocess.run([*cmd, str(WORKER), recipe, str(out), mode], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("recipe,launcher,port,mode", [
    ("grpo", "torchrun", 29521, "ddp"), ("dr_grpo", "accelerate", 29522, "ddp"), ("ppo", "torchrun", 29523, "ddp"),
    ("grpo", "torchrun", 29524, "fsdp"), ("ppo", "accelerate", 29525, "fsdp"), ("ppo-max", "torchrun", 29526, "ddp"),
    ("bapo", "torchrun", 29527, "ddp"), ("vspo", "torchrun", 29528, "ddp"), ("arpo-gui", "torchrun", 29529, "ddp")])
def test_two_ranks_take_the_one_process_step(recipe, launcher, port, mode, tmp_path):
    """grpo: seq-mean-token-mean; dr_grpo: seq-mean-token-sum-norm (C = B_global L_max); ppo: token-mean with a
    critic (global value-mask counts). The union of the ranks' batches replayed in one process gives the same
    gradients (ppo-max: its running reward moments, updated from every rank's rewards, are the same on both
    ranks); under FSDP the sharded gradients, gathered, are the same too, the replica the rollout engine
    samples from holds the updated weights, and a gathered checkpoint loads back into a sharded model; bapo: its
    bound search sums pos and neg over the ranks, so both search the whole step's ratios, as one process does; vspo:
    every rank keeps the pass rates of every rank's groups, sampling the same number of rounds."""
    launch(recipe, tmp_path, launcher, port, mode)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert all(r["world"] == 2 and r["same_on_all_ranks"] and r["resumed_equal"] for r in ranks)
    assert all(r["engine_in_sync"] for r in ranks)
    assert ranks[0]["pipeline_state"] == ranks[1]["pipeline_state"]  # stateful components agree across ranks
    if recipe == "vspo":  # every rank's pass rates hold both ranks' prompts, resampled ones included
        rates = ranks[0]["pipeline_state"]["group_transform:vspo"].rate
        assert {p for r in ranks for p in r["batch"].prompts} <= set(rates)
    if recipe == "arpo-gui":  # the pool chose before sharding and learnt every rank's pass rates; one buffer
        pool = ranks[0]["pipeline_state"]["sampler:pool"]
        assert {p for r in ranks for p in r["batch"].prompts} == {pool.examples[i].prompt for i in pool.chosen[-1][1]}
        assert sum(len(h) for h in pool.pass_rates.values()) == 4 * len(pool.chosen)  # 4 prompts a step, both ranks'
        buffer = ranks[0]["pipeline_state"]["group_transform:arpo-gui"]["buffer"]
        assert {e.key for e in buffer.entries} <= {p for r in ranks for p in r["batch"].prompts} | {
            pool.examples[i].prompt for _, ids in pool.chosen for i in ids}
    if recipe == "ppo-max":  # the moments saw the whole step's rewards, not one rank's half
        assert ranks[0]["pipeline_state"]["reward_shaping:ppo-max"].count == sum(r["batch"].size for r in ranks)
    assert all(torch.equal(a, b) for a, b in zip(ranks[0]["params"], ranks[1]["params"]))
    prompts = [set(map(tuple, r["batch"].prompt_ids.tolist())) for r in ranks]
    assert not prompts[0] & prompts[1]  # each rank rolled out its own prompts

    pool = {"recipe_overrides": {"sampler": {"size": 8}}} if recipe == "arpo-gui" else {}  # as the worker's
    config = make_config("smoke", recipe=recipe, task="addition", steps=1, prompts_per_step=4, group_size=8,
                         max_new_tokens=6, sft_steps=0, eval_size=8, minibatches=1, lr=1e-2, **pool)
    single = Trainer(config, tmp_path / "single", progress=False).setup()
    assert float(union_advantages(ranks).abs().max()) > 0  # the step has a policy gradient
    union = concat([r["batch"] for r in ranks], pad_id=single.tokenizer.pad_token_id)
    whole = single.train_on(union, 0)
    # gradients, not Adam's first update (≈ lr·sign(g), which turns float noise in g ≈ 0 into ±lr)
    scale = max(float(p.grad.abs().max()) for p in single.params)
    for got, p in zip(ranks[0]["grads"], single.params):
        assert torch.allclose(got, p.grad, atol=1e-5 * scale, rtol=1e-4), (got - p.grad).abs().max()
    assert scale > 0  # the step had a gradient (the comparison can fail)
    # half the ranks' data is not the whole step: rank 0's own loss alone gives another gradient
    half = single.train_on(ranks[0]["batch"], 0)
    if recipe == "bapo":  # every rank searched the whole step's pos / neg, not its half
        share = whole["bapo/pos_share"]
        assert all(r["metrics"]["bapo/pos_share"] == pytest.approx(share, rel=1e-6) for r in ranks)
        assert half["bapo/pos_share"] != pytest.approx(share, rel=1e-6)  # so the comparison can fail
    assert not all(torch.allclose(got, p.grad, atol=1e-5 * scale, rtol=1e-4)
                   for got, p in zip(ranks[0]["grads"], single.params))


def test_one_process_is_rank_zero_of_one_and_bad_modes_are_named():
    parallel = DataParallel("none")
    assert (parallel.rank, parallel.world, parallel.is_main, parallel.active) == (0, 1, True, False)
    assert parallel.shard([1, 2, 3]) == [1, 2, 3] and parallel.sum([2.0, 3.0]) == [2.0, 3.0]
    with pytest.raises(ValueError, match="distributed must be one of"):
        DataParallel("zero3")
