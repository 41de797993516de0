"""A task asked of an instruct model: a system message opening every episode, and a rule for where its answer is.

A real instruct model answers in sentences ("2 * 6 = 12, so the answer is 12."), not in the bare answer the
built-in verifiers read. Two run settings bridge the gap (`RunConfig.system_prompt`, `RunConfig.answer_format`):

    system_prompt   a system message before the task's prompt (needs chat_template=True: without a chat template
                    the messages would be glued into one plain string)
    answer_format   what of the completion the task's verifier reads:
        "whole"        the whole completion (stripped): the task's own format, as the tiny model is trained to answer
        "last_number"  the last number in it, thousands separators dropped ("... = 1,024." -> "1024"): the flexible
                       extract of GSM8K evaluations (lm-evaluation-harness, verl's gsm8k flexible mode); no number
                       reads as "" and scores 0
        "answer_tag"   the text inside its last <answer>...</answer> (DeepSeek-R1's format); no tag reads as ""
                       and scores 0. SFT targets are written inside the tag.

Both apply to one-turn tasks (the answer is the completion); a multi-turn environment's final answer has its own
syntax (calculator's "A:<n>"), so only `system_prompt` applies there.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from workbench.envs.base import Env, Message, OpeningEnv, as_messages, system
from workbench.tasks.base import Example, Task, WrappedTask

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def whole(completion: str) -> str:
    return completion.strip()


def last_number(completion: str) -> str:
    """The last number of the completion, "," thousands separators removed ("" when there is none)."""
    found = NUMBER.findall(completion.replace(",", ""))
    return found[-1].lstrip("+") if found else ""


def answer_tag(completion: str) -> str:
    """The stripped text inside the last <answer>...</answer> ("" when there is none)."""
    found = ANSWER_TAG.findall(completion)
    return found[-1].strip() if found else ""


ANSWER_FORMATS: dict[str, Callable[[str], str]] = {"whole": whole, "last_number": last_number,
                                                   "answer_tag": answer_tag}
TARGETS: dict[str, Callable[[str], str]] = {"answer_tag": lambda target: f"<answer>{target}</answer>"}


class InstructTask(WrappedTask):
    """`task` with a system prompt and an answer rule (see the module docstring). Examples, the held-out set and
    the task's knobs are the wrapped task's; only the opening messages, what the verifier reads and the SFT
    targets change."""

    def __init__(self, task: Task, *, system_prompt: str = "", answer_format: str = "whole"):
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format={answer_format!r}: choose one of {', '.join(ANSWER_FORMATS)}")
        if answer_format != "whole" and task.make_env().max_turns > 1:
            raise ValueError(f"answer_format={answer_format!r} applies to one-turn tasks; {task.name!r} is a "
                             "multi-turn environment whose final answer has its own syntax: keep answer_format='whole' "
                             "(a system_prompt still applies)")
        super().__init__(task)
        self.system_prompt, self.answer_format = system_prompt, answer_format
        self.read_answer = ANSWER_FORMATS[answer_format]

    def score(self, completion: str, example: Example) -> float:
        return self.task.score(self.read_answer(completion), example)

    def make_env(self) -> Env:
        env = self.task.make_env()
        if env.max_turns == 1 and getattr(env, "task", None) is self.task:  # one turn: scored through this task
            env.task = self
        return OpeningEnv(env, self.with_system_prompt) if self.system_prompt else env

    def with_system_prompt(self, messages: list[Message], example: Example) -> list[Message]:
        return [system(self.system_prompt), *messages]

    def expert_actions(self, example: Example) -> list[str]:
        render = TARGETS.get(self.answer_format, lambda target: target)
        return [render(action) for action in self.task.expert_actions(example)]

    def opening(self, example: Example):
        opening = self.task.opening(example)
        return self.with_system_prompt(as_messages(opening), example) if self.system_prompt else opening

    def __repr__(self) -> str:
        return (f"InstructTask({self.task!r}, system_prompt={self.system_prompt!r}, "
                f"answer_format={self.answer_format!r})")


def instructed(task: Task, *, system_prompt: str = "", answer_format: str = "whole") -> Task:
    """`task` as an instruct model is asked it; the task itself when both settings are at their defaults."""
    if not system_prompt and answer_format == "whole":
        return task
    return InstructTask(task, system_prompt=system_prompt, answer_format=answer_format)
