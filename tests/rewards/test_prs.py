"""PRS's staged reward: format first, then format + length-aware BLEU; the stage switch (time or compliance) is
monotone and lives in the controller's state."""
import copy
import itertools
import math
import random
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import make_batch
from tests.rewards.test_tools import CALC, EXAMPLE, episode, rows
from workbench import registry
from workbench.envs.search import SearchTask
from workbench.rewards.prs import PRSStage, batch_compliance, format_scores, length_aware_bleu, prs_reward, stage_at
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("prs")

WELL = [["[37*48]", "[1776+19]", "A:1795"], ["[37*48]", "[1776+19]", "A:1796"], ["A:17"], ["[1*1]", "A:1"]]
BAD = [["[37*48*2]", "[3x]", "A:"], ["[1+]", "12]", "[]"]]  # malformed calls, then an empty answer / a call


def calculator_rows(episodes, truncated=None):
    """The pipeline's columns for calculator episodes (`scores`: the environment's verdict)."""
    completions, turn_info = rows(*(episode(CALC.make_env(), EXAMPLE, a) for a in episodes))
    n = len(completions)
    return dict(completions=completions, turn_info=turn_info, answer=["1795"] * n, truncated=truncated or [False] * n,
                scores=[CALC.score(c, EXAMPLE) for c in completions])


def test_well_formatted_trajectories_never_score_below_unparseable_ones_in_any_stage():
    cols = calculator_rows(WELL + BAD)
    formats = [f for f, _ in format_scores(cols["completions"], cols["turn_info"], cols["truncated"])]
    assert formats[:4] == [1.0] * 4 and formats[4:] == [0.0, 0.0]
    for stage in (1, 2):
        r = prs_reward(**cols, stage=stage)
        assert min(r[:4]) >= max(r[4:]), (stage, r)
    assert prs_reward(**cols, stage=1) == formats
    stage2 = prs_reward(**cols, stage=2)
    assert stage2[:2] == pytest.approx([1.0, 0.2]) and stage2[4:] == [0.0, 0.0]


def test_partly_malformed_and_cut_episodes_get_partial_format():
    cols = calculator_rows([["[37*48*2]", "[37*48]", "A:1795"], ["[37*48]", "A:1795"]], truncated=[False, True])
    assert prs_reward(**cols, stage=1) == pytest.approx([2 / 3, 0.5])  # a bad call; an answer cut by the budget
    # the cut answer earns no r_answer
    assert prs_reward(**cols, stage=2) == pytest.approx([0.2 * 2 / 3 + 0.8, 0.2 * 0.5])


def test_stage_two_is_monotone_in_answer_quality_at_fixed_format():
    gold = "paris is the capital of france"
    answers = ["", "rome", "paris", "paris capital", "paris is capital of", "paris is the capital of france"]
    quality = [length_aware_bleu(a, gold) for a in answers]
    assert quality[0] == quality[1] == 0.0 and quality[-1] == 1.0
    assert all(a < b for a, b in zip(quality[1:], quality[2:]))
    r = prs_reward([f"A:{a}" for a in answers[1:]], stage=2, answer=[gold] * 5)
    assert all(a < b for a, b in zip(r, r[1:])) and r[-1] == pytest.approx(1.0)


def test_length_aware_bleu_known_values():
    assert length_aware_bleu("Zar", "Zar") == 1.0 and length_aware_bleu("zar.", "Zar") == 1.0  # normalized
    assert length_aware_bleu("Zar Kel", "Zar") == pytest.approx(0.5)  # unigram precision only for a one-word gold
    # a correct prefix: all smoothed precisions 1, brevity penalty exp(1 - 4/2)
    assert length_aware_bleu("one two", "one two three four") == pytest.approx(math.exp(-1))
    # BLEU-2 with add-one smoothing: p1 = 2/2, p2 = (0 + 1)/(1 + 1)
    assert length_aware_bleu("two one", "one two") == pytest.approx(math.sqrt(0.5))
    assert length_aware_bleu("x", "") == 0.0 and length_aware_bleu("caf\udce9", "cafe") == 0.0


def test_stage_two_scores_a_value_answer_with_the_verifier_and_a_span_with_bleu():
    """Countdown's gold is the target number ("17|2 3 5"): BLEU of the expression "3*5+2" against "17" is 0, so only
    the verifier gives the right expression its credit; search's gold is an entity, scored by BLEU (= EM for one
    word)."""
    task = get_task("countdown")
    example = next(e for e in task.sample(50, random.Random(0)) if e.target != e.answer.split("|")[0])
    wrong = "9" * len(example.target)
    completions = [example.target, wrong]
    cols = dict(answer=[example.answer] * 2, scores=[task.score(c, example) for c in completions],
                truncated=[False] * 2)
    assert cols["scores"] == [1.0, 0.0]
    assert prs_reward(completions, stage=2, **cols) == pytest.approx([1.0, 0.2])
    assert prs_reward(completions, stage=2, answer_metric="verifier", **cols) == pytest.approx([1.0, 0.2])
    assert prs_reward(completions, stage=2, answer_metric="bleu", **cols) == pytest.approx([0.2, 0.2])  # the bug
    search = SearchTask()
    found = search.make_example(random.Random(0))
    value = found.target.removeprefix("A:")
    answers = [found.target, "A:" + value + " Kel", "A:Nope"]
    span = dict(answer=[found.answer] * 3, scores=[1.0, 0.0, 0.0], truncated=[False] * 3)
    assert prs_reward(answers, stage=2, **span) == pytest.approx([1.0, 0.2 + 0.8 * 0.5, 0.2])  # BLEU: partial credit
    assert prs_reward(answers, stage=2, answer_metric="verifier", **span) == pytest.approx([1.0, 0.2, 0.2])


def test_empty_gold_falls_back_on_the_verifier():
    r = prs_reward(["7", "x7", ""], stage=2, answer=["", "", ""], scores=[1.0, 0.0, 1.0], truncated=[False] * 3)
    assert r == pytest.approx([1.0, 0.2, 0.0])  # the empty answer is malformed: no r_answer


def test_stage_switch_is_monotone_in_time_and_reads_trl_state():
    stages = [stage_at(step=t, total_steps=10, switch_at=0.5) for t in range(11)]
    assert stages == [1] * 5 + [2] * 6
    assert all(stage_at(step=t, total_steps=10, stage=2) == 2 for t in range(11))  # the controller's 2 holds
    assert stage_at(trainer_state=SimpleNamespace(global_step=60, max_steps=100)) == 2
    assert stage_at(step=9, total_steps=10, switch_at=None) == 1 and stage_at() == 1
    cols = calculator_rows(WELL[:2])
    assert prs_reward(**cols, step=4, total_steps=10) == [1.0, 1.0]
    assert prs_reward(**cols, step=5, total_steps=10) == pytest.approx([1.0, 0.2])


def test_controller_switches_once_compliance_passes_the_threshold_and_never_back():
    ctl = registry.get("controller", "prs").fn
    state = ctl.init(initial=None)
    seen = []
    for compliance in (0.5, 0.9, 0.95, 0.1, 0.0):
        state = ctl.update(state, None, {"rewards/prs/compliance": compliance})
        seen.append(ctl.value(state))
    assert seen == [1, 1, 2, 2, 2]
    assert ctl.value(copy.deepcopy(state)) == 2 and ctl.value(ctl.init(initial=2)) == 2
    with pytest.raises(ValueError, match="threshold"):
        ctl.init(initial=None, threshold=1.5)


def test_controller_measures_compliance_on_the_batch_without_a_logged_row():
    cols = calculator_rows(WELL + BAD)
    batch = make_batch([0.0] * 6, [0] * 6)
    batch.completions, batch.turn_info, batch.truncated = cols["completions"], cols["turn_info"], torch.zeros(6).bool()
    assert batch_compliance(batch) == pytest.approx(4 / 6)
    state = PRSStage.update(PRSStage.init(initial=None, threshold=0.6), batch, {})
    assert PRSStage.value(state) == 2


def test_logs_and_bad_parameters():
    logged = {}
    cols = calculator_rows(WELL + BAD)
    prs_reward(**cols, stage=2, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert set(logged) == {"stage", "format", "compliance", "answer"} and logged["compliance"] == pytest.approx(4 / 6)
    for bad in (dict(format_weight=1.5), dict(stage=3), dict(switch_at=-1), dict(max_n=0), dict(answer_metric="f1")):
        with pytest.raises(ValueError, match="prs"):
            prs_reward(["A:1"], **bad)
    with pytest.raises(ValueError, match="'prs' needs a 'answer' or 'solution' column"):
        prs_reward(["A:1"], stage=2, answer_metric="bleu", scores=[1.0])


def test_every_stage_and_weight_keeps_rewards_in_the_unit_interval():
    cols = calculator_rows(WELL + BAD)
    for stage, w in itertools.product((1, 2), (0.0, 0.2, 1.0)):
        r = prs_reward(**cols, stage=stage, format_weight=w)
        assert all(0.0 <= v <= 1.0 for v in r)
