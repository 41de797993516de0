"""DOTS's rollout replay: a step's fresh groups are filled up to n groups with whole stored groups (their behaviour
log-probs kept); the buffer never holds more than 512 groups, each question once (its latest group); with every
prompt fresh (fresh = 1) nothing is replayed (DOTS alone); zero-variance groups are replayed, as in the reference;
a resumed run replays what the straight one does; and a transcription of the reference's `select_buffer` agrees."""
import pickle
import random

import pytest
import torch

from tests.helpers import DigitFirst, group_batch, step_context
from workbench import registry
from workbench.samplers.dots import Dots
from workbench.transforms.dots_replay import buffer_groups, check_dots_replay, dots_replay

pytestmark = pytest.mark.covers("dots-rr")
G = 2


def fresh(groups: dict, step: int, G: int = G):
    """groups {question: rewards}: one group per question, with mu_logp marking (question, step, row)."""
    rewards = [r for rs in groups.values() for r in rs]
    batch = group_batch(rewards, [g for g, rs in enumerate(groups.values()) for _ in rs])
    batch.scores, batch.prompts = batch.rewards.clone(), [q for q, rs in groups.items() for _ in rs]
    batch.completions = [f"{q}:{step}:{i}" for q, rs in groups.items() for i in range(len(rs))]
    batch.mu_logp = -torch.rand(batch.mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(step))
    return batch


def step(questions: dict, n: int, t: int, state: dict, G: int = G, **kw):
    """One call of the transform on fresh groups {question: rewards} at step t, n = prompts_per_step."""
    ctx = step_context(step=t, group_size=G, prompts_per_step=n, state=state, component="group_transform:dots-rr")
    return dots_replay(fresh(questions, t, G), ctx, **kw), ctx


def test_a_step_is_filled_up_to_n_groups_with_whole_stored_groups_keeping_their_behaviour_logp():
    state = {}
    first, _ = step({"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [1.0, 1.0], "d": [0.0, 1.0]}, 4, 0, state)
    assert first.size == 4 * G  # nothing stored yet: the step is as sampled
    out, ctx = step({"e": [1.0, 0.0], "a": [0.0, 0.0]}, 4, 3, state)  # a is fresh again: not replayed
    assert out.size == 4 * G and out.completions[:2 * G] == ["e:3:0", "e:3:1", "a:3:0", "a:3:1"]
    replayed = out.prompts[2 * G::G]
    assert len(set(replayed)) == 2 and set(replayed) <= {"b", "c", "d"}
    for j, q in enumerate(replayed):  # whole groups, rows as stored at step 0 (mu_logp included), new group ids
        rows = [first.prompts.index(q) + i for i in range(G)]
        at = slice(2 * G + j * G, 2 * G + (j + 1) * G)
        assert out.completions[at] == [f"{q}:0:{i}" for i in range(G)]
        assert torch.equal(out.mu_logp[at], first.mu_logp[rows]) and torch.equal(out.rewards[at], first.rewards[rows])
        assert out.group[at].tolist() == [2 + j] * G
    assert ctx.metrics == {"replay/replayed_share": 0.5, "replay/buffer_groups": 5.0, "replay/replayed_age": 3.0}
    assert buffer_groups(state["buffer"]) == ["b", "c", "d", "e", "a"]  # a's latest group replaced its older one


def test_the_buffer_never_exceeds_512_groups_and_holds_each_question_once_its_latest_group():
    state, rng = {}, random.Random(0)
    for t in range(90):  # 8 fresh groups a step from 1500 questions: repeats and more than 512 distinct
        qs = rng.sample(range(1500), 8)
        out, ctx = step({f"q{q}": [float(rng.random() < 0.5) for _ in range(G)] for q in qs}, 16, t, state)
        buffer = state["buffer"]
        keys = [e.key for e in buffer.entries]
        held = buffer_groups(buffer)
        assert len(buffer) <= 512 * G and len(held) <= 512 and len(keys) == G * len(held)
        for q in held:  # each question once: G rows, all from its latest step
            steps = {e.step for e in buffer.of_key(q)}
            assert len(buffer.of_key(q)) == G and len(steps) == 1
        for q in qs:
            assert {e.step for e in buffer.of_key(f"q{q}")} == {t}
        assert out.size == (8 if t == 0 else 16) * G and ctx.metrics["replay/buffer_groups"] == len(held)
    assert len(held) == 512 and buffer.evicted > 0


def test_with_every_prompt_fresh_nothing_is_replayed_dots_alone():
    """fresh = 1: the sampler selects all n prompts each step, the transform replays nothing (the card's test 3)."""
    sampler, task, state = Dots.init(size=10, mu=2, fresh=1.0), DigitFirst(), {}
    for t in range(6):
        examples = Dots.select(sampler, task, 4, random.Random(t))
        groups = {str(e.prompt): [1.0, 0.0] for e in examples}
        batch = fresh(groups, t)
        ctx = step_context(step=t, group_size=G, prompts_per_step=4, state=state, examples=list(examples))
        out = dots_replay(batch, ctx)
        assert out is batch and ctx.examples == examples and ctx.metrics["replay/replayed_share"] == 0.0
        Dots.update(sampler, out)
    assert len(buffer_groups(state["buffer"])) >= 4  # stored all the same, never drawn


def test_zero_variance_groups_are_replayed_as_in_the_reference():
    """The reference's removal of all-0 / all-1 groups is commented out: they stay in the buffer and are drawn."""
    state = {}
    step({"zeros": [0.0, 0.0], "ones": [1.0, 1.0]}, 2, 0, state)
    out, ctx = step({"x": [1.0, 0.0]}, 3, 1, state)
    assert sorted(out.prompts[G::G]) == ["ones", "zeros"] and ctx.metrics["replay/replayed_share"] == 2 / 3


def test_replayed_groups_join_the_steps_examples_so_that_group_ids_index_them():
    sampler, task, state = Dots.init(size=10, mu=1, fresh=0.5), DigitFirst(), {}
    for t in range(3):
        examples = Dots.select(sampler, task, 4, random.Random(t))
        ctx = step_context(step=t, group_size=G, prompts_per_step=4, state=state, examples=list(examples),
                           component="group_transform:dots-rr")
        out = dots_replay(fresh({str(e.prompt): [1.0, 0.0] for e in examples}, t), ctx)
        assert out.size == 4 * G and len(ctx.examples) == 4
        assert [str(ctx.examples[int(g)].prompt) for g in out.group] == out.prompts
        Dots.update(sampler, out)


def test_a_resumed_run_replays_what_the_straight_one_replays():
    """Draws come from the component's stream (seed, step, round, component); the state round-trips by pickle."""
    state = {}
    step({"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [1.0, 1.0], "d": [0.0, 1.0]}, 4, 0, state)
    step({"e": [1.0, 0.0], "f": [0.0, 1.0]}, 4, 1, state)
    copy = pickle.loads(pickle.dumps(state))
    a, _ = step({"g": [1.0, 0.0], "h": [0.0, 0.0]}, 4, 2, state)
    b, _ = step({"g": [1.0, 0.0], "h": [0.0, 0.0]}, 4, 2, copy)
    assert a.completions == b.completions and torch.equal(a.mu_logp, b.mu_logp)
    assert [e.key for e in state["buffer"].entries] == [e.key for e in copy["buffer"].entries]


def test_under_data_parallelism_the_ranks_keep_equal_buffers_and_replay_disjoint_groups():
    """Two ranks (threads; gather_objects joins their lists in rank order): each fills its own share up to n / 2
    groups, the replayed groups differ between the ranks, and both keep the same buffer."""
    import copy
    import threading

    world, barrier, slots = 2, threading.Barrier(2), [None, None]

    def gather_for(rank):
        def gather_objects(xs):
            slots[rank] = list(xs)
            barrier.wait()
            out = [x for s in slots for x in s]
            barrier.wait()
            return out
        return gather_objects

    start = {}
    step({q: [1.0, 0.0] for q in "abcdefgh"}, 8, 0, start)
    states, outs = [copy.deepcopy(start) for _ in range(world)], [None, None]
    shares = [{"x": [1.0, 0.0]}, {"y": [0.0, 1.0], "a": [1.0, 1.0]}]  # rank 0 has 1 fresh group, rank 1 has 2

    def run(rank):
        ctx = step_context(step=1, group_size=G, prompts_per_step=8, state=states[rank],
                           component="group_transform:dots-rr", gather_objects=gather_for(rank))
        outs[rank] = (dots_replay(fresh(shares[rank], 1), ctx), ctx.metrics)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    (out0, m0), (out1, m1) = outs
    assert out0.size == 4 * G and out1.size == 4 * G  # 1 + 3 and 2 + 2 groups
    r0, r1 = set(out0.prompts[G:]), set(out1.prompts[2 * G:])
    assert len(r0) == 3 and len(r1) == 2 and not r0 & r1 and not (r0 | r1) & {"a", "x", "y"}
    assert [(e.key, e.step) for e in states[0]["buffer"].entries] == [(e.key, e.step) for e in
                                                                     states[1]["buffer"].entries]
    assert m0 == m1 and m0["replay/replayed_share"] == 5 / 8 and m0["replay/buffer_groups"] == 10.0


# ------------------------------------------------------------------------------ the reference, transcribed

def reference_select_buffer(buffer: list, sigma: float, train_batch_size: int, buffer_size: int, perm, group_size=8):
    """ASTRAL-Group/data-efficient-llm-rl @ 59df9187b7786c0058316f886b77c13c8608c533,
    rl_training/verl/verl/trainer/ppo/ray_trainer_teacher_replay.py::select_buffer (L57-148), replay_strategy
    "random", on a buffer of rows {"index": question, "step": t}; `perm(n)` stands for torch.randperm(n).
    Returns (buffer, selected rows)."""
    n_raw = len(buffer) // group_size
    assert len(buffer) % group_size == 0
    indices = [row["index"] for row in buffer]
    # deduplication (L69-83): keep each question's last group, in place
    group_ids = indices[::group_size]
    last_occurrence = {}
    for i, gid in enumerate(group_ids):
        last_occurrence[gid] = i
    mask = [False] * len(indices)
    for i in last_occurrence.values():
        mask[i * group_size:(i + 1) * group_size] = [True] * group_size
    buffer = [row for row, keep in zip(buffer, mask) if keep]
    # "remove all 0 or all 1" (L90-98) is commented out in the reference
    n = len(buffer) // group_size
    assert n <= n_raw
    # random replay pick (L121-131)
    unique_indices = list(range(len(buffer)))[::group_size]
    selected_indices = perm(len(unique_indices))[:int((1 - sigma) * train_batch_size)]
    selected_question_indices = [unique_indices[i] for i in selected_indices]
    selected = [buffer[i] for start in selected_question_indices for i in range(start, start + group_size)]
    # FIFO trim (L134-140)
    remaining_budget = buffer_size - int(sigma * train_batch_size)
    if n > remaining_budget:
        if remaining_budget == 0:
            return None, selected
        buffer = buffer[-remaining_budget * group_size:]
    return buffer, selected


def reference_groups(buffer: list, group_size=8) -> list:
    """(question, step) of each group of a reference buffer after its next dedup (what it replays from)."""
    deduped, _ = reference_select_buffer(buffer, 0.5, 0, 10 ** 9, lambda n: list(range(n)), group_size)
    return [(row["index"], row["step"]) for row in deduped[::group_size]]


def run_both(fresh_questions: list[list[str]], buffer_size: int, B: int, sigma=0.5, group_size=8):
    """Both buffers along a sequence of steps' fresh questions (the first mu = 2 steps all fresh: the reference's
    epoch 0, whose picks are discarded), yielding (ours, the reference's candidates, ours drawn, fresh) each step."""
    ours, theirs = {}, None
    for t, qs in enumerate(fresh_questions):
        rows = [{"index": q, "step": t} for q in qs for _ in range(group_size)]
        candidates = reference_groups(theirs, group_size) if theirs else []
        if theirs is None:
            theirs = list(rows)
        else:  # L1043-1067: select (dedup, pick, trim), then append the batch (twice in the replay branch)
            theirs, _ = reference_select_buffer(theirs, sigma, B, buffer_size, lambda n: list(range(n)), group_size)
            theirs = (theirs or []) + rows + (rows if t >= 2 else [])
        out, ctx = step({q: [1.0, 0.0] * (group_size // 2) for q in qs}, B, t, ours, G=group_size,
                        groups=buffer_size)
        drawn = list(dict.fromkeys(out.prompts[len(qs) * group_size:]))
        mine = [(e.key, e.step) for e in ours["buffer"].entries[::group_size]]
        yield mine, reference_groups(theirs, group_size), candidates, drawn, qs


def test_the_buffer_agrees_with_the_references_select_buffer_while_it_is_not_full():
    """Our setting (a pool of 64 < 512): dedup keep-latest and the groups held agree step for step; our replayed
    groups are drawn from the reference's candidates less the step's fresh questions, as many as it replays."""
    rng = random.Random(1)
    seq = [rng.sample("abcdefghijkl", 4 if t < 2 else 2) for t in range(12)]
    for t, (mine, theirs, candidates, drawn, qs) in enumerate(run_both(seq, buffer_size=512, B=4)):
        assert mine == theirs
        if t >= 2:
            eligible = {q for q, _ in candidates} - set(qs)
            assert set(drawn) <= eligible and len(drawn) == min(2, len(eligible))


def test_at_capacity_the_buffer_agrees_unless_a_fresh_question_is_still_held():
    """buffer_size 6 groups, B = 4, sigma 0.5 (2 fresh a step after the all-fresh first round of 2 steps). The
    reference trims to buffer_size - sigma*B groups BEFORE appending a step's groups: after the first round (4 fresh
    a step) it holds 8 > 6 groups until its next trim; we never hold more than 6 (the newest). From the second round
    on, with fresh questions never seen before, the same FIFO. A fresh question still held: the reference trims
    before its dedup and then holds 5, we hold the newest 6 distinct; its groups are ours less the oldest."""
    new = [["a", "b", "c", "d"], ["e", "f", "g", "h"]] + [[f"n{t}a", f"n{t}b"] for t in range(2, 8)]
    for t, (mine, theirs, *_) in enumerate(run_both(new, buffer_size=6, B=4)):
        assert len(mine) <= 6
        if t == 1:
            assert [q for q, _ in theirs] == list("abcdefgh") and mine == theirs[2:]
        else:
            assert mine == theirs
    repeat = new[:4] + [["n3a", "x"]]  # n3a, fresh at step 3, is fresh again at step 4
    *_, (mine, theirs, *_) = run_both(repeat, buffer_size=6, B=4)
    assert len(mine) == 6 and len(theirs) == 5 and theirs == mine[1:]
    assert [q for q, _ in mine] == ["h", "n2a", "n2b", "n3b", "n3a", "x"] and ("n3a", 4) in mine


def test_registration_and_bad_settings():
    entry = registry.get("group_transform", "dots-rr")
    assert entry.defaults == {"groups": 512}
    assert {m.name for m in entry.logs} == {"replay/replayed_share", "replay/buffer_groups", "replay/replayed_age"}
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="groups must be an integer >= 1 .*buffer's size in prompt groups"):
            check_dots_replay(groups=bad)
    with pytest.raises(ValueError, match=r"whole groups of group_size=2 rows; this step has groups of \[1, 2\]"):
        ctx = step_context(step=0, group_size=2, prompts_per_step=2, state={})
        dots_replay(fresh({"a": [1.0, 0.0], "b": [1.0]}, 0), ctx)
