"""A^2FM's APO reward: accuracy regularized by the cost of the mode's tokens and tool calls, correct rows only."""
import pytest

from workbench import registry
from workbench.rewards.a2fm import a2fm_reward, classified_mode, cost_regularized, costs, mode_tag, row_modes

pytestmark = pytest.mark.covers("apo-a2fm")

PROMPTS = [mode_tag(m) + "12+34=" for m in ("instant", "reasoning", "agentic")]
ANSWERED = [{"action": "46"}]
WITH_TOOL = [{"action": "[12+34]"}, {"action": "A:46"}]


def logged():
    out = {}
    return out, lambda name, value: out.__setitem__(name, value)


def test_registered_as_a_reward_and_a_rollout_with_the_catalogs_lambda():
    reward, rollout = registry.get("reward", "apo-a2fm"), registry.get("rollout", "apo-a2fm")
    assert reward.defaults == {"lam_cost": 0.1, "call_cost": 10.0, "mode_costs": None, "cost_max": None,
                               "verifier": "auto"}
    assert rollout.defaults["modes"] == ("instant", "reasoning", "agentic")
    for entry in (reward, rollout):
        assert entry.confidence == "abstract-only" and entry.equation and entry.fn.__doc__


def test_at_equal_accuracy_the_cheaper_mode_earns_more():
    """Catalog test (1): three right answers, instant (2 tokens), reasoning (8 tokens), agentic (4 tokens and a
    tool call, 14 token equivalents): cost_max = 14, r = 1 - 0.1 cost / 14."""
    ids = [[1, 2], list(range(8)), [1, 2, 3, 4]]
    out = a2fm_reward(["46", "think... 46", "A:46"], prompts=PROMPTS, completion_ids=ids,
                      turn_info=[ANSWERED, ANSWERED, WITH_TOOL], scores=[1.0, 1.0, 1.0])
    assert out == pytest.approx([1 - 0.1 * 2 / 14, 1 - 0.1 * 8 / 14, 1 - 0.1 * 14 / 14])
    assert out[0] > out[1] > out[2] >= 0.9
    # a fixed normalizer and per-mode overheads
    fixed = a2fm_reward(["46"] * 3, prompts=PROMPTS, completion_ids=[[1, 2]] * 3, scores=[1.0] * 3, cost_max=20.0,
                        mode_costs={"reasoning": 3.0, "agentic": 6.0})
    assert fixed == pytest.approx([1 - 0.1 * 2 / 20, 1 - 0.1 * 5 / 20, 1 - 0.1 * 8 / 20])


@pytest.mark.parametrize("lam_cost", [0.1, 0.5, 1.0])
def test_a_right_answer_never_earns_less_than_one_minus_lambda_even_past_a_fixed_cost_max(lam_cost):
    """cost_max = 20 and 300 tokens: uncapped, 1 - 0.1 * 15 = -0.5, below a wrong answer's 0."""
    lengths = [1, 10, 20, 300, 5000]
    out = a2fm_reward(["46"] * 6, prompts=PROMPTS * 2, completion_ids=[[0] * n for n in lengths] + [[0] * 300],
                      turn_info=[ANSWERED] * 5 + [WITH_TOOL], scores=[1.0] * 5 + [0.0], cost_max=20.0,
                      lam_cost=lam_cost)
    assert out[:5] == pytest.approx([1 - lam_cost * min(n / 20, 1.0) for n in lengths])
    assert min(out[:5]) == pytest.approx(1 - lam_cost) and min(out[:5]) >= out[5] == 0.0
    assert all(a >= b for a, b in zip(out[:5], out[1:5]))  # still cheaper-is-better up to the cap


def test_lambda_zero_is_plain_accuracy():
    """Catalog test (2)."""
    scores = [1.0, 0.0, 1.0, 0.0]
    out = a2fm_reward(["a", "bb", "ccc", "dddd"], prompts=PROMPTS + PROMPTS[:1], scores=scores, lam_cost=0.0)
    assert out == scores


def test_the_cost_applies_to_correct_rows_only():
    out = a2fm_reward(["46", "x" * 50], prompts=PROMPTS[:2], scores=[0.0, 0.0])
    assert out == [0.0, 0.0]  # a cheap wrong answer does not beat an expensive wrong one
    assert cost_regularized([True, False, None], [5.0, 0.0, 1.0], lam_cost=0.1, cost_max=10.0) == [0.95, 0.0, None]
    assert costs(["instant", None], [3, 4], [0, 2], call_cost=10.0, mode_costs={"instant": 1.0}) == [4.0, 24.0]


def test_the_mode_is_read_from_a_column_the_prompt_tag_or_a_classification():
    cls = "<classification>\n{}\n</classification>\n"
    completions = ["x", "y", cls.format("toolcalling_agent") + "z", "w", "v"]
    prompts = [PROMPTS[1], "plain", "plain", cls.format("default_agent") + "q", [{"role": "user",
                                                                                 "content": "<agentic>q"}]]
    assert row_modes(completions, {"prompts": prompts}) == ["reasoning", None, "agentic", "instant", "agentic"]
    assert row_modes(["x", "y"], {"prompts": PROMPTS[:2], "mode": ["agentic", None]}) == ["agentic", None]
    assert classified_mode("<classification>reasoning</classification>") == "reasoning"
    assert classified_mode("<classification>other</classification>") is None
    assert row_modes(["x"], {}) == [None]


def test_logs_cost_and_per_mode_share_and_accuracy():
    metrics, log = logged()
    a2fm_reward(["46", "46", "45", "46"], prompts=PROMPTS + PROMPTS[:1], completion_ids=[[1], [1, 2], [1], [1, 2]],
                scores=[1.0, 1.0, 0.0, 1.0], log_metric=log)
    assert metrics == pytest.approx({"cost": (0.5 + 1.0 + 1.0) / 3, "frac_instant": 0.5, "acc_instant": 1.0,
                                     "frac_reasoning": 0.25, "acc_reasoning": 1.0, "frac_agentic": 0.25,
                                     "acc_agentic": 0.0})


def test_without_scores_the_verifier_reads_text_answers_as_trl_passes_them():
    """TRL passes no `scores`: "auto" checks the answer span exactly ("A:46", a QA span), where math-verify reads
    neither (None for a text gold, False for "A:46")."""
    chats = [[{"role": "assistant", "content": "A:46"}], [{"role": "assistant", "content": "the answer is Paris"}],
             [{"role": "assistant", "content": "A:45"}]]
    out = a2fm_reward(chats, solution=["46", "Paris", "46"], completion_ids=[[1, 2]] * 3, cost_max=10.0)
    assert out == pytest.approx([0.98, 0.98, 0.0])
    with pytest.raises(ValueError, match="apo-a2fm.*verifier"):
        a2fm_reward(chats, solution=["46"] * 3, verifier="f1")


@pytest.mark.parametrize("kw, match", [({"lam_cost": -0.1}, "lam_cost"), ({"lam_cost": 1.5}, "lam_cost"),
                                       ({"call_cost": -1.0}, "call_cost"), ({"cost_max": 0.0}, "cost_max"),
                                       ({"mode_costs": {"fast": 1.0}}, "mode_costs"),
                                       ({"mode": ["turbo"]}, "column 'mode'")])
def test_bad_inputs_are_clear_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        a2fm_reward(["46"], scores=[1.0], **kw)


def test_robust_to_empty_surrogate_and_huge_completions():
    texts = ["", "caf\udce9", "x" * 1_000_000, "<classification>" * 100_000]
    out = a2fm_reward(texts, answer=["46"] * 4, scores=[1.0, 0.0, 1.0, 1.0])
    assert out[1] == 0.0 and all(0.9 <= v <= 1.0 for v in (out[0], out[2], out[3]))
