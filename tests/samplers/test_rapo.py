"""RAPO's pruning pool: a prompt the whole group solved never comes back; the pool never drops below a step's n
unpruned prompts; every epoch walks the unpruned ones once; a resumed sampler chooses alike."""
import copy
import random

import pytest

from tests.helpers import DigitFirst, group_batch
from workbench import registry
from workbench.samplers.rapo import RapoPool, check_rapo_sampler

pytestmark = pytest.mark.covers("rapo")
G = 2


def outcome(examples, scores_of) -> object:
    """The step's batch: G rows per chosen example, each row's score scores_of(prompt) (a list of G)."""
    scores = [s for e in examples for s in scores_of(e.prompt)]
    batch = group_batch(scores, [g for g in range(len(examples)) for _ in range(G)])
    batch.scores, batch.prompts = batch.rewards.clone(), [e.prompt for e in examples for _ in range(G)]
    return batch


def run(state, steps, n, scores_of, start=0):
    chosen = []
    for step in range(start, start + steps):
        examples = RapoPool.select(state, DigitFirst(), n, random.Random(step))
        chosen.append([state.id_of(e.prompt) for e in examples])
        RapoPool.update(state, outcome(examples, scores_of))
    return chosen


def test_pruned_prompts_never_reappear():
    """Card test 1: prompts whose group is all correct are pruned at once and never drawn again."""
    state = RapoPool.init(size=10)
    easy = {}  # the pool's first 4 prompts are solved by every sample, the rest never
    scores = lambda p: [1.0] * G if p in easy else [0.0] * G  # noqa: E731
    examples = RapoPool.select(state, DigitFirst(), 2, random.Random(-1))
    easy.update({e.prompt: True for e in state.examples[:4]})
    RapoPool.update(state, outcome(examples, scores))
    chosen = run(state, 30, 2, scores)
    pruned = set(state.pruned)
    assert pruned == set(range(4)) and state.deferred == 0
    first_seen = {i: next(s for s, ids in enumerate(chosen) if i in ids) for i in pruned}
    for i, s in first_seen.items():  # after the step it was solved in, never again
        assert all(i not in ids for ids in chosen[s + 1:])
    assert all(len(set(ids)) == 2 for ids in chosen)
    late = [i for ids in chosen[10:] for i in ids]  # by then every easy prompt was seen and pruned
    assert set(late) == set(range(4, 10))


def test_each_epoch_walks_the_unpruned_prompts_once():
    state = RapoPool.init(size=8)
    run(state, 1, 4, lambda p: [0.0] * G)
    state.pruned = [0, 1]  # as if pruned earlier
    state.cursor = len(state.shuffled)  # start a fresh epoch
    chosen = run(state, 3, 3, lambda p: [0.0] * G, start=1)  # 9 draws over 6 unpruned: one epoch and a half
    ids = [i for step in chosen for i in step]
    assert sorted(ids[:6]) == list(range(2, 8)) and set(ids) <= set(range(2, 8))


def test_pruning_stops_when_fewer_than_n_would_remain():
    """Every prompt solved every step: prune down to n, then defer (the solved prompts stay sampleable)."""
    state = RapoPool.init(size=6)
    chosen = run(state, 6, 2, lambda p: [1.0] * G)
    assert len(state.active()) == 2 and len(state.pruned) == 4 and state.deferred > 0
    assert all(set(ids) == set(state.active()) for ids in chosen[-2:])


def test_a_group_with_one_failure_is_not_pruned_and_solved_is_a_parameter():
    state = RapoPool.init(size=4)
    run(state, 2, 2, lambda p: [1.0, 0.0])
    assert state.pruned == []
    state = RapoPool.init(size=4, solved=0.5)
    run(state, 1, 2, lambda p: [1.0, 0.0])
    assert len(state.pruned) == 2


def test_a_resumed_sampler_chooses_alike():
    state = RapoPool.init(size=10)
    scores = lambda p: [1.0] * G if p.endswith(("1", "3", "5")) else [0.0, 1.0]  # noqa: E731
    run(state, 3, 3, scores)
    a, b = copy.deepcopy(state), copy.deepcopy(state)
    assert run(a, 5, 3, scores, start=3) == run(b, 5, 3, scores, start=3) and a.pruned == b.pruned


def test_registration_and_bad_settings():
    entry = registry.get("sampler", "rapo")
    assert entry.title == registry.catalog()["rapo"]["title"] and entry.confidence == "abstract-only"
    with pytest.raises(ValueError, match=r"solved=0 .* \(0, 1\]"):
        check_rapo_sampler(solved=0)
    with pytest.raises(ValueError, match=r"solved=1.5"):
        RapoPool.init(solved=1.5)
    with pytest.raises(ValueError, match="order='random': rapo walks .* use order='epoch'"):
        RapoPool.init(order="random")
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        check_rapo_sampler(size=0)
    with pytest.raises(ValueError, match="prompts_per_step=4 is more than the pool's size=3"):
        RapoPool.check_run(DigitFirst(), 4, size=3)
