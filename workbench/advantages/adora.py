"""ADORA: group advantage re-weighting by length dynamics (an advantage-chain entry after a group baseline).

    correct_i   = R_i > threshold                                  (Logic-RL code: R > 1.01; VL code: R > 0.5)
    L+_max      = max length of the group's correct responses      (-inf when there is none)
    L-_mean     = mean length of its incorrect, non-truncated ones  (-inf when there is none)
    w_g         = 1 if L+_max > L-_mean else lambda                (lambda = 0.1)
    A_{i,t}    <- w_g A_{i,t}                                       for every row i of group g

A group keeps its advantages when its longest correct answer is longer than the mean wrong one (its correct
reasoning is "long": the signal that grows long chains of thought), and is damped to lambda otherwise. The rule
only scales, so no sign ever flips, and lambda = 1 leaves the chain's advantages unchanged (= `grpo`).

Reading chosen (the catalog says "modifier"): this entry multiplies the chain's `batch.advantages`, so it composes
with any group baseline, as the authors use it: `compute_grpo_outcome_advantage_ADORA` applies it to their GRPO
z-score, and the VL code's `weight_func` multiplies the rloo, reinforce_baseline and group_norm advantages alike.
The recipe chains it after `grpo`.

Authors' code: ShadeCloak/ADORA @ c518485 `ADORA/verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage_ADORA`
(L110-190; defaults correct_score 1.01, lamda 0.1, max_length_threshold 4054) and
`ADORA_VL/openrlhf/trainer/ppo_utils/experience_maker_vl.py::weight_func` (L1260; R > 0.5, length < 4094).
Their conventions, kept here:
  - a group with no correct answer has L+_max = -inf and is damped (`empty="llm"`, the Logic-RL code); the VL code
    keeps such groups (w = 1) and, with no incorrect non-truncated answer, takes L-_mean = +inf, so it damps those
    (`empty="vl"`);
  - a group with no incorrect non-truncated answer keeps its advantages under "llm" (L-_mean = -inf);
  - L+_max > L-_mean is strict: a tie damps;
  - singleton groups: the authors keep the raw score (no normalization), then apply w; here that is `grpo` with
    allow_singletons="keep" before this entry.
Truncation: the code counts a response as truncated when its length reaches a threshold (4054 of 4096 tokens);
here `batch.truncated` (no EOS within max_new_tokens) says so, and `max_length` adds the code's length rule.
The threshold 0.5 is the VL code's, right for the 0/1 verifiers here; the Logic-RL code's 1.01 fits its reward
scale (a correct answer with the right format scores above 1).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.group import group_index
from workbench.batch import RolloutBatch

ADORA_TITLE = "ADORA: Training Reasoning Models with Dynamic Advantage Estimation on Reinforcement Learning"
EMPTY = ("llm", "vl")


def check_adora(*, lam=0.1, **_) -> None:
    if not 0 <= lam <= 1:
        raise ValueError(f"adora: lam (the damping of a group without the length advantage) must be in [0, 1], "
                         f"got {lam}")


def truncated_rows(batch: RolloutBatch, max_length: int | None) -> torch.Tensor:
    """[B] bool: no EOS within the budget (`batch.truncated`), or, when `max_length` is given, length >= it (the
    code's rule: only responses shorter than max_length_threshold count as incorrect)."""
    cut = (batch.truncated.bool() if batch.truncated is not None
           else torch.zeros(batch.size, dtype=torch.bool))
    if max_length is not None:
        cut = cut | (batch.lengths >= max_length)
    return cut


def length_weights(correct: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor, group: torch.Tensor, *,
                   lam=0.1, empty="llm") -> torch.Tensor:
    """w [B] per row's group: 1 if L+_max > L-_mean, else lam (module docstring; `empty` names the convention for
    groups without a correct, or without an incorrect non-truncated, response)."""
    if empty not in EMPTY:
        raise ValueError(f"adora: empty must be one of {EMPTY}, got {empty!r}")
    dense, counts = group_index(group)
    lengths = lengths.double()
    neg_inf = torch.full((counts.shape[0],), -torch.inf, dtype=torch.float64)
    longest_correct = neg_inf.clone().scatter_reduce(0, dense[correct], lengths[correct], "amax")
    wrong = ~correct & ~truncated
    n_wrong = torch.zeros_like(neg_inf).index_add_(0, dense[wrong], torch.ones_like(lengths[wrong]))
    sum_wrong = torch.zeros_like(neg_inf).index_add_(0, dense[wrong], lengths[wrong])
    none_wrong = -torch.inf if empty == "llm" else torch.inf
    mean_wrong = torch.where(n_wrong > 0, sum_wrong / n_wrong.clamp(min=1), torch.full_like(neg_inf, none_wrong))
    keep = longest_correct > mean_wrong
    if empty == "vl":
        keep = keep | torch.isinf(longest_correct)  # no correct answer: weight 1 (weight_func)
    return torch.where(keep, torch.ones_like(mean_wrong), torch.full_like(mean_wrong, float(lam)))[dense]


@registry.advantage(
    "adora", title=ADORA_TITLE,
    summary="Multiplies each group's chain advantages by lambda = 0.1 unless its longest correct response is "
            "longer than the mean length of its incorrect non-truncated ones (favours long correct reasoning).",
    equation=r"A_{i,t} \leftarrow w_g A_{i,t},\quad w_g = \begin{cases} 1 & \max_{j\in g^+} |y_j| > "
             r"\mathrm{mean}_{j\in g^-} |y_j| \\ \lambda & \text{otherwise}\end{cases}",
    reads=("advantages",), choices={"empty": EMPTY}, check=check_adora)
def adora(batch: RolloutBatch, *, lam=0.1, threshold=0.5, max_length=None, empty="llm"):
    """Rescales the chain's `advantages` [B, T] by the group weight w_g (module docstring). Reads `rewards`
    (+ summed `token_rewards`, the R the group baseline saw: correct = R > threshold), `group`, `mask` (|y_i| =
    policy tokens), `truncated` (None: no row truncated).

    lam: the damping lambda (0.1, the code's `lamda`); 1 leaves the advantages unchanged. threshold: R above it is
    correct (0.5, the VL code's; 1.01 in the Logic-RL code). max_length: a response this long or longer also
    counts as truncated (the code's 4054; None: only `batch.truncated`). empty: "llm" or "vl" (module docstring).
    """
    check_adora(lam=lam)
    batch.require("advantages")
    correct = sequence_rewards(batch) > threshold
    w = length_weights(correct, batch.lengths, truncated_rows(batch, max_length), batch.group, lam=lam, empty=empty)
    return batch.advantages * w[:, None].to(batch.advantages.dtype)
