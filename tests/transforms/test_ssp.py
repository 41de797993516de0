"""SSP's self-play step: valid proposals are solved n times through the real rollout and environments (a scripted
policy playing both roles from what it observes), proposers get 1 - p or the penalty, the batch comes back as proposer
rows then solver rows with agents, episodes and groups; reward-based dynamic sampling composes `dynamic-sampling`;
the recipe trains."""
import random
import re
from collections import Counter

import pytest

from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.envs.search_propose import ANSWER_KEY
from workbench.models import char_tokenizer
from workbench.rollout import Sampling, turns
from workbench.tasks import get_task
from workbench.text.answers import search_answer
from workbench.transforms.ssp import ssp

pytestmark = pytest.mark.covers("ssp")
TASK = get_task("search-propose")
TOKENIZER = char_tokenizer()
G, N, BUDGET = 3, 4, 10
STEP = re.compile(r"\[([^\]]*)\]([^\[]*)")  # a search action and the observation after it


def observed(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(query, facts shown) of every search in a transcript."""
    return [(q, [tuple(f.split(">")) for f in obs.split() if ">" in f]) for q, obs in STEP.findall(text)]


class Player:
    """Both roles from what the history shows (no corpus): the proposer follows the first fact pointing in, as the
    task's expert does, up to `hops` searches, then poses; the solver follows the subject's facts until an entity
    points nowhere, then answers it. `pose(prompt, i)` / `solve(prompt, i)`: whether the i-th final action of
    `prompt` is the right one ("Q:Nobody" / "A:Nobody" otherwise)."""

    def __init__(self, pose, solve, hops=3):
        self.pose, self.solve, self.hops, self.finals = pose, solve, hops, Counter()

    def final(self, prompt: str, right: str, wrong: str, ok) -> str:
        i, self.finals[prompt] = self.finals[prompt], self.finals[prompt] + 1
        return (right if ok(prompt, i) else wrong) + "<eos>"

    def __call__(self, history: str) -> str:
        text = history.replace("<bos>", "")
        if text.startswith("?>"):
            prompt = text.split("[")[0]
            searches = observed(text[len(prompt):])
            if not searches:
                return f"[{prompt[2:]}]"
            query, facts = searches[-1]
            into = [s for s, o in facts if o == query]
            if into and len(searches) < self.hops:
                return f"[{into[0]}]"
            return self.final(prompt, f"Q:{into[0] if into else query}", "Q:Nobody", self.pose)
        prompt = text[:text.index("?") + 1]
        searches = observed(text[len(prompt):])
        if not searches:
            return f"[{prompt[:-1]}]"
        query, facts = searches[-1]
        out = [o for s, o in facts if s == query]
        return f"[{out[0]}]" if out else self.final(prompt, f"A:{query}", "A:Nobody", self.solve)


def planned(plan: dict):
    """ok(prompt, i) from a plan {prompt: [bool, ...]} (a prompt not in it: always right)."""
    return lambda prompt, i: plan.get(prompt, [True] * (i + 1))[i]


def world(player, examples_of_round=None, step_examples=None, group_size=G):
    """(the step's proposer batch, its context): the real `turns` rollout over the scripted engine, scores = rewards
    (the reward stage of a recipe without reward functions); ctx.rollout and ctx.resample run the same way."""
    engine = ScriptedEngine(TOKENIZER, player)

    def rollout(examples, *, group_size, task=None, rewarded=False, **_):
        assert rewarded and task is TASK.solver  # solver rows are rewarded as the batch's own, in `search`
        return sampled(examples, group_size, task)

    def sampled(examples, group_size, task):
        batch = turns(engine, task, examples, group_size=group_size, sampling=Sampling(BUDGET))
        batch.scores = batch.rewards.clone()
        return batch

    examples = step_examples or TASK.sample(2, random.Random(0))
    resample = (lambda r: sampled(examples_of_round[r], group_size, TASK)) if examples_of_round else None
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=group_size, prompts_per_step=len(examples),
                      max_new_tokens=BUDGET, pad_id=TOKENIZER.pad_token_id, examples=examples, task=TASK,
                      engine=engine, rollout=rollout, resample=resample)
    return sampled(examples, group_size, TASK), ctx


def question_of(example) -> str:
    return f"{example.target[2:]}?"


def test_registered_with_the_references_defaults():
    entry = registry.get("group_transform", "ssp")
    assert entry.defaults == {"n": 5, "reward_type": "1-acc", "left": 0.0, "right": 1.0, "format_penalty": 0.0,
                              "dynamic_rounds": 0}
    assert entry.family == "multiagent" and entry.title == registry.catalog()["ssp"]["title"]
    assert set(entry.provides) == {"rewards", "agent", "episode"}


def test_valid_proposals_are_solved_and_proposers_get_one_minus_the_success_rate():
    """Proposal 0 of prompt 0 is solved by all 4 attempts (reward 0), proposal 1 by one (0.75), proposal 2 poses no
    valid question (the penalty); prompt 1's three proposals are all invalid."""
    examples = TASK.sample(2, random.Random(0))
    q0 = question_of(examples[0])
    pose = {examples[0].prompt: [True, True, False], examples[1].prompt: [False] * G}
    solve = {q0: [True] * N + [True, False, False, False]}
    batch, ctx = world(Player(planned(pose), planned(solve)), step_examples=examples)
    out = ssp(batch, ctx, n=N, format_penalty=-1.0)
    proposer, solver = out.agent == 0, out.agent == 1
    assert out.agent.tolist() == [0] * 2 * G + [1] * 2 * N  # proposer rows first, then the solver's
    assert out.rewards[proposer].tolist() == [0.0, 0.75, -1.0] + [-1.0] * G
    assert out.scores[proposer].tolist() == [1.0, 1.0, 0.0] + [0.0] * G  # the RAG check's verdict stays
    assert out.group[proposer].tolist() == batch.group.tolist()  # proposer groups as they were
    assert out.group[solver].tolist() == [2] * N + [3] * N  # one group per question, after the proposer groups
    assert out.episode.tolist() == list(range(2 * G)) + [0] * N + [1] * N  # proposal j and its attempts
    assert out.rewards[solver].tolist() == [1.0] * N + [1.0, 0.0, 0.0, 0.0]
    assert out.prompts[2 * G:] == [q0] * 2 * N
    # the solver's question is search's over the proposal's corpus, and its answer the proposal's
    assert all(info[0]["state"] == frozenset() for info in out.turn_info[2 * G:])
    assert [info[-1]["action"] for info in out.turn_info[2 * G:2 * G + N]] == \
        [f"A:{search_answer(examples[0].answer)[0]}"] * N
    assert ctx.metrics["ssp/valid_share"] == pytest.approx(2 / 6)
    assert ctx.metrics["ssp/solver_success"] == pytest.approx((1.0 + 0.25) / 2)
    assert ctx.metrics["ssp/proposer_reward"] == pytest.approx((0.75 - 4) / 6)
    assert ctx.metrics["ssp/question_hops"] == out.turn_info[0][-1]["hops"]
    advantages = grpo(out)[:, 0]  # each role normalized in its own groups
    assert advantages[2 * G:2 * G + N].abs().max() == 0  # a question every attempt solved teaches nothing
    assert advantages[3:6].abs().max() == 0 and advantages[1] > advantages[0] > advantages[2]


def test_intermediate_difficulty_and_no_valid_proposal():
    examples = TASK.sample(2, random.Random(0))
    q0 = question_of(examples[0])
    pose = {examples[0].prompt: [True, True, True], examples[1].prompt: [False] * G}
    solve = {q0: [True, True, False, False] + [True] * N + [False] * N}
    batch, ctx = world(Player(planned(pose), planned(solve)), step_examples=examples)
    out = ssp(batch, ctx, n=N, reward_type="intermediate_difficulty")
    assert out.rewards[:G].tolist() == [1.0, 0.0, 0.0] and out.rewards[G:2 * G].tolist() == [0.0] * G
    none, ctx = world(Player(lambda p, i: False, planned({})), step_examples=examples)
    alone = ssp(none, ctx, n=N, format_penalty=-1.0)
    assert alone.size == 2 * G and alone.rewards.tolist() == [-1.0] * 2 * G and alone.agent.tolist() == [0] * 2 * G
    assert ctx.metrics["ssp/solver_success"] is None and ctx.metrics["ssp/question_hops"] is None


def test_dynamic_sampling_keeps_proposer_groups_whose_rewards_differ_with_their_solver_rows():
    """Round 0: prompt 0's proposers differ, prompt 1's are all invalid (dropped, and nothing solved them); round 1
    brings two new prompts, of which the first differs: the step keeps 2 proposer groups (prompts_per_step) and the
    solver rows of their valid proposals only, episodes unique across rounds."""
    rounds = [TASK.sample(2, random.Random(r)) for r in range(3)]
    pose = {rounds[0][0].prompt: [True, True, False], rounds[0][1].prompt: [False] * G,
            rounds[1][0].prompt: [True, False, False], rounds[1][1].prompt: [False] * G}
    solve = {question_of(rounds[0][0]): [True] * N + [False] * N}
    batch, ctx = world(Player(planned(pose), planned(solve)), examples_of_round=rounds, step_examples=rounds[0])
    out = ssp(batch, ctx, n=N, format_penalty=-1.0, dynamic_rounds=3)
    proposer, solver = out.agent == 0, out.agent == 1
    assert out.prompts[:2 * G] == [rounds[0][0].prompt] * G + [rounds[1][0].prompt] * G
    assert out.group[proposer].tolist() == [0] * G + [1] * G  # renumbered as collected
    assert out.rewards[proposer].tolist() == [0.0, 1.0, -1.0, 0.0, -1.0, -1.0]
    assert out.episode[proposer].tolist() == [0, 1, 2, 6, 7, 8]
    assert out.episode[solver].tolist() == [0] * N + [1] * N + [6] * N
    assert out.group[solver].tolist() == [2] * N + [3] * N + [4] * N
    assert ctx.metrics["sampling/rounds"] == 2 and ctx.metrics["sampling/shortfall_groups"] == 0
    assert ctx.metrics["ssp/valid_share"] == pytest.approx(3 / 12)  # over every proposal played


def test_with_groups_of_one_there_is_nothing_to_filter():
    """The reference keeps a lone proposal's group (DAPO's filter would drop it): no round is resampled."""
    batch, ctx = world(Player(planned({}), planned({})), group_size=1)
    ctx.resample = lambda r: pytest.fail("resampled")
    out = ssp(batch, ctx, n=2, dynamic_rounds=3)
    assert out.agent.tolist() == [0, 0, 1, 1, 1, 1] and out.rewards[:2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("kw, match", [
    (dict(n=0), r"n=0 is the solver's attempts"), (dict(n=2.5), "n=2.5"), (dict(dynamic_rounds=-1), "dynamic_rounds"),
    (dict(reward_type="acc"), "not one of"), (dict(left="0"), "left='0'")])
def test_bad_settings_are_refused(kw, match):
    batch, ctx = world(Player(planned({}), planned({})))
    with pytest.raises(ValueError, match=match):
        ssp(batch, ctx, **kw)


def test_a_task_that_poses_no_questions_is_refused_naming_the_proposer_task():
    batch, ctx = world(Player(planned({}), planned({})))
    ctx.task = get_task("search")
    with pytest.raises(ValueError, match=r"needs a proposer task.* task 'search' is not one: train on --task "
                                         r"search-propose"):
        ssp(batch, ctx)


def test_the_opening_info_is_what_the_question_is_built_from():
    batch, ctx = world(Player(planned({}), planned({})))

    def ctx_answer(batch):
        return ctx.examples[int(batch.group[0])].answer

    question = TASK.question(batch.completions[0], batch.turn_info[0][0])
    assert batch.turn_info[0][0][ANSWER_KEY] == question.answer == ctx_answer(batch)
    assert question.prompt == batch.completions[0].rsplit("Q:", 1)[1] + "?"


# ------------------------------------------------------------------------------------------------ the recipe trains

def ssp_config(**kw):
    import workbench.recipes.multiagent_ssp  # noqa: F401  (the recipe; the lead adds it to workbench.recipes)
    from workbench.train import make_config

    return make_config("smoke", recipe="ssp", task="search-propose", steps=2, prompts_per_step=2, group_size=2,
                       sft_steps=0, eval_size=4, max_new_tokens=BUDGET, checkpoint_every=2, lr=1e-3, **kw)


def test_the_recipe_is_grpo_with_the_references_clip_and_kl():
    import workbench.recipes.multiagent_ssp  # noqa: F401
    from workbench.recipes import get_recipe

    recipe = get_recipe("ssp")
    assert [u.key for u in recipe.group_transforms] == ["ssp"] and recipe.group_transforms[0].kw == {"n": 5}
    assert recipe.objective.kw == {"eps_low": 0.2, "eps_high": 0.285} and recipe.agg == "token-mean"
    assert recipe.regularizers[0].kw == {"beta": 0.01, "estimator": "k3"}
    assert recipe.advantage[0].kw == {"allow_singletons": "keep"}


def test_the_recipe_trains_both_roles(tmp_path):
    """Two steps of the tiny model through the trainer with a scripted engine (every proposal valid, half the
    attempts right): each step's update sees proposer and solver rows; the untrained tiny model's own run too."""
    from workbench.train import make_trainer
    from workbench.train.metrics import read_rows

    rng = random.Random(0)
    trainer = make_trainer(ssp_config(), tmp_path / "scripted", progress=False).setup()
    trainer.engine = ScriptedEngine(trainer.tokenizer, Player(planned({}), lambda p, i: rng.random() < 0.5))
    trainer.engine.needs_weights = False
    trainer.run()
    rows = read_rows(tmp_path / "scripted" / "metrics.jsonl")
    assert len(rows) == 2 and all(r["ssp/valid_share"] == 1.0 for r in rows)
    assert all(r["rollouts"] == 4 + 4 * 5 and r["grad_norm"] > 0 for r in rows)  # 4 proposals, 5 attempts each
    assert any(0 < r["ssp/solver_success"] < 1 for r in rows)
    trainer = make_trainer(ssp_config(), tmp_path / "tiny", progress=False)
    trainer.run()
    rows = read_rows(tmp_path / "tiny" / "metrics.jsonl")
    assert len(rows) == 2 and all("ssp/proposer_reward" in r for r in rows)
