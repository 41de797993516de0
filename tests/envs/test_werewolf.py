"""Werewolf, one day: exact transcripts and team payoffs, illegal actions, the Python players' reasoning, the expert's
games, evaluation; the latent game (its sets are the real game's decision points, its size, CFR's symmetric and
warm starts) and LSPO's pairs built end to end from played games."""
import itertools
import random

import numpy as np
import pytest

from workbench import registry
from workbench.envs import werewolf as W
from workbench.envs.games import cfr
from workbench.envs.multiagent import GameTask, MultiAgentEnv
from workbench.preference import latent
from workbench.preference.lspo import intent_probs, latent_pairs
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("werewolf")

TASK = get_task("werewolf")
EX = Example("G1", "3|2|0|1", "")  # wolf P2, seer P0 who peeked at P1 (good), P1 a villager


def play(actions, example=EX, task=TASK):
    """Each agent's whole stream (opening, its own actions, what it observed), the summed rewards, the last info."""
    env = task.make_env()
    views, info = env.reset(example, 0)
    streams = [v[0]["content"] for v in views]
    total = [0.0] * env.n
    for action in actions:
        mover = env.to_move()
        streams[mover] += action
        observations, rewards, done, info = env.step(action)
        total = [t + r for t, r in zip(total, rewards)]
        for k in range(env.n):
            streams[k] += "".join(m["content"] for m in observations[k])
    return env, streams, total, info


def test_registered_as_a_game_task_with_seats_as_agents():
    assert registry.get("env", "werewolf").fn is type(TASK) and isinstance(TASK, GameTask)
    env = TASK.make_env()
    assert isinstance(env, MultiAgentEnv) and env.agents == ("P0", "P1", "P2") and env.stop == ("\n",)
    assert env.max_turns == 2 and set(env.players) == {"random", "scripted"} and TASK.expert == "scripted"
    assert get_task("werewolf", players=4).make_env().agents == ("P0", "P1", "P2", "P3")


@pytest.mark.parametrize("kw, match", [({"players": 5}, "players 3 or 4"), ({"max_chars": 4}, "max_chars"),
                                       ({"penalty": -1.0}, "penalty"), ({"bluff": 1.5}, "bluff"),
                                       ({"expert": "solver"}, "expert one of"), ({"players": "3"}, "wrong type")])
def test_knobs_are_validated_with_clear_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        get_task("werewolf", **kw)


def test_deals_are_every_role_assignment_and_fixed_by_the_game_number():
    assert len(W.deals(3)) == 12 and len(W.deals(4)) == 36
    assert all(d.wolf != d.seer and d.peek != d.seer for d in W.deals(4))
    assert W.deal_of(417, 3) == W.deal_of(417, 3)
    assert {W.deal_of(g, 3) for g in range(100, 1000)} == set(W.deals(3))
    assert [W.parse_answer(e.answer)[1] for e in TASK.deal_examples()] == W.deals(3)
    e = TASK.make_example(random.Random(5))
    assert W.parse_answer(e.answer) == (3, W.deal_of(int(e.prompt[1:]), 3)) and e.target == ""


def test_a_whole_game_as_each_seat_sees_it_and_the_team_payoffs():
    env, streams, total, info = play(["seer P1=good\n", "villager\n", "seer P0=wolf\n", "P2\n", "2\n", "P0\n"])
    result = "votes: P0>P2 P1>P2 P2>P0\nout: P2 (wolf)\nvillage wins\n"
    assert streams[0] == ("P0/3 seer P1=good\nP0: seer P1=good\nP1: villager\nP2: seer P0=wolf\nvote: P2\n" + result)
    assert streams[1] == "P1/3 villager\nP0: seer P1=good\nP1: villager\nP2: seer P0=wolf\nvote: 2\n" + result
    assert streams[2] == "P2/3 wolf\nP0: seer P1=good\nP1: villager\nP2: seer P0=wolf\nvote: P0\n" + result
    assert total == [1.0, 1.0, -1.0] and env.to_move() is None  # a team game: the village +1 each, the wolf -1
    assert info["winner"] == "village" and info["out"] == 2 and info["roles"] == ["seer", "villager", "wolf"]
    _, _, total, info = play(["villager\n", "villager\n", "villager\n", "P1\n", "P0\n", "P1\n"])
    assert total == [-1.0, -1.0, 1.0] and info["out"] == 1 and info["winner"] == "wolf"


def test_the_most_votes_put_a_seat_out_and_a_tie_nobody():
    assert W.wolf_out([1, 2, 1], 3) == 1 and W.wolf_out([1, 2, 0], 3) is None and W.wolf_out([None] * 3, 3) is None
    assert W.wolf_out([1, 1, None, 0], 4) == 1 and W.wolf_out([1, 0, 0, 1], 4) is None
    assert W.payoffs(W.Deal(2, 0, 1), None, 3) == [-1.0, -1.0, 1.0]


def test_illegal_actions_cost_the_penalty_are_told_and_never_crash():
    long = "seer P2=wolf and i am very sure of it\n"
    env, streams, total, info = play([long, "a\nb\n", "villager\n", "P2\n", "wolf\n", "P2\n"])
    heard = "seer P2=wolf and i am very sure"  # the first 32 characters, stripped
    assert streams[1].startswith(f"P1/3 villager\nP0: {heard}\nP1: a\nb\n! a statement is one line")
    assert f"! a statement has at most 32 characters: the others heard {heard!r} (penalty 1)" in streams[0]
    assert "'wolf' is not a vote" in streams[1] and "counted as no vote" in streams[1]
    assert "'P2' is not a vote" in streams[2]  # not for oneself
    assert env.statements[:2] == [heard, "a"] and env.votes == [2, None, None]
    # the wolf P2 is out with the one vote cast: the village wins; every illegal action cost its mover 1
    assert total == [1.0 - 1.0, 1.0 - 2.0, -1.0 - 1.0] and info["out"] == 2
    observations, rewards, done, info = env.step("P1\n")
    assert done and rewards == [0.0] * 3 and observations == [[], [], []] and info["tool_error"] == "the game is over"
    with pytest.raises(RuntimeError, match="before reset"):
        TASK.make_env().step("P1\n")
    with pytest.raises(ValueError, match="4-player game"):
        TASK.make_env().reset(Example("G1", "4|0|1|2", ""))
    _, _, _, info = play(["x\n", "P1\n"][:1])
    assert info["tool_error"] is None and info["phase"] == "talk" and info["to_move"] == 1


def test_the_scripted_players_say_what_they_know_and_reason_from_the_claims():
    rng = random.Random(0)
    env = TASK.make_env()
    env.reset(EX)
    assert env.play("scripted", rng) == "seer P1=good\n"  # the seer tells its peek
    env.step("seer P1=good\n")
    assert env.play("scripted", rng) == "villager\n"
    env.step("villager\n")
    bluffer = get_task("werewolf", bluff=1.0).make_env()
    bluffer.reset(EX)
    bluffer.step("seer P1=good\n"), bluffer.step("villager\n")
    assert bluffer.play("scripted", rng) == "seer P0=wolf\n"  # the wolf accuses the seat that claimed seer
    honest = get_task("werewolf", bluff=0.0).make_env()
    honest.reset(EX)
    honest.step("seer P1=good\n"), honest.step("villager\n")
    assert honest.play("scripted", rng) == "villager\n"
    with pytest.raises(ValueError, match="no player 'solver'"):
        env.play("solver", rng)


def test_suspects_are_the_seats_every_heard_claim_allows_to_be_the_wolf():
    # villager P1, 3 seats: one seer claim and silence: the claim is the seer's (the seer always claims)
    assert W.suspects(1, "villager", ["seer P2=wolf", "villager", "villager"], 3) == [2]
    assert W.suspects(1, "villager", ["seer P2=wolf", "villager", "seer P0=wolf"], 3) == [0, 2]  # a bluff: either
    assert W.suspects(1, "villager", ["seer P1=wolf", "villager", "villager"], 3) == [0]  # a lie about oneself
    assert W.suspects(1, "villager", ["villager", "villager", "villager"], 3) == [0, 2]  # a silent seer: anyone
    # the seer knows: its peek, and that any other claimant lies
    assert W.suspects(0, "seer P1=good", ["seer P1=good", "villager", "villager"], 3) == [2]
    assert W.suspects(0, "seer P1=good", ["seer P1=good", "villager", "seer P0=wolf"], 3) == [2]
    assert W.suspects(0, "seer P1=good", ["seer P1=good", "seer P0=wolf", "villager"], 3) == [2]  # P1 lies, yet
    # the peek says it is good: the seer trusts what it saw
    # 4 seats: a claim that P3 is good leaves the two others
    assert W.suspects(0, "villager", ["villager", "seer P3=good", "villager", "villager"], 4) == [2]
    assert W.suspects(0, "villager", ["villager", "villager", "villager", "villager"], 4) == [1, 2, 3]
    assert W.suspects(2, "wolf", ["seer P2=wolf"], 3) == [0, 1]


@pytest.mark.parametrize("players, bluff, rate", [(3, 0.0, 1.0), (3, 0.5, 0.83), (3, 1.0, 0.63), (4, 0.5, 0.69)])
def test_the_experts_games_are_legal_reproducible_and_won_by_the_village_as_documented(players, bluff, rate):
    task = get_task("werewolf", players=players, bluff=bluff)
    wins, n = 0, 300
    for i in range(n):
        example = task.make_example(random.Random(i))
        moves = task.expert_game(example, i)
        assert moves == task.expert_game(example, i) and [a for a, _ in moves] == list(range(players)) * 2
        env, _, total, info = play([a for _, a in moves], example, task)
        assert all(info["tool_error"] is None for info in [info]) and env.to_move() is None
        wins += info["winner"] == "village"
    assert wins / n == pytest.approx(rate, abs=0.06)


def test_the_sft_warm_start_encodes_the_experts_game_as_each_seat_saw_it():
    from workbench.models import char_tokenizer
    from workbench.rollout.agents import expert_rows

    tok = char_tokenizer()
    for seed in range(3):
        moves = TASK.expert_game(EX, seed)
        _, streams, _, _ = play([a for _, a in moves])
        rows = expert_rows(tok, TASK, EX, seed)
        assert len(rows) == 3
        for k, (prompt, episode) in enumerate(rows):
            text = tok.decode(prompt, skip_special_tokens=True) + episode.completion
            assert streams[k].startswith(text) and streams[k][len(text):].startswith("votes: ")  # all but the end
            assert f"P{k}: {moves[k][1]}" in text and episode.steps == 2  # its statement after its cue
            assert text.endswith("vote: " + moves[3 + k][1])  # its vote is its last action


def test_random_players_make_legal_moves():
    rng = random.Random(1)
    for i in range(50):
        env = TASK.make_env()
        env.reset(TASK.make_example(random.Random(i)))
        while env.to_move() is not None:
            *_, info = env.step(env.play("random", rng))
            assert info["tool_error"] is None


class ScriptedPolicy:
    """A stand-in for `rollout.agents.GamePolicy` whose seat plays the scripted player too."""

    def play(self, task, example, *, opponent, games):
        out = []
        for i in range(games):
            env, _, total, _ = play([a for _, a in task.expert_game(example, i)], example, task)
            out.append({"seat": i % env.n, "return": total[i % env.n], "illegal": False})
        return out


def test_evaluation_plays_every_deal_in_every_seat():
    accuracy, records, metrics = TASK.evaluate(ScriptedPolicy())
    assert len(records) == 12 * 3 and {(r["game"], r["seat"]) for r in records} == \
        {(e.prompt, s) for e in TASK.deal_examples() for s in range(3)}
    assert sum(r["role"] == "wolf" for r in records) == 12
    village = [r["won"] for r in records if r["role"] != "wolf"]
    assert metrics["win_rate_village"] == pytest.approx(sum(village) / 24) and metrics["illegal"] == 0.0
    assert accuracy == pytest.approx((sum(village) + 12 * metrics["win_rate_wolf"]) / 36)


# ------------------------------------------------------------------------------------ the latent game


def test_the_latent_game_has_every_deal_intent_and_vote():
    for k in (1, 2, 3):
        tree = W.latent_game(3, k)
        assert int((tree.actor == cfr.TERMINAL).sum()) == 12 * k ** 3 * 2 ** 3
    tree = W.latent_game(3, 2)
    assert "P1 seer P0=wolf |1" in tree.index and tree.actions[tree.index["P1 seer P0=wolf |1"]] == ("0", "1")
    assert tree.actions[tree.index["P2 wolf |0-1-1|vote"]] == ("P0", "P1")
    # uniform play: the village's chance is the share of (deal, vote profile) pairs that put the wolf out
    u = cfr.expected_values(tree, cfr.uniform(tree))
    outs = [W.wolf_out(v, 3) == d.wolf for d in W.deals(3)
            for v in itertools.product(*[[j for j in range(3) if j != s] for s in range(3)])]
    assert (u.sum() + 1) / 2 == pytest.approx(np.mean(outs))  # village: sum = 2 P - 1 (two +1, one -1)
    start = W.solve_latent(4, 1, iterations=1)  # its first iterate: the uniform strategy
    outs = [W.wolf_out(v, 4) == d.wolf for d in W.deals(4)
            for v in itertools.product(*[[j for j in range(4) if j != s] for s in range(4)])]
    assert start.village_win == pytest.approx(np.mean(outs))
    with pytest.raises(ValueError, match="players"):
        W.latent_game(5, 2)


def scripted_games(task, n, seed=0):
    """`n` finished games of the expert, with every talk decision's environment kept (before the statement)."""
    games = []
    for i in range(n):
        example = task.make_example(random.Random(f"{seed}-{i}"))
        env = task.make_env()
        env.reset(example, i)
        decisions = []
        for _, action in task.expert_game(example, i):
            if env.phase == "talk":
                decisions.append(env.copy())
            env.step(action)
        games.append((env, decisions))
    return games


def test_a_played_games_moves_are_moves_of_the_latent_game():
    tree = W.latent_game(3, 3)
    for env, decisions in scripted_games(TASK, 20):
        intents = [i % 3 for i in range(len(env.statements))]
        moves = env.latent_moves(intents)
        assert len(moves) == 6
        for name, action in moves:
            assert action in tree.actions[tree.index[name]]
        for j, before in enumerate(decisions):  # the set named mid-game is the one the finished game records
            assert before.latent_infoset(intents[:j]) == moves[j][0]
    with pytest.raises(ValueError, match="intents for the"):
        env.latent_moves([0])


@pytest.mark.covers("lspo")
def test_cfr_from_the_uniform_start_babbles_and_gives_no_pairs():
    """Relabelling the intents is a symmetry of the latent game: CFR from the uniform strategy keeps every intent
    equally likely (the babbling equilibrium: the village wins 1/2), so no utterance is preferred."""
    tree = W.latent_game(3, 2)
    solution = cfr.cfr(tree, 60, plus=True)
    talk = [i for i, name in enumerate(tree.names) if not name.endswith("vote")]
    assert np.allclose(solution.average[talk], 0.5)
    u = cfr.expected_values(tree, solution.average)
    assert (u.sum() + 1) / 2 == pytest.approx(0.5, abs=1e-3) and cfr.nash_conv(tree, solution.average) < 0.01
    policy = cfr.as_dict(tree, solution.average)
    assert latent_pairs(["x", "x"], ["villager", "seer P1=wolf"], [0, 1],
                        intent_probs(policy, ["P0 villager |"] * 2, [0, 1])) == []


@pytest.mark.covers("lspo")
def test_lspo_end_to_end_cluster_solve_from_behaviour_and_pair():
    """Played games -> latent space (k = 2) -> CFR+ from the behaviour policy (an equilibrium where talk matters)
    -> pairs of candidate statements at each decision point, the chosen one's intent likelier there."""
    games = scripted_games(TASK, 120)
    said = [s for env, _ in games for s in env.statements]
    space = latent.fit(said, 2, seed=0)
    heard = space.assign(said).view(len(games), 3).tolist()  # one call: embedding is per batch of texts
    moves = [m for (env, _), h in zip(games, heard) for m in env.latent_moves(h)]
    solution = TASK.latent_solution(space.k, moves, iterations=150)  # CFR+ from cfr.empirical(tree, moves)
    tree = W.latent_game(3, space.k)
    sigma = cfr.from_dict(tree, solution.policy)
    assert solution.nash_conv == pytest.approx(cfr.nash_conv(tree, sigma)) and solution.nash_conv < 0.01
    u = cfr.expected_values(tree, sigma)
    assert solution.village_win == pytest.approx((u.sum() + 1) / 2) and solution.village_win > 0.6  # babbling: 1/2
    policy = solution.policy
    keys, texts, sets, rng = [], [], [], random.Random(0)
    for g, (env, decisions) in enumerate(games):
        for j, before in enumerate(decisions):  # candidates: the expert's statement and three random ones
            candidates = [env.statements[j]] + [before.play("random", rng).strip() for _ in range(3)]
            keys += [(g, j)] * 4
            texts += candidates
            sets += [before.latent_infoset(heard[g][:j])] * 4
    intents = space.assign(texts).tolist()
    pairs = latent_pairs(keys, texts, intents, intent_probs(policy, sets, intents))
    assert len(pairs) > 50
    assert all(p.chosen_prob > p.rejected_prob for p in pairs)
    assert space.assign([p.chosen for p in pairs]).tolist() == [p.chosen_intent for p in pairs]
