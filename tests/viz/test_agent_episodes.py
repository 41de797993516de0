"""The figures of notebook 09 (multi-turn agents) show what the batch holds: every token's role, mask and turn id
as the rollout `turns` laid them out, per-turn rewards, and each estimator's per-turn advantages (the notebook's
exercise checks: tests/exercises/test_nb09_agents.py)."""
from __future__ import annotations

import random
import statistics

import numpy as np
import pytest
import torch

from tests.rollout.scripted import ScriptedEngine, gridworld_policy
from workbench.advantages.gigpo import gigpo
from workbench.advantages.group import grpo
from workbench.exercises import nb09_agents as exercises
from workbench.models import char_tokenizer
from workbench.rollout import Sampling, turns
from workbench.tasks import Example, get_task
from workbench.viz import agent_episodes as ae

TOK = char_tokenizer()


def gridworld_batch(seed: int = 0, group_size: int = 6):
    """Two maps, `group_size` episodes each, sampled by the real multi-turn rollout from a scripted policy that
    knows the map and moves along a shortest path with probability 0.6, at random otherwise; GiGPO advantages."""
    rng = random.Random(seed)
    task = get_task("gridworld")
    examples = task.eval_set(2)

    policy = gridworld_policy(examples, rng)

    batch = turns(ScriptedEngine(TOK, policy), task, examples, group_size=group_size, sampling=Sampling(4))
    batch.advantages = gigpo(batch)
    return batch


@pytest.fixture(scope="module")
def batch():
    return gridworld_batch()


def role_of(mask: float, turn: int) -> str:
    return "padding" if turn < 0 else "action" if mask > 0 else "observation"


# ------------------------------------------------------------------------------- one episode, token by token


def test_cells_follow_the_batch_mask_turn_ids_rewards_and_advantages(batch):
    for row in range(batch.size):
        cells = ae.episode_cells(batch, TOK, row, max_padding=10_000)
        prompt = [c for c in cells if c["role"] == "prompt"]
        response = [c for c in cells if c["role"] != "prompt"]
        assert len(prompt) == int(batch.prompt_mask[row].sum()) and not any(c["trained"] for c in prompt)
        assert "".join(c["token"] for c in prompt).endswith(batch.prompts[row])
        assert [c["position"] for c in response] == list(range(batch.mask.shape[1]))
        for c in response:
            t = c["position"]
            m, s = float(batch.mask[row, t]), int(batch.turn[row, t])
            assert c["role"] == role_of(m, s) and c["trained"] == (m > 0) and c["turn"] == s
            assert c["advantage"] == pytest.approx(float(batch.advantages[row, t]))
            assert c["reward"] == (None if s < 0 else pytest.approx(float(batch.turn_rewards[row, s])))
            assert c["token"] == TOK.decode([int(batch.response_ids[row, t])])
        assert not any(c["trained"] for c in response if c["role"] == "observation")
        # the action and observation tokens spell out the transcript
        assert "".join(c["token"] for c in response if c["role"] != "padding") == batch.completions[row]


def test_padding_cells_are_capped():
    b = gridworld_batch(1)
    row = int(torch.argmin((b.turn >= 0).sum(-1)))  # the shortest episode has the most padding
    pad = int((b.turn[row] < 0).sum())
    assert pad > 2
    cells = ae.episode_cells(b, TOK, row, max_padding=2)
    assert sum(c["role"] == "padding" for c in cells) == 2


@pytest.mark.parametrize("row", range(12))
def test_episode_figure_colours_roles_and_frames_only_trained_tokens(batch, row):
    fig = ae.episode_tokens(batch, TOK, row)
    traces = {t.name: t for t in fig.data}
    label = ae.ROLE_LABELS
    padded = bool((batch.turn[row] < 0).any())
    assert set(traces) == {label["prompt"], label["action"], label["observation"]} | ({label["padding"]} if padded
                                                                                      else set())
    for role in ae.ROLES:
        if label[role] not in traces:
            continue
        trace = traces[label[role]]
        assert trace.marker.color == ae.ROLE_COLORS[role]
        positions = [c[0] for c in trace.customdata]
        if role == "prompt":
            assert len(positions) == int(batch.prompt_mask[row].sum()) and all(p < 0 for p in positions)
            continue
        expected = [t for t in range(batch.mask.shape[1])
                    if role_of(float(batch.mask[row, t]), int(batch.turn[row, t])) == role]
        assert positions == expected[:len(positions)] and (role == "padding" or len(positions) == len(expected))
        widths = np.asarray(trace.marker.line.width, dtype=float)
        trained = [c[2].startswith("1") for c in trace.customdata]
        assert all(trained) if role == "action" else not any(trained)
        assert (widths > 0).tolist() == trained  # the frame marks exactly the mask-1 tokens
        turns_shown = [int(c[3]) for c in trace.customdata]
        assert turns_shown == [int(batch.turn[row, t]) for t in positions]
        if role != "padding":  # hovers carry the turn's reward
            assert [float(c[4]) for c in trace.customdata] == [float(batch.turn_rewards[row, s]) for s in turns_shown]
        assert "turn reward" in trace.hovertemplate and "advantage" in trace.hovertemplate
    # one line per turn, each ending with the turn's reward and mean advantage over its trained tokens
    n_turns = int(batch.turn[row].max()) + 1
    notes = [a.text for a in fig.layout.annotations]
    assert len(notes) == n_turns
    for s, note in enumerate(notes):
        on = (batch.turn[row] == s) & (batch.mask[row] > 0)
        assert note.startswith(f"r = {float(batch.turn_rewards[row, s]):g}   A = "
                               f"{float(batch.advantages[row][on].mean()):+.2f}")
    assert list(fig.layout.yaxis.ticktext) == ["prompt"] + [f"turn {s}" for s in range(n_turns)] + ["padding"] * padded
    fig.to_json()  # serializable: the book's static HTML and JupyterLab render the same object


def test_expert_calculator_episode_matches_the_exercise_count():
    task = get_task("calculator")
    prompt, answer, actions = exercises.CALCULATOR_EXERCISE
    b = ae.expert_episode(task, Example(prompt, answer, f"A:{answer}"), TOK, actions)
    cells = ae.episode_cells(b, TOK, 0)
    trained = [c for c in cells if c["trained"]]
    assert len(trained) == exercises.calculator_token_counts()[0] == 23
    observations = "".join(c["token"] for c in cells if c["role"] == "observation")
    assert observations == "1776\n1795\n"  # the tool's answers, never trained
    assert b.turn_rewards.tolist() == [[0.0, 0.0, 1.0]] and float(b.rewards[0]) == 1.0
    assert [i["state"] for i in b.turn_info[0]] == [(prompt, ()), (prompt, (1776,)), (prompt, (1776, 1795))]
    assert cells[-1]["token"] == TOK.eos_token and cells[-1]["trained"]
    with pytest.raises(IndexError, match="outside"):
        ae.episode_cells(b, TOK, 1)


# ------------------------------------------------------------------------------- per-turn rewards and advantages


def test_turn_table_grpo_is_flat_and_gigpo_varies_where_states_repeat():
    b = exercises.agent_group_batch()
    A_grpo, A_gigpo = grpo(b), gigpo(b)
    table = ae.turn_table(b, 0, {"GRPO": A_grpo, "GiGPO": A_gigpo})
    assert table["rows"] == [0, 1, 2, 3] and table["steps"] == [0, 1, 2, 3, 4]
    z = (torch.tensor(exercises.AGENT_GROUP_REWARDS) - 0.5) / statistics.stdev(exercises.AGENT_GROUP_REWARDS)
    grpo_t, gigpo_t = table["advantages"]["GRPO"]["mean"], table["advantages"]["GiGPO"]["mean"]
    for k, states in enumerate(exercises.AGENT_GROUP_STATES):
        n = len(states)
        np.testing.assert_allclose(grpo_t[k, :n], float(z[k]), atol=1e-5)  # one number per episode
        assert np.isnan(grpo_t[k, n:]).all() and np.isnan(table["reward"][k, n:]).all()
        assert table["reward"][k, :n].tolist() == [0.0] * (n - 1) + [exercises.AGENT_GROUP_REWARDS[k]]
        assert table["state"][k][:n] == [f"{r},{c}" for r, c in states]
        for s in range(n):  # GiGPO's value on the step's action token
            assert gigpo_t[k, s] == pytest.approx(exercises.gigpo_step_advantage(k, s), abs=1e-6)
    assert np.nanmax(gigpo_t[0]) - np.nanmin(gigpo_t[0]) > 0.5  # varies along episode 0
    # (3, 0) and (2, 0) are acted from once: no step term there
    assert gigpo_t[3, 2] == pytest.approx(float(z[3]), abs=1e-5)


def test_turn_advantages_figure_draws_the_table(batch):
    A_grpo = grpo(batch)
    fig = ae.turn_advantages(batch, 7, {"GRPO": A_grpo, "GiGPO": batch.advantages})
    table = ae.turn_table(batch, 7, {"GRPO": A_grpo, "GiGPO": batch.advantages})
    assert table["rows"] == list(range(6, 12))  # an int row stands for its whole group
    reward, grpo_panel, gigpo_panel = fig.data
    np.testing.assert_array_equal(np.asarray(reward.z, dtype=float), table["reward"])
    np.testing.assert_array_equal(np.asarray(gigpo_panel.z, dtype=float), table["advantages"]["GiGPO"]["mean"])
    assert [list(r) for r in reward.text] == table["state"]
    assert "GRPO" in grpo_panel.hovertemplate and "state" in reward.hovertemplate
    flat = np.asarray(grpo_panel.z, dtype=float)
    assert np.nanmax(flat, 1) - np.nanmin(flat, 1) == pytest.approx(np.zeros(6), abs=1e-6)
    rows_fig = ae.turn_advantages(batch, [0, 6])  # explicit rows; batch.advantages by default
    assert len(rows_fig.data) == 2 and len(rows_fig.data[0].y) == 2
    with pytest.raises(IndexError):
        ae.turn_advantages(batch, batch.size)


def test_default_state_labels_drop_the_shared_prompt():
    states = [[("7*8=", ()), ("7*8=", (56,))], [("7*8=", ())]]
    assert ae.default_state_labels(states) == [["()", "(56,)"], ["()"]]
    assert ae.default_state_labels([[(1, 2), (0, 3)], [None]]) == [["1,2", "0,3"], ["–"]]


# ------------------------------------------------------------------------------- comparing runs


def test_success_curves_add_the_trailing_mean_and_window_means():
    rows = [{"step": i, "accuracy": float(i % 2), "entropy": 1.0 - i / 20} for i in range(20)]
    groups, key = ae.with_trailing_mean({"grpo": [rows]}, "accuracy", window=4)
    assert key == "accuracy (4-step mean)"
    assert [r[key] for r in groups["grpo"][0]][:5] == [0.0, 0.5, 1 / 3, 0.5, 0.5]
    assert "accuracy (4-step mean)" not in rows[0]  # the input rows are left as they were
    assert ae.window_means(rows, "accuracy", 10) == (0.5, 0.5)
    fig = ae.success_curves({"grpo": [rows], "gigpo": [rows]}, window=4, extra=("entropy",))
    assert [a.text for a in fig.layout.annotations] == ["accuracy", key, "entropy"]
    assert {t.name for t in fig.data if t.name} == {"grpo", "gigpo"}


def test_cell_labels_fit_their_cells():
    assert ae.cell_label("<eos>", {"<eos>"}) == ("eos", 12)
    assert ae.cell_label("<|im_end|>", {"<|im_end|>"}) == ("im_end", 6)
    assert ae.cell_label("\n") == ("↵", 12)
    assert ae.cell_label("<") == ("&lt;", 12)  # plotly renders cell text as HTML
    assert ae.cell_label(" hello world")[1] == 6
