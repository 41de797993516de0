"""Small builders shared by the tests."""
from __future__ import annotations

import random
import string

import torch
import torch.nn.functional as F

from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.envs.base import Env, tool, user
from workbench.tasks import Example, Task

D = torch.float64


def make_batch(rewards, group, lengths=None, **fields) -> RolloutBatch:
    """A float64 RolloutBatch with the given rewards/groups over right-padded responses (default 3 tokens)."""
    batch = RolloutBatch.from_rewards(rewards, group, lengths if lengths is not None else [3] * len(rewards))
    for name, value in fields.items():
        setattr(batch, name, value)
    return batch


AGREE_TOL = dict(rtol=1e-6, atol=1e-6)  # agreement with reference implementations, float64


def assert_agree(ours, theirs, leaf=None, **tol):
    """Same value (float64 on our side) and, when `leaf` is given, the same gradient w.r.t. `leaf`."""
    tol = tol or AGREE_TOL
    ours, theirs = torch.as_tensor(ours), torch.as_tensor(theirs)
    assert ours.dtype == torch.float64, f"workbench computed in {ours.dtype}, expected float64"
    torch.testing.assert_close(ours, theirs.to(torch.float64), **tol)
    if leaf is not None:
        (g_ours,) = torch.autograd.grad(ours, leaf, retain_graph=True)
        (g_theirs,) = torch.autograd.grad(theirs, leaf, retain_graph=True)
        torch.testing.assert_close(g_ours, g_theirs.to(torch.float64), **tol)


def step_context(step: int = 0, total_steps: int = 1, **kw) -> StepContext:
    """A one-rank step context for calling pipeline stages directly."""
    base = dict(seed=0, group_size=1, prompts_per_step=1, max_new_tokens=1)
    return StepContext(step=step, total_steps=total_steps, **{**base, **kw})


def batch_with_mask(rewards, group, mask, **fields) -> RolloutBatch:
    """A RolloutBatch over an explicit response mask (holes allowed), with extra fields set."""
    batch = RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask,
                         group=torch.as_tensor(group).long(), rewards=torch.as_tensor(rewards, dtype=torch.float64))
    for name, value in fields.items():
        setattr(batch, name, value)
    return batch


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def anchor_mask(B, T, g, holes=False):
    """Right-padded [B, T] float64 mask with row 0 full length (the reference-agreement tests' layout);
    `holes` zeroes two interior positions of long rows, like observation tokens in a multi-turn response."""
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    if holes:
        mask[lengths >= 5, 1:3] = 0.0
    return mask


def random_mask(B, T, generator, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=generator)
    return (torch.arange(T)[None, :] < lengths[:, None]).double()


# A run small enough for a unit test (seconds on one thread).
TINY = dict(task="addition", steps=4, prompts_per_step=4, group_size=4, max_new_tokens=6, sft_steps=0,
            eval_size=16, checkpoint_every=2, minibatches=2, lr=1e-3)
# A preference-recipe run small enough for a unit test (a warm start, then iterations of a few steps).
PREF = dict(task="addition", steps=6, prompts_per_step=8, pairs=32, sft_steps=60, eval_size=16,
            checkpoint_every=3, lr=1e-3, max_new_tokens=5, group_size=6)


class DigitFirst(Task):
    """Reward 1 when the answer starts with a digit: about 10% of random tokens, so groups carry signal."""

    name = "digit_first"

    def make_example(self, rng):
        return Example(prompt=f"{rng.randrange(10)}?", answer="", target="1")

    def score(self, completion, example):
        return float(completion[:1].isdigit())

    def eval_set(self, n=None):
        return [Example(prompt=f"{i}!", answer="", target="1") for i in range(10)]


class DigitStepsEnv(Env):
    """Three one-character turns; reward 1 at the end iff the first action was a digit (an early action decides a
    late reward). The state is the turn number (it recurs across a group's rows); `subgoal` 0 before a digit, 1 after."""

    stop = tuple(string.printable)  # every character ends a turn: one-token actions
    max_turns = 3
    subgoals = True

    def reset(self, example, seed=None):
        self.turns, self.hit = 0, False
        return [user(example.prompt)], {"state": 0, "subgoal": 0}

    def actions(self):
        return ["1", "a"]

    def step(self, action):
        self.hit |= self.turns == 0 and action[:1].isdigit()
        self.turns += 1
        done = self.turns >= self.max_turns
        return [tool(str(self.turns))], float(done and self.hit), done, {"state": self.turns, "subgoal": int(self.hit),
                                                                          "tool_error": None}


class DigitSteps(DigitFirst):
    """DigitFirst over three turns (`DigitStepsEnv`): a multi-turn task small enough for resume tests."""

    name = "digit_steps"

    def score(self, completion, example):
        return float(completion[:1].isdigit())

    def make_env(self):
        return DigitStepsEnv()

    def expert_actions(self, example):
        return ["1", "1", "1"]


def needs_multi_turn(recipe: str) -> bool:
    """Does a component of `recipe` need something of the task (registry.NEEDS) that one-turn DigitFirst lacks?"""
    from workbench import registry
    from workbench.recipes import get_recipe

    return any(registry.get(kind, u.key).needs for kind, u in get_recipe(recipe).uses())


GAMES = ("kuhn", "tictactoe", "spy", "werewolf", "plan-act")  # smallest first
GAME_KW = {"spy": {"players": 3, "judges": 2, "rounds": 1, "eval_examples": 2},  # 5 rows a game, not 12
           "werewolf": {"players": 3}}


def get_task(name, **kw):
    from workbench.tasks import get_task as build

    return build(name, **kw)


def accepts(recipe: str, task) -> bool:
    """Do the recipe's start-up checks (what its components need of a task) accept `task`?"""
    from workbench.recipes import get_recipe
    from workbench.train.pipeline import Pipeline

    try:
        Pipeline(get_recipe(recipe)).check_task(task)
    except ValueError:  # this game lacks what the recipe needs: try the next one
        return False
    return True


def plays_games(recipe: str) -> bool:
    """Does `recipe` play a multi-agent game (its rollout needs `agents`)?"""
    from workbench import registry
    from workbench.recipes import get_recipe

    return "agents" in registry.get("rollout", get_recipe(recipe).rollout.key).needs


def poses_questions(recipe: str) -> bool:
    """Does a component of `recipe` need a proposer task (SSP's search-propose)?"""
    from workbench import registry
    from workbench.recipes import get_recipe

    return any("proposer" in registry.get(kind, u.key).needs for kind, u in get_recipe(recipe).uses())


def pooled(recipe: str) -> bool:
    """The recipe's sampler draws from a fixed pool of prompts (it takes a `size`: `pool` and the samplers built on it)."""
    import inspect

    from workbench import registry
    from workbench.recipes import get_recipe

    sampler = registry.get("sampler", get_recipe(recipe).sampler.key).fn
    return "size" in inspect.signature(getattr(sampler, "init", sampler)).parameters


def task_for(recipe: str, **overrides):
    """(config overrides, task) for a unit-test run of `recipe`: one-turn DigitFirst, or three-turn DigitSteps for a
    recipe whose components need more (the config names keydoor, which offers every need, so the start-up check passes),
    search-propose for SSP, or the smallest game a recipe that plays games accepts (`GAMES`, at `GAME_KW`'s sizes)."""
    from workbench.recipes import get_recipe

    if pooled(recipe):  # DigitFirst has 10 distinct training prompts: a pool of 8
        overrides = {**overrides, "recipe_overrides": {"sampler": {"size": 8}}}
    if poses_questions(recipe):
        return {**overrides, "task": "search-propose"}, get_task("search-propose")
    if plays_games(recipe):  # the first game the recipe's start-up checks accept (Kuhn poker, the smallest)
        name, task = next((name, task) for name, task in ((n, get_task(n, **GAME_KW.get(n, {}))) for n in GAMES)
                          if accepts(recipe, task))
        if get_recipe(recipe).policies == "separate":  # LoRA adapters, one per agent
            overrides = {**overrides, "lora_r": 4}
        return {**overrides, "task": name, "task_kw": GAME_KW.get(name, {})}, task
    if needs_multi_turn(recipe):
        return {**overrides, "task": "keydoor"}, DigitSteps()
    return overrides, DigitFirst()


class CallEnv(Env):
    """A tool-call episode: an action ending in ";" is a call, answered "<prefix><n>\\n" (n counts the calls; or the
    fixed `reply`) and paid `call_reward`; any other action ends the episode, reward 1 iff it is `answer`."""

    stop = (";",)

    def __init__(self, *, answer="end", prefix="ok", reply=None, call_reward=0.0, max_turns=4):
        self.answer, self.prefix, self.reply, self.call_reward, self.max_turns = answer, prefix, reply, call_reward, \
            max_turns

    def reset(self, example, seed=None):
        self.calls = 0
        return [user(example.prompt)], {"state": 0}

    def step(self, action):
        if action.endswith(";"):
            self.calls += 1
            return ([tool(self.reply or f"{self.prefix}{self.calls}\n")], self.call_reward, False,
                    {"state": self.calls, "tool_error": None})
        return [], float(action == self.answer), True, {"state": None}


class CallTask(Task):
    """`CallEnv` episodes (its keywords), with `expert` as the expert's actions."""

    name = "calls"

    def __init__(self, expert=("a;", "b;", "end"), **env_kw):
        self.expert, self.env_kw = list(expert), env_kw

    def make_example(self, rng):
        return Example(prompt=f"{rng.randrange(10)}?", answer="", target=self.expert[-1])

    def make_env(self):
        return CallEnv(**self.env_kw)

    def expert_actions(self, example):
        return list(self.expert)


class Interrupt(Exception):
    """Raised from a step callback to simulate a run killed between steps."""


def run_task(config, out, task=None, stop_after_step=None):
    """Run (or resume) `config` into `out` (on `task` when given); optionally die after a step."""
    from workbench.train import make_trainer

    def crash(row):
        if row["step"] == stop_after_step:
            raise Interrupt

    trainer = make_trainer(config, out, progress=False, callback=crash if stop_after_step is not None else None)
    if task is not None:
        trainer.task = task
        trainer.pipeline.check_task(task)
    return trainer.run()


def metric_rows(out):
    """Rows of a run's metrics.jsonl without wall-clock fields (those differ between identical runs)."""
    from workbench.train.metrics import read_rows

    return [{k: v for k, v in r.items() if not k.startswith(("time/", "tokens_per_s/"))}
            for r in read_rows(out / "metrics.jsonl")]


def resumes_exactly(config, tmp_path, stop_after_step=2, task=None) -> bool:
    """A run killed after `stop_after_step` and resumed logs exactly what an uninterrupted run logs."""
    run_task(config, tmp_path / "straight", task)
    try:
        run_task(config, tmp_path / "resumed", task, stop_after_step=stop_after_step)
    except Interrupt:
        pass
    run_task(config, tmp_path / "resumed", task)
    return metric_rows(tmp_path / "resumed") == metric_rows(tmp_path / "straight")


# ---------------------------------------------------------------------------------------------------------- advantages

REWARDS = [1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9, 0.1]
GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]
LENGTHS = [2, 5, 3, 4, 1, 6, 2, 3]


def per_seq(adv):
    return adv[:, 0]


def critic_batch(lengths=(3, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    b = make_batch([1.0, -0.5], [0, 1], lengths=list(lengths))
    b.values = torch.randn(b.mask.shape, generator=g, dtype=torch.float64) * b.mask
    return b


# --------------------------------------------------------------------------------------------------- policy objectives

def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


def tokens(ratios, advantages):
    """One token per row at the given ratios and advantages; returns (logp leaf [N,1], old, A, mask)."""
    r = torch.as_tensor(ratios, dtype=D).reshape(-1, 1)
    A = torch.as_tensor(advantages, dtype=D).reshape(-1, 1).expand_as(r).clone()
    return torch.log(r).requires_grad_(True), torch.zeros_like(r), A, torch.ones_like(r)


def random_batch(seed, B=6, T=7, scale=0.3):
    """Random logp leaf, old, per-sequence advantage broadcast over the mask, and a ragged mask."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + torch.randn(B, T, generator=g, dtype=D) * scale).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    return logp, old, A, mask


# ------------------------------------------------------------------------------------------------------- group filters

def group_batch(rewards, groups, lengths=None, **fields):
    b = make_batch(rewards, groups, lengths)
    b.completions = [f"c{i}" for i in range(len(rewards))]
    for name, value in fields.items():
        setattr(b, name, value)
    return b


# ----------------------------------------------------------------------------------------------- preference objectives

def pairs(seed=0, B=8, scale=3.0):
    """Random summed log-probs (policy ones leaves) for B pairs."""
    g = torch.Generator().manual_seed(seed)
    c, r, rc, rr = (-scale * torch.rand(B, generator=g, dtype=D) * 10 for _ in range(4))
    return c.requires_grad_(True), r.requires_grad_(True), rc, rr


def lengths(seed=0, B=8):
    g = torch.Generator().manual_seed(seed + 100)
    return (torch.randint(1, 20, (B,), generator=g).to(D), torch.randint(1, 20, (B,), generator=g).to(D))


def rand(seed, *shape, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=D) * scale


def pair(seed, B=6):
    """Policy leaves (chosen, rejected) and reference log-probs, [B] each."""
    c, r = ((-5 + rand(seed + i, B)).requires_grad_(True) for i in (0, 1))
    return c, r, -5 + rand(seed + 2, B), -5 + rand(seed + 3, B)


def dpo_inline(c, r, rc, rr, beta):
    return -F.logsigmoid(beta * ((c - rc) - (r - rr))).mean()


def grads(loss, *xs):
    return torch.autograd.grad(loss, xs)


SKEWED_REF = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=D)


def close(a, b, tol=1e-12):
    return torch.allclose(torch.as_tensor(a, dtype=D), torch.as_tensor(b, dtype=D), atol=tol, rtol=0)


def no_solution_task():
    """A task run through a TRL environment whose rows carry no target: nothing to hint from or teach with."""
    from workbench.envs.trl import TRLTask

    class Env:
        def reset(self, **row):
            return None

        def get_reward(self):
            return 0.0

    return TRLTask(Env, [{"prompt": "p"}], eval_rows=[{"prompt": "q"}])


def sampled_step(engine, task, scores, seed=0, group_size=4, **ctx_fields):
    """A batch of len(scores) // group_size groups of `task` sampled by `engine`, with the given verifier scores
    (rewards = scores, as the reward stage leaves them), and its step context (`ctx_fields` added, e.g. `score`)."""
    from workbench.rollout import Sampling, turns

    examples = task.sample(len(scores) // group_size, random.Random(seed))
    torch.manual_seed(seed)
    batch = turns(engine, task, examples, group_size=group_size, sampling=Sampling(6))
    batch.scores = torch.tensor(scores, dtype=torch.float32)
    batch.rewards = batch.scores.clone()
    ctx = StepContext(step=0, total_steps=1, seed=seed, group_size=group_size, prompts_per_step=len(examples),
                      max_new_tokens=6, pad_id=engine.tokenizer.pad_token_id, examples=examples, task=task,
                      engine=engine, **ctx_fields)
    return batch, ctx


KILLED_AFTER_CHECKPOINT = """
import os, signal, sys
import workbench.train.checkpoint as checkpoint
real = checkpoint.save_checkpoint
def save_then_die(out, step, state, keep=2):  # SIGKILL right after the checkpoint of step KILL_AT is on disk
    path = real(out, step, state, keep)
    if step == int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return path
checkpoint.save_checkpoint = save_then_die
import workbench.train.steps as steps
steps.save_checkpoint = save_then_die
from workbench.cli import main
main(sys.argv[1:])
"""


def killed_after_checkpoint(args: list[str], step: int) -> None:
    """Run `workbench ARGS` in a real process that SIGKILLs itself right after the checkpoint of `step` is written."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "KILL_AT": str(step)}
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_CHECKPOINT, *args], capture_output=True, text=True,
                            env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]


def grouped_step(transform, groups: dict, n_step: int = 0, state=None, group_size: int = 4):
    """A group transform's output and context on one step of `groups` {prompt: rewards} (one group per prompt, in
    order; rewards = scores; completions "prompt:step:i"), with `state` carried from an earlier step."""
    rewards = [r for rs in groups.values() for r in rs]
    batch = group_batch(rewards, [g for g, rs in enumerate(groups.values()) for _ in rs])
    batch.scores, batch.prompts = batch.rewards.clone(), [p for p, rs in groups.items() for _ in rs]
    batch.completions = [f"{p}:{n_step}:{i}" for p, rs in groups.items() for i in range(len(rs))]
    ctx = step_context(step=n_step, group_size=group_size, prompts_per_step=len(groups),
                       state={} if state is None else state)
    return transform(batch, ctx), ctx


def small_run_args(recipe: str, out) -> list[str]:
    """`workbench run` arguments of a 6-step run (checkpoints at 3 and 6) of `recipe` on addition, from an untrained
    model, sampling a pool of 8 prompts: the real-process resume tests' run."""
    return ["run", recipe, "--task", "addition", "--quiet", "--out", str(out), "--set", "steps=6", "--set",
            "checkpoint_every=3", "--set", "sft_steps=0", "--set", "eval_size=4", "--set", "max_new_tokens=4",
            "--set", "prompts_per_step=4", "--set", "group_size=4", "--set", "lr=1e-3",
            "--set", "recipe_overrides.sampler.size=8"]
