"""B-Coder: value-based Q-learning over program tokens with a conservative Bellman target.

The paper (abstract only; no code located): a Q-function initialized from a pre-trained LM, a *conservative* Bellman
operator that bootstraps with the pre-trained (reference) policy's action instead of a max over the vocabulary, and
the learned value reused to rerank generated programs. With a* the reference's greedy action,

    (B_c Q)(s, a) = r(s, a) + gamma Q(s', a*(s')),     a*(s') = argmax_a' pi_ref(a' | s')     (0 after the end)

For a fixed pi_ref, B_c is the policy-evaluation operator of the deterministic policy s -> a*(s): a gamma-contraction
in the sup norm whose fixed point is Q of the pi_ref-greedy policy, reached by value iteration (in H sweeps on a
horizon-H episode whatever gamma). Bootstrapping on one known action avoids the max over a 10^5-token vocabulary,
where Q-learning's overestimation lives.

Our reading (the card's "decide"; `unverified`):
- Q from the LM, dueling:  Q(s, a) = V(s) + alpha (log pi_theta(a | s) - max_v log pi_theta(v | s)).
  The advantage part is <= 0 and 0 at the greedy token, so argmax_a Q = argmax_a pi_theta(a | s) at every step
  (at initialization the pre-trained LM's greedy program); alpha = 1 (log-prob units). V(s) is the recipe's critic
  (a value head on the policy's hidden states, trained by the `value` slot on the rollout's returns: the paper's
  separately trained V), read at rollout time (`values`) and held fixed inside the loss.
- Target, per policy token t (state s_t, token a_t; s_{t+1} the next policy token's state, across observation
  tokens on multi-turn rows, as GAE):
      y_t = r_t + gamma [t not last] (V(s_{t+1})
                                      + alpha (log pi_theta(a*_{t+1} | s_{t+1}) - max_v log pi_theta(v | s_{t+1})))
  with r_t the outcome reward on the row's last policy token and a*_{t+1} the reference's greedy token at s_{t+1}
  (`ref_argmax`, the logit statistic the reference pass computes because this objective reads it). The current
  policy's terms come from the training forward's LM head (`context.Head`, no extra pass).
- Loss = masked mean_t (Q(s_t, a_t) - sg(y_t))^2; the gradient reaches the LM through log pi_theta(a_t | s_t) only:
  -2 alpha (y_t - Q_t) grad log pi_theta(a_t | s_t) per token (the greedy log-prob and V are held fixed).
  Where pi_theta's greedy token is the reference's (at initialization), the bootstrap's advantage part is 0 and
  y_t = r_t + gamma V(s_{t+1}), the critic's TD(0) target.
- gamma = 1 (episodic programs with one terminal reward); alpha = 1. alpha sets how peaked the sampling policy
  becomes: where Q fits its target, log pi(a | s) - max_v log pi(v | s) = (Q(s, a) - V(s)) / alpha, so with 0/1
  rewards a sampled token sits at most 1 / alpha nats below the greedy one (greedy decoding is argmax Q whatever
  alpha).
- Reranking: a complete program's score is Q of its last token, its predicted return; with the exact Q that is
  its reward, so a correct candidate is ranked first whenever the set holds one.

Reference: none located (REFERENCES-AGENTS.md section 5); the tests check the operator's properties on enumerable
toy problems (`workbench.advantages.exact.EpisodeMDP`) and the loss's target and gradient.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import check_rewards, last_token_mask
from workbench.objectives.ppo import check_inputs
from workbench.objectives.rover import at_next_policy_token, check_head, check_head_reproduces, head_stats

B_CODER_TITLE = "B-Coder: Value-Based Deep Reinforcement Learning for Program Synthesis"


# ----------------------------------------------------------------------------------- the objective on the LM


def dueling_q(values: torch.Tensor, logp: torch.Tensor, max_logp: torch.Tensor, alpha: float) -> torch.Tensor:
    """Q(s_t, a) = V(s_t) + alpha (log pi(a | s_t) - max_v log pi(v | s_t)), [B, T] (V and the max held fixed)."""
    return values.detach().to(logp.dtype) + alpha * (logp - max_logp.detach().to(logp.dtype))


def terminal_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """r_t [B, T]: the outcome reward on each row's last policy token, 0 elsewhere."""
    check_rewards(rewards)
    return last_token_mask(mask).to(mask.dtype) * rewards.to(mask.dtype)[:, None]


def conservative_target(rewards_t: torch.Tensor, q_ref_action: torch.Tensor, mask: torch.Tensor,
                        gamma: float) -> torch.Tensor:
    """y_t = r_t + gamma Q(s_{t+1}, a*_{t+1}) [B, T], detached; `q_ref_action` [B, T] is Q(s_t, a*_t) at each policy
    token (0 after a row's last)."""
    return (rewards_t + gamma * at_next_policy_token(q_ref_action.to(rewards_t.dtype) * (mask > 0), mask)).detach()


def check_b_coder_settings(*, gamma=1.0, alpha=1.0, **_) -> None:
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if not alpha > 0:
        raise ValueError(f"alpha (the advantage's scale) must be > 0, got {alpha}")


def check_b_coder_args(*, gamma, alpha, values, ref_argmax, rewards, mask) -> None:
    check_b_coder_settings(gamma=gamma, alpha=alpha)
    for name, x in (("values", values), ("ref_argmax", ref_argmax)):
        if x is None or x.shape != mask.shape:
            raise ValueError(f"b-coder needs {name} [B, T] = {tuple(mask.shape)} (values: the recipe's critic; "
                             f"ref_argmax: the reference pass), got {None if x is None else tuple(x.shape)}")
    if rewards is None or rewards.shape != mask.shape[:1]:
        got = None if rewards is None else tuple(rewards.shape)
        raise ValueError(f"b-coder needs rewards [B] = {mask.shape[0]}, got {got}")


B_CODER_LOGS = {
    "b-coder/q_mean": ("B-Coder: mean Q(s_t, a_t) = V(s_t) + alpha (log pi(a_t|s_t) - max log pi(.|s_t)) of the "
                       "sampled tokens.",
                       "Tracks the mean reward as the critic learns; far below the reward scale: alpha too large "
                       "(the log-prob part dominates Q)."),
    "b-coder/target_mean": ("B-Coder: mean conservative Bellman target r_t + gamma Q(s_{t+1}, a*), a* the reference's "
                            "greedy token.",
                            "Between 0 and the reward scale (binary rewards: the success rate). Outside: the critic "
                            "or the bootstrap is off."),
    "b-coder/td_abs": ("B-Coder: mean |y - Q|, the Bellman residual the loss squares.",
                       "Falls as Q fits its target; rising: the critic and the policy chase each other (lower lr)."),
    "b-coder/ref_greedy_frac": ("B-Coder: share of positions where the policy's greedy token is the reference's.",
                                "Near 1 at the start (the policy is the reference) and falls slowly as training "
                                "moves the greedy tokens."),
}


@registry.objective(
    "b-coder", title=B_CODER_TITLE,
    summary="Q-learning over tokens: Q = V(s) + alpha (log pi(a|s) - max log pi(.|s)) regressed on the conservative "
            "Bellman target r + gamma Q(s', a*), a* the reference's greedy token (no max over the vocabulary).",
    equation=r"\ell_t = \big(Q(s_t,a_t) - \mathrm{sg}[r_t + \gamma Q(s_{t+1}, a^*_{t+1})]\big)^2,\ "
             r"Q(s,a) = V(s) + \alpha\big(\log\pi_\theta(a|s) - \max_v \log\pi_\theta(v|s)\big),\ "
             r"a^* = \arg\max_a \pi_{ref}(a|s)",
    reads=("head", "response_ids", "ref_argmax", "values", "rewards"), logs=B_CODER_LOGS, check=check_b_coder_settings)
def b_coder(logp, old_logp, advantages, mask, *, head, response_ids, ref_argmax, values, rewards, agg="token-mean",
            denom=None, gamma=1.0, alpha=1.0):
    """B-Coder's conservative Q-learning loss (module docstring). Reads the training forward's `head`, the sampled
    `response_ids`, the reference's greedy tokens `ref_argmax` [B, T], the critic's rollout-time `values` [B, T] and
    the outcome `rewards` [B]; `old_logp` and `advantages` are unused (the target is the Bellman target).

    Metrics: `b-coder/q_mean` (mean Q of the sampled tokens), `b-coder/target_mean` (mean y),
    `b-coder/td_abs` (mean |y - Q|), `b-coder/ref_greedy_frac` (share of positions where the policy's greedy token
    is the reference's).
    """
    check_inputs(logp, old_logp, advantages, mask)
    check_head(head, mask, "b-coder")
    check_b_coder_args(gamma=gamma, alpha=alpha, values=values, ref_argmax=ref_argmax, rewards=rewards, mask=mask)
    valid = mask > 0
    _, max_logp, (head_logp, ref_action_logp) = head_stats(head, valid, (response_ids, ref_argmax))
    check_head_reproduces(head_logp, logp, valid, "b-coder", head.hidden.dtype)
    q = dueling_q(values, logp, max_logp, alpha)
    q_ref_action = values.to(max_logp.dtype) + alpha * (ref_action_logp - max_logp)      # Q(s_t, a*_t), no gradient
    target = conservative_target(terminal_rewards(rewards, mask).to(logp.dtype), q_ref_action, mask, gamma)
    loss = ops.aggregate((q - target) ** 2, mask, agg, denom)
    with torch.no_grad():
        greedy_is_ref = (ref_action_logp >= max_logp).to(mask.dtype)
        metrics = {"b-coder/q_mean": ops.masked_mean(q.detach(), mask),
                   "b-coder/target_mean": ops.masked_mean(target, mask),
                   "b-coder/td_abs": ops.masked_mean((target - q.detach()).abs(), mask),
                   "b-coder/ref_greedy_frac": ops.masked_mean(greedy_is_ref, mask)}
    return loss, {k: float(v) for k, v in metrics.items()}


# ------------------------------------------------------------------ the operator on enumerable toy problems
# Tables over an `EpisodeMDP` (workbench.advantages.exact): Q maps each history h to a list of one value per action.


def greedy_actions(policy: dict) -> dict:
    """a*(h) = argmax_a pi(a | h) for every history of a tabular policy {h: probabilities [A]} (first on ties)."""
    return {h: int(torch.as_tensor(p).argmax()) for h, p in policy.items()}


def conservative_bellman(mdp, q: dict, ref_greedy: dict, gamma: float = 1.0) -> dict:
    """(B_c Q)(h, a) = r(h, a) + gamma Q(h + a, a*(h + a)) for every history h and action a (0 after the end)."""
    out = {}
    for h in mdp.histories():
        row = []
        for a in range(len(mdp.actions)):
            reward, done, _ = mdp.step(h, a)
            nxt = h + (a,)
            row.append(reward + (0.0 if done else gamma * q[nxt][ref_greedy[nxt]]))
        out[h] = row
    return out


def sup_distance(q1: dict, q2: dict) -> float:
    """max_{h, a} |Q1(h, a) - Q2(h, a)|."""
    return max(abs(x - y) for h in q1 for x, y in zip(q1[h], q2[h]))


def conservative_value_iteration(mdp, ref_greedy: dict, gamma: float = 1.0, *, q0: dict | None = None,
                                 tol: float = 0.0, max_sweeps: int = 1000) -> tuple[dict, int]:
    """(Q, sweeps): B_c applied from `q0` (default all zeros) until a sweep changes no value by more than `tol`."""
    q = q0 if q0 is not None else {h: [0.0] * len(mdp.actions) for h in mdp.histories()}
    for sweep in range(1, max_sweeps + 1):
        new = conservative_bellman(mdp, q, ref_greedy, gamma)
        if sup_distance(new, q) <= tol:
            return new, sweep
        q = new
    raise ValueError(f"conservative value iteration did not settle within {max_sweeps} sweeps (tol {tol})")


def program_score(mdp, q: dict, program: tuple) -> float:
    """Q of a complete program's last token: its predicted return (B-Coder's value-based reranking score)."""
    return q[tuple(program[:-1])][program[-1]]


def rerank(mdp, q: dict, programs: list) -> list:
    """The candidate programs (tuples of action indices) sorted by `program_score`, best first (stable on ties)."""
    return sorted(programs, key=lambda p: -program_score(mdp, q, p))
