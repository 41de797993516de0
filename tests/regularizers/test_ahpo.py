"""AHPO's SFT term (MM-HELIX, arXiv 2510.08540) with its GRPO half: gate off is GRPO's gradient exactly, an all-fail
group has no advantage but an SFT gradient on its expert trace, the expert row never perturbs the sampled rows'
gradient, and the term's token-mean normalization."""
import math

import pytest
import torch

from tests.helpers import D
from workbench import ops, registry
from workbench.advantages.ampo import ampo_advantage
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.context import Forward
from workbench.objectives.ppo import ppo_clip
from workbench.recipes import Recipe, get_recipe, use
from workbench.regularizers.ahpo import AHPO_TITLE, ahpo_sft, expert_tokens
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("ahpo")
G, T, AGG = 3, 4, "seq-mean-token-mean"


def sampled(scores, lengths) -> RolloutBatch:
    """Groups of G sampled rows (rewards = scores), right-padded to T, offpolicy_mask 0."""
    n = len(scores)
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(D)
    s = torch.tensor(scores, dtype=D)
    return RolloutBatch(response_ids=torch.zeros(n, T, dtype=torch.long), mask=mask,
                        group=torch.arange(n // G).repeat_interleave(G), rewards=s.clone(), scores=s,
                        offpolicy_mask=torch.zeros(n, T, dtype=D))


def with_expert(batch: RolloutBatch, groups: list[int], length: int = 3) -> RolloutBatch:
    """`batch` plus one expert row per group in `groups`, as group_transform:ahpo leaves it: after its group's rows,
    mask 0, offpolicy_mask on its `length` tokens, the verifier's reward 1."""
    rows = []
    for i in range(batch.size):
        rows.append((i, False))
        if i + 1 == batch.size or batch.group[i + 1] != batch.group[i]:
            if int(batch.group[i]) in groups:
                rows.append((int(batch.group[i]), True))
    n = len(rows)
    mask, off = torch.zeros(n, T, dtype=D), torch.zeros(n, T, dtype=D)
    group, rewards = torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=D)
    for r, (i, expert) in enumerate(rows):
        if expert:
            off[r, :length], group[r], rewards[r] = 1.0, i, 1.0
        else:
            mask[r], group[r], rewards[r] = batch.mask[i], batch.group[i], batch.rewards[i]
    return RolloutBatch(response_ids=torch.zeros(n, T, dtype=torch.long), mask=mask, group=group, rewards=rewards,
                        scores=rewards.clone(), offpolicy_mask=off)


def logp_for(batch: RolloutBatch) -> torch.Tensor:
    g = torch.Generator().manual_seed(batch.size)
    return (-torch.rand(batch.size, T, generator=g, dtype=D) - 0.1).requires_grad_(True)


def grpo_loss(batch, logp, advantages):
    """The GRPO half as the pipeline runs it on an on-policy step (old = logp)."""
    denom = ops.Denominators.of(batch.mask)
    loss, _ = ppo_clip(logp, logp.detach(), advantages, batch.mask, agg=AGG, denom=denom)
    return loss, denom


def ahpo_loss(batch, logp, coef=1.0):
    """GRPO over the on-policy rows (advantage:ampo, the recipe's) + the SFT term."""
    loss, denom = grpo_loss(batch, logp, ampo_advantage(batch, allow_singletons=False))
    sft, metrics = ahpo_sft(Forward(logp=logp), batch, agg=AGG, denom=denom, coef=coef)
    return loss + sft, metrics


def grad(loss, x):
    return torch.autograd.grad(loss, x)[0]


def test_registered_with_the_cards_reading():
    e = registry.get("regularizer", "ahpo")
    assert e.title == AHPO_TITLE == registry.catalog()["ahpo"]["title"] and e.confidence == "partial"
    assert e.defaults == {"agg": "token-mean", "denom": None, "coef": 1.0} and e.reads == ("offpolicy_mask",)
    assert registry.get("group_transform", "ahpo").defaults == {"r_hat": 1}
    recipe = get_recipe("ahpo")
    assert [u.key for u in recipe.regularizers][-1] == "ahpo" and [u.key for u in recipe.advantage] == ["ampo"]


def test_gate_off_everywhere_is_grpos_gradient_exactly():
    """Card (1): every group has >= R_hat = 1 successes, so the transform appends nothing: the total gradient (GRPO +
    the SFT term) is GRPO's, bit for bit, and the SFT term is 0."""
    batch = sampled([1, 0, 0, 0, 1, 1], [4, 2, 3, 4, 1, 3])
    logp = logp_for(batch)
    total, metrics = ahpo_loss(batch, logp)
    plain, _ = grpo_loss(batch, logp, grpo(batch))
    assert torch.equal(grad(total, logp), grad(plain, logp)) and metrics["ahpo/sft_loss"] == 0.0


def test_an_expert_row_leaves_the_sampled_rows_gradient_grpos():
    """Group 0 has a success (xi = 0), group 1 fails (xi = 1) and gets its expert row: the sampled rows' gradient is
    GRPO's on the batch without it exactly (the row is outside the loss's mask, its denominators and the baseline)."""
    batch = sampled([1, 0, 0, 0, 0, 0], [4, 2, 3, 4, 1, 3])
    full = with_expert(batch, [1])
    on = torch.nonzero(full.offpolicy_mask.sum(-1) == 0).flatten()
    logp = logp_for(full)
    total, _ = ahpo_loss(full, logp)
    g = grad(total, logp)
    leaf = logp.detach()[on].clone().requires_grad_(True)
    plain, _ = grpo_loss(batch, leaf, grpo(batch))
    assert torch.equal(g[on], grad(plain, leaf))
    assert torch.equal(ampo_advantage(full, allow_singletons=False)[on], grpo(batch))


def test_an_all_fail_group_has_no_advantage_but_a_gradient_from_the_sft_term():
    """Card (2): the all-fail group's GRPO advantage is 0 on every row, yet the total gradient is not: it is the SFT
    term's, -coef / N* on each expert token, 0 on the group's sampled rows."""
    batch = with_expert(sampled([0, 0, 0], [2, 4, 3]), [0], length=3)
    A = ampo_advantage(batch, allow_singletons=False)
    assert (A == 0).all()
    logp = logp_for(batch)
    coef = 0.5
    total, metrics = ahpo_loss(batch, logp, coef=coef)
    g = grad(total, logp)
    expert = batch.offpolicy_mask > 0
    assert g.abs().sum() > 0 and (g[~expert] == 0).all()
    assert torch.allclose(g[expert], torch.full((3,), -coef / 3, dtype=D))
    assert metrics["ahpo/sft_loss"] == pytest.approx(-coef * float(logp.detach()[expert].mean()))


def test_the_sft_term_is_a_token_mean_over_the_steps_expert_tokens():
    """Two expert rows of 3 and 1 tokens: -sum logp / 4 (not a mean of row means, not the recipe's agg); the step's
    count summed over the ranks through denom.total; a minibatch without expert tokens gives exactly 0."""
    batch = with_expert(sampled([0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 1, 2]), [0], length=3)
    batch.offpolicy_mask[-1] = 0.0
    more = with_expert(sampled([0, 0, 0], [1, 1, 1]), [0], length=1)
    both = RolloutBatch(response_ids=torch.cat([batch.response_ids, more.response_ids]),
                        mask=torch.cat([batch.mask, more.mask]), group=torch.cat([batch.group, more.group + 2]),
                        offpolicy_mask=torch.cat([batch.offpolicy_mask, more.offpolicy_mask]))
    logp = logp_for(both)
    loss, _ = ahpo_sft(Forward(logp=logp), both, agg=AGG, denom=ops.Denominators.of(both.mask))
    e = expert_tokens(both)
    assert e.sum() == 4 and torch.allclose(loss, -(logp * e).sum() / 4)
    doubled = ops.Denominators(reduce=lambda x: 2 * x)  # two ranks with as many expert tokens each
    assert torch.allclose(ahpo_sft(Forward(logp=logp), both, denom=doubled)[0], loss / 2)
    none = sampled([0, 0, 0], [1, 2, 3])
    zero, metrics = ahpo_sft(Forward(logp=logp_for(none)), none, denom=ops.Denominators.of(none.mask))
    assert zero.item() == 0.0 and metrics == {"ahpo/sft_loss": 0.0}


def test_only_tokens_outside_the_policy_loss_are_supervised():
    """An off-policy row the policy loss trains (LUFFY's reference rows: mask 1) is not the SFT term's."""
    batch = with_expert(sampled([0, 0, 0], [2, 2, 2]), [0], length=2)
    batch.mask[0] = batch.offpolicy_mask[0] = torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=D)
    assert expert_tokens(batch).sum(-1).tolist() == [0, 0, 0, 2]


@pytest.mark.parametrize("coef, match", [
    (-1.0, r"coef=-1.0 weighs AHPO's SFT term .* give a finite number >= 0"),
    (math.inf, r"coef=inf needs a finite number"), (math.nan, r"coef=nan needs a finite number")])
def test_a_bad_coefficient_is_refused_when_the_recipe_is_built(coef, match):
    recipe = Recipe(key="r", title="t", summary="s", advantage=["ampo"], group_transforms=["ahpo"],
                    regularizers=[use("ahpo", coef=coef)])
    with pytest.raises(ValueError, match=match):
        Pipeline(recipe)


def test_without_the_gate_the_recipe_is_refused_for_lack_of_expert_rows():
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"], regularizers=["ahpo"])
    with pytest.raises(ValueError, match="offpolicy_mask"):
        Pipeline(recipe)
