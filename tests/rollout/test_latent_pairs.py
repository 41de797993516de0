"""LSPO's data source: pairs of statements sampled at one context of the step's own self-play werewolf games, the
chosen one's intent likelier under the latent policy (recomputed here from the context's text), one cluster giving
no pairs, iterations that fit, expand and keep the space and policy as state (round-tripped through a checkpoint)."""
import copy
import io
import random
import re

import pytest
import torch

from tests.helpers import step_context
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.envs import werewolf as W
from workbench.envs.poker import KuhnTask
from workbench.models import build_tiny, char_tokenizer
from workbench.preference import latent
from workbench.rollout import HFEngine, Sampling
from workbench.rollout.latent_pairs import check_lspo, check_task, lspo_source
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("lspo")

TOK = char_tokenizer()
TASK = get_task("werewolf")
EXAMPLES = TASK.sample(3, random.Random(0))
SAMPLING = Sampling(16)
TALK_CUE = re.compile(r"P(\d): $")


class Spy(ScriptedEngine):
    """A scripted engine recording every sampled row: (prompt ids, response ids as kept, text)."""

    def __init__(self, policy):
        super().__init__(TOK, policy)
        self.rows = []

    def generate_ids(self, prompts, **kw):
        gen = super().generate_ids(prompts, **kw)
        lengths = gen.mask.sum(-1).long().tolist()
        for p, ids, n, text in zip(prompts, gen.response_ids.tolist(), lengths, gen.texts):
            self.rows.append((tuple(p), ids[:n], text))
        return gen


def chatty(seed=0, kinds=("villager", "seer P{x}=wolf", "seer P{x}=good", "wolf is P{x}", "i am good")):
    """A werewolf player of random statements of several kinds about random seats, and random votes."""
    rng = random.Random(seed)

    def policy(history):
        if history.endswith("vote: "):
            return f"P{rng.randrange(3)}\n"
        return rng.choice(kinds).format(x=rng.randrange(3)) + "\n"
    return policy


def run(engine, state, step=0, examples=EXAMPLES, group_size=2, **kw):
    ctx = step_context(step=step, state=state)
    batch = lspo_source(engine, TASK, examples, group_size=group_size, sampling=SAMPLING, ctx=ctx, **kw)
    return batch, ctx.metrics


def talk_contexts(spy: Spy) -> dict:
    """{context ids: [statement texts sampled there]} of the talk turns the engine was asked for (the played one and
    the candidates: a seat's statement is its first action, so its context is exactly its prompt)."""
    out = {}
    for prompt, _, text in spy.rows:
        if TALK_CUE.search(TOK.decode(list(prompt), skip_special_tokens=True)):
            out.setdefault(prompt, []).append(text)
    return out


def latent_prob(state: dict, context: str, statement: str) -> float:
    """sigma*(I(x), z(y)) read off the context's text: its seat and private line, the statements heard before."""
    opening, *heard = context.split("\n")
    seat, private = int(opening[1]), opening.split(" ", 1)[1]
    said = [line.split(": ", 1)[1] for line in heard[:-1]]
    assert [int(line[1]) for line in heard[:-1]] == list(range(len(said))) and len(said) == seat
    space = latent.LatentSpace(state["centroids"])
    z = space.assign(said + [W.clean_statement(statement, TASK.max_chars)[0]]).tolist()
    return state["policy"][W.latent_infoset(seat, private, z[:-1])][str(z[-1])]


def unpadded_prompt(batch, r):
    return tuple(batch.prompt_ids[r][batch.prompt_mask[r] > 0].tolist())


def test_pairs_are_statements_sampled_at_one_context_of_the_steps_own_games_chosen_likelier():
    """Card test (1), on the source's own output: every pair is two statements sampled at one talk context of this
    step (its prompt is that context's exact ids), the chosen one's intent likelier there under the iteration's
    latent policy (recomputed from the context's text), and every context whose statements differ in probability
    gives exactly its best-against-worst pair."""
    spy, state = Spy(chatty(0)), {}
    for step in range(2):
        spy.rows.clear()
        batch, metrics = run(spy, state, step, candidates=3, every=5)
        contexts = talk_contexts(spy)
        # 3 seats x 2 games of each deal, a played statement and 3 candidates each; P0 opens both games of a deal
        # with the same context (one decision point, its rows pooled)
        assert sum(map(len, contexts.values())) == len(EXAMPLES) * 2 * 3 * 4
        assert all(len(s) % 4 == 0 for s in contexts.values()) and len(contexts) < len(EXAMPLES) * 2 * 3
        assert batch.group.tolist() == [g for g in range(batch.size // 2) for _ in range(2)]
        assert metrics["pairs"] == batch.size // 2 > 0
        paired = {}
        for g in range(batch.size // 2):
            c, r = 2 * g, 2 * g + 1
            x = unpadded_prompt(batch, c)
            assert x == unpadded_prompt(batch, r) and x in contexts and x not in paired  # one pair per context
            text = TOK.decode(list(x), skip_special_tokens=True)
            chosen, rejected = batch.completions[c], batch.completions[r]
            assert chosen in contexts[x] and rejected in contexts[x]  # sampled there, this step
            for row, said in ((c, chosen), (r, rejected)):  # the exact ids as sampled: stop kept, no EOS
                ids = batch.response_ids[row][batch.mask[row] > 0].tolist()
                assert (x, ids, said) in spy.rows and said.endswith("\n") and TOK.eos_token_id not in ids
            probs = [latent_prob(state, text, y) for y in contexts[x]]
            assert latent_prob(state, text, chosen) == max(probs) > min(probs) == latent_prob(state, text, rejected)
            paired[x] = True
        for x, said in contexts.items():  # the contexts left out are those with nothing to prefer
            text = TOK.decode(list(x), skip_special_tokens=True)
            spread = len({latent_prob(state, text, y) for y in said}) > 1
            assert spread == (x in paired)


def test_one_cluster_gives_no_pairs_and_an_empty_batch():
    """Card test (2): one intent (k = k_max = 1, or statements with one embedding) makes every statement of a
    context equally likely: pairs 0, a batch of no rows (the trainer skips it)."""
    for engine, kw in ((Spy(chatty(1)), dict(k=1, k_max=1)), (Spy(chatty(1, kinds=("villager",))), dict(k=2))):
        state = {}
        batch, metrics = run(engine, state, **kw)
        assert batch.size == 0 and metrics["pairs"] == 0.0 and metrics["lspo/k"] == 1.0
        assert all(list(sets) == ["0"] for name, sets in state["policy"].items() if not name.endswith("vote"))


def test_an_iteration_fits_its_space_at_its_first_step_and_the_next_expands_it_up_to_k_max():
    spy, state, seen = Spy(chatty(2)), {}, []
    for step in range(5):
        _, metrics = run(spy, state, step, every=2, k=2, k_max=3, cfr_iterations=30)
        seen.append((state["iteration"], state["fitted_at"], metrics["lspo/k"]))
        assert metrics["lspo/nash_conv"] >= 0 and 0 <= metrics["lspo/village_win"] <= 1
        if step == 2:
            expanded = state["centroids"]
    assert seen == [(0, 0, 2), (0, 0, 2), (1, 2, 3), (1, 2, 3), (2, 4, 3)]  # k_max reached: refitted at 3
    assert not torch.equal(state["centroids"], expanded)  # refitted on step 4's statements
    before = copy.deepcopy(state)
    run(spy, state, 4, every=2, k=2, k_max=3)  # the step again (a resampling round): the same iteration
    assert state["fitted_at"] == 4 and torch.equal(state["centroids"], before["centroids"])
    assert state["policy"] == before["policy"]


def test_the_state_round_trips_a_checkpoint_and_the_next_step_pairs_alike():
    model, tok = build_tiny(seed=0)
    engine = HFEngine(model, tok)
    state = {}
    torch.manual_seed(0)
    run(engine, state, 0, every=3, cfr_iterations=20)
    buffer = io.BytesIO()
    torch.save(copy.deepcopy(state), buffer)  # what the pipeline's checkpoint does with its state
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert torch.equal(loaded["centroids"], state["centroids"]) and loaded["policy"] == state["policy"]
    assert {k: v for k, v in loaded.items() if k != "centroids"} == {k: v for k, v in state.items() if k != "centroids"}
    out = []
    for s in (state, loaded):
        torch.manual_seed(1)
        out.append(run(engine, s, 1, every=3, cfr_iterations=20))
    (a, ma), (b, mb) = out
    assert ma == mb and a.size == b.size > 0
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.prompt_ids, b.prompt_ids)


def test_settings_and_tasks_are_checked_before_anything_runs():
    assert registry.get("rollout", "lspo").needs == ("agents",) and registry.get("rollout", "lspo").state is dict
    for kw, match in (({"candidates": 0}, r"candidates=0 \(an int >= 1\)"), ({"k": 3, "k_max": 2}, "k=3 > k_max=2"),
                      ({"every": 2.5}, r"every=2.5"), ({"min_gap": 1.0}, r"min_gap=1.0 must be in \[0, 1\)"),
                      ({"cfr_iterations": True}, "cfr_iterations=True")):
        with pytest.raises(ValueError, match=match):
            check_lspo(**kw)
    check_task(TASK, k_max=6)
    with pytest.raises(ValueError, match="task 'kuhn' has no latent game .* --task werewolf"):
        check_task(KuhnTask())
    with pytest.raises(ValueError, match=r"4-player latent game with k_max=6 intents has 3,779,136 terminals.*"
                                         r"k_max <= 2 or players=3"):
        check_task(get_task("werewolf", players=4), k_max=6)
    with pytest.raises(ValueError, match="pipeline state"):
        lspo_source(Spy(chatty()), TASK, EXAMPLES, group_size=1, sampling=SAMPLING)
