"""RetroAgent's retrospective intrinsic reward: credit for completing more of a task than before, fading out.

    c_i        task-completion fraction of episode i from a hindsight self-reflection (1 when the episode succeeded)
    phi(x)     the task's best group success rate over earlier steps (0 at first sight)
    I_i        = max(0, c_i - phi(x_i))                       improvement over the best prior attempts
    r_i        = R_i + coef(t) I_i,   coef(t) = exp(-5 p)  or  exp(-6.9 p / 0.1) [p <= 0.1], 0 after   (p = t / T)

The reflection (an LLM's JSON list of subtasks and their status) is stood in for by a rule-based reflector: the
fraction of the expert's subtasks the episode's tool calls reached (calculator: the expert's intermediate
results; search: the chain's entities searched), behind the `reflector` callable. The language lessons it also
writes go to a memory retrieved by SimUtil-UCB; we keep its scoring function (`simutil_ucb_score`) but no memory:
our prompts carry no retrieved text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from workbench import registry
from workbench.advantages.group import group_stats
from workbench.rewards import base
from workbench.rewards.milestones import solution_steps
from workbench.rewards.tools import action_calls, bracket_call
from workbench.text.answers import chain, search_answer
from workbench.text.arithmetic import call_result

RETRO_TITLE = "RetroAgent: From Solving to Evolving via Retrospective Dual Intrinsic Feedback"
DECAYS = ("exp", "hard_cutoff")
BASELINES = ("group_success", "best_completion")
REFERENCE_LOWER_CLIP = -5  # rollout_loop.py: instrinsic_rewards_lower_clipping_ratio's default


# ----------------------------------------------------------------------------- the schedule

def reflection_coefficient(progress: float, *, decay="exp", alpha=5.0, cutoff=0.10, cutoff_alpha=6.9) -> float:
    """coef(p), p = t / T clamped to [0, 1] (rollout_loop.py `_calculate_reflection_coefficient`): exp(-alpha p), or
    with the hard cutoff exp(-cutoff_alpha p / cutoff) for p <= cutoff (about 0.001 at the cutoff) and 0 after."""
    if decay not in DECAYS:
        raise ValueError(f"retroagent: decay must be one of {DECAYS}, got {decay!r}")
    if not 0 < cutoff <= 1:
        raise ValueError(f"retroagent: cutoff must be in (0, 1], got {cutoff}")
    p = min(max(progress, 0.0), 1.0)
    if decay == "hard_cutoff":
        return 0.0 if p > cutoff else math.exp(-cutoff_alpha * p / cutoff)
    return math.exp(-alpha * p)


# ----------------------------------------------------------------------------- the intrinsic reward

def improvement(completion: torch.Tensor, best_prior: torch.Tensor) -> torch.Tensor:
    """[B] I = max(0, c - phi): only a strict gain over the best prior attempts earns anything."""
    return (completion - best_prior).clamp(min=0)


def clip_intrinsic(r: torch.Tensor, *, clip_high=None, clip_low=None, reference_bug=False) -> torch.Tensor:
    """r clipped to [-clip_low, clip_high] (rollout_loop.py's `instrinsic_rewards_*_clipping_ratio`); None leaves that
    side open. The reference clips only when clip_high is set and then reads an unset clip_low as its default -5,
    i.e. a lower bound of +5 above the upper one, which sets every reward to clip_high (np.clip); reference_bug=True
    reproduces that."""
    if clip_high is None:
        return r
    if clip_low is None and reference_bug:
        clip_low = REFERENCE_LOWER_CLIP
    low = -math.inf if clip_low is None else -clip_low
    return torch.minimum(torch.maximum(r, torch.tensor(low, dtype=r.dtype)), torch.tensor(clip_high, dtype=r.dtype))


# ----------------------------------------------------------------------------- the toy reflector

def expert_subtasks(example) -> list[str] | None:
    """The subtasks an expert episode completes before answering, as the values its tool calls reach: a calculator
    example's intermediate results (`solution_steps`), a search example's chain entities it searches. None for
    any other example (a one-turn task has no subtasks)."""
    if example is None:
        return None
    steps = solution_steps(example.prompt)
    if steps:
        return [str(result) for result, _ in steps]
    if example.prompt.endswith("?") and "|" in example.answer:
        try:
            return chain(search_answer(example.answer)[1], example.prompt[:-1])[:-1]
        except ValueError:
            return None
    return None


def reached(steps: list[dict]) -> set[str]:
    """What the episode's tool calls that ran (`tools.action_calls`) reached: each calculator call's result, or the
    name a bracket call searched."""
    out = set()
    for info in steps:
        action = info.get("action", "")
        if not action_calls(action, info):
            continue
        result = call_result(action)
        if result is not None:
            out.add(str(result))
        elif bracket_call(action):
            out.add(action[action.rfind("[") + 1:-1].strip())
    return out


def subtask_completion(completion: str, example, steps: list[dict], score: float) -> float:
    """Toy stand-in for the hindsight reflection's completion percentage: 1 when the episode succeeded (as the
    reference overrides it), else (subtasks reached) / (subtasks + 1), the final answer being the last subtask.
    A task without subtasks scores 0 unless solved."""
    if score >= 1.0:
        return 1.0
    subtasks = expert_subtasks(example)
    if not subtasks:
        return 0.0
    return len(set(subtasks) & reached(steps)) / (len(set(subtasks)) + 1)


# ----------------------------------------------------------------------------- SimUtil-UCB memory scoring

def ucb_bonus(count: int, total_count: int, *, ucb_scale=1.0) -> float:
    """c sqrt(ln N / n): the exploration bonus of a memory retrieved (or updated) n times out of N in all
    (memory.py `ReflectionMemory.retrieve`; n = 0 reads as 1, N < 1 as 1)."""
    return ucb_scale * math.sqrt(math.log(max(total_count, 1)) / max(count, 1))


def simutil_ucb_score(relevance: float, utility: float, count: int, total_count: int, *, alpha=0.6,
                      ucb_scale=1.0) -> float:
    """alpha sim + (1 - alpha) (u + bonus): a memory's retrieval score from its task similarity, its utility (an
    EMA of the outcomes it led to, `utility_update`) and the UCB bonus. alpha 0.6, ucb_scale 1 (memory.py)."""
    return alpha * relevance + (1 - alpha) * (utility + ucb_bonus(count, total_count, ucb_scale=ucb_scale))


def utility_update(utility: float, score: float, *, beta=0.1) -> float:
    """u <- (1 - beta) u + beta s (memory.py `_update_score_internal`, beta 0.1)."""
    return (1 - beta) * utility + beta * score


# ----------------------------------------------------------------------------- the reward shaping

@dataclass
class TaskBaselines:
    """phi per task (its prompt): the best group success rate (or completion) seen at earlier steps."""

    best: dict = field(default_factory=dict)


def task_values(values: torch.Tensor, group: torch.Tensor, keys: list[str], how: str) -> dict:
    """{task: this step's value}: the group mean (success rate) or max (completion) of `values` [B]."""
    out: dict = {}
    for gid in torch.unique(group).tolist():
        rows = group == gid
        v = float(values[rows].mean() if how == "mean" else values[rows].max())
        key = keys[int(torch.nonzero(rows)[0])]
        out[key] = max(out.get(key, -math.inf), v)
    return out


RETROAGENT_LOGS = {
    "retroagent/coef": ("RetroAgent: the intrinsic reward's coefficient this step (exp(-5 t/T), hard-cutoff or fixed).",
                        "1 at step 0, exp(-5) = 0.007 at the end (hard cutoff: 0 after 10% of the run)."),
    "retroagent/completion": ("RetroAgent: mean completion fraction c the reflector gave the episodes (1 when solved).",
                              "Rising with accuracy and partial progress; equals accuracy on a task without subtasks."),
    "retroagent/intrinsic": ("RetroAgent: mean intrinsic reward coef x max(0, c - phi) added to the rows' rewards.",
                             "Largest early (coef near 1, phi low), fading to 0 with the coefficient and as phi "
                             "rises."),
    "retroagent/improved_frac": ("RetroAgent: share of rows that completed more of their task than its best prior phi.",
                                 "High at first (phi = 0 for new tasks), falling as each task's best rises."),
}


@registry.reward_shaping(
    "retroagent", title=RETRO_TITLE,
    summary="Intrinsic reward for completing more of a task than the best prior attempts, max(0, c - phi), with a "
            "coefficient decaying as exp(-5 t/T). Toy stand-in: c is the share of the expert's subtasks the "
            "episode's tool calls reached (a reflector callable stands in for the hindsight self-reflection).",
    equation=r"r_i = R_i + e^{-5 t/T}\,\max\big(0,\ c_i - \phi(x_i)\big),\quad "
             r"\phi(x) = \max_{t' < t} \mathrm{mean}_{g(x)}[\text{success}]",
    reads=("rewards", "scores", "group"), provides=("rewards",), state=TaskBaselines, logs=RETROAGENT_LOGS,
    choices={"decay": DECAYS, "baseline": BASELINES})
def retroagent_rewards(batch, ctx, *, decay="exp", coefficient=None, baseline="group_success", group_relative=False,
                       clip_high=None, clip_low=None, reflector=None, reference_bug=False):
    """rewards [B] += coef(t) I (after optional group centering and clipping); then phi is raised per task.

    Defaults are the reference's code (zhangxy-2019/RetroAgent, rl_trained_self_reflection: rollout_loop.py and
    env_manager.py `step_reflect`; its scripts set intrinsic_hard_cutoff=False, group_relative_intrinsic_rewards=
    False, potential_based_on_binary_success=False), except the coefficient:
      decay: "exp" (exp(-5 p)) or "hard_cutoff" (exp(-6.9 p / 0.1) up to p = 0.1, then 0), p = step / total_steps.
        The decaying schedule is the paper's and the catalog's (and the code's when no coefficient is set).
      coefficient: a fixed coefficient instead of the schedule (`intrinsic_reward_coefficient` > -1). None (default)
        runs the schedule, the paper's and the catalog's method; the reference's training scripts instead set
        coefficient = 1.0 (no decay): pass coefficient=1.0 to train as they do.
      baseline: "group_success" (the reference: phi = the task's best group success rate so far) or
        "best_completion" (the catalog's reading c_best_prev: the best completion fraction seen so far).
      group_relative: I - mean_group I (the reference's optional centering, no std).
      clip_high, clip_low: see `clip_intrinsic` (off by default, as in the reference's scripts).
      reflector: fn(completion, example, steps, score) -> completion fraction in [0, 1]; None is the toy
        `subtask_completion`. A model judge plugs in here (prompt for a reflection, parse its percentage).
    Our reading: the reference also adds the intrinsic reward to a second, reflection sample it trains on; here it
    shapes the episode's reward only. Its per-step discount (step_gamma 0.95, `credit_assignment`) acts across the
    steps of a trajectory stored one row per step; our rows are whole trajectories, so it is left out. phi is kept
    per task prompt in the pipeline state (checkpointed), as the reference's `task_potential_history`; under data
    parallelism each process keeps the tasks it saw (its shard of the prompts).
    Logs retroagent/coef, retroagent/completion, retroagent/intrinsic, retroagent/improved_frac.
    """
    if baseline not in BASELINES:
        raise ValueError(f"retroagent: baseline must be one of {BASELINES}, got {baseline!r}")
    if decay not in DECAYS:
        raise ValueError(f"retroagent: decay must be one of {DECAYS}, got {decay!r}")
    coef = reflection_coefficient(base.training_progress(step=ctx.step, total_steps=ctx.total_steps), decay=decay) \
        if coefficient is None else float(coefficient)
    examples = [ctx.examples[int(g)] if ctx.examples else None for g in batch.group]
    keys = [e.prompt if e is not None else p for e, p in zip(examples, batch.prompts or [""] * batch.size)]
    scores = (batch.scores if batch.scores is not None else batch.rewards).double()
    steps = batch.turn_info or [[{"action": c}] for c in batch.completions]
    judge = reflector or subtask_completion
    c = torch.tensor([float(judge(text, e, s, float(sc))) for text, e, s, sc in
                      zip(batch.completions, examples, steps, scores)], dtype=torch.float64)
    if not bool(torch.isfinite(c).all()):  # before the clamp, which would turn +-inf into 1 or 0
        raise ValueError(f"retroagent: the reflector returned a non-finite completion fraction ({c.tolist()[:8]}); "
                         "it must return a fraction in [0, 1]")
    c = c.clamp(0.0, 1.0)
    prior = torch.tensor([ctx.state.best.get(k, 0.0) for k in keys], dtype=torch.float64)
    gain = improvement(c, prior)
    intrinsic = gain - group_stats(gain, batch.group)[0] if group_relative else gain
    r = clip_intrinsic(coef * intrinsic, clip_high=clip_high, clip_low=clip_low, reference_bug=reference_bug)
    new = task_values((scores >= 1.0).double() if baseline == "group_success" else c, batch.group, keys,
                      "mean" if baseline == "group_success" else "max")
    for key, value in new.items():  # phi only rises (the reference keeps the best group success rate)
        ctx.state.best[key] = max(ctx.state.best.get(key, 0.0), value)
    ctx.metrics.update({"retroagent/coef": coef, "retroagent/completion": float(c.mean()),
                        "retroagent/intrinsic": float(r.mean()),
                        "retroagent/improved_frac": float((gain > 0).double().mean())})
    return replace(batch, rewards=(batch.rewards.double() + r).to(batch.rewards.dtype))
