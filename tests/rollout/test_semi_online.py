"""The semi-online rollout (UI-S1): matches, patches with the expert's action (mask 0, token by token), the patch
threshold, the match rule, and the batch the `ui-s1` advantage reads."""
import pytest
import torch

from tests.helpers import CallEnv, CallTask
from tests.rollout.scripted import ScriptedEngine
from workbench.advantages.uis1 import uis1
from workbench.models import char_tokenizer
from workbench.rollout import Sampling
from workbench.rollout.semi_online import PatchedEnv, executed_action, semi_online
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("ui-s1")






def play(turn_texts, patch_threshold=2, group_size=1):
    tok = char_tokenizer()
    engine = ScriptedEngine(tok, lambda history: turn_texts[history.count("ok")])
    batch = semi_online(engine, CallTask(max_turns=5), [Example("p:", "", "")], group_size=group_size, sampling=Sampling(8),
                        patch_threshold=patch_threshold)
    return tok, batch


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_a_patched_step_keeps_the_policy_sample_trained_and_the_expert_action_masked():
    tok, batch = play(["a;", "x;", "end<eos>"])
    # action_0 (match) | obs_0 | action_1 (policy's, mismatch) | patch: expert "b;" + obs_1 | action_2 (match)
    pieces = [("a;", 1, 0), ("ok1\n", 0, 0), ("x;", 1, 1), ("b;ok2\n", 0, 1), ("end", 1, 2)]
    row = [t for text, _, _ in pieces for t in ids(tok, text)] + [tok.eos_token_id]
    mask = [m for text, m, _ in pieces for _ in ids(tok, text)] + [1]
    turn = [s for text, _, s in pieces for _ in ids(tok, text)] + [2]
    assert batch.response_ids[0].tolist() == row
    assert batch.mask[0].tolist() == mask and batch.turn[0].tolist() == turn
    info = batch.turn_info[0]
    assert [i["expert_match"] for i in info] == [True, False, True]
    assert [i["patched"] for i in info] == [False, True, False]
    assert [i["action"] for i in info] == ["a;", "x;", "end"]  # the policy's own text
    assert batch.turn_rewards[0].tolist() == [1.0, 0.0, 1.0] and batch.rewards.tolist() == [2.0]
    assert batch.completions[0] == "a;ok1\nx;b;ok2\nend"


def test_patches_are_spent_then_the_episode_stops():
    tok, batch = play(["x;", "y;", "zz;", "never"], patch_threshold=2)
    assert batch.completions[0] == "x;a;ok1\ny;b;ok2\nzz;"
    assert [i["expert_match"] for i in batch.turn_info[0]] == [False, False, False]
    assert [i["patched"] for i in batch.turn_info[0]] == [True, True, False]
    assert batch.turn_rewards[0].tolist() == [0.0, 0.0, 0.0]
    # the third (unpatched) mismatch is still a trained step, then nothing follows
    assert batch.mask[0, -len(ids(tok, "zz;")):].tolist() == [1.0] * 3
    _, stopped = play(["x;", "b;", "end"], patch_threshold=0)
    assert stopped.completions[0] == "x;" and stopped.turn_rewards[0].tolist() == [0.0]
    _, unlimited = play(["x;", "y;", "zz"], patch_threshold=-1)
    assert [i["patched"] for i in unlimited.turn_info[0]] == [True, True, True]
    with pytest.raises(ValueError, match="patch_threshold"):
        play(["a;"], patch_threshold=-2)


def test_the_match_rule_is_what_the_environment_executes():
    grid = get_task("gridworld").make_env()
    assert executed_action(grid, "xR") == "R" and executed_action(grid, "go") is None
    assert executed_action(CallEnv(), "  a; ") == "a;"
    task = get_task("gridworld")
    example = task.eval_set(1)[0]
    env = PatchedEnv(task.make_env(), task)
    env.reset(example, 0)
    first = task.expert_actions(example)[0]
    _, reward, _, info = env.step("move " + first)
    assert reward == 1.0 and info["expert_match"] and not info["patched"]
    other = next(m for m in "UDLR" if m != task.expert_actions(example)[1])
    observations, reward, _, info = env.step(other)
    assert reward == 0.0 and info["patched"] and observations[0] == {"role": "assistant",
                                                                      "content": task.expert_actions(example)[1]}


def test_the_advantage_reads_the_rollout():
    """Two rows of a group: one follows the expert, one is patched at step 1; the advantage reads the matches."""
    tok = char_tokenizer()
    texts = {0: ["a;", "b;", "end<eos>"], 1: ["a;", "x;", "end<eos>"]}
    calls = iter([0, 1, 0, 1, 0, 1])
    engine = ScriptedEngine(tok, lambda history: texts[next(calls)][history.count("ok")])
    batch = semi_online(engine, CallTask(max_turns=5), [Example("p:", "", "")], group_size=2, sampling=Sampling(8))
    assert [[i["expert_match"] for i in row] for row in batch.turn_info] == [[True, True, True], [True, False, True]]
    A = uis1(batch, gamma=0.5, mode="mean_norm")
    # R = [3, 2]: A_ep = +-0.5; G row 0 = [1.75, 1.5, 1], row 1 = [1, 0, 1]: step 0 +-0.375, step 1 +-0.75, step 2 0
    per_step = torch.tensor([[0.875, 1.25, 0.5], [-0.875, -1.25, -0.5]], dtype=torch.float64)
    for i in range(2):
        policy = batch.mask[i] > 0
        expected = per_step[i][batch.turn[i][policy]]
        torch.testing.assert_close(A[i][policy].double(), expected, rtol=0, atol=1e-6)
        assert torch.all(A[i][~policy] == 0)
