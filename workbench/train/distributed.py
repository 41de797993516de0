"""Data-parallel training: `accelerate launch --multi_gpu --num_processes N` (or torchrun) starts N ranks; each
rank rolls out its share of the step's prompts and trains on it, and the loss stays the single-process loss.

Why exact: every rank divides its loss by the *global* counts of the optimizer step (`Denominators` summed
across ranks), so the ranks' losses add up to the loss of the whole batch; gradients are then summed across
ranks, not averaged. Groups never straddle ranks, so group-relative advantages (GRPO, RLOO, ...) are unchanged.
Statistics over the whole batch (LitePPO's batch std, whitened GAE) are taken per rank: a documented
difference from one process.

The config switch is `RunConfig.distributed`:
  - "ddp": every rank holds the whole model; gradients are summed with one all-reduce of a flat buffer
    (what DDP's buckets do, without its wrapper, so the loss keeps its global normalisation).
  - "fsdp": the policy's decoder layers and root are sharded with FSDP2 (`fully_shard`). Its reduce-scatter
    averages gradients over the N ranks (gloo has no pre-multiplied sum to change that), so each rank scales
    its loss by N (`loss_scale`), and replicated gradients (a value head) are averaged to match. Generation
    cannot run on sharded weights without every rank taking the same number of decoding steps, so the rollout
    engine samples from a full replica whose weights are gathered and pushed after every optimizer step (as
    with vLLM). Checkpoints hold the full (gathered) model and optimizer state.
Accelerate sets up the process group (gloo on CPU, NCCL on GPU) from the launcher's environment.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from torch.distributed.tensor import DTensor

from workbench import ops
from workbench.models import checkpoint_state, frozen_copy, is_peft, load_checkpoint_state, merged_state_dict


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of an FSDP shard (a collective), or the tensor itself."""
    return t.full_tensor() if isinstance(t, DTensor) else t

MODES = ("none", "ddp", "fsdp")


class DataParallel:
    """Rank bookkeeping and the collectives training needs: shard prompts, sum counts, sum gradients, gather what
    stateful components add to their state."""

    def __init__(self, mode: str = "none", device: str = "cpu"):
        if mode not in MODES:
            raise ValueError(f"distributed must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.rank, self.world = 0, 1
        if mode != "none":
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

    def gather_objects(self, items: list) -> list:
        """This rank's list joined with every other rank's, in rank order (lengths may differ): what a stateful
        component keyed by text (prompts) adds to its state."""
        if not self.active:
            return list(items)
        parts = [None] * self.world
        dist.all_gather_object(parts, list(items))
        return [item for part in parts for item in part]

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """[N] per rank -> [N * world] in rank order (every rank holds the same number of rows): what a stateful
        component adds to its state, so the state stays the same on every rank."""
        if not self.active:
            return x
        parts = [torch.empty_like(x) for _ in range(self.world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    def denominators(self, mask: torch.Tensor, max_new_tokens: int) -> ops.Denominators:
        """The optimizer step's global token and sequence counts, C = B_global · L_max, and the sum over ranks a loss
        may take of its own statistics."""
        tokens, seqs, rows = self.sum([float(mask.sum()), float((mask.sum(-1) > 0).sum()), float(mask.shape[0])])
        return ops.Denominators(tokens, seqs, rows * max_new_tokens, reduce=self.reduce if self.active else None)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """`x` summed over the ranks (a copy; float64 for the sum, returned in x's dtype)."""
        total = x.detach().double().clone()
        dist.all_reduce(total)
        return total.to(x.dtype)

    @property
    def sharded(self) -> bool:
        return self.mode == "fsdp" and self.active

    def wrap(self, model):
        """FSDP: shard the decoder layers, then the root (in place); returns a full replica for the rollout
        engine, or None when the engine can sample from the training model itself."""
        if not self.sharded:
            return None
        from torch.distributed.fsdp import fully_shard

        if is_peft(model):
            raise ValueError("distributed='fsdp' with LoRA is not supported; use distributed='ddp' for LoRA runs")
        replica = frozen_copy(model)
        layers = model.get_decoder().layers  # transformer blocks: the unit FSDP gathers at a time
        for layer in layers:
            fully_shard(layer)
        fully_shard(model)
        return replica

    @property
    def loss_scale(self) -> float:
        """N under FSDP, whose reduce-scatter averages: N × mean of the ranks' gradients = their sum."""
        return float(self.world) if self.sharded else 1.0

    def full_weights(self, model) -> dict[str, torch.Tensor]:
        """Plain, full weights of the policy (FSDP: gathered from the shards on every rank; LoRA: merged)."""
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        return merged_state_dict(model)

    def model_state(self, model) -> dict:
        """A model's checkpoint state: full weights under FSDP (a collective: every rank calls it)."""
        return self.full_weights(model) if self.sharded else checkpoint_state(model)

    def load_model_state(self, model, state: dict) -> None:
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

            set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True))
        else:
            load_checkpoint_state(model, state)

    def optimizer_state(self, model, optimizer) -> dict:
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

            return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))
        return optimizer.state_dict()

    def load_optimizer_state(self, model, optimizer, state: dict) -> None:
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
        else:
            optimizer.load_state_dict(state)

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Add up the ranks' gradients (each rank's loss is already divided by the global counts); FSDP's
        sharded parameters were reduced by its reduce-scatter, the rest (a value head) are reduced here, in the
        same way (their loss was scaled by `loss_scale` too)."""
        if not self.active:
            return
        params = [p for p in params if not isinstance(p, DTensor)]
        if not params:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)  # a rank whose minibatch skipped a module still joins the sum
        grads = [p.grad for p in params]
        flat = torch._utils._flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat.div_(self.loss_scale)
        for g, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    def clip_grad_norm(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        """torch's global-norm clipping (coefficient max_norm / (norm + 1e-6), at most 1), over sharded and
        replicated gradients alike; returns the norm before clipping."""
        if not self.sharded:
            return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        grads = [p.grad for p in params if p.grad is not None]
        local = [g.to_local() if isinstance(g, DTensor) else g for g in grads]
        shard_sq = sum((g.double() ** 2).sum() for g, full in zip(local, grads) if isinstance(full, DTensor))
        shard_sq = torch.as_tensor(shard_sq, dtype=torch.float64)
        dist.all_reduce(shard_sq)  # the shards add up to the whole; replicated gradients are counted once
        plain_sq = sum((g.double() ** 2).sum() for g in grads if not isinstance(g, DTensor))
        norm = float((shard_sq + plain_sq) ** 0.5)
        coef = min(max_norm / (norm + 1e-6), 1.0)
        for g in local:
            g.mul_(coef)
        return norm

    def same_parameters(self, params: list[torch.nn.Parameter]) -> bool:
        """All ranks hold identical weights (a check for tests and after resuming)."""
        if not self.active:
            return True
        flat = torch._utils._flatten_dense_tensors([full_tensor(p.detach()) for p in params]).double()
        low, high = flat.clone(), flat.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        return bool(torch.equal(low, high))
