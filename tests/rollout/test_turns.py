"""The multi-turn rollout: batch layout, masks, truncation, padding, log-probs, chat-template tool turns, and
the one-turn case equal to group sampling, greedy evaluation and SFT as they were."""
import random

import pytest
import torch

from tests.rollout.scripted import LOGP, ScriptedEngine
from workbench import ops, registry
from workbench.batch import concat
from workbench.envs.base import Env, TaskEnv, tool, user
from workbench.models import build_tiny, char_tokenizer
from workbench.rollout import HFEngine, Sampling, policy_forward, sample_groups, turns
from workbench.rollout.engine import encode_prompts, encode_responses
from workbench.rollout.turns import encode_expert, observation_ids
from workbench.tasks import Example, Task, get_task
from workbench.train.evaluate import greedy_accuracy
from workbench.train.sft import sft_loss, warm_start_key

pytestmark = pytest.mark.covers("turns")


class CountEnv(Env):
    """Tool calls end with ";" and answer "ok<n>\\n" (reward 0.25 each); any other action ends the episode
    (reward 1 iff it is "end"). The state is the number of calls so far."""

    stop = (";",)
    max_turns = 4

    def reset(self, example, seed=None):
        self.calls = 0
        return [user(example.prompt)], {"state": 0, "seed": seed}

    def step(self, action):
        if action.endswith(";"):
            self.calls += 1
            error = None if action == "go;" else "not go"
            return [tool(f"ok{self.calls}\n")], 0.25, False, {"state": self.calls, "tool_error": error}
        return [], float(action == "end"), True, {"state": None}


class CountTask(Task):
    name = "count"

    def make_env(self):
        return CountEnv()

    def expert_actions(self, example):
        return ["go;", "go;", "end"]


def script(turn_texts):
    """policy: the n-th turn's text from the number of observations ("ok") seen in the history."""
    return lambda history: turn_texts[history.count("ok")]


EX = [Example("p1:", "", ""), Example("q22:", "", "")]


def test_multi_turn_layout_masks_turns_rewards_and_infos():
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, script(["go;", "xy;", "end<eos>"]))
    batch = turns(engine, CountTask(), EX, group_size=2, sampling=Sampling(8))
    row = tok("go;ok1\nxy;ok2\nend", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert batch.response_ids.tolist() == [row] * 4
    # actions are policy tokens (mask 1), observations are not; an observation carries its action's turn id
    assert batch.mask[0].tolist() == [1] * 3 + [0] * 4 + [1] * 3 + [0] * 4 + [1] * 4  # "ok1\n": 4 tokens
    assert batch.turn[0].tolist() == [0] * 7 + [1] * 7 + [2] * 4
    assert torch.equal(batch.mu_logp, LOGP * batch.mask)
    assert batch.rewards.tolist() == [1.5] * 4 and batch.turn_rewards[0].tolist() == [0.25, 0.25, 1.0]
    assert batch.group.tolist() == [0, 0, 1, 1] and batch.prompts == ["p1:", "p1:", "q22:", "q22:"]
    assert batch.completions[0] == "go;ok1\nxy;ok2\nend" and not batch.truncated.any()
    # turn_info[i][s]: the state step s acted from, and that step's tool error
    info = batch.turn_info[0]
    assert [i["state"] for i in info] == [0, 1, 2] and [i["tool_error"] for i in info] == [None, "not go", None]
    assert info[0]["seed"] != batch.turn_info[1][0]["seed"]  # rows of a group get different episode seeds
    # turn 0 is one generate call with n = group_size (as group sampling); later turns go by token ids
    assert engine.calls == [("generate", 4), ("generate_ids", 4), ("generate_ids", 4)]


def test_rows_end_at_different_turns_and_padding_is_never_turn_zero():
    tok = char_tokenizer()
    short = {"p1:": ["end<eos>"], "q22:": ["go;", "go;", "nope<eos>"]}
    engine = ScriptedEngine(tok, lambda h: short["p1:" if "p1:" in h else "q22:"][h.count("ok")])
    batch = turns(engine, CountTask(), EX, group_size=1, sampling=Sampling(8))
    n0 = len("end") + 1
    assert batch.mask[0].tolist()[:n0] == [1] * n0 and batch.mask[0, n0:].sum() == 0
    assert batch.turn[0, n0:].eq(-1).all() and batch.turn[0, :n0].eq(0).all()
    assert torch.all(batch.response_ids[0, n0:] == tok.pad_token_id) and torch.all(batch.mu_logp[0, n0:] == 0)
    assert batch.turn_rewards.tolist() == [[1.0, 0.0, 0.0], [0.25, 0.25, 0.0]]
    assert [len(r) for r in batch.turn_info] == [1, 3]
    assert engine.calls == [("generate", 2), ("generate_ids", 1), ("generate_ids", 1)]  # only running rows
    # concatenating batches of different widths pads turn with -1, never 0
    wider = concat([batch.select(torch.tensor([0])), batch], pad_id=tok.pad_token_id)
    assert wider.turn[0, n0:].eq(-1).all()


def test_truncation_in_the_middle_of_a_turn_ends_the_episode_after_scoring_it():
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, script(["go;", "endless" * 3]))
    batch = turns(engine, CountTask(), EX[:1], group_size=1, sampling=Sampling(5))
    assert batch.truncated.tolist() == [True]
    assert batch.completions[0] == "go;ok1\nendle" and batch.mask[0].tolist() == [1] * 3 + [0] * 4 + [1] * 5
    assert batch.turn_rewards.tolist() == [[0.25, 0.0]]  # the cut action was still stepped (and failed)
    assert len(engine.calls) == 2


def test_total_budget_truncates_a_turn_and_drops_an_observation_without_room():
    tok = char_tokenizer()
    prompt = len(tok("p1:")["input_ids"])  # with <bos>
    # room for "go;" + "ok1\n" + 2 tokens of the second action: that turn is cut by the total budget
    engine = ScriptedEngine(tok, script(["go;", "go;", "end<eos>"]))
    batch = turns(engine, CountTask(), EX[:1], group_size=1, sampling=Sampling(8), max_total_tokens=prompt + 9)
    assert batch.truncated.tolist() == [True] and batch.completions[0] == "go;ok1\ngo"
    assert batch.response_ids.shape[1] == 9
    # an observation that leaves no room for another action token is not appended
    batch = turns(engine, CountTask(), EX[:1], group_size=1, sampling=Sampling(8), max_total_tokens=prompt + 7)
    assert batch.truncated.tolist() == [True] and batch.completions[0] == "go;"
    assert batch.turn_rewards.tolist() == [[0.25]]
    # max_turns caps the episode without truncating it
    batch = turns(engine, CountTask(), EX[:1], group_size=1, sampling=Sampling(8), max_turns=2)
    assert batch.turn_rewards.tolist() == [[0.25, 0.25]] and batch.truncated.tolist() == [False]
    assert batch.completions[0] == "go;ok1\ngo;"


def test_an_action_ending_in_eos_does_not_end_the_episode_by_itself():
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, script(["go;", "end<eos>"]))

    class EosEnv(CountEnv):  # treats "go<eos>" as a tool call too
        stop = ()

        def step(self, action):
            return super().step(action if action == "end" else "go;")

    task = CountTask()
    task.make_env = EosEnv
    engine.policy = script(["go<eos>", "end<eos>"])
    batch = turns(engine, task, EX[:1], group_size=1, sampling=Sampling(8))
    eos = tok.eos_token_id
    assert batch.response_ids[0].tolist()[:3] == [*tok("go", add_special_tokens=False)["input_ids"], eos]
    assert batch.completions[0] == "gook1\nend" and batch.turn_rewards.tolist() == [[0.25, 1.0]]


# ----------------------------------------------------------------------------- real engine: log-probs


@pytest.fixture(scope="module")
def engine64():
    model, tok = build_tiny(seed=0)
    return HFEngine(model.double(), tok)


class ManyStopsEnv(CountEnv):
    """Every letter ends an action turn, so a random model plays several turns."""

    stop = tuple("abcdefghijklmnopqrstuvwxyz")
    max_turns = 5

    def step(self, action):
        observations, _, _, info = super().step(action + ";")
        return observations, 0.0, self.calls >= 4, info


def test_multi_turn_logprobs_equal_one_forward_pass_and_observations_condition_later_tokens(engine64):
    task = CountTask()
    task.make_env = ManyStopsEnv
    torch.manual_seed(0)
    batch = turns(engine64, task, [Example("12+34=", "", ""), Example("7*8=", "", "")], group_size=4,
                  sampling=Sampling(6, temperature=0.9))
    steps = (batch.turn.max(-1).values + 1).tolist()
    assert max(steps) >= 3, steps  # the case this test is about
    logp, _, _ = policy_forward(engine64.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                batch.mask, temperature=0.9)
    torch.testing.assert_close(logp * batch.mask, batch.mu_logp, rtol=0, atol=1e-5)
    # observation tokens get no gradient (mask 0) ...
    leaf = logp.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(-ops.masked_mean(leaf, batch.mask), leaf)
    obs = (batch.mask == 0) & (batch.turn >= 0)
    assert obs.any() and torch.all(g[obs] == 0) and torch.all(g[batch.mask > 0] != 0)
    # ... yet condition the action tokens after them: change one observation token, later log-probs move
    row = int(torch.nonzero(obs.any(-1))[0])
    t_obs = int(torch.nonzero(obs[row])[0])
    later = (batch.mask[row] > 0) & (torch.arange(batch.mask.shape[1]) > t_obs)
    assert later.any()
    changed = batch.response_ids.clone()
    changed[row, t_obs] = engine64.tokenizer.convert_tokens_to_ids("Z")
    relogp, _, _ = policy_forward(engine64.model, batch.prompt_ids, batch.prompt_mask, changed, batch.mask, 0.9)
    assert not torch.allclose(relogp[row][later], logp[row][later])
    before = (batch.mask[row] > 0) & (torch.arange(batch.mask.shape[1]) < t_obs)
    assert torch.equal(relogp[row][before], logp[row][before])


# ----------------------------------------------------------------------------- the one-turn case


def old_sample_groups(engine, task, examples, *, group_size, max_new_tokens, temperature=1.0, top_p=1.0, stop=None):
    """Group sampling as it was before the multi-turn rollout (the reference of the equality test)."""
    gen = engine.generate([e.prompt for e in examples], n=group_size, max_new_tokens=max_new_tokens,
                          temperature=temperature, top_p=top_p, stop=stop)
    rows = [e for e in examples for _ in range(group_size)]
    return gen, torch.tensor(task.rewards(gen.texts, rows), dtype=torch.float32)


@pytest.mark.parametrize("stop", [None, ["+"]])
@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_one_turn_task_gives_the_batch_group_sampling_gave(stop, top_p):
    model, tok = build_tiny(seed=1)
    engine, task = HFEngine(model, tok), get_task("countdown")
    examples = task.sample(5, random.Random(3))
    torch.manual_seed(7)
    gen, rewards = old_sample_groups(engine, task, examples, group_size=3, max_new_tokens=9, temperature=0.8,
                                     top_p=top_p, stop=stop)
    for fn in ("turns", "sample_groups"):
        torch.manual_seed(7)
        if fn == "turns":
            sampling = Sampling(9, temperature=0.8, top_p=top_p, stop=stop)
            batch = registry.get("rollout", "turns").fn(engine, task, examples, group_size=3, sampling=sampling)
        else:
            batch = sample_groups(engine, task, examples, group_size=3, max_new_tokens=9, temperature=0.8,
                                  top_p=top_p, stop=stop)
        for name in ("prompt_ids", "prompt_mask", "response_ids", "mask", "mu_logp", "truncated"):
            ours, theirs = getattr(batch, name), getattr(gen, name)
            assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), (fn, name)
        assert torch.equal(batch.rewards, rewards) and batch.completions == gen.texts
        assert batch.prompts == [e.prompt for e in examples for _ in range(3)]
        assert batch.group.tolist() == [g for g in range(5) for _ in range(3)]
        assert torch.equal(batch.turn, torch.where(batch.mask > 0, 0, -1))
        assert batch.turn_rewards.tolist() == [[r] for r in rewards.tolist()]
        if stop:
            assert any(c.endswith("+") for c in batch.completions)  # the stop case is exercised


def test_greedy_accuracy_of_a_one_turn_task_is_what_it_was():
    model, tok = build_tiny(seed=1)
    engine, task = HFEngine(model, tok), get_task("addition", digits=1)
    examples = task.eval_set(7)
    acc, records = greedy_accuracy(engine, task, examples, max_new_tokens=5, batch_size=4, stop=["1"])
    old = []
    for start in range(0, len(examples), 4):
        chunk = examples[start:start + 4]
        gen = engine.generate([e.prompt for e in chunk], n=1, max_new_tokens=5, greedy=True, stop=["1"])
        old += [{"prompt": e.prompt, "completion": c, "answer": e.answer, "correct": s}
                for e, c, s in zip(chunk, gen.texts, task.rewards(gen.texts, chunk))]
    assert records == old and acc == sum(r["correct"] for r in old) / len(old)


class HalfTask(Task):
    """A one-turn task with a fractional score (0.3 is not exactly a float32)."""

    name = "half"

    def score(self, completion, example):
        return 0.3


def test_greedy_accuracy_keeps_exact_scores():
    model, tok = build_tiny(seed=1)
    acc, records = greedy_accuracy(HFEngine(model, tok), HalfTask(), [Example("1+2=", "3", "3")], max_new_tokens=3)
    assert records[0]["correct"] == 0.3 and acc == 0.3


def test_one_turn_sft_loss_is_target_plus_eos_as_it_was():
    model, tok = build_tiny(seed=0)
    for task in (get_task("addition"), get_task("countdown")):
        examples = task.sample(9, random.Random(0))
        prompt_ids, prompt_mask = encode_prompts(tok, [e.prompt for e in examples])
        target_ids, target_mask = encode_responses(tok, [e.target for e in examples])
        logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, target_ids, target_mask)
        old = -ops.masked_mean(logp, target_mask)
        assert torch.equal(sft_loss(model, tok, examples, task), old)
        assert torch.equal(sft_loss(model, tok, examples), old)


def test_warm_start_cache_keys_of_existing_tasks_are_unchanged():
    from types import SimpleNamespace

    spec = dict(model="tiny", task="countdown", task_kw={}, sft_steps=600, sft_lr=3e-3, sft_batch=64, seed=0,
                dtype="float32", chat_template=False, system_prompt="", answer_format="whole")
    # computed by the warm start before the multi-turn rollout existed: cached warm starts stay valid
    assert warm_start_key(SimpleNamespace(**spec)) == "0ee0bd1ed5c79dcf"
    addition = SimpleNamespace(**{**spec, "task": "addition", "task_kw": {"digits": 1}})
    assert warm_start_key(addition) == "93703780d960c93a"


def test_sft_encodes_an_expert_episode_exactly_as_the_rollout_encodes_it():
    tok = char_tokenizer()
    task = CountTask()
    actions = task.expert_actions(EX[0])
    engine = ScriptedEngine(tok, script([a if a.endswith(";") else a + "<eos>" for a in actions]))
    batch = turns(engine, task, EX[:1], group_size=1, sampling=Sampling(8))
    messages, episode = encode_expert(tok, task.make_env(), EX[0], actions)
    assert messages == [user("p1:")]
    assert batch.response_ids[0].tolist() == episode.ids and batch.mask[0].tolist() == episode.mask
    assert batch.turn[0].tolist() == episode.turn and batch.completions[0] == episode.completion
    with pytest.raises(ValueError, match="ends the episode"):
        encode_expert(tok, task.make_env(), EX[0], ["end", "go;"])


def test_task_env_is_the_one_turn_environment():
    task = get_task("addition")
    ex = Example("12+34=", "46", "46")
    env = task.make_env()
    assert isinstance(env, TaskEnv) and env.max_turns == 1 and env.stop == ()
    assert env.reset(ex, 0) == ([user("12+34=")], {"state": "12+34="})
    assert env.step("46")[1:3] == (1.0, True) and env.step("47")[1] == 0.0
    assert task.expert_actions(ex) == ["46"]


# ----------------------------------------------------------------------------- chat template


CHAT = ("{% for m in messages %}{% if m['role'] == 'user' %}U:{{ m['content'] }}\n"
        "{% elif m['role'] == 'assistant' %}A:{{ m['content'] }}<eos>\n"
        "{% elif m['role'] == 'tool' %}T:{{ m['content'] }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}A:{% endif %}")


def chat_tokenizer():
    tok = char_tokenizer()
    tok.chat_template = CHAT
    tok.use_chat_template = True
    return tok


def test_observations_are_tool_turns_of_the_chat_template():
    tok = chat_tokenizer()
    eos = tok.eos_token_id
    after_eos = observation_ids(tok, [tool("ok1")], after_eos=True)
    assert tok.decode(after_eos) == "\nT:ok1\nA:"
    # an action cut by a stop string has not closed its turn: the EOS comes with the observation (mask 0)
    assert observation_ids(tok, [tool("ok1")], after_eos=False) == [eos] + after_eos
    engine = ScriptedEngine(tok, script(["go;", "end<eos>"]))
    task = CountTask()
    batch = turns(engine, task, EX[:1], group_size=1, sampling=Sampling(8))
    assert tok.decode(batch.prompt_ids[0]) == "U:p1:\nA:"
    suffix = "<eos>\nT:ok1\n\nA:"  # CountEnv's observation is "ok1\n"
    assert tok.decode(batch.response_ids[0]) == f"go;{suffix}end<eos>"
    n_obs = len(tok(suffix, add_special_tokens=False)["input_ids"])
    assert batch.mask[0].tolist() == [1, 1, 1] + [0] * n_obs + [1, 1, 1, 1]
    # the history is the conversation the template renders (the model sees what it would at inference)
    conversation = [user("p1:"), {"role": "assistant", "content": "go;"}, tool("ok1\n"),
                    {"role": "assistant", "content": "end"}]
    assert tok.decode(torch.cat([batch.prompt_ids[0], batch.response_ids[0]])) == \
        tok.apply_chat_template(conversation, tokenize=False).rstrip("\n")


# ----------------------------------------------------------------------------- generating from token ids


def test_generate_ids_samples_as_generate_does_and_gives_each_row_its_own_budget():
    model, tok = build_tiny(seed=0)
    engine = HFEngine(model, tok)
    prompts = ["12+34=", "5+6="]
    torch.manual_seed(4)
    gen = engine.generate(prompts, max_new_tokens=6)
    ids = [row[keep > 0].tolist() for row, keep in zip(gen.prompt_ids, gen.prompt_mask)]
    torch.manual_seed(4)
    again = engine.generate_ids(ids, max_new_tokens=6)
    assert torch.equal(again.prompt_ids, gen.prompt_ids) and torch.equal(again.response_ids, gen.response_ids)
    assert torch.equal(again.mu_logp, gen.mu_logp) and again.texts == gen.texts
    cut = engine.generate_ids(ids, max_new_tokens=[2, 5])
    assert cut.mask.sum(-1).tolist() == [2, 5] and cut.truncated.tolist() == [True, True]
    assert torch.all(cut.response_ids[0, 2:] == tok.pad_token_id) and torch.all(cut.mu_logp[0, 2:] == 0)
    with pytest.raises(ValueError, match="one per prompt"):
        engine.generate_ids(ids, max_new_tokens=[2, 5, 1])
