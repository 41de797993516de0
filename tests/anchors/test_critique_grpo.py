"""Critique-GRPO against the authors' code (formulas_critique_grpo.py): the advantage (mean only, and the group std the
released trainer applies), the mixed loss with its gradient (PPO-clip on initial tokens, p/(p + 0.1) on refinement
tokens), the critique, the refinement prompt and which refinement joins the group."""
import random

import pytest
import torch

from tests.anchors.formulas_critique_grpo import (compute_grpo_outcome_advantage, compute_token_on_off_policy_loss,
                                                  generate_critique, process_refinement_groups, refine_prompt)
from tests.helpers import AGREE_TOL, D, DigitFirst, assert_agree, random_batch
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.objectives.policy_shaping import policy_shaping
from workbench.recipes import get_recipe
from workbench.tasks.base import Example
from workbench.tasks.guidance import hinted_copies
from workbench.transforms.critique_grpo import REFINE_TEMPLATE, critique_text, feedback_text, select_refinement

pytestmark = pytest.mark.covers("critique-grpo")
RECIPE_LOSS = get_recipe("critique-grpo").objective.kw  # gamma 0.1, eps_low = eps_high = 0.2


def outcome_batch(seed, groups=(4, 4, 3)):
    """Rewards in {0, 0.5, 1} over groups of the given sizes, and the reference's inputs for them: the reward on the
    last token, uid strings."""
    g = torch.Generator().manual_seed(seed)
    group = torch.arange(len(groups)).repeat_interleave(torch.tensor(groups))
    rewards = torch.randint(0, 3, (len(group),), generator=g).to(D) / 2
    batch = RolloutBatch.from_rewards(rewards, group, torch.randint(1, 6, (len(group),), generator=g))
    token_level = torch.zeros_like(batch.mask)
    token_level[torch.arange(len(group)), batch.lengths.long() - 1] = rewards
    return batch, token_level, [f"uid-{int(i)}" for i in group]


@pytest.mark.parametrize("seed", range(4))
def test_the_advantage_is_compute_grpo_outcome_advantage_without_std(seed):
    batch, token_level, uid = outcome_batch(seed)
    theirs, _ = compute_grpo_outcome_advantage(token_level, batch.mask, uid, norm_adv_by_std_in_grpo=False)
    assert_agree(grpo(batch, **get_recipe("critique-grpo").advantage[0].kw), theirs)  # scale="none"


@pytest.mark.parametrize("seed", range(4))
def test_the_released_trainer_divides_by_the_group_std(seed):
    """Quirk: the script's grpo_use_std=False is read by nothing; the trainer passes norm_adv_by_std_in_grpo, True by
    default, so the run as released is GRPO's z-score (verl's eps 1e-6 after a Bessel std), not the paper's R - mean."""
    batch, token_level, uid = outcome_batch(seed)
    theirs, _ = compute_grpo_outcome_advantage(token_level, batch.mask, uid)
    assert_agree(grpo(batch, scale="group", eps=1e-6), theirs)
    spread = [batch.rewards[batch.group == g].std() for g in batch.group.unique()]
    if any(0 < s < 0.99 for s in spread):  # a group whose std is neither 0 nor about 1: the two differ
        assert not torch.allclose(grpo(batch, scale="none"), theirs)


def mixed_batch(seed):
    """random_batch with ratios far from 1 (the clip binds), rows 1 and 4 refinements (`prefix_mask`)."""
    logp, old, A, mask = random_batch(seed, scale=0.6)
    prefix = torch.zeros_like(mask, dtype=torch.bool)
    prefix[[1, 4]] = mask[[1, 4]] > 0
    return logp, old, A, mask, prefix


@pytest.mark.parametrize("seed", range(4))
def test_the_loss_is_compute_token_on_off_policy_loss(seed):
    """The recipe's objective (policy-shaping, 0.2 / 0.2, gamma 0.1, token mean) is the reference's loss with
    cliprange 0.2 and the config's clip_upper_bound 1.0 (upper bound max(1.0, 1.2)), value and gradient."""
    logp, old, A, mask, prefix = mixed_batch(seed)
    theirs = compute_token_on_off_policy_loss(old, logp, A, mask, cliprange=0.2, clip_upper_bound=1.0,
                                              prefix_mask=prefix)
    ours, metrics = policy_shaping(logp, old, A, mask, offpolicy_mask=prefix.to(D), **RECIPE_LOSS)
    assert_agree(ours, theirs["pg_loss"], logp, **AGREE_TOL)
    assert metrics["shaping/offpolicy_frac"] == pytest.approx(float(prefix.sum() / mask.sum()))


@pytest.mark.parametrize("clip_upper_bound", [1.0, 1.1, 1.5, 3.0])
def test_eps_high_realises_the_clip_upper_bound(clip_upper_bound):
    """max(clip_upper_bound, 1 + eps) is policy-shaping's eps_high = max(clip_upper_bound - 1, eps)."""
    logp, old, A, mask, prefix = mixed_batch(7)
    theirs = compute_token_on_off_policy_loss(old, logp, A, mask, cliprange=0.2, clip_upper_bound=clip_upper_bound,
                                              prefix_mask=prefix)
    ours, _ = policy_shaping(logp, old, A, mask, offpolicy_mask=prefix.to(D), gamma=0.1, eps_low=0.2,
                             eps_high=max(clip_upper_bound - 1.0, 0.2))
    assert_agree(ours, theirs["pg_loss"], logp, **AGREE_TOL)


def test_the_scripts_unclipped_loss_is_a_wide_clip_and_differs_from_the_catalogs():
    """Quirk: the script sets loss_remove_clip=True; a clip that never binds (eps_low 1, ratios > 0) reproduces it,
    and with ratios far from 1 it is not the catalog's clipped loss used here."""
    logp, old, A, mask, prefix = mixed_batch(1)
    unclipped = compute_token_on_off_policy_loss(old, logp, A, mask, 0.2, 1.0, prefix, loss_remove_clip=True)
    wide, _ = policy_shaping(logp, old, A, mask, offpolicy_mask=prefix.to(D), gamma=0.1, eps_low=1.0, eps_high=1e9)
    assert_agree(wide, unclipped["pg_loss"], logp, **AGREE_TOL)
    ours, _ = policy_shaping(logp, old, A, mask, offpolicy_mask=prefix.to(D), **RECIPE_LOSS)
    assert not torch.allclose(ours, unclipped["pg_loss"])


@pytest.mark.parametrize("critique", ["simple_gt", "simple"])
@pytest.mark.parametrize("score", [0.0, 1.0, 0.5, -1.0])
def test_the_critique_is_generate_critique(critique, score):
    theirs = generate_critique({"score": score, "gt": "146"}, critique)["critique"]
    assert critique_text(score, "146", critique) == theirs


def test_the_refinement_prompt_is_refine_prompt():
    """The component's default template renders the reference's prompt character for character."""
    example = Example(prompt="49+97=", answer="146", target="146")
    critique = critique_text(0.0, "146", "simple_gt")
    task, (copy,) = hinted_copies(DigitFirst(), [example], [feedback_text("12", critique, REFINE_TEMPLATE)],
                                  REFINE_TEMPLATE)
    assert task.opening(copy) == refine_prompt("49+97=", "12", critique)


@pytest.mark.parametrize("seed", range(20))
def test_the_selected_refinement_is_process_refinement_groups(seed):
    """Ties, several perfect scores, fractional and negative scores, a score above 1 (the first exactly-1 wins)."""
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    scores = [rng.choice([0.0, 1.0, 0.5, -0.5, 1.5, 0.25]) for _ in range(n)]
    (theirs,), _ = process_refinement_groups([{"score": s, "id": i} for i, s in enumerate(scores)], num_samples=n)
    assert select_refinement(scores) == theirs["id"]
