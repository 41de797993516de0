"""ARPO's entropy-triggered branching rollout (workbench/rollout/arpo.py): the branch rule (w = 0 gives P = tau, P is
non-decreasing in dH), exactly n rows per prompt with and without branching and with the refill, a branch's prefix
equal to its parent's with the environment copied, `parent` / `branch_turn`, seeded determinism, the entropy against
a hand computation, soft attribution (a shared prefix's gradient is the sum of its copies'), the hard attribution,
the refusals, and the recipe training and resuming exactly on the calculator task."""
import math
import random
import re

import pytest
import torch

from tests.helpers import TINY, CallTask, metric_rows, resumes_exactly, step_context
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.envs.base import Env, tool, user
from workbench.models import build_tiny, char_tokenizer
from workbench.recipes import Recipe, get_recipe
from workbench.rollout import HFEngine, Sampling
from workbench.rollout.arpo import (
    Trace,
    arpo_rollout,
    branch_probability,
    branch_round,
    branches,
    calc_entropy,
    hard_attribution,
    segment_entropy,
)
from workbench.rollout.engine import policy_forward, response_logits, topk_logprobs
from workbench.tasks import Example, Task
from workbench.train import Trainer, make_config
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("arpo-agentic")


# ----------------------------------------------------------------------------- a scripted tool task and engine

class TallyEnv(Env):
    """A call is an action ending in ";", answered "=<the first characters of every call so far>\\n", so an
    observation shows the whole history of the environment's own state; any other action ends the episode, reward
    = calls starting with "a" (+1 for "end")."""

    stop = (";",)
    max_turns = 4

    def reset(self, example, seed=None):
        self.seen = ""
        return [user(example.prompt)], {"state": ""}

    def step(self, action):
        if action.endswith(";"):
            self.seen += action[0]
            return [tool(f"={self.seen}\n")], 0.0, False, {"state": self.seen, "tool_error": None}
        return [], float(self.seen.count("a") + (action == "end")), True, {"state": None}


class TallyTask(Task):
    name = "tally"

    def make_example(self, rng):
        return Example(prompt=f"{rng.randrange(10)}?", answer="", target="end")

    def make_env(self):
        return TallyEnv()


class FrozenTallyEnv(TallyEnv):
    copyable = False


class FrozenTallyTask(TallyTask):
    def make_env(self):
        return FrozenTallyEnv()


def random_policy(seed: int, choices=("a;", "b;", "end<eos>")):
    """policy(history): a seeded random action per call (calls come in row order, so a rerun replays it); "end"
    after three calls (TallyEnv's fourth action is its last)."""
    rng = random.Random(seed)
    return lambda history: "end<eos>" if history.count(";") >= 3 else rng.choice(choices)


def uniform_topk(spread: int, k: int, T: int) -> torch.Tensor:
    """[T, k + 1] what vLLM logs for T tokens each drawn uniformly from `spread` tokens, the sampled one among the
    min(k, spread) logged (so the extra entry is -inf)."""
    row = torch.full((k + 1,), -math.inf, dtype=torch.float64)
    row[:min(k, spread)] = -math.log(spread)
    return row.expand(T, k + 1).clone()


def uniform_entropy(spread: int, k: int, tokens: int, vocab: int) -> float:
    """H of a segment whose first `tokens` tokens each spread uniformly over `spread` tokens (k logged)."""
    return tokens * min(k, spread) / spread * math.log(spread) / math.log(vocab)


def spread_of(history: str) -> int:
    """The scripted model grows more uncertain with every "a" call in the history: 2, 4, 8, ... tokens."""
    return 2 ** (1 + history.count("a;"))


class EntropyEngine(ScriptedEngine):
    """`ScriptedEngine` that reports top-k log-probs (`reports_topk`): every token of a turn is uniform over
    `spread(history)` tokens."""

    reports_topk = True

    def __init__(self, tokenizer, policy, spread=spread_of):
        super().__init__(tokenizer, policy)
        self.spread = spread

    def generate_ids(self, prompts, *, topk=0, **kw):
        gen = super().generate_ids(prompts, **kw)
        if topk:
            T = gen.response_ids.shape[1]
            gen.topk_logp = torch.stack([uniform_topk(self.spread(self.tokenizer.decode(p)), topk, T) for p in prompts])
        return gen


EXAMPLES = [Example("p1:", "", "end"), Example("q22:", "", "end"), Example("r3:", "", "end")]


def rollout(seed=0, step=0, examples=EXAMPLES, group_size=6, engine=None, **kw) -> RolloutBatch:
    engine = engine or EntropyEngine(char_tokenizer(), random_policy(seed))
    ctx = step_context(step=step, component="rollout:arpo-agentic")
    return arpo_rollout(engine, TallyTask(), examples, group_size=group_size, sampling=Sampling(8), ctx=ctx, **kw)


def row_length(batch, i) -> int:
    return int((batch.turn[i] >= 0).sum())


# ----------------------------------------------------------------------------- (1) the branch rule

def test_w_zero_gives_p_equal_tau_whatever_the_entropy_and_p_is_non_decreasing_in_dH():
    us = [(i + 0.5) / 1000 for i in range(1000)]  # a grid standing for u ~ U(0, 1)
    for tau in (0.0, 0.2, 0.5, 0.9):
        for dH in (-3.0, -0.4, 0.0, 0.7, 5.0):
            assert branch_probability(dH, tau, 0.0) == tau
            assert sum(branches(u, dH, tau, 0.0) for u in us) / len(us) == pytest.approx(tau, abs=1e-3)
    grid = [x / 10 for x in range(-40, 41)]
    for tau in (0.0, 0.5, 0.9):
        for w in (0.2, 0.5, 2.0):
            P = [branch_probability(dH, tau, w) for dH in grid]
            assert all(a <= b for a, b in zip(P, P[1:]))
            assert P[0] == pytest.approx(max(0.0, tau - 4 * w)) and P[-1] == pytest.approx(min(1.0, tau + 4 * w))
            assert P[40] == tau  # dH = 0
            for dH, p in zip(grid[::8], P[::8]):  # the reference's test on u realizes P
                assert sum(branches(u, dH, tau, w) for u in us) / len(us) == pytest.approx(p, abs=1e-3)
    assert all(branches(u, -10.0, 1.0, 0.5) for u in us)  # tau = 1 always branches (clip(.) <= 1)
    assert branch_probability(-10.0, 1.0, 0.5) == 1.0


# ----------------------------------------------------------------------------- (2) exactly n rows per prompt

@pytest.mark.parametrize("settings", [
    dict(branch_probability=1.0),                                   # every slot branches
    dict(branch_probability=0.0, entropy_weight=0.0),              # never: the refill starts fresh rollouts
    dict(branch_probability=0.5, entropy_weight=0.5),
    dict(initial_rollouts=1, branch_probability=1.0, beam_size=3),
    dict(initial_rollouts=6),                                       # no slot left: plain rollouts
])
def test_every_prompt_gets_exactly_group_size_rows(settings):
    batch = rollout(**settings)
    G = 6
    assert batch.size == G * len(EXAMPLES)
    assert batch.group.tolist() == [g for g in range(len(EXAMPLES)) for _ in range(G)]
    assert batch.parent.shape == batch.branch_turn.shape == (batch.size,)
    roots = batch.parent < 0
    n_init = settings.get("initial_rollouts", G // 2)
    for g in range(len(EXAMPLES)):
        rows = slice(g * G, (g + 1) * G)
        assert bool(roots[rows][:n_init].all())  # the initial global rollouts come first
    if settings.get("branch_probability") == 0.0:
        assert bool(roots.all()) and batch.branch_turn.eq(0).all()  # the budget was refilled by fresh rollouts
    if settings.get("branch_probability") == 1.0:
        assert int((~roots).sum()) > 0


def test_the_refill_runs_one_fresh_rollout_at_a_time_and_rows_keep_their_seeds():
    """tau = 0, w = 0: no branch; a prompt whose rollouts have all ended gets one fresh rollout per round, its episode
    seed that of its index in the group (the plain rollout's for that row)."""
    engine = EntropyEngine(char_tokenizer(), lambda history: "end<eos>")  # every episode ends at once
    batch = rollout(engine=engine, branch_probability=0.0, entropy_weight=0.0)
    assert bool((batch.parent == -1).all()) and batch.size == 18
    # round 1: 3 x 3 initial rows; then one refill per prompt per round: 3 more rounds of 3 rows
    assert engine.calls == [("generate_ids", 9)] + [("generate_ids", 3)] * 3


# ----------------------------------------------------------------------------- a branch's prefix and its env

def test_a_branch_holds_its_parents_prefix_and_its_own_copied_environment():
    batch = rollout(branch_probability=1.0, initial_rollouts=2)
    tok = char_tokenizer()
    branched = torch.nonzero(batch.parent >= 0).flatten().tolist()
    assert branched
    for i in branched:
        g = int(batch.group[i])
        p = g * 6 + int(batch.parent[i])
        s = int(batch.branch_turn[i])
        assert int(batch.group[p]) == g and p < i and s >= 1
        shared = int(((batch.turn[p] >= 0) & (batch.turn[p] < s)).sum())  # the parent's tokens of turns < s
        assert shared > 0 and bool((batch.turn[i, :shared] < s).all()) and int(batch.turn[i, shared]) == s
        for field in ("response_ids", "mask", "turn", "mu_logp"):
            assert torch.equal(getattr(batch, field)[i, :shared], getattr(batch, field)[p, :shared]), field
        assert batch.turn_info[i][:s] == batch.turn_info[p][:s]
    # every observation lists the first characters of all the row's own calls so far: the environment a branch
    # continued in held its parent's state (a fresh one would start from "") and then followed its own actions
    for i in range(batch.size):
        calls, text = "", tok.decode(batch.response_ids[i, :row_length(batch, i)].tolist())
        for piece in text.split("\n"):
            if "=" in piece:
                action, obs = piece.split("=")
                calls += action[-2]
                assert obs == calls, (i, text)


def test_parent_and_branch_turn_are_recorded_and_the_metrics_count_them():
    ctx = step_context(component="rollout:arpo-agentic")
    engine = EntropyEngine(char_tokenizer(), random_policy(1))
    batch = arpo_rollout(engine, TallyTask(), EXAMPLES, group_size=6, sampling=Sampling(8), ctx=ctx,
                         branch_probability=1.0)
    parent, start = batch.parent.tolist(), batch.branch_turn.tolist()
    for i in range(batch.size):
        local = i % 6
        if parent[i] < 0:
            assert start[i] == 0
        else:
            assert 0 <= parent[i] < local and 1 <= start[i] <= int(batch.turn[i].max())
    n_branches = sum(p >= 0 for p in parent)
    assert ctx.metrics["arpo/branches_per_prompt"] == n_branches / 3
    assert ctx.metrics["arpo/branch_frac"] == n_branches / batch.size
    calls = [sum(1 for info in row[:-1]) for row in batch.turn_info]  # every action but the last was answered
    assert ctx.metrics["arpo/tool_calls"] == pytest.approx(sum(calls) / batch.size)
    assert math.isfinite(ctx.metrics["arpo/branch_dH"])
    entry = registry.get("rollout", "arpo-agentic")
    assert all(entry.declares(name) for name in ctx.metrics)


def test_the_same_seed_gives_the_same_batch_and_another_step_other_draws():
    a, b = rollout(seed=3, branch_probability=0.5, entropy_weight=0.5), rollout(seed=3, branch_probability=0.5,
                                                                                  entropy_weight=0.5)
    for field in ("response_ids", "mask", "turn", "mu_logp", "rewards", "parent", "branch_turn", "prompt_ids"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert a.completions == b.completions
    trees = {tuple(rollout(seed=3, step=s, branch_probability=0.5, entropy_weight=0.5).parent.tolist())
             for s in range(6)}
    assert len(trees) > 1  # u comes from the step's stream


def test_the_hf_engine_runs_it_and_greedy_sampling_is_plain():
    model, tok = build_tiny(seed=0)
    engine, task = HFEngine(model, tok), TallyTask()
    torch.manual_seed(0)
    batch = arpo_rollout(engine, task, EXAMPLES[:2], group_size=4, sampling=Sampling(6), branch_probability=1.0)
    assert batch.size == 8 and batch.parent.shape == (8,)
    greedy = arpo_rollout(engine, task, EXAMPLES[:2], group_size=4, sampling=Sampling(6, greedy=True))
    assert bool((greedy.parent == -1).all()) and greedy.size == 8
    assert all(greedy.completions[g * 4] == c for g in range(2) for c in greedy.completions[g * 4:g * 4 + 4])


# ----------------------------------------------------------------------------- the entropy

def test_the_entropy_is_the_sum_over_logged_entries_of_the_first_20_tokens_over_log_V():
    # topk_logprobs on known scores: p = (.5, .25, .125, .125), k = 2, sampled token 3 (outside the top 2)
    scores = torch.log(torch.tensor([[[0.5, 0.25, 0.125, 0.125]]], dtype=torch.float64))  # [1, 1, 4]
    logged = topk_logprobs(scores, torch.tensor([[3]]), 2)[0, 0]
    assert torch.allclose(logged.double(), torch.log(torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)))
    inside = topk_logprobs(scores, torch.tensor([[1]]), 2)[0, 0]
    assert inside[-1] == -math.inf  # the sampled token is among the top 2: no extra entry
    hand = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25) + 0.125 * math.log(0.125))
    assert float(calc_entropy(logged[None, None], torch.ones(1, 1))) == pytest.approx(hand, rel=1e-6)
    assert float(calc_entropy(inside[None, None], torch.ones(1, 1))) == pytest.approx(hand - 0.125 * math.log(8),
                                                                                       rel=1e-6)
    # summed over tokens, only the first 20 of the mask: 25 tokens, 23 valid -> 20 counted
    T = 25
    topk = torch.stack([uniform_topk(4, 10, T), uniform_topk(16, 10, T)])
    mask = torch.ones(2, T)
    mask[1, 5:] = 0  # the second row has 5 tokens
    H = calc_entropy(topk, mask)
    assert torch.allclose(H, torch.tensor([20 * math.log(4), 5 * 10 / 16 * math.log(16)], dtype=torch.float64))

    class Gen:
        topk_logp, mask = topk, torch.ones(2, T)

    assert segment_entropy(Gen, 20, 100) == pytest.approx([uniform_entropy(4, 10, 20, 100),
                                                           uniform_entropy(16, 10, 20, 100)])


def test_the_hf_engine_logs_the_top_k_of_its_sampling_distribution(engine):
    """`generate_ids(topk=k)`: the k largest log-probs at each step are those of the model's logits / T, from a
    separate forward pass over the sampled tokens."""
    torch.manual_seed(1)
    gen = engine.generate_ids([[5, 6, 7], [8, 9]], max_new_tokens=6, temperature=0.7, topk=10)
    assert gen.topk_logp.shape == (2, gen.response_ids.shape[1], 11)
    with torch.no_grad():
        logits, _ = response_logits(engine.model, gen.prompt_ids, gen.prompt_mask, gen.response_ids)
    top = torch.log_softmax(logits.float() / 0.7, -1).topk(10, -1).values
    valid = gen.mask > 0
    assert torch.allclose(gen.topk_logp[..., :10][valid], top[valid], atol=1e-4)
    plain = engine.generate_ids([[5, 6, 7]], max_new_tokens=3)
    assert plain.topk_logp is None  # not asked, not computed


# ----------------------------------------------------------------------------- (3) attribution

def test_soft_attribution_a_shared_prefix_gets_the_sum_of_its_copies_gradients():
    """A branch's shared-prefix tokens sit in both rows with the same context, so their log-probs are equal and the
    policy gradient sum_rows A_i grad log pi over the prefix is (A_parent + A_branch) grad log pi of one copy."""
    model, tok = build_tiny(seed=0)
    model.eval()  # no dropout: the two copies' log-probs must be computed alike
    engine = EntropyEngine(tok, random_policy(2))
    batch = rollout(engine=engine, branch_probability=1.0, initial_rollouts=2)
    i = int(torch.nonzero(batch.parent >= 0)[0])
    p, s = int(batch.group[i]) * 6 + int(batch.parent[i]), int(batch.branch_turn[i])
    rows = torch.tensor([p, i])
    prefix = ((batch.turn[p] >= 0) & (batch.turn[p] < s) & (batch.mask[p] > 0)).double()  # the parent's shared tokens
    logp, _, _ = policy_forward(model, batch.prompt_ids[rows], batch.prompt_mask[rows], batch.response_ids[rows],
                                batch.mask[rows])
    assert torch.allclose(logp[0] * prefix, logp[1] * prefix, atol=1e-6)
    A = torch.tensor([0.7, -1.9])
    params = [q for q in model.parameters() if q.requires_grad]
    per_copy = torch.autograd.grad(-(A[:, None] * logp.double() * prefix).sum(), params, retain_graph=True)
    once = torch.autograd.grad(-(A.sum() * logp[0].double() * prefix).sum(), params)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(per_copy, once))


def test_hard_attribution_gives_a_shared_token_the_mean_advantage_of_the_rows_sharing_it():
    """One group: row 0 a root of 3 turns; row 1 branched from row 0 at turn 1 (shares turn 0); row 2 branched from
    row 1 at turn 2 (shares turns 0-1: turn 0 is row 0's sample, turn 1 row 1's); row 3 a root."""
    turn = torch.tensor([[0, 0, 1, 1, 2], [0, 0, 1, 2, -1], [0, 0, 1, 2, 2], [0, 1, -1, -1, -1]])
    batch = RolloutBatch(response_ids=torch.zeros(4, 5, dtype=torch.long), mask=(turn >= 0).double(),
                         group=torch.zeros(4, dtype=torch.long), turn=turn, parent=torch.tensor([-1, 0, 1, -1]),
                         branch_turn=torch.tensor([0, 1, 2, 0]))
    a = torch.tensor([1.0, 2.0, 6.0, -3.0], dtype=torch.float64)
    batch.advantages = a[:, None] * batch.mask
    out = hard_attribution(batch)
    turn0 = (1 + 2 + 6) / 3            # row 0's turn 0, copied into rows 1 and 2
    turn1 = (2 + 6) / 2                # row 1's own turn 1, copied into row 2
    expected = torch.tensor([[turn0, turn0, 1, 1, 1], [turn0, turn0, turn1, 2, 0], [turn0, turn0, turn1, 6, 6],
                             [-3, -3, 0, 0, 0]], dtype=torch.float64)
    assert torch.allclose(out, expected)
    assert torch.allclose(out.sum(0)[:2], batch.advantages.sum(0)[:2])  # a shared token's total is kept
    roots = RolloutBatch(response_ids=batch.response_ids, mask=batch.mask, group=batch.group, turn=turn,
                         parent=torch.full((4,), -1), branch_turn=torch.zeros(4, dtype=torch.long),
                         advantages=batch.advantages)
    assert torch.equal(hard_attribution(roots), batch.advantages)  # no branch: soft = hard


def test_the_hard_attribution_reads_a_real_branching_batch():
    batch = rollout(branch_probability=1.0, initial_rollouts=2)
    batch.advantages = torch.randn(batch.size, generator=torch.Generator().manual_seed(0)).double()[:, None] \
        * batch.mask.double()
    out = hard_attribution(batch)
    for i in torch.nonzero(batch.parent >= 0).flatten().tolist():
        p = int(batch.group[i]) * 6 + int(batch.parent[i])
        shared = (batch.turn[i] >= 0) & (batch.turn[i] < batch.branch_turn[i]) & (batch.mask[i] > 0)
        assert torch.allclose(out[i][shared], out[p][shared])  # copies of one sample get one advantage


# ----------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("override, message", [
    ({"initial_rollouts": 5}, r"initial_rollouts=5 exceeds group_size=4, the rows each prompt gets; set "
                              r"initial_rollouts <= group_size"),
    ({"initial_rollouts": 0}, r"initial_rollouts must be an int >= 1 \(or null for group_size // 2\), got 0"),
    ({"branch_probability": 1.5}, r"branch_probability \(tau\) must be in \[0, 1\], got 1.5"),
    ({"branch_probability": -0.1}, r"branch_probability \(tau\) must be in \[0, 1\], got -0.1"),
    ({"entropy_weight": -0.2}, r"entropy_weight \(w\) must be >= 0"),
    ({"beam_size": 0}, r"beam_size must be an int >= 1"),
])
def test_bad_settings_are_refused_before_training(tmp_path, override, message):
    config = make_config("smoke", recipe="arpo-agentic", **{**TINY, "task": "calculator",
                                                              "recipe_overrides": {"rollout": override}})
    with pytest.raises(ValueError, match=message):
        Trainer(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_one_turn_task_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"rollout:arpo-agentic needs episodes of several turns .* task 'addition' "
                                         r"has none\. Train it on a task that does: --task .*calculator"):
        Trainer(make_config("smoke", recipe="arpo-agentic", **TINY), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_an_environment_that_cannot_be_copied_is_refused():
    with pytest.raises(ValueError, match=r"rollout:arpo-agentic needs environments whose state can be copied"):
        Pipeline(get_recipe("arpo-agentic")).check_task(FrozenTallyTask())
    engine = EntropyEngine(char_tokenizer(), random_policy(0))
    with pytest.raises(ValueError, match=r"arpo-agentic branches copy the environment mid-episode \(Env.copy\(\)\), "
                                         r"and FrozenTallyEnv cannot copy its state"):
        arpo_rollout(engine, FrozenTallyTask(), EXAMPLES, group_size=4, sampling=Sampling(8))
    assert engine.calls == []  # refused before sampling


def test_an_engine_without_top_k_log_probs_is_refused():
    class Plain(ScriptedEngine):
        pass

    with pytest.raises(ValueError, match=r"arpo-agentic measures entropy from the engine's top-k log-probs, which "
                                         r"Plain does not report; use the HF engine \(engine='hf'\)"):
        arpo_rollout(Plain(char_tokenizer(), random_policy(0)), TallyTask(), EXAMPLES, group_size=4,
                     sampling=Sampling(8))
    from workbench.rollout.vllm_engine import VLLMEngine
    assert HFEngine.reports_topk.fget(object.__new__(HFEngine)) and not VLLMEngine.reports_topk.fget(
        object.__new__(VLLMEngine))


@pytest.mark.parametrize("recipe", ["arpo-agentic", "aepo-agentic"])
def test_the_vllm_engine_is_refused_at_start_naming_the_fix(recipe, tmp_path):
    """Before the warm start, not at the first rollout: vLLM reports no top-k log-probs to measure entropy from."""
    config = make_config("smoke", recipe=recipe, **{**CALCULATOR, "engine": "vllm"})
    with pytest.raises(ValueError, match=rf"recipe '{recipe}': rollout:{recipe} needs the rollout engine's top-k "
                                         r"log-probs of every sampled token .*, which engine='vllm' does not report; "
                                         r"use engine='hf'"):
        Trainer(config, tmp_path, progress=False)
    assert not any(tmp_path.iterdir())  # nothing written


def test_streaks_count_consecutive_branches_on_a_path():
    """`branch_round` bookkeeping (AEPO's c): a row that branches extends its streak and hands it to the branch; a
    running row that does not branch resets it."""
    rows = [[]]
    a = Trace(0, 0, [1], [], TallyEnv(), {}, 4, entropies=[0.1, 0.2], streak=2)
    b = Trace(0, 1, [1], [], TallyEnv(), {}, 4, entropies=[0.1, 0.2], streak=5)
    rows[0] += [a, b]
    born = branch_round([a, b], rows, 3, 2, lambda trace, delta, u: trace is a, random.Random(0), [])
    assert [t.streak for t in (a, b)] == [3, 0] and len(born) == 1 and born[0].streak == 3
    assert born[0].parent == 0 and born[0].index == 2 and born[0].entropies == []


# ----------------------------------------------------------------------------- the recipe

def test_the_recipe_is_grpo_over_the_branching_rollout_as_the_scripts_run_it():
    recipe = get_recipe("arpo-agentic")
    assert recipe.rollout.key == "arpo-agentic" and recipe.rollout.kw == {"entropy_weight": 0.2}
    assert [u.key for u in recipe.advantage] == ["grpo"] and recipe.regularizers == ()
    assert recipe.objective.kw == {"eps_low": 0.2, "eps_high": 0.2, "dual_clip_c": 3.0} and recipe.agg == "token-mean"
    defaults = registry.get("rollout", "arpo-agentic").defaults
    assert defaults["beam_size"] == 2 and defaults["branch_probability"] == 0.5 and defaults["entropy_weight"] == 0.5
    assert registry.get("rollout", "arpo-agentic").needs == ("multi_turn", "env_copy", "topk_logprobs")
    Pipeline(Recipe(key="hard", title="t", summary="s", rollout="arpo-agentic",
                    advantage=["grpo", "arpo-agentic"]))  # the hard attribution reads what the rollout provides


# Calculator episodes a short warm start teaches to call the tool: three one-digit operands, two calls, an answer.
CALCULATOR = {**TINY, "task": "calculator", "task_kw": {"n_operands": 3, "digits": 1}, "sft_steps": 150,
              "max_new_tokens": 8}


def test_the_recipe_trains_and_resumes_exactly_on_the_calculator(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="arpo-agentic", **CALCULATOR), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    entry = registry.get("rollout", "arpo-agentic")
    names = {"arpo/branches_per_prompt", "arpo/branch_frac", "arpo/branch_dH", "arpo/tool_calls"}
    assert all(names <= set(r) for r in rows) and all(entry.declares(n) for n in names)
    assert all(0 <= r["arpo/branch_frac"] <= 0.5 for r in rows)  # at most the G - G/2 slots
    assert any(r["arpo/branch_frac"] > 0 for r in rows) and any(r["grad_norm"] > 0 for r in rows)


def test_call_task_episodes_branch_too():
    """`CallTask` (tests/helpers) answers calls with a counter: its branches hold the parent's count."""
    engine = EntropyEngine(char_tokenizer(), random_policy(4, ("a;", "end<eos>")))
    batch = arpo_rollout(engine, CallTask(max_turns=4), EXAMPLES[:1], group_size=4, sampling=Sampling(8),
                         branch_probability=1.0)
    assert batch.size == 4
    for text in batch.completions:  # one answer per call, numbered from the episode's start
        assert re.findall(r"ok(\d+)", text) == [str(n) for n in range(1, text.count(";") + 1)], text
