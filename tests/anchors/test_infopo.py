"""Agreement with InfoPO's code (kfq20/InfoPO @ c26e93c, partial; tests/anchors/formulas_infopo.py):

  - the signal: their `compute_batched_kl_divergence` run with the tiny model on our rollout's full sequences
    (prompt + response, absolute turn boundaries; one task per forward, so no padding) against our
    `reward_shaping:infopo` (scored through `ctx.score` = the trainer's forward);
  - the fused advantage: their `compute_info_grpo_advantage` (both outcome branches: single-turn, and multi-turn with
    "Equalized" turn credits and "Sum" trajectory scores) against `version="c26e93c", gate="sigmoid"`, on random
    turn layouts, signals (some exactly 0) and outcomes, with their token layout of the signal: I_t / |a_t| on each
    token of action t (`compute_intrinsic_rewards`).
"""
import random
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import CallTask, D
from tests.anchors import formulas_infopo as ref
from tests.rollout.scripted import ScriptedEngine
from workbench.advantages.infopo import infopo, infopo_signal
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.models import build_tiny
from workbench.rollout import Sampling, policy_forward, turns
from workbench.tasks import Example

pytestmark = pytest.mark.covers("infopo")
F32 = dict(rtol=1e-4, atol=1e-5)


def test_the_signal_matches_their_counterfactual_kl():
    model, tok = build_tiny(seed=7)
    texts = ["xy;", "abc;", "d;", "ok<eos>"]
    engine = ScriptedEngine(tok, lambda history: texts[min(history.count(";"), 3)])
    batch = turns(engine, CallTask(answer="ok", prefix="v"), [Example("p1?", "", "")], group_size=2, sampling=Sampling(8))
    score = lambda b, T: policy_forward(model, b.prompt_ids, b.prompt_mask, b.response_ids, b.mask, T)[0] * b.mask
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=1, max_new_tokens=8,
                      engine=SimpleNamespace(tokenizer=tok), score=score)
    ours = infopo_signal(batch, ctx)
    for i in range(batch.size):
        prompt = batch.prompt_ids[i][batch.prompt_mask[i] > 0]
        P = len(prompt)
        input_ids = torch.cat([prompt, batch.response_ids[i]])[None]
        tasks = []
        n = len(batch.turn_info[i])
        for t in range(n - 1):
            obs = torch.nonzero((batch.turn[i] == t) & (batch.mask[i] == 0)).flatten()
            nxt = torch.nonzero((batch.turn[i] == t + 1) & (batch.mask[i] > 0)).flatten()
            tasks.append({"batch_idx": 0, "obs_start": P + int(obs[0]), "obs_end": P + int(obs[-1]) + 1,
                          "action_start": P + int(nxt[0]), "action_end": P + int(nxt[-1]) + 1})
        theirs = ref.compute_batched_kl_divergence(model, input_ids, torch.ones_like(input_ids), tasks, tok,
                                                   max_batch_size=1)
        assert len(theirs) == 3
        gains = [info["counterfactual_gain"] for info in ours.turn_info[i][:-1]]
        assert gains == pytest.approx(theirs, abs=1e-5)


def fusion_case(seed, groups=3, G=4, max_turns=4):
    rng = random.Random(seed)
    layouts, gains, rewards, group = [], [], [], []
    for g in range(groups):
        tied = g == 0  # group 0: every outcome equal (gate sigmoid(0) = 1/2)
        for _ in range(G):
            n = rng.randint(1, max_turns)
            layouts.append([(rng.randint(1, 4), rng.randint(1, 3) if s < n - 1 else 0) for s in range(n)])
            gains.append([rng.choice([0.0, round(rng.gauss(0, 0.5), 3)]) for _ in range(n - 1)])
            rewards.append(1.0 if tied else rng.choice([0.0, 0.25, 1.0]))
            group.append(g)
    B, T = len(layouts), max(sum(a + o for a, o in row) for row in layouts) + 1
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1)
    intrinsic, starts = torch.zeros(B, T, dtype=D), torch.zeros(B, T)
    for i, row in enumerate(layouts):
        t = 0
        for s, (a, o) in enumerate(row):
            mask[i, t:t + a] = 1
            turn[i, t:t + a + o] = s
            starts[i, t] = 1
            if s < len(row) - 1:
                intrinsic[i, t:t + a] = gains[i][s] / a
            t += a + o
    batch = RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask, group=torch.tensor(group),
                         rewards=torch.tensor(rewards, dtype=D), turn=turn,
                         turn_info=[[{"counterfactual_gain": gains[i][s] if s < len(row) - 1 else None}
                                     for s in range(len(row))] for i, row in enumerate(layouts)])
    outcome = torch.zeros(B, T)
    last = (mask * torch.arange(1, T + 1)).argmax(-1)
    outcome[torch.arange(B), last] = torch.tensor(rewards, dtype=torch.float32)
    histories = [[{"reward": rewards[i] if s == len(row) - 1 else 0.0} for s in range(len(row))]
                 for i, row in enumerate(layouts)]
    return batch, outcome, intrinsic.float(), starts, histories, group


@pytest.mark.parametrize("multi_turn", [False, True])
@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_the_fused_advantage_matches_info_grpo(multi_turn, scale, beta):
    for seed in range(5):
        batch, outcome, intrinsic, starts, histories, index = fusion_case(seed)
        extra = dict(turn_boundaries=starts, conversation_histories=histories) if multi_turn else {}
        theirs, _ = ref.compute_info_grpo_advantage(outcome, intrinsic, batch.mask.float(), index,
                                                    norm_adv_by_std_in_grpo=scale, intrinsic_weight=beta, **extra)
        ours = infopo(batch, intrinsic_weight=beta, gate="sigmoid", gate_scale=0.05, scale=scale, version="c26e93c")
        torch.testing.assert_close(ours, theirs.double() * batch.mask, **F32)
    card = infopo(batch, intrinsic_weight=beta, gate="sigmoid", gate_scale=0.05, scale=scale)
    assert not torch.allclose(card, theirs.double() * batch.mask, **F32)  # the turn-level reading differs
