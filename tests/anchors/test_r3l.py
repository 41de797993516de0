"""Agreement with R3L's reference (shiweijiezero/R3L @ d503f6c), transcribed in tests/anchors/formulas_r3l.py:
`opmd_reweight_adv` and `grpo_reweight_adv` advantages (the workflow's groups: "_explore" rows together, each verified
correction alone), the OPMD loss value and gradient, the k2 KL loss, and the pivot mask against
`_adjust_action_mask_for_retry`; float64 on our side, right padding and observation holes in the masks."""
import pytest
import torch

from tests.anchors import formulas_r3l as ref
from tests.helpers import D, anchor_mask, assert_agree, batch_with_mask, seeded
from workbench.advantages.r3l import r3l_advantage
from workbench.masks.r3l import pivotal_credit
from workbench.objectives.r3l import opmd_loss
from workbench.regularizers.kl_penalty import kl_in_loss
from workbench.rollout.r3l import BASE, PIVOT, RETRY, ROLE, SFT

pytestmark = pytest.mark.covers("r3l")

REWARDS = torch.tensor([0.0, 0.5, 1.0, 0.25])  # partial rewards: positive advantages below success, as ALFWorld's


def case(seed, groups=3, half=4, T=9):
    """Per group: `half` base rows, a retry for some, and a verified correction (reward 1) for some of those; all-
    success, all-failure and one-row groups among them. Returns (batch, the reference's task ids)."""
    g = seeded(seed)
    rows, tasks = [], []
    for k in range(groups):
        n_base = 1 if k == groups - 1 and seed % 2 else half  # a group of one explore row: the singleton branch
        base = REWARDS[torch.randint(0, 4, (n_base,), generator=g)].tolist()
        if k == 0 and seed % 3 == 0:
            base = [1.0] * n_base  # the reference's all-success group: A = 1 everywhere
        failed = [r for r in base if r < 1.0]
        retries = REWARDS[torch.randint(0, 4, (len(failed),), generator=g)].tolist()
        rows += [(k, r, BASE) for r in base] + [(k, r, RETRY) for r in retries]
        tasks += [f"{k}_explore"] * (len(base) + len(retries))
        for j, r in enumerate(retries):
            if r >= 1.0:
                rows.append((k, 1.0, SFT))
                tasks.append(f"{k}_retry_{j}")
    mask = anchor_mask(len(rows), T, g, holes=True)
    turn_info = [[{ROLE: role, PIVOT: 0}] for _, _, role in rows]
    batch = batch_with_mask([r for _, r, _ in rows], [k for k, _, _ in rows], mask, turn_info=turn_info)
    return batch, tasks


def theirs(batch, tasks, fn, **kw):
    """The reference's advantages [B, T]: each task group through `fn`, written back in row order."""
    out = torch.zeros_like(batch.mask)
    for rows in ref.group_by_task(tasks).values():
        advantages, _ = fn([float(batch.rewards[i]) for i in rows], [batch.mask[i] for i in rows], **kw)
        for i, a in zip(rows, advantages):
            out[i] = a
    return out


@pytest.mark.parametrize("seed", range(6))
def test_code_mode_opmd_matches_opmd_reweight_adv(seed):
    batch, tasks = case(seed)
    assert_agree(r3l_advantage(batch, mode="code", baseline="opmd"), theirs(batch, tasks, ref.opmd_reweight_adv))


@pytest.mark.parametrize("seed", range(6))
def test_code_mode_grpo_matches_grpo_reweight_adv(seed):
    batch, tasks = case(seed)
    assert_agree(r3l_advantage(batch, mode="code", baseline="grpo"), theirs(batch, tasks, ref.grpo_reweight_adv))


def test_an_all_success_group_gets_one_everywhere_as_the_reference():
    batch, tasks = case(0)
    group0 = batch.group == 0
    assert (batch.rewards[group0] == 1.0).all()
    for fn, baseline in ((ref.opmd_reweight_adv, "opmd"), (ref.grpo_reweight_adv, "grpo")):
        ours = r3l_advantage(batch, baseline=baseline)
        assert torch.equal(ours[group0], batch.mask[group0])  # 1.0 on every token, where GRPO gives 0
        assert torch.equal(theirs(batch, tasks, fn)[group0].double(), batch.mask[group0])


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("seed", range(3))
def test_opmd_loss_matches_the_reference_value_and_gradient(seed, agg):
    batch, _ = case(seed)
    A = r3l_advantage(batch)
    g = seeded(50 + seed)
    logp = (-3.0 * torch.rand(batch.mask.shape, generator=g, dtype=D)).requires_grad_(True)
    for tau in (1.0, 0.0, 2.5):
        ours, _ = opmd_loss(logp, logp.detach(), A, batch.mask, agg=agg, tau=tau)
        reference, metrics = ref.opmd_policy_loss(logp, batch.mask, A, tau=tau, loss_agg_mode=agg)
        assert_agree(ours, reference, leaf=logp)
        assert metrics["opmd_loss"] == pytest.approx(float(ours.detach()))


def test_k2_kl_loss_matches_the_reference():
    """The algorithm's kl_loss_fn k2 at kl_coef 0.001: our kl-penalty(beta=0.001, estimator="k2"), token mean."""
    batch, _ = case(1)
    g = seeded(7)
    logp = (-2.0 * torch.rand(batch.mask.shape, generator=g, dtype=D)).requires_grad_(True)
    ref_logp = logp.detach() + 0.3 * torch.randn(batch.mask.shape, generator=g, dtype=D)
    ours, _ = kl_in_loss(logp, ref_logp, batch.mask, beta=0.001, estimator="k2", agg="token-mean")
    reference, _ = ref.calculate_kl_loss(logp, ref_logp, batch.mask, kl_coef=0.001)
    assert_agree(ours, reference, leaf=logp)


def multi_turn_row(g, n_turns, width):
    """One row's (action mask with every action token 1, turn ids): turns of 1-3 action tokens then 1-2 observation
    tokens (the last turn has none), right-padded to `width`."""
    mask, turn = [], []
    for k in range(n_turns):
        n_act, n_obs = (int(torch.randint(1, 4, (), generator=g)), int(torch.randint(1, 3, (), generator=g)))
        n_obs = 0 if k == n_turns - 1 else n_obs
        mask += [1.0] * n_act + [0.0] * n_obs
        turn += [k] * (n_act + n_obs)
    return mask + [0.0] * (width - len(mask)), turn + [-1] * (width - len(turn))


@pytest.mark.parametrize("seed", range(4))
def test_pivot_mask_matches_adjust_action_mask_for_retry(seed):
    """The reference zeroes the first k assistant segments of a full action mask, in the first attempt and in its
    retry; ours zeroes turns k < k_pivot, on a base row (its prefix sampled, mask 1) and on a retry (its prefix
    replayed, mask 0 already): the same trained tokens."""
    g = seeded(seed)
    B, width = 8, 24
    rows = [multi_turn_row(g, int(torch.randint(1, 5, (), generator=g)), width) for _ in range(B)]
    full = torch.tensor([m for m, _ in rows], dtype=D)
    turn = torch.tensor([t for _, t in rows])
    pivots = [int(torch.randint(0, int(turn[i].max()) + 1, (), generator=g)) for i in range(B)]
    roles = [BASE if i % 2 else RETRY for i in range(B)]
    given = torch.tensor([[float(roles[i] == RETRY and 0 <= t < pivots[i]) for t in turn[i].tolist()]
                          for i in range(B)], dtype=D)  # a retry's replayed prefix: mask 0 from the rollout
    batch = batch_with_mask([0.0] * B, [0] * B, full * (1 - given), turn=turn,
                            turn_info=[[{ROLE: role, PIVOT: k}] for role, k in zip(roles, pivots)])
    expected = full.clone()
    for i, k in enumerate(pivots):
        ref._adjust_action_mask_for_retry(expected[i], k)
    assert torch.equal(pivotal_credit(batch), expected)
