"""Length rewards: DAPO's soft overlong punishment and the cosine length-scaled correctness reward.

Both measure |y| in tokens, len(completion_ids[i]) (EOS included), as TRL does; the budget L is a parameter,
or the run's `max_new_tokens` column where the parameter is None (TRL does not pass that column: give the
parameter there).

open-r1's `len_reward` (Kimi 1.5: 0.5 - (len - min_len) / (max_len - min_len) over the batch, in characters; wrong
answers capped at 0) is a different, batch-relative reward and no catalog key: it is not implemented here.
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.rewards import base

DEMYSTIFY_TITLE = "Demystifying Long Chain-of-Thought Reasoning in LLMs"


def length_budget(value, columns: dict, *, reward: str, param: str) -> int:
    """The length L a reward normalizes by: `value` when given, else the run's `max_new_tokens` column."""
    budget = value if value is not None else columns.get("max_new_tokens")
    if budget is None:
        raise ValueError(f"reward {reward!r} needs its length budget: pass {param}=<tokens> (TRL gives no "
                         "'max_new_tokens' column) or call it with max_new_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"reward {reward!r}: {param} must be an int >= 1, got {budget!r}")
    return budget


def token_lengths(completion_ids, rows: int) -> torch.Tensor:
    """|y| per row [B] float64: the number of completion tokens (`rows`: the number of completions to match)."""
    if len(completion_ids) != rows:
        raise ValueError(f"completion_ids has {len(completion_ids)} rows for {rows} completions")
    return torch.tensor([len(ids) for ids in completion_ids], dtype=torch.float64)


# ----------------------------------------------------------------------------------------------- soft overlong

def check_buffer(buffer, max_len) -> None:
    if not 0 <= buffer <= max_len:
        raise ValueError(f"soft-overlong needs 0 <= buffer <= max_len, got buffer={buffer}, max_len={max_len}")


def check_soft_overlong(*, buffer=4, max_completion_len=None, **_) -> None:
    """What can be checked before the run's budget is known (max_completion_len=None: the run's max_new_tokens)."""
    if max_completion_len is not None and not 0 <= buffer <= max_completion_len:
        raise ValueError(f"soft-overlong needs 0 <= buffer <= max_completion_len (the length budget L), got "
                         f"buffer={buffer}, max_completion_len={max_completion_len}")
    check_buffer(buffer, math.inf)


def soft_overlong(rewards: torch.Tensor, lengths: torch.Tensor, *, max_len: int, buffer=4, factor=1.0):
    """DAPO soft overlong punishment (TRL `get_soft_overlong_punishment`), scaled by `factor`.

    rewards, lengths: [B]. max_len = L (the response budget), buffer = C (the paper uses L=20480, C=4096).
    A response cut at the budget has |y| = L and gets -factor, the largest penalty reachable here. buffer = 0 is
    TRL's `soft_punish_cache=0`: no ramp, 0 up to L and -1 beyond it.
    """
    check_buffer(buffer, max_len)
    lengths = lengths.to(torch.float64)
    excess = lengths - (max_len - buffer)
    ramp = -(excess / buffer).clamp(min=0) if buffer > 0 else torch.zeros_like(lengths)  # [B]
    penalty = torch.where(lengths > max_len, -torch.ones_like(lengths), ramp)
    return rewards + factor * penalty.to(rewards.dtype)


@registry.reward(
    "soft-overlong", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Linear length penalty inside the last `buffer` tokens of the budget, -1 beyond it, added to R.",
    equation=r"r_{len} = \begin{cases}0 & |y|\le L-C\\ \frac{(L-C)-|y|}{C} & L-C<|y|\le L\\ -1 & |y|>L\end{cases}",
    check=check_soft_overlong)
def soft_overlong_reward(completions, completion_ids, *, buffer=4, factor=1.0, max_completion_len=None,
                         **columns) -> list[float]:
    """TRL's reward signature: the penalty alone (`soft_overlong` of zero rewards) for each completion, from its
    token count |y| = len(completion_ids[i]) (EOS included). The budget L is `max_completion_len`, or the run's
    `max_new_tokens` (every reward function of our pipeline receives it) when None."""
    budget = length_budget(max_completion_len, columns, reward="soft-overlong", param="max_completion_len")
    lengths = token_lengths(completion_ids, len(completions))
    return soft_overlong(torch.zeros_like(lengths), lengths, max_len=budget, buffer=buffer, factor=factor).tolist()


# ----------------------------------------------------------------------------------------------- cosine length

def cosine_scaled(lengths: torch.Tensor, correct: torch.Tensor, *, max_len: int, min_value_wrong=-1.0,
                  max_value_wrong=-0.5, min_value_correct=0.5, max_value_correct=1.0, clamp=True,
                  exceed_reward=None, exceed_margin=16) -> torch.Tensor:
    """Cosine length-scaled correctness reward [B] float64 for lengths [B] and correct [B] bool.

    u = |y| / L; correct rows interpolate from max_value_correct (|y| = 0) to min_value_correct (|y| = L), wrong
    rows from min_value_wrong to max_value_wrong (the swapped bounds: a longer wrong answer is penalized less):
    r = lo + (hi - lo) (1 + cos(pi u)) / 2 with (lo, hi) = (min_c, max_c) or (max_w, min_w).
    clamp: u <= 1 (TRL), so |y| > L stays at the long-length bound; False is open-r1 and demystify-long-cot, where
    cos is periodic and the reward climbs back past L. exceed_reward: demystify-long-cot's exceed-length rule,
    |y| + exceed_margin >= L gets exceed_reward instead (its MAX_LEN_MARGIN = 16; None: no such rule).
    """
    lengths = lengths.to(torch.float64)
    correct = torch.as_tensor(correct, dtype=torch.bool)
    progress = lengths / max_len
    if clamp:
        progress = progress.clamp(max=1.0)  # cos is periodic: past L it would reward length again
    cosine = torch.cos(progress * math.pi)
    lo = torch.where(correct, torch.tensor(float(min_value_correct), dtype=torch.float64),
                     torch.tensor(float(max_value_wrong), dtype=torch.float64))
    hi = torch.where(correct, torch.tensor(float(max_value_correct), dtype=torch.float64),
                     torch.tensor(float(min_value_wrong), dtype=torch.float64))
    reward = lo + 0.5 * (hi - lo) * (1.0 + cosine)
    if exceed_reward is not None:
        reward = torch.where(lengths + exceed_margin >= max_len, torch.full_like(reward, float(exceed_reward)), reward)
    return reward


def check_exceed(max_len: int, exceed_margin) -> None:
    if exceed_margin is None or isinstance(exceed_margin, bool) or not isinstance(exceed_margin, int) \
            or exceed_margin < 0:
        raise ValueError(f"cosine-length: exceed_margin must be an int >= 0, got {exceed_margin!r}")
    if exceed_margin >= max_len:
        raise ValueError(f"cosine-length: exceed_margin ({exceed_margin}) must be < max_len ({max_len}) or every "
                         "completion gets exceed_reward")


def check_cosine(*, max_len=1000, exceed_reward=None, exceed_margin=16, **_) -> None:
    """What can be checked before the run's budget is known (max_len=None: the run's max_new_tokens)."""
    if exceed_reward is not None:
        check_exceed(math.inf if max_len is None else max_len, exceed_margin)


@registry.reward(
    "cosine-length", title=DEMYSTIFY_TITLE,
    summary="Correctness scaled by length on a cosine: correct answers from 1.0 (short) to 0.5 (at L_max), "
            "wrong ones from -1.0 (short) to -0.5 (at L_max); the accuracy term is included.",
    equation=r"r = lo + \tfrac12 (hi - lo)\big(1 + \cos(\pi\,\min(|y|/L_{max}, 1))\big),\ "
             r"(lo, hi) = \begin{cases}(0.5, 1.0) & \text{correct}\\ (-0.5, -1.0) & \text{wrong}\end{cases}",
    check=check_cosine)
def cosine_length_reward(completions, completion_ids, *, max_len=1000, min_value_wrong=-1.0, max_value_wrong=-0.5,
                         min_value_correct=0.5, max_value_correct=1.0, clamp=True, exceed_reward=None,
                         exceed_margin=16, reference_bug=False, **columns) -> list[float | None]:
    """TRL `get_cosine_scaled_reward` as a reward function (`cosine_scaled`), |y| = len(completion_ids[i]).

    Correctness is `base.correctness`: our pipeline's verifier verdict (`scores`), or, for a TRL user, the text
    checked against `solution`; a row whose gold answer does not parse gets None (TRL). Defaults: the four
    bounds and L_max = 1000 are TRL's and open-r1's (`get_cosine_scaled_reward`); max_len=None uses the run's
    `max_new_tokens`, as demystify-long-cot does (`max_len=generate_kwargs["max_new_tokens"]`). Our reading of the
    catalog's unverified defaults: TRL's values, so that a TRL user gets TRL's reward; the paper's own runs use
    wider bounds and the exceed rule (below), reachable through the parameters.
    Conventions of the references, each a parameter:
      clamp=True        TRL clamps u = |y|/L at 1; open-r1 and demystify-long-cot do not (clamp=False).
      exceed_reward     demystify-long-cot: |y| + 16 >= L gets `exceed_length` (its default 0, its paper scripts
                        -10, with bounds wrong (-10, 0), correct (1, 2)); None (TRL, open-r1): no such rule.
      reference_bug     open-r1 gives 1.0 to a row whose gold answer does not parse (True); TRL and we: None.
    Not reproduced: open-r1 measures |y| in characters (len(content)); demystify-long-cot can fold a word-n-gram
    repetition penalty into wrong answers (off by default there, and its paper runs use the separate dense
    token penalty instead; compose with `repetition-penalty`).
    """
    budget = length_budget(max_len, columns, reward="cosine-length", param="max_len")
    if exceed_reward is not None:
        check_exceed(budget, exceed_margin)
    correct = base.correctness(completions, reward="cosine-length", **columns)
    lengths = token_lengths(completion_ids, len(correct))
    known = torch.tensor([c is not None for c in correct])
    reward = cosine_scaled(lengths, torch.tensor([bool(c) for c in correct]), max_len=budget,
                           min_value_wrong=min_value_wrong, max_value_wrong=max_value_wrong,
                           min_value_correct=min_value_correct, max_value_correct=max_value_correct, clamp=clamp,
                           exceed_reward=exceed_reward, exceed_margin=exceed_margin)
    unknown = 1.0 if reference_bug else None  # open-r1 "skips" an unparseable gold answer with reward 1.0
    return [float(r) if k else unknown for r, k in zip(reward.tolist(), known.tolist())]
