"""The one batch type every component reads: a rollout of B sequences over T response tokens."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch


@dataclass
class RolloutBatch:
    """Tensors are [B, T] over response tokens (right-padded) unless marked [B] or [B, P].

    Optional fields are None when unused; each component documents which fields it reads.
    """

    response_ids: torch.Tensor                   # [B, T] sampled tokens (pad after EOS)
    mask: torch.Tensor                           # [B, T] float, 1 where the policy produced the token
    group: torch.Tensor                          # [B] long, which prompt the sample answers
    rewards: torch.Tensor | None = None          # [B] outcome reward (after any shaping)
    scores: torch.Tensor | None = None           # [B] raw verifier scores, before reward shaping
    prompt_ids: torch.Tensor | None = None       # [B, P] left-padded prompt tokens
    prompt_mask: torch.Tensor | None = None      # [B, P] 1 on real prompt tokens
    logp: torch.Tensor | None = None             # [B, T] current policy log-probs
    old_logp: torch.Tensor | None = None         # [B, T] trainer log-probs of the policy that sampled
    mu_logp: torch.Tensor | None = None          # [B, T] rollout-engine (behaviour) log-probs
    ref_logp: torch.Tensor | None = None         # [B, T] frozen reference log-probs
    entropy: torch.Tensor | None = None          # [B, T] full-vocabulary entropy
    token_rewards: torch.Tensor | None = None    # [B, T] per-token rewards (e.g. KL-in-reward)
    values: torch.Tensor | None = None           # [B, T] critic values V(s_t)
    old_values: torch.Tensor | None = None       # [B, T] critic values at rollout time
    baseline_rewards: torch.Tensor | None = None  # [B] reward of a baseline rollout (ReMax greedy)
    temp_logp: torch.Tensor | None = None        # [B, T] old policy's log-probs at another temperature (DCPO)
    resampled: torch.Tensor | None = None        # [B] bool, rows replaced by samples drawn at another temperature
    parent: torch.Tensor | None = None           # [B] long, the row a branch was copied from, as its index among its
    #                                              group's rows (survives regrouping); -1 for a root (ARPO branching)
    branch_turn: torch.Tensor | None = None      # [B] long, the first turn the row sampled itself: its tokens of
    #                                              earlier turns are its parent's (0 for a root)
    advantages: torch.Tensor | None = None       # [B, T] filled by the advantage estimator
    target_adv: torch.Tensor | None = None       # [B, T] GBPO's target advantage (sets the target ratio)
    returns: torch.Tensor | None = None          # [B, T] value targets (critic methods)
    value_mask: torch.Tensor | None = None       # [B, T] tokens the value loss trains on (critic methods)
    truncated: torch.Tensor | None = None        # [B] bool, no EOS within max_new_tokens
    turn: torch.Tensor | None = None             # [B, T] turn ids of actions and observations, -1 on padding
    turn_rewards: torch.Tensor | None = None     # [B, S] per-turn environment rewards (0 past a row's turns)
    segment: torch.Tensor | None = None          # [B, T] segment ids (segment methods)
    segment_values: torch.Tensor | None = None   # [B, S] value of the state each segment starts from (SPO-chain's
    #                                              Monte Carlo V(s_k)); NaN: not estimated
    turn_values: torch.Tensor | None = None      # [B, S] V(s_{i,s}) of each turn's state, not the critic's (ProAct MC)
    turn_q: torch.Tensor | None = None           # [B, S] Q(s_{i,s}, a_{i,s}) of each turn's action (ProAct MC)
    offpolicy_mask: torch.Tensor | None = None   # [B, T] 1 on off-policy (reference / teacher) tokens (LUFFY)
    task_value: torch.Tensor | None = None       # [B] VSPO task value p(1 - p) of the row's prompt
    old_vocab_mean_logp: torch.Tensor | None = None  # [B, T] old policy's mean_v log pi(v | s_t) over the vocabulary
    ref_argmax: torch.Tensor | None = None       # [B, T] long, the reference's greedy token at s_t
    prev_logp: torch.Tensor | None = None        # [B, T] log-probs of the previous iterate (iterated preference methods)
    # Preference data: every group is one item, its rows the item's responses best first (K = 2: chosen, rejected)
    preference_reward: torch.Tensor | None = None  # [B] the verifier's reward of each ranked response, where known
    winrate: torch.Tensor | None = None          # [B] P(the response beats a sample of the policy) (SPPO)
    step_value: torch.Tensor | None = None       # [B] Monte Carlo value Q of a reasoning step (sibling steps)
    step_advantage: torch.Tensor | None = None   # [B] V(s + a) - V(s) of a reasoning step (step-level data)
    head: object = None  # context.Head: the LM head at a minibatch's training forward, when read (CAPO)
    logits: torch.Tensor | None = None           # [B, T, V] live logits / temperature of a minibatch's training
    #                                              forward, with gradient, when a component reads them (SRPO)
    route: torch.Tensor | None = None            # [B] long, SRPO's route: 0 GRPO (correct), 1 self-distillation
    #                                              (failed, a correct sibling teaches), 2 GRPO fallback (no teacher)
    teacher_logp: torch.Tensor | None = None     # [B, T, K] a self-teacher's log-probs at each response position over
    #                                              the vocabulary (K = V) or its top K (`teacher_ids`); 0 where none
    teacher_ids: torch.Tensor | None = None      # [B, T, K] long, vocabulary ids of teacher_logp's top-K entries
    #                                              (None: teacher_logp covers the whole vocabulary in id order)
    teacher_entropy: torch.Tensor | None = None  # [B, T] the self-teacher's full-vocabulary entropy; 0 where none
    agent: torch.Tensor | None = None            # [B] long, the agent (role / player id) whose view the row is
    episode: torch.Tensor | None = None          # [B] long, the multi-agent episode the row belongs to (the rows of
    #                                              one episode's agents share it; unique across the batch)
    policy: torch.Tensor | None = None           # [B] long, the trained policy that played the row: its LoRA adapter
    #                                              when a game's agents have separate policies (all 0 when shared)
    completions: list[str] = field(default_factory=list)  # decoded responses, len B
    prompts: list[str] = field(default_factory=list)      # prompt text per row, len B
    turn_info: list[list[dict]] = field(default_factory=list)  # per row, per turn: {"state": hashable, ...}

    def __post_init__(self):
        B, T = self.response_ids.shape
        if self.mask.shape != (B, T):
            raise ValueError(f"mask {tuple(self.mask.shape)} does not match response_ids {(B, T)}")
        if self.group.shape != (B,):
            raise ValueError(f"group must have shape [B]={B}, got {tuple(self.group.shape)}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] != B:
                raise ValueError(f"{f.name} has {value.shape[0]} rows but the batch has {B}")

    @staticmethod
    def from_rewards(rewards, group=None, lengths=None) -> "RolloutBatch":
        """Outcome rewards [B] (one group unless `group` [B] is given) over responses of `lengths` tokens
        (default 1): the smallest batch an advantage estimator can read, for plots, exercises and tests."""
        rewards = torch.as_tensor(rewards, dtype=torch.float64).flatten()
        n = rewards.shape[0]
        group = torch.zeros(n, dtype=torch.long) if group is None else torch.as_tensor(group).long().flatten()
        lengths = torch.ones(n, dtype=torch.long) if lengths is None else torch.as_tensor(lengths).long()
        mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).double()
        return RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask, group=group,
                            rewards=rewards)

    @property
    def size(self) -> int:
        return self.response_ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """[B] number of policy tokens per sequence, |y_i|."""
        return self.mask.sum(-1)

    def require(self, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"this component needs batch fields {missing}, which are None")

    def select(self, index: torch.Tensor) -> "RolloutBatch":
        """Rows `index` of every per-row field (tensors and lists)."""
        updates = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and value.dim() >= 1:
                updates[f.name] = value[index]
            elif isinstance(value, list) and value:
                updates[f.name] = [value[i] for i in index.tolist()]
        return replace(self, **updates)


def on_policy_rows(batch: RolloutBatch) -> torch.Tensor:
    """[B] bool: the policy's own samples (no off-policy token)."""
    if batch.offpolicy_mask is None:
        return torch.ones(batch.size, dtype=torch.bool)
    return ~(batch.offpolicy_mask > 0).any(-1)


def on_device(obj, device):
    """A dataclass (RolloutBatch, Generation) with every tensor field on `device`; `obj` itself when all are there.
    The batch lives on the CPU between stages (`Trainer.run_stages`); the model's passes move their inputs to its
    device and their outputs back (`rollout.engine.on_model`)."""
    device = torch.device(device)
    moved = {f.name: v.to(device) for f in fields(obj)
             if isinstance(v := getattr(obj, f.name), torch.Tensor) and v.device != device}
    return replace(obj, **moved) if moved else obj


LEFT_PADDED = ("prompt_ids", "prompt_mask")   # [B, P] fields padded on the left
ID_FIELDS = ("response_ids", "prompt_ids")     # padded with the pad token id
PAD_VALUES = {"turn": -1, "segment": -1}       # padding is never turn / segment 0; every other field pads with 0


def _pad_width(x: torch.Tensor, width: int, value, left: bool) -> torch.Tensor:
    missing = width - x.shape[1]
    if missing == 0:
        return x
    pad = torch.full((x.shape[0], missing, *x.shape[2:]), value, dtype=x.dtype, device=x.device)
    return torch.cat([pad, x] if left else [x, pad], dim=1)


def left_pad(rows: list[list[int]], pad_id: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id lists as left-padded ids and attention mask [B, P] (P = longest row): the layout of a batch's
    `prompt_ids` / `prompt_mask` (`LEFT_PADDED`)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def concat(batches, *, pad_id: int = 0):
    """Rows of several batches of the same dataclass type as one batch.

    Tensor fields are concatenated along dim 0; those with a second dim ([B, T], [B, P]) are first padded
    to the widest batch: right-padded (left for prompt_ids/prompt_mask), with `pad_id` for token ids, -1 for
    turn ids and 0 elsewhere (so padding is outside every mask). List fields are concatenated. A field that is None
    in some batches but not others, a list that is empty in some batches only, or differing non-tensor
    values are errors. `group` ids are kept as they are (see `fill_groups` for renumbering).
    """
    batches = list(batches)
    if not batches:
        raise ValueError("concat needs at least one batch")
    cls = type(batches[0])
    if any(type(b) is not cls for b in batches):
        raise ValueError(f"concat: batches must all be {cls.__name__}")
    out = {}
    for f in fields(cls):
        values = [getattr(b, f.name) for b in batches]
        if all(v is None for v in values):
            out[f.name] = None
        elif any(v is None for v in values):
            raise ValueError(f"concat: field {f.name!r} is None in some batches and set in others")
        elif isinstance(values[0], torch.Tensor) and values[0].dim() >= 1:
            if values[0].dim() >= 2:
                width = max(v.shape[1] for v in values)
                fill = pad_id if f.name in ID_FIELDS else PAD_VALUES.get(f.name, 0)
                values = [_pad_width(v, width, fill, f.name in LEFT_PADDED) for v in values]
            out[f.name] = torch.cat(values, dim=0)
        elif isinstance(values[0], list):
            filled = [len(v) > 0 for v in values]
            if any(filled) and not all(filled):
                raise ValueError(f"concat: list field {f.name!r} is empty in some batches only")
            out[f.name] = [item for v in values for item in v]
        else:
            same = all(torch.equal(v, values[0]) if isinstance(v, torch.Tensor) else v == values[0]
                       for v in values)
            if not same:
                raise ValueError(f"concat: field {f.name!r} differs between batches")
            out[f.name] = values[0]
    return cls(**out)


def replace_groups(batch, new, *, pad_id: int = 0):
    """`batch` with every group that `new` holds (by group id) replaced by new's rows; groups keep the order they
    have in `batch` (a group's rows stay together), rows within a group the order `new` gives them."""
    kept = torch.nonzero(~torch.isin(batch.group, new.group)).flatten()
    merged = concat([batch.select(kept), new], pad_id=pad_id) if len(kept) else new
    first = {}
    for row, g in enumerate(batch.group.tolist()):
        first.setdefault(g, row)
    rank = torch.tensor([first[g] for g in merged.group.tolist()])
    return merged.select(torch.sort(rank, stable=True).indices)


def replace_rows(batch, rows: list[int], new, *, pad_id: int = 0):
    """`batch` with row rows[i] replaced by new's row i, in the same place."""
    index = torch.arange(batch.size)
    index[torch.tensor(rows, dtype=torch.long)] = batch.size + torch.arange(len(rows))
    return concat([batch, new], pad_id=pad_id).select(index)
