"""One data-parallel optimizer step, run by `tests/test_distributed.py` under torchrun with 2 CPU ranks (gloo).

Each rank rolls out its half of the prompts, trains one step, and saves its batch, summed gradients and updated weights so the
test can replay the union batch in one process and compare."""
import sys
from pathlib import Path

import torch

from tests.helpers import DigitFirst
from workbench.train import make_config
from workbench.train.rl import Trainer

recipe, out = sys.argv[1], Path(sys.argv[2])
config = make_config("smoke", recipe=recipe, task="addition", steps=1, prompts_per_step=4, group_size=8,
                     max_new_tokens=6, sft_steps=0, eval_size=8, minibatches=1, lr=1e-2, distributed="ddp")
trainer = Trainer(config, out / "run")
trainer.task = DigitFirst()  # an untrained model gets it partly right: the groups carry signal
trainer.setup()
batch = trainer.rollout(0)
trainer.train_on(batch, 0)
params = [p for p in trainer.params]
torch.save({"batch": batch, "params": [p.detach().clone() for p in params],
            "grads": [p.grad.clone() for p in params],
            "same_on_all_ranks": trainer.parallel.same_parameters(params), "world": trainer.parallel.world},
           out / f"rank{trainer.parallel.rank}.pt")
