"""Data-parallel training: `accelerate launch --num_processes N` (or torchrun) starts N ranks; each rank rolls
out its share of the step's prompts and trains on it, and the loss stays the single-process loss exactly.

Why exact: every rank divides its loss by the *global* counts of the optimizer step (`Denominators` summed
across ranks), so the ranks' losses add up to the loss of the whole batch; gradients are then summed across
ranks (one all-reduce of a flat buffer, as DDP's buckets do) instead of averaged. Groups never straddle ranks,
so group-relative advantages (GRPO, RLOO, ...) are unchanged. Statistics over the whole batch (LitePPO's
batch std, whitened GAE) are taken per rank: a documented difference from one process.

Accelerate sets up the process group (gloo on CPU, NCCL on GPU) from the launcher's environment. The config
switch is `RunConfig.distributed`: "none" (one process) or "ddp".
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from workbench import ops

MODES = ("none", "ddp")


class DataParallel:
    """Rank bookkeeping and the three collectives training needs: shard prompts, sum counts, sum gradients."""

    def __init__(self, mode: str = "none", device: str = "cpu"):
        if mode not in MODES:
            raise ValueError(f"distributed must be one of {MODES}, got {mode!r} (FSDP is not implemented)")
        self.mode = mode
        self.rank, self.world = 0, 1
        if mode == "ddp":
            from accelerate import PartialState

            state = PartialState(cpu=device == "cpu")
            self.rank, self.world = state.process_index, state.num_processes

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list) -> list:
        """This rank's share of the step's prompts (all G samples of a prompt stay on one rank)."""
        if len(items) % self.world:
            raise ValueError(f"{len(items)} prompts per step do not split evenly over {self.world} ranks")
        return items[self.rank::self.world]

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of a few numbers over the ranks."""
        if not self.active:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t)
        return t.tolist()

    def denominators(self, mask: torch.Tensor, max_new_tokens: int) -> ops.Denominators:
        """The optimizer step's global token and sequence counts, and C = B_global · L_max."""
        tokens, seqs, rows = self.sum([float(mask.sum()), float((mask.sum(-1) > 0).sum()), float(mask.shape[0])])
        return ops.Denominators(tokens, seqs, rows * max_new_tokens)

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Add up the ranks' gradients (each rank's loss is already divided by the global counts)."""
        if not self.active:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)  # a rank whose minibatch skipped a module still joins the sum
        grads = [p.grad for p in params]
        flat = torch._utils._flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        for g, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    def same_parameters(self, params: list[torch.nn.Parameter]) -> bool:
        """All ranks hold identical weights (a check for tests and after resuming)."""
        if not self.active:
            return True
        flat = torch._utils._flatten_dense_tensors([p.detach() for p in params]).double()
        low, high = flat.clone(), flat.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        return bool(torch.equal(low, high))
