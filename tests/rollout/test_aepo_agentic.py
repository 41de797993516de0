"""AEPO's entropy-balanced rollout (workbench/rollout/aepo_agentic.py): the budget split m = k sigma(beta (H_root -
H_tool)) in [0, k] (k/2 at equal entropies) measured by a pre-monitoring trajectory, lambda = 1 with m fixed giving
`arpo-agentic`'s batch, the branch penalty never raising the branching probability, the refusals, and the recipe
training and resuming exactly on the calculator task."""
import math

import pytest
import torch

from tests.helpers import metric_rows, resumes_exactly, step_context
from tests.rollout.test_arpo import CALCULATOR, EXAMPLES, EntropyEngine, TallyTask, random_policy, uniform_entropy
from workbench import registry
from workbench.models import build_tiny, char_tokenizer
from workbench.recipes import get_recipe
from workbench.rollout import HFEngine, Sampling
from workbench.rollout.aepo_agentic import (
    aepo_rollout,
    global_count,
    global_share,
    penalized_branches,
    pre_monitor,
)
from workbench.rollout.arpo import arpo_rollout, branch_probability, branches
from workbench.train import Trainer, make_config

pytestmark = pytest.mark.covers("aepo-agentic")

FIELDS = ("response_ids", "mask", "turn", "mu_logp", "rewards", "turn_rewards", "truncated", "prompt_ids",
          "prompt_mask", "group", "parent", "branch_turn")


# ----------------------------------------------------------------------------- (1) the budget split

def test_m_lies_in_0_k_is_k_over_2_at_equal_entropies_and_grows_with_h_root():
    for k in (1, 4, 12, 16):
        assert global_share(k, 0.3, 0.3, 1.0) == k / 2
        assert global_share(k, 0.9, 0.1, 0.0) == k / 2  # beta = 0: no balancing
        shares = [global_share(k, h, 0.5, beta) for beta in (0.5, 1.0, 50.0) for h in (-1e4, -2, 0, 0.5, 1, 3, 1e4)]
        assert all(0 <= m <= k for m in shares)
        for beta in (0.5, 1.0, 50.0):
            row = [global_share(k, h, 0.5, beta) for h in (-2, 0, 0.5, 1, 3)]
            assert all(a < b for a, b in zip(row, row[1:]))
        assert global_share(k, 1.0, 0.0, 1.0) == pytest.approx(k / (1 + math.exp(-1.0)))
        assert [global_count(m, k) for m in (0.0, 0.49, 0.5, k / 2, k - 0.2, float(k))] == \
            [1, 1, 1, max(1, math.floor(k / 2 + 0.5)), k, k]


def test_the_pre_monitoring_trajectory_gives_h_root_and_the_mean_entropy_after_tool_calls():
    """The scripted model spreads over 2 tokens at first and doubles the spread after every "a" call: a trajectory
    a; a; end has H_root = H("a;" at spread 2), then H("a;" at 4), H("end<eos>" at 8) after the tool calls."""
    engine = EntropyEngine(char_tokenizer(), lambda history: "end<eos>" if history.count(";") >= 2 else "a;")
    (h_root, h_tool), = pre_monitor(engine, TallyTask(), EXAMPLES[:1], sampling=Sampling(8), entropy_tokens=20,
                                    logprobs=10, max_turns=None, max_total_tokens=None)
    assert h_root == pytest.approx(uniform_entropy(2, 10, 2, 100))
    assert h_tool == pytest.approx((uniform_entropy(4, 10, 2, 100) + uniform_entropy(8, 10, 4, 100)) / 2)
    no_call = EntropyEngine(char_tokenizer(), lambda history: "end<eos>")
    (h_root, h_tool), = pre_monitor(no_call, TallyTask(), EXAMPLES[:1], sampling=Sampling(8), entropy_tokens=20,
                                    logprobs=10, max_turns=None, max_total_tokens=None)
    assert h_tool == h_root  # no tool response: m = k / 2


def test_the_split_sets_each_prompts_global_rollouts():
    """Rising entropy after tool calls (H_tool > H_root) leaves fewer global rollouts than k/2; the rows a prompt
    samples first are its m global rollouts, logged as aepo/global_rollouts."""
    policy = lambda history: "end<eos>" if history.count(";") >= 2 else "a;"  # noqa: E731
    engine = EntropyEngine(char_tokenizer(), policy, spread=lambda history: 2 ** (1 + 3 * history.count("a;")))
    ctx = step_context(component="rollout:aepo-agentic")
    batch = aepo_rollout(engine, TallyTask(), EXAMPLES, group_size=8, sampling=Sampling(8), ctx=ctx, balance_beta=50.0,
                         branch_probability=0.0, entropy_weight=0.0)  # no branch: the rest is refilled
    h_root = uniform_entropy(2, 10, 2, 100)
    h_tool = (uniform_entropy(16, 10, 2, 100) + uniform_entropy(128, 10, 4, 100)) / 2
    m = global_count(global_share(8, h_root, h_tool, 50.0), 8)
    assert m < 4 and ctx.metrics["aepo/global_rollouts"] == m
    # one pre-monitoring round per turn (3 rows), then the m global rollouts of each prompt together
    assert engine.calls[:4] == [("generate_ids", 3)] * 3 + [("generate_ids", 3 * m)]
    assert batch.size == 24 and bool((batch.parent == -1).all())
    assert registry.get("rollout", "aepo-agentic").declares("aepo/global_rollouts")


# ----------------------------------------------------------------------------- (2) lambda = 1, m fixed: ARPO

@pytest.mark.parametrize("tau, w", [(0.5, 0.5), (1.0, 0.0), (0.3, 2.0)])
def test_no_penalty_and_a_fixed_split_is_arpo_batch_for_batch(tau, w):
    ctx = step_context(step=2, component="rollout:arpo-agentic")  # one stream for both: the same u draws

    def run(fn, **kw):
        engine = EntropyEngine(char_tokenizer(), random_policy(7))
        return fn(engine, TallyTask(), EXAMPLES, group_size=6, sampling=Sampling(8), ctx=ctx, branch_probability=tau,
                  entropy_weight=w, **kw)

    arpo = run(arpo_rollout, initial_rollouts=2)
    aepo = run(aepo_rollout, global_rollouts=2, branch_penalty=1.0)
    assert int((arpo.parent >= 0).sum()) > 0
    for field in FIELDS:
        assert torch.equal(getattr(arpo, field), getattr(aepo, field)), field
    assert arpo.completions == aepo.completions and arpo.turn_info == aepo.turn_info


def test_no_penalty_and_a_fixed_split_is_arpo_on_the_hf_engine():
    model, tok = build_tiny(seed=0)
    engine = HFEngine(model, tok)
    ctx = step_context(component="rollout:x")
    torch.manual_seed(5)
    arpo = arpo_rollout(engine, TallyTask(), EXAMPLES[:2], group_size=4, sampling=Sampling(6), ctx=ctx,
                        initial_rollouts=3, branch_probability=1.0)
    torch.manual_seed(5)
    aepo = aepo_rollout(engine, TallyTask(), EXAMPLES[:2], group_size=4, sampling=Sampling(6), ctx=ctx,
                        global_rollouts=3, branch_penalty=1.0, branch_probability=1.0)
    for field in FIELDS:
        assert torch.equal(getattr(arpo, field), getattr(aepo, field)), field


# ----------------------------------------------------------------------------- (3) the penalty

def test_the_penalty_never_raises_the_branching_probability_and_scales_it_by_lambda_to_the_c():
    us = [(i + 0.5) / 2000 for i in range(2000)]
    for tau in (0.0, 0.3, 0.5, 1.0):
        for w in (0.0, 0.5):
            for dH in (-1.0, 0.0, 0.4):
                P = branch_probability(dH, tau, w)
                for lam in (0.25, 0.5, 1.0):
                    for c in (0, 1, 2, 3):
                        taken = [penalized_branches(u, dH, tau, w, lam, c) for u in us]
                        assert all(branches(u, dH, tau, w) for u, t in zip(us, taken) if t)  # never where ARPO won't
                        assert sum(taken) / len(us) == pytest.approx(P * lam ** c, abs=1e-3)
                        if lam == 1.0 or c == 0:
                            assert taken == [branches(u, dH, tau, w) for u in us]  # ARPO's decision, draw for draw


def test_a_stronger_penalty_takes_fewer_branches_over_many_seeds():
    def n_branches(lam, seed):
        engine = EntropyEngine(char_tokenizer(), random_policy(seed, ("a;", "a;", "end<eos>")))
        ctx = step_context(step=seed, component="rollout:aepo-agentic")
        batch = aepo_rollout(engine, TallyTask(), EXAMPLES, group_size=8, sampling=Sampling(8), ctx=ctx,
                             global_rollouts=1, branch_penalty=lam, branch_probability=0.9, entropy_weight=0.0)
        return int((batch.parent >= 0).sum())

    counts = {lam: sum(n_branches(lam, s) for s in range(8)) for lam in (1.0, 0.2)}
    assert counts[0.2] < counts[1.0]


# ----------------------------------------------------------------------------- refusals and the recipe

@pytest.mark.parametrize("override, message", [
    ({"branch_penalty": 0.0}, r"branch_penalty \(lambda\) must be in \(0, 1\] \(1: no penalty\), got 0.0"),
    ({"branch_penalty": 1.5}, r"branch_penalty \(lambda\) must be in \(0, 1\]"),
    ({"balance_beta": -1.0}, r"balance_beta \(beta\) must be >= 0, got -1.0"),
    ({"global_rollouts": 5}, r"global_rollouts=5 exceeds group_size=4, the rows each prompt gets; set "
                             r"global_rollouts <= group_size"),
    ({"global_rollouts": 0}, r"global_rollouts must be an int >= 1"),
    ({"branch_probability": 2.0}, r"branch_probability \(tau\) must be in \[0, 1\]"),
    ({"entropy_weight": -1.0}, r"entropy_weight \(w\) must be >= 0"),
])
def test_bad_settings_are_refused_before_training(tmp_path, override, message):
    config = make_config("smoke", recipe="aepo-agentic", **{**CALCULATOR, "recipe_overrides": {"rollout": override}})
    with pytest.raises(ValueError, match=message):
        Trainer(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_one_turn_task_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"rollout:aepo-agentic needs episodes of several turns"):
        Trainer(make_config("smoke", recipe="aepo-agentic", **{**CALCULATOR, "task": "addition", "task_kw": {}}),
                tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_the_recipe_is_the_rollout_with_the_aepo_agentic_clip_loss():
    recipe, clip = get_recipe("aepo-agentic"), get_recipe("aepo-agentic-clip")
    assert recipe.rollout.key == "aepo-agentic" and recipe.rollout.kw == {"entropy_weight": 0.2}
    assert (recipe.advantage, recipe.objective, recipe.agg, recipe.regularizers) == \
        (clip.advantage, clip.objective, clip.agg, clip.regularizers)
    entry = registry.get("rollout", "aepo-agentic")
    assert entry.defaults["branch_penalty"] == 0.5 and entry.defaults["balance_beta"] == 1.0
    assert entry.confidence == "partial" and entry.needs == ("multi_turn", "env_copy", "topk_logprobs")


def test_the_recipe_trains_and_resumes_exactly_on_the_calculator(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="aepo-agentic", **CALCULATOR), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    entry = registry.get("rollout", "aepo-agentic")
    names = {"aepo/global_rollouts", "arpo/branches_per_prompt", "arpo/branch_frac", "arpo/branch_dH",
             "arpo/tool_calls"}
    assert all(names <= set(r) for r in rows) and all(entry.declares(n) for n in names)
    assert all(1 <= r["aepo/global_rollouts"] <= 4 for r in rows)
    assert any(r["arpo/branch_frac"] > 0 for r in rows) and any(r["grad_norm"] > 0 for r in rows)
