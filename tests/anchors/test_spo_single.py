"""Agreement with SPO's tracker (tests/anchors/formulas_spo_single.py, verl-project/verl-recipe @ 48ea0a7
`spo/spo_ray_trainer.py`): over several steps of distinct prompts with 0/1 rewards, given the same offline scores
and the same log-probs of each prompt's stored response (then and now), the reward shaping `spo-single` writes the
code's p_hat as the baseline, keeps the code's alpha and beta, and the advantage `spo-single` is the code's; the
sampling weights are the code's. Our D is measured one policy update earlier at both ends than the code's (module
docstring); here both are handed the same log-probs, so the formulas are compared on the same D."""
import random

import pytest
import torch

from tests.helpers import D, assert_agree, make_batch
from tests.anchors import formulas_spo_single as ref
from workbench.advantages.spo_single import SpoTracker, sampling_weights, spo_single, spo_single_tracker
from workbench.context import StepContext

pytestmark = pytest.mark.covers("spo-single")

SCALE = 0.002  # log pi_t(y_j) = -SCALE (t + 1) (y_j + 1): D between visits t1, t2 = SCALE |t2 - t1| mean(y + 1)


def policy_logp(response_ids, mask, step):
    return -SCALE * (step + 1) * (response_ids.to(D) + 1) * mask


def context(step, state):
    return StepContext(step=step, total_steps=10, seed=0, group_size=1, prompts_per_step=4, max_new_tokens=6,
                       state=state, score=lambda batch, temperature: policy_logp(batch.response_ids, batch.mask, step))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rho", ["kl", "constant"])
def test_tracker_baseline_and_advantage_match_the_code_over_steps(seed, rho):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    prompts = [f"p{k}" for k in range(6)]
    offline = {p: [rng.random() < 0.4 for _ in range(8)] for p in prompts}
    alpha_ref, beta_ref = ref.offline_init(offline, 8, 0.875)
    stored = {}  # the code's prompt2protodata / prompt2log_probs: (ids, mask, step of the visit)
    state = SpoTracker()
    for step in range(6):
        micro = rng.sample(prompts, 4)
        lengths = torch.randint(1, 7, (4,), generator=g)
        batch = make_batch((torch.rand(4, generator=g) < 0.5).to(D), torch.arange(4), lengths)
        batch.response_ids = torch.randint(0, 6, batch.mask.shape, generator=g) * batch.mask.long()
        batch.prompts = micro
        shaped = spo_single_tracker(batch, context(step, state), rho=rho, offline_values=offline)
        ours = spo_single(shaped)
        theirs, alpha, beta = ref.advantages(alpha_ref, beta_ref, micro, batch.rewards, batch.mask)
        assert_agree(shaped.baseline_rewards, alpha / (alpha + beta))
        assert_agree(ours, theirs)
        if rho == "kl":
            old, cur, mask = [], [], []
            for j, p in enumerate(micro):
                ids, m, then = stored.get(p, (batch.response_ids[j], batch.mask[j], step))
                width = 6  # the longest response: the code's fixed max_response_length
                pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[0]))  # noqa: E731
                old.append(pad(policy_logp(ids, m, then))), cur.append(pad(policy_logp(ids, m, step)))
                mask.append(pad(m))
                stored[p] = (batch.response_ids[j], batch.mask[j], step)
            rates, _ = ref.rho_kl(torch.stack(old), torch.stack(cur), torch.stack(mask), 0.875)
        else:
            rates = torch.full((4,), 0.875, dtype=D)
        alpha_ref, beta_ref = ref.update(alpha_ref, beta_ref, micro, alpha, beta, batch.rewards, rates)
        for p in micro:
            assert state.alpha[p] == pytest.approx(alpha_ref[p], rel=1e-6)
            assert state.beta[p] == pytest.approx(beta_ref[p], rel=1e-6)
    p_hat = torch.tensor([state.alpha[p] / (state.alpha[p] + state.beta[p]) for p in state.alpha], dtype=D)
    weights = ref.sampling_weights(alpha_ref, beta_ref, list(state.alpha))
    assert_agree(sampling_weights(p_hat), torch.tensor([weights[p] for p in state.alpha]))
