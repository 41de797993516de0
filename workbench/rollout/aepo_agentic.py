"""AEPO's entropy-balanced rollout (`aepo-agentic`): ARPO's branching (`workbench.rollout.arpo`) with the global /
branch budget split by entropy pre-monitoring and a penalty on consecutive branches.

    m   = k sigma(beta (H_root - H_tool))           global rollouts of a prompt (k = group_size), k - m for branches
          H_root = H_0, H_tool = mean_{s >= 1} H_s   of one pre-monitoring trajectory of the prompt (ARPO's H: the
                                                     top-10 entropy of an action's first 20 tokens / log|V|)
          n_init = clip(floor(m + 1/2), 1, k)        rows sampled from the prompt; the rest are branches or refills
    P   = clip(tau + w dH, 0, 1)                    ARPO's branch probability at a tool response
    P'  = P lambda^c                                c = consecutive tool responses at which the row's path branched
                                                    just before (a branch inherits its parent's count, plus one)

A question more uncertain than its tool responses (H_root > H_tool) gets more global rollouts (m > k/2); one whose
tool responses raise the uncertainty leaves more budget to branching. The penalty keeps one high-entropy path from
taking every branch ("rollout collapse" onto one chain).

Reference: none located. The paper points to dongguanting/ARPO (RUC-NLPIR/ARPO); neither @ e257337 / a95cd08 holds
AEPO code. The catalog gives the split's form (`secondary`) and leaves the penalty's open; the "decide + reading" is
ours: P' = P lambda^c with lambda = 0.5, beta = 1 (confidence partial). Decisions of ours:
- H_root and H_tool come from a pre-monitoring pass: one complete plain trajectory per prompt (no branching), sampled
  before the prompt's rows and not trained on (it costs one rollout per prompt). Without a tool response in it,
  H_tool = H_root (m = k/2). `global_rollouts` set to a number skips the pass and fixes m.
- m is rounded half up and kept in [1, k]: a prompt needs one global rollout to branch from.
- The penalty acts on the same u as ARPO's test: branch iff ARPO's test passes and, when lambda^c < 1,
  u <= lambda^c P. So P' = lambda^c P exactly, a penalized decision never branches where ARPO's would not, and
  lambda = 1 (or c = 0) is ARPO's decision, draw for draw: with m fixed it gives `arpo-agentic`'s batch.
- A streak counts every tool response at which the row's path went on: one without a branch (for any reason, a full
  budget included) resets it.
The loss half of AEPO (entropy-balanced clipping, entropy-aware advantage) is `aepo-agentic-clip`.
"""
from __future__ import annotations

import math

from workbench import registry
from workbench.advantages.aepo_clip import AEPO_TITLE
from workbench.batch import RolloutBatch
from workbench.rollout.arpo import ARPO_LOGS, ARPO_PROVIDES, ENTROPY_TOKENS, LOGPROBS, branch_probability, branches, \
    branching, check_arpo, check_engine_and_env, grow

AEPO_LOGS = {
    **ARPO_LOGS,
    "aepo/global_rollouts": ("AEPO: global rollouts per prompt, m = k sigma(beta (H_root - H_tool)) from the "
                             "pre-monitoring trajectory (the rest of the group is branches and refills).",
                             "Near group_size / 2; high when questions are more uncertain than tool responses, low "
                             "when tool responses raise the uncertainty."),
}


def global_share(k: int, h_root: float, h_tool: float, beta: float) -> float:
    """m = k sigma(beta (H_root - H_tool)) in [0, k] (the logistic written with tanh: no overflow)."""
    return k * 0.5 * (1.0 + math.tanh(0.5 * beta * (h_root - h_tool)))


def global_count(m: float, k: int) -> int:
    """Global rollouts sampled: m rounded half up, at least 1 (branches need a root), at most k."""
    return min(k, max(1, math.floor(m + 0.5)))


def penalized_branches(u: float, delta_h: float, tau: float, w: float, penalty: float, streak: int) -> bool:
    """ARPO's test on u, then u <= lambda^c P when the penalty bites: P(branch) = lambda^c P, never above ARPO's."""
    keep = penalty ** streak
    return branches(u, delta_h, tau, w) and (keep == 1.0 or u <= keep * branch_probability(delta_h, tau, w))


def pre_monitor(engine, task, examples, *, sampling, entropy_tokens, logprobs, max_turns, max_total_tokens
                ) -> list[tuple[float, float]]:
    """(H_root, H_tool) of each prompt from one plain trajectory (no branch: a group of one, beam 1)."""
    forest = grow(engine, task, examples, group_size=1, sampling=sampling, initial=[1] * len(examples), beam_size=1,
                  decide=None, rng=None, entropy_tokens=entropy_tokens, logprobs=logprobs, max_turns=max_turns,
                  max_total_tokens=max_total_tokens)
    out = []
    for (trace,) in forest.rows:
        h_root, after_tools = trace.entropies[0], trace.entropies[1:]
        out.append((h_root, sum(after_tools) / len(after_tools) if after_tools else h_root))
    return out


def check_aepo(*, global_rollouts=None, balance_beta=1.0, branch_penalty=0.5, group_size=None, **kw) -> None:
    check_arpo(initial_rollouts=global_rollouts, group_size=group_size, who="aepo-agentic", count="global_rollouts",
               **{k: v for k, v in kw.items() if k != "initial_rollouts"})
    if not balance_beta >= 0:
        raise ValueError(f"aepo-agentic: balance_beta (beta) must be >= 0, got {balance_beta}")
    if not 0 < branch_penalty <= 1:
        raise ValueError(f"aepo-agentic: branch_penalty (lambda) must be in (0, 1] (1: no penalty), got "
                         f"{branch_penalty}")


@registry.rollout(
    "aepo-agentic", title=AEPO_TITLE,
    summary="ARPO's entropy branching with the budget split by pre-monitoring, m = k sigma(beta (H_root - H_tool)) "
            "global rollouts and k - m branch slots, and the branch probability damped to P lambda^c after c "
            "consecutive branches on a path (lambda = 0.5, beta = 1).",
    equation=r"m = k\,\sigma\big(\beta\,(H_{root} - \bar H_{tool})\big),\quad "
             r"P' = \mathrm{clip}(\tau + w\,\Delta H, 0, 1)\,\lambda^{c}",
    reads=(), provides=ARPO_PROVIDES, needs=("multi_turn", "env_copy", "topk_logprobs"), logs=AEPO_LOGS, check=check_aepo)
def aepo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, global_rollouts=None,
                 balance_beta=1.0, branch_penalty=0.5, beam_size=2, branch_probability=0.5, entropy_weight=0.5,
                 entropy_tokens=ENTROPY_TOKENS, logprobs=LOGPROBS, max_turns=None,
                 max_total_tokens=None) -> RolloutBatch:
    """`arpo-agentic`'s rollout (its parameters) whose prompts get m global rollouts each (module docstring;
    `global_rollouts` fixes m and skips the pre-monitoring pass) and whose branch test is damped by
    `branch_penalty` (lambda) per consecutive branch. Logs ARPO's metrics and `aepo/global_rollouts`."""
    check_aepo(global_rollouts=global_rollouts, balance_beta=balance_beta, branch_penalty=branch_penalty,
               group_size=group_size, beam_size=beam_size, branch_probability=branch_probability,
               entropy_weight=entropy_weight, entropy_tokens=entropy_tokens, logprobs=logprobs)
    if not examples:
        raise ValueError("aepo-agentic needs at least one example")
    settings = dict(entropy_tokens=entropy_tokens, logprobs=logprobs, max_turns=max_turns,
                    max_total_tokens=max_total_tokens)
    if global_rollouts is not None or sampling.greedy:
        initial = [global_rollouts or group_size] * len(examples)
    else:
        check_engine_and_env(engine, task, "aepo-agentic")
        monitored = pre_monitor(engine, task, examples, sampling=sampling, **settings)
        initial = [global_count(global_share(group_size, h_root, h_tool, balance_beta), group_size)
                   for h_root, h_tool in monitored]

    def decide(trace, delta, u):
        return penalized_branches(u, delta, branch_probability, entropy_weight, branch_penalty, trace.streak)

    batch = branching(engine, task, examples, group_size=group_size, sampling=sampling, ctx=ctx, initial=initial,
                      beam_size=beam_size, decide=decide, who="aepo-agentic", **settings)
    if ctx is not None and not sampling.greedy:
        ctx.metrics["aepo/global_rollouts"] = sum(initial) / len(initial)
    return batch
