"""TRL `environment_factory` classes through our protocol: reset(**row), public methods as tools called by our
tool-call syntax, get_reward / reward functions, errors returned as TRL returns them."""
import pytest
import torch

from tests.rollout.scripted import ScriptedEngine
from workbench.envs.trl import TRLEnv, TRLTask, tool_methods
from workbench.models import char_tokenizer
from workbench.rollout import Sampling, turns
from workbench.tasks import Example


class Counter:
    """A TRL-style environment (as in TRL's docs): reset takes the row's columns, methods are tools."""

    def __init__(self):
        self.value = 0
        self.resets = 0

    def reset(self, **kwargs) -> str | None:
        self.value = int(kwargs.get("start", 0))
        self.resets += 1
        return f" (start at {self.value})"

    def add(self, n: int) -> int:
        """Add n to the counter.

        Args:
            n: how much to add.

        Returns:
            The new value.
        """
        self.value += n
        return self.value

    def fail(self) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    def get_reward(self) -> float:
        return float(self.value == 5)

    def _private(self):
        return "not a tool"


def test_public_methods_other_than_reset_and_get_reward_are_the_tools():
    assert sorted(tool_methods(Counter())) == ["add", "fail"]


def test_reset_row_tools_errors_and_the_environments_reward():
    env = TRLEnv(Counter, max_turns=6)
    messages, info = env.reset({"prompt": "Reach 5.", "start": 1}, 0)
    # TRL appends reset's observation to the last user message
    assert messages == [{"role": "user", "content": "Reach 5. (start at 1)"}] and info["state"] == ()
    obs, r, done, info = env.step("<tool_call>add(n=3)</tool_call>")
    assert obs == [{"role": "tool", "name": "add", "content": "4"}] and (r, done) == (0.0, False)
    assert info["tool_error"] is None and info["state"] == ("add()[('n', 3)]",)
    obs, _, _, info = env.step('<tool_call>{"name": "fail", "arguments": {}}</tool_call>')
    assert obs[0]["content"] == "{'error': 'boom'}" and "boom" in info["tool_error"]
    obs, _, _, info = env.step("<tool_call>nope()</tool_call>")
    assert obs[0]["content"] == "{'error': 'Tool nope not found.'}" and info["tool_error"]
    obs, _, _, info = env.step("<tool_call>add(n=1, m=2)</tool_call>")  # bad arguments: TypeError inside
    assert "error" in obs[0]["content"] and "TypeError" in info["tool_error"]
    assert env.step("<tool_call>add(1)</tool_call>")[0][0]["content"] == "5"
    obs, r, done, _ = env.step("done")  # no tool call: the final answer, scored by get_reward
    assert (obs, r, done) == ([], 1.0, True)


def test_reward_functions_get_trl_keywords_and_max_turns_scores_the_episode():
    seen = {}

    def reward(prompts, completions, environments, **columns):
        seen.update(prompts=prompts, completions=completions, columns=columns)
        return [10.0 * environments[0].value]

    def not_applicable(completions, **kwargs):
        return [None]

    class NoReward(Counter):
        get_reward = None

    env = TRLEnv(NoReward, reward_funcs=[reward, not_applicable], max_turns=2, response_format="<r>{}</r>\n")
    env.reset(Example("Reach 5.", "5", ""), 0)
    obs, r, done, _ = env.step("<tool_call>add(2)</tool_call>")
    assert obs[0]["content"] == "<r>2</r>\n" and not done
    obs, r, done, _ = env.step("<tool_call>add(2)</tool_call>")  # the 2nd and last turn: scored as it stands
    assert (r, done) == (40.0, True)
    assert seen["prompts"] == ["Reach 5."] and seen["columns"] == {"answer": ["5"], "target": [""]}
    with pytest.raises(ValueError, match="no reward source"):
        TRLEnv(NoReward)


def test_a_trl_environment_runs_in_the_multi_turn_rollout():
    tok = char_tokenizer()
    rows = [{"prompt": "Reach 5:", "start": 1}, {"prompt": "Go 5:", "start": 3}]
    task = TRLTask(Counter, rows, max_turns=4, response_format="={}\n")
    plan = {"Reach": ["<tool_call>add(4)</tool_call>", "ok<eos>"], "Go": ["<tool_call>add(1)</tool_call>", "ok<eos>"]}

    def policy(history):
        return plan["Reach" if "Reach" in history else "Go"][history.count("=")]

    examples = [task.example(r["prompt"]) for r in rows]
    batch = turns(ScriptedEngine(tok, policy), task, examples, group_size=2, sampling=Sampling(40))
    assert batch.prompts[0] == "Reach 5: (start at 1)" and batch.prompts[2] == "Go 5: (start at 3)"
    assert batch.completions[0] == "<tool_call>add(4)</tool_call>=5\nok"
    assert batch.rewards.tolist() == [1.0, 1.0, 0.0, 0.0] and batch.turn_rewards.shape == (4, 2)
    obs = tok("=5\n", add_special_tokens=False)["input_ids"]
    n = len(tok("<tool_call>add(4)</tool_call>", add_special_tokens=False)["input_ids"])
    assert batch.mask[0, n:n + len(obs)].eq(0).all() and batch.response_ids[0, n:n + len(obs)].tolist() == obs
    assert torch.equal(batch.turn[0, :n + len(obs)], torch.zeros(n + len(obs), dtype=torch.long))
