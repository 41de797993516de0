"""A^3T's binarized reward with REINFORCE (`gpg`): success-only data gives the SFT loss, a failure's gradient is the
negation of an identical success's, and success_only with min-abs-advantage is the NLL of the successes alone."""
import pytest
import torch

from tests.helpers import batch_with_mask
from workbench import ops, registry
from workbench.advantages.a3t import a3t_advantage, binarized_rewards, check_a3t_advantage
from workbench.masks.token_masks import min_abs_advantage
from workbench.models import build_tiny
from workbench.objectives.reinforce import reinforce
from workbench.rollout.engine import policy_forward
from workbench.tasks import get_task
from workbench.train.sft import expert_batch, sft_loss

pytestmark = pytest.mark.covers("a3t")
D = torch.float64


def a3t_loss(logp, rewards, mask, **kw):
    batch = batch_with_mask(rewards, list(range(len(rewards))), mask)
    A = a3t_advantage(batch, **kw).to(logp.dtype)
    return reinforce(logp, logp.detach(), A, mask, agg="token-mean")[0], A


def test_success_only_data_gives_the_projects_sft_loss_on_the_same_rows():
    """The trainer's SFT loss (`train.sft.sft_loss`: token-mean NLL of target + EOS) on countdown examples equals the
    a3t loss on the same rows when every row succeeded; the gradients on the model agree too."""
    model, tokenizer = build_tiny(seed=0)
    examples = get_task("countdown").eval_set(6)
    sft = sft_loss(model, tokenizer, examples)
    prompt_ids, prompt_mask, response_ids, mask = expert_batch(tokenizer, get_task("countdown"), examples)
    logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, response_ids, mask)
    ours, A = a3t_loss(logp, [1.0] * len(examples), mask)
    torch.testing.assert_close(ours, sft, rtol=1e-6, atol=1e-6)
    assert torch.equal(A, mask)  # +1 on every valid token
    g_sft = torch.autograd.grad(sft, list(model.parameters()), retain_graph=True)
    g_ours = torch.autograd.grad(ours, list(model.parameters()))
    for a, b in zip(g_sft, g_ours):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_the_gradient_on_a_failed_trajectory_is_the_negation_of_that_on_an_identical_success():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 5, 7, dtype=D, generator=g, requires_grad=True)
    tokens = torch.randint(0, 7, (1, 5), generator=g)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]], dtype=D)
    logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]
    (g_success,) = torch.autograd.grad(a3t_loss(logp, [1.0], mask)[0], logits, retain_graph=True)
    (g_failure,) = torch.autograd.grad(a3t_loss(logp, [0.0], mask)[0], logits)
    assert g_success.abs().sum() > 0
    torch.testing.assert_close(g_failure, -g_success, rtol=0, atol=0)


def test_the_loss_is_nll_of_successes_minus_nll_of_failures_by_hand():
    logp = torch.tensor([[-0.5, -1.0, 0.0], [-2.0, -0.25, -0.75]], dtype=D)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=D)
    loss, A = a3t_loss(logp, [1.0, 0.0], mask)
    assert A.tolist() == [[1.0, 1.0, 0.0], [-1.0, -1.0, -1.0]]
    assert float(loss) == pytest.approx(-((-0.5 - 1.0) - (-2.0 - 0.25 - 0.75)) / 5)  # token mean over 5 tokens
    assert binarized_rewards(torch.tensor([1.0, 0.0, 0.6, 0.5])).tolist() == [1.0, -1.0, 1.0, -1.0]


def test_success_only_with_min_abs_advantage_is_the_nll_of_the_successes_alone():
    logp = torch.tensor([[-0.5, -1.0, 0.0], [-2.0, -0.25, -0.75], [-0.1, -0.2, -0.3]], dtype=D)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=D)
    batch = batch_with_mask([1.0, 0.0, 1.0], [0, 1, 2], mask)
    batch.advantages = a3t_advantage(batch, success_only=True)
    assert batch.advantages[1].abs().sum() == 0
    kept = min_abs_advantage(batch, threshold=0.5)
    loss = reinforce(logp, logp, batch.advantages, kept, agg="token-mean")[0]
    successes = torch.tensor([True, False, True])
    assert float(loss) == pytest.approx(float(-ops.masked_mean(logp[successes], mask[successes])))


def test_registration_and_bad_settings():
    entry = registry.get("advantage", "a3t")
    assert entry.defaults == {"success": 0.5, "success_only": False}
    assert entry.title == "ReAct Meets ActRe: When Language Agents Enjoy Training Data Autonomy"
    with pytest.raises(ValueError, match="success must be a reward threshold"):
        check_a3t_advantage(success="high")
    with pytest.raises(ValueError, match="success_only must be true or false"):
        check_a3t_advantage(success_only=1)
