"""Agreement with AgentFlow's Flow-GRPO (tests/anchors/formulas_flow_grpo.py, lupantech/AgentFlow @ b940064): one
turn-sample per planner turn carrying the trajectory's reward, then verl's GRPO with uid = data_id. Every
turn-sample of trajectory i must carry our `flow-grpo` (pool="turn") advantage of row i; trajectories have 1..4
turns, rewards 0/1 and graded, and one turn of some trajectories is empty (skipped by the daemon)."""
import numpy as np
import pytest
import torch

from tests.helpers import D, assert_agree, batch_with_mask, seeded
from tests.anchors import formulas_flow_grpo as ref
from workbench.advantages.flow_grpo import flow_grpo

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

pytestmark = pytest.mark.covers("flow-grpo")


def trajectories(seed, P=4, G=8, max_turns=4, tokens=2):
    """A batch of P x G multi-turn rows (`tokens` policy tokens per turn, one observation token between turns) and
    AgentFlow's finished-rollout dict for the same episodes."""
    g = seeded(seed)
    B = P * G
    n_turns = torch.randint(1, max_turns + 1, (B,), generator=g)
    rewards = torch.where(torch.rand(B, generator=g) < 0.5, (torch.rand(B, generator=g) < 0.5).to(D),
                          torch.rand(B, generator=g, dtype=D))
    T = max_turns * (tokens + 1)
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1)
    finished = {}
    for i in range(B):
        traces = []
        for k in range(int(n_turns[i])):
            start = k * (tokens + 1)
            mask[i, start:start + tokens] = 1.0
            turn[i, start:start + tokens + 1] = k
            traces.append({"prompt_ids": [1] * (3 + k), "response_ids": [7] * tokens})
        if i % 5 == 0:  # an empty trace: no prompt, no response (the daemon skips it)
            traces.append({"prompt_ids": [], "response_ids": []})
        finished[f"r{i}"] = {"reward": float(rewards[i]), "trace_list": traces, "data_id": f"q{i // G}"}
    batch = batch_with_mask(rewards, torch.arange(P).repeat_interleave(G), mask, turn=turn)
    return batch, finished


@pytest.mark.parametrize("seed", range(8))
def test_every_turn_sample_carries_its_trajectorys_flow_grpo_advantage(seed):
    batch, finished = trajectories(seed)
    ours = flow_grpo(batch)
    scores, data_ids, rollout_ids, _ = ref.turn_samples(finished, dtype=D)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(scores, torch.ones_like(scores),
                                                          np.array(data_ids, dtype=object))
    rows = torch.tensor([int(r[1:]) for r in rollout_ids])          # the trajectory of each turn-sample
    assert len(rollout_ids) == int(batch.turn.amax(-1).add(1).sum())  # one sample per non-empty turn
    per_row = ours[:, 0]                                             # our A_i (token 0 is a policy token)
    assert torch.equal(ours, per_row[:, None] * batch.mask)          # the same on every policy token
    assert_agree(per_row[rows], theirs[:, 0])


@pytest.mark.parametrize("seed", range(4))
def test_prompts_sampled_once_follow_agentflow_with_allow_singletons_keep(seed):
    """Every prompt sampled once (1 to 4 turns): AgentFlow's verl GRPO gives a pool of one turn-sample mean 0, std 1
    (A = R / (1 + eps)) and a lone trajectory of n >= 2 turns, n equal samples, A = 0: allow_singletons="keep".
    True gives every such row 0, False refuses."""
    batch, finished = trajectories(seed, P=8, G=1)
    scores, data_ids, rollout_ids, _ = ref.turn_samples(finished, dtype=D)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(scores, torch.ones_like(scores),
                                                          np.array(data_ids, dtype=object))
    rows = torch.tensor([int(r[1:]) for r in rollout_ids])
    per_row = flow_grpo(batch, allow_singletons="keep")[:, 0]
    assert_agree(per_row[rows], theirs[:, 0])
    one_turn = batch.turn.amax(-1) == 0
    assert one_turn.any() and (~one_turn).any() and (per_row[one_turn] != 0).any()
    assert torch.equal(flow_grpo(batch, allow_singletons=True), torch.zeros_like(batch.mask))
    with pytest.raises(ValueError, match="group of one"):
        flow_grpo(batch)
