"""Automatic checks for the notebooks' exercises: each answer is compared with the library's own math."""
from __future__ import annotations

import torch

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.objectives.ppo import ppo_clip


def _near(answer, value: float, tol: float = 1e-3) -> bool:
    """An exercise's numeric answer (None while the learner's cell is still empty) within `tol` of `value`."""
    return answer is not None and abs(float(answer) - float(value)) <= tol


def _numbers(answer) -> list[float] | None:
    """An exercise's answer made of several numbers as a list of floats; None if it is not one."""
    if isinstance(answer, str):
        return None
    try:
        return [float(x) for x in answer]
    except (TypeError, ValueError):
        return None


def _float(answer) -> float | None:
    """A one-number answer as a float; None if it is not one."""
    if isinstance(answer, (str, bool)) or answer is None:
        return None
    try:
        return float(answer)
    except (TypeError, ValueError):
        return None


def _all_near(answer, values, tol: float = 1e-3) -> bool:
    """An answer of several numbers, as many as `values`, each within `tol` of its value."""
    given = _numbers(answer)
    return given is not None and len(given) == len(values) and all(_near(a, v, tol) for a, v in zip(given, values))


def check_answers(exercises) -> None:
    """Print each exercise's verdict: "no answer yet" for an answer still None, else what its check says (which
    explains a wrong answer by raising). `exercises`: (number, answer, check) triples, in order."""
    for number, answer, check in exercises:
        if answer is None:
            print(f"exercise {number}: no answer yet: replace None in the answers cell above and run it and this cell "
                  f"(or execute the notebook with -p solutions=True to see the solutions)")
        else:
            print(f"exercise {number}: {check(answer)}")


# ----------------------------------------------------------------------------------------------------
# Notebook 01: GRPO end to end


def check_grpo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0)) -> str:
    """Exercise: GRPO advantages of one group (Bessel std, eps = 0)."""
    r = torch.tensor(rewards, dtype=torch.float64)
    expected = grpo(RolloutBatch.from_rewards(r), eps=0.0)[:, 0]
    given = torch.tensor(answer, dtype=torch.float64)
    if given.shape != expected.shape or not torch.allclose(given, expected, atol=1e-3):
        raise AssertionError(f"not quite: subtract the group mean {r.mean():.3f}, divide by the Bessel std "
                             f"{r.std():.3f} (you gave {answer})")
    return "correct"


def zero_gradient_case(ratio: float = 1.3, eps: float = 0.2) -> str:
    """Which advantage sign gives zero PPO-clip gradient at this ratio: "A=+1" or "A=-1"."""
    for sign, label in ((1.0, "A=+1"), (-1.0, "A=-1")):
        logp = torch.tensor([[float(torch.log(torch.tensor(ratio)))]], dtype=torch.float64, requires_grad=True)
        loss, _ = ppo_clip(logp, torch.zeros(1, 1, dtype=torch.float64), torch.full((1, 1), sign, dtype=torch.float64),
                           torch.ones(1, 1, dtype=torch.float64), eps_low=eps, eps_high=eps)
        (grad,) = torch.autograd.grad(loss, logp)
        if grad.item() == 0:
            return label
    return "neither"


def check_zero_gradient(answer: str, ratio: float = 1.3, eps: float = 0.2) -> str:
    expected = zero_gradient_case(ratio, eps)
    if answer != expected:
        raise AssertionError(f"not quite: the clipped branch is active when A>0 and r>1+eps, or A<0 and "
                             f"r<1-eps (ratio {ratio}, eps {eps})")
    return "correct"


STD_EXERCISE_GROUPS = ((1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0))


def grpo_sum_of_squares(groups=STD_EXERCISE_GROUPS, **kw) -> tuple[float, ...]:
    """Σ_i A_i² of each group under the registered GRPO advantage (eps = 0 unless given; other kw go to grpo)."""
    kw = {"eps": 0.0, **kw}
    return tuple(float((grpo(RolloutBatch.from_rewards(r), **kw)[:, 0] ** 2).sum()) for r in groups)


def check_grpo_sum_of_squares(answer, groups=STD_EXERCISE_GROUPS) -> str:
    """Exercise: the total squared GRPO advantage Σ A_i² of a 1-of-8 and a 4-of-8 group (Bessel std, eps = 0)."""
    if _all_near(answer, grpo_sum_of_squares(groups)):
        return "correct"
    if _all_near(answer, grpo_sum_of_squares(groups, unbiased=False)):
        hint = "that is the population std; GRPO divides by the Bessel (G - 1) std"
    elif _all_near(answer, grpo_sum_of_squares(groups, scale="none")):
        hint = "that is Σ (R_i - mean)², Dr.GRPO's advantage without the std division; divide by std² first"
    else:
        hint = ("A_i = (R_i - mean) / std with std² = Σ_j (R_j - mean)² / (G - 1): write Σ_i A_i² with that std² "
                "and simplify (answer one number per group)")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 02: loss aggregation


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
    expected, given = token_weight(lengths, mode, row), _float(answer)
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

    expected, given = local_microbatch_weight(lengths, k, mode, row), _float(answer)
    if given is not None and _near(given, expected, 1e-6 + 1e-3 * abs(expected)):
        return "correct"
    full = token_weight(lengths, mode, row)
    rows = next(r for r in microbatch_splits(len(lengths), k) if row in r.tolist())
    micro = [list(lengths)[i] for i in rows.tolist()]
    if given is None:
        hint = "answer one number, the weight of one token"
    elif _near(given, full, 1e-6 + 1e-3 * full):
        hint = ("that is the full-batch (global) weight; a micro-batch that uses its own counts only knows its "
                "own tokens")
    elif _near(given, expected * k, 1e-6 + 1e-3 * expected * k):
        hint = f"the accumulation loop also divides each micro-batch's loss by k = {k}"
    else:
        hint = (f"the {lengths[row]}-token answer's micro-batch holds {' + '.join(map(str, micro))} tokens and "
                f"divides by its own token count only, then the loop divides by k = {k}")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 03: KL estimators


def k1_sign(p: float = 0.1, p_ref: float = 0.4) -> str:
    """Sign of the k1 estimate on a sampled token with π(y) = p and π_ref(y) = p_ref."""
    from workbench import kl

    value = float(kl.estimate(torch.tensor([p], dtype=torch.float64).log(),
                              torch.tensor([p_ref], dtype=torch.float64).log(), "k1")[0])
    return "zero" if value == 0 else "positive" if value > 0 else "negative"


def check_k1_sign(answer: str, p: float = 0.1, p_ref: float = 0.4) -> str:
    """Exercise: is k1 positive, negative or zero on this token?"""
    if answer != k1_sign(p, p_ref):
        raise AssertionError(f"not quite: k1 = log π(y) − log π_ref(y) with π(y) = {p}, π_ref(y) = {p_ref} "
                             "(answer 'positive', 'negative' or 'zero')")
    return "correct"


def nonnegative_estimators(kinds=("k1", "k2", "k3", "abs")) -> set[str]:
    """The estimators whose per-token value is >= 0 for every log-ratio on a grid over [-10, 10]."""
    from workbench import kl

    logr = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    return {kind for kind in kinds if bool((kl.estimate(logr, torch.zeros_like(logr), kind) >= 0).all())}


def check_nonnegative_estimators(answer) -> str:
    """Exercise: which of k1, k2, k3, abs are never negative, whatever the token?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != nonnegative_estimators():
        raise AssertionError("not quite: write each estimator as a function of logr = log π − log π_ref and "
                             f"check its sign for logr < 0 and logr > 0 (you gave {sorted(given)})")
    return "correct"


# exercise 3: sums and differences of the estimators, used as a loss (two of them have the reverse-KL gradient)
KL_COMBINATION_EXERCISE = ("k1 + k2", "k3 - k1", "k2 + k3", "k2 - k1")


def kl_combination(expression: str) -> dict[str, float]:
    """The coefficients of a sum or difference of the registered estimators k1, k2, k3, abs: "k2 - k1" ->
    {"k2": 1, "k1": -1} ("2 * k2", a plain key, spaces optional; no straight-through `+` kinds, whose `+` would read
    as a sum). ValueError for anything else."""
    import re

    from workbench import kl

    text = expression.replace(" ", "")
    terms = re.findall(r"([+-]?)(?:(\d+(?:\.\d+)?)\*)?([a-z0-9]+)", text)
    if not text or "".join(sign + (f"{c}*" if c else "") + key for sign, c, key in terms) != text:
        raise ValueError(f"not a sum or difference of KL estimators: {expression!r}")
    out: dict[str, float] = {}
    for sign, coef, key in terms:
        if key not in kl.ESTIMATORS:
            raise ValueError(f"unknown KL estimator {key!r} in {expression!r}")
        out[key] = out.get(key, 0.0) + (-1.0 if sign == "-" else 1.0) * float(coef or 1)
    return out


def reverse_kl_gradient_estimators(kinds=KL_COMBINATION_EXERCISE, vocab: int = 8, seed: int = 0) -> set[str]:
    """The estimators (keys, or sums and differences of them: `kl_combination`) whose expected on-policy gradient,
    used as a loss, equals ∇KL(π‖π_ref) on a random categorical (exact sums over the vocabulary)."""
    from workbench import kl

    gen = torch.Generator().manual_seed(seed)
    theta0 = torch.randn(vocab, generator=gen, dtype=torch.float64)
    ref_logp = torch.log_softmax(torch.randn(vocab, generator=gen, dtype=torch.float64), -1)
    weights = torch.softmax(theta0, -1)

    def grad_of(fn):
        theta = theta0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(torch.log_softmax(theta, -1)), theta)
        return g

    def loss(lp, expression):
        terms = kl_combination(expression).items()
        return sum(c * (weights * kl.estimate(lp, ref_logp, key)).sum() for key, c in terms)

    target = grad_of(lambda lp: (lp.exp() * (lp - ref_logp)).sum())
    return {kind for kind in kinds if torch.allclose(grad_of(lambda lp, kind=kind: loss(lp, kind)), target, atol=1e-10)}


def check_reverse_kl_gradient(answer, kinds=KL_COMBINATION_EXERCISE) -> str:
    """Exercise: which of k1 + k2, k3 - k1, k2 + k3, k2 - k1, used as a loss on samples of π, has the gradient of
    KL(π‖π_ref)?"""
    expected = reverse_kl_gradient_estimators(kinds)
    try:
        given = {answer} if isinstance(answer, str) else set(answer)
        coefficients = {frozenset(kl_combination(k).items()): k for k in kinds}
        given = {coefficients.get(frozenset(kl_combination(str(g)).items()), str(g)) for g in given}
    except (TypeError, ValueError):
        given = None
    if given == expected:
        return "correct"
    if given is None or not given <= set(kinds):
        hint = f"answer a list of the expressions, chosen among {list(kinds)}"
    elif any("k3" in kl_combination(g) for g in given if g in kinds):
        hint = ("the expected gradient is linear in the loss: E[grad k3] is the forward KL's, and adding or "
                "subtracting k1 or k2 does not cancel it")
    else:
        hint = ("the expected gradient is linear in the loss: average grad k_x over y ~ π for each estimator "
                "(E[grad k1] = sum_y grad π(y) = ?), then add them up")
    raise AssertionError(f"not quite ({sorted(given) if given else answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 04: the clipping zoo


def on_policy_clip_fraction(eps: float = 0.2, seed: int = 0) -> float:
    """PPO-clip's clip/region on a random batch scored by the policy that sampled it (logp == old_logp)."""
    gen = torch.Generator().manual_seed(seed)
    logp = -torch.rand(32, 8, generator=gen, dtype=torch.float64) * 5
    advantages = torch.randn(32, 8, generator=gen, dtype=torch.float64)
    _, metrics = ppo_clip(logp.clone().requires_grad_(True), logp.detach(), advantages, torch.ones_like(logp),
                          eps_low=eps, eps_high=eps)
    return metrics["clip/region"]


# exercise 1: minibatches=3, ppo_epochs=1 (mu = 3): the clip fractions of the second and third optimizer steps
CLIP_LOG_EXERCISE = (0.03, 0.09)


def logged_clip_fraction(later=CLIP_LOG_EXERCISE, eps: float = 0.2) -> float:
    """The clip/region the trainer logs for one rollout batch (the mean over its optimizer steps, `train_on`) when
    its optimizer steps after the first clip the fractions `later`: the first step's own fraction is PPO-clip's on
    a batch scored by the policy that sampled it (`on_policy_clip_fraction`)."""
    steps = [on_policy_clip_fraction(eps), *later]
    return sum(steps) / len(steps)


def check_logged_clip_fraction(answer, later=CLIP_LOG_EXERCISE, eps: float = 0.2) -> str:
    """Exercise: the mean clip fraction logged for a batch of mu = 3 optimizer steps whose last two clip 3% and
    9% of their tokens."""
    expected, given = logged_clip_fraction(later, eps), _float(answer)
    if given is not None and abs(given - expected) <= 1e-6:
        return "correct"
    n = len(later) + 1
    if given is None:
        hint = "answer one number, a fraction of tokens"
    elif abs(given - sum(later) / len(later)) <= 1e-6:
        hint = (f"that is the mean of the later steps only; the trainer averages over all {n} optimizer steps, and "
                "the first optimizer step counts too: what is r there, and what does it clip?")
    elif abs(given - sum(later)) <= 1e-6:
        hint = f"the trainer logs the mean over the batch's {n} optimizer steps, not their sum"
    elif abs(given) <= 1e-6:
        hint = ("only the first optimizer step sees r = 1 everywhere; the later ones see a moved policy, and the "
                f"trainer logs the mean over all {n}")
    else:
        hint = (f"mu = {n} optimizer steps on the batch; on the first one old_logp comes from the very policy being "
                "trained. The trainer logs the mean of the steps' clip fractions")
    raise AssertionError(f"not quite ({answer}): {hint}")


ZOO_EXERCISE_KEYS = ("ppo-clip", "dual-clip", "cispo", "sapo", "gspo")


def nonzero_weight_objectives(keys=ZOO_EXERCISE_KEYS, ratio: float = 1.5, advantage: float = 1.0) -> set[str]:
    """The objectives (among `keys`, at their defaults) whose gradient weight at (ratio, advantage) is not 0."""
    from workbench.viz.weight_surfaces import gradient_weight_surface

    return {key for key in keys
            if abs(float(gradient_weight_surface(key, [ratio], [advantage])[0, 0])) > 1e-12}


def check_nonzero_weight_objectives(answer, ratio: float = 1.5, advantage: float = 1.0) -> str:
    """Exercise: which of ppo-clip, dual-clip, cispo, sapo, gspo still push a token at (ratio, advantage)?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != nonzero_weight_objectives(ratio=ratio, advantage=advantage):
        raise AssertionError(f"not quite: at r = {ratio}, A = {advantage:+g} find each objective's panel in the "
                             f"zoo; grey means zero gradient (choose among {list(ZOO_EXERCISE_KEYS)}, you gave "
                             f"{sorted(given)})")
    return "correct"


def negative_advantage_weights(ratio: float = 5.0, advantage: float = -1.0) -> tuple[float, float]:
    """(ppo-clip, dual-clip) gradient weights of one token at (ratio, advantage), both at their defaults."""
    from workbench.viz.weight_surfaces import gradient_weight_surface

    return tuple(float(gradient_weight_surface(key, [ratio], [advantage])[0, 0]) for key in ("ppo-clip", "dual-clip"))


def check_negative_advantage_weights(answer, ratio: float = 5.0, advantage: float = -1.0) -> str:
    """Exercise: the gradient weights of PPO-clip and dual-clip on a bad token whose probability grew 5×."""
    from workbench import registry

    expected = negative_advantage_weights(ratio, advantage)
    if _all_near(answer, expected):
        return "correct"
    hp = registry.get("objective", "dual-clip").defaults
    c, eps = hp["dual_clip_c"], hp["eps_low"]
    given = _numbers(answer)
    if given is not None and len(given) == 2 and _near(given[0], 0.0, 1e-9):
        hint = (f"PPO-clip zeroes A < 0 only below r = 1 - eps = {1 - eps:g}; at r = {ratio:g} its unclipped "
                "branch r A is active, with no bound: that is what dual-clip is for")
    elif given is not None and len(given) == 2 and _near(given[0], -expected[0]) and expected[0] != 0:
        hint = f"mind the sign: the weight is r A with A = {advantage:+g}, so the token is pushed down"
    elif given is not None and len(given) == 2 and _near(given[0], expected[0]):
        hint = (f"PPO-clip is right; dual-clip caps the loss of A < 0 tokens at -c A (c = {c:g}): beyond r = c "
                "the cap is a constant, so what is its gradient?")
    else:
        hint = (f"answer a pair (PPO-clip, dual-clip); w = d(-l)/d log pi is r A on the unclipped branch and 0 on "
                f"a clipped or capped one (r = {ratio:g}, A = {advantage:+g}, eps = {eps:g}, c = {c:g})")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 05: advantage estimators


def check_rloo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0)) -> str:
    """Exercise: RLOO advantages of one group (each reward minus the mean of the OTHER rewards)."""
    from workbench.advantages.group import rloo

    expected = rloo(RolloutBatch.from_rewards(rewards))[:, 0]
    given = torch.tensor(answer, dtype=torch.float64)
    if given.shape != expected.shape or not torch.allclose(given, expected, atol=1e-3):
        raise AssertionError(f"not quite: for each sample subtract the mean of the other {len(rewards) - 1} "
                             f"rewards (you gave {answer})")
    return "correct"


def largest_advantage_success_rate(G: int = 8) -> float:
    """The success rate p = k/G (0 < k < G) at which a correct answer gets the largest default GRPO advantage."""
    rewards, group = [], []
    for k in range(1, G):
        rewards += [1.0] * k + [0.0] * (G - k)
        group += [k] * G
    adv = grpo(RolloutBatch.from_rewards(rewards, group))[:, 0].view(G - 1, G)
    return (int(torch.argmax(adv[:, 0])) + 1) / G  # column 0 is a correct answer in every group


def check_largest_advantage_rate(answer, G: int = 8) -> str:
    """Exercise: at which group success rate does a correct answer get the largest GRPO advantage?"""
    expected = largest_advantage_success_rate(G)
    if not abs(float(answer) - expected) <= 1e-6:
        raise AssertionError(f"not quite: with k of {G} answers correct, a correct answer gets (1 - p) / std "
                             f"with std = sqrt(p (1 - p) G / (G - 1)); which k/G makes it largest? "
                             f"(you gave {answer})")
    return "correct"


def opo_advantages(rewards=(1.0, 0.0, 0.0, 0.0), lengths=(2, 6, 4, 4)) -> list[float]:
    """The registered `opo` advantages of one group of answers with these rewards and lengths."""
    from workbench import registry

    batch = RolloutBatch.from_rewards(rewards, None, lengths)
    return registry.get("advantage", "opo").fn(batch)[:, 0].tolist()


def check_opo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0), lengths=(2, 6, 4, 4)) -> str:
    """Exercise: OPO advantages of one group (the baseline is the length-weighted mean reward)."""
    if _all_near(answer, opo_advantages(rewards, lengths)):
        return "correct"
    mean = sum(rewards) / len(rewards)
    if _all_near(answer, [r - mean for r in rewards]):
        hint = f"that baseline is the plain mean {mean:g}; OPO weights each reward by its answer's length"
    else:
        hint = (f"baseline b = Σ |y_i| R_i / Σ |y_i| over the group (lengths {list(lengths)}), then A_i = R_i - b "
                "(one number per answer)")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 06: metric glossary


def k3_old(ratios=(0.5, 1.0, 2.0)) -> float:
    """The logged kl/k3_old = mean((r - 1) - log r) over tokens with these ratios (library's clip_metrics)."""
    from workbench.objectives.ppo import clip_metrics

    r = torch.tensor([list(ratios)], dtype=torch.float64)
    return clip_metrics(r, torch.ones_like(r), torch.ones_like(r), 0.2, 0.2)["kl/k3_old"]


def check_k3_old(answer, ratios=(0.5, 1.0, 2.0)) -> str:
    """Exercise: compute kl/k3_old by hand for three tokens."""
    expected = k3_old(ratios)
    if not abs(float(answer) - expected) <= 1e-3:
        raise AssertionError(f"not quite: average (r - 1) - ln r over r in {list(ratios)} (you gave {answer})")
    return "correct"


def check_no_signal_metric(answer: str) -> str:
    """Exercise: the logged metric that says how many groups carry no learning signal (a GLOSSARY key; the
    glossary itself is not imported here, which would pull in the whole trainer)."""
    expected = "frac_zero_std_groups"
    if answer != expected:
        raise AssertionError(f"not quite: {answer!r} measures something else; look for the share of groups whose "
                             "rewards are all equal (their advantages are 0)")
    return "correct"


# ----------------------------------------------------------------------------------------------------
# Notebook 07: comparing recipes


def check_recipes_without_kl(answer, recipes) -> str:
    """Exercise: the recipes (among `recipes`) whose loss and reward carry no KL term."""
    from workbench.recipes import get_recipe

    expected = {k for k in recipes if get_recipe(k).kl_term() is None}
    if set(answer) != expected:
        raise AssertionError("not quite: look for a KL term in each recipe's regularizers (kl-penalty, in the loss) "
                             "and reward_shaping (kl-in-reward): get_recipe(key).kl_term()")
    return "correct"


# ----------------------------------------------------------------------------------------------------
# Notebook 08: preference optimization

PAIRWISE_EXERCISE_KEYS = ("dpo", "ipo", "cdpo-robust", "hinge", "simpo")


def _pair_inputs(chosen, rejected, ref_chosen, ref_rejected):
    as_t = lambda v: torch.tensor([float(v)], dtype=torch.float64)  # noqa: E731
    c = as_t(chosen).requires_grad_(True)
    r = as_t(rejected).requires_grad_(True)
    return c, r, as_t(ref_chosen), as_t(ref_rejected)


def dpo_weight_at(delta: float = 0.0, beta: float = 0.1) -> float:
    """−∂L/∂Δ of the registered `dpo` loss for one pair with log-ratio margin Δ (autograd)."""
    from workbench import registry

    c, r, rc, rr = _pair_inputs(delta, 0.0, 0.0, 0.0)
    loss, _ = registry.get("preference", "dpo").fn(c, r, rc, rr, beta=beta)
    (grad,) = torch.autograd.grad(loss, c)
    return -float(grad[0])


def check_dpo_weight_at_zero(answer, beta: float = 0.1) -> str:
    """Exercise: DPO's per-pair gradient weight −∂L/∂Δ at margin Δ = 0 (policy = reference)."""
    expected = dpo_weight_at(0.0, beta)
    if not abs(float(answer) - expected) <= 1e-9 + 1e-6 * abs(expected):
        raise AssertionError(f"not quite: differentiate −log σ(βΔ) with respect to Δ and set Δ = 0 (β = {beta}; "
                             f"you gave {answer})")
    return "correct"


def reference_free_losses(keys=PAIRWISE_EXERCISE_KEYS) -> set[str]:
    """The registered pairwise losses whose value and gradient do not change when the reference log-probs do."""
    from workbench import registry

    def run(key, ref_chosen, ref_rejected):
        c, r, rc, rr = _pair_inputs(-3.0, -5.0, ref_chosen, ref_rejected)
        extra = {"chosen_len": torch.tensor([3.0], dtype=torch.float64),
                 "rejected_len": torch.tensor([4.0], dtype=torch.float64)} if key == "simpo" else {}
        loss, _ = registry.get("preference", key).fn(c, r, rc, rr, **extra)
        grads = torch.autograd.grad(loss, (c, r))
        return torch.cat([loss.detach().view(1), *grads])

    return {key for key in keys if torch.equal(run(key, -4.0, -4.5), run(key, -1.0, -7.0))}


def check_reference_free(answer) -> str:
    """Exercise: which of dpo, ipo, cdpo-robust, hinge, simpo never reads the reference model?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != reference_free_losses():
        raise AssertionError("not quite: look for the loss whose implicit reward is built from log π alone "
                             f"(choose among {list(PAIRWISE_EXERCISE_KEYS)}, you gave {sorted(given)})")
    return "correct"


def pure_rock_exploitability(strength: float = 0.9) -> float:
    """Exploitability max_y P(y ≻ π) − ½ of the pure policy "always rock" in rock–paper–scissors."""
    from workbench.preference import games

    return games.exploitability(games.rock_paper_scissors(strength), [1.0, 0.0, 0.0])


def check_pure_rock_exploitability(answer, strength: float = 0.9) -> str:
    """Exercise: how much does the best response beat a policy that always plays rock?"""
    expected = pure_rock_exploitability(strength)
    if not abs(float(answer) - expected) <= 1e-6:
        raise AssertionError(f"not quite: paper beats rock with probability ½ + strength/2 (strength {strength}); "
                             f"subtract the game's value ½ (you gave {answer})")
    return "correct"


# ----------------------------------------------------------------------------------------------------
# Notebook 09: multi-turn agents with tools

CALCULATOR_EXERCISE = ("37*48+19=", "1795", ("[37*48]", "[1776+19]", "A:1795"))  # prompt, answer, expert actions


def calculator_token_counts(prompt: str = CALCULATOR_EXERCISE[0], answer: str = CALCULATOR_EXERCISE[1],
                            actions=CALCULATOR_EXERCISE[2]) -> tuple[int, int]:
    """(trained, observation) token counts of a calculator episode with the character tokenizer (one token per
    character), encoded by the rollout's own `encode_expert`: the policy's actions are mask 1, the tool's answers
    mask 0."""
    from workbench.envs.calculator import CalculatorTask
    from workbench.models import char_tokenizer
    from workbench.rollout.turns import encode_expert
    from workbench.tasks.base import Example

    example = Example(prompt=prompt, answer=answer, target=f"A:{answer}")
    _, episode = encode_expert(char_tokenizer(), CalculatorTask().make_env(), example, list(actions))
    trained = int(sum(episode.mask))
    return trained, len(episode.mask) - trained


def check_trained_tokens(answer) -> str:
    """Exercise: how many tokens of the calculator episode does the update train on?"""
    trained, observed = calculator_token_counts()
    given = None if answer is None else int(answer)
    if given == trained:
        return "correct"
    if given == trained + observed:
        hint = "you counted the tool's answers too: observation tokens are mask 0 (the environment wrote them)"
    elif given == trained - 1:
        hint = "the final answer ends with EOS, which the policy sampled: it is trained too"
    elif given is not None and given > trained and given < trained + observed:
        hint = ("a tool call ends at its stop string ']' (kept in the action): no EOS follows it; only the final "
                "answer, which is not a tool call, ends with EOS")
    else:
        hint = "count the characters of the three actions (one token each) and the tokens that end them"
    raise AssertionError(f"not quite ({answer}): {hint}")


# A gridworld group of four episodes (goal at 1,2; shortest path 3 moves, budget 5): the state each step acted
# from, and the outcome reward (paid on the goal step, the last one).
AGENT_GROUP_STATES = (
    ((0, 0), (0, 1), (1, 1)),                   # R D R: reaches the goal in 3 moves
    ((0, 0), (1, 0), (1, 1), (0, 1), (0, 2)),  # D R U R D: reaches it in 5
    ((0, 0), (0, 0), (0, 1), (0, 2), (0, 2)),  # U (bumps) R R U U: budget spent
    ((0, 0), (1, 0), (2, 0), (3, 0), (3, 0)),  # D D D D L: budget spent
)
AGENT_GROUP_REWARDS = (1.0, 1.0, 0.0, 0.0)


def agent_group_batch(states=AGENT_GROUP_STATES, rewards=AGENT_GROUP_REWARDS, obs_tokens: int = 2) -> RolloutBatch:
    """The group above as a multi-turn RolloutBatch: per step one action token (mask 1) and `obs_tokens`
    observation tokens (mask 0, none after the last action), turn ids, turn_rewards (the reward on the last
    step) and turn_info states, as the rollout `turns` lays them out."""
    B = len(states)
    T = max(len(s) * (1 + obs_tokens) - obs_tokens for s in states)
    S = max(len(s) for s in states)
    mask = torch.zeros(B, T, dtype=torch.float64)
    turn = torch.full((B, T), -1, dtype=torch.long)
    turn_rewards = torch.zeros(B, S, dtype=torch.float64)
    for i, row in enumerate(states):
        for s in range(len(row)):
            t = s * (1 + obs_tokens)
            mask[i, t] = 1.0
            turn[i, t:t + (1 + obs_tokens if s < len(row) - 1 else 1)] = s
        turn_rewards[i, len(row) - 1] = rewards[i]
    return RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                        group=torch.zeros(B, dtype=torch.long), rewards=torch.tensor(rewards, dtype=torch.float64),
                        turn=turn, turn_rewards=turn_rewards,
                        turn_info=[[{"state": st, "tool_error": None} for st in row] for row in states])


def gigpo_step_advantage(row: int, step: int, omega: float = 1.0) -> float:
    """GiGPO's advantage (registered `gigpo`, its defaults: gamma 0.95, mean_std_norm) on the action token of
    `step` of episode `row` in the group above."""
    from workbench import registry

    batch = agent_group_batch()
    adv = registry.get("advantage", "gigpo").fn(batch, omega=omega)
    t = int(torch.nonzero((batch.turn[row] == step) & (batch.mask[row] > 0))[0])
    return float(adv[row, t])


def anchor_step_advantage(row: int = 0, step: int = 0) -> float:
    """The step-level term A_S of (row, step): GiGPO's advantage minus its omega = 0 value (the episode term)."""
    return gigpo_step_advantage(row, step, 1.0) - gigpo_step_advantage(row, step, 0.0)


def check_anchor_step_advantage(answer, row: int = 0, step: int = 0, gamma: float = 0.95) -> str:
    """Exercise: the step-level advantage A_S of episode `row`'s step `step` (default: the start state)."""
    expected = anchor_step_advantage(row, step)
    state = AGENT_GROUP_STATES[row][step]
    members = [(i, s) for i, r in enumerate(AGENT_GROUP_STATES) for s, st in enumerate(r) if st == state]
    returns = [gamma ** (len(AGENT_GROUP_STATES[i]) - 1 - s) * AGENT_GROUP_REWARDS[i] for i, s in members]
    if _near(answer, expected):
        return "correct"
    g = torch.tensor(returns, dtype=torch.float64)
    own = returns[members.index((row, step))]
    population = (own - g.mean()) / g.std(unbiased=False)
    if _near(answer, float(population)):
        hint = f"use the Bessel (n - 1) std, as GiGPO does: {g.std():.4f}, not {g.std(unbiased=False):.4f}"
    elif _near(answer, float(own - g.mean())):
        hint = "that is G minus the anchor group's mean; the default mode also divides by the group's std"
    else:
        hint = (f"state {state} is acted from by {len(members)} steps {members} (row, step); the step return is "
                f"G = gamma^(n_i - 1 - s) R_i with gamma = {gamma} (the reward comes on the last step): "
                "z-score G inside that anchor group")
    raise AssertionError(f"not quite ({answer}): {hint}")


def check_unshared_step_advantage(answer, row: int = 3, step: int = 2) -> str:
    """Exercise: GiGPO's advantage (omega = 1) on a step whose state no other step of the group acts from."""
    expected = gigpo_step_advantage(row, step)
    if _near(answer, expected):
        return "correct"
    if _near(answer, 0.0, 1e-9):
        hint = ("the step-level term is 0 for an anchor group of one step, but the episode term A_E is still "
                "there: the z-score of the episode's return in its group")
    else:
        hint = ("no other step of the group acts from this state, so A_S = 0 and the advantage is the episode "
                "term alone: (R_i - mean R) / std R over the group's returns (Bessel std)")
    raise AssertionError(f"not quite ({answer}): {hint}")


def check_two_step_anchor(answer, row: int = 0, step: int = 2) -> str:
    """Exercise: A_S of a step whose anchor group has exactly two members with different returns."""
    expected = anchor_step_advantage(row, step)
    if _near(answer, expected):
        return "correct"
    if _near(answer, -expected):
        hint = "right size, wrong sign: which of the two steps has the larger discounted return?"
    else:
        hint = ("two returns a > b have mean (a + b) / 2 and Bessel std |a - b| / sqrt(2): the z-score does not "
                "depend on the gap")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 11: entropy


ENTROPY_EXERCISE_LOGITS = (2.0, 1.0, 0.0, 0.0)


def entropy_at_temperature(logits=ENTROPY_EXERCISE_LOGITS, temperature: float = 0.5) -> float:
    """H(softmax(z / T)) in nats (`workbench.viz.entropy.token_entropy`)."""
    from workbench.viz.entropy_controls import token_entropy

    return float(token_entropy(torch.tensor(logits, dtype=torch.float64), temperature))


def check_entropy_at_temperature(answer, logits=ENTROPY_EXERCISE_LOGITS, temperature: float = 0.5) -> str:
    """Exercise: the entropy of a distribution given by its logits, sampled at temperature T."""
    import math

    expected, given = entropy_at_temperature(logits, temperature), _float(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    if given is None:
        hint = "answer one number, the entropy in nats"
    elif abs(given - entropy_at_temperature(logits, 1.0)) <= 1e-3:
        hint = f"that is the entropy at T = 1: sampling at T = {temperature:g} divides the logits by T first"
    elif abs(given - expected / math.log(2)) <= 1e-3:
        hint = "that is in bits (log base 2); the trainer's entropy is in nats (natural log)"
    elif abs(given - entropy_at_temperature(logits, 1 / temperature)) <= 1e-3:
        hint = f"that multiplies the logits by T; sampling at T = {temperature:g} divides them by T (sharper for T < 1)"
    else:
        hint = "p = softmax(z / T), then H = -sum_a p_a log p_a (natural log)"
    raise AssertionError(f"not quite ({answer}): {hint}")


COV_EXERCISE_ADVANTAGES = (1.5, 1.0, -0.5, -0.5, -1.0)
COV_EXERCISE_LOGPS = (-0.1, -2.0, -0.2, -1.5, -0.7)


def covariance_term(advantages=COV_EXERCISE_ADVANTAGES, logps=COV_EXERCISE_LOGPS, index: int = 0) -> float:
    """cov_t of token `index` when the tokens form one batch (`objectives.entropy_cov.token_covariance`)."""
    from workbench.objectives.entropy_cov import token_covariance

    adv = torch.tensor([advantages], dtype=torch.float64)
    logp = torch.tensor([logps], dtype=torch.float64)
    return float(token_covariance(logp, adv, torch.ones_like(logp))[0, index])


def check_covariance_term(answer, advantages=COV_EXERCISE_ADVANTAGES, logps=COV_EXERCISE_LOGPS, index: int = 0) -> str:
    """Exercise: the covariance term (A_t - mean A)(logp_t - mean logp) of one token."""
    expected, given = covariance_term(advantages, logps, index), _float(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    mean_a, mean_lp = sum(advantages) / len(advantages), sum(logps) / len(logps)
    a, lp = advantages[index], logps[index]
    if given is None:
        hint = "answer one number"
    elif abs(given - (a - mean_a) * lp) <= 1e-3:
        hint = f"centre the log-prob too: subtract the mean log-prob {mean_lp:g}"
    elif abs(given - a * (lp - mean_lp)) <= 1e-3:
        hint = f"centre the advantage too: subtract the mean advantage {mean_a:g}"
    elif abs(given - a * lp) <= 1e-3:
        hint = f"both factors are centred: (A_t - {mean_a:g}) (log pi_t - ({mean_lp:g}))"
    elif abs(given + expected) <= 1e-3:
        hint = "mind the signs: a token above the mean in both factors has a positive product"
    else:
        hint = "cov_t = (A_t - mean A)(log pi_t - mean log pi), both means over the batch's tokens"
    raise AssertionError(f"not quite ({answer}): {hint}")


# Six tokens of one batch: advantages, log-probs (mean A = 0, mean log pi = -1, so cov = A (log pi + 1) =
# (2, 0.5, 1, 4, 3, 0)) and ratios r = pi / pi_old (token 3: A < 0 and r < 1 - eps, already clipped by PPO).
CLIP_COV_EXERCISE = {"advantages": (2.0, 1.0, 1.0, -2.0, -2.0, 0.0), "logps": (0.0, -0.5, 0.0, -3.0, -2.5, 0.0),
                     "ratios": (1.0, 1.0, 1.0, 0.7, 1.1, 1.0)}


def clip_cov_candidates(lb: float = 1.0, ub: float = 5.0, eps: float = 0.2, tokens=CLIP_COV_EXERCISE) -> set[int]:
    """The token indices `clip_cov_selection` counts as candidates (lb < cov < ub, not already clipped by PPO)."""
    from workbench.objectives.entropy_cov import clip_cov_selection

    logp = torch.tensor([tokens["logps"]], dtype=torch.float64)
    old_logp = logp - torch.tensor([tokens["ratios"]], dtype=torch.float64).log()
    adv = torch.tensor([tokens["advantages"]], dtype=torch.float64)
    _, candidates = clip_cov_selection(logp, old_logp, adv, torch.ones_like(logp), clip_cov_lb=lb, clip_cov_ub=ub,
                                       eps_low=eps, eps_high=eps)
    return {int(i) for i in torch.nonzero(candidates[0]).flatten()}


def check_clip_cov_candidates(answer, lb: float = 1.0, ub: float = 5.0, eps: float = 0.2) -> str:
    """Exercise: which tokens Clip-Cov may detach, given its band (lb, ub) and PPO's clip."""
    expected = clip_cov_candidates(lb, ub, eps)
    try:
        given = {int(answer)} if isinstance(answer, (int, float)) else {int(t) for t in answer}
    except (TypeError, ValueError):
        given = None
    if given == expected:
        return "correct"
    tokens = CLIP_COV_EXERCISE
    n = len(tokens["advantages"])
    mean_a, mean_lp = sum(tokens["advantages"]) / n, sum(tokens["logps"]) / n
    cov = [(a - mean_a) * (lp - mean_lp) for a, lp in zip(tokens["advantages"], tokens["logps"])]
    clipped = {t for t, (a, r) in enumerate(zip(tokens["advantages"], tokens["ratios"]))
               if (a > 0 and r > 1 + eps) or (a < 0 and r < 1 - eps)}
    if given is None:
        hint = "answer a set of token indices, e.g. {0, 2}"
    elif given & clipped:
        hint = (f"token(s) {sorted(given & clipped)} already have PPO's clipped branch active (A < 0 and r < 1 - eps): "
                "Clip-Cov excludes them")
    elif any(cov[t] in (lb, ub) for t in given):
        hint = f"the band is strict: lb < cov_t < ub, so cov_t = {lb:g} or {ub:g} is outside it"
    elif any(not lb < cov[t] < ub for t in given if 0 <= t < n):
        hint = (f"compute cov_t = (A_t - {mean_a:g})(log pi_t - ({mean_lp:g})) for each token: some you chose are "
                f"outside ({lb:g}, {ub:g})")
    else:
        hint = f"every token with {lb:g} < cov_t < {ub:g} that PPO has not clipped is a candidate: one is missing"
    raise AssertionError(f"not quite ({answer}): {hint}")


# exercise 4: the token entropies of a batch (nats) and the target: three of five tokens above it, their mean below
ALPHA_EXERCISE = {"entropies": (0.9, 0.8, 0.7, 0.1, 0.2), "target_entropy": 0.6}


def alpha_direction(entropy=ALPHA_EXERCISE["entropies"],
                    target_entropy: float = ALPHA_EXERCISE["target_entropy"]) -> str:
    """"rise" or "fall": where one step of the `sac-temperature` controller (SGD on log alpha, its default
    token-mean) moves alpha, given the batch's token entropies (one number: a batch of one token)."""
    from workbench.controllers.sac_temperature import Temperature, descend, log_alpha_grad

    state = Temperature(log_alpha=0.0, target_entropy=target_entropy, lr=0.1, optimizer="sgd")
    entropies = torch.as_tensor(entropy, dtype=torch.float64).reshape(1, -1)  # [1, T]: one response
    g = log_alpha_grad(state, entropies, torch.ones_like(entropies))
    before = state.log_alpha
    after = descend(state, g).log_alpha
    return "fall" if after < before else "rise" if after > before else "stay"


ALPHA_WORDS = {"rise": "rise", "rises": "rise", "up": "rise", "increase": "rise", "increases": "rise",
               "fall": "fall", "falls": "fall", "down": "fall", "decrease": "fall", "decreases": "fall"}


def check_alpha_direction(answer, entropy=ALPHA_EXERCISE["entropies"],
                          target_entropy: float = ALPHA_EXERCISE["target_entropy"]) -> str:
    """Exercise: does SAC's temperature alpha rise or fall after a batch with these token entropies?"""
    expected = alpha_direction(entropy, target_entropy)
    given = ALPHA_WORDS.get(str(answer).strip().lower()) if isinstance(answer, str) else None
    if given == expected:
        return "correct"
    values = torch.as_tensor(entropy, dtype=torch.float64).flatten().tolist()
    mean = sum(values) / len(values)
    if given is None:
        hint = 'answer "rise" or "fall"'
    else:
        gap = mean - target_entropy
        hint = (f"J(alpha) = alpha (H - target) with H the token-mean of the batch's entropies, {mean:.3g}, so "
                f"dJ/dlog(alpha) = alpha ({mean:.3g} - {target_entropy:g}) = alpha ({gap:+.3g}); the controller steps "
                "against that gradient. "
                + ("Too much entropy should weaken the bonus, not strengthen it" if gap > 0 else
                   "Too little entropy should strengthen the bonus, not weaken it"))
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 10: beyond the clip


GBPO_EXERCISE_REWARDS = (1.0, 0.0, 0.0, 0.0, 0.0)  # one correct answer in a group of five


def gbpo_target_ratios(rewards=GBPO_EXERCISE_REWARDS, *, median: bool = True,
                       temperature: float = 1.0) -> tuple[float, float]:
    """(target ratio rho* of a correct answer, of a wrong one) in one group of 0/1 rewards: the registered `gbpo`
    advantage's target advantage through the `gbpo` objective's `target_ratio` (eps 0.2 / 0.2). median=False centres
    on the group mean instead (rho* from the GRPO z-score: the plausible slip the check explains)."""
    from workbench import registry
    from workbench.objectives.gbpo import target_ratio

    batch = RolloutBatch.from_rewards(rewards)
    advantages = registry.get("advantage", "gbpo").fn(batch, temperature=temperature)
    hp = registry.get("objective", "gbpo").defaults
    target = batch.target_adv[:, 0] if median else advantages[:, 0]
    rho = target_ratio(target, eps_low=hp["eps_low"], eps_high=hp["eps_high"])
    r = torch.as_tensor(rewards, dtype=torch.float64)
    return float(rho[r == 1][0]), float(rho[r == 0][0])


def check_gbpo_target_ratios(answer, rewards=GBPO_EXERCISE_REWARDS) -> str:
    """Exercise: GBPO's target ratio for the correct and for a wrong answer of a 1-in-5 group (T = 1, eps 0.2)."""
    if _all_near(answer, gbpo_target_ratios(rewards)):
        return "correct"
    if _all_near(answer, gbpo_target_ratios(rewards, median=False)):
        hint = ("GBPO's target advantage is centred on the group MEDIAN, not the mean: with one correct answer in "
                "five the median reward is 0, so what is a wrong answer's target advantage, and sigma of it?")
    elif _all_near(answer, gbpo_target_ratios(rewards, temperature=1e-4)):
        hint = ("that is the sharp split of T -> 0 (the reference's TTRL scripts); at T = 1 the target is smooth: "
                "rho* = 1 - eps_low + (eps_low + eps_high) sigma(A_hat)")
    else:
        hint = ("A_hat = (R - median_g R) / (std_g R + 1e-6) with the Bessel std, then rho* = 0.8 + 0.4 sigma(A_hat); "
                "answer a pair (correct answer, wrong answer)")
    raise AssertionError(f"not quite ({answer}): {hint}")


# label -> (ratio r, advantage A): A > 0 is a token of a correct response, A < 0 of an incorrect one
DISPO_EXERCISE_TOKENS = {"a": (1.25, 1.0), "b": (0.75, 1.0), "c": (1.3, -1.0), "d": (0.85, -1.0), "e": (1.35, 1.0)}


def dispo_masked_tokens(tokens=DISPO_EXERCISE_TOKENS, **bounds) -> set[str]:
    """The labels of `tokens` DISPO gives no gradient (outside their class's band), at the registered defaults
    (0.2 / 0.28 for both classes) unless `bounds` says otherwise: the objective's own `dispo_weight` mask."""
    from workbench import registry
    from workbench.objectives.dispo import BOUNDS, dispo_weight

    hp = {**{k: registry.get("objective", "dispo").defaults[k] for k in BOUNDS}, **bounds}
    r = torch.tensor([[v[0] for v in tokens.values()]], dtype=torch.float64)
    a = torch.tensor([[v[1] for v in tokens.values()]], dtype=torch.float64)
    _, inside = dispo_weight(r, a, **hp)
    return {label for label, keep in zip(tokens, inside[0].tolist()) if not keep}


def check_dispo_masked_tokens(answer, tokens=DISPO_EXERCISE_TOKENS) -> str:
    """Exercise: which tokens does DISPO (defaults) mask?"""
    expected = dispo_masked_tokens(tokens)
    given = {answer} if isinstance(answer, str) else set(answer) if answer is not None else None
    if given == expected:
        return "correct"
    ppo = {k for k, (r, a) in tokens.items() if (a > 0 and r > 1.28) or (a < 0 and r < 0.8)}
    if given == ppo:
        hint = ("that is PPO's one-sided rule (past the band in the advantage's direction only); DISPO masks every "
                "token outside [1 - eps_low, 1 + eps_high], on both sides")
    elif given is not None and given - expected:
        hint = f"token(s) {sorted(given - expected)} are inside their class's band [0.8, 1.28]: they keep r A"
    else:
        hint = ("a token is masked when r < 1 - eps_low or r > 1 + eps_high of its class (0.2 / 0.28 for both "
                "classes here), whatever the sign of A; answer a set of labels")
    raise AssertionError(f"not quite ({answer}): {hint}")


BAPO_EXERCISE_TOKENS = ((1.1, 1.0), (1.5, 1.0), (0.72, -1.0), (1.0, -1.0), (0.5, -1.0))  # (ratio r, advantage A)


def bapo_exercise(tokens=BAPO_EXERCISE_TOKENS, *, reference_bug: bool = False) -> tuple[float, float]:
    """(positive share pos / (pos + neg) at BAPO's start bounds, c_low after BAPO's search) for one token each,
    from the objective's own `contributions` and `adapt_bounds` at the registered defaults."""
    from workbench import registry
    from workbench.objectives.bapo import adapt_bounds, contributions

    hp = {k: v for k, v in registry.get("objective", "bapo").defaults.items()
          if k in ("c_low", "c_low_max", "c_high", "c_high_max", "step_low", "step_high", "rho0", "eps", "dual_clip_c")}
    r = torch.tensor([[t[0] for t in tokens]], dtype=torch.float64)
    a = torch.tensor([[t[1] for t in tokens]], dtype=torch.float64)
    mask = torch.ones_like(r)
    pos, neg = contributions(r, a, mask, hp["c_low"], hp["c_high"], dual_clip_c=hp["dual_clip_c"],
                             reference_bug=reference_bug)
    bounds = adapt_bounds(r, a, mask, **hp, reference_bug=reference_bug)
    return float(pos / (pos + neg)), bounds.c_low


def check_bapo_exercise(answer, tokens=BAPO_EXERCISE_TOKENS) -> str:
    """Exercise: BAPO's positive share of five tokens at its start bounds, and the c_low its search settles on."""
    share, c_low = bapo_exercise(tokens)
    if _all_near(answer, (share, c_low)):
        return "correct"
    given = _numbers(answer)
    everything = sum(r * a for r, a in tokens if a > 0) / sum(r * abs(a) for r, a in tokens)
    if given is None or len(given) != 2:
        hint = "answer a pair (positive share at the start bounds, c_low after the search)"
    elif _near(given[0], everything):
        hint = ("you counted every token; BAPO counts only tokens that carry gradient: a positive token above c_high "
                "= 1.2 is clipped, a negative one below c_low = 0.6 too")
    elif _near(given[0], bapo_exercise(tokens, reference_bug=True)[0]):
        hint = ("that is the reference code's effective-ratio counting (min(r, c_high) / max(r, c_low) over every "
                "token, `reference_bug=True`); the workbench counts the tokens that carry gradient")
    elif _near(given[0], share):
        hint = ("the share is right; the search raises c_low by 0.05 from 0.6 (up to 0.8) while pos / neg < 1: "
                "which step drops the negative token at r = 0.72 from the count?")
    else:
        hint = ("pos = sum of r A over A > 0 tokens with r <= c_high, neg = sum of r |A| over A < 0 tokens with "
                "c_low <= r <= 3; share = pos / (pos + neg)")
    raise AssertionError(f"not quite ({answer}): {hint}")


SHAPING_EXERCISE_PROBS = (0.1, 0.9)


def shaping_weights(probs=SHAPING_EXERCISE_PROBS, gamma: float | None = None) -> tuple[float, ...]:
    """Gradient weight d(-l)/d(log p) of an off-policy token with A = 1 at each probability p, by autograd through the
    registered `policy-shaping` objective (gamma: its default 0.1 unless given)."""
    from workbench import ops, registry

    entry = registry.get("objective", "policy-shaping")
    logp = torch.log(torch.tensor(probs, dtype=torch.float64))[:, None].requires_grad_(True)
    ones = torch.ones_like(logp)
    loss, _ = entry.fn(logp, logp.detach(), ones, ones, offpolicy_mask=ones, agg="token-mean",
                       denom=ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0),
                       gamma=entry.defaults["gamma"] if gamma is None else gamma)
    (grad,) = torch.autograd.grad(-loss, logp)
    return tuple(float(g) for g in grad[:, 0])


def check_shaping_weights(answer, probs=SHAPING_EXERCISE_PROBS) -> str:
    """Exercise: policy-shaping's gradient weight on an off-policy token (A = 1, gamma = 0.1) at p = 0.1 and 0.9."""
    expected = shaping_weights(probs)
    if _all_near(answer, expected):
        return "correct"
    gamma = 0.1
    if _all_near(answer, [p / (p + gamma) for p in probs]):
        hint = "that is the shaped value f(p) = p / (p + gamma); the weight is its derivative in log p"
    elif _all_near(answer, [1.0] * len(probs)):
        hint = "that is plain REINFORCE on log p (weight 1 for every token); shaping multiplies by df/dlog p"
    elif _all_near(answer, list(probs)):
        hint = "that is the weight of a loss on p itself (dp/dlog p = p); the shaped loss is on f(p) = p / (p + gamma)"
    else:
        hint = ("f(p) = p / (p + gamma), and d f / d log p = p f'(p) = gamma p / (p + gamma)^2; answer one number per "
                "probability")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 12: reward design


COSINE_EXERCISE = {"length": 4, "max_len": 12, "correct": True}  # a right answer of 4 tokens, budget 12


def cosine_length_value(length: int = COSINE_EXERCISE["length"], max_len: int = COSINE_EXERCISE["max_len"],
                        correct: bool = True, **hp) -> float:
    """The registered `cosine-length` reward of one answer of `length` tokens (defaults unless `hp` says)."""
    from workbench import registry

    fn = registry.get("reward", "cosine-length").fn
    return float(fn(["x" * length], [[0] * length], max_len=max_len, scores=[1.0 if correct else 0.0], **hp)[0])


def check_cosine_length_value(answer, length: int = COSINE_EXERCISE["length"],
                              max_len: int = COSINE_EXERCISE["max_len"]) -> str:
    """Exercise: the cosine length-scaled reward of a right answer of 4 tokens with L = 12, by hand."""
    import math

    expected, given = cosine_length_value(length, max_len), _float(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    u = length / max_len
    if given is None:
        hint = "answer one number, the reward"
    elif abs(given - cosine_length_value(length, max_len, correct=False)) <= 1e-3:
        hint = "that is a wrong answer's reward (from -1 towards -0.5); a right one runs from 1.0 (short) to 0.5"
    elif abs(given - (0.5 + 0.5 * math.cos(math.pi * u))) <= 1e-3:
        hint = "the cosine enters as (1 + cos(pi u)) / 2, which runs from 1 to 0: r = lo + (hi - lo)(1 + cos(pi u))/2"
    elif abs(given - (1.0 - 0.25 * (1 + math.cos(math.pi * u)))) <= 1e-3:
        hint = "the bounds are the other way round: at |y| = 0 a right answer gets the maximum 1.0, at |y| = L 0.5"
    elif abs(given - (0.5 + 0.25 * (1 + math.cos(u)))) <= 1e-3:
        hint = f"the angle is pi u in radians: cos(pi x {u:.4g}), not cos({u:.4g})"
    else:
        hint = (f"u = |y| / L = {u:g}; for a right answer lo = 0.5, hi = 1.0 and r = lo + (hi - lo)(1 + cos(pi u)) / 2")
    raise AssertionError(f"not quite ({answer}): {hint}")


# one group of four: the verifier's 0/1 and a reward model's score on a 0..10 scale (weight 0.5)
AGGREGATION_EXERCISE = {"correct": (1.0, 0.0, 0.0, 1.0), "scores": (2.0, 8.0, 6.0, 3.0), "weight": 0.5}


def dominant_aggregations(correct=AGGREGATION_EXERCISE["correct"], scores=AGGREGATION_EXERCISE["scores"],
                          weight: float = AGGREGATION_EXERCISE["weight"]) -> set[str]:
    """The reward_aggregation modes under which every right answer gets a larger GRPO advantage than every wrong
    one (`rewards.aggregate.combine`, then the `grpo` advantage), the verifier with weight 1."""
    from workbench.rewards.aggregate import AGGREGATIONS, combine

    values = torch.tensor([list(correct), list(scores)], dtype=torch.float64).T        # [B, 2]
    weights = torch.tensor([1.0, weight], dtype=torch.float64)
    group = torch.zeros(len(correct), dtype=torch.long)
    right = torch.tensor(correct) >= 1
    out = set()
    for mode in AGGREGATIONS:
        rewards, _ = combine(values, weights, group, mode)
        advantages = grpo(RolloutBatch.from_rewards(rewards))[:, 0]
        if float(advantages[right].min()) > float(advantages[~right].max()):
            out.add(mode)
    return out


def check_dominant_aggregation(answer) -> str:
    """Exercise: which aggregation keeps every right answer above every wrong one?"""
    from workbench.rewards.aggregate import AGGREGATIONS

    expected = dominant_aggregations()
    if isinstance(answer, str):
        given = {answer.strip()}
    else:
        try:
            given = {str(a).strip() for a in answer}
        except TypeError:
            given = None
    if given == expected:
        return "correct"
    if given is None or not given <= set(AGGREGATIONS):
        hint = f"answer the name of a mode, {' or '.join(repr(m) for m in AGGREGATIONS)} (or a set of them)"
    elif "sum_then_normalize" in given:
        hint = ("under sum_then_normalize R = correct + 0.5 x score: the wrong answer with score 8 gets 4.0, above "
                "the right answers' 2.0 and 2.5; the score's 0..10 scale drowns the 0/1 verdict")
    else:
        hint = ("z-score each reward within the group first, then sum with weights 1 and 0.5: is every right answer "
                "still on top?")
    raise AssertionError(f"not quite ({answer}): {hint}")


SOFT_OVERLONG_EXERCISE = {"max_len": 10, "buffer": 3}


def soft_overlong_first_length(max_len: int = 10, buffer: int = 3) -> int:
    """The shortest response length (tokens) the registered `soft-overlong` reward penalizes (< 0)."""
    from workbench import registry

    fn = registry.get("reward", "soft-overlong").fn
    lengths = range(1, max_len + 1)
    values = fn(["x" * n for n in lengths], [[0] * n for n in lengths], buffer=buffer, max_completion_len=max_len)
    return next(n for n, v in zip(lengths, values) if v < 0)


def check_soft_overlong_first_length(answer, max_len: int = 10, buffer: int = 3) -> str:
    """Exercise: the first length at which DAPO's soft overlong punishment bites (L = 10, C = 3)."""
    expected, given = soft_overlong_first_length(max_len, buffer), _float(answer)
    if given is not None and given == expected:
        return "correct"
    if given is None:
        hint = "answer one length in tokens"
    elif given == max_len - buffer:
        hint = (f"at |y| = L - C = {max_len - buffer} the penalty is ((L - C) - |y|) / C = 0: the buffer starts "
                "just after it")
    elif given == buffer:
        hint = "C is the width of the buffer at the END of the budget, not a length from the start"
    elif given > max_len:
        hint = f"the penalty reaches -1 at |y| = L = {max_len}; it starts inside the buffer"
    else:
        hint = f"the penalty is ((L - C) - |y|) / C for L - C < |y| <= L (here L = {max_len}, C = {buffer})"
    raise AssertionError(f"not quite ({answer}): {hint}")


SSL_EXERCISE = {"answer": "48", "gold": "40"}  # a near miss: 20% off, on the edge of the 2 sigma ring


def ssl_tier_value(answer: str = SSL_EXERCISE["answer"], gold: str = SSL_EXERCISE["gold"], **hp) -> float:
    """The registered `ssl` reward (distance tiers, defaults: sigma 0.1, K = 4) of one unsolved answer."""
    from workbench import registry

    return float(registry.get("reward", "ssl").fn([answer], answer=[gold], scores=[0.0], **hp)[0])


def check_ssl_tier(answer, pred: str = SSL_EXERCISE["answer"], gold: str = SSL_EXERCISE["gold"]) -> str:
    """Exercise: SSL's tiered reward of the answer 48 to a question whose gold is 40."""
    from workbench.rewards.ssl import EDGES, VALUES, answer_distance

    expected, given = ssl_tier_value(pred, gold), _float(answer)
    if given is not None and abs(given - expected) <= 1e-9:
        return "correct"
    sigma, d = 0.1, answer_distance(pred, gold)
    rings = list(zip(EDGES, VALUES))[1:]                       # (edge in sigma, reward) outside the exact tier
    edge = next((k for k, (e, _) in enumerate(rings) if d == e * sigma), None)  # d exactly on a ring's edge
    if given is None:
        hint = "answer one number, the tier's reward"
    elif abs(given - 1.0) <= 1e-9:
        hint = f"1 is the exact tier (d = 0, a solved answer); {pred} is not the gold"
    elif edge is not None and abs(given - (rings[edge + 1][1] if edge + 1 < len(rings) else 0.0)) <= 1e-9:
        hint = (f"the edges are inclusive, d <= e_k sigma: d = {d:g} is exactly on the {rings[edge][0]:g} sigma "
                "edge, so in that ring")
    elif any(abs(given - v) <= 1e-9 and v > expected for _, v in rings):
        e, v = next((e, v) for e, v in rings if abs(given - v) <= 1e-9)
        hint = (f"d = |{pred} - {gold}| / max(|{gold}|, 1) = {d:g} = {d / sigma:g} sigma: outside the {e:g} sigma "
                f"ring (reward {v:g})")
    elif abs(given) <= 1e-9:
        hint = f"the distance is relative, |pred - gold| / max(|gold|, 1) = {d:g}: not beyond every ring"
    else:
        hint = ("d = |pred - gold| / max(|gold|, 1); the tiers pay 1, 0.6, 0.3, 0.1 for d <= 0, 0.5, 1, 2 sigma "
                "(sigma = 0.1), 0 beyond")
    raise AssertionError(f"not quite ({answer}): {hint}")


# ----------------------------------------------------------------------------------------------------
# Notebook 13: credit assignment against the exact answer


def _two_level_exact():
    from workbench import credit_exact as ce

    mdp, policy = ce.two_level_tree()
    return ce.exact_values(mdp, policy)


def check_credit_first_advantage(answer) -> str:
    """Exercise: the exact advantage A(start, a) on the two-level tree (credit_exact.two_level_tree)."""
    expected = _two_level_exact().advantage((), 0)
    if not _near(_float(answer), expected):
        raise AssertionError(f"not quite: A(start, a) = Q(start, a) - V(start), and Q(start, a) = V(a); got {answer}")
    return f"correct: A(start, a) = {expected:.3f} (playing a gives up the sure reward after b)"


def check_credit_rloo_second(answer) -> str:
    """Exercise: E[RLOO's advantage | h = (a,), action a] = Q((a,), a) - V(start) on the two-level tree."""
    exact = _two_level_exact()
    expected = exact.Q[(0,)][0] - exact.V[()]
    if not _near(_float(answer), expected):
        raise AssertionError("not quite: RLOO's A_hat is R_i minus the mean of the others, and the others' mean is "
                             f"V(start) on average, whatever episode i did; got {answer}")
    return (f"correct: {expected:.3f}, where the exact advantage is {exact.advantage((0,), 0):.3f}: the broadcast "
            "baseline is V(start), not V(a)")


def check_credit_td_second(answer) -> str:
    """Exercise: the one-step TD error of b after a with the exact critic, r + V(next) - V(a) = A((a,), b)."""
    expected = _two_level_exact().advantage((0,), 1)
    if not _near(_float(answer), expected):
        raise AssertionError(f"not quite: r = 0 (leaf ab), V after the end = 0, V(a) = 0.5; got {answer}")
    return f"correct: {expected:.3f}, exactly the advantage A((a,), b): the exact critic leaves no bias, no variance"
