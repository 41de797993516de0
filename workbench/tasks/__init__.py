"""Built-in tasks and the name -> task lookup. Every task is an environment, registered under the registry's "env"
kind (`@registry.env`, the class by its name): the one-turn tasks here, the multi-turn ones in `workbench.envs`.

    get_task("addition", digits=3)
    get_task("countdown")
    get_task("calculator", n_operands=3)                # multi-turn environments (workbench.envs)
    get_task("reasoning_gym:leg_counting", size=200)   # needs `pip install reasoning-gym`
    get_task("file:data/train.jsonl", verifier="math")  # needs `pip install datasets math-verify`
"""
from __future__ import annotations


from workbench import registry
from workbench.envs.base import check_knobs
from workbench.params import did_you_mean
from workbench.tasks.base import Example, Task
from workbench.tasks.dataset import FILE_PREFIX, file_task  # datasets / math-verify are imported on use
from workbench.tasks.reasoning_gym import ReasoningGymTask  # reasoning-gym is imported on use

REASONING_GYM_PREFIX = "reasoning_gym:"

__all__ = ["Example", "Task", "get_task", "run_task", "task_names"]


def task_names() -> list[str]:
    """Registered task names; any reasoning-gym dataset is also reachable as `reasoning_gym:<name>`."""
    return [entry.key for entry in registry.entries("env")]


def get_task(spec: str, **kwargs) -> Task:
    """Build a task from its registered name (`registry.get("env", name)`) or a `reasoning_gym:` / `file:` spec;
    `kwargs` go to the task's constructor, after one check of their names and types against its knobs (a
    ValueError naming the knob, never a TypeError from inside)."""
    if spec.startswith(REASONING_GYM_PREFIX):
        return ReasoningGymTask(spec[len(REASONING_GYM_PREFIX):], **kwargs)  # checks its dataset's knobs
    if spec.startswith(FILE_PREFIX):
        return file_task(spec[len(FILE_PREFIX):], **kwargs)  # checks its style's knobs
    names = task_names()
    if spec not in names:
        hint = did_you_mean(spec, names, n=2)
        valid = ", ".join(names + [REASONING_GYM_PREFIX + "<dataset>", FILE_PREFIX + "<path>"])
        raise ValueError(f"unknown task {spec!r}{hint}; valid names: {valid}")
    cls = registry.get("env", spec).fn
    check_knobs(spec, kwargs, cls)
    return cls(**kwargs)


def run_task(config) -> Task:
    """The task a run trains and evaluates on: `config.task` built with `config.task_kw`, asked with the run's
    `system_prompt` and read by its `answer_format` (`workbench.tasks.instruct`)."""
    from workbench.tasks.instruct import instructed

    return instructed(get_task(config.task, **config.task_kw), system_prompt=config.system_prompt,
                      answer_format=config.answer_format)
