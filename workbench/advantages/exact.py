"""The exact answer for credit assignment: true Q and advantages of every prefix of a small enumerable episode,
and the bias and variance of every advantage estimator against them.

An episodic decision problem with a tiny action vocabulary and a few turns is a tree of histories
h = (a_0, ..., a_{t-1}). For a policy pi(a | h) given as a table, with deterministic transitions,

    Q(h, a) = r(h, a) + gamma V(h + a)          V(h) = sum_a pi(a | h) Q(h, a)        (V = 0 after the episode)
    A(h, a) = Q(h, a) - V(h)                     the advantage of the action taken at turn t

computed by recursion over every history (|A|^H of them). An estimator sees only sampled groups of G episodes (as a
trainer does) and assigns each turn an advantage A_hat; over many groups, per visited (h, a):

    bias(h, a)     = E[A_hat | h, a] - A(h, a)              variance(h, a) = Var[A_hat | h, a]

averaged over visits (so the pairs the policy plays often weigh more). A turn's A_hat is the estimator's advantage
on the turn's action token. Each episode is a batch row laid out as the multi-turn rollout lays it out (one action
token, mask 1, then one observation token, mask 0), with the fields multi-turn estimators read: `turn`,
`turn_rewards`, `turn_info[i][s]["state"]` (the observation: it recurs across histories, so anchor-state
methods group by it) and a critic's `values` (the exact V(h_t), or 0: an estimator with a perfect critic and
one with none).

Two problems ship: `keydoor_mdp`, where picking up a key at the first turn decides whether the door opens at the
end and the observation shows the position only (so the same observation is reached with and without the key:
anchor states mix histories with different values), and `random_tree`, random 0/1 leaves with coarse observations.
"""
from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.batch import RolloutBatch

History = tuple  # (a_0, ..., a_{t-1}), action indices


@dataclass(frozen=True)
class EpisodeMDP:
    """A deterministic episodic problem over histories of action indices.

    step(history, action) -> (reward, done, observation): the reward of taking `action` after `history`, whether
    the episode ends, and what the agent observes next (hashable; the anchor state of the next turn).
    start: the first observation. Every episode ends within `horizon` actions."""

    actions: tuple[str, ...]
    horizon: int
    step: Callable
    start: object
    name: str = ""
    info: Callable | None = None  # info(history) -> extra turn_info entries after it (e.g. the subgoal window)

    def histories(self) -> list[History]:
        """Every history a turn can be taken from (episode not ended), shortest first."""
        out, frontier = [], [()]
        while frontier:
            out += frontier
            frontier = [h + (a,) for h in frontier for a in range(len(self.actions))
                        if not self.step(h, a)[1] and len(h) + 1 < self.horizon]
        return out

    def observation(self, history: History):
        """The observation the turn after `history` acts from."""
        return self.start if not history else self.step(history[:-1], history[-1])[2]


def keydoor_mdp(length: int = 3, slack: int = 1) -> EpisodeMDP:
    """A corridor of `length` cells to a door. Actions: K (pick up the key, only at cell 0), R (right), L (left),
    O (open: reward 1 and the end if at the door holding the key). The observation is the cell only. The episode
    ends when the door opens or after length + 2 + slack actions (K, the walk, O, plus slack)."""
    actions, horizon = ("K", "R", "L", "O"), length + 2 + slack

    def state(history):
        pos, key = 0, False
        for a in history:
            name = actions[a]
            key |= name == "K" and pos == 0
            pos = min(pos + 1, length) if name == "R" else max(pos - 1, 0) if name == "L" else pos
        return pos, key

    def step(history, a):
        pos, key = state(history + (a,))
        opened = actions[a] == "O" and pos == length and key
        return float(opened), opened or len(history) + 1 >= horizon, f"cell{pos}"

    return EpisodeMDP(actions, horizon, step, "cell0", name=f"keydoor(length={length}, slack={slack})",
                      info=lambda history: {"subgoal": int(state(history)[1])})


def random_tree(depth: int = 3, branching: int = 2, p_success: float = 0.4, n_obs: int = 2,
                seed: int = 0) -> EpisodeMDP:
    """Every history of `depth` actions is a leaf with reward 1 with probability `p_success` (drawn once, by
    `seed`); observations are one of `n_obs` labels per depth (drawn per history), so anchor states recur."""
    rng = random.Random(seed)
    leaves = {h: float(rng.random() < p_success) for h in itertools.product(range(branching), repeat=depth)}
    labels = {h: f"d{len(h)}o{rng.randrange(n_obs)}" for n in range(1, depth + 1)
              for h in itertools.product(range(branching), repeat=n)}

    def step(history, a):
        h = history + (a,)
        return (leaves[h] if len(h) == depth else 0.0), len(h) == depth, labels[h]

    return EpisodeMDP(tuple("abcdefgh"[:branching]), depth, step, "d0o0",
                      name=f"random_tree(depth={depth}, branching={branching}, seed={seed})")


def two_level_tree() -> tuple[EpisodeMDP, dict]:
    """The smallest case worked by hand (notebook 13's exercises, the tests): actions a, b, two turns, leaves
    aa = 1, ab = 0, ba = 1, bb = 1; pi(a | start) = .25, pi(a | a) = .5, pi(a | b) = .8. So V(a) = .5, V(b) = 1,
    V(start) = .875."""
    leaves = {(0, 0): 1.0, (0, 1): 0.0, (1, 0): 1.0, (1, 1): 1.0}

    def step(history, a):
        h = history + (a,)
        return (leaves[h] if len(h) == 2 else 0.0), len(h) == 2, f"o{len(h)}"

    table = lambda p: torch.tensor([p, 1 - p], dtype=torch.float64)
    return EpisodeMDP(("a", "b"), 2, step, "o0", name="two-level tree"), {(): table(0.25), (0,): table(0.5),
                                                                          (1,): table(0.8)}


# ----------------------------------------------------------------------------- policies and exact values

def tabular_policy(mdp: EpisodeMDP, *, temperature: float = 1.0, seed: int = 0) -> dict[History, torch.Tensor]:
    """pi(. | h) for every history: softmax of standard-normal logits / temperature (seeded); temperature = inf
    gives the uniform policy."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for h in mdp.histories():
        logits = torch.randn(len(mdp.actions), generator=gen, dtype=torch.float64)
        out[h] = torch.softmax(logits / temperature, -1) if math.isfinite(temperature) else \
            torch.full((len(mdp.actions),), 1 / len(mdp.actions), dtype=torch.float64)
    return out


def uniform_policy(mdp: EpisodeMDP) -> dict[History, torch.Tensor]:
    """pi(a | h) = 1 / |A| everywhere (ROVER's and ProAct's random policy)."""
    return tabular_policy(mdp, temperature=math.inf)


def optimal_actions(mdp: EpisodeMDP, gamma: float = 1.0) -> dict[History, int]:
    """argmax_a Q*(h, a) for every history (the first best action on ties), by backward induction."""
    best_value, best = {}, {}
    for h in reversed(mdp.histories()):
        q = []
        for a in range(len(mdp.actions)):
            reward, done, _ = mdp.step(h, a)
            q.append(reward + (0.0 if done else gamma * best_value[h + (a,)]))
        best[h] = max(range(len(q)), key=q.__getitem__)
        best_value[h] = q[best[h]]
    return best


def noisy_optimal_policy(mdp: EpisodeMDP, *, eps: float = 0.3, seed: int = 0) -> dict[History, torch.Tensor]:
    """(1 - eps) on an optimal action plus eps spread by a seeded random softmax: a policy that succeeds sometimes,
    as a warm-started agent does (eps = 0: optimal; eps = 1: the random tabular policy)."""
    noise = tabular_policy(mdp, seed=seed)
    out = {}
    for h, a in optimal_actions(mdp).items():
        p = eps * noise[h]
        p[a] += 1 - eps
        out[h] = p
    return out


@dataclass
class Exact:
    """V(h), Q(h, a) and A(h, a) = Q - V for every history h of `mdp` under `policy`."""

    V: dict = field(default_factory=dict)
    Q: dict = field(default_factory=dict)

    def advantage(self, history: History, action: int) -> float:
        return self.Q[history][action] - self.V[history]


def exact_values(mdp: EpisodeMDP, policy: dict, gamma: float = 1.0) -> Exact:
    """Q(h, a) = r + gamma V(h + a) (0 after the end), V(h) = sum_a pi(a|h) Q(h, a), by recursion from the leaves."""
    out = Exact()
    for h in reversed(mdp.histories()):  # longest first: every continuation is already valued
        q = []
        for a in range(len(mdp.actions)):
            reward, done, _ = mdp.step(h, a)
            q.append(reward + (0.0 if done else gamma * out.V[h + (a,)]))
        out.Q[h] = q
        out.V[h] = float(sum(p * v for p, v in zip(policy[h].tolist(), q)))
    return out


# ----------------------------------------------------------------------------- sampled groups as a batch

@dataclass
class Episode:
    actions: list[int]
    rewards: list[float]
    observations: list  # the observation each turn acted from


def sample_episode(mdp: EpisodeMDP, policy: dict, rng: random.Random) -> Episode:
    h, rewards, observations = (), [], []
    while True:
        observations.append(mdp.observation(h))
        a = rng.choices(range(len(mdp.actions)), weights=policy[h].tolist())[0]
        reward, done, _ = mdp.step(h, a)
        h, rewards = h + (a,), rewards + [reward]
        if done:
            return Episode(list(h), rewards, observations)


def episode_batch(mdp: EpisodeMDP, episodes: list[Episode], group_size: int, policy: dict,
                  values: dict | None = None) -> RolloutBatch:
    """Episodes as a multi-turn RolloutBatch, rows i // group_size forming a group: per turn one action token
    (mask 1, turn s) and one observation token (mask 0, turn s) except after the last action. `values`: V(h) put on
    each turn's action token and its observation token (a critic's V(s_t)); None: 0."""
    B, S = len(episodes), max(len(e.actions) for e in episodes)
    T = 2 * S - 1
    ids = torch.zeros(B, T, dtype=torch.long)
    mask, logp, value = torch.zeros(B, T), torch.zeros(B, T), torch.zeros(B, T)
    turn = torch.full((B, T), -1, dtype=torch.long)
    turn_rewards = torch.zeros(B, S)
    info = []
    for i, e in enumerate(episodes):
        rows = []
        for s, a in enumerate(e.actions):
            h = tuple(e.actions[:s])
            t = 2 * s
            ids[i, t], mask[i, t], turn[i, t] = 1 + a, 1.0, s
            logp[i, t] = math.log(float(policy[h][a]))
            v = 0.0 if values is None else values[h]
            value[i, t] = v
            if s < len(e.actions) - 1:
                ids[i, t + 1], turn[i, t + 1] = 1 + len(mdp.actions), s
                value[i, t + 1] = v
            turn_rewards[i, s] = e.rewards[s]
            extra = mdp.info(tuple(e.actions[:s + 1])) if mdp.info else {}
            rows.append({"state": e.observations[s], "action": mdp.actions[a], "tool_error": None, **extra})
        info.append(rows)
    returns = torch.tensor([sum(e.rewards) for e in episodes])
    return RolloutBatch(
        response_ids=ids, mask=mask, group=torch.arange(B) // group_size, rewards=returns, scores=returns.clone(),
        logp=logp, old_logp=logp.clone(), mu_logp=logp.clone(), values=value, old_values=value.clone(), turn=turn,
        turn_rewards=turn_rewards, truncated=torch.zeros(B, dtype=torch.bool), turn_info=info,
        completions=["".join(mdp.actions[a] for a in e.actions) for e in episodes], prompts=[mdp.name] * B)


def turn_advantages(advantages: torch.Tensor, batch: RolloutBatch) -> list[list[float]]:
    """Per row, the advantage on each turn's action token (the one policy token of the turn)."""
    out = []
    for i in range(batch.size):
        picked = (batch.mask[i] > 0).nonzero().flatten()
        out.append(advantages[i, picked].tolist())
    return out


# ----------------------------------------------------------------------------- estimators against the exact answer

@dataclass(frozen=True)
class Estimator:
    """One advantage estimator as the comparison runs it: a registered key, its keyword arguments, and whether it
    reads a critic (given the exact V: a perfect critic)."""

    label: str
    key: str
    kw: dict = field(default_factory=dict)
    critic: bool = False
    note: str = ""
    fill: Callable | None = None  # fill(batch, episodes, mdp) -> None: what the estimator's shaping stage provides


def exact_segment_values(batch: RolloutBatch, episodes: list, mdp: EpisodeMDP, exact: Exact) -> None:
    """SPO-chain with a cut before every turn and the exact V(h_t) as each cut's Monte Carlo value (infinitely many
    continuations): `segment` = the turn, `segment_values[i, t]` = V(h_t)."""
    batch.segment = torch.where(batch.mask > 0, batch.turn, torch.full_like(batch.turn, -1))
    values = torch.zeros(batch.size, batch.turn_rewards.shape[1], dtype=torch.float64)
    for i, e in enumerate(episodes):
        values[i, :len(e.actions)] = torch.tensor([exact.V[tuple(e.actions[:s])] for s in range(len(e.actions))])
    batch.segment_values = values


def uniform_q(batch: RolloutBatch, episodes: list, mdp: EpisodeMDP, exact: Exact) -> None:
    """ProAct's Monte Carlo critic with infinitely many rollouts: Q of the *uniform random* policy (not the current
    one) of each turn's action in `turn_q`, and of every action in `turn_info[i][s]["q_moves"]`."""
    q = exact_values(mdp, uniform_policy(mdp)).Q
    table = torch.zeros(batch.size, batch.turn_rewards.shape[1], dtype=torch.float64)
    for i, e in enumerate(episodes):
        for s, a in enumerate(e.actions):
            h = tuple(e.actions[:s])
            table[i, s] = q[h][a]
            batch.turn_info[i][s] = {**batch.turn_info[i][s], "q_moves": dict(zip(mdp.actions, q[h]))}
    batch.turn_q = table


# The F1 baselines and the F4 estimators that run on sampled groups of this problem, each as its recipe calls it
# (whitening off where it would only rescale). Those that need what an enumerable tabular problem does not have
# are in `NOT_HERE`, with the reason.
ESTIMATORS = (
    Estimator("grpo", "grpo", note="episode z-score broadcast to every turn"),
    Estimator("grpo (no std)", "grpo", {"scale": "none"},
              note="Dr. GRPO: return minus the group mean (= seeupo's GRAE, ipa's default credit)"),
    Estimator("rloo", "rloo", note="leave-one-out baseline, broadcast"),
    Estimator("gae λ=1, exact V", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}, critic=True,
              note="return-to-go minus the exact V(h_t)"),
    Estimator("gae λ=0, exact V", "gae", {"gamma": 1.0, "lam": 0.0, "whiten": False}, critic=True,
              note="one-step TD with the exact V: the exact advantage"),
    Estimator("gae λ=0.95, exact V", "gae", {"gamma": 1.0, "lam": 0.95, "whiten": False}, critic=True),
    Estimator("gigpo", "gigpo", {"gamma": 1.0}, note="episode z-score + step return z-scored over anchor states"),
    Estimator("gigpo (mean_norm)", "gigpo", {"gamma": 1.0, "mode": "mean_norm"},
              note="no std division: comparable in scale"),
    Estimator("hgpo", "hgpo", {"gamma": 1.0}, note="step returns in groups keyed by the last k observations"),
    Estimator("hgpo (mean_norm)", "hgpo", {"gamma": 1.0, "mode": "mean_norm"}, note="no std division"),
    Estimator("flow-grpo", "flow-grpo", note="episode z-score over turn-samples (long episodes weigh more)"),
    Estimator("vl-dac, exact V", "vl-dac", {"gamma": 1.0, "lam": 0.95, "whiten": False}, critic=True,
              note="GAE over environment steps with the exact V"),
    Estimator("poad, exact V", "poad", {"gamma": 1.0, "lam": 0.95, "whiten": False}, critic=True,
              note="token-level GAE, no discount inside an action (one-token actions here: = gae)"),
    Estimator("hiper, exact V", "hiper", {"gamma": 1.0, "lam": 0.95, "whiten": False}, critic=True,
              note="planner advantage per subgoal window (before / after the key), executor GAE inside"),
    Estimator("spo-segment, exact V", "spo-segment", {"whiten": False, "prob_threshold": None},
              note="a cut before every turn valued exactly: V(h_{t+1}) - V(h_t)", fill=exact_segment_values),
    Estimator("proact-mc-critic, uniform Q", "proact-mc-critic",
              note="Q of the uniform random policy, normalized over turns from the same observation", fill=uniform_q),
)

NOT_HERE = {
    "igpo": "the belief is a language model's probability of the answer; its exact analogue, V(h), gives the "
            "TD error of `gae λ=0, exact V`",
    "infopo": "scores the next action with the observation replaced by a neutral text: a language model's signal",
    "ui-s1": "rewards matching an expert's action, a different reward than this problem's",
    "cm2-advantage": "needs checklist items judged per turn",
    "spa-rl": "reads a progress estimate and a critic from different tokens of a turn; actions here are one token",
    "digirl": "its critic is a success classifier trained on Monte Carlo returns, read as a logit",
    "ipa": "its default credit is the episode's group z-score (`grpo`); the chunk ratio acts in the loss",
    "seeupo": "its advantage is GRAE (`grpo (no std)`); the reverse-order update acts in the optimizer",
    "adora": "re-weights whole groups by response lengths, which barely vary here",
    "xrpo-sharpening": "a bonus on correct responses the policy finds unlikely: it acts on the loss weight, not on "
                       "which turn earned the reward",
    "hbpo-advantage": "needs length budgets",
    "spo-single": "one response per prompt with a value tracked across steps",
    "rover": "an objective (regression on the uniform policy's Q), not a per-turn advantage",
    "b-coder": "an objective (token Q-learning), not a per-turn advantage",
}


def sample_groups(mdp: EpisodeMDP, policy: dict, *, n_groups: int, group_size: int, seed: int = 0) -> list:
    """`n_groups` lists of `group_size` episodes sampled from `policy` (seeded)."""
    rng = random.Random(seed)
    return [[sample_episode(mdp, policy, rng) for _ in range(group_size)] for _ in range(n_groups)]


def estimates_per_pair(mdp: EpisodeMDP, policy: dict, est: Estimator, groups: list, exact: Exact) -> dict:
    """{(h, a): [A_hat of every sampled turn that took a after h]} of estimator `est` over `groups`; the exact V is
    the critic of estimators that read one."""
    entry = registry.get("advantage", est.key)
    out: dict = {}
    for episodes in groups:
        batch = episode_batch(mdp, episodes, len(episodes), policy, exact.V if est.critic else None)
        if est.fill:
            est.fill(batch, episodes, mdp, exact)
        for e, row in zip(episodes, turn_advantages(entry.fn(batch, **est.kw), batch)):
            for s, value in enumerate(row):
                out.setdefault((tuple(e.actions[:s]), e.actions[s]), []).append(value)
    return out


def bias_variance(mdp: EpisodeMDP, policy: dict, estimators=ESTIMATORS, *, n_groups: int = 400,
                  group_size: int = 8, gamma: float = 1.0, seed: int = 0) -> list[dict]:
    """One row per estimator: visit-weighted mean |bias|, mean variance, MSE, and the correlation of A_hat with the
    exact A over every sampled turn, from `n_groups` groups of `group_size` episodes (seeded). Every estimator sees
    the same groups."""
    exact = exact_values(mdp, policy, gamma)
    groups = sample_groups(mdp, policy, n_groups=n_groups, group_size=group_size, seed=seed)
    return [summarize(est, estimates_per_pair(mdp, policy, est, groups, exact), exact) for est in estimators]


def summarize(est: Estimator, per_pair: dict, exact: Exact) -> dict:
    """Visit-weighted |bias|, variance and MSE over (h, a) pairs, and the correlation over all visits."""
    n = sum(len(v) for v in per_pair.values())
    bias = var = mse = 0.0
    xs, ys = [], []
    for (h, a), values in per_pair.items():
        target = exact.advantage(h, a)
        v = torch.tensor(values, dtype=torch.float64)
        bias += abs(float(v.mean()) - target) * len(values) / n
        var += float(v.var(unbiased=False)) * len(values) / n
        mse += float(((v - target) ** 2).mean()) * len(values) / n
        xs += values
        ys += [target] * len(values)
    corr = float(torch.corrcoef(torch.tensor([xs, ys], dtype=torch.float64))[0, 1]) if len(xs) > 1 else float("nan")
    return {"estimator": est.label, "key": est.key, "abs_bias": bias, "variance": var, "mse": mse, "corr": corr,
            "visits": n, "note": est.note}


def markdown_table(rows: list[dict]) -> str:
    """The bias/variance rows as a Markdown table (the README's)."""
    lines = ["| estimator | abs bias | variance | MSE | corr with exact A |", "|---|---|---|---|---|"]
    lines += [f"| {r['estimator']} | {r['abs_bias']:.3f} | {r['variance']:.3f} | {r['mse']:.3f} | {r['corr']:.2f} |"
              for r in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    """python -m workbench.advantages.exact [--length 3] [--slack 1] [--eps 0.5] [--groups 2000] [--group-size 8]
    [--seed 0]: the bias/variance table of every estimator on the key-door problem, as Markdown."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workbench.advantages.exact", description=main.__doc__)
    for name, default in (("length", 3), ("slack", 1), ("groups", 2000), ("group-size", 8), ("seed", 0)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--eps", type=float, default=0.5)
    args = parser.parse_args(argv)
    if args.length < 1 or args.slack < 0 or args.groups < 1 or args.group_size < 2 or not 0 <= args.eps <= 1:
        parser.error("need length >= 1, slack >= 0, groups >= 1, group-size >= 2 and 0 <= eps <= 1")
    mdp = keydoor_mdp(args.length, args.slack)
    policy = noisy_optimal_policy(mdp, eps=args.eps, seed=args.seed)
    print(f"{mdp.name}, policy eps={args.eps} seed={args.seed}: V(start) = {exact_values(mdp, policy).V[()]:.3f}; "
          f"{args.groups} groups of {args.group_size}")
    print(markdown_table(bias_variance(mdp, policy, n_groups=args.groups, group_size=args.group_size,
                                       seed=args.seed)))


if __name__ == "__main__":
    main()
