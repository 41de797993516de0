"""ScalingInter-RL's horizon scheduler, transcribed from the authors' trainer (one process, no Ray, no model).

Source: WooooDyy/AgentGym-RL @ 82402a99c62a293735a3f412fb8ac9a600673bc0
    AgentGym-RL/verl/agent_trainer/ppo/ray_trainer.py
        L222-245  `StepRoundsScheduler` (`__init__`, `set_global_steps`, `step`, `get_rounds`): below as it is;
        L749-758, L769-770, L875-876  `RayPPOTrainer.fit`: `self.global_steps = 0`, `self._load_checkpoint()`,
                  `self.global_steps += 1`, then per step `gen_batch.meta_info['max_rounds'] =
                  self.rounds_scheduler.get_rounds()` before the rollout and `self.global_steps += 1;
                  self.rounds_scheduler.step()` after it;
        L695-696  `_load_checkpoint`: `self.global_steps = int(global_step_folder.split('global_step_')[-1])`,
                  `self.rounds_scheduler.set_global_steps(self.global_steps)`.

Class and variable names and the order of operations are theirs; `fit_max_rounds` keeps only the lines of `fit` and
`_load_checkpoint` that touch the step counter and the scheduler, and returns the `max_rounds` each step's rollout got.
"""
from __future__ import annotations


class StepRoundsScheduler:
    def __init__(self, steps_scaling_inter: int, rounds_ls: list[int]):
        self.rounds_ls = rounds_ls
        self.steps_scaling_inter = steps_scaling_inter
        self.max_rounds = rounds_ls[0]
        self.current_stage = 0
        self.global_steps = 1  # start from 1

    def set_global_steps(self, global_steps: int):
        self.global_steps = global_steps
        if (self.global_steps // self.steps_scaling_inter < len(self.rounds_ls)):
            self.current_stage = self.global_steps // self.steps_scaling_inter
        else:
            self.current_stage = len(self.rounds_ls) - 1
        self.max_rounds = self.rounds_ls[self.current_stage]

    def step(self):
        if self.current_stage + 1 < len(self.rounds_ls) and self.global_steps % self.steps_scaling_inter == 0:
            self.current_stage += 1
            self.max_rounds = self.rounds_ls[self.current_stage]
        self.global_steps += 1

    def get_rounds(self):
        return self.max_rounds


def fit_max_rounds(steps_scaling_inter: int, rounds: list[int], total_training_steps: int,
                   resume_global_step: int | None = None) -> dict[int, int]:
    """{global step g: max_rounds of its rollout} for g = 1 .. total_training_steps - 1 (`fit` returns once
    `global_steps >= total_training_steps`), or from the step after checkpoint `global_step_{resume_global_step}`."""
    rounds_scheduler = StepRoundsScheduler(steps_scaling_inter=steps_scaling_inter, rounds_ls=rounds)
    global_steps = 0
    if resume_global_step is not None:  # _load_checkpoint
        global_steps = resume_global_step
        rounds_scheduler.set_global_steps(global_steps)
    global_steps += 1  # we start from step 1
    max_rounds = {}
    while True:
        max_rounds[global_steps] = rounds_scheduler.get_rounds()  # gen_batch.meta_info['max_rounds']
        global_steps += 1
        rounds_scheduler.step()
        if global_steps >= total_training_steps:
            return max_rounds
