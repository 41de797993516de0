"""TraPO's sampler: pass-rate curves per prompt over epochs, a labeled split fixed by the pool seed, unlabeled prompts
kept after warm-up when their z-normalized curve is among the top-k or has mean cosine >= thres to the reference
curves; agreement with the reference's `_compute_trajectory_cosine` and `copy_dict_with_validation`."""
import random

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TINY, DigitFirst, group_batch, resumes_exactly, task_for
from workbench.samplers.pool import PromptPool
from workbench.samplers.trapo import (SemiExample, TrapoSampler, add_to_db, check_trapo, keep_unlabeled,
                                      trajectory_scores, z_normalize)
from workbench.train import make_config
from workbench.train.metrics import read_rows

pytestmark = pytest.mark.covers("trapo")
D = torch.float64


def curves(seed, n, length):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, length, generator=g, dtype=D).tolist()


# ------------------------------------------------------------------ the score and the selection (card tests 1, 2)

def test_score_is_invariant_to_affine_transforms_of_a_curve_and_one_for_an_identical_curve():
    refs, (query,) = curves(0, 5, 8), curves(1, 1, 8)
    base = trajectory_scores([query], refs)
    for a, b in ((2.0, 0.0), (0.3, 0.7), (5.0, -1.0)):   # a > 0: a negative a flips the curve, and the sign of s
        moved = [a * p + b for p in query]
        torch.testing.assert_close(trajectory_scores([moved], refs), base, rtol=0, atol=1e-7)
        torch.testing.assert_close(trajectory_scores([query], [[a * p + b for p in r] for r in refs]), base,
                                   rtol=0, atol=1e-7)
    torch.testing.assert_close(trajectory_scores([refs[2]], [refs[2]]), torch.ones(1, dtype=D))
    torch.testing.assert_close(trajectory_scores([[0.1, 0.4, 0.2]], [[0.6, 0.3, 0.5]]), -torch.ones(1, dtype=D))
    assert -1 <= float(base) <= 1


def test_curves_are_cut_to_their_common_length_and_z_normalized_over_time():
    long, short = [0.0, 0.5, 1.0, 0.0, 0.0], [0.2, 0.4, 0.6]
    assert trajectory_scores([long], [short]).item() == pytest.approx(1.0)   # the first 3 points of both: rising
    z = z_normalize(torch.tensor([[1.0, 2.0, 3.0]], dtype=D))
    torch.testing.assert_close(z, torch.tensor([[-1.0, 0.0, 1.0]], dtype=D) / (1 + 1e-8))  # unbiased std = 1


def test_selection_is_the_top_k_union_everything_at_or_above_the_threshold():
    g = torch.Generator().manual_seed(3)
    for q in (1, 5, 10, 23):
        scores = torch.rand(q, generator=g, dtype=D) * 2 - 1
        kept = set(keep_unlabeled(scores, topk=0.1, thres=0.4))
        k = max(1, int(q * 0.1))
        top = set(torch.topk(scores, k).indices.tolist())
        above = {i for i in range(q) if scores[i] >= 0.4}
        assert top <= kept and above <= kept and kept == top | above
    assert keep_unlabeled(torch.tensor([0.1, 0.3, 0.3], dtype=D), topk=0.1, thres=0.4) == [1]  # tie: the earlier
    assert keep_unlabeled(torch.tensor([0.4, -0.2, 0.9], dtype=D), topk=0.0, thres=0.4) == [0, 2]  # k >= 1 anyway


# ------------------------------------------------------------------ the reference, transcribed

def reference_trajectory_cosine(ref_passrate_list, unlabel_passrate_list, batch_unlabeled, top_k_ratio, threshold):
    """ShenzhiYang2000/TRAPO @ 2cc9ef81fb90382377dbc6e79d6eb501d9ab2d53,
    Weakly_Supervised/Research/Semi_RL/semi_ray_trainer.py, `_compute_trajectory_cosine` L796-868 with
    `filter_dict_by_topk` L754-774 and `filter_dict_by_threshold` L776-794 (aggregate_method 'mean'), the DataProto
    loop replaced by `batch_unlabeled` (the batch's unlabeled prompt indices, one uid each, in batch order)."""
    uid2idx = {uid: [uid] for uid in batch_unlabeled}
    database_tensors = list(ref_passrate_list.values())
    min_len = min(t.size(0) for t in database_tensors)
    truncated_tensors = [t[:min_len] for t in database_tensors]
    database = torch.stack(truncated_tensors, dim=0)
    uid2query = {}
    for uid, indices in uid2idx.items():
        query_tensor = unlabel_passrate_list[uid][:min_len]
        if query_tensor.size(0) < min_len:
            raise ValueError("query_tensor length is less than min_len")
        uid2query[uid] = query_tensor
    query = torch.stack(list(uid2query.values()), dim=0)
    query_norm = (query - query.mean(dim=1, keepdim=True)) / (query.std(dim=1, keepdim=True) + 1e-8)
    db_norm = (database - database.mean(dim=1, keepdim=True)) / (database.std(dim=1, keepdim=True) + 1e-8)
    cosine_sim = F.cosine_similarity(db_norm.unsqueeze(1), query_norm.unsqueeze(0), dim=2)
    aggregate_scores = cosine_sim.mean(dim=0)
    uids = list(uid2idx.keys())
    k = max(1, int(len(uids) * top_k_ratio))
    _, topk_indices = torch.topk(aggregate_scores, k, largest=True, sorted=False)
    by_topk = {uids[i] for i in topk_indices.tolist()}
    by_threshold = {uids[i] for i, s in enumerate((aggregate_scores >= threshold).tolist()) if s}
    return aggregate_scores, by_topk | by_threshold


def reference_copy_dict_with_validation(ref_passrate_list, original_dict, prefix):
    """The same file, `copy_dict_with_validation` L716-737 (self.ref_passrate_list passed and returned)."""
    for key, value in original_dict.items():
        new_key = f"{prefix}_{key}"
        if new_key.startswith('unlabel') and new_key in ref_passrate_list:
            ref_passrate_list = {k: v for k, v in ref_passrate_list.items() if not k.startswith('unlabel')}
            ref_passrate_list[new_key] = value
        else:
            ref_passrate_list[new_key] = value
    return ref_passrate_list


@pytest.mark.parametrize("seed", range(5))
def test_scores_and_selection_agree_with_the_reference(seed):
    rng = random.Random(seed)
    labeled = {i: torch.rand(rng.randint(6, 9), generator=torch.Generator().manual_seed(seed * 10 + i), dtype=D)
               for i in range(6)}
    unlabeled = {i: torch.rand(9, generator=torch.Generator().manual_seed(seed * 100 + i), dtype=D)
                 for i in range(20, 34)}
    db = {f"label_{i}": c for i, c in labeled.items()} | {"unlabel_21": unlabeled[21][:7]}
    batch = rng.sample(sorted(unlabeled), 10)
    theirs, their_keep = reference_trajectory_cosine(db, unlabeled, batch, 0.1, 0.4)
    ours = trajectory_scores([unlabeled[u].tolist() for u in batch], [c.tolist() for c in db.values()])
    torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-12)
    assert {batch[j] for j in keep_unlabeled(ours, 0.1, 0.4)} == their_keep


def test_the_database_update_agrees_with_the_reference():
    state = TrapoSampler.init(size=8)
    state.pass_rates = {i: [(s, (i + s) % 3 / 2) for s in range(4)] for i in range(8)}
    theirs = {}
    for selected in ([1, 2], [3], [2, 5], [6]):   # 2 is selected again: the unlabeled part restarts
        add_to_db(state, selected)
        theirs = reference_copy_dict_with_validation(
            theirs, {i: [r for _, r in state.pass_rates[i]] for i in selected}, "unlabel")
    assert {f"unlabel_{i}": c for i, c in state.db.items()} == theirs and list(state.db) == [2, 5, 6]


# ------------------------------------------------------------------ the sampler over epochs (card test 3)

def fake_step(state, examples, step, rates):
    """The step's batch as the pipeline leaves it for the sampler: 2 rows per prompt, pass rate rates[id]."""
    scores = [r for e in examples for r in (float(rates[state.id_of(e.prompt)] >= 0.5),
                                             float(rates[state.id_of(e.prompt)] >= 1.0))]
    batch = group_batch(scores, [g for g in range(len(examples)) for _ in range(2)])
    batch.scores, batch.prompts = batch.rewards.clone(), [e.prompt for e in examples for _ in range(2)]
    TrapoSampler.update(state, batch)


def run_epochs(epochs, **kw):
    state, task, per_step = TrapoSampler.init(size=8, **kw), DigitFirst(), 4
    out = []
    for step in range(epochs * 8 // per_step):
        examples = TrapoSampler.select(state, task, per_step, random.Random(f"0-{step}-0"))
        out.append((state.epoch - 1, examples))
        fake_step(state, examples, step, {i: (i + step) % 3 / 2 for i in range(8)})
    return state, out


def test_before_warm_up_no_unlabeled_prompt_trains_and_after_it_some_do():
    state, steps = run_epochs(6, warm_up=3)
    labeled = set(state.labeled_ids)
    assert len(labeled) == 4
    for epoch, examples in steps:
        assert all(isinstance(e, SemiExample) and e.labeled == (state.id_of(e.prompt) in labeled) for e in examples)
        assert all(e.train for e in examples if e.labeled)
        unlabeled = [e for e in examples if not e.labeled]
        if epoch < 3:
            assert not any(e.train for e in unlabeled)
        elif unlabeled:
            assert any(e.train for e in unlabeled)   # top-k keeps at least one
    assert all(len(state.pass_rates[i]) == 6 for i in range(8))   # every prompt's curve grows once per epoch


def test_the_split_is_fixed_by_the_pool_seed_and_labeled_one_is_the_plain_pool():
    assert run_epochs(1)[0].labeled_ids == run_epochs(1)[0].labeled_ids
    assert run_epochs(1, pool_seed=1)[0].labeled_ids != run_epochs(1)[0].labeled_ids
    assert len(run_epochs(1, labeled=0.25)[0].labeled_ids) == 2
    state, task = TrapoSampler.init(size=8, labeled=1.0, warm_up=2), DigitFirst()
    pool = PromptPool.init(size=8)
    for step in range(10):
        ours = TrapoSampler.select(state, task, 4, random.Random(step))
        theirs = PromptPool.select(pool, task, 4, random.Random(step))
        assert [e.prompt for e in ours] == [e.prompt for e in theirs] and all(e.labeled and e.train for e in ours)


# ------------------------------------------------------------------ end to end, past warm-up

def test_trains_past_warm_up_and_resumes_exactly(tmp_path):
    overrides, task = task_for("trapo", **{**TINY, "steps": 8, "checkpoint_every": 4})
    overrides["recipe_overrides"]["sampler"]["warm_up"] = 2   # pool 8, 4 prompts a step: epochs 2-3 select
    assert resumes_exactly(make_config("smoke", recipe="trapo", **overrides), tmp_path, stop_after_step=4, task=task)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    trained = [r.get("trapo/trained_unlabeled") for r in rows]
    assert all(t in (None, 0.0) for t in trained[:4]) and any(t and t > 0 for t in trained[4:])


@pytest.mark.parametrize("kw, match", [
    ({"labeled": 0}, "labeled must be the labeled share"), ({"labeled": 1.5}, "labeled must be the labeled share"),
    ({"labeled": 0.05, "size": 8}, "labels no prompt"), ({"warm_up": 1}, "warm_up must be an integer >= 2"),
    ({"topk": 2}, "topk must be a share"), ({"thres": 1.5}, "thres must be a cosine"),
    ({"update_db": "yes"}, "update_db must be true or false"), ({"size": 0}, "size must be an integer >= 1")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        check_trapo(**kw)
    with pytest.raises(ValueError, match=match):
        TrapoSampler.init(**kw)
