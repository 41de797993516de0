"""The figures of notebook 14 (rollouts and guidance) show what the batch holds: ARPO's tree has one node per sampled
action, edges where the batch says a branch was copied, colours that are the entropies the rollout measured; a token
strip gives every token the role the update gives it, the prompt each row was drawn under as the engine saw it, and
the objective's own weights (the notebook's exercise checks: tests/exercises/test_nb14_rollouts_and_guidance.py)."""
from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.helpers import TINY
from workbench.batch import RolloutBatch
from workbench.models import char_tokenizer
from workbench.objectives.srpo_route import SDPO
from workbench.rollout.arpo import branch_probability, forest_batch, grow
from workbench.rollout.engine import Generation
from workbench.train import Trainer, make_config
from workbench.viz import guidance_figures as gf

TOK = char_tokenizer()
CALCULATOR = {**TINY, "task": "calculator", "task_kw": {"n_operands": 3, "digits": 1}, "sft_steps": 150,
              "max_new_tokens": 8}  # tests/rollout/test_arpo.py's warm start (cached by config)


# ------------------------------------------------------------------------------- ARPO's tree


def tree_batch() -> RolloutBatch:
    """One prompt, four rows in creation order: roots 0 and 1 (3 and 2 turns), row 2 copied from row 0 after its turn
    0 (3 turns), row 3 copied from row 2 after its turn 1 (3 turns). Each turn is 2 action tokens and 1 observation."""
    turns, branch_turn, parent = [3, 2, 3, 3], [0, 0, 1, 2], [-1, -1, 0, 2]
    T = 3 * max(turns)
    turn = torch.full((4, T), -1, dtype=torch.long)
    mask = torch.zeros(4, T)
    for i, n in enumerate(turns):
        for s in range(n):
            turn[i, 3 * s:3 * s + 3] = s
            mask[i, 3 * s:3 * s + 2] = 1
    return RolloutBatch(response_ids=torch.zeros(4, T, dtype=torch.long), mask=mask, group=torch.zeros(4).long(),
                        rewards=torch.tensor([0.0, 1.0, 0.0, 1.0]), turn=turn, parent=torch.tensor(parent),
                        branch_turn=torch.tensor(branch_turn), prompts=["1+2-3="] * 4,
                        turn_info=[[{"action": f"r{i}t{s}"} for s in range(n)] for i, n in enumerate(turns)])


ENTROPIES = torch.tensor([[0.1, 0.4, 0.2], [0.3, 0.1, math.nan], [0.1, 0.9, 0.5], [0.1, 0.9, 0.05]],
                         dtype=torch.float64)  # row 2's turn 0 and row 3's turns 0-1 are their parents' samples


def test_a_node_per_sampled_action_each_continuing_the_action_the_batch_says():
    nodes = gf.tree_nodes(tree_batch(), 0, ENTROPIES, tau=0.5, w=0.2)
    assert [(n["row"], n["turn"]) for n in nodes] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 1), (2, 2), (3, 2)]
    source = {(n["row"], n["turn"]): n["source"] for n in nodes}
    assert source[(2, 1)] == (0, 0) and source[(3, 2)] == (2, 1) and source[(0, 0)] is None
    assert {(n["row"], n["turn"]): n["branches"] for n in nodes if n["branches"]} == {(0, 0): 1, (2, 1): 1}
    assert [n["lane"] for n in nodes if n["turn"] == max(m["turn"] for m in nodes if m["row"] == n["row"])] == \
        [0, 3, 1, 2]  # depth first: row 0, its branch 2, that one's branch 3, then root 1
    by = {(n["row"], n["turn"]): n for n in nodes}
    assert by[(2, 2)]["dH"] == pytest.approx(0.5 - 0.9)  # H_init of a branch: its own first measurement
    assert by[(0, 1)]["p_branch"] == pytest.approx(branch_probability(0.4 - 0.1, 0.5, 0.2))
    assert by[(0, 2)]["p_branch"] is None and by[(0, 2)]["reward"] == 0.0 and by[(3, 2)]["reward"] == 1.0


def test_the_tree_figure_colours_nodes_by_entropy_and_rings_the_branch_points():
    fig = gf.arpo_tree_figure(tree_batch(), 0, ENTROPIES, tau=0.5, w=0.2)
    edges, nodes, forks, solved, failed = fig.data
    assert len(nodes.x) == 8 and list(nodes.marker.color) == pytest.approx(
        [0.1, 0.4, 0.2, 0.3, 0.1, 0.9, 0.5, 0.05])
    assert (nodes.marker.cmin, nodes.marker.cmax) == pytest.approx((0.05, 0.9))
    assert sum(x is None for x in edges.x) == 6  # one segment per node that continues another
    assert list(zip(forks.x, forks.y)) == [(0, 0), (1, 1)]  # row 0's turn 0 and row 2's turn 1 (lane 1)
    assert sorted(solved.text) == ["R=1", "R=1"] and len(failed.x) == 2
    fixed = gf.arpo_tree_figure(tree_batch(), 0, ENTROPIES, tau=0.5, w=0.2, h_range=(0.0, 2.0))
    assert (fixed.data[1].marker.cmin, fixed.data[1].marker.cmax) == (0.0, 2.0)


@pytest.mark.slow
def test_segment_entropies_are_the_ones_the_rollout_measured(tmp_path):
    """The forward pass over a real ARPO forest gives each trajectory's own entropies, as the sampler measured them."""
    trainer = Trainer(make_config("smoke", recipe="arpo-agentic", **CALCULATOR), tmp_path, progress=False).setup()
    examples = trainer.task.sample(2, random.Random(0))
    torch.manual_seed(0)
    forest = grow(trainer.engine, trainer.task, examples, group_size=4, sampling=trainer.sampling, initial=[2, 2],
                  beam_size=2, decide=lambda trace, delta, u: True, rng=random.Random(0))
    batch = forest_batch(forest, 4, trainer.tokenizer.pad_token_id)
    H = gf.segment_entropies(trainer.model, batch, trainer.tokenizer)
    traces = [t for rows in forest.rows for t in rows]
    assert any(t.parent >= 0 for t in traces)
    for i, t in enumerate(traces):
        assert H[i, t.branch_turn:t.branch_turn + len(t.entropies)].tolist() == pytest.approx(t.entropies, abs=1e-4)


# ------------------------------------------------------------------------------- roles, prompts and weights


def ids(*tokens: str) -> list[int]:
    """Token ids of single characters or special tokens ("<eos>", "<pad>")."""
    return [int(TOK.convert_tokens_to_ids(t)) for t in tokens]


def strip_batch() -> RolloutBatch:
    """Two groups of two one-turn rows of 3 tokens under "1+2=": row 0 sampled, row 1 a teacher's (offpolicy) with row
    0's very tokens and log-probs, row 2 a given prefix token then 2 sampled of which the last was masked after the
    rollout (`ROLLOUT_MASK`), row 3 distilled (route 1) and ended after 2 tokens."""
    prompt_ids = torch.tensor([TOK.encode("1+2=")] * 4)
    return RolloutBatch(
        response_ids=torch.tensor([ids("1", "2", "<eos>"), ids("1", "2", "<eos>"), ids("3", "7", "<eos>"),
                                   ids("4", "<eos>", "<pad>")]),
        mask=torch.tensor([[1, 1, 1], [1, 1, 1], [0, 1, 0], [1, 1, 0]], dtype=torch.float32),
        group=torch.tensor([0, 0, 1, 1]), turn=torch.tensor([[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, -1]]),
        rewards=torch.tensor([1.0, 1.0, 0.0, 0.0]), prompt_ids=prompt_ids, prompt_mask=torch.ones_like(prompt_ids),
        mu_logp=torch.tensor([[-0.5, -0.1, -0.05], [-0.5, -0.1, -0.05], [0.0, -0.7, -0.2], [-0.3, -0.2, 0.0]]),
        offpolicy_mask=torch.tensor([[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0]], dtype=torch.float32),
        route=torch.tensor([0, 0, 0, SDPO]), old_logp=torch.log(torch.full((4, 3), 0.2)),
        teacher_entropy=torch.tensor([[0.0, 0, 0], [0, 0, 0], [0, 0, 0], [0.5, 1.5, 0]]),
        advantages=torch.ones(4, 3))


ROLLOUT_MASK = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 0]], dtype=torch.float32)


def test_every_token_gets_the_role_the_update_gives_it():
    assert gf.token_roles(strip_batch(), ROLLOUT_MASK) == [
        ["sampled"] * 3, ["offpolicy"] * 3, ["given", "sampled", "masked"], ["distilled", "distilled"]]
    assert gf.token_roles(strip_batch())[2] == ["given", "sampled", "given"]  # without the rollout's mask: not masked


def generation(prompts: list[str], rows: list[tuple[list[int], list[float]]]) -> Generation:
    """What the engine returns for one call: left-padded prompts, responses of 3 positions (mask 1 on the given
    tokens), their behaviour log-probs."""
    encoded = [TOK.encode(p) for p in prompts]
    width = max(map(len, encoded))

    def pad(x, fill):
        return x + [fill] * (3 - len(x))
    return Generation(torch.tensor([[TOK.pad_token_id] * (width - len(r)) + r for r in encoded]),
                      torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in encoded]),
                      torch.tensor([pad(t, TOK.pad_token_id) for t, _ in rows]),
                      torch.tensor([pad([1.0] * len(t), 0.0) for t, _ in rows]),
                      torch.zeros(len(rows), dtype=torch.bool), torch.tensor([pad(m, 0.0) for _, m in rows]),
                      ["x"] * len(rows))


def test_a_row_gets_the_prompt_of_the_generation_that_made_it_and_a_teacher_row_none():
    """Row 1 (the teacher's) has bitwise the tokens and log-probs of row 0's sample: the sample takes the one
    generation, whichever row comes first; row 2's first sampled token was drawn after its given prefix."""
    order = torch.tensor([1, 0, 2, 3])  # the teacher's row first
    batch = strip_batch().select(order)
    record = gf.Recording(generations=[
        generation(["1+2="], [(ids("1", "2", "<eos>"), [-0.5, -0.1, -0.05])]),
        generation(["1+2=3", "1+2=Hint:1+2="], [(ids("7", "<eos>"), [-0.7, -0.2]), (ids("4", "<eos>"), [-0.3, -0.2])])],
        rollout_mask=ROLLOUT_MASK[order])
    got = [None if p is None else TOK.decode(p, skip_special_tokens=True) for p in gf.sampled_prompt_ids(batch, record)]
    assert got == [None, "1+2=", "1+2=3", "1+2=Hint:1+2="]
    record.generations[0].mu_logp[0, 0] = -0.5000001  # another pass's log-probs: not the same sample
    assert gf.sampled_prompt_ids(batch, record)[:2] == [None, None]


def test_unit_weights_are_the_objectives_own_and_srpos_entropy_weights():
    batch = strip_batch()
    w = gf.unit_weights(batch, "policy-shaping", gamma=0.1)
    assert w[0] == pytest.approx([1.0, 1.0, 1.0])                     # PPO-clip at ratio 1, A = 1
    assert w[1] == pytest.approx([0.1 * 0.2 / 0.3 ** 2] * 3)          # gamma p / (p + gamma)^2
    assert w[2, 0] == 0 and w[2, 2] == 0                               # off the mask
    routed = gf.unit_weights(batch, "srpo-route", beta=1.0)
    sdpo = np.exp(-np.array([0.5, 1.5]))
    assert routed[3, :2] == pytest.approx(sdpo / sdpo.mean()) and routed[0] == pytest.approx([1.0] * 3)


def guided(batch=None) -> gf.GuidedBatch:
    batch = batch or strip_batch()
    plain = TOK.encode("1+2=")
    hinted = TOK.encode("1+2=Hint:3")
    return gf.GuidedBatch(key="test", n_prompts=2, batch=batch, tokenizer=TOK,
                          roles=gf.token_roles(batch, ROLLOUT_MASK), weights=gf.unit_weights(batch, "policy-shaping"),
                          sampled=[plain, None, hinted, plain], trained=[plain] * 4, plain=[plain] * 4,
                          teacher=[None, None, None, hinted])


def test_guided_rows_are_those_the_method_touched_and_groups_with_a_signal_come_first():
    g = guided()
    assert gf.guided_rows(g) == [1, 2, 3]  # row 0: sampled and trained plainly under its plain prompt
    assert gf.guided_groups(g) == [0, 1]  # no group has a reward spread: batch order
    g.batch.rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])  # group 1 now has a spread, group 0 none
    assert gf.guided_groups(g) == [1, 0]
    g.n_prompts = 1  # a group beyond the step's prompts is one the method added
    g.roles, g.sampled, g.teacher = [["sampled"] * 3] * 4, g.plain, [None] * 4
    assert gf.guided_rows(g) == [2, 3]


def test_the_strip_draws_each_role_its_tokens_the_weights_and_the_prompts():
    fig = gf.strip_figure(guided(), rows=[0, 1, 2, 3])
    traces = {t.name: t for t in fig.data if t.name}
    cells = {role: list(zip(traces[gf.ROLE_LABELS[role]].x, traces[gf.ROLE_LABELS[role]].y)) for role in gf.ROLES}
    assert cells == {"sampled": [(0, 0), (1, 0), (2, 0), (1, 2)], "offpolicy": [(0, 1), (1, 1), (2, 1)],
                     "distilled": [(0, 3), (1, 3)], "given": [(0, 2)], "masked": [(2, 2)]}
    assert [t.marker.color for t in fig.data[:5]] == [gf.ROLE_COLORS[r] for r in gf.ROLES]
    assert list(traces[gf.ROLE_LABELS["offpolicy"]].text) == ["1", "2", "eos"]
    weights = fig.data[5]
    assert len(weights.x) == 4 + 3 + 2 and "0.22" in weights.text  # masked and given tokens have no weight
    notes = [a.text for a in fig.layout.annotations]
    assert notes[1].endswith("– → P0") and notes[2].endswith("P1 → P0")
    assert notes[3].endswith("P0 → P0 · teacher P1")
    assert "P0 (plain): 1+2=" in notes[-1] and "P1: 1+2=Hint:3" in notes[-1]
    assert [gf.weight_label(w) for w in (1.0, 0.2222, 0.5, 0.004)] == ["1", "0.22", "0.50", "<.01"]


def test_a_strips_title_says_whether_the_method_touched_its_group():
    g = guided()
    assert gf.strip_title(g, [0, 1]) == "test: group 0, 2 rows"
    assert gf.strip_title(g, [0]).endswith("(untouched: the method did not act on it), 1 rows")
    g.n_prompts = 1
    assert gf.strip_title(g, [2, 3]) == "test: group 1 (a copy the method added), 2 rows"
    g.batch.response_ids[0, 0] = int(TOK.convert_tokens_to_ids(" "))
    assert gf.strip_cells(g, [0])[0]["token"] == "␣"


# ------------------------------------------------------------------------------- a real trainer, recorded


@pytest.mark.parametrize("recipe", ["icpo", "rl-plus"])
def test_recording_a_real_step_finds_the_steered_prompts_and_leaves_the_trainer_as_it_was(recipe, tmp_path):
    trainer = Trainer(make_config("smoke", recipe=recipe, **TINY), tmp_path, progress=False).setup()
    engine = trainer.engine
    with gf.recording(trainer) as record:
        batch = trainer.make_batch(0)
    assert trainer.engine is engine and "context" not in vars(trainer) and "stage_runners" not in vars(trainer)
    assert record.n_prompts == TINY["prompts_per_step"] and record.generations
    g = gf.guided_batch(trainer, batch, record)
    off = [bool(r) for r in (batch.offpolicy_mask.sum(-1) > 0).tolist()]
    assert sum(off) == TINY["prompts_per_step"]  # one steered or reference row per group
    for i in range(batch.size):
        assert g.trained[i] == g.plain[i]  # every row trains under its plain prompt
        drawn = None if g.sampled[i] is None else TOK.decode(g.sampled[i], skip_special_tokens=True)
        if not off[i]:
            assert g.sampled[i] == g.plain[i]
        elif recipe == "icpo":
            assert "Question: " in drawn and drawn.endswith("\nAnswer:") and set(g.roles[i]) == {"offpolicy"}
        else:
            assert drawn is None  # the reference solution: nothing sampled it
    assert sorted(gf.guided_rows(g)) == [i for i in range(batch.size) if off[i]]
    assert all(w > 0 for i in range(batch.size) if off[i] for w in g.weights[i][batch.mask[i] > 0])


def test_a_trainer_is_restored_even_when_its_step_fails(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="grpo", **TINY), tmp_path, progress=False).setup()
    engine = trainer.engine
    with pytest.raises(RuntimeError), gf.recording(trainer):
        raise RuntimeError("boom")
    assert trainer.engine is engine and "context" not in vars(trainer)


def test_an_objective_without_a_batch_weight_and_no_route_falls_back_to_ppo_clip():
    batch = strip_batch()
    batch.route = None
    w = gf.unit_weights(batch, "srpo-route")
    assert w[3, :2] == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="old_logp"):
        gf.unit_weights(RolloutBatch.from_rewards([1.0, 0.0]), "ppo-clip")


def test_guided_batch_reads_its_prompts_from_the_recording():
    """`guided_batch` encodes each group's plain prompt from the step's examples as the rollout encodes a prompt."""
    from workbench.tasks import Example

    batch = strip_batch()
    trainer = SimpleNamespace(recipe=SimpleNamespace(key="x", objective=SimpleNamespace(key="ppo-clip", kw={}),
                                                     group_transforms=()), tokenizer=TOK)
    record = gf.Recording(context=SimpleNamespace(task=SimpleNamespace(opening=lambda e: e.prompt),
                                                  examples=[Example("1+2=", "3", "3"), Example("1+2=", "3", "3")]),
                          n_prompts=2, rollout_mask=ROLLOUT_MASK)
    batch.route = None
    g = gf.guided_batch(trainer, batch, record)
    assert g.plain == g.trained and g.sampled == [None] * 4 and g.teacher == [None] * 4
