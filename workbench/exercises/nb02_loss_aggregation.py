"""The exercises of notebook 02_loss_aggregation (loss aggregation): each answer is checked against the library's
own math."""
from __future__ import annotations

import torch

from workbench.exercises.answers import as_number, near


AGG_EXERCISE = {"lengths": (16, 70, 400), "row": 1}  # exercise 1: one token of the 70-token answer, B = 3
# exercises 2-3: two wrong answers of one batch from two groups of four, A = -0.5 (1 of 4 right) and -1.5 (3 of 4)
LENGTH_BIAS_EXERCISE = {"lengths": (30, 120), "advantages": (-0.5, -1.5)}
# exercise 4: four answers, k = 2 micro-batches (30 + 90 tokens, 20 + 40 tokens); one token of the 20-token answer
MICROBATCH_EXERCISE = {"lengths": (30, 90, 20, 40), "k": 2, "row": 2}


def token_weight(lengths=AGG_EXERCISE["lengths"], mode: str = "seq-mean-token-mean", row: int = AGG_EXERCISE["row"],
                 l_max: int | None = None) -> float:
    """dL/dℓ of one token of answer `row` when the answers of `lengths` form one batch (autograd through
    `ops.aggregate`); seq-mean-token-sum-norm uses C = B * L_max (L_max default: the longest answer)."""
    from workbench import ops

    lengths = torch.as_tensor(list(lengths), dtype=torch.long)
    mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).double()
    denom = None
    if mode == "seq-mean-token-sum-norm":
        denom = ops.Denominators(norm_constant=float(len(lengths) * (l_max or int(lengths.max()))))
    per_token = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(ops.aggregate(per_token, mask, mode, denom), per_token)
    return float(grad[row, 0])


def check_token_weight(answer, lengths=AGG_EXERCISE["lengths"], mode: str = "seq-mean-token-mean",
                       row: int = AGG_EXERCISE["row"]) -> str:
    """Exercise: the per-token gradient weight of a token of answer `row` (default: the 70-token answer of a batch
    of 16, 70 and 400 tokens)."""
    expected, given = token_weight(lengths, mode, row), as_number(answer)
    if given is None or not abs(given - expected) <= 1e-6 + 1e-3 * abs(expected):
        raise AssertionError(f"not quite: under {mode} with B = {len(lengths)} answers of lengths {list(lengths)}, "
                             f"write L as a sum over tokens and read off the factor in front of ℓ of one token of "
                             f"the {list(lengths)[row]}-token answer (you gave {answer})")
    return "correct"


def length_bias_answer(mode: str = "seq-mean-token-mean", lengths=LENGTH_BIAS_EXERCISE["lengths"],
                       advantages=LENGTH_BIAS_EXERCISE["advantages"]) -> str:
    """Which of two answers of one batch, (short, long) of `lengths` with `advantages`, has its tokens pushed
    harder per token (|A| times the token's weight under `mode`): "short", "long" or "same"."""
    short, long = (abs(float(a)) * token_weight(lengths, mode, row) for row, a in enumerate(advantages))
    if abs(short - long) <= 1e-12 * max(abs(short), abs(long)):
        return "same"
    return "short" if short > long else "long"


def check_length_bias(answer: str, mode: str = "seq-mean-token-mean", lengths=LENGTH_BIAS_EXERCISE["lengths"],
                      advantages=LENGTH_BIAS_EXERCISE["advantages"]) -> str:
    """Exercise: whose tokens are pushed down harder, the short or the long wrong answer?"""
    expected = length_bias_answer(mode, lengths, advantages)
    if answer != expected:
        short, long = lengths
        raise AssertionError(f"not quite: a token's push is |A| w; compare |A| w of a token of the {short}-token "
                             f"answer (A = {advantages[0]:+g}) and of the {long}-token one (A = {advantages[1]:+g}), "
                             f"with w the per-token weight under {mode} (answer 'short', 'long' or 'same')")
    return "correct"


def local_microbatch_weight(lengths=MICROBATCH_EXERCISE["lengths"], k: int = MICROBATCH_EXERCISE["k"],
                            mode: str = "token-mean", row: int = MICROBATCH_EXERCISE["row"]) -> float:
    """Per-token weight of answer `row` when the step is split into k contiguous micro-batches that each divide by
    their OWN counts and the accumulation loop divides by k (autograd through the library's accumulation loop)."""
    from workbench.viz.aggregation_weights import microbatch_token_weights

    return float(microbatch_token_weights(lengths, k, mode, "local")[row])


def check_local_microbatch_weight(answer, lengths=MICROBATCH_EXERCISE["lengths"], k: int = MICROBATCH_EXERCISE["k"],
                                  mode: str = "token-mean", row: int = MICROBATCH_EXERCISE["row"]) -> str:
    """Exercise: the weight of a token of one answer when each micro-batch takes its own token-mean (default: the
    20-token answer, in the second of k = 2 micro-batches of 30 + 90 and 20 + 40 tokens)."""
    from workbench.viz.aggregation_weights import microbatch_splits

    expected, given = local_microbatch_weight(lengths, k, mode, row), as_number(answer)
    if given is not None and near(given, expected, 1e-6 + 1e-3 * abs(expected)):
        return "correct"
    full = token_weight(lengths, mode, row)
    rows = next(r for r in microbatch_splits(len(lengths), k) if row in r.tolist())
    micro = [list(lengths)[i] for i in rows.tolist()]
    if given is None:
        hint = "answer one number, the weight of one token"
    elif near(given, full, 1e-6 + 1e-3 * full):
        hint = ("that is the full-batch (global) weight; a micro-batch that uses its own counts only knows its "
                "own tokens")
    elif near(given, expected * k, 1e-6 + 1e-3 * expected * k):
        hint = f"the accumulation loop also divides each micro-batch's loss by k = {k}"
    else:
        hint = (f"the {lengths[row]}-token answer's micro-batch holds {' + '.join(map(str, micro))} tokens and "
                f"divides by its own token count only, then the loop divides by k = {k}")
    raise AssertionError(f"not quite ({answer}): {hint}")
