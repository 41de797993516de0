"""The multi-agent rollout: one row per (episode, agent), the others' actions as observations (mask 0), rewards per
agent on its own steps, seeded seats, rows that never acted dropped, and the SFT rows encoded as the rollout's."""
import random

import pytest
import torch

from tests.rollout.scripted import LOGP, ScriptedEngine
from workbench.envs.games import kuhn
from workbench.envs.poker import KuhnTask, infoset_context
from workbench.envs.tictactoe import TicTacToeTask
from workbench.models import build_tiny, char_tokenizer
from workbench.rollout import HFEngine, Sampling, policy_forward
from workbench.rollout.agents import GamePolicy, agents, expert_rows
from workbench.rollout.engine import encode_prompts, plain_text
from workbench.tasks import Example
from workbench.train.sft import expert_batch

pytestmark = pytest.mark.covers("agents")

TOK = char_tokenizer()
SAMPLING = Sampling(4)


def deal(cards: str) -> Example:
    return Example(prompt="", answer=cards, target="")


def kuhn_policy(strategy: dict):
    """A scripted player: the action of a pure strategy {infoset: "p" | "b"} at the row's information set, read
    off the row's text ("P0 Q:" + history)."""
    def act(history):
        text = history.replace("<bos>", "")
        card, seen = text[3], "".join(ch for ch in text[5:] if ch in "pb")
        return strategy[card + seen]
    return act


def test_self_play_rows_views_masks_and_zero_sum_rewards():
    # player 0 (Q) checks, player 1 (K) bets, player 0 calls: K wins 2
    policy = kuhn_policy({"Q": "p", "Kp": "b", "Qpb": "b"})
    batch = agents(ScriptedEngine(TOK, policy), KuhnTask(), [deal("QK")], group_size=1, sampling=SAMPLING)
    assert batch.agent.tolist() == [0, 1] and batch.episode.tolist() == [0, 0] and batch.group.tolist() == [0, 0]
    assert batch.prompts == ["P0 Q:", "P1 K:p"]  # player 1 saw the check before its first turn: its prompt
    assert batch.completions == ["pbb", "b"]
    assert batch.mask[0].tolist() == [1, 0, 1] and batch.turn[0].tolist() == [0, 0, 1]  # the opponent's bet: mask 0
    assert batch.mask[1].tolist()[:1] == [1] and batch.turn[1].tolist() == [0, -1, -1]
    assert batch.rewards.tolist() == [-2.0, 2.0] and float(batch.rewards.sum()) == 0.0
    assert batch.turn_rewards.tolist() == [[0.0, -2.0], [2.0, 0.0]]  # each on the agent's own last step
    assert torch.all(batch.mu_logp[batch.mask > 0] == LOGP) and torch.all(batch.mu_logp[batch.mask == 0] == 0)


def test_a_reward_that_arrives_on_the_other_agents_turn_goes_to_the_agents_last_step():
    # player 0 bets, player 1 folds: player 0's reward comes from player 1's action
    batch = agents(ScriptedEngine(TOK, kuhn_policy({"J": "b", "Kb": "p"})), KuhnTask(), [deal("JK")], group_size=1,
                   sampling=SAMPLING)
    assert batch.rewards.tolist() == [1.0, -1.0] and batch.turn_rewards[:, 0].tolist() == [1.0, -1.0]


def test_an_illegal_action_forfeits_with_a_penalty_and_a_row_that_never_acted_is_dropped():
    batch = agents(ScriptedEngine(TOK, lambda history: "x<eos>"), KuhnTask(), [deal("KJ")], group_size=2,
                   sampling=SAMPLING)
    assert batch.agent.tolist() == [0, 0]  # player 1 never acted: no row
    assert batch.rewards.tolist() == [-2.0, -2.0]  # the forfeit and the penalty
    assert [info[0]["tool_error"] for info in batch.turn_info] == [kuhn.step((2, 0), "", "x").illegal] * 2


def test_against_a_python_player_the_policy_takes_one_seeded_seat():
    task, examples = KuhnTask(), [deal(a + b) for a, b in ("JQ", "QK", "KJ")] * 4
    engine = ScriptedEngine(TOK, lambda history: "p")
    first = agents(engine, task, examples, group_size=4, sampling=SAMPLING, opponent="scripted")
    again = agents(engine, task, examples, group_size=4, sampling=SAMPLING, opponent="scripted")
    assert torch.equal(first.agent, again.agent) and torch.equal(first.rewards, again.rewards)
    assert set(first.agent.tolist()) == {0, 1}  # both seats drawn
    assert len(set(first.episode.tolist())) == first.size  # one row per episode
    fixed = agents(engine, task, examples, group_size=4, sampling=SAMPLING, opponent="scripted", seat="player1")
    assert set(fixed.agent.tolist()) == {1}


def test_unknown_seat_and_opponent_are_refused():
    with pytest.raises(ValueError, match=r"unknown agent 'dealer'.*\['player0', 'player1'\]"):
        agents(ScriptedEngine(TOK, lambda h: "p"), KuhnTask(), [deal("JQ")], group_size=1, sampling=SAMPLING,
               opponent="random", seat="dealer")
    from workbench.rollout.agents import check_agents
    with pytest.raises(ValueError, match="opponent must be one of"):
        check_agents(opponent="minimax")


def test_tictactoe_rows_see_the_board_after_each_of_the_other_agents_moves():
    def policy(history):  # X takes the first free cell of 0, 1, 2 (a row), O of 3, 4
        text = history.replace("<bos>", "")
        board = text.split(":")[-2][-9:]  # the latest board the row has seen
        return next(str(c) for c in ((0, 1, 2) if text[0] == "X" else (3, 4)) if board[c] == ".")

    batch = agents(ScriptedEngine(TOK, policy), TicTacToeTask(), [Example("", "." * 9, "")], group_size=1,
                   sampling=SAMPLING)
    assert batch.prompts == ["X.........:", "O.........:X........:"]
    assert batch.completions[0] == "0X..O.....:1XX.OO....:2"
    assert batch.rewards.tolist() == [1.0, -1.0]


def test_expert_rows_are_what_the_rollout_encodes_and_kuhn_contexts_match_them():
    task = KuhnTask(expert="scripted")
    for cards in ("JK", "KQ", "QJ"):
        rows = expert_rows(TOK, task, deal(cards), seed=0)
        engine = ScriptedEngine(TOK, kuhn_policy({name: "b" if name[0] == "K" else "p"
                                                  for player in (0, 1) for name in kuhn.INFOSETS[player]}))
        batch = agents(engine, task, [deal(cards)], group_size=1, sampling=SAMPLING)
        for r, (prompt, episode) in enumerate(rows):
            width = len(episode.ids)
            assert prompt == batch.prompt_ids[r][batch.prompt_mask[r] > 0].tolist()
            assert episode.ids == batch.response_ids[r][:width].tolist() and episode.mask == batch.mask[r][:width].tolist()
    # every information set's context is the row's text when it acts there
    for name in ("Q", "Kpb", "Jp", "Qb"):
        messages, turns = infoset_context(name)
        text = plain_text(messages) + "".join(a + plain_text(o) for a, o in turns)
        assert text[3] == name[0] and "".join(ch for ch in text[5:] if ch in "pb") == name[1:]


def test_sft_rows_of_a_game_are_one_per_agent_that_acted():
    examples = [deal("JQ"), deal("KJ")]
    prompt_ids, prompt_mask, response_ids, mask = expert_batch(TOK, KuhnTask(expert="solver"), examples)
    assert prompt_ids.shape[0] >= 2 * 1 and prompt_ids.shape[0] <= 2 * 2
    assert torch.all(mask.sum(-1) >= 1)


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny(seed=0)
    return HFEngine(model.double(), tok), model.double(), tok


def test_rollout_logprobs_are_one_forward_pass_of_each_row(tiny):
    engine, model, _ = tiny
    torch.manual_seed(0)
    batch = agents(engine, TicTacToeTask(), [Example("", "." * 9, "")], group_size=3,
                   sampling=Sampling(2, temperature=1.0))
    logp, _, _ = policy_forward(model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    torch.testing.assert_close((logp * batch.mask).float(), batch.mu_logp, rtol=0, atol=1e-5)
    assert (batch.mask == 0)[batch.turn >= 0].any() or batch.turn.max() == 0  # observations, when a game went on


def test_game_policy_reads_the_models_action_probabilities_at_each_context(tiny):
    engine, model, tok = tiny
    policy = GamePolicy(engine, model, tok, Sampling(2))
    contexts = [infoset_context("Q"), infoset_context("Kpb")]
    probs = policy.action_probs(KuhnTask(), contexts, ["p", "b"])
    for (messages, turns), row in zip(contexts, probs):
        text = plain_text(messages) + "".join(a + plain_text(o) for a, o in turns)
        ids, mask = encode_prompts(tok, [text])
        logits = model(input_ids=ids, attention_mask=mask).logits[0, -1].double()
        expected = torch.softmax(logits, -1)[[tok.convert_tokens_to_ids("p"), tok.convert_tokens_to_ids("b")]]
        torch.testing.assert_close(torch.tensor(row, dtype=torch.float64), expected, rtol=1e-6, atol=1e-9)


def test_a_frozen_past_opponent_is_sampled_from_its_own_engine_and_has_no_rows():
    from types import SimpleNamespace

    policy = ScriptedEngine(TOK, lambda history: "p")   # the policy always checks / folds
    past = ScriptedEngine(TOK, lambda history: "b")     # the frozen iterate always bets / calls
    ctx = SimpleNamespace(step=0, opponents={"past": past})
    batch = agents(policy, KuhnTask(), [deal("QK")] * 2, group_size=4, sampling=SAMPLING, opponent="past", ctx=ctx)
    assert len(set(batch.episode.tolist())) == batch.size  # one row per game: the policy's
    assert all(set(c) <= {"p", "b"} for c in batch.completions)
    seen = "".join(c[1:] for c, a in zip(batch.completions, batch.agent.tolist()) if a == 0)
    assert "b" in seen and past.calls and policy.calls  # the past iterate's bets are what player 0 observed
    with pytest.raises(ValueError, match="opponent 'past' is a frozen earlier iterate: the recipe's reference must keep"):
        agents(policy, KuhnTask(), [deal("QK")], group_size=2, sampling=SAMPLING, opponent="past")


def test_a_past_opponent_without_a_kept_iterate_is_refused_before_training():
    from workbench.recipes import get_recipe, with_overrides
    from workbench.train.pipeline import Pipeline

    recipe = with_overrides(get_recipe("self-play-vs-past"), {"reference": "sft"})
    with pytest.raises(ValueError, match=r"rollout:agents: opponent 'past' is a frozen earlier iterate"):
        Pipeline(recipe).check_task(KuhnTask())
    Pipeline(get_recipe("self-play-vs-past")).check_task(KuhnTask())
