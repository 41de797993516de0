"""Notebook 16's figures draw what the multi-agent batch holds (each agent's row: prompt, own actions with mask 1,
the others' moves with mask 0), the four estimators' advantages on the same actions, Kuhn poker's exact
exploitability (the Nash family at 0, a deviation only the other player gains from) and the stored comparisons'
curves from the evaluation before training."""
from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest
import torch

from tests.rollout.scripted import ScriptedEngine
from workbench.advantages.dr_mas import dr_mas
from workbench.advantages.group import grpo
from workbench.advantages.mars import mars
from workbench.envs.games import kuhn
from workbench.envs.poker import KuhnTask
from workbench.models import char_tokenizer
from workbench.results.stored_runs import load
from workbench.rollout import Sampling
from workbench.rollout.agents import agents
from workbench.tasks import Example
from workbench.viz import multiagent_figures as mf

TOK = char_tokenizer()


def deal(cards: str) -> Example:
    return Example(prompt="", answer=cards, target="")


def read(history: str) -> str:
    """The information set of a row's text ("P0 Q:" + what it saw and did so far)."""
    text = history.replace("<bos>", "")
    return text[3] + "".join(ch for ch in text[5:] if ch in "pb")


def game(strategy: dict, cards: str = "QK", group_size: int = 1):
    """Self-play games of one deal with a pure strategy {infoset: "p" | "b"}, through the real rollout."""
    policy = lambda history: strategy[read(history)]  # noqa: E731
    return agents(ScriptedEngine(TOK, policy), KuhnTask(), [deal(cards)], group_size=group_size,
                  sampling=Sampling(4))


def mixed_batch(seed: int = 0):
    """Two deals x 6 games, every action drawn with probability 1/2 (the uniform strategy): rewards differ."""
    rng = random.Random(seed)
    policy = lambda history: rng.choice("pb")  # noqa: E731
    return agents(ScriptedEngine(TOK, policy), KuhnTask(), [deal("QK"), deal("JQ")], group_size=6,
                  sampling=Sampling(4))


# ------------------------------------------------------------------------------- one game, each agent's view


def test_a_check_bet_call_game_shows_each_agent_its_own_view():
    batch = game({"Q": "p", "Kp": "b", "Qpb": "b"})
    assert mf.episode_rows(batch, 0) == [0, 1]
    assert mf.play_order(batch, TOK, 0) == [(0, 0, "p"), (1, 0, "b"), (0, 1, "b")]
    player0, player1 = mf.transcript(batch, TOK, 0)
    assert [c["role"] for c in player0["cells"] if c["role"] != "prompt"] == ["action", "observation", "action"]
    assert [c["token"] for c in player0["cells"] if c["role"] != "prompt"] == ["p", "b", "b"]
    assert [c["role"] for c in player1["cells"] if c["role"] != "prompt"] == ["action"]
    assert "".join(c["token"] for c in player1["cells"] if c["role"] == "prompt").endswith("P1 K:p")
    assert (player0["return"], player1["return"]) == (-2.0, 2.0)
    html = mf.transcript_html(batch, TOK, 0, ["player0", "player1"], advantages=grpo(batch))
    assert html.count("border:2px solid #000") == 3 + 1  # three actions (mask 1), and the legend's action
    assert "player0</b> (agent 0, row 0) · return -2" in html and "player1</b> (agent 1, row 1) · return +2" in html
    assert "r = -2, A = -0.71" in html and "r = 2, A = +0.71" in html  # GRPO over the two rows of one game


def test_an_unknown_episode_is_refused_naming_the_batch_episodes():
    with pytest.raises(ValueError, match=r"episode 5 has no rows in this batch \(its episodes: \[0\]\)"):
        mf.episode_rows(game({"Q": "b", "Kb": "b"}), 5)


# ------------------------------------------------------------------------------- per-agent advantages


@pytest.mark.covers("dr-mas", "mars", "role-baseline")
def test_each_estimator_is_the_registered_one_and_spiral_subtracts_the_role_average():
    batch = mixed_batch()
    adv = mf.estimator_advantages(batch, role_averages={0: 0.5, 1: -0.5})
    assert torch.equal(adv["grpo"], grpo(batch)) and torch.equal(adv["dr-mas"], dr_mas(batch))
    assert torch.equal(adv["mars"], mars(batch))
    first = {k: int(torch.nonzero(batch.agent == k)[0]) for k in (0, 1)}  # each role's first row: b = the average
    for k, b in ((0, 0.5), (1, -0.5)):
        row = first[k]
        assert torch.allclose(adv["spiral"][row][batch.mask[row] > 0], batch.rewards[row] - b)
    fresh = mf.role_baseline_advantages(batch)  # a run's first step: the averages start at 0
    assert torch.allclose(fresh[first[0]][batch.mask[first[0]] > 0], batch.rewards[first[0]])


def test_turn_rows_hold_each_action_and_dr_mas_centres_every_agent():
    batch = mixed_batch(1)
    adv = mf.estimator_advantages(batch)
    table = mf.turn_advantage_rows(batch, TOK, adv, range(batch.size))
    assert len(table) == sum(len(mf.action_texts(batch, TOK, r)) for r in range(batch.size))
    assert {t["action"] for t in table} <= {"p", "b"}
    for t in table[:5]:
        tokens = (batch.turn[t["row"]] == t["turn"]) & (batch.mask[t["row"]] > 0)
        assert t["dr-mas"] == pytest.approx(float(adv["dr-mas"][t["row"]][tokens].mean()))
    stats = {(s["estimator"], s["agent"]): s for s in mf.agent_advantage_stats(batch, adv)}
    # Dr. MAS pools every call: per (deal, agent) the calls' advantages average 0, so each agent's do too
    assert stats[("dr-mas", 0)]["mean"] == pytest.approx(0.0, abs=1e-6)
    assert stats[("dr-mas", 1)]["mean"] == pytest.approx(0.0, abs=1e-6)
    assert stats[("dr-mas", 0)]["actions"] == sum(t["agent"] == 0 for t in table)
    fig = mf.agent_advantages_figure(batch, TOK, adv, range(12), ["player0", "player1"])
    assert len(fig.data) == 4 * 2 and {len(trace.x) for trace in fig.data[:2]} == \
        {sum(t["agent"] == k for t in table if t["row"] < 12) for k in (0, 1)}


# ------------------------------------------------------------------------------- Kuhn: strategies and deviations


@pytest.mark.covers("kuhn")
def test_the_strategy_grid_puts_the_nash_family_at_zero_exploitability():
    uniform = (kuhn.uniform_strategy(0), kuhn.uniform_strategy(1))
    sets, columns, z, exploit = mf.strategy_grid({"uniform": uniform})
    assert sets == list(kuhn.INFOSETS[0] + kuhn.INFOSETS[1]) and columns[0] == "uniform"
    assert columns[1:] == ["Nash α=0", "Nash α=1/6", "Nash α=1/3"]
    assert exploit == pytest.approx([11 / 24, 0, 0, 0])
    column = {s: row[3] for s, row in zip(sets, z)}  # alpha = 1/3
    assert (column["J"], column["K"], column["Qpb"], column["Qb"], column["Jb"]) == pytest.approx((1 / 3, 1, 2 / 3,
                                                                                                    1 / 3, 0))
    fig = mf.strategy_heatmap({"uniform": uniform})
    assert len(fig.data[0].z) == 12 and len(fig.data[0].x) == 4 and "expl. 0.458" in fig.data[0].x[0]


@pytest.mark.covers("kuhn")
def test_a_deviation_costs_nothing_at_the_equilibrium_and_only_the_other_player_gains():
    curves = mf.deviation_curves(Fraction(1, 6), "Qb", points=31)  # q = i / 30 reaches 1/3 at i = 10
    assert curves["exploitability"][10] == pytest.approx(0.0, abs=1e-12)
    assert all(e > 1e-9 for i, e in enumerate(curves["exploitability"]) if i != 10)
    assert curves["gain1"] == pytest.approx([0.0] * 31, abs=1e-12)  # player 1 mixes at Qb: it is indifferent
    assert [(a + b) / 2 for a, b in zip(curves["gain0"], curves["gain1"])] == pytest.approx(curves["exploitability"])
    s0, s1 = mf.deviation(Fraction(1, 6), "J", 1)
    assert s0["J"] == 1 and s0["K"] == Fraction(1, 2) and s1 == kuhn.nash_strategy(Fraction(1, 6))[1]
    assert mf.gains(s0, s1)[2] == pytest.approx(float(kuhn.exploitability(s0, s1)))
    with pytest.raises(KeyError, match="player 1's sets are Jp, Qp, Kp, Jb, Qb, Kb"):
        mf.deviation(0, "Qx", 0.5)


def test_the_explorer_redraws_exactly_at_its_controls():
    box = mf.deviation_explorer()
    assert "α = 1/6" in box.figure.layout.title.text and "exploitability 0.0139" in box.figure.layout.title.text
    box.controls["infoset"].value = "Kb"
    box.controls["q"].value = 1.0  # calling with K is the equilibrium: nothing to gain
    assert "Kb moved to q = 1.00: exploitability 0.0000" in box.figure.layout.title.text
    assert mf.alpha_text(1 / 6) == "1/6" and mf.alpha_text(0.1234) == "0.123"


# ------------------------------------------------------------------------------- stored comparisons


def stored_file(tmp_path, seeds: int = 3):
    """A stored comparison in the stored_runs format: two recipes, exploitability every 10 steps."""
    lines = [{"meta": {"name": "f8-kuhn", "command": "x", "commit": "c", "date": "d", "machine": "m",
                       "seeds": seeds, "sets": []}}]
    for j, recipe in enumerate(("self-play", "mars")):
        for seed in range(seeds):
            lines.append({"summary": {"recipe": recipe, "seed": seed, "exploitability_before": 0.4 + 0.01 * seed,
                                      "exploitability_after": 0.3 - 0.1 * j}})
            for step in (9, 19):
                lines.append({"row": {"recipe": recipe, "seed": seed, "step": step,
                                      "eval/exploitability": 0.35 - 0.01 * step * (j + 1) + 0.01 * seed}})
    (tmp_path / "f8-kuhn.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return load("f8-kuhn", data_dir=tmp_path)


def test_curves_start_from_the_evaluation_before_training_and_band_the_seeds(tmp_path):
    assert load("f8-kuhn", data_dir=tmp_path) is None  # not run yet: the notebook says so
    _, runs, summaries = stored_file(tmp_path)
    start = mf.with_game_start(runs, summaries)
    assert [r["step"] for r in start["mars"][2]] == [-1, 9, 19]
    assert start["mars"][2][0] == {"step": -1, "eval/exploitability": pytest.approx(0.42)}
    assert runs["mars"][2][0]["step"] == 9  # the input is not modified
    refs = {"eval/exploitability": [(0.458, "uniform", "bottom right"), (0.0, "Nash")]}
    fig = mf.game_curves(runs, summaries, refs=refs, title="t")
    bands = [t for t in fig.data if t.fill == "toself"]
    lines = [t for t in fig.data if t.fill != "toself"]
    assert len(bands) == 2 and [t.name for t in lines] == ["self-play", "mars"]
    assert list(lines[1].x) == [-1, 9, 19] and lines[1].y[0] == pytest.approx(0.41)  # the mean over 3 seeds
    assert len(fig.layout.shapes) == 2 and fig.layout.yaxis.range[1] > 0.458 and fig.layout.yaxis.range[0] < 0
    one = mf.game_curves({"mars": runs["mars"][:1]}, summaries)
    assert not [t for t in one.data if t.fill == "toself"] and "one seed" in one.layout.title.text
