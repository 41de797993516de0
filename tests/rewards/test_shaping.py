"""PPO-max reward shaping: running moments, normalization and clipping."""
import pytest
import torch


@pytest.mark.covers("ppo-max")
def test_running_moments_equal_the_moments_of_everything_seen():
    from workbench.rewards.shaping import RunningMoments

    g = torch.Generator().manual_seed(0)
    chunks = [torch.randn(n, generator=g, dtype=torch.float64) * 3 + 1 for n in (5, 17, 2)]
    state = RunningMoments()
    for c in chunks:
        state.update(c)
    everything = torch.cat(chunks)
    assert state.mean == pytest.approx(everything.mean().item())
    assert state.std == pytest.approx(everything.std(unbiased=False).item())


@pytest.mark.covers("ppo-max")
def test_ppo_max_reward_trick_clips_and_switches_off():
    from workbench.rewards.shaping import RunningMoments, normalize_and_clip

    r = torch.tensor([0.0, 0.0, 0.0, 100.0], dtype=torch.float64)
    out = normalize_and_clip(r, state=RunningMoments(), delta=1.0)
    assert out.abs().max() <= 1.0 and out[-1] == 1.0
    off = normalize_and_clip(r, state=RunningMoments(), normalize=False, clip=False)
    assert torch.equal(off, r)
