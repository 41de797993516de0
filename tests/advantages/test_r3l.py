"""R3L's Positive Amplification and loss: with alpha = 1 and no success clause, no pivot mask and no verified
corrections the update is on-policy REINFORCE with GRPO advantages; amplification never changes a sign and leaves
negatives untouched; the code's and the paper's success values; verified corrections (A = 1) stay out of the group's
statistics; the OPMD loss is REINFORCE / (1 + tau)."""
import pytest
import torch

from tests.helpers import D, CallTask, make_batch, random_batch, seeded, step_context
from tests.rollout.scripted import ScriptedEngine
from workbench.advantages.group import grpo
from workbench.advantages.r3l import amplify, r3l_advantage
from workbench.masks.r3l import pivotal_credit
from workbench.models import char_tokenizer
from workbench.objectives.r3l import opmd_loss
from workbench.objectives.reinforce import reinforce
from workbench.rollout import Sampling, turns
from workbench.rollout.r3l import BASE, PIVOT, ROLE, SFT, r3l_rollout
from workbench.tasks import Example

pytestmark = pytest.mark.covers("r3l")


def grouped_rewards(seed, groups=4, G=6, p_success=0.3):
    """Rewards in [0, 1] (successes exactly 1, partial rewards between) for `groups` groups of G."""
    g = seeded(seed)
    partial = torch.rand(groups * G, generator=g, dtype=D).mul(4).floor() / 4  # 0, 0.25, 0.5, 0.75
    success = torch.rand(groups * G, generator=g) < p_success
    return torch.where(success, torch.ones_like(partial), partial), torch.arange(groups).repeat_interleave(G)


@pytest.mark.parametrize("mode", ["code", "paper"])
@pytest.mark.parametrize("seed", range(4))
def test_alpha_one_without_mask_or_corrections_is_on_policy_reinforce_with_grpo_advantages(seed, mode):
    """Catalog (1). The success clause sets successes to 1 (code) or alpha (paper) whatever alpha is; with it off
    (r_max=None) and alpha = 1 the advantage is GRPO's, the pivot mask of rows without a pivot is the identity, and
    the loss at tau = 0 is objective:gpg's, value and gradient."""
    rewards, group = grouped_rewards(seed)
    batch = make_batch(rewards.tolist(), group.tolist(), lengths=torch.randint(1, 6, (24,), generator=seeded(seed)))
    batch.turn = torch.where(batch.mask > 0, 0, -1)
    A = r3l_advantage(batch, mode=mode, baseline="grpo", alpha=1.0, r_max=None)
    assert torch.equal(A, grpo(batch))
    assert torch.equal(pivotal_credit(batch), batch.mask)
    logp = (-2.0 * torch.rand(batch.mask.shape, generator=seeded(9), dtype=D)).requires_grad_(True)
    ours, _ = opmd_loss(logp, logp.detach(), A, batch.mask, tau=0.0)
    theirs, _ = reinforce(logp, logp.detach(), grpo(batch), batch.mask)
    assert torch.equal(ours, theirs)
    assert torch.equal(*(torch.autograd.grad(x, logp, retain_graph=True)[0] for x in (ours, theirs)))


def test_without_failures_the_rollout_is_the_plain_base_group():
    """No failure, nothing retried: the N/2 base rows exactly as `turns` samples them, nothing masked."""
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, lambda h: ["a;", "b;", "end<eos>"][h.count("obs")])
    example = Example(prompt="1?", answer="", target="end")
    task = CallTask(prefix="obs")
    ours = r3l_rollout(engine, task, [example], group_size=4, sampling=Sampling(8), ctx=step_context())
    plain = turns(engine, task, [example], group_size=2, sampling=Sampling(8))
    assert torch.equal(ours.response_ids, plain.response_ids) and torch.equal(ours.mask, plain.mask)
    assert torch.equal(pivotal_credit(ours), ours.mask)


@pytest.mark.parametrize("baseline", ["opmd", "grpo"])
@pytest.mark.parametrize("mode", ["code", "paper"])
@pytest.mark.parametrize("seed", range(5))
def test_amplification_never_changes_a_sign_and_leaves_negatives_untouched(seed, mode, baseline):
    """Catalog (3), rewards in [0, r_max]: A < 0 stays A exactly; A > 0 stays positive (alpha A, or the success
    value); a zero stays 0 unless the row succeeded (an all-success group: 1 in the code, alpha in the paper)."""
    rewards, group = grouped_rewards(seed, p_success=0.5)
    batch = make_batch(rewards.tolist(), group.tolist())
    plain = r3l_advantage(batch, mode=mode, baseline=baseline, alpha=1.0, r_max=None)[:, 0]
    amplified = r3l_advantage(batch, mode=mode, baseline=baseline, alpha=3.0)[:, 0]
    negative, positive, zero = plain < 0, plain > 0, plain == 0
    assert torch.equal(amplified[negative], plain[negative])
    assert (amplified[positive] > 0).all()
    success = 1.0 if mode == "code" else 3.0
    assert torch.equal(amplified[positive], torch.where(rewards[positive] >= 1, success, 3.0 * plain[positive]))
    assert torch.equal(amplified[zero], torch.where(rewards[zero] >= 1, success, 0.0).to(D))
    assert negative.any() and positive.any()


def test_the_code_and_the_paper_differ_only_on_successes():
    """[0, 0, 0.5, 1]: OPMD A = R - 0.375; code: 1.0 for the success, 3 A for 0.5; paper: alpha for the success."""
    A = torch.tensor([-0.375, -0.375, 0.125, 0.625], dtype=D)
    R = torch.tensor([0.0, 0.0, 0.5, 1.0], dtype=D)
    assert amplify(A, R, mode="code", alpha=3.0, r_max=1.0).tolist() == [-0.375, -0.375, 0.375, 1.0]
    assert amplify(A, R, mode="paper", alpha=3.0, r_max=1.0).tolist() == [-0.375, -0.375, 0.375, 3.0]
    assert amplify(A, R, mode="code", alpha=2.0, r_max=None).tolist() == [-0.375, -0.375, 0.25, 1.25]
    batch = make_batch(R.tolist(), [0, 0, 0, 0])
    assert r3l_advantage(batch)[:, 0].tolist() == [-0.375, -0.375, 0.375, 1.0]  # the recipe's defaults
    single = make_batch([0.5], [0])
    assert r3l_advantage(single)[:, 0].tolist() == [1.5]  # a group of one: baseline 0 (the reference's), then x3


def test_verified_corrections_get_one_and_stay_out_of_the_groups_statistics():
    explore = make_batch([0.0, 1.0, 0.0, 1.0], [0, 0, 0, 0])
    explore.turn_info = [[{ROLE: BASE, PIVOT: 0}]] * 4
    with_sft = make_batch([0.0, 1.0, 0.0, 1.0, 1.0, 1.0], [0, 0, 0, 0, 0, 0])
    with_sft.turn_info = explore.turn_info + [[{ROLE: SFT, PIVOT: 1}]] * 2
    for baseline in ("opmd", "grpo"):
        for mode in ("code", "paper"):
            A = r3l_advantage(with_sft, mode=mode, baseline=baseline)[:, 0]
            assert torch.equal(A[:4], r3l_advantage(explore, mode=mode, baseline=baseline)[:, 0])
            assert A[4:].tolist() == [1.0, 1.0]  # the SFT term: -log pi on the guided correction


def test_the_opmd_loss_is_reinforce_divided_by_one_plus_tau():
    logp, old, A, mask = random_batch(3)
    for tau in (0.0, 1.0, 4.0):
        loss, metrics = opmd_loss(logp, old, A, mask, tau=tau)
        plain, plain_metrics = reinforce(logp, old, A, mask)
        torch.testing.assert_close(loss, plain / (1 + tau), rtol=1e-12, atol=0)
        assert metrics == plain_metrics
    with pytest.raises(ValueError, match=r"tau=-0\.5: OPMD's regularization strength must be a number >= 0"):
        opmd_loss(logp, old, A, mask, tau=-0.5)


@pytest.mark.parametrize("kw, match", [
    (dict(alpha=0.9), r"alpha=0\.9: the positive amplification factor must be a number >= 1"),
    (dict(mode="mixed"), r"mode='mixed': give 'code'"), (dict(baseline="rloo"), r"baseline='rloo': give 'opmd'"),
    (dict(r_max="1"), r"r_max='1': give the task's maximum reward"), (dict(eps=0.0), r"eps=0\.0: the std's epsilon"),
])
def test_bad_settings_are_refused_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        r3l_advantage(make_batch([0.0, 1.0], [0, 0]), **kw)
