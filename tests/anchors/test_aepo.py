"""Agreement with AEPO-arbitrary's reference (597358816/AEPO @ b353a054, `verl/trainer/ray_trainer.py` branch "AEPO"),
transcribed in tests/anchors/formulas_dcpo.py: the temperature switch, which samples replace which rows, and the
advantages the update trains on (float64, random rewards).

Ours: controller -> group_transform `aepo-arbitrary` (re-sample, select, replace) -> grpo -> advantage override.
The reference's GRPO advantages of the kept rows come from the batch before the replacement; ours from the rows
left in each group. They agree except in the one group the replaced prefix cuts (checked separately below).
"""
import pytest
import torch

from tests.helpers import assert_agree, seeded
from tests.anchors import formulas_dcpo as ref
from tests.transforms.test_aepo_resample import Rollout, rollout_batch
from workbench.advantages.aepo import aepo_override
from workbench.advantages.group import grpo
from workbench.context import StepContext
from workbench.controllers.entropy_target import EntropyTarget
from workbench.transforms.aepo_resample import aepo_resample, positive_samples

pytestmark = pytest.mark.covers("aepo-arbitrary")
G, PROMPTS = 5, 8  # the reference's rollout.n = 5; a quarter of 8 prompts is 2
ENTROPIES = [0.0, 0.3, 0.5, 0.51, 0.9]


def their_grpo(batch):
    """verl-EasyR1 GRPO on the score put on each row's last token (float64)."""
    B, T = batch.mask.shape
    tls = torch.zeros(B, T, dtype=torch.float64)
    last = (batch.mask * torch.arange(1, T + 1)).argmax(-1)
    tls[torch.arange(B), last] = batch.rewards.double()
    return ref.compute_grpo_outcome_advantage(tls, batch.mask.double(), batch.group.tolist())


def rewards(seed, n, p=0.4):
    return (torch.rand(n, generator=seeded(seed)) < p).float().tolist()


def run_both(seed, entropy, reinforce_sample_num):
    """(ours, (their rows, their advantages), main batch, re-sampled batch, the temperature each sampled at)."""
    main = rollout_batch(rewards(seed, PROMPTS * G), "b", G=G, seed=seed)
    bak = rollout_batch(rewards(seed + 100, PROMPTS // 4 * G, p=0.5), "r", G=G, seed=seed + 100, scores=False)
    state = EntropyTarget.init(initial={"temperature": 1.0, "entropy_gap": 0.0}, initial_entropy=entropy)
    driven = EntropyTarget.value(state)
    rollout = Rollout(bak)
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=PROMPTS, max_new_tokens=5,
                      examples=[f"q{i}" for i in range(PROMPTS)], rollout=rollout)
    out = aepo_resample(rollout_batch(rewards(seed, PROMPTS * G), "b", G=G, seed=seed), ctx, **driven,
                        replace_frac=reinforce_sample_num / (PROMPTS * G))
    out.advantages = grpo(out, allow_singletons=True).double()
    ours = aepo_override(out)
    theirs = ref.aepo_entropy_batch(their_grpo(main), their_grpo(bak), entropy,
                                    reinforce_sample_num=reinforce_sample_num)
    return out, ours, theirs, main, bak, rollout.calls[0][2]


def names(rows, main, bak):
    return [(bak if source == "bak" else main).completions[j] for source, j in rows]


@pytest.mark.parametrize("entropy", ENTROPIES)
def test_temperature_matches_the_reference_switch(entropy):
    state = EntropyTarget.init(initial={"temperature": 1.0}, initial_entropy=entropy)
    assert EntropyTarget.value(state)["temperature"] == ref.aepo_temperature(entropy)
    for h in ENTROPIES:  # and after an update with the step's entropy
        assert EntropyTarget.value(EntropyTarget.update(state, None, {"entropy": h}))["temperature"] == \
            ref.aepo_temperature(h)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("entropy", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("reinforce_sample_num", [1, 3, 5, 10, 40])
def test_same_samples_replace_the_same_rows_with_the_same_advantages(seed, entropy, reinforce_sample_num):
    """min(N, candidates) rows (half above the target) are replaced by the same re-sampled rows, train with 1,
    and every kept row trains with the reference's GRPO advantage, except the kept rows of the group the prefix
    cuts: the reference baselines them on their full group (computed before the replacement), ours on the rows
    left in it."""
    out, ours, (rows, theirs), main, bak, temperature = run_both(seed, entropy, reinforce_sample_num)
    assert temperature == ref.aepo_temperature(entropy)
    assert out.completions == names(rows, main, bak)
    n = int(out.resampled.sum())
    cut = torch.arange(n, -(-n // G) * G)  # kept rows of a partly replaced group (empty when n is a multiple of G)
    same = torch.tensor([i for i in range(out.size) if i not in set(cut.tolist())])
    assert_agree(ours[same], theirs[same] * out.mask[same])
    if len(cut):
        assert torch.equal(ours[cut], grpo(out.select(cut), allow_singletons=True).double())


def test_candidates_are_their_selected_rows():
    for seed in range(6):
        bak = rollout_batch(rewards(seed + 100, 10, p=0.5), "r", G=G, seed=seed)
        selected = ref._select_by_advantage(their_grpo(bak), threshold=0.05, absolute=False) or []
        assert positive_samples(bak, 0.05).tolist() == selected
