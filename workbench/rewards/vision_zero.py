"""Vision-Zero's "who is the spy" rewards, as pure functions of the votes and of who the spy is.

Players are numbered 1..N as the game shows them; s is the spy, C the N - 1 civilians. A vote is a player number
(an int, possibly out of range), ABSTAIN ("N/A") or None (no parsable vote). v_i = the votes for player i (ints in
1..N only: abstentions, invalid and out-of-range votes count for nobody).

The shipped run (`TRAINING_PHASE=interactive`) uses `_calculate_enhanced_two_phase_rewards_with_god_decision`: N
players give clues, then an outside "God" judge who sees the civilians' scene reads all clues and votes, sampled K
times (K = num_generations = 8). Clue reward of each player, from the K judges' votes (`strategic_clue_rewards`):

    vbar_C = mean_{j in C} v_j,    Psi = v_s - vbar_C
    r_s = -beta Psi,    r_j = beta Psi / (N - 1) - lambda (v_j - vbar_C)   (j in C)        beta = lambda = 0.1
    sum_i r_i = 0                                                      (zero-sum by construction)

then shifted by per-role baselines kept across games (`role_baselines`):

    b_s <- d b_s + (1 - d) r_s,   b_C <- d b_C + (1 - d) mean_{j in C} r_j,   r_i <- r_i - b_role(i)      d = 0.9

which keeps the zero sum: with every game zero-sum and N fixed, mean_C r = -r_s / (N - 1) in every game, so
b_C = -b_s / (N - 1) at all times and sum_i b_role(i) = b_s + (N - 1) b_C = 0.

Decision reward of each judge, the RLVR part (`decision_reward`: against the ground-truth spy, with potential-based
shaping Phi_acc = [correct], Phi_prev = 0):

    acc = +1 (vote = s),  -1/2 (abstain),  -1 (any other vote, or none)
    r = lambda_fmt (2 [format ok] - 1) + beta_acc acc + gamma [acc > 0]        lambda_fmt 0.3, beta_acc 1.2, gamma 0.99

then z-scored over the K judges of one clue transcript (`judge_normalized`: population std, eps 1e-8; only centred
when the K rewards are all equal). The trainer uses these rewards directly as advantages (clue rewards are not
normalized). Here the reward shaping `vision-zero` gives the judges' z-scored rewards as `rewards` and the players'
role baselines as `baseline_rewards`, so that the advantage `remax` (A = R - b) is exactly that.

`calculate_game_rewards` (`game_rewards`) is the other reward of the authors' code, for games where the players
vote themselves (its group path, not the interactive mode); each reward clipped to [-1, 1]:

    civilian j:  [vote_j = s] - [vote_j != s] - alpha v_j / (N - 1)        (-1 without a vote)           alpha 0.6
    spy:         1 - v_s / (N - 1) + beta' m / (N - 1) - [vote_s = s]      beta' 0.5
                 m = sum over the votes that are not None and != s of (1/2 for an abstention, else 1)

It is not zero-sum: 3 civilians voting the spy, who votes a civilian, get 1, 1, 1 - 0.2 and the spy 0 + 1/6.

Card vs code. The card reads "zero-sum across roles (civilians +1 if the spy is voted out, spy +1 otherwise)". In the
authors' code the interactive mode's clue rewards are zero-sum across the players, before and after the role
baselines (not +-1: they scale with the judges' vote counts); the judges' decision rewards are no player's and sum to
nothing in particular; the players' `calculate_game_rewards` (the note in REFERENCES-AGENTS.md section 4) is not
zero-sum at all. We follow the code; the tests check each property as the code has it (`strategic_clue_rewards` sums
to 0, and still does after the baselines; `game_rewards` does not, and stays in [-1, 1]). Our illegal-clue penalty
(`workbench.envs.spy`) is outside the game reward and breaks the zero sum of the rows' returns when it applies.

Reference: wangqinsi1/Vision-Zero @ fa3c01c162c9d8110c78856684e86270ce6876de,
`src/open-r1-multimodal/src/open_r1/clevr_spotdiff_generator.py`: `calculate_game_rewards` (L477-536),
`_calculate_detective_reward`, `_calculate_spy_reward` (L538-606), `apply_unified_role_advantage_adjustment` and
`update_unified_role_baselines` (L686-779, EMA alpha 0.9), `CLEVRPotentialBasedRewardShaping` (L815-892),
`_calculate_strategic_clue_rewards` (L1516-1761), `_calculate_enhanced_two_phase_rewards_with_god_decision`
(L2168-2440, beta = lambda = 0.1, lambda_fmt 0.3, beta_acc 1.2, gamma 0.99); `trainer/grpo_trainer.py`:
`_calculate_two_phase_rewards` (L1892-2068), `_apply_group_normalization` (L2070-2114), raw rewards as advantages
in `_format_two_phase_results_with_precomputed_logps` (L2427-2428).

Decisions. A vote's format is ok when it parses (the authors also ask for more than 10 characters of reasoning before
the boxed answer; our votes are a few characters, "V2"). Under data parallelism the role baselines are updated once
per step from the means over every rank's games (the authors: one game per GPU per step, `accelerator.reduce(mean)`).
The authors' baseline sees the strategic reward only; ours sees the row's reward as the environment gave it, the
illegal-clue penalties of `workbench.envs.spy` included. The authors give each of a player's clue samples (one per
round) the player's reward; our row holds all of a player's clues and its return is that reward once, so an outcome
advantage broadcast over the row gives every clue turn the same value, as theirs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch

VISION_ZERO_TITLE = "Vision-Zero: Scalable VLM Self-Improvement via Strategic Gamified Self-Play"
ABSTAIN = "N/A"  # the authors' "uncertain" answer
ROLES = ("civilian", "spy", "judge")  # what a row's agent is in its game (`info["roles"][agent]`)


# ----------------------------------------------------------------------------- votes

def counted(vote, n_players: int) -> bool:
    """A vote that counts for a player: an int in 1..N (not a bool, not an abstention)."""
    return isinstance(vote, int) and not isinstance(vote, bool) and 1 <= vote <= n_players


def vote_counts(votes, n_players: int) -> list[int]:
    """[N] v_i, the votes for player i = 1..N (index i - 1)."""
    counts = [0] * n_players
    for vote in votes:
        if counted(vote, n_players):
            counts[vote - 1] += 1
    return counts


def check_spy(spy, n_players) -> None:
    if not (isinstance(n_players, int) and n_players >= 2):
        raise ValueError(f"the game needs n_players >= 2 (one spy and at least one civilian), got {n_players!r}")
    if not counted(spy, n_players):
        raise ValueError(f"spy must be a player number 1..{n_players}, got {spy!r}")


# ----------------------------------------------------------------------------- the interactive mode's rewards

def strategic_clue_rewards(votes, spy: int, n_players: int, *, beta: float = 0.1, lam: float = 0.1) -> list[float]:
    """[N] each player's clue reward from the judges' `votes`: r_s = -beta Psi, r_j = beta Psi/(N-1) - lam (v_j -
    vbar_C); they sum to 0."""
    check_spy(spy, n_players)
    v = vote_counts(votes, n_players)
    civilians = [j for j in range(1, n_players + 1) if j != spy]
    v_bar = sum(v[j - 1] for j in civilians) / len(civilians)
    psi = v[spy - 1] - v_bar  # suspicion potential; the previous round's is 0, so delta Psi = Psi
    return [-beta * psi if i == spy else beta * psi / (n_players - 1) - lam * (v[i - 1] - v_bar)
            for i in range(1, n_players + 1)]


def decision_reward(vote, spy: int, n_players: int, *, lambda_fmt: float = 0.3, beta_acc: float = 1.2,
                    gamma: float = 0.99) -> float:
    """A judge's reward for `vote` against the true spy: format + accuracy + gamma Phi_acc (module docstring)."""
    check_spy(spy, n_players)
    fmt_ok = vote is not None
    acc = 1.0 if vote == spy and counted(vote, n_players) else -0.5 if vote == ABSTAIN else -1.0
    return lambda_fmt * (2 * int(fmt_ok) - 1) + beta_acc * acc + gamma * float(acc > 0)


def judge_normalized(rewards, eps: float = 1e-8) -> list[float]:
    """The judges' rewards of one clue transcript z-scored (population std); only centred when they are all equal
    (std or range <= eps). One reward stays as it is."""
    r = [float(x) for x in rewards]
    if len(r) <= 1:
        return r
    mean = sum(r) / len(r)
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / len(r))
    if std > eps and max(r) - min(r) > eps:
        return [(x - mean) / (std + eps) for x in r]
    return [x - mean for x in r]


def role_baselines(b_spy: float, b_civ: float, spy_reward: float, civilian_mean: float, *, decay: float = 0.9):
    """(b_spy, b_civ) after one EMA update with a game's (or a step's mean) spy reward and civilians' mean reward."""
    return decay * b_spy + (1 - decay) * spy_reward, decay * b_civ + (1 - decay) * civilian_mean


# ----------------------------------------------------------------------------- the players' own votes

def game_rewards(votes, spy: int, *, alpha: float = 0.6, beta: float = 0.5) -> list[float]:
    """[N] `calculate_game_rewards`: votes[i - 1] is player i's vote; each reward clipped to [-1, 1]."""
    n = len(votes)
    check_spy(spy, n)
    v = vote_counts(votes, n)
    misled = sum(0.5 if vote == ABSTAIN else 1.0 for vote in votes
                 if vote == ABSTAIN or (counted(vote, n) and vote != spy))  # the authors' valid votes, not the spy
    out = []
    for i, vote in enumerate(votes, 1):
        if i == spy:
            r = 1.0 - v[i - 1] / (n - 1) + beta * misled / (n - 1) - float(vote == spy)
        elif vote is None:
            r = -1.0
        else:
            r = (1.0 if vote == spy else -1.0) - alpha * v[i - 1] / (n - 1)
        out.append(max(-1.0, min(1.0, r)))
    return out


# ----------------------------------------------------------------------------- the trainer's post-processing

@dataclass
class RoleBaselines:
    """b_spy and b_civ, the EMA role baselines kept across steps (the authors' `b_spy`, `b_civ`, starting at 0)."""

    b_spy: float = 0.0
    b_civ: float = 0.0


VISION_ZERO_LOGS = {
    "vision_zero/b_spy": ("Vision-Zero: the spy's EMA role baseline subtracted from the spy rows' rewards.",
                          "Starts at 0 and follows the spy's mean clue reward (-beta Psi): negative while the judges "
                          "find the spy, rising towards 0 or above as the spy learns to blend in."),
    "vision_zero/b_civ": ("Vision-Zero: the civilians' EMA role baseline subtracted from the civilian rows' rewards.",
                          "Stays at -b_spy / (N - 1) (the clue rewards are zero-sum); drifting apart from that: "
                          "illegal-clue penalties are entering the rewards."),
    "vision_zero/judge_accuracy": ("Vision-Zero: share of the judges' votes naming the spy (this step's games).",
                                   "Rises with RLVR on the vote turns; falling while the spy's clues improve is the "
                                   "self-play arms race, not a failure."),
}


def check_post_processing(*, decay=0.9, eps=1e-8, **_) -> None:
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
        raise ValueError(f"decay={decay!r}: the role baselines' EMA factor must be in [0, 1) (the authors' 0.9; "
                         "0 subtracts this step's own mean)")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"eps={eps!r}: the judges' normalization needs eps > 0 (the authors' 1e-8)")


def row_roles(batch: RolloutBatch) -> list[str]:
    """Each row's role in its game (`ROLES`), from the game's info["roles"] and the row's agent id."""
    batch.require("agent", "episode")
    if len(batch.turn_info) != batch.size or not all(batch.turn_info):
        raise ValueError("vision-zero reads each row's turn_info (the spy game's info['roles']); this batch has none: "
                         "train on the spy game (`--task spy`) with the multi-agent rollout `agents`")
    roles = []
    for info, agent in zip(batch.turn_info, batch.agent.tolist()):
        if "roles" not in info[0]:
            raise ValueError("vision-zero: turn_info has no 'roles'; it reads the spy game's info (`--task spy`)")
        roles.append(info[0]["roles"][agent])
    return roles


def judge_accuracy(batch: RolloutBatch, roles: list[str]) -> float | None:
    votes = [(s["vote"], s["spy"]) for info, role in zip(batch.turn_info, roles) if role == "judge"
             for s in info if s.get("phase") == "vote"]
    return sum(vote == spy for vote, spy in votes) / len(votes) if votes else None


@registry.reward_shaping(
    "vision-zero", title=VISION_ZERO_TITLE,
    summary="The interactive mode's game rewards as the trainer uses them: each game's judge rewards z-scored over "
            "its judges, and per-role EMA baselines (decay 0.9) for the players as baseline_rewards, so remax's "
            "A = R - b is the authors' advantage.",
    equation=r"b_{\mathrm{role}} \leftarrow d\,b_{\mathrm{role}} + (1-d)\,\bar r_{\mathrm{role}},\ "
             r"A_i = r_i - b_{\mathrm{role}(i)};\quad "
             r"r_k \leftarrow \frac{r_k - \mathrm{mean}_{J} r}{\mathrm{std}_{J} r + \epsilon}\ (k \in J)",
    reads=("rewards", "agent", "episode", "turn_info"), provides=("rewards", "baseline_rewards"), state=RoleBaselines,
    needs=("agents", "phases"), logs=VISION_ZERO_LOGS, check=check_post_processing)
def vision_zero_rewards(batch: RolloutBatch, ctx, *, decay=0.9, baselines=True, normalize_judges=True, eps=1e-8):
    """rewards [B]: judge rows z-scored within their game (`judge_normalized`), player rows as they are;
    baseline_rewards [B]: a civilian or spy row's role baseline (updated first, once per step, from the means over
    the step's games of the spy's reward and of the civilians' mean reward), 0 for a judge. The advantage `remax`
    then gives A = R - b, the authors' advantages (SPIRAL's role baseline, `group_transform:role-baseline`, takes the
    same route; its roles are agent ids, here they are the game's spy / civilian whatever the seat).
    baselines / normalize_judges switch either part off (baselines=False: b = 0, A = R). Made for the judges' game
    (the interactive run); when the players vote themselves (`--task spy` with judges=0) the authors' group path has
    no role baselines: baselines=False matches it."""
    check_post_processing(decay=decay, eps=eps)
    roles = row_roles(batch)
    rewards = batch.rewards.double().clone()  # [B]
    shift = torch.zeros_like(rewards)         # [B] baseline_rewards
    episodes = batch.episode.tolist()
    if baselines:
        spy_r, civ_r = [], []
        for e in dict.fromkeys(episodes):
            rows = [i for i, ep in enumerate(episodes) if ep == e]
            spy = [float(rewards[i]) for i in rows if roles[i] == "spy"]
            civ = [float(rewards[i]) for i in rows if roles[i] == "civilian"]
            if spy and civ:  # a game whose spy or civilians never acted (cut short) says nothing of either role
                spy_r.append(spy[0])
                civ_r.append(sum(civ) / len(civ))
        spy_all = ctx.gather(torch.tensor(spy_r, dtype=torch.float64))
        civ_all = ctx.gather(torch.tensor(civ_r, dtype=torch.float64))
        state = ctx.state
        if spy_all.numel():
            state.b_spy, state.b_civ = role_baselines(state.b_spy, state.b_civ, float(spy_all.mean()),
                                                      float(civ_all.mean()), decay=decay)
        shift = torch.tensor([state.b_spy if r == "spy" else state.b_civ if r == "civilian" else 0.0 for r in roles],
                             dtype=torch.float64)
        ctx.metrics.update({"vision_zero/b_spy": state.b_spy, "vision_zero/b_civ": state.b_civ})
    if normalize_judges:
        for e in dict.fromkeys(episodes):
            rows = [i for i, ep in enumerate(episodes) if ep == e and roles[i] == "judge"]
            for i, r in zip(rows, judge_normalized([float(rewards[i]) for i in rows], eps=eps)):
                rewards[i] = r
    accuracy = judge_accuracy(batch, roles)
    if accuracy is not None:
        ctx.metrics["vision_zero/judge_accuracy"] = accuracy
    return replace(batch, rewards=rewards.to(batch.rewards.dtype), baseline_rewards=shift.to(batch.rewards.dtype))
