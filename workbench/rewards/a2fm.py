"""A^2FM's Adaptive Policy Optimization (APO): a cost-regularized reward over three execution modes.

A^2FM (arXiv 2510.12838) answers in one of three modes, instant / reasoning / agentic (tools). APO samples every
group with rollouts in each mode (forced by a mode prefix; `workbench.rollout.a2fm`) so the group compares them,
and rewards the cheaper mode at equal accuracy ("cost of pass"). Confidence abstract-only; no training code is
public (OPPO-PersonalAI/Adaptive_Agent_Foundation_Models, commit 6bf1c4e5, holds inference only).

Our reading (the catalog's decision):

    r_i = acc_i * (1 - lambda_cost * min(cost_i / cost_max, 1)),   lambda_cost = 0.1
    cost_i = mode_costs[m_i] + |y_i| + call_cost * calls_i          (token equivalents)

so a wrong rollout gets 0 and a right one between 1 - lambda_cost and 1: the cost term never outweighs being
right, and applies to correct rollouts only (a cheap wrong answer must not beat an expensive wrong one). |y_i| is
the policy's tokens (`completion_ids`, EOS included), calls_i the episode's tool calls that ran (`tools.calls`, the
detector this family shares; a call the environment rejected costs its tokens only), call_cost = 10 token
equivalents per call (unverified: our price of a tool round trip), mode_costs a fixed overhead per mode (default 0:
a mode costs what it spends). cost_max is a fixed normalizer when given, else the largest cost among the rows of
the call (the step's batch; TRL's per-device batch). The relative cost is capped at 1: with a fixed cost_max a
row costing more than it would otherwise fall below a wrong answer's 0 (cost_max 20, 300 tokens: -0.5).

A secondary summary of the paper reports a different adaptive term, r_adaptive = 1 - p^alpha for a non-instant
mode (1 for instant), p the query's success rate under forced rollouts, alpha = 2, added to accuracy and format
rewards with unstated weights; not implemented here (unverified, and it needs the group's success rates).

The mode of a row is read, in order, from a `mode` column, from a mode tag in the prompt (ours "<instant>",
"<reasoning>", "<agentic>", or the official "<classification>...</classification>" with its names default_agent /
reasoning_agent / toolcalling_agent), or from a classification the model wrote itself at the start of its
completion (A^2FM's adaptive rollouts); unknown modes add no overhead.
"""
from __future__ import annotations

from typing import Sequence

from workbench import registry
from workbench.rewards import base
from workbench.rewards.tools import calls

TITLE = "A^2FM: An Adaptive Agent Foundation Model for Tool-Aware Hybrid Reasoning"
MODES = ("instant", "reasoning", "agentic")
OFFICIAL = {"default_agent": "instant", "reasoning_agent": "reasoning", "toolcalling_agent": "agentic"}
CLASS_OPEN, CLASS_CLOSE = "<classification>", "</classification>"
HEAD = 200  # characters of a completion searched for the model's own classification


def mode_tag(mode: str) -> str:
    """The prefix that forces `mode` (prepended to the prompt by the rollout)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; modes are {MODES}")
    return f"<{mode}>"


def classified_mode(text: str) -> str | None:
    """The mode named by the first <classification>...</classification> of `text` (official or our names)."""
    start = text.find(CLASS_OPEN)
    end = text.find(CLASS_CLOSE, start) if start >= 0 else -1
    if end < 0:
        return None
    name = text[start + len(CLASS_OPEN):end].strip()
    return OFFICIAL.get(name, name if name in MODES else None)


def tagged_mode(text: str) -> str | None:
    """The mode whose tag "<mode>" occurs first in `text`, else its classification, else None."""
    found = [(at, mode) for mode in MODES if (at := text.find(mode_tag(mode))) >= 0]
    return min(found)[1] if found else classified_mode(text)


def prompt_text(prompt) -> str:
    """A prompt as text: a string, or TRL's conversational prompt (every message's content, system and user alike:
    the mode tag may sit in either; `base.texts` reads only what the policy wrote)."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, (list, tuple)):
        return ""  # no prompt text: no tag
    return "\n".join(str(m.get("content") or "") for m in prompt if isinstance(m, dict))


def row_modes(completions, columns: dict) -> list[str | None]:
    """Each row's mode: the `mode` column, the prompt's tag, or the completion's own classification."""
    n = len(completions)
    given = columns.get("mode")
    if given is not None:
        bad = sorted({str(m) for m in given if m is not None and m not in MODES})
        if bad:
            raise ValueError(f"apo-a2fm: column 'mode' holds {bad}; modes are {MODES}")
        return list(given)
    prompts = columns.get("prompts") or [""] * n
    heads = [t[:HEAD] for t in base.texts(completions)]
    return [tagged_mode(prompt_text(p)) or classified_mode(h) for p, h in zip(prompts, heads, strict=True)]


def token_counts(completions, completion_ids=None) -> list[int]:
    """|y_i|: the policy's tokens (`completion_ids`, ours and TRL's), else the completion's characters."""
    if completion_ids is not None:
        return [len(ids) for ids in completion_ids]
    return [len(t) for t in base.texts(completions)]


def mode_costs_of(mode_costs) -> dict:
    costs = dict(mode_costs or {})
    bad = {k: v for k, v in costs.items() if k not in MODES or not float(v) >= 0}
    if bad:
        raise ValueError(f"apo-a2fm: mode_costs maps modes {MODES} to costs >= 0, got {bad}")
    return costs


def costs(modes: Sequence, tokens: Sequence[int], calls: Sequence[int], *, call_cost: float,
          mode_costs: dict) -> list[float]:
    """cost_i = mode_costs[m_i] + |y_i| + call_cost * calls_i (token equivalents)."""
    return [float(mode_costs.get(m, 0.0)) + n + call_cost * k for m, n, k in zip(modes, tokens, calls, strict=True)]


def relative_cost(cost: float, cost_max: float) -> float:
    """cost / cost_max capped at 1, so a right answer never earns less than 1 - lambda_cost."""
    return min(cost / cost_max, 1.0)


def cost_regularized(correct: Sequence[bool | None], cost: Sequence[float], *, lam_cost: float,
                     cost_max: float) -> list[float | None]:
    """acc_i (1 - lambda_cost min(cost_i / cost_max, 1)) for a correct row, 0 for a wrong one, None if unknown."""
    return [None if c is None else (1.0 - lam_cost * relative_cost(k, cost_max) if c else 0.0)
            for c, k in zip(correct, cost, strict=True)]


def check_params(lam_cost, call_cost, cost_max) -> None:
    if not 0.0 <= lam_cost <= 1.0:
        raise ValueError(f"apo-a2fm: lam_cost must be in [0, 1] (a right answer keeps a reward >= 1 - lam_cost), "
                         f"got {lam_cost}")
    if not call_cost >= 0.0:
        raise ValueError(f"apo-a2fm: call_cost must be >= 0, got {call_cost}")
    if cost_max is not None and not cost_max > 0.0:
        raise ValueError(f"apo-a2fm: cost_max must be > 0 (or None: the batch's largest cost), got {cost_max}")


A2FM_LOGS = {
    "rewards/apo-a2fm/cost": ("A^2FM: mean min(cost / cost_max, 1) of the correct rows (mode + tokens + tool calls).",
                              "Falling slowly as right answers get cheaper; within [0, 1] (1: the batch's priciest "
                              "row). Rising with accuracy flat: the modes drift to longer outputs."),
    "rewards/apo-a2fm/frac_instant": ("A^2FM: share of rows in instant mode.",
                                      "Fixed by the rollout's split (about 1/3 each) when every mode is forced."),
    "rewards/apo-a2fm/frac_reasoning": ("A^2FM: share of rows in reasoning mode.",
                                        "Fixed by the rollout's split (about 1/3 each) when every mode is forced."),
    "rewards/apo-a2fm/frac_agentic": ("A^2FM: share of rows in agentic mode.",
                                      "Fixed by the rollout's split (about 1/3 each) when every mode is forced."),
    "rewards/apo-a2fm/acc_instant": ("A^2FM: accuracy of the instant-mode rows.",
                                     "Rising. Close to the other modes' accuracy: the cheap mode suffices there."),
    "rewards/apo-a2fm/acc_reasoning": ("A^2FM: accuracy of the reasoning-mode rows.",
                                       "Rising; at or above instant's on hard questions."),
    "rewards/apo-a2fm/acc_agentic": ("A^2FM: accuracy of the agentic-mode rows.",
                                     "Rising; highest where tools are needed. Below instant's: the tool calls fail."),
}


@registry.reward(
    "apo-a2fm", title=TITLE,
    summary="Cost-regularized accuracy: a right answer earns 1 - 0.1 min(cost/cost_max, 1) (cost = mode overhead + "
            "tokens + 10 per tool call), a wrong one 0; the mode is read from the prompt's forced-mode tag.",
    equation=r"r_i = \mathrm{acc}_i\Big(1 - \lambda_{cost}\,\min\Big(\frac{\mathrm{cost}(m_i, |y_i|, "
             r"\mathrm{calls}_i)}{\mathrm{cost}_{max}}, 1\Big)\Big),\ \lambda_{cost} = 0.1", logs=A2FM_LOGS,
    choices={"verifier": base.CORRECTNESS_VERIFIERS})
def a2fm_reward(completions, *, lam_cost=0.1, call_cost=10.0, mode_costs=None, cost_max=None, verifier="auto",
                **columns) -> list[float | None]:
    """`cost_regularized` per row (module docstring); acc from `base.correctness`: the environment's verdict `scores`
    (ours), else (TRL) the completion checked against `answer` / `solution` by `verifier`: "auto" the dependency-free
    exact verifier (QA spans, "A:46"), "math" math-verify (LaTeX math answers). Defaults: lam_cost 0.1 (the
    catalog's decision), call_cost 10 and mode_costs 0 (our reading), cost_max None (the largest cost of the call's
    rows; a fixed cost_max caps cost / cost_max at 1), verifier "auto" (our choice: it needs no extra package and
    reads text answers, for which math-verify gives None).

    Logs rewards/apo-a2fm/cost (mean min(cost / cost_max, 1) over the correct rows) and, per mode present,
    rewards/apo-a2fm/acc_<mode> (its accuracy) and rewards/apo-a2fm/frac_<mode> (its share of the rows).
    """
    check_params(lam_cost, call_cost, cost_max)
    overheads = mode_costs_of(mode_costs)
    correct = base.correctness(completions, reward="apo-a2fm", verifier=verifier, **columns)  # checks verifier too
    modes = row_modes(completions, columns)
    n_calls = calls(completions, columns.get("turn_info"))
    cost = costs(modes, token_counts(completions, columns.get("completion_ids")), n_calls, call_cost=call_cost,
                 mode_costs=overheads)
    scale = cost_max if cost_max is not None else max(cost, default=0.0) or 1.0
    log_modes(columns, modes, correct, [relative_cost(k, scale) for k in cost])
    return cost_regularized(correct, cost, lam_cost=lam_cost, cost_max=scale)


def log_modes(columns: dict, modes: list, correct: list, relative_cost: list[float]) -> None:
    right = [k for c, k in zip(correct, relative_cost) if c]
    if right:
        base.log(columns, "cost", sum(right) / len(right))
    for mode in MODES:
        rows = [c for m, c in zip(modes, correct) if m == mode]
        if rows:
            base.log(columns, f"frac_{mode}", len(rows) / len(modes))
            known = [c for c in rows if c is not None]
            if known:
                base.log(columns, f"acc_{mode}", sum(known) / len(known))
