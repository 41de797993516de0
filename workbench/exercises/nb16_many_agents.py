"""The exercises of notebook 16_many_agents (multi-agent RL): each answer is checked against the library's own
functions (Kuhn poker's exact best responses and exploitability, Dr. MAS's per-(prompt, agent) z-score, MARS's
centring over distinct values, SSP's proposer rewards)."""
from __future__ import annotations

import torch

from workbench.exercises.answers import all_near, as_numbers, near

# 1. Kuhn poker: player 0 always bets (and calls), player 1 always passes (checks, and folds facing a bet)
KUHN_EXERCISE = {"player0": "b", "player1": "p"}
# 2. Dr. MAS: one prompt, two agents, three rows each (one turn a row)
DR_MAS_EXERCISE = {"solver": (1.0, 0.0, 0.0), "verifier": (0.3, 0.1, 0.2)}
# 3. MARS: one player's returns G on its policy tokens (the padding's 0 counts among the values)
MARS_EXERCISE = {"returns": (1.0, 1.0, 1.0, -1.0, 0.5), "asked": 1.0}
# 4. SSP: the solver's 5 attempts at each of 3 proposed questions (reward > 0: solved)
SSP_EXERCISE = {"attempts": ((1, 1, 1, 1, 1), (1, 0, 0, 1, 0), (0, 0, 0, 0, 0))}


def pure_strategy(player: int, action: str) -> dict:
    """`action` ("b" or "p") with probability 1 at every information set of `player`."""
    from workbench.envs.games import kuhn

    return {name: int(action == "b") for name in kuhn.INFOSETS[player]}


def kuhn_values(**overrides) -> list[float]:
    """[BR_0(sigma_1), BR_1(sigma_0), exploitability] of the exercise's pure strategies (`envs.games.kuhn`)."""
    from workbench.envs.games import kuhn

    e = {**KUHN_EXERCISE, **overrides}
    s0, s1 = pure_strategy(0, e["player0"]), pure_strategy(1, e["player1"])
    return [float(kuhn.best_response_value(s1, 0)), float(kuhn.best_response_value(s0, 1)),
            float(kuhn.exploitability(s0, s1))]


def check_kuhn_exploitability(answer) -> str:
    """Exercise: the two best-response values and the exploitability of (always bet, always pass)."""
    from workbench.envs.games import kuhn

    expected = kuhn_values()
    if all_near(answer, expected):
        return (f"correct: BR_0 = {expected[0]:g} (player 0's best response also bets everything: player 1 folds every "
                f"time), BR_1 = 1/3 (facing a bet, call with K (+2), fold J (-1), either with Q (0)), exploitability "
                f"(1 + 1/3) / 2 = 2/3: far from the equilibrium's 0")
    given = as_numbers(answer)
    u0 = float(kuhn.expected_value(pure_strategy(0, "b"), pure_strategy(1, "p")))  # 1: every hand won by a fold
    if given is None or len(given) != 3:
        hint = "answer three numbers: BR_0(sigma_1), BR_1(sigma_0), then the exploitability"
    elif all_near(given[:2], expected[:2]) and near(given[2], 2 * expected[2]):
        hint = "that is NashConv = BR_0 + BR_1; the exploitability is half of it (the mean over the two seats)"
    elif all_near(given[:2], [expected[0] - u0, expected[1] + u0]):
        hint = ("those are the gains BR_i - u_i (0 and 4/3); the question asks for the best-response values "
                "themselves (their sum is the same, as the game is zero-sum)")
    elif near(given[1], -expected[1]):
        hint = "BR_1 is player 1's own value (chips it wins per hand): with K it calls and wins 2"
    elif near(given[0], 3 * expected[0]) or near(given[1], 3 * expected[1]):
        hint = "each card is dealt with probability 1/3: average the best response's value over the three, not sum it"
    else:
        hint = ("BR_i: the best player i can get against the other's fixed strategy, over the 3 cards it may hold "
                "(1/3 each); exploitability = (BR_0 + BR_1) / 2")
    raise AssertionError(f"not quite ({answer}): {hint}")


def dr_mas_batch(**overrides):
    """The exercise's rows as a batch: the solver's (agent 0) then the verifier's (agent 1), one prompt, one
    token each."""
    from dataclasses import replace

    from workbench.batch import RolloutBatch

    e = {**DR_MAS_EXERCISE, **overrides}
    rewards = list(e["solver"]) + list(e["verifier"])
    agent = torch.tensor([0] * len(e["solver"]) + [1] * len(e["verifier"]))
    return replace(RolloutBatch.from_rewards(rewards), agent=agent)


def dr_mas_verifier(**overrides) -> list[float]:
    """The verifier's Dr. MAS advantages (`advantages.dr_mas`, each row one sample)."""
    from workbench.advantages.dr_mas import dr_mas

    batch = dr_mas_batch(**overrides)
    return dr_mas(batch, pool="rows")[batch.agent == 1, 0].tolist()


def check_dr_mas(answer) -> str:
    """Exercise: the verifier's three advantages under Dr. MAS."""
    from workbench.advantages.group import grpo

    expected, batch = dr_mas_verifier(), dr_mas_batch()
    pooled = grpo(batch)[batch.agent == 1, 0].tolist()
    if all_near(answer, expected):
        return (f"correct: {[round(a, 3) for a in expected]}: the verifier's rewards 0.3, 0.1, 0.2 against their own "
                f"mean 0.2 and std 0.1; GRPO's one mean and std over all six rows gives them "
                f"{[round(a, 2) for a in pooled]}: the solver's rewards set the scale, and the verifier's best row "
                "is barely above 0")
    given = as_numbers(answer)
    verifier = torch.tensor(DR_MAS_EXERCISE["verifier"], dtype=torch.float64)
    if given is None or len(given) != 3:
        hint = "answer three numbers, the verifier's rows in order"
    elif all_near(given, pooled):
        hint = ("that is GRPO's advantage, one mean and std over all six rows; Dr. MAS z-scores each agent against "
                "its own rows")
    elif all_near(given, ((verifier - verifier.mean()) / verifier.std(unbiased=False)).tolist()):
        hint = "Dr. MAS (as GRPO) divides by the Bessel std, sqrt(sum (R - mean)^2 / (n - 1)) = 0.1"
    elif all_near(given, (verifier - verifier.mean()).tolist()):
        hint = "the advantage is also divided by the agent's std (0.1 here)"
    else:
        hint = "A = (R - mean_{q,k} R) / (std_{q,k} R + 1e-6) over the verifier's own three rewards"
    raise AssertionError(f"not quite ({answer}): {hint}")


def mars_shift(**overrides) -> list[float]:
    """[the mean of the distinct values U_k (the 0 of the padding among them), the advantage G - mean(U_k) of a
    token whose return is `asked`] (`advantages.mars.unique_value_norm`)."""
    from workbench.advantages.mars import unique_value_norm

    e = {**MARS_EXERCISE, **overrides}
    G = torch.tensor([e["returns"]], dtype=torch.float64)                     # [1, T]: one row, its policy tokens
    A = unique_value_norm(G, torch.ones_like(G), torch.zeros(1, dtype=torch.long), "mean", count_padding=True)
    shift = float((G - A)[0, 0])
    return [shift, e["asked"] - shift]


def check_mars_shift(answer) -> str:
    """Exercise: MARS's per-player shift over distinct values, and one token's advantage after it."""
    expected, returns = mars_shift(), MARS_EXERCISE["returns"]
    if all_near(answer, expected):
        return (f"correct: the distinct values are -1, 0, 0.5 and 1 (the three 1s count once, the padding adds 0), "
                f"mean {expected[0]:g}; a token of return 1 gets {expected[1]:g}")
    given = as_numbers(answer)
    if given is None or len(given) != 2:
        hint = "answer two numbers: the mean subtracted, then the advantage of a token whose return is 1"
    elif near(given[0], sum(returns) / len(returns)):
        hint = "that is the mean over the tokens; MARS averages the distinct values, each once"
    elif near(given[0], sum(set(returns)) / len(set(returns))):
        hint = "the 0 after the row's last turn (its padding) is among the values too (count_padding)"
    elif near(given[0], sum(returns) / (len(returns) + 1)):
        hint = "with the 0, but still every token: count each distinct value once"
    elif near(given[1], 1 + given[0]):
        hint = "the advantage is G minus the mean, not plus"
    else:
        hint = "U_k = the distinct values of G on the player's tokens, with 0; A = G - mean(U_k)"
    raise AssertionError(f"not quite ({answer}): {hint}")


def ssp_rewards(**overrides) -> list[float]:
    """[1 - p for each question, then 4 p (1 - p) (0 at p = 0 or 1)] (`rewards.ssp.proposer_rewards`)."""
    from workbench.rewards.ssp import proposer_rewards, success_rate

    e = {**SSP_EXERCISE, **overrides}
    p = success_rate(torch.tensor(e["attempts"], dtype=torch.float64))
    valid = torch.ones_like(p, dtype=torch.bool)
    return (proposer_rewards(p, valid).tolist()
            + proposer_rewards(p, valid, reward_type="intermediate_difficulty").tolist())


def check_ssp_rewards(answer) -> str:
    """Exercise: the proposer's rewards for three questions under both of SSP's reward types."""
    expected = ssp_rewards()
    if all_near(answer, expected):
        return (f"correct: p = 1, 0.4, 0; 1 - p = {expected[:3]} pays most for the question nobody solved, the "
                f"intermediate difficulty {[round(x, 3) for x in expected[3:]]} only for the one solved sometimes")
    given = as_numbers(answer)
    p = [sum(a) / len(a) for a in SSP_EXERCISE["attempts"]]
    if given is None or len(given) != 6:
        hint = "answer six numbers: the three 1 - p rewards, then the three intermediate-difficulty ones"
    elif all_near(given[:3], p):
        hint = "the proposer is paid for the solver's failures: 1 - p, not p"
    elif all_near(given[3:], [q * (1 - q) for q in p]):
        hint = "the intermediate-difficulty reward is 4 (l + p)(r - p) with l = 0, r = 1: mind the factor 4"
    elif near(given[5], 1.0) or near(given[3], 1.0):
        hint = "a question solved always (p = 1) or never (p = 0) earns 0 under the intermediate difficulty"
    else:
        hint = "p = the share of the 5 attempts with reward > 0; then 1 - p, and 4 p (1 - p) for 0 < p < 1 (else 0)"
    raise AssertionError(f"not quite ({answer}): {hint}")
