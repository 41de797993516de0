"""The KL penalty in its two placements: in the loss and in the reward."""
import pytest
import torch

from tests.helpers import GROUPS, LENGTHS, REWARDS, make_batch
from workbench import kl, ops
from workbench.advantages.base import sequence_rewards
from workbench.advantages.baselines import opo, reinforce_plus_plus_baseline
from workbench.advantages.group import grpo
from workbench.advantages.reinforce import reinforce_plus_plus
from workbench.recipes import get_recipe, with_overrides
from workbench.regularizers.kl_penalty import kl_in_loss, kl_in_reward
from workbench.train.pipeline import Pipeline


def _kl_toy():
    g = torch.Generator().manual_seed(1)
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    logp = (torch.randn(b.mask.shape, generator=g, dtype=torch.float64) - 1.0).requires_grad_(True)
    ref = torch.randn(b.mask.shape, generator=g, dtype=torch.float64) - 1.0
    return b, logp, ref


@pytest.mark.covers("kl-penalty")
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_beta_zero_is_a_no_op_in_both_placements(estimator):
    b, logp, ref = _kl_toy()
    # In the loss: the term is 0 and adds no gradient; the logged KL value is still reported.
    loss, value = kl_in_loss(logp, ref, b.mask, beta=0.0, estimator=estimator)
    assert float(loss) == 0.0 and not loss.requires_grad
    assert float(value) == pytest.approx(float(ops.masked_mean(kl.estimate(logp.detach(), ref, estimator), b.mask)))
    pg = -(grpo(b) * logp * b.mask).sum() / b.mask.sum()
    (pg + loss).backward()
    grad_with = logp.grad.clone()
    logp.grad = None
    pg2 = -(grpo(b) * logp * b.mask).sum() / b.mask.sum()
    pg2.backward()
    assert torch.equal(grad_with, logp.grad)
    # In the reward: the penalty is 0 and every advantage is unchanged.
    penalty = kl_in_reward(logp, ref, b.mask, beta=0.0, estimator=estimator)
    assert torch.all(penalty == 0)
    shaped = make_batch(REWARDS, GROUPS, LENGTHS, token_rewards=penalty)
    for fn in (grpo, reinforce_plus_plus, opo, reinforce_plus_plus_baseline):
        assert torch.equal(fn(shaped), fn(b))


@pytest.mark.covers("kl-penalty")
def test_in_reward_k1_summed_per_sequence_is_trl_rloo_penalty():
    b, logp, ref = _kl_toy()
    beta = 0.05
    shaped = make_batch(REWARDS, GROUPS, LENGTHS, token_rewards=kl_in_reward(logp, ref, b.mask, beta=beta))
    trl = torch.tensor(REWARDS, dtype=torch.float64) - beta * ((logp.detach() - ref) * b.mask).sum(-1)
    assert torch.allclose(sequence_rewards(shaped), trl)


@pytest.mark.parametrize("target", ["regularizers:kl-penalty", "reward_shaping:kl-in-reward"])
def test_an_unknown_estimator_is_refused_when_the_recipe_is_built(target):
    recipe = "accuracy-reward" if target.startswith("regularizers") else "arlcp"
    with pytest.raises(ValueError, match=r"estimator='k4' is not one of \['k1', 'k2', 'k3', 'abs', 'k1\+', 'k2\+', "
                                         r"'k3\+', 'abs\+'\]"):
        Pipeline(with_overrides(get_recipe(recipe), {target: {"estimator": "k4"}}))
    Pipeline(with_overrides(get_recipe(recipe), {target: {"estimator": "k3+"}}))
