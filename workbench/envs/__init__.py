"""Environments: the protocol (`Env`, the one-turn `TaskEnv`), an adapter for TRL's `environment_factory`
classes, and the built-in multi-turn tasks with exact verifiers (`calculator`, `search`, `gridworld`, `keydoor`,
`screen`), which are also tasks (`get_task("calculator")`)."""
import workbench.tasks  # noqa: F401  (first: workbench.tasks imports the env tasks below, and they import it)
from workbench.envs.base import Env, TaskEnv
from workbench.envs.calculator import CalculatorEnv, CalculatorTask
from workbench.envs.gridworld import GridworldEnv, GridworldTask
from workbench.envs.keydoor import KeydoorEnv, KeydoorTask
from workbench.envs.screen import ScreenEnv, ScreenTask
from workbench.envs.search import SearchEnv, SearchTask
from workbench.envs.trl import TRLEnv, TRLTask

__all__ = ["CalculatorEnv", "CalculatorTask", "Env", "GridworldEnv", "GridworldTask", "KeydoorEnv", "KeydoorTask",
           "ScreenEnv", "ScreenTask", "SearchEnv", "SearchTask", "TRLEnv", "TRLTask", "TaskEnv"]
