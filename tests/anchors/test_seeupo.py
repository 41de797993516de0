"""Agreement with AgentEvolver's SeeUPO pieces (tests/anchors/formulas_seeupo.py, modelscope/AgentEvolver branch
`seeupo` @ e59dea4) on random episodes of 1 to 4 turns, one sample per (trajectory, turn) on their side, one row per
trajectory on ours:

    update_ratios, applied last turn first     `later_turn_correction(correction="code")` (M_k of every turn)
    compute_grpo_outcome_advantage_local       `seeupo` advantage (norm_adv_by_std_in_grpo=False, special_norm)
    compute_advantage(ratios=) + the GSPO turn  the gradient of a plan step of the `seeupo` objective on turn k's tokens
    update (loss_mode gspo, seq-mean-token-mean) (verl's GSPO loss being `gspo`, checked against verl elsewhere)
"""
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask
from tests.anchors import formulas_seeupo as ref
from workbench import registry
from workbench.advantages.ipa import chunk_ids
from workbench.objectives.seeupo import later_turn_correction, turn_log_ratios

pytestmark = pytest.mark.covers("seeupo")
K, N, W = 4, 6, 3  # turns, trajectories, max tokens per turn


def turn_samples(seed):
    """Their layout: per turn k, [N, W] old and new log-probs and a mask (a trajectory that ended has an empty
    sample); ours: one row per trajectory, turn k's tokens then one observation token."""
    g = torch.Generator().manual_seed(seed)
    n_turns = torch.randint(1, K + 1, (N,), generator=g)
    n_turns[0] = K
    lengths = torch.randint(1, W + 1, (K, N), generator=g) * (torch.arange(K)[:, None] < n_turns[None, :])
    masks = (torch.arange(W)[None, None, :] < lengths[:, :, None]).double()                  # [K, N, W]
    old = -torch.rand(K, N, W, generator=g, dtype=D) * 2 * masks
    new = (old + torch.randn(K, N, W, generator=g, dtype=D) * 0.25) * masks
    row = lambda x, pad: torch.cat([torch.cat([x[k], torch.full((N, 1), pad, dtype=x.dtype)], 1) for k in range(K)], 1)
    turn = row(torch.arange(K)[:, None, None].expand(K, N, W), -1)
    turn = torch.where(turn < 0, torch.arange(K).repeat_interleave(W + 1)[None, :].expand(N, -1), turn)
    return masks, old, new, row(masks, 0.0), row(old, 0.0), row(new, 0.0), turn, n_turns


def code_corrections(masks, old, new):
    """[K, N] the `ratios` each turn's advantages are multiplied by, turns updated last first (None -> 1)."""
    ratios, out = None, torch.ones(K, N, dtype=D)
    for k in reversed(range(K)):
        if ratios is not None:
            out[k] = ratios
        ratios = ref.update_ratios(ratios, old[k], new[k], masks[k])
    return out


@pytest.mark.parametrize("seed", range(8))
def test_code_correction_is_update_ratios_applied_last_turn_first(seed):
    masks, old, new, mask, old_row, new_row, turn, _ = turn_samples(seed)
    log_s, _ = turn_log_ratios(new_row, old_row, mask, chunk_ids(mask, turn))
    ours = later_turn_correction(log_s, correction="code").T
    assert_agree(ours, code_corrections(masks, old, new))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("special_norm", [False, True])
def test_grae_is_compute_grpo_outcome_advantage_local(seed, special_norm):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(8, 3, dtype=D)
    rewards = torch.rand(8, generator=g, dtype=D).round(decimals=1)
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    ours = registry.get("advantage", "seeupo").fn(batch_with_mask(rewards, groups, mask), special_norm=special_norm)
    token_level = torch.zeros(8, 3, dtype=D)
    token_level[:, -1] = rewards
    theirs, _ = ref.compute_grpo_outcome_advantage_local(token_level, mask, groups, norm_adv_by_std_in_grpo=False,
                                                         special_norm=special_norm)
    assert_agree(ours, theirs)


@pytest.mark.parametrize("special_norm", [False, True])
def test_groups_of_one_keep_their_reward_as_the_code_with_allow_singletons_keep(special_norm):
    """compute_grpo_outcome_advantage_local gives a group of one mean 0 (A = R, before the batch standardization of
    special_norm): allow_singletons="keep"; True gives those rows 0 (before the standardization), False refuses."""
    mask = torch.ones(7, 3, dtype=D)
    rewards = torch.tensor([0.0, 0.4, 1.0, 0.7, 0.9, 0.2, 0.6], dtype=D)
    groups = [0, 0, 0, 1, 2, 2, 3]  # rows 3 and 6 alone
    token_level = torch.zeros(7, 3, dtype=D)
    token_level[:, -1] = rewards
    theirs, _ = ref.compute_grpo_outcome_advantage_local(token_level, mask, groups, norm_adv_by_std_in_grpo=False,
                                                         special_norm=special_norm)
    fn = registry.get("advantage", "seeupo").fn
    batch = batch_with_mask(rewards, groups, mask)
    assert_agree(fn(batch, special_norm=special_norm, allow_singletons="keep"), theirs)
    silenced = token_level * torch.tensor([1.0, 1, 1, 0, 1, 1, 0], dtype=D)[:, None]
    zero_alone, _ = ref.compute_grpo_outcome_advantage_local(silenced, mask, groups, norm_adv_by_std_in_grpo=False,
                                                             special_norm=special_norm)
    assert_agree(fn(batch, special_norm=special_norm, allow_singletons=True), zero_alone)
    with pytest.raises(ValueError, match="group of one"):
        fn(batch, special_norm=special_norm)


@pytest.mark.parametrize("seed", range(6))
def test_a_plan_step_is_the_codes_gspo_update_of_that_turn(seed):
    masks, old, new, mask, old_row, new_row, turn, _ = turn_samples(seed)
    A_traj = torch.randn(N, generator=torch.Generator().manual_seed(100 + seed), dtype=D)
    ratios = code_corrections(masks, old, new)
    gspo = registry.get("objective", "gspo").fn
    ids = chunk_ids(mask, turn)
    for k in range(K):
        logp = new_row.clone().requires_grad_(True)
        step = torch.where(ids == k, logp, logp.detach())
        loss, _ = registry.get("objective", "seeupo").fn(step, old_row, A_traj[:, None] * mask, mask, turn=turn,
                                                         correction="code")
        (ours,) = torch.autograd.grad(loss, logp)
        theirs_logp = new[k].clone().requires_grad_(True)
        advantages = ref.corrected_advantages(A_traj[:, None] * masks[k], ratios[k])
        theirs, _ = gspo(theirs_logp, old[k], advantages, masks[k], eps_low=0.2, eps_high=0.2,
                         agg="seq-mean-token-mean", denom=None) if masks[k].any() else (None, None)
        if theirs is None:
            assert torch.count_nonzero(ours) == 0
            continue
        # their turn-k batch holds a sample of every trajectory; we divide by all N too (an ended one adds 0)
        (g_theirs,) = torch.autograd.grad(theirs * (masks[k].sum(-1) > 0).sum() / N, theirs_logp)
        positions = (ids == k)
        torch.testing.assert_close(ours[positions], g_theirs[masks[k] > 0])
        assert torch.count_nonzero(ours[~positions]) == 0
