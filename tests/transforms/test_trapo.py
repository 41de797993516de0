"""TraPO's pseudo-label reward: unlabeled groups are rewarded by their unique majority answer (none on a tie), over
both rewards and scores, whatever the verifier said; unlabeled groups the sampler did not select train on nothing;
labeled groups are untouched."""
import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench.samplers.trapo import SemiExample, TrapoSampler
from workbench.train.pipeline import step_outcomes
from workbench.transforms.trapo import majority_answer, trapo

pytestmark = pytest.mark.covers("trapo")
D = torch.float64


def test_the_majority_answer_is_the_unique_most_frequent_non_empty_one():
    assert majority_answer(["a", "b", "a"]) == "a" and majority_answer(["a", "b"]) is None
    assert majority_answer(["", "", "c"]) == "c" and majority_answer(["", ""]) is None and majority_answer([]) is None


def unlabeled_step(completions_by_group, labeled, train, scores):
    """One batch, one group per entry; examples marked as the sampler marks them."""
    examples = [SemiExample(f"q{g}", "a", "t", labeled=lab, train=tr)
                for g, (lab, tr) in enumerate(zip(labeled, train))]
    rows = [(g, c) for g, cs in enumerate(completions_by_group) for c in cs]
    batch = group_batch(scores, [g for g, _ in rows])
    batch.scores, batch.completions = batch.rewards.clone(), [c for _, c in rows]
    batch.prompts = [examples[g].prompt for g, _ in rows]
    ctx = step_context(group_size=4, prompts_per_step=len(examples), examples=examples)
    return trapo(batch, ctx), ctx


def test_unlabeled_groups_are_rewarded_by_their_majority_answer_and_a_tie_gives_none():
    groups = [["12", " 12", "7", "12 "], ["3", "3", "4", "4"], ["", "", "", "5"], ["9", "1", "9", "2"]]
    out, ctx = unlabeled_step(groups, labeled=[False] * 4, train=[True] * 4, scores=[0.0] * 16)
    assert out.rewards.tolist() == [1, 1, 0, 1] + [0, 0, 0, 0] + [0, 0, 0, 1] + [1, 0, 1, 0]
    assert torch.equal(out.scores, out.rewards) and torch.equal(out.mask, torch.ones_like(out.mask))
    assert ctx.metrics["trapo/no_majority"] == 0.25 and ctx.metrics["trapo/pseudo_pass_rate"] == pytest.approx(
        (0.75 + 0 + 0.25 + 0.5) / 4)


def test_unlabeled_prompts_labels_never_reach_their_rewards_or_curves():
    groups = [["12", "12", "7", "12"], ["3", "3", "4", "3"]]
    outs = [unlabeled_step(groups, [True, False], [True, True], s)[0] for s in
            ([1, 1, 0, 1] + [0, 0, 0, 0], [1, 1, 0, 1] + [1, 0, 1, 1], [1, 1, 0, 1] + [0, 1, 1, 0])]
    for out in outs:   # the labeled group keeps its verifier scores; the unlabeled one gets the vote whatever they are
        assert out.rewards.tolist() == [1, 1, 0, 1] + [1, 1, 0, 1] and torch.equal(out.scores, out.rewards)
    state = TrapoSampler.init(size=8)
    state.index = {"q0": 0, "q1": 1}
    TrapoSampler.update(state, step_outcomes(outs[1], step_context()))
    assert state.pass_rates == {0: [(0, 0.75)], 1: [(0, 0.75)]}   # q1: 3 of 4 give "3", whatever the verifier says


def test_unlabeled_groups_not_selected_train_on_nothing_and_labeled_groups_are_untouched():
    groups = [["1", "2", "1", "1"], ["5", "5", "5", "6"], ["8", "8", "9", "9"]]
    scores = [1, 0, 1, 1] + [0, 0, 0, 1] + [1, 1, 0, 0]
    out, ctx = unlabeled_step(groups, [True, False, False], [True, False, True], scores)
    assert out.mask[:4].eq(1).all() and out.mask[4:8].eq(0).all() and out.mask[8:].eq(1).all()
    assert out.rewards[:4].tolist() == [1, 0, 1, 1]   # labeled: the verifier's
    assert ctx.metrics == {"trapo/unlabeled_groups": 2 / 3, "trapo/trained_unlabeled": 0.5, "trapo/no_majority": 0.5,
                           "trapo/pseudo_pass_rate": 0.375, "trapo/pseudo_label_accuracy": 0.0,
                           "trapo/trained_label_accuracy": 0.0}
    labeled_only, _ = unlabeled_step(groups, [True] * 3, [True] * 3, scores)
    assert torch.equal(labeled_only.rewards, torch.tensor(scores, dtype=D)) and labeled_only.mask.eq(1).all()


def test_pseudo_label_accuracy_reads_the_verifier_only_for_the_log():
    out, ctx = unlabeled_step([["5", "5", "5", "6"]], [False], [True], [1, 1, 1, 0])
    assert ctx.metrics["trapo/pseudo_label_accuracy"] == 1.0 and out.rewards.tolist() == [1, 1, 1, 0]
    out, ctx = unlabeled_step([["5", "5", "5", "6"]], [False], [True], [0, 0, 0, 1])
    assert ctx.metrics["trapo/pseudo_label_accuracy"] == 0.0 and out.rewards.tolist() == [1, 1, 1, 0]


def test_a_batch_without_its_completions_is_refused():
    batch = group_batch([1.0, 0.0], [0, 0], completions=[])
    batch.scores = batch.rewards.clone()
    with pytest.raises(ValueError, match="trapo votes on the completions' answers: batch.completions has 0"):
        trapo(batch, step_context(examples=[SemiExample("q", "a", "t", labeled=False)]))
