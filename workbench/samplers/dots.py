"""DOTS: difficulty-targeted online data selection over a fixed pool of prompts.

    d_q   = 1 - (latest pass rate of q)                                  q measured in training
    d^_q  = sum_i softmax_i(<e_q, e_i> / tau_att) d_i   over measured i   q not measured yet
    d^_q  = alpha for every q                                            nothing measured yet (uniform)
    p_q   = softmax_q(-|d^_q - alpha| / tau)                             alpha = 0.5, tau = 1e-3
    every mu (= 2) steps: mu * k ids drawn from p WITHOUT replacement, shuffled, handed out k per step
    k     = n (prompts_per_step) in the first round, floor(fresh * n) after it (fresh = sigma = 0.5)

The k < n fresh prompts of a step are filled up to n groups by rollout replay (`transforms.dots_replay`, recipe
`dots-rr`); with fresh = 1 nothing is replayed and this is DOTS alone (recipe `dots`). Registered as sampler
"dots-rr" (a component's key is its catalog key; the replay is group transform "dots-rr").

Decisions where our setting differs from the paper or the paper is silent:
- Reference set. The paper measures a fresh random reference set of 256 prompts by rollouts every round. We take
  the prompts measured in training as the reference set: a prompt's difficulty is its latest pass rate in the pool's
  history (`PoolState.pass_rates`, the fresh group of the step that chose it; replayed groups are not re-recorded),
  so no rollouts are spent on measuring. A measured prompt's d^ is its measured d (the reference predicts the
  reference prompts too, then fits a line from those predictions to their labels; with no learned model the measured
  value is the better estimate).
- Embeddings and head. The paper attends with learned projections W_q, W_r of a frozen LM's embeddings (scaled by
  1/sqrt(h)) and calibrates (group_logit_temp, then a linear fit), all trained offline on other models' pass rates we
  do not have: here identity projections on `features.prompt_features` (hashed character n-grams, unit rows, so
  <e_q, e_i> is a cosine), the 1/sqrt(h) folded into `tau_att` (default 0.05: countdown prompts' cosines differ by
  0.05-0.2 between puzzle sizes), no calibration.
- Difficulty vs pass rate. The reference's labels are pass rates and it targets |pred - alpha|; the card's d is the
  failure rate. Both agree at alpha = 0.5 (|(1 - p) - 0.5| = |p - 0.5|); `alpha` here is a difficulty.
- Sampling without replacement is sequential (each draw a softmax over the ids left, max subtracted), as
  torch.multinomial(replacement=False) draws, but it never runs out of nonzero mass as exp(-1000) would in float64.
- Round 0 is all fresh: the reference's first selection round has budget mu * B (no sigma: its buffer is empty).
- Under data parallelism the step's k prompts are sharded over the ranks: k must split evenly (the trainer refuses
  otherwise at the first step).

Reference: ASTRAL-Group/data-efficient-llm-rl @ 59df9187b7786c0058316f886b77c13c8608c533,
`rl_training/verl/verl/trainer/ppo/ray_trainer_teacher_replay.py` L940-976 (scores -|pred - alpha|, / tau, minus
the max, softmax, multinomial without replacement of budget mu*B*sigma (mu*B at epoch 0), shuffled, mu batches),
`teacher_utils.py::RegressionHead.forward` (attention over the reference set), `run_bash/final_ds_teacher_replay.sh`
(MU=2, TAU=1e-3, ALPHA=0.5, SIGMA=0.5, ref_size 256, n = 8).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.text.features import prompt_features
from workbench.samplers.pool import PoolState, check_pool, ensure, record, take, build_pool

DOTS_TITLE = ("Improving Data Efficiency for LLM Reinforcement Fine-tuning Through Difficulty-targeted Online Data "
              "Selection and Rollout Replay")


@dataclass
class DotsState(PoolState):
    """The pool's state plus DOTS's settings, the current round's per-step ids and the last round's prediction."""
    alpha: float = 0.5
    tau: float = 1e-3
    tau_att: float = 0.05
    mu: int = 2
    fresh: float = 0.5
    rounds: int = 0                                # selection rounds done
    queue: list = field(default_factory=list)     # the current round's ids, one list per remaining step
    predicted: list = field(default_factory=list)  # d^ of every pool prompt at the last round (`workbench inspect`)


def check_dots(*, alpha=0.5, tau=1e-3, tau_att=0.05, mu=2, fresh=0.5, **pool):
    check_pool(**pool)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a target difficulty in [0, 1] (0.5: prompts solved half the time), "
                         f"got {alpha!r}")
    for name, value in (("tau", tau), ("tau_att", tau_att)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a temperature > 0 (small: sharper), got {value!r}")
    if isinstance(mu, bool) or not isinstance(mu, int) or mu < 1:
        raise ValueError(f"mu must be an integer >= 1 (steps per selection round), got {mu!r}")
    if isinstance(fresh, bool) or not isinstance(fresh, (int, float)) or not 0.0 < fresh <= 1.0:
        raise ValueError(f"fresh must be in (0, 1] (the share of a step's prompts selected fresh; 1: no replay), "
                         f"got {fresh!r}")


def fresh_per_step(n: int, fresh: float) -> int:
    """k = floor(fresh * n), the reference's int(sigma * B) (a tiny epsilon so that 0.3 * 10 gives 3)."""
    return int(fresh * n + 1e-9)


def predicted_difficulty(measured: dict[int, float], features: torch.Tensor, alpha: float,
                         tau_att: float) -> torch.Tensor:
    """[N] d^: measured ids their own d, others attention over the measured ones, alpha for all when none is."""
    d_hat = torch.full((features.shape[0],), float(alpha), dtype=torch.float64)
    if not measured:
        return d_hat
    ids = sorted(measured)
    d = torch.tensor([measured[i] for i in ids], dtype=torch.float64)
    weights = torch.softmax(features @ features[ids].T / tau_att, dim=1)  # [N, M] rows sum to 1
    d_hat = weights @ d
    d_hat[ids] = d
    return d_hat


def selection_logits(d_hat: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """-|d^ - alpha| / tau: p = softmax of these peaks at d^ = alpha and is symmetric around it."""
    return -(d_hat - alpha).abs() / tau


def draw_without_replacement(logits: torch.Tensor, k: int, rng: random.Random) -> list[int]:
    """k distinct ids, each draw from softmax(logits) over the ids not drawn yet (torch.multinomial's
    replacement=False), with `rng`."""
    left, out = list(range(len(logits))), []
    for _ in range(k):
        top = max(float(logits[i]) for i in left)
        w = [math.exp(float(logits[i]) - top) for i in left]
        u, acc = rng.random() * sum(w), 0.0
        j = len(left) - 1
        for pos, wi in enumerate(w):
            acc += wi
            if u < acc:
                j = pos
                break
        out.append(left.pop(j))
    return out


def measured_difficulty(state: PoolState) -> dict[int, float]:
    """{id: 1 - latest pass rate} of the prompts measured so far."""
    return {i: 1.0 - rates[-1][1] for i, rates in state.pass_rates.items() if rates}


def new_round(state: DotsState, n: int, rng: random.Random) -> None:
    """Select mu * k prompts for the next mu steps and queue them k per step."""
    k = n if state.rounds == 0 else fresh_per_step(n, state.fresh)
    features = prompt_features([str(e.prompt) for e in state.examples])
    d_hat = predicted_difficulty(measured_difficulty(state), features, state.alpha, state.tau_att)
    ids = draw_without_replacement(selection_logits(d_hat, state.alpha, state.tau), state.mu * k, rng)
    rng.shuffle(ids)  # the reference shuffles the round's selection before batching it
    state.queue = [ids[s * k:(s + 1) * k] for s in range(state.mu)]
    state.predicted, state.rounds = d_hat.tolist(), state.rounds + 1


@registry.sampler(
    "dots-rr", title=DOTS_TITLE,
    summary="Over a fixed pool: each prompt's difficulty is its measured failure rate, or predicted by attention over "
            "the measured prompts' features; every mu steps mu*k prompts are drawn without replacement with "
            "probabilities softmax(-|d - alpha|/tau) (near-greedy toward 50 % solved), k = n in the first round and "
            "floor(fresh*n) after (the rest of a step is replayed groups: dots-rr).",
    equation=r"p_q \propto \exp(-|\hat d_q - \alpha|/\tau),\quad \hat d_q = \sum_i "
             r"\mathrm{softmax}_i(\langle e_q, e_i\rangle/\tau_{att})\, d_i",
    check=check_dots)
class Dots:
    """The pool's `ensure`, `take` and `record`, with DOTS's choice."""

    @staticmethod
    def init(*, size=64, history=256, pool_seed=0, alpha=0.5, tau=1e-3, tau_att=0.05, mu=2, fresh=0.5):
        check_dots(size=size, history=history, pool_seed=pool_seed, alpha=alpha, tau=tau, tau_att=tau_att, mu=mu,
                   fresh=fresh)
        return DotsState(size=size, history=history, pool_seed=pool_seed, order="random", alpha=alpha, tau=tau,
                         tau_att=tau_att, mu=mu, fresh=fresh)

    @staticmethod
    def check_run(task, n: int, *, size=64, pool_seed=0, mu=2, fresh=0.5, **_) -> None:
        """Before anything trains: a round's mu*n distinct prompts fit in the pool (the first round is all fresh),
        a step has at least one fresh prompt, and the task fills the pool."""
        if mu * n > size:
            raise ValueError(f"a selection round takes mu*prompts_per_step = {mu}*{n} = {mu * n} distinct prompts, "
                             f"more than the pool's size={size}: raise size (--set recipe_overrides.sampler.size="
                             f"{mu * n}) or lower prompts_per_step or mu")
        if fresh_per_step(n, fresh) < 1:
            raise ValueError(f"fresh={fresh} of prompts_per_step={n} selects no fresh prompt per step: raise fresh "
                             f"to >= {1 / n:g} or prompts_per_step")
        build_pool(task, size, pool_seed)

    @staticmethod
    def select(state: DotsState, task, n, rng):
        ensure(state, task)
        if not state.queue:
            new_round(state, n, rng)
        return take(state, state.queue.pop(0))

    @staticmethod
    def update(state: DotsState, batch):
        """Record the pass rates of this step's own (fresh) prompts only: a replayed group's rewards are an older
        policy's, and `transforms.dots_replay` never replays a question that is fresh in the same step."""
        if batch is not None and batch.prompts and state.chosen and state.chosen[-1][0] == state.steps:
            mine = {str(state.examples[i].prompt) for i in state.chosen[-1][1]}
            rows = [r for r, p in enumerate(batch.prompts) if str(p) in mine]
            batch = batch.select(torch.tensor(rows, dtype=torch.long))
        return record(state, batch)
