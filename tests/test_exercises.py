"""The notebooks' exercise checks accept the right answer and reject a wrong one, and the answers follow the
library."""
from __future__ import annotations

import pytest

from workbench import exercises
from workbench.paths import ROOT


def test_aggregation_exercises():
    assert exercises.check_token_weight(1 / 210) == "correct"  # the 70-token answer of (16, 70, 400)
    assert exercises.check_token_weight(0.00476) == "correct"
    assert exercises.check_token_weight(1 / 486, mode="token-mean") == "correct"
    for wrong in (1 / 486, 1 / 140, "1/210"):  # token-mean's weight, B = 2, not a number
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_token_weight(wrong)
    # |A| w: 0.5 / (2 x 30) against 1.5 / (2 x 120) under seq-mean-token-mean, 0.5 against 1.5 under token-mean
    assert exercises.check_length_bias("short") == "correct"
    assert exercises.check_length_bias("long", mode="token-mean") == "correct"
    for wrong, mode in (("long", "seq-mean-token-mean"), ("same", "token-mean")):  # "same": equal advantages
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_length_bias(wrong, mode=mode)


def test_aggregation_exercise_answers_follow_the_library():
    assert exercises.token_weight() == pytest.approx(1 / 210)
    assert exercises.token_weight((10, 1000), row=0) == pytest.approx(1 / 20)
    # with equal advantages (section 3 of the notebook) the length alone decides
    assert exercises.length_bias_answer("seq-mean-token-mean", (20, 200), (-1.0, -1.0)) == "short"
    assert exercises.length_bias_answer("token-mean", (20, 200), (-1.0, -1.0)) == "same"
    assert exercises.length_bias_answer("seq-mean-token-mean", (30, 120), (-0.5, -2.0)) == "same"  # 4x A, 4x length
    assert exercises.length_bias_answer() == "short" and exercises.length_bias_answer("token-mean") == "long"


def test_kl_exercises():
    assert exercises.check_k1_sign("negative") == "correct"
    assert exercises.check_k1_sign("positive", p=0.5, p_ref=0.2) == "correct"
    with pytest.raises(AssertionError):
        exercises.check_k1_sign("positive")
    assert exercises.check_nonnegative_estimators(["k3", "abs", "k2"]) == "correct"
    for wrong in (["k3"], ["k1", "k2", "k3", "abs"]):
        with pytest.raises(AssertionError):
            exercises.check_nonnegative_estimators(wrong)
    assert exercises.check_reverse_kl_gradient(["k1 + k2", "k2 - k1"]) == "correct"
    assert exercises.check_reverse_kl_gradient(("k2-k1", "k2 + k1")) == "correct"  # spelled another way
    for wrong in ("k1 + k2", ["k1 + k2"], ["k1 + k2", "k2 - k1", "k3 - k1"], "k2", ["k4"], 3):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_reverse_kl_gradient(wrong)
    # the single estimators: only k2's expected gradient is the reverse KL's (k1: none, k3: the forward KL's)
    assert exercises.reverse_kl_gradient_estimators(("k1", "k2", "k3", "abs")) == {"k2"}
    assert exercises.reverse_kl_gradient_estimators(("2 * k2", "k2 + abs - abs", "-k1 + k2")) == {"k2 + abs - abs",
                                                                                                   "-k1 + k2"}
    assert exercises.kl_combination("k2 - k1") == {"k2": 1.0, "k1": -1.0}
    for bad in ("k3+", "k1 k2", "", "k2 * 2"):
        with pytest.raises(ValueError):
            exercises.kl_combination(bad)


EXERCISES = [
    (exercises.check_grpo_sum_of_squares, (7.0, 7.0), (8.0, 8.0)),
    (exercises.check_local_microbatch_weight, 1 / 120, 1 / 180),
    (exercises.check_negative_advantage_weights, (-5.0, 0.0), (0.0, 0.0)),
    (exercises.check_opo_by_hand, [0.875, -0.125, -0.125, -0.125], [0.75, -0.25, -0.25, -0.25]),
    (exercises.check_logged_clip_fraction, 0.04, 0.06),
    (exercises.check_nonzero_weight_objectives, {"cispo", "sapo"}, {"cispo", "sapo", "ppo-clip"}),
    (exercises.check_rloo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], [0.75, -0.25, -0.25, -0.25]),
    (exercises.check_largest_advantage_rate, 1 / 8, 0.5),
    (exercises.check_k3_old, 1 / 6, 0.0),
    (exercises.check_no_signal_metric, "frac_zero_std_groups", "reward/std"),
]


@pytest.mark.parametrize("check, right, wrong", EXERCISES, ids=[e[0].__name__ for e in EXERCISES])
def test_exercise_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    with pytest.raises(AssertionError, match="not quite"):
        check(wrong)


def test_exercise_answers_follow_the_library():
    assert exercises.nonzero_weight_objectives() == {"cispo", "sapo"}
    assert exercises.k3_old((0.5, 1.0, 2.0)) == pytest.approx(1 / 6)
    assert exercises.largest_advantage_success_rate(4) == pytest.approx(1 / 4)
    with pytest.raises(AssertionError, match="not quite"):
        exercises.check_no_signal_metric("no/such/metric")


def test_exercise_checks_accept_right_and_reject_wrong_answers():
    assert exercises.check_dpo_weight_at_zero(0.05) == "correct"
    assert exercises.check_dpo_weight_at_zero(0.25, beta=0.5) == "correct"
    for wrong in (0.1, 0.5, 0.025):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_dpo_weight_at_zero(wrong)
    assert exercises.check_reference_free(["simpo"]) == "correct" and exercises.check_reference_free("simpo")
    for wrong in (["dpo"], ["simpo", "hinge"], []):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_reference_free(wrong)
    assert exercises.check_pure_rock_exploitability(0.45) == "correct"
    assert exercises.check_pure_rock_exploitability(0.5, strength=1.0) == "correct"
    for wrong in (0.95, 0.0, 0.5):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_pure_rock_exploitability(wrong)


@pytest.mark.parametrize("check, wrong, explanation", [
    # 01: the std division makes every group's total push G - 1, whatever its success rate
    (exercises.check_grpo_sum_of_squares, (8.0, 8.0), "population std"),
    (exercises.check_grpo_sum_of_squares, (0.875, 2.0), "without the std division"),
    (exercises.check_grpo_sum_of_squares, 7.0, "one number per group"),
    # 02: local denominators only know the micro-batch's own tokens, and the loop divides by k
    (exercises.check_local_microbatch_weight, 1 / 180, "full-batch"),
    (exercises.check_local_microbatch_weight, 1 / 60, "divides each micro-batch's loss by k"),
    (exercises.check_local_microbatch_weight, 1 / 40, "20 + 40"),
    # 04: the first optimizer step of a batch clips nothing, and the trainer logs the mean over all mu steps
    (exercises.check_logged_clip_fraction, 0.06, "first optimizer step"),
    (exercises.check_logged_clip_fraction, 0.12, "not their sum"),
    (exercises.check_logged_clip_fraction, 0.0, "later ones"),
    # 04: PPO-clip does not bound r on the A < 0 side; dual-clip's cap does
    (exercises.check_negative_advantage_weights, (0.0, 0.0), "unclipped branch"),
    (exercises.check_negative_advantage_weights, (5.0, 0.0), "sign"),
    (exercises.check_negative_advantage_weights, (-5.0, -5.0), "cap"),
    # 05: OPO's baseline is length-weighted
    (exercises.check_opo_by_hand, [0.75, -0.25, -0.25, -0.25], "plain mean"),
    (exercises.check_opo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], "length"),
])
def test_new_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)


def test_new_exercise_answers_follow_the_library():
    assert exercises.grpo_sum_of_squares() == pytest.approx((7.0, 7.0))  # G - 1 for any group with signal
    assert exercises.grpo_sum_of_squares([(1, 0, 0), (5, 2, 2)]) == pytest.approx((2.0, 2.0))
    # the exercise: 1 / (20 + 40) / k; one answer per micro-batch instead: local token-mean is seq-mean-token-mean
    assert exercises.local_microbatch_weight() == pytest.approx(1 / 120)
    assert exercises.local_microbatch_weight((10, 1000), k=2, row=0) == pytest.approx(
        exercises.token_weight((10, 1000), row=0))
    assert exercises.logged_clip_fraction() == pytest.approx(0.04)
    assert exercises.logged_clip_fraction(()) == 0.0  # mu = 1: r = 1 on the only step, nothing clips
    assert exercises.negative_advantage_weights() == pytest.approx((-5.0, 0.0))
    assert exercises.negative_advantage_weights(ratio=2.0) == pytest.approx((-2.0, -2.0))  # below c = 3: no cap
    assert exercises.opo_advantages() == pytest.approx([0.875, -0.125, -0.125, -0.125])
    assert exercises.opo_advantages(lengths=(4, 4, 4, 4)) == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert exercises.check_opo_by_hand([0.75, -0.25, -0.25, -0.25], lengths=(4, 4, 4, 4)) == "correct"
    for empty in (None, "7, 7"):  # no answer yet, or not numbers: rejected, never an error of another type
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_grpo_sum_of_squares(empty)


FAMILY_NOTEBOOKS = ("01_grpo", "02_loss_aggregation", "03_kl_estimators", "04_clipping_zoo",
                    "05_advantage_estimators", "08_preference", "11_entropy",
                    "10_beyond_the_clip", "12_reward_design", "13_credit_assignment")  # three exercises or more


def exercise_cells(stem: str) -> tuple[str, str]:
    """(parameters cell, answers + folded solutions + check cell) of a notebook, as its source code."""
    import jupytext

    cells = [c for c in jupytext.read(ROOT / "notebooks" / f"{stem}.py").cells if c.cell_type == "code"]
    tagged = {tag: i for i, c in enumerate(cells) for tag in c.metadata.get("tags", [])}
    solved = tagged["hide-input"]  # the answers cell comes just before it, the check cell just after
    return cells[tagged["parameters"]].source, "\n".join(c.source for c in cells[solved - 1:solved + 2])


@pytest.mark.parametrize("stem", FAMILY_NOTEBOOKS + ("06_metric_glossary", "07_compare"))
def test_notebook_exercises_start_unsolved_and_their_solutions_pass(stem, capsys):
    from workbench.recipes import get_recipe

    params, exercise = exercise_cells(stem)
    assert "solutions = False" in params
    for solutions, verdict in ((False, "no answer yet"), (True, "correct")):
        namespace = {"get_recipe": get_recipe}  # the one notebook import a solution uses (07)
        exec(params, namespace)
        exec(exercise, {**namespace, "solutions": solutions})
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) >= (3 if stem in FAMILY_NOTEBOOKS else 1), lines
        assert [line.split(":")[0] for line in lines] == [f"exercise {n}" for n in range(1, len(lines) + 1)]
        assert all(line.split(": ", 1)[1].startswith(verdict) for line in lines), lines


# Notebook 11: entropy
@pytest.mark.parametrize("check, right, wrong", [
    (exercises.check_entropy_at_temperature, 0.5146623, 1.0487051),
    (exercises.check_covariance_term, 1.12, -0.14),
    (exercises.check_clip_cov_candidates, {0, 4}, {0, 2, 4}),
    (exercises.check_alpha_direction, "rise", "fall"),
], ids=lambda x: getattr(x, "__name__", None))
def test_entropy_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    for bad in (wrong, "x", [1, "a"]):
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


@pytest.mark.parametrize("check, wrong, explanation", [
    (exercises.check_entropy_at_temperature, 1.0487051, "T = 1"),           # the logits not divided by T
    (exercises.check_entropy_at_temperature, 0.5146623 / 0.6931472, "bits"),
    (exercises.check_covariance_term, -0.14, "centre the log-prob"),
    (exercises.check_covariance_term, 1.2, "centre the advantage"),
    (exercises.check_covariance_term, -0.15, "both factors"),
    (exercises.check_clip_cov_candidates, {0, 2, 4}, "strict"),
    (exercises.check_clip_cov_candidates, {0, 3, 4}, "already"),
    (exercises.check_clip_cov_candidates, [0], "missing"),
    (exercises.check_alpha_direction, "falls", "token-mean of the batch's entropies, 0.54"),
    (exercises.check_alpha_direction, "down", "strengthen the bonus"),
])
def test_entropy_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)


def test_entropy_exercise_answers_follow_the_library():
    import torch

    from workbench import ops
    from workbench.objectives.entropy_cov import token_covariance

    logits = torch.tensor([[2.0, 1.0, 0.0, 0.0]])
    assert exercises.entropy_at_temperature() == pytest.approx(float(ops.entropy_from_logits(logits, 0.5)), abs=1e-6)
    assert exercises.entropy_at_temperature(temperature=1.0) == pytest.approx(float(ops.entropy_from_logits(logits)),
                                                                              abs=1e-6)
    assert exercises.covariance_term() == pytest.approx(1.4 * 0.8)
    cov = token_covariance(torch.tensor([exercises.CLIP_COV_EXERCISE["logps"]], dtype=torch.float64),
                           torch.tensor([exercises.CLIP_COV_EXERCISE["advantages"]], dtype=torch.float64),
                           torch.ones(1, 6, dtype=torch.float64))
    assert cov[0].tolist() == pytest.approx([2.0, 0.5, 1.0, 4.0, 3.0, 0.0])  # the values the notebook states
    assert exercises.clip_cov_candidates() == {0, 4}
    assert exercises.clip_cov_candidates(lb=0.4) == {0, 1, 2, 4}
    assert exercises.alpha_direction(0.8, 0.5) == "fall" and exercises.alpha_direction(0.3, 0.5) == "rise"
    assert exercises.alpha_direction(0.5, 0.5) == "stay"
    # the exercise: three of five tokens above the target 0.6, their token-mean 0.54 below it
    assert exercises.alpha_direction() == "rise"
    assert exercises.alpha_direction((0.9, 0.8, 0.7, 0.1, 0.5), 0.6) == "fall"  # mean 0.6 + 0.02
    with pytest.raises(AssertionError, match="weaken the bonus"):
        exercises.check_alpha_direction("rises", 0.8, 0.5)


# notebook 10: beyond the clip
@pytest.mark.parametrize("check, right, wrong", [
    (exercises.check_gbpo_target_ratios, (1.1614, 1.0), (1.2, 0.8)),
    (exercises.check_dispo_masked_tokens, {"b", "c", "e"}, {"e"}),
    (exercises.check_dispo_masked_tokens, ["e", "c", "b"], {"b", "c"}),
    (exercises.check_bapo_exercise, (0.3901, 0.75), (0.3901, 0.7)),
    (exercises.check_shaping_weights, (0.25, 0.09), (0.5, 0.9)),
])
def test_beyond_the_clip_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    with pytest.raises(AssertionError, match="not quite"):
        check(wrong)


@pytest.mark.parametrize("check, wrong, explanation", [
    (exercises.check_gbpo_target_ratios, (1.1427, 0.956), "MEDIAN"),     # centred on the mean
    (exercises.check_gbpo_target_ratios, (1.2, 1.0), "sharp split"),     # T -> 0
    (exercises.check_dispo_masked_tokens, {"e"}, "one-sided"),            # PPO's rule
    (exercises.check_dispo_masked_tokens, {"a", "b", "c", "e"}, "inside their class"),
    (exercises.check_bapo_exercise, (0.5390, 0.75), "every token"),
    (exercises.check_bapo_exercise, (0.4978, 0.8), "reference code"),
    (exercises.check_bapo_exercise, (0.3901, 0.7), "which step"),
    (exercises.check_bapo_exercise, 0.39, "pair"),
    (exercises.check_shaping_weights, (0.5, 0.9), "shaped value"),
    (exercises.check_shaping_weights, (1.0, 1.0), "REINFORCE"),
    (exercises.check_shaping_weights, (0.1, 0.9), "loss on p itself"),
])
def test_beyond_the_clip_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)


def test_beyond_the_clip_answers_follow_the_library():
    import math

    from workbench.viz.weight_surfaces import gradient_weight_surface

    sigma = 1 / (1 + math.exp(-1 / (math.sqrt(0.2) + 1e-6)))  # A_hat of the correct answer: 1 / Bessel std
    assert exercises.gbpo_target_ratios() == pytest.approx((0.8 + 0.4 * sigma, 1.0))  # median 0: wrong -> rho* = 1
    assert exercises.gbpo_target_ratios((1.0, 1.0, 1.0, 0.0, 0.0))[1] == pytest.approx(0.8 + 0.4 / (1 + math.e ** (1 / (
        math.sqrt(0.3) + 1e-6))))  # median 1: a wrong answer's target is pushed below 1
    masked = exercises.dispo_masked_tokens()
    for label, (r, a) in exercises.DISPO_EXERCISE_TOKENS.items():  # the same as the surface's zero cells
        assert (label in masked) == (gradient_weight_surface("dispo", [r], [a])[0, 0] == 0)
    assert exercises.dispo_masked_tokens(eps_low_pos=0.3, eps_high_neg=0.35) == {"e"}
    assert exercises.bapo_exercise() == pytest.approx((1.1 / 2.82, 0.75))
    assert exercises.shaping_weights((0.1, 0.5), gamma=0.1) == pytest.approx((0.25, 0.05 / 0.36))
    assert exercises.shaping_weights((0.3,)) == pytest.approx(
        tuple(gradient_weight_surface("policy-shaping", [1.0], [1.0], {"p_old": 0.3})[0]))


# notebook 12: reward design
@pytest.mark.parametrize("check, right, wrong", [
    (exercises.check_cosine_length_value, 0.875, 0.75),
    (exercises.check_dominant_aggregation, "normalize_then_sum", "sum_then_normalize"),
    (exercises.check_dominant_aggregation, {"normalize_then_sum"}, {"normalize_then_sum", "sum_then_normalize"}),
    (exercises.check_soft_overlong_first_length, 8, 7),
    (exercises.check_ssl_tier, 0.1, 0.3),
], ids=lambda x: getattr(x, "__name__", None))
def test_reward_design_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    for bad in (wrong, "x", [1, "a"]):
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


@pytest.mark.parametrize("check, wrong, explanation", [
    (exercises.check_cosine_length_value, -0.875, "wrong answer's reward"),
    (exercises.check_cosine_length_value, 0.5 + 0.5 * 0.5, "(1 + cos(pi u)) / 2"),
    (exercises.check_cosine_length_value, 1.0 - 0.25 * 1.5, "other way round"),
    (exercises.check_cosine_length_value, 0.5 + 0.25 * (1 + 0.94495695), "radians"),
    (exercises.check_cosine_length_value, 0.8272542, "u = |y| / L = 0.333333"),  # the L = 10 value of the table
    (exercises.check_dominant_aggregation, "sum_then_normalize", "drowns"),
    (exercises.check_dominant_aggregation, "both", "name of a mode"),
    (exercises.check_soft_overlong_first_length, 7, "just after"),
    (exercises.check_soft_overlong_first_length, 3, "END of the budget"),
    (exercises.check_ssl_tier, 0.3, "outside the 1 sigma ring"),
    (exercises.check_ssl_tier, 0.6, "outside the 0.5 sigma ring"),
    (exercises.check_ssl_tier, 0.0, "inclusive"),
    (exercises.check_ssl_tier, 1.0, "exact tier"),
])
def test_reward_design_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)


def test_reward_design_answers_follow_the_library():
    import math

    import torch

    from workbench.rewards.length import cosine_scaled, soft_overlong
    from workbench.rewards.ssl import answer_distance, distance_tier

    assert exercises.cosine_length_value() == pytest.approx(0.5 + 0.25 * (1 + math.cos(math.pi / 3))) == 0.875
    assert exercises.cosine_length_value() == pytest.approx(float(cosine_scaled(
        torch.tensor([4.0]), torch.tensor([True]), max_len=12)[0]))
    assert exercises.cosine_length_value(4, 10) == pytest.approx(0.5 + 0.25 * (1 + math.cos(0.4 * math.pi)))
    assert exercises.cosine_length_value(correct=False) == pytest.approx(-exercises.cosine_length_value())
    assert exercises.dominant_aggregations() == {"normalize_then_sum"}
    assert exercises.dominant_aggregations(scores=(0.2, 0.8, 0.6, 0.3)) == {"sum_then_normalize",
                                                                           "normalize_then_sum"}  # a 0..1 scale
    assert exercises.dominant_aggregations(weight=2.0) == set()  # a heavy enough anti-correlated reward wins anyway
    penalties = soft_overlong(torch.zeros(10), torch.arange(1.0, 11.0), max_len=10, buffer=3)
    assert exercises.soft_overlong_first_length() == int(torch.nonzero(penalties < 0)[0]) + 1 == 8
    assert exercises.soft_overlong_first_length(buffer=1) == 10
    assert exercises.ssl_tier_value() == distance_tier(answer_distance("48", "40")) == 0.1  # d = 0.2: the edge
    assert exercises.ssl_tier_value("42") == 0.6 and exercises.ssl_tier_value("44") == 0.3
    assert exercises.ssl_tier_value("49") == 0.0 and exercises.ssl_tier_value("22", "20") == 0.3
    assert exercises.check_ssl_tier(0.3, pred="22", gold="20") == "correct"
    with pytest.raises(AssertionError, match="inclusive"):
        exercises.check_ssl_tier(0.1, pred="22", gold="20")
