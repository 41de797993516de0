"""ProAct's Monte Carlo critic: values of a turn's state from uniformly random play in a copy of the environment.

    V_MC(s)    = (1/N) sum_n sum_{k>=0} gamma^k r_k        N rollouts from s, every action uniform over env.actions()
    Q_MC(s, a) = (1/N) sum_n [r_0 + sum_{k>=1} gamma^k r_k] the first action a, then uniform ones
    MC-GRPO    A(s, a_i) = (Q_MC(s, a_i) - mean_G Q_MC) / (std_G Q_MC + eps) over the G responses of state s;
               if all G took the same action: (Q_MC(s, a) - mean_a' Q_MC(s, a')) / (std_a' Q_MC(s, a') + eps) over
               every action a' of env.actions() (the same-action fallback)
    MC-PPO     V_mix(s) = (1 - w) V_phi(s) + w V_MC(s);  delta_s = r_s + gamma V_mix(s_{+1}) - V_mix(s),
               A_s = delta_s + gamma lam A_{s+1} (turn-level GAE), R_s = A_s + V_mix(s) the critic's target
    a turn's advantage is broadcast to its action tokens

Two components. `reward_shaping:proact-mc-critic` rebuilds each row's environment at each turn
(`episodes.replay`: seed = `episode_seed(example, row % group_size)`, actions = `turn_info[row][s]["action"]`),
runs the rollouts on copies of it (`Env.copy()`) and writes `batch.turn_q` [B, S] (Q_MC of the action taken; mode
"grpo", with Q_MC of every action in `turn_info[i][s]["q_moves"]` where the fallback needs them) or
`batch.turn_values` [B, S] (V_MC; mode "ppo"). `advantage:proact-mc-critic` normalizes or runs the GAE.

Readings. A state group is every (row, turn) of one prompt group at the same turn index in the same anchor state
(`turn_info[i][s]["state"]`): ProAct samples G responses for one game state; in an episode batch the G rows share
the first state and part of the later ones. The turn index is part of the key because the turn budget is part of the
environment's state (the grid world's position does not say how many moves are left). Estimates are cached per
(state group, action) within a step, so two responses taking the same action from the same state share one
estimate (ProAct's `action_2_value`); actions are compared by their stripped text. A group of one response is a
group whose responses all took the same action: the fallback. N = 1000 rollouts, max 1000 steps, gamma 0.9,
eps 1e-5 (`group_normalization`: Bessel std + 1e-5), w = 0.9 (`mc_value_weight`), gamma_turn 0.9, lam_turn 0
(`examples/proact/mc_*_2048.yaml`); MC-PPO's turn advantages are z-scored over the batch's turns (the config's
`adv_norm`, batch mean and Bessel std + 1e-5); MC-GRPO's are not. Step rewards are `step_critic.step_rewards`
(the environment's turn rewards, the outcome's remainder on the last turn); an episode's last turn bootstraps
from 0. Q and V both see at most `max_steps` steps. The critic V_phi is the value head at each turn's first action
token (`step_critic`), trained on R_s there. Random actions come from `ctx.rng()`: a rerun draws the same rollouts
(the authors reseed the game from `secrets.randbelow`, which no seed reproduces).

Reference: GreatX3/ProAct @ b0046d0 (transcribed in tests/anchors/formulas_proact.py):
`envs/twentyFortyEightVariantEnv.py::get_return_for_state_action`, `get_value_for_state`;
`areal/workflow/step_grpo_workflow.py::group_normalization`, `StepGRPOWorkflow.arun_one_state_groupsample_2048`
(`use_abs_adv_only_for_group_with_same_reward`); `areal/engine/ppo/actor.py::PPOActor.
compute_turn_level_advantages` (`use_mc_critic`, `mc_value_weight`). `returns="mixed"` is the code's critic target
A + V_mix (= r + gamma V_mix(s') at lam 0); `returns="critic"` trains the critic on its own GAE target A_phi + V_phi.

`reference_bug=True`: Q_MC's rollouts run max_steps + 1 steps (the first action, then up to max_steps random ones),
and the fallback divides by the moves' std without eps (NaN / inf when every move ties).
"""
from __future__ import annotations

import random
from collections import defaultdict

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.group import keyed_normalize
from workbench.advantages.step_critic import (
    broadcast_steps,
    step_gae,
    step_rewards,
    step_targets,
    step_values,
    zscore,
)
from workbench.batch import RolloutBatch
from workbench.episodes import episode_seed, replay

TITLE = "ProAct: Agentic Lookahead in Interactive Environments"
MODES = ("grpo", "ppo")
MOVES = ("fallback", "all")
RETURNS = ("mixed", "critic")
NEEDS = ("multi_turn", "env_copy", "env_actions")


def check_mode(mode) -> None:
    if mode not in MODES:
        raise ValueError(f"proact-mc-critic: mode must be one of {MODES} (MC-GRPO, MC-PPO), got {mode!r}")


def check_rollouts(*, num_rollouts=1000, max_steps=1000, **settings) -> None:
    if num_rollouts < 1 or max_steps < 1:
        raise ValueError(f"proact-mc-critic: num_rollouts and max_steps must be >= 1, got {num_rollouts}, {max_steps}")
    check_discounts(**settings)


def check_mix(*, mc_value_weight=0.9, **settings) -> None:
    if not 0 <= mc_value_weight <= 1:
        raise ValueError(f"proact-mc-critic: mc_value_weight must be in [0, 1], got {mc_value_weight}")
    check_discounts(**settings)


# ---------------------------------------------------------------------------------------------------- estimators

def random_return(env, rng: random.Random, *, gamma: float, max_steps: int, first: str | None = None,
                  reference_bug: bool = False) -> float:
    """One return sum_k gamma^k r_k from a copy of `env`, actions uniform over `actions()` (after `first`, when
    given). At most `max_steps` steps (`reference_bug` with `first`: max_steps + 1, the code's Q loop)."""
    twin = env.copy()
    value, k, done, limit = 0.0, 0, False, max_steps
    if first is not None:
        _, reward, done, _ = twin.step(first)
        value, k, limit = float(reward), 1, max_steps + 1 if reference_bug else max_steps
    while not done and k < limit:
        _, reward, done, _ = twin.step(rng.choice(twin.actions()))
        value += gamma ** k * float(reward)
        k += 1
    return value


def mc_estimate(env, rng: random.Random, *, n: int, gamma: float, max_steps: int, first: str | None = None,
                reference_bug: bool = False) -> float:
    """V_MC(s) (first=None) or Q_MC(s, first): the mean of `n` random returns from `env`'s state."""
    check_rollouts(num_rollouts=n, max_steps=max_steps)
    return sum(random_return(env, rng, gamma=gamma, max_steps=max_steps, first=first, reference_bug=reference_bug)
               for _ in range(n)) / n


# ---------------------------------------------------------------------------------------------------- state groups

def action_key(text: str) -> str:
    return text.strip()


def state_keys(batch: RolloutBatch) -> list[list[tuple]]:
    """Per row, per turn: (prompt group, turn index, anchor state) -- the state group key."""
    if not batch.turn_info:
        raise ValueError("proact-mc-critic needs each turn's state and action (turn_info); sample with the "
                         "multi-turn rollout `turns` on a task with copyable environments (gridworld, keydoor, screen)")
    out = []
    for i, row in enumerate(batch.turn_info):
        keys = []
        for s, info in enumerate(row):
            key = (int(batch.group[i]), s, info.get("state"))
            try:
                hash(key)
            except TypeError:
                raise TypeError(f"proact-mc-critic: the state of row {i} turn {s} is not hashable "
                                f"({type(info.get('state')).__name__}); environments report hashable states") from None
            keys.append(key)
        out.append(keys)
    return out


def state_groups(batch: RolloutBatch) -> dict:
    """{state key: [(row, turn), ...]} over every turn of every row."""
    groups = defaultdict(list)
    for i, keys in enumerate(state_keys(batch)):
        for s, key in enumerate(keys):
            groups[key].append((i, s))
    return dict(groups)


def same_action(batch: RolloutBatch, members: list[tuple[int, int]]) -> bool:
    """Did every response of the state group take the same action (its text, stripped)?"""
    return len({action_key(batch.turn_info[i][s]["action"]) for i, s in members}) == 1


# ---------------------------------------------------------------------------------------------------- the estimates

def turn_envs(ctx, batch: RolloutBatch, row: int) -> list:
    """The row's environment at the start of each of its turns, rebuilt from its seed and its actions."""
    example = ctx.examples[int(batch.group[row])]
    actions = [info["action"] for info in batch.turn_info[row]]
    env = replay(ctx.task, example, episode_seed(example, row % ctx.group_size), [])
    out = []
    for s, action in enumerate(actions):
        out.append(env.copy())
        if s < len(actions) - 1:
            _, _, done, _ = env.step(action)
            if done:
                raise ValueError(f"proact-mc-critic: replaying row {row}, action {s} ({action!r}) ends the episode but "
                                 f"{len(actions) - 1 - s} follow; the environment must replay deterministically")
    return out


class Estimates:
    """Q_MC / V_MC per state group (and action), computed on first request from a member's environment."""

    def __init__(self, ctx, batch, *, n, gamma, max_steps, reference_bug):
        self.ctx, self.batch, self.rng = ctx, batch, ctx.rng()
        self.kw = {"n": n, "gamma": gamma, "max_steps": max_steps}
        self.reference_bug = reference_bug
        self.envs, self.cache, self.rollouts = {}, {}, 0

    def env(self, i: int, s: int):
        if i not in self.envs:
            self.envs[i] = turn_envs(self.ctx, self.batch, i)
        return self.envs[i][s]

    def q(self, key, i: int, s: int, action: str) -> float:
        if (key, action_key(action)) not in self.cache:
            self.cache[key, action_key(action)] = mc_estimate(self.env(i, s), self.rng, first=action,
                                                              reference_bug=self.reference_bug, **self.kw)
            self.rollouts += self.kw["n"]
        return self.cache[key, action_key(action)]

    def v(self, key, i: int, s: int) -> float:
        if (key, None) not in self.cache:
            self.cache[key, None] = mc_estimate(self.env(i, s), self.rng, **self.kw)
            self.rollouts += self.kw["n"]
        return self.cache[key, None]


PROACT_LOGS = {
    "proact/rollouts": ("ProAct: random-policy rollouts run this step for the Monte Carlo values (N per state, "
                        "action).",
                        "About distinct (state, action) pairs x N; constant when the episodes are. A jump means the "
                        "policy visits many new states (or says many distinct action texts)."),
    "proact/states": ("ProAct: state groups valued this step (same prompt, turn index and environment state).",
                      "Between the turns per group and all turns; falls as a group's episodes converge on one path."),
    "proact/mc_value": ("ProAct: mean Monte Carlo value over the batch's turns (Q_MC of the action taken, or V_MC).",
                        "Rises as the policy picks better moves (Q_MC of good moves is higher); it does not depend "
                        "on the policy's later moves (random play after the first action)."),
    "proact/fallback_frac": ("ProAct MC-GRPO: share of state groups whose responses all took one action (normalized "
                             "against every move's Q_MC instead of the group's).",
                             "High early in an episode group only if the policy is already deterministic; 1 on turns "
                             "where rows are alone in their state. Near 1 everywhere: group normalization never "
                             "fires."),
}


@registry.reward_shaping(
    "proact-mc-critic", title=TITLE,
    summary="Monte Carlo values of every turn's state from uniformly random play in copies of the environment: "
            "Q_MC(s, a) of the action taken (MC-GRPO) or V_MC(s) (MC-PPO), into turn_q / turn_values.",
    equation=r"Q_{MC}(s,a) = \frac1N\sum_{n=1}^N \Big[r_0 + \sum_{k\ge1}\gamma^k r_k\Big]_{a_0 = a,\ a_k \sim "
             r"\mathcal U(\mathcal A)},\quad V_{MC}(s) = \frac1N\sum_n \sum_{k\ge0}\gamma^k r_k",
    reads=("turn", "turn_info"), provides=("turn_q", "turn_values"), needs=NEEDS, logs=PROACT_LOGS,
    choices={"mode": MODES, "moves": MOVES}, check=check_rollouts)
def proact_mc_values(batch: RolloutBatch, ctx, *, mode="grpo", num_rollouts=1000, max_steps=1000, gamma=0.9,
                     moves="fallback", reference_bug=False):
    """Reads `turn_info` (each turn's state and action), `group`; uses `ctx.task`, `ctx.examples`, `ctx.group_size`
    and `ctx.rng()`. Rewards are unchanged.

    mode "grpo": `turn_q` [B, S] = Q_MC(s, a) of each turn's action, and Q_MC of every action of the state's
    `env.actions()` in `turn_info[i][s]["q_moves"]` ({action: Q}) where the state group took one action only
    (moves="fallback") or everywhere (moves="all", for plots). mode "ppo": `turn_values` [B, S] = V_MC(s).
    num_rollouts N = 1000, max_steps 1000, gamma 0.9: the paper's; toy runs need far fewer.
    Logs `proact/rollouts` (random rollouts run this step), `proact/states` (state groups), `proact/mc_value`
    (mean estimate over the turns) and, mode "grpo", `proact/fallback_frac` (share of state groups that took one
    action).
    """
    check_mode(mode)
    if moves not in MOVES:
        raise ValueError(f"proact-mc-critic: moves must be one of {MOVES}, got {moves!r}")
    if ctx.task is None:
        raise ValueError("proact-mc-critic rebuilds environments: it needs the step context's task and examples")
    groups = state_groups(batch)
    S = max(len(row) for row in batch.turn_info)
    table = torch.zeros(batch.size, S, dtype=torch.float64)
    mc = Estimates(ctx, batch, n=num_rollouts, gamma=gamma, max_steps=max_steps, reference_bug=reference_bug)
    info = [[dict(step) for step in row] for row in batch.turn_info]
    fallbacks = 0
    for key, members in groups.items():
        for i, s in members:
            table[i, s] = (mc.q(key, i, s, batch.turn_info[i][s]["action"]) if mode == "grpo" else mc.v(key, i, s))
        single = same_action(batch, members)
        fallbacks += single
        if mode == "grpo" and (single or moves == "all"):
            i, s = members[0]
            q_moves = {a: mc.q(key, i, s, a) for a in mc.env(i, s).actions()}
            for i, s in members:
                info[i][s]["q_moves"] = q_moves
    table = table.to(batch.mask.device)
    if mode == "grpo":
        batch.turn_q = table
        ctx.metrics["proact/fallback_frac"] = fallbacks / max(len(groups), 1)
    else:
        batch.turn_values = table
    batch.turn_info = info
    n_turns = sum(len(row) for row in batch.turn_info)
    ctx.metrics.update({"proact/rollouts": float(mc.rollouts), "proact/states": float(len(groups)),
                        "proact/mc_value": float(table.sum()) / max(n_turns, 1)})
    return batch


# ---------------------------------------------------------------------------------------------------- advantages

def fallback_advantage(q: float, q_moves: dict, *, eps: float, reference_bug: bool) -> float:
    """(Q(s, a) - mean_a' Q(s, a')) / (std_a' Q(s, a') + eps), Bessel std over the actions (no eps: reference_bug)."""
    values = torch.tensor(list(q_moves.values()), dtype=torch.float64)
    if values.numel() < 2 and not reference_bug:
        return 0.0  # one action: nothing to compare it with
    return float((q - values.mean()) / (values.std() + (0.0 if reference_bug else eps)))


def grpo_turn_advantages(batch: RolloutBatch, *, eps=1e-5, reference_bug=False) -> torch.Tensor:
    """[B, S] MC-GRPO: Q_MC normalized within its state group, the same-action fallback where one action was taken."""
    batch.require("turn_q")
    groups = state_groups(batch)
    cells = [(i, s) for members in groups.values() for i, s in members]
    keys = [key for key, members in groups.items() for _ in members]
    rows, turns = torch.tensor([c[0] for c in cells]), torch.tensor([c[1] for c in cells])
    q = batch.turn_q.double().cpu()
    out = torch.zeros_like(q)
    out[rows, turns] = keyed_normalize(q[rows, turns], keys, scale=True, eps=eps)
    for members in groups.values():
        if same_action(batch, members):
            for i, s in members:
                if "q_moves" not in batch.turn_info[i][s]:
                    raise ValueError(f"proact-mc-critic: row {i} turn {s} took the state's only action and has no "
                                     "Q of the other moves (turn_info 'q_moves'); run reward_shaping proact-mc-critic "
                                     "with mode='grpo' before the advantage")
                out[i, s] = fallback_advantage(float(q[i, s]), batch.turn_info[i][s]["q_moves"], eps=eps,
                                               reference_bug=reference_bug)
    return out


def ppo_turn_advantages(batch: RolloutBatch, *, mc_value_weight=0.9, gamma=0.9, lam=0.0, returns="mixed"):
    """(A [B, S], R [B, S], first, valid): turn GAE on V_mix = (1 - w) V_phi + w V_MC, and the critic's targets."""
    if returns not in RETURNS:
        raise ValueError(f"proact-mc-critic: returns must be one of {RETURNS}, got {returns!r}")
    check_mix(mc_value_weight=mc_value_weight)
    if batch.values is None:
        raise ValueError("proact-mc-critic mode='ppo' mixes the critic's values with the Monte Carlo ones: add a "
                         "critic (value=use('value-loss')) to the recipe, or use mode='grpo'")
    batch.require("turn_values")
    v_phi, first, _, valid = step_values(batch)                                      # [B, S]
    S = valid.shape[1]
    v_mc = torch.zeros_like(v_phi)
    width = min(S, batch.turn_values.shape[1])
    v_mc[:, :width] = batch.turn_values[:, :width].double().to(v_phi.device)
    v_mix = (1 - mc_value_weight) * v_phi + mc_value_weight * v_mc * valid
    r = step_rewards(batch, S)
    A, R = step_gae(r, v_mix, valid, gamma, lam)
    if returns == "critic":
        _, R = step_gae(r, v_phi, valid, gamma, lam)
    return A, R, first, valid


def proact_targets(batch: RolloutBatch, *, mode="grpo", mc_value_weight=0.9, gamma=0.9, lam=0.0, eps=1e-5,
                   whiten=True, returns="mixed", reference_bug=False):
    """The critic's (returns [B, T], value_mask [B, T]): R_s at each turn's first action token (mode 'ppo')."""
    check_mode(mode)
    if mode != "ppo":
        raise ValueError("proact-mc-critic: mode='grpo' trains no critic; drop the recipe's value part or use "
                         "mode='ppo'")
    _, R, first, valid = ppo_turn_advantages(batch, mc_value_weight=mc_value_weight, gamma=gamma, lam=lam,
                                             returns=returns)
    return step_targets(R, first, valid, batch)


@registry.advantage(
    "proact-mc-critic", title=TITLE,
    summary="Turn advantages from a random-policy Monte Carlo critic: MC-GRPO normalizes Q_MC(s, a) over the "
            "responses of one state (fallback: over all moves), MC-PPO runs turn GAE on (1 - w) V_phi + w V_MC.",
    equation=r"\text{GRPO: } A = \frac{Q_{MC}(s,a_i) - \mathrm{mean}_G Q_{MC}}{\mathrm{std}_G Q_{MC} + \epsilon};\ "
             r"\text{PPO: } \delta_s = r_s + \gamma V_{mix}(s_{+1}) - V_{mix}(s),\ V_{mix} = (1-w)V_\phi + w V_{MC}",
    reads=("turn", "turn_info", "turn_q", "turn_values"), targets=proact_targets, needs=("multi_turn",),
    choices={"mode": MODES, "returns": RETURNS}, check=check_mix)
def proact_mc_critic(batch: RolloutBatch, *, mode="grpo", mc_value_weight=0.9, gamma=0.9, lam=0.0, eps=1e-5,
                     whiten=True, returns="mixed", reference_bug=False):
    """ProAct advantage [B, T], each turn's value on its action tokens. Reads `turn`, `turn_info`, `group`, `mask`;
    mode "grpo": `turn_q` (and `turn_info[i][s]["q_moves"]`); mode "ppo": `turn_values`, `values` (the critic),
    `turn_rewards`, `rewards` (+ `token_rewards`). Both are filled by reward_shaping proact-mc-critic.

    mc_value_weight w, gamma, lam, returns: MC-PPO (module docstring); w = 0 is turn-level GAE with the critic.
    eps: the normalizations' (1e-5). whiten: MC-PPO's turn advantages z-scored over the batch's turns (MC-GRPO's are
    group-normalized already and never whitened). reference_bug: the fallback divides without eps.
    """
    check_mode(mode)
    if mode == "grpo":
        per_turn = grpo_turn_advantages(batch, eps=eps, reference_bug=reference_bug).to(batch.mask.device)
    else:
        per_turn, _, _, valid = ppo_turn_advantages(batch, mc_value_weight=mc_value_weight, gamma=gamma, lam=lam,
                                                    returns=returns)
        per_turn = zscore(per_turn, valid, eps) if whiten else per_turn
    batch.require("turn")
    return broadcast_steps(per_turn.to(batch.mask.device), batch).to(batch.mask.dtype)
