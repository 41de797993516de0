"""One data-parallel optimizer step, run by `tests/train/test_distributed.py` under torchrun / accelerate with 2
CPU ranks (gloo).

Each rank rolls out its half of the prompts, trains one step, and saves its batch, the summed (full) gradients
and the updated weights, so the test can replay the union batch in one process and compare. With
`checkpoint` it also saves a checkpoint (gathered under FSDP) and resumes it into a fresh trainer.
"""
import sys
from pathlib import Path

import torch

from tests.helpers import DigitFirst
from workbench.train import make_config
from workbench.train.distributed import full_tensor
from workbench.recipes import get_recipe
from workbench.train.trainer import Trainer

recipe, out, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
pool = {"recipe_overrides": {"sampler": {"size": 8}}} if get_recipe(recipe).sampler.key == "pool" else {}  # DigitFirst
config = make_config("smoke", recipe=recipe, task="addition", steps=1, prompts_per_step=4, group_size=8,
                     max_new_tokens=6, sft_steps=0, eval_size=8, minibatches=1, lr=1e-2, distributed=mode, **pool)


def trainer_at(folder):
    trainer = Trainer(config, folder, progress=False)
    trainer.task = DigitFirst()  # an untrained model gets it partly right: the groups carry signal
    return trainer.setup()


trainer = trainer_at(out / "run")
batch = trainer.make_batch(0)
metrics = trainer.train_on(batch, 0)
trainer.push_weights()
if pool:  # the samplers learn from the finished step (every rank's outcomes)
    trainer.pipeline.after_step(batch, {"step": 0, **metrics}, trainer.context(0))
params = trainer.params
result = {"batch": batch, "metrics": metrics, "params": [full_tensor(p.detach()).clone() for p in params],
          "grads": [full_tensor(p.grad).clone() for p in params],
          "same_on_all_ranks": trainer.parallel.same_parameters(params), "world": trainer.parallel.world,
          "pipeline_state": trainer.pipeline.state_dict(),  # components' state (e.g. PPO-max's reward moments)
          "engine_in_sync": all(torch.equal(full_tensor(p.detach()), q)
                                for p, q in zip(trainer.model.parameters(), trainer.engine.model.parameters()))}
state = trainer.state(1, 0.0)  # every rank (a collective under FSDP)
if trainer.parallel.is_main:
    torch.save(state, out / "state.pt")
torch.distributed.barrier()
resumed = trainer_at(out / "resumed")
resumed.parallel.load_model_state(resumed.model, torch.load(out / "state.pt", weights_only=False)["model"])
result["resumed_equal"] = all(torch.equal(full_tensor(a.detach()), full_tensor(b.detach()))
                              for a, b in zip(resumed.model.parameters(), trainer.model.parameters()))
torch.save(result, out / f"rank{trainer.parallel.rank}.pt")
