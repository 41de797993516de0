"""IGPO: belief-gain turn rewards (telescoping, scored by the policy), joint / separate normalization, turn-level
accumulation, the IG-off reduction to GRPO, and the authors' 745078b boundary merging."""
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import CallTask, D, make_batch
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.igpo import (
    answer_parts,
    igpo,
    igpo_rewards,
    info_gain_rewards,
    normalized_turn_rewards,
    population_normalize,
    turn_advantages,
)
from workbench.context import StepContext
from workbench.models import build_tiny
from workbench.rollout import Sampling, policy_forward, turns
from workbench.tasks import Example

pytestmark = pytest.mark.covers("igpo")

STEPS = [3, 2, 4, 1, 3, 3]
GRP = [0, 0, 0, 1, 1, 1]


def agent_batch(turn_r, steps=STEPS, groups=GRP, tokens_per_step=2):
    """Rows of steps with `tokens_per_step` policy tokens each; turn_rewards and a belief per step recorded."""
    outcome = [float(turn_r[i, n - 1]) for i, n in enumerate(steps)]
    b = make_batch(outcome, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(steps), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, -1))
    b.turn_rewards = turn_r
    b.turn_info = [[{"state": s, "belief": 0.0} for s in range(n)] for n in steps]
    return b


def random_turn_rewards(seed):
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(len(STEPS), max(STEPS), generator=g, dtype=D) * 0.2
    for i, n in enumerate(STEPS):
        r[i, n - 1] = float(torch.rand(1, generator=g) < 0.5)
        r[i, n:] = 0
    return r


def test_registered_with_the_papers_defaults():
    e = registry.get("advantage", "igpo")
    assert {"gamma": 1.0, "norm": "joint", "scale": True, "version": "paper"}.items() <= e.defaults.items()
    shaping = registry.get("reward_shaping", "igpo")
    assert shaping.defaults == {"belief": "prob", "temperature": 1.0} and "turn_rewards" in shaping.provides
    assert set(shaping.needs) == {"multi_turn", "expert"} and e.equation and shaping.equation
    assert e.title == shaping.title == registry.catalog()["igpo"]["title"] and e.confidence == "partial"


def test_turn_rewards_telescope():
    """Catalog (1): the information gains of the non-final turns sum to b_{n-1} - b_0; the last turn holds R."""
    beliefs = [[0.1, 0.3, 0.2, 0.7], [0.5], [0.2, 0.25]]
    r = info_gain_rewards(beliefs, torch.tensor([1.0, 0.0, 0.5], dtype=D), 4)
    for i, b in enumerate(beliefs):
        n = len(b)
        assert float(r[i, :n - 1].sum()) == pytest.approx(b[-1] - b[0], abs=1e-15)
        assert r[i, n - 1] == [1.0, 0.0, 0.5][i] and torch.all(r[i, n:] == 0)


def test_gamma_one_gives_suffix_sums_of_the_normalized_rewards_shared_by_the_turn():
    """Catalog (2)."""
    turn_r = random_turn_rewards(0)
    b = agent_batch(turn_r)
    A = igpo(b)
    rt = normalized_turn_rewards(turn_r, STEPS, b.group)
    for i, n in enumerate(STEPS):
        for s in range(n):
            tokens = A[i][(b.turn[i] == s) & (b.mask[i] > 0)]
            assert torch.allclose(tokens, rt[i, s:n].sum().expand_as(tokens), atol=1e-12)
    discounted = igpo(b, gamma=0.5)
    assert discounted[0, 0] == pytest.approx(float(rt[0, 0] + 0.5 * rt[0, 1] + 0.25 * rt[0, 2]), abs=1e-12)


def test_information_gain_off_is_grpo_on_the_outcome():
    """Catalog (3): only the outcome entry, normalized over the group, reaches every turn at gamma 1."""
    for seed in range(3):
        b = agent_batch(random_turn_rewards(seed))
        assert torch.equal(igpo(b, info_gain=False), grpo(b))
        assert torch.equal(igpo(b, info_gain=False, scale=False), grpo(b, scale="none"))


@pytest.mark.parametrize("norm", ["joint", "separate"])
def test_normalized_rewards_are_zero_mean_over_their_pools(norm):
    turn_r = random_turn_rewards(4)
    rt = normalized_turn_rewards(turn_r, STEPS, torch.tensor(GRP), norm=norm)
    for g in set(GRP):
        rows = [i for i in range(len(STEPS)) if GRP[i] == g]
        ig = [float(rt[i, s]) for i in rows for s in range(STEPS[i] - 1)]
        outcome = [float(rt[i, STEPS[i] - 1]) for i in rows]
        if norm == "joint":
            assert sum(ig) + sum(outcome) == pytest.approx(0.0, abs=1e-12)
        else:
            assert sum(ig) == pytest.approx(0.0, abs=1e-12) and sum(outcome) == pytest.approx(0.0, abs=1e-12)


def test_hand_computed_joint_example():
    """Two rows of 2 turns: rewards (0.5, 1) and (-0.5, 0): joint mean 0.25, Bessel std sqrt(0.4583..)."""
    turn_r = torch.tensor([[0.5, 1.0], [-0.5, 0.0]], dtype=D)
    b = agent_batch(turn_r, steps=[2, 2], groups=[0, 0], tokens_per_step=1)
    values = torch.tensor([0.5, 1.0, -0.5, 0.0], dtype=D)
    z = (values - 0.25) / (values.std() + 1e-6)
    expected = torch.tensor([[z[0] + z[1], z[1]], [z[2] + z[3], z[3]]], dtype=D)
    torch.testing.assert_close(igpo(b), expected, rtol=0, atol=1e-12)


def test_the_authors_745078b_merges_turns_whose_normalized_reward_is_zero():
    """separate mode, every row of the group with the same outcome: the outcome normalizes to 0, so the last turn is
    no boundary: its tokens get 0, and earlier turns accumulate only the information gains."""
    turn_r = torch.tensor([[0.2, 0.0, 1.0], [-0.2, 0.1, 1.0]], dtype=D)  # an IG of exactly 0 becomes 1e-10
    b = agent_batch(turn_r, steps=[3, 3], groups=[0, 0], tokens_per_step=1)
    A = igpo(b, norm="separate", version="745078b")
    ig = torch.tensor([0.2, 1e-10, -0.2, 0.1], dtype=D)
    z = (ig - ig.mean()) / ((ig.var(unbiased=False) + 1e-8).sqrt() + 1e-6)
    expected = torch.tensor([[z[0] + z[1], z[1], 0.0], [z[2] + z[3], z[3], 0.0]], dtype=D)
    torch.testing.assert_close(A, expected, rtol=0, atol=1e-12)
    # the paper reading keeps every turn a unit: the last turn's advantage is its own normalized outcome, 0
    paper = igpo(b, norm="separate")
    assert torch.all(paper[:, 2] == 0) and paper[0, 1] != A[0, 1]
    merged = turn_advantages(torch.tensor([[0.3, 0.0, 0.5, 0.0]], dtype=D), [4], 1.0, merge_zero=True)
    assert merged.tolist() == [[0.8, 0.5, 0.5, 0.0]]


def test_the_authors_bff163b_subtracts_the_mean_return_at_each_token_position():
    turn_r = torch.tensor([[0.5, 1.0], [0.25, 0.0]], dtype=D)
    b = agent_batch(turn_r, steps=[2, 1], groups=[0, 0], tokens_per_step=2)
    b.turn_info = [[{"belief": 0.0}] * 2, [{"belief": 0.0}]]
    b.turn_rewards = torch.tensor([[0.5, 1.0], [0.0, 0.0]], dtype=D)
    b.turn_rewards[1, 0] = 0.0  # row 1: one turn, its outcome 0
    A = igpo(b, version="bff163b")
    # returns row 0 = [1.5, 1.5, 1, 1], row 1 = [0, 0, pad, pad]: position means [0.75, 0.75, 0.5, 0.5]
    assert A.tolist() == [[0.75, 0.75, 0.5, 0.5], [-0.75, -0.75, 0.0, 0.0]]


def test_answer_parts_split_at_the_last_answer_marker():
    assert answer_parts("A:1795") == ("A:", "1795") and answer_parts("R") == ("", "R")
    assert answer_parts("x A:1 A:22") == ("x A:1 A:", "22")


def test_bad_inputs_are_clear_errors():
    b = agent_batch(random_turn_rewards(5))
    with pytest.raises(ValueError, match="norm"):
        igpo(b, norm="both")
    with pytest.raises(ValueError, match="version"):
        igpo(b, version="v2")
    with pytest.raises(ValueError, match="gamma"):
        igpo(b, gamma=1.5)
    b.turn_info = [[{"state": s} for s in range(n)] for n in STEPS]
    with pytest.raises(ValueError, match="reward_shaping 'igpo'"):
        igpo(b)
    with pytest.raises(ValueError, match="group of one"):
        igpo(agent_batch(random_turn_rewards(6), groups=[0, 0, 0, 1, 1, 2]))


# ----------------------------------------------------------------------------- the belief, scored by the policy





def test_the_teacher_forced_belief_is_the_policy_forward_on_the_answer():
    """b_s = exp(mean log pi(answer | prompt, response before turn s, "A:")) from one direct forward per (row, step),
    and the turn rewards are its gains with the outcome last."""
    model, tok = build_tiny(seed=3)
    texts = {0: ["k;", "j;", "A:xy<eos>"], 1: ["A:q<eos>"]}
    rows = iter([0, 1, 0, 0])
    engine = ScriptedEngine(tok, lambda history: texts[next(rows)][history.count("=")])
    example = Example("q?", "", "")
    batch = turns(engine, CallTask(("k;", "A:xy"), answer="A:xy", prefix="="), [example], group_size=2, sampling=Sampling(8))
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=1, max_new_tokens=8,
                      examples=[example], task=CallTask(("k;", "A:xy"), answer="A:xy", prefix="="), engine=SimpleNamespace(tokenizer=tok),
                      score=lambda b, T: policy_forward(model, b.prompt_ids, b.prompt_mask, b.response_ids, b.mask,
                                                        T)[0] * b.mask)
    out = igpo_rewards(batch, ctx)
    prefix, answer = tok("A:", add_special_tokens=False)["input_ids"], tok("xy", add_special_tokens=False)["input_ids"]
    for i, n in enumerate([3, 1]):
        prompt = batch.prompt_ids[i][batch.prompt_mask[i] > 0].tolist()
        response = batch.response_ids[i].tolist()
        expected = []
        for s in range(n):
            start = int(torch.nonzero(batch.turn[i] == s)[0])
            ids = torch.tensor([prompt + response[:start] + prefix + answer])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, -len(answer) - 1:-1].double()
            logp = logits.log_softmax(-1).gather(-1, torch.tensor(answer)[:, None])
            expected.append(float(logp.mean().exp()))
        assert [info["belief"] for info in out.turn_info[i]] == pytest.approx(expected, rel=1e-5)
        gains = [expected[s + 1] - expected[s] for s in range(n - 1)]
        assert out.turn_rewards[i, :n].tolist() == pytest.approx(gains + [float(batch.rewards[i])], rel=1e-5,
                                                                 abs=1e-7)
    assert out.turn_rewards[0, 2] == 1.0 and out.turn_rewards[1, 0] == 0.0
    assert set(ctx.metrics) == {"igpo/belief_first", "igpo/belief_last", "igpo/info_gain_mean"}
    log_beliefs = igpo_rewards(batch, ctx, belief="log_prob")  # b_0 is the prompt's alone: the same in both rows
    assert log_beliefs.turn_info[0][0]["belief"] == pytest.approx(float(torch.tensor(expected[0]).log()), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_745078b_statistics_centre_equal_values_to_exactly_zero_at_every_scale(dtype):
    """16 equal values of 1e4 pi summed in sequence are not 16 x 1e4 pi: the mean is `group_mean`'s, shifted by the
    key's minimum, so equal values get exactly 0 (and a key of one its own value, std 1: 0 too)."""
    keys = ["a"] * 16 + ["b"] * 3 + ["c"]
    for value in (10.0 ** p * c for p in range(7) for c in (3.141592653589793, 1 / 3, 1.1)):
        x = torch.tensor([value] * 16 + [-value / 3] * 3 + [value], dtype=dtype)
        for scale in (True, False):
            out = population_normalize(x, keys, scale=scale)
            assert torch.equal(out, torch.zeros_like(out)), value


def test_allow_singletons_keep_is_refused_with_the_fix():
    """IGPO's codes give a pool of one reward r~ = 0, so verl's "keep" (A = R) has nothing to follow."""
    batch = make_batch([1.0, 0.0, 1.0], [0, 0, 1])
    with pytest.raises(ValueError, match=r"'keep'.*allow_singletons=True"):
        igpo(batch, info_gain=False, allow_singletons="keep")
