"""CM2's checklist advantages at three granularities: trajectory, (user) turn and step.

Inputs are `cm2-checklist`'s per-rollout checklist labels (`workbench.rewards.checklist`: `Row`, `step_rewards`,
`backfilled`, `eligible`, `turn_reward`), for G rollouts i of a prompt (paper §3.3-3.4):

    R^(i)          = (1/L) sum_t sum_s sum_c w_{t,c} r^(i)_{t,s,c}  in [0, 1]         trajectory reward
    A_traj(i)      = (R^(i) - mean_G R) / F_norm(R)                                    on every policy token
    R_t^(i)        = sum_s sum_c w_{t,c} r^(i)_{t,s,c}                                 turn t's reward
    A_turn(i, t)   = (R_t^(i) - mean_G R_t) / F_norm(R_t)     over the rollouts that reached turn t; turn t's tokens
    p^(i)_{t,c}    = [item c of turn t paid somewhere in rollout i]
    b_{t,c}        = (1/G) sum_i p^(i)_{t,c}                                           item baseline
    A_{t,s,c}      = (r~_{t,s,c} - b_{t,c}) / F_norm(p_{t,c})   r~ backfilled (`backfilled`)
    A_step(i,t,s)  = sum_{c in E_{t,s}} w_{t,c} A_{t,s,c} / sum_{c in E_{t,s}} w_{t,c}      step s's tokens
    E_{t,s}        = items eligible at step s (`eligible`: dependencies satisfied, not yet satisfied); a step with
                     no eligible item gets 0

F_norm is the group's std (the paper's choice; Bessel, + eps). An item the paper's step average leaves out (not
eligible) never contributes. Our reading where the paper is silent: an item whose G outcomes p all agree (std 0)
adds 0 under F_norm = std, as a GRPO group whose rewards agree (with a noisy judge an item can be eligible again
after it paid, where r~ = 0 while b = 1, and (r~ - b) / eps would explode).
Finding: step > turn > trajectory early in training, but the finer levels collapse earlier under judge noise; the
final recipe trains at the trajectory level with G = 48.

Our environments have one user turn (L = 1): the turn level then equals the trajectory level, and a step is one
action of the episode (`batch.turn`). `turn_advantages` takes any number of user turns; `step_advantages` works
on the steps of one user turn (call it per turn).

Authors' code: namezhenzhang/CM2-RLCR-Tool-Agent @ 2758991. Its conventions, as parameters (defaults: the paper):
  - `min_samples`: statistics over fewer rollouts give 0. The turn level's per-position statistics
    (`core_algos.py::compute_checklist_step_advantage`) need more than 4 samples (else NaN -> advantage 0), and the
    step level's item statistics (`workers/reward_manager/checklist.py`, `threthod_num` 4) too, where an item below
    the threshold adds 0 but keeps its weight in the step's sum: min_samples = 5. Paper: 2 (a baseline needs two).
  - `f_norm="none"`: no std division. The code's step level has it commented out; its turn level divides only with
    norm_adv_by_std_in_grpo (function default False); the final recipe (`pipeline/5_rl_training/traj_n48.sh`:
    adv_estimator=grpo, norm_adv_by_std_in_grpo=False) is the trajectory level without std.
  - `step_weights="sum"`: the code's step advantage is sum_c w (actual - mean), divided by sum_c w only with
    do_norm_in_adv (default False); "mean" (the paper) divides.
  - `step_baseline="eligible"`: the code's item mean is over the rollouts in which the item was eligible at some
    step; "group" (the paper) is over all G.
Not reproduced: the eta^k decay (eta = 1.0 by default) and the exclusion of rollouts whose tool or judge call
failed (here every labelled rollout counts; a row whose correctness is unknown gets 0 and is left out).
The code's dependency bookkeeping departs from the paper's eligibility (see tests/anchors/formulas_cm2.py); the
two agree on labels that respect the dependencies strictly (tests/anchors/test_cm2_advantage.py).

Labels: the advantage re-judges each rollout with `checklist_rows` (the reward's own code) from the batch's
prompts, scores and turn_info. With the default rule judge these are the reward's labels exactly. A noisy judge
(`judge=with_noise(...)`) draws its own flips: the reward's are seeded by the training step, which an advantage
does not see. Pass `rows` to use given labels.
"""
from __future__ import annotations

from collections import Counter

import torch

from workbench import registry
from workbench.advantages.base import broadcast
from workbench.advantages.gigpo import per_token
from workbench.advantages.group import group_stats, keyed_normalize
from workbench.batch import RolloutBatch
from workbench.rewards.base import CORRECTNESS_VERIFIERS
from workbench.rewards.checklist import backfilled, checklist_rows, eligible, step_rewards, turn_reward

CM2_TITLE = "CM2: Reinforcement Learning with Checklist Rewards for Multi-Turn and Multi-Step Agentic Tool Use"
LEVELS = ("trajectory", "turn", "step")
F_NORMS = ("std", "none")
STEP_WEIGHTS = ("mean", "sum")
STEP_BASELINES = ("group", "eligible")


def check_options(level, f_norm, step_weights, step_baseline, min_samples) -> None:
    for name, value, allowed in (("level", level, LEVELS), ("f_norm", f_norm, F_NORMS),
                                 ("step_weights", step_weights, STEP_WEIGHTS),
                                 ("step_baseline", step_baseline, STEP_BASELINES)):
        if value not in allowed:
            raise ValueError(f"cm2-advantage: {name} must be one of {allowed}, got {value!r}")
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
        raise ValueError(f"cm2-advantage: min_samples must be an int >= 1 (the code's 5), got {min_samples!r}")


def normalized(values: torch.Tensor, keys: list, *, f_norm="std", eps=1e-6, min_samples=2) -> torch.Tensor:
    """[N] (v - mean_key v) / F_norm within each key; keys with fewer than `min_samples` values give 0."""
    out = keyed_normalize(values.double(), keys, scale=f_norm == "std", eps=eps, singletons="zero")
    counts = Counter(keys)
    return out.masked_fill(torch.tensor([counts[k] < min_samples for k in keys], dtype=torch.bool), 0.0)


def turn_advantages(turn_rewards: list, group: torch.Tensor, *, f_norm="std", eps=1e-6, min_samples=2) -> list:
    """A_turn per row: a [n_i] tensor for the n_i turns rollout i reached (turn_rewards[i] = its R_t, t < n_i),
    each normalized over the rollouts of its prompt group that reached the same turn position."""
    keys = [(int(group[i]), t) for i, row in enumerate(turn_rewards) for t in range(len(row))]
    flat = torch.tensor([float(r) for row in turn_rewards for r in row], dtype=torch.float64)
    out = normalized(flat, keys, f_norm=f_norm, eps=eps, min_samples=min_samples) if keys else flat
    return list(torch.split(out, [len(row) for row in turn_rewards]))


def item_statistics(turns: list, group: torch.Tensor, *, baseline="group", f_norm="std", eps=1e-6) -> dict:
    """{(prompt group, item c): (b, F_norm, n)} over the rollouts of the group (`baseline="group"`) or those in
    which c was eligible at some step ("eligible"); turns[i] = (sat [S, C], deps) of rollout i (None: left out).
    With f_norm="std", an item whose rollouts all agree (std 0) gets F_norm = inf: it adds 0, as a GRPO group whose
    rewards agree (a noisy judge can make an item eligible again after it paid, r~ = 0 != b = 1 there)."""
    keys, values = [], []
    sizes = {}
    for i, turn in enumerate(turns):
        if turn is None:
            continue
        sat, deps = turn
        g = int(group[i])
        if sizes.setdefault(g, len(deps)) != len(deps):
            raise ValueError(f"cm2-advantage: rollouts of prompt group {g} have checklists of {sizes[g]} and "
                             f"{len(deps)} items; the rollouts of one prompt share its checklist")
        paid, ever = step_rewards(sat, deps).any(0), eligible(sat, deps).any(0)
        for c in range(len(deps)):
            if baseline == "group" or bool(ever[c]):
                keys.append((g, c)), values.append(float(paid[c]))
    if not keys:
        return {}
    ids: dict = {}
    dense = torch.tensor([ids.setdefault(k, len(ids)) for k in keys])
    mean, std, n = group_stats(torch.tensor(values, dtype=torch.float64), dense)
    scale = torch.where(std > 0, std + eps, torch.inf) if f_norm == "std" else torch.ones_like(std)
    return {k: (float(mean[j]), float(scale[j]), int(n[j])) for j, k in enumerate(keys)}


def step_values(sat: torch.Tensor, deps: list, weights: torch.Tensor, stats: list, *, min_samples=2,
                step_weights="mean") -> torch.Tensor:
    """A_step [S] of one rollout's turn: the weighted mean (or sum) over the eligible items of (r~ - b) / F;
    `stats[c]` = (b, F, n) of item c (None: no statistics); an item with n < min_samples adds 0 (keeps its weight)."""
    S, C = sat.shape
    ok = eligible(sat, deps).double()                                               # [S, C]
    filled = backfilled(sat, deps).double()                                         # [S, C]
    b = torch.tensor([s[0] if s else 0.0 for s in stats], dtype=torch.float64)
    scale = torch.tensor([s[1] if s else 1.0 for s in stats], dtype=torch.float64)
    enough = torch.tensor([bool(s) and s[2] >= min_samples for s in stats], dtype=torch.float64)
    per_item = (filled - b) / scale * enough                                        # [S, C]
    w = torch.as_tensor(weights, dtype=torch.float64)
    num, den = (ok * w * per_item).sum(-1), (ok * w).sum(-1)                        # [S]
    if step_weights == "sum":
        return num * (den > 0)
    return torch.where(den > 0, num / den.clamp(min=1e-300), torch.zeros_like(num))


def step_advantages(turns: list, weights: list, group: torch.Tensor, *, f_norm="std", eps=1e-6, min_samples=2,
                    step_weights="mean", step_baseline="group") -> list:
    """A_step [S_i] per rollout of one user turn (None rows: None); turns[i] = (sat, deps), weights[i] = w [C]."""
    stats = item_statistics(turns, group, baseline=step_baseline, f_norm=f_norm, eps=eps)
    out = []
    for i, turn in enumerate(turns):
        if turn is None:
            out.append(None)
            continue
        sat, deps = turn
        row_stats = [stats.get((int(group[i]), c)) for c in range(len(deps))]
        out.append(step_values(sat, deps, weights[i], row_stats, min_samples=min_samples, step_weights=step_weights))
    return out


def batch_rows(batch: RolloutBatch, *, judge=None, checklist=None, verifier="auto") -> list:
    """`checklist_rows` of the batch: the reward's labels, re-judged (module docstring)."""
    scores = batch.scores if batch.scores is not None else batch.rewards
    return checklist_rows(batch.completions, judge=judge, checklist=checklist, verifier=verifier,
                          prompts=batch.prompts, scores=scores.tolist(), turn_info=batch.turn_info or None)


def per_step_tokens(values: list, batch: RolloutBatch) -> torch.Tensor:
    """[B, T]: each row's A_step[s] on its policy tokens of step s (0 on rows whose value is None), by gigpo's
    `per_token` (which refuses policy tokens outside a row's labelled steps)."""
    batch.require("turn")
    acted = [int(t[m > 0].max()) + 1 if bool((m > 0).any()) else 1 for t, m in zip(batch.turn.long(), batch.mask)]
    n_steps = [max(1, v.numel()) if v is not None else n for v, n in zip(values, acted)]  # unlabelled: 0 everywhere
    per_step = torch.zeros(batch.size, max(n_steps), dtype=torch.float64)
    for i, v in enumerate(values):
        if v is not None:
            per_step[i, :v.numel()] = v
    return per_token(per_step, batch, n_steps, "cm2-advantage")


@registry.advantage(
    "cm2-advantage", title=CM2_TITLE,
    summary="Checklist advantages at the trajectory, turn or step level: group-normalized checklist reward, "
            "per-turn reward, or the weighted mean over eligible items of (backfilled item reward - item baseline).",
    equation=r"A_{t,s} = \frac{\sum_{c\in E_{t,s}} w_{t,c}\,(\tilde r_{t,s,c} - b_{t,c})/F_{norm}}"
             r"{\sum_{c\in E_{t,s}} w_{t,c}},\quad A_{\text{traj}} = \frac{R - \mathrm{mean}_G R}{F_{norm}(R)}",
    reads=("turn",),
    choices={"level": LEVELS, "f_norm": F_NORMS, "step_weights": STEP_WEIGHTS, "step_baseline": STEP_BASELINES,
             "verifier": CORRECTNESS_VERIFIERS})
def cm2_advantage(batch: RolloutBatch, *, level="trajectory", f_norm="std", min_samples=2, step_weights="mean",
                  step_baseline="group", eps=1e-6, rows=None, judge=None, checklist=None, verifier="auto"):
    """A [B, T] at `level` (module docstring). Reads `prompts`, `scores` (else `rewards`: the answer item),
    `completions`, `turn_info` (the actions), `group`, `mask`, `turn` (step ids, for the step level).

    level: "trajectory" (the final recipe's), "turn" or "step". f_norm, min_samples, step_weights, step_baseline:
    the paper's defaults, or the code's conventions ("none", 5, "sum", "eligible"; module docstring).
    rows: the rollouts' `Row`s (None: `checklist_rows` with judge / checklist / verifier, the reward's defaults).
    """
    check_options(level, f_norm, step_weights, step_baseline, min_samples)
    rows = batch_rows(batch, judge=judge, checklist=checklist, verifier=verifier) if rows is None else list(rows)
    if len(rows) != batch.size:
        raise ValueError(f"cm2-advantage: {len(rows)} checklist rows for {batch.size} batch rows")
    known = [i for i, r in enumerate(rows) if r is not None]
    norm = dict(f_norm=f_norm, eps=eps, min_samples=min_samples)
    if level == "step":
        values = step_advantages([None if r is None else (r.sat, r.deps) for r in rows],
                                 [None if r is None else r.weights for r in rows], batch.group,
                                 step_weights=step_weights, step_baseline=step_baseline, **norm)
        return per_step_tokens(values, batch)
    per_row = torch.zeros(batch.size, dtype=torch.float64)
    if known:
        if level == "trajectory":
            R = torch.tensor([rows[i].reward for i in known], dtype=torch.float64)
            per_row[known] = normalized(R, [int(batch.group[i]) for i in known], **norm)
        else:  # one user turn per rollout here: its one turn's reward (L = 1)
            turn_r = [[float(turn_reward(rows[i].sat, rows[i].deps, rows[i].weights))] for i in known]
            per_row[known] = torch.cat(turn_advantages(turn_r, batch.group[known], **norm))
    return broadcast(per_row, batch.mask)

