"""InfoPO: the counterfactual signal (policy-scored, zero for a neutral or ignored observation), the variance gate,
the fusion, and the reduction to multi-turn GRPO."""
import math
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import CallTask, D, make_batch
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.infopo import (
    PLACEHOLDER,
    infopo,
    infopo_signal,
    neutral_ids,
    outcome_gate,
    turn_normalized,
)
from workbench.context import StepContext
from workbench.models import build_tiny
from workbench.rollout import Sampling, policy_forward, turns
from workbench.tasks import Example

pytestmark = pytest.mark.covers("infopo")

STEPS = [3, 2, 4, 1, 3, 3]
GRP = [0, 0, 0, 1, 1, 1]


def agent_batch(rewards, gains, steps=STEPS, groups=GRP, tokens_per_step=2):
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(steps), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, -1))
    b.turn_info = [[{"state": t, "counterfactual_gain": float(gains[i][t]) if t < n - 1 else None}
                    for t in range(n)] for i, n in enumerate(steps)]
    return b


def random_case(seed):
    g = torch.Generator().manual_seed(seed)
    rewards = (torch.rand(len(STEPS), generator=g) < 0.5).double().tolist()
    gains = torch.randn(len(STEPS), max(STEPS), generator=g, dtype=D).tolist()
    return rewards, gains


def test_registered_with_the_catalog_defaults():
    e = registry.get("advantage", "infopo")
    assert {"intrinsic_weight": 1.0, "gate": "exp", "gate_scale": 0.1, "version": "card"}.items() <= e.defaults.items()
    s = registry.get("reward_shaping", "infopo")
    assert s.defaults["placeholder"] == "No information found." and s.defaults["max_tokens"] is None
    assert "multi_turn" in e.needs and "multi_turn" in s.needs and e.equation and s.equation
    assert e.title == s.title == registry.catalog()["infopo"]["title"] and e.confidence == "abstract-only"


def test_gate_off_is_multi_turn_grpo():
    """Catalog (3): beta = 0 leaves the outcome advantage alone, broadcast to every turn."""
    for seed in range(3):
        rewards, gains = random_case(seed)
        b = agent_batch(rewards, gains)
        assert torch.equal(infopo(b, intrinsic_weight=0.0), grpo(b))
        assert torch.equal(infopo(b, intrinsic_weight=0.0, scale=False), grpo(b, scale="none"))


def test_allow_singletons_values_act_on_the_outcome_term():
    """Prompt 2 sampled once (R = 1): with beta = 0, "keep" is multi-turn grpo's verl rule (A = R / (1 + eps) on its
    turns), True gives 0, False refuses."""
    rewards, gains = random_case(0)
    b = agent_batch(rewards + [1.0], gains + [[0.5, 0.0]], STEPS + [2], GRP + [2])
    for value in ("keep", True):
        assert torch.equal(infopo(b, intrinsic_weight=0.0, allow_singletons=value), grpo(b, allow_singletons=value))
    assert torch.allclose(infopo(b, intrinsic_weight=0.0, allow_singletons="keep")[6], b.mask[6] / (1 + 1e-6))
    with pytest.raises(ValueError, match="group of one"):
        infopo(b, intrinsic_weight=0.0)


def test_the_gate_closes_as_the_group_outcomes_spread():
    """Catalog (2): w = exp(-std/s0) is 1 for tied outcomes and falls to 0 as the group's std grows; the authors'
    sigmoid(-std/T) is 1/2 at ties."""
    spreads = [0.0, 0.05, 0.1, 0.5, 2.0]
    gates = [float(outcome_gate(torch.tensor([0.5 - d, 0.5 + d], dtype=D), torch.tensor([0, 0]))[0]) for d in spreads]
    assert gates[0] == 1.0 and all(b < a for a, b in zip(gates, gates[1:])) and gates[-1] < 1e-10
    std = 2 ** 0.5 * 0.05
    assert gates[1] == pytest.approx(math.exp(-std / 0.1), rel=1e-12)
    sig = outcome_gate(torch.tensor([1.0, 1.0], dtype=D), torch.tensor([0, 0]), gate="sigmoid", gate_scale=0.05)
    assert sig.tolist() == [0.5, 0.5]


def test_hand_computed_fusion():
    """Group 0 ties (gate 1, A_out 0): the advantage is the normalized signal; group 1 differs (gate ~0)."""
    rewards = [1.0, 1.0, 0.0, 1.0]
    gains = [[0.3, 0.0], [0.1, 0.0], [0.5], [0.0]]
    b = agent_batch(rewards, gains, steps=[2, 2, 1, 1], groups=[0, 0, 1, 1], tokens_per_step=1)
    A = infopo(b, intrinsic_weight=0.5)
    z = 0.1 / (torch.tensor([0.3, 0.1], dtype=D).std() + 1e-6)
    a_out = 0.5 / (2 ** 0.5 / 2 + 1e-6)
    expected = torch.tensor([[0.5 * z, 0.0], [-0.5 * z, 0.0], [-a_out, 0.0], [a_out, 0.0]], dtype=D)
    torch.testing.assert_close(A, expected, rtol=0, atol=1e-12)


def test_turn_signals_are_zero_mean_per_group_and_the_last_turn_has_none():
    _, gains = random_case(4)
    a = turn_normalized(torch.tensor(gains, dtype=D), STEPS, torch.tensor(GRP))
    for g in set(GRP):
        vals = [float(a[i, t]) for i in range(len(STEPS)) if GRP[i] == g for t in range(STEPS[i] - 1)]
        assert sum(vals) == pytest.approx(0.0, abs=1e-12)
    assert all(float(a[i, n - 1]) == 0.0 for i, n in enumerate(STEPS))


def test_neutral_text_is_fitted_to_the_observation_length():
    assert neutral_ids([5, 6, 7], 5) == [5, 6, 7, 7, 7] and neutral_ids([5, 6, 7], 2) == [5, 6]
    with pytest.raises(ValueError, match="no tokens"):
        neutral_ids([], 3)


def test_bad_inputs_are_clear_errors():
    rewards, gains = random_case(5)
    b = agent_batch(rewards, gains)
    with pytest.raises(ValueError, match="version"):
        infopo(b, version="v1")
    with pytest.raises(ValueError, match="gate must be"):
        infopo(b, gate="tanh")
    with pytest.raises(ValueError, match="gate_scale"):
        infopo(b, gate_scale=0.0)
    with pytest.raises(ValueError, match="intrinsic_weight"):
        infopo(b, intrinsic_weight=-1.0)
    b.turn_info = [[{"state": t} for t in range(n)] for n in STEPS]
    with pytest.raises(ValueError, match="reward_shaping 'infopo'"):
        infopo(b)


# ----------------------------------------------------------------------------- the signal, scored by the policy





def rollout(reply=None, group_size=2):
    model, tok = build_tiny(seed=5)
    texts = ["ab;", "cde;", "ok<eos>"]
    engine = ScriptedEngine(tok, lambda history: texts[min(history.count(";"), 2)])
    batch = turns(engine, CallTask(answer="ok", prefix="v", reply=reply), [Example("q:", "", "")], group_size=group_size, sampling=Sampling(8))
    score = lambda b, T: policy_forward(model, b.prompt_ids, b.prompt_mask, b.response_ids, b.mask, T)[0] * b.mask
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=group_size, prompts_per_step=1, max_new_tokens=8,
                      engine=SimpleNamespace(tokenizer=tok), score=score)
    return model, tok, batch, ctx


def direct_signal(model, tok, batch, i, t, neutral_text=PLACEHOLDER, first_k=None):
    """Mean log-prob of action t+1 with the real observation t minus with it replaced, from two direct forwards."""
    prompt = batch.prompt_ids[i][batch.prompt_mask[i] > 0].tolist()
    response = batch.response_ids[i].tolist()
    obs = torch.nonzero((batch.turn[i] == t) & (batch.mask[i] == 0)).flatten().tolist()
    nxt = torch.nonzero((batch.turn[i] == t + 1) & (batch.mask[i] > 0)).flatten().tolist()[:first_k]
    neutral = neutral_ids(tok(neutral_text, add_special_tokens=False)["input_ids"], len(obs))
    swapped = list(response)
    for p, v in zip(obs, neutral):
        swapped[p] = v
    out = []
    for seq in (response, swapped):
        ids = torch.tensor([prompt + seq[:nxt[-1] + 1]])
        with torch.no_grad():
            logp = model(input_ids=ids).logits[0].double().log_softmax(-1)
        out.append(sum(float(logp[len(prompt) + p - 1, seq[p]]) for p in nxt) / len(nxt))
    return out[0] - out[1]


def test_the_signal_is_the_log_prob_shift_of_the_next_action():
    model, tok, batch, ctx = rollout()
    out = infopo_signal(batch, ctx)
    for i in range(batch.size):
        gains = [info["counterfactual_gain"] for info in out.turn_info[i]]
        assert gains[-1] is None and len(gains) == 3
        for t in range(2):
            assert gains[t] == pytest.approx(direct_signal(model, tok, batch, i, t), abs=1e-5)
        assert any(abs(g) > 1e-4 for g in gains[:2])
    assert set(ctx.metrics) == {"infopo/gain_mean", "infopo/gain_positive_frac"}
    all_tokens = out.turn_info[0][0]["counterfactual_gain"]
    first = infopo_signal(batch, ctx, max_tokens=1).turn_info[0][0]["counterfactual_gain"]  # recorded in place
    assert first != pytest.approx(all_tokens, abs=1e-6)
    assert first == pytest.approx(direct_signal(model, tok, batch, 0, 0, first_k=1), abs=1e-5)


def test_the_signal_vanishes_for_a_neutral_observation_or_a_policy_that_ignores_it():
    """Catalog (1): the observation is the neutral text itself -> identical contexts -> I = 0 exactly; a policy
    whose log-probs do not depend on the context -> I = 0."""
    _, _, batch, ctx = rollout(reply=PLACEHOLDER)
    gains = [info["counterfactual_gain"] for info in infopo_signal(batch, ctx).turn_info[0]]
    assert gains[:2] == [0.0, 0.0]
    _, _, batch, ctx = rollout()
    ctx.score = lambda b, T: -0.7 * b.mask  # the same log-prob whatever the context
    gains = [info["counterfactual_gain"] for info in infopo_signal(batch, ctx).turn_info[1]]
    assert gains[:2] == [pytest.approx(0.0, abs=1e-12)] * 2
