"""Built-in tasks and the name -> task lookup.

    get_task("addition", digits=3)
    get_task("countdown")
    get_task("calculator", n_operands=3)                # multi-turn environments (workbench.envs)
    get_task("reasoning_gym:leg_counting", size=200)   # needs `pip install reasoning-gym`
    get_task("file:data/train.jsonl", verifier="math")  # needs `pip install datasets math-verify`
"""
from __future__ import annotations

from workbench.tasks.addition import AdditionTask
from workbench.tasks.base import Example, Task
from workbench.tasks.countdown import CountdownTask
from workbench.tasks.dataset import FILE_PREFIX, file_task  # datasets / math-verify are imported on use
# after tasks.base: the environment tasks import it (and workbench.envs imports this package first)
from workbench.envs.calculator import CalculatorTask
from workbench.envs.gridworld import GridworldTask
from workbench.envs.keydoor import KeydoorTask
from workbench.envs.screen import ScreenTask
from workbench.envs.search import SearchTask
from workbench.tasks.act import ACTTask  # after the grid world it builds on

TASKS: dict[str, type[Task]] = {"addition": AdditionTask, "countdown": CountdownTask, "calculator": CalculatorTask,
                                "search": SearchTask, "gridworld": GridworldTask, "act": ACTTask,
                                "keydoor": KeydoorTask, "screen": ScreenTask}
REASONING_GYM_PREFIX = "reasoning_gym:"

__all__ = ["TASKS", "Example", "Task", "AdditionTask", "CalculatorTask", "CountdownTask", "GridworldTask",
           "KeydoorTask", "ScreenTask", "SearchTask", "get_task", "task_names"]


def task_names() -> list[str]:
    """Registered task names; any reasoning-gym dataset is also reachable as `reasoning_gym:<name>`."""
    return sorted(TASKS)


def get_task(spec: str, **kwargs) -> Task:
    """Build a task from its name; `kwargs` go to the task's constructor."""
    if spec.startswith(REASONING_GYM_PREFIX):
        from workbench.tasks.reasoning_gym import ReasoningGymTask  # optional dependency

        return ReasoningGymTask(spec[len(REASONING_GYM_PREFIX):], **kwargs)
    if spec.startswith(FILE_PREFIX):
        return file_task(spec[len(FILE_PREFIX):], **kwargs)
    if spec not in TASKS:
        valid = ", ".join(task_names() + [REASONING_GYM_PREFIX + "<dataset>", FILE_PREFIX + "<path>"])
        raise ValueError(f"unknown task {spec!r}; valid names: {valid}")
    return TASKS[spec](**kwargs)
