"""TraPO's semi-supervised sampler: a pool whose unlabeled prompts train only when their pass-rate trajectory looks
like those of labeled prompts.

    p_q(e)   pass rate of prompt q at its e-th visit (one visit per epoch of the pool): labeled q against the
             verifier, unlabeled q against its majority-vote pseudo-label (`transforms/trapo.py`)
    D        reference curves: every labeled prompt's, plus the unlabeled prompts selected so far (`update_db`)
    z(p)     (p - mean_e p) / (std_e p + 1e-8)          curves truncated to a common length L first
    s(q)     = mean_{r in D} cos(z(p_q), z(p_r))
    keep     the top k = max(1, floor(topk |U|)) of the step's unlabeled prompts U by s, union {q in U : s(q) >= thres}
    epoch e < warm_up: no unlabeled prompt trains (their curves still grow)

The pool (`samplers/pool.py`, epoch order: every prompt once per epoch, as the reference's dataloader over its mixed
labeled + unlabeled file) holds the curves: its per-prompt pass-rate history, recorded from the batch's `scores`,
which the `trapo` group transform has set, for unlabeled prompts, to the pseudo-label reward, so that no verifier
verdict of an unlabeled prompt reaches its curve or its training reward.

Every prompt of the step is rolled out, as in the reference (which generates for the whole batch, then drops the
unlabeled rows it does not keep, `_split_labeled_samples` / `_compute_trajectory_cosine(filter=True)`): the sampler
hands out `SemiExample`s marked `labeled` and `train`, and the transform masks the rows of `train=False` prompts out
of the update (mask 0, as a removed row), keeping their pass rates for the curves.

Decisions (where the paper and code are silent or do not fit this loop):
- Split: `labeled` = 0.5 of the pool (the script's data file `id_l_1k_u_1k`: 1k labeled, 1k unlabeled), the
  labeled ids drawn once from `pool_seed` ("trapo-split-<pool_seed>"), round(labeled * size) of them (>= 1).
- When: the reference selects after the step's rollouts, with the current epoch's point on the curves, but truncates
  every curve to the shortest reference, which (labeled prompts not yet visited this epoch) almost always drops that
  point; here the sampler selects before the rollouts, with the curves through the previous step. The step is in
  epoch e (0-based, the epoch of its last prompt); selection runs when e >= warm_up.
- Common length: the shortest of the references AND the queries (the reference raises when a query is shorter than
  the shortest reference); below 2 points (no spread to z-normalize) nothing unlabeled is kept.
- Top-k ties: by position in the step (the reference's `torch.topk(sorted=False)` leaves them unspecified).
- `update_db`: the database's unlabeled curves are snapshots taken when selected; a prompt selected again while its
  curve is in the database first clears every unlabeled curve from it, as the reference's
  `copy_dict_with_validation` does; labeled curves are the current ones at each selection.
- warm_up: the paper's 8 epochs (of 15); the f5 comparison's 100 steps of 16 prompts over a pool of 64 are 25
  epochs, so 8 leaves 17 epochs of selection. It must be >= 2: curves of 1 point have no spread.

Reference: ShenzhiYang2000/TRAPO @ 2cc9ef81fb90382377dbc6e79d6eb501d9ab2d53,
`Weakly_Supervised/Research/Semi_RL/semi_ray_trainer.py` (`_generate_pseudo_labels_and_update_passrate` L567,
`copy_dict_with_validation` L716, `filter_dict_by_topk` L754, `filter_dict_by_threshold` L776,
`_compute_trajectory_cosine` L796, the epoch loop in `fit` L1096-1135); `Weakly_Supervised/scripts/run/run_semi.sh`
(warm_up 8, update_db True, topk 0.1, thres 0.4).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from workbench import registry
from workbench.samplers.pool import PoolState, PromptPool, check_pool, ensure, next_in_epoch, record, take
from workbench.tasks.base import Example

TRAPO_TITLE = "TraPO: A Semi-Supervised Reinforcement Learning Framework for Boosting LLM Reasoning"
EPS = 1e-8  # the reference's z-normalization epsilon


@dataclass(frozen=True)
class SemiExample(Example):
    """A pool example as TraPO hands it out: whether its label may be used, and whether its rows train this step."""
    labeled: bool = True
    train: bool = True


@dataclass
class TrapoState(PoolState):
    """The pool (with each prompt's pass-rate curve) plus the split, the settings and the reference database."""
    labeled: float = 0.5
    warm_up: int = 8
    topk: float = 0.1
    thres: float = 0.4
    update_db: bool = True
    labeled_ids: list = field(default_factory=list)   # pool ids whose verifier label is used, sorted
    db: dict = field(default_factory=dict)            # selected unlabeled id -> its curve when selected
    metrics: dict = field(default_factory=dict)       # the last selection's, by name (`TRAPO_SAMPLER_LOGS`)


def z_normalize(curves: torch.Tensor) -> torch.Tensor:
    """[N, L] each curve centred and scaled over time (torch's unbiased std, + 1e-8 as the reference)."""
    return (curves - curves.mean(dim=1, keepdim=True)) / (curves.std(dim=1, keepdim=True) + EPS)


def trajectory_scores(queries: list, references: list) -> torch.Tensor:
    """[Q] s(q) = mean over references r of cos(z(p_q), z(p_r)), every curve cut to the common length."""
    length = min(len(c) for c in [*queries, *references])
    q = z_normalize(torch.tensor([list(c)[:length] for c in queries], dtype=torch.float64))
    r = z_normalize(torch.tensor([list(c)[:length] for c in references], dtype=torch.float64))
    return F.cosine_similarity(r.unsqueeze(1), q.unsqueeze(0), dim=2).mean(dim=0)


def keep_unlabeled(scores: torch.Tensor, topk: float, thres: float) -> list[int]:
    """Positions kept: the top max(1, floor(topk * Q)) by score (ties: the earlier position) union score >= thres."""
    values = scores.tolist()
    k = max(1, int(len(values) * topk))
    top = sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]
    return sorted(set(top) | {i for i, s in enumerate(values) if s >= thres})


def curve(state: PoolState, i: int) -> list[float]:
    """Prompt i's pass rates, one per visit, oldest first (the pool's history)."""
    return [rate for _, rate in state.pass_rates.get(i, [])]


def add_to_db(state: TrapoState, selected: list[int]) -> None:
    """`update_db`: snapshots of the selected unlabeled curves; one already held clears the unlabeled part first
    (the reference's `copy_dict_with_validation`)."""
    for i in selected:
        if i in state.db:
            state.db.clear()
        state.db[i] = curve(state, i)


def choose_unlabeled(state: TrapoState, unlabeled: list[int], epoch: int) -> list[int]:
    """The step's unlabeled ids that train: none before warm-up, else the trajectory selection against D."""
    if epoch < state.warm_up or not unlabeled:
        return []
    references = [c for c in (curve(state, i) for i in state.labeled_ids) if c] + list(state.db.values())
    queries = [curve(state, i) for i in unlabeled]
    if not references or min(len(c) for c in [*queries, *references]) < 2:
        return []
    scores = trajectory_scores(queries, references)
    kept = [unlabeled[j] for j in keep_unlabeled(scores, state.topk, state.thres)]
    chosen = torch.tensor([u in kept for u in unlabeled])
    state.metrics = {"trapo/score_selected": float(scores[chosen].mean()), "trapo/references": float(len(references))}
    if bool((~chosen).any()):
        state.metrics["trapo/score_rejected"] = float(scores[~chosen].mean())
    if state.update_db:
        add_to_db(state, kept)
    return kept


def split_labeled(state: TrapoState) -> None:
    """The labeled ids, drawn once from the pool seed (a resumed run has them in its state)."""
    if not state.labeled_ids:
        order = list(range(len(state.examples)))
        random.Random(f"trapo-split-{state.pool_seed}").shuffle(order)
        state.labeled_ids = sorted(order[:round(state.labeled * len(order))])


def check_trapo(*, size=64, labeled=0.5, warm_up=8, topk=0.1, thres=0.4, update_db=True, history=256,
                pool_seed=0, **_):
    check_pool(size=size, history=history, pool_seed=pool_seed)
    if isinstance(labeled, bool) or not isinstance(labeled, (int, float)) or not 0 < labeled <= 1:
        raise ValueError(f"labeled must be the labeled share of the pool in (0, 1], got {labeled!r} (the paper's "
                         "1k labeled + 1k unlabeled: labeled=0.5)")
    if round(labeled * size) < 1:
        raise ValueError(f"labeled={labeled} of a pool of size={size} labels no prompt, and TraPO's references are "
                         f"labeled curves: raise labeled to at least {1 / size:.3g} or the pool's size")
    if isinstance(warm_up, bool) or not isinstance(warm_up, int) or warm_up < 2:
        raise ValueError(f"warm_up must be an integer >= 2 (epochs before unlabeled prompts may train; a curve needs "
                         f"2 points to be z-normalized), got {warm_up!r}")
    if isinstance(topk, bool) or not isinstance(topk, (int, float)) or not 0 <= topk <= 1:
        raise ValueError(f"topk must be a share of the step's unlabeled prompts in [0, 1], got {topk!r}")
    if isinstance(thres, bool) or not isinstance(thres, (int, float)) or not -1 <= thres <= 1:
        raise ValueError(f"thres must be a cosine similarity in [-1, 1], got {thres!r}")
    if not isinstance(update_db, bool):
        raise ValueError(f"update_db must be true or false, got {update_db!r}")


TRAPO_SAMPLER_LOGS = {
    "trapo/score_selected": ("Mean trajectory similarity s(q) of the step's unlabeled prompts that train.",
                             "Above trapo/score_rejected and mostly >= thres; absent before warm-up."),
    "trapo/score_rejected": ("Mean trajectory similarity s(q) of the step's unlabeled prompts left out.",
                             "Below trapo/score_selected; absent when every unlabeled prompt was kept."),
    "trapo/references": ("Curves in the reference database: labeled prompts plus selected unlabeled ones.",
                         "At least the labeled count; grows with update_db as unlabeled prompts are selected."),
}


@registry.sampler(
    "trapo", title=TRAPO_TITLE,
    summary="A pool of prompts, half of them labeled: each prompt's pass-rate curve over epochs (unlabeled ones "
            "against majority-vote pseudo-labels); after warm_up epochs an unlabeled prompt trains when its "
            "z-normalized curve is among the top 10 % or has mean cosine >= 0.4 to the labeled (and previously "
            "selected) curves. Pair it with the `trapo` group transform.",
    equation=r"s(q) = \frac{1}{|D|}\sum_{r\in D}\cos(z(p_q), z(p_r)),\quad "
             r"\mathrm{keep} = \mathrm{top}_{k}(s) \cup \{q : s(q) \ge \theta\}",
    logs=TRAPO_SAMPLER_LOGS, check=check_trapo)
class TrapoSampler:
    """The pool's calls with the split and the selection; examples come out as `SemiExample`s."""

    @staticmethod
    def init(*, size=64, labeled=0.5, warm_up=8, topk=0.1, thres=0.4, update_db=True, history=256, pool_seed=0):
        check_trapo(size=size, labeled=labeled, warm_up=warm_up, topk=topk, thres=thres, update_db=update_db,
                    history=history, pool_seed=pool_seed)
        return TrapoState(size=size, order="epoch", pool_seed=pool_seed, history=history, labeled=labeled,
                          warm_up=warm_up, topk=topk, thres=thres, update_db=update_db)

    @staticmethod
    def check_run(task, n: int, *, size=64, pool_seed=0, **_) -> None:
        PromptPool.check_run(task, n, size=size, pool_seed=pool_seed)

    @staticmethod
    def select(state, task, n, rng):
        ensure(state, task)
        split_labeled(state)
        ids = next_in_epoch(state, n, rng)
        labeled = set(state.labeled_ids)
        state.metrics = {}
        kept = set(choose_unlabeled(state, [i for i in ids if i not in labeled], state.epoch - 1))
        return [SemiExample(e.prompt, e.answer, e.target, labeled=i in labeled, train=i in labeled or i in kept)
                for i, e in zip(ids, take(state, ids))]

    @staticmethod
    def update(state, batch):
        return record(state, batch)
