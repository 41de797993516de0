"""MARS: turn-level returns with per-player normalization for self-play games.

With r_{i,s} the reward of row i's turn s (its player k = agent(i)), placed on the turn's last policy token:

    r~_{i,s} = r_{i,s} - mean_{(c,k)} r            per player k within each scope c (the whole batch, or a prompt
                                                   group), over the turns of its rows ("mean"; "mean_std" also
                                                   divides by the Bessel std + 1e-6, 0 where that std <= 1e-6)
    x_t      = r~ on turn-end tokens, 0 on the other policy tokens;  x <- x / sqrt(var_tok x + 1e-8)
                                                   whitened over every policy token of the batch (`whiten_rewards`)
    G_t      = sum_{t' >= t} gamma^{t'-t} x_{t'}   over the row's policy tokens (gamma = 1: the remaining turns' sum)
    A_t      = G_t - mean(U_k),   U_k = the distinct values of G on player k's rows (and 0, see below)
                                                   ("mean"; "mean_std" divides by std(U_k) + 1e-6)
    A        <- masked whitening of A over every policy token of the batch (`whiten_advantages`)

Reference: thu-nics/MARS @ 5979f75c8fa5354356a461805ed0a984cf3b2dfd, `roll/utils/functionals.py`:
`reward_postprocess_agentic` (L879, `use_turn_scores`: the turn scores on each turn's `<|im_end|>`, normalized with
`turn_end_positions` as the mask), `reward_normalize_by_player` (L796) with `score_normalize`, `compute_advantage`
(L993-1045: `whiten_rewards` by `masked_whiten` over `response_mask`, then `compute_reinforce_return` (L376),
`normalize_unique_values_by_player` (L513) with `normalize_unique_values` (L461), then `whiten_advantages`);
`roll/pipeline/agentic/agentic_pipeline.py` (L225-285: rewards normalized per `reward_normalization.grouping`,
advantages over the whole batch);
`examples/multi_games/agentic_val_multi_games_selfplay.yaml` (grouping tags, method mean, separate_norm_for_selfplay,
whiten_rewards, advantage_norm mean, whiten_advantages, adv_estimator reinforce, gamma 1 (`AgenticConfig`)).
The defaults are that configuration's.

Decisions and readings:
  - Players are `batch.agent` (any number of agents). The authors parse them from a `group_ids` suffix `_p0`/`_p1`
    and put rows without one in player 0 (rows of any other player are left unnormalized); a batch without `agent`
    is therefore one player here too (the authors' fallback), which makes the method turn-level REINFORCE with these
    normalizations.
  - Scope of the reward normalization (`scope`): the authors group by the environment tag; a run here trains one task,
    so the tag is the whole batch ("batch", default); "group" normalizes within each prompt group (their
    `traj_group_id` option). The unique-value step is over the whole batch per player, as theirs.
  - Turn rewards are `step_critic.step_rewards`: the environment's per-turn rewards, plus whatever the reward stage
    added to the outcome on the row's last turn, plus each turn's summed token rewards, so they sum to R_i.
    A scope-player with one turn under "mean_std": 0 (the authors' `masked_var` raises there).
  - Whitening the rewards subtracts the token mean mu. After per-player centring ("mean", "mean_std") every
    (scope, player) sums to 0, so mu = 0 exactly; its float residue (ours ~1e-17, the authors' float32 ~1e-8) is not
    subtracted, because it would give every token of a turn its own return and split one value into many for the
    unique-value step. With normalize="none" mu is subtracted (every policy token shifted by -mu/sigma, as theirs).
  - The unique values. The authors run `normalize_unique_values` on the whole (bs, L) tensor of a player's rows before
    masking; besides the returns on policy tokens it holds the returns at the prompt and observation positions (equal
    to the next turn's, already present) and the 0 after each row's last turn end (its padding to sequence_length,
    always present). `count_padding=True` (default) puts that 0 among the values; False takes the policy tokens'
    returns only. What holds exactly: the distinct values of G on player k's policy tokens, with 0 when
    count_padding, have mean 0 after the shift ("mean"); the batch whitening that follows (`whiten_advantages`) then
    moves every player by one common shift and scale, so a player's mean is 0 before it, not after.
  - Distinct means distinct up to 1e-9 x max(1, max |G|). The authors' `torch.unique` is exact equality in float32,
    so equal sums reached by different additions (two turns whose remaining rewards sum alike), or a rounding residue
    in a mean, split one value into several and change the mean over values; ours counts them once (the method's
    reading). Where their arithmetic is exact the two agree (tests/anchors/test_mars.py).
  - gamma < 1 discounts per policy token (observation tokens skipped, `reinforce.discounted_returns`); the authors
    discount every position of the sequence, observations included. gamma = 1 (theirs) is the same.
  - Zero-sum invariance: player k's advantages depend on the other players' rewards only through the two batch
    whitenings (one token std for the rewards, one shift and std for the advantages); with both off, or with
    normalize="mean_std" (scale-free per player), rescaling player 1's rewards leaves player 0's unchanged.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import check_discounts
from workbench.advantages.group import group_stats
from workbench.advantages.reinforce import discounted_returns
from workbench.advantages.step_critic import step_rewards, turn_spans, write_steps
from workbench.batch import RolloutBatch

MARS_TITLE = "MARS: Reinforcing Multi-Agent Reasoning of LLMs through Self-Play in Strategic Games"

NORMALIZE = ("mean", "mean_std", "none")   # the authors' reward_normalization.method (identity = "none")
ADVANTAGE_NORM = ("mean", "mean_std", "none")  # the authors' advantage_norm (None = "none")
SCOPES = ("batch", "group")               # the environment tag (one task: the batch) or the prompt group
STD_EPS = 1e-6    # score_normalize's and normalize_unique_values' (std + 1e-6)
WHITEN_EPS = 1e-8  # masked_whiten's rsqrt(var + 1e-8)


def check_mars(*, gamma=1.0, normalize="mean", scope="batch", advantage_norm="mean", **_) -> None:
    check_discounts(gamma=gamma)
    for name, value, options in (("normalize", normalize, NORMALIZE), ("scope", scope, SCOPES),
                                 ("advantage_norm", advantage_norm, ADVANTAGE_NORM)):
        if value not in options:
            raise ValueError(f"{name} must be one of {options}, got {value!r}")


def players(batch: RolloutBatch) -> torch.Tensor:
    """[B] long player of each row: `agent`, or 0 throughout without it (the authors' fallback)."""
    return torch.zeros(batch.size, dtype=torch.long) if batch.agent is None else batch.agent.long()


def normalize_by_player(r: torch.Tensor, valid: torch.Tensor, key: torch.Tensor, method: str) -> torch.Tensor:
    """[B, S] r centred (and scaled) within each key over the valid turns, 0 elsewhere (`score_normalize` with the
    turn-end mask, per player): key [B] the (scope, player) of each row."""
    if method == "none":
        return r * valid
    rows, steps = torch.nonzero(valid, as_tuple=True)
    x = r[rows, steps]                                                  # [N] one entry per turn
    mean, std, _ = group_stats(x, key[rows], unbiased=True)
    if method == "mean":
        y = x - mean
    else:  # the authors zero a whole set whose std is <= 1e-6
        y = torch.where(std > STD_EPS, (x - mean) / (std + STD_EPS), torch.zeros_like(x))
    out = torch.zeros_like(r)
    out[rows, steps] = y
    return out


def scope_keys(batch: RolloutBatch, scope: str) -> torch.Tensor:
    """[B] dense id of each row's (scope, player)."""
    where = batch.group.long() if scope == "group" else torch.zeros(batch.size, dtype=torch.long)
    return torch.unique(torch.stack([where, players(batch)], 1), dim=0, return_inverse=True)[1]


def whiten_rewards_tokens(x: torch.Tensor, mask: torch.Tensor, centred: bool) -> torch.Tensor:
    """[B, T] (x - mu) / sqrt(var + 1e-8) over the policy tokens (Bessel); mu taken as 0 when the rewards were centred
    per player (module docstring)."""
    mean, var = ops.masked_mean(x, mask), ops.masked_var(x, mask, True)
    shift = 0.0 if centred else mean
    return (x - shift) * torch.rsqrt(var + WHITEN_EPS) * mask


def distinct_values(values: torch.Tensor) -> torch.Tensor:
    """[U] the distinct entries of `values`, equal ones up to 1e-9 x max(1, max |value|) counted once (the smallest of
    each run of sorted values closer than that to its neighbour stands for it): equal sums that float rounding made
    differ by an ulp are one value (module docstring)."""
    v = torch.sort(values).values
    tol = 1e-9 * max(1.0, float(v.abs().max())) if v.numel() else 0.0
    starts = torch.cat([torch.ones(1, dtype=torch.bool), v[1:] - v[:-1] > tol]) if v.numel() else v.bool()
    return v[starts]


def unique_value_norm(G: torch.Tensor, mask: torch.Tensor, player: torch.Tensor, mode: str,
                      count_padding: bool) -> torch.Tensor:
    """[B, T] G shifted per player by the mean of its distinct values U_k (and divided by std(U_k) + 1e-6 for
    "mean_std"); U_k = the values on player k's policy tokens, with 0 when `count_padding`. One distinct value: 0."""
    out = G.clone()
    for k in player.unique().tolist():
        rows = player == k
        values = G[rows][mask[rows] > 0]
        if count_padding:
            values = torch.cat([values, values.new_zeros(1)])
        U = distinct_values(values)
        if U.numel() < 2:
            out[rows] = 0.0
            continue
        centred = G[rows] - U.mean()
        out[rows] = centred / (U.std() + STD_EPS) if mode == "mean_std" else centred
    return out * mask


def mars_returns(batch: RolloutBatch, gamma: float, normalize: str, scope: str, whiten_rewards: bool):
    """G [B, T] over the policy tokens: per-player normalized turn rewards on turn ends, whitened, reward-to-go."""
    _, last, valid = turn_spans(batch)
    mask = batch.mask.double()
    r = normalize_by_player(step_rewards(batch, valid.shape[1]), valid, scope_keys(batch, scope), normalize)
    x = write_steps(r, last, valid, mask.shape[1])                        # [B, T] r~ on each turn's last token
    if whiten_rewards:
        x = whiten_rewards_tokens(x, mask, centred=normalize != "none")
    return discounted_returns(x, mask, gamma)


@registry.advantage(
    "mars", title=MARS_TITLE, family="multiagent",
    summary="Per-turn game rewards on turn ends, centred per player (within the batch or prompt group) and whitened; "
            "token reward-to-go (gamma 1); advantages centred per player over their distinct values, then whitened "
            "over the batch (the self-play configuration of the MARS code).",
    equation=r"\tilde r_{i,s} = r_{i,s} - \mathrm{mean}_{k(i)} r,\ G_t = \sum_{t' \ge t}\gamma^{t'-t} \hat r_{t'},\ "
             r"A_t = G_t - \mathrm{mean}\,\mathrm{unique}_{k}(G)",
    reads=("turn",), choices={"normalize": NORMALIZE, "scope": SCOPES, "advantage_norm": ADVANTAGE_NORM},
    check=check_mars)
def mars(batch: RolloutBatch, *, gamma=1.0, normalize="mean", scope="batch", whiten_rewards=True,
         advantage_norm="mean", count_padding=True, whiten_advantages=True):
    """MARS advantage [B, T]. Reads `turn`, `mask`, `turn_rewards`, `rewards` (+ `token_rewards`), `agent` (the player;
    None: one player), `group` (scope="group").

    normalize: the per-player reward normalization ("mean", "mean_std", "none"). scope: "batch" or "group".
    whiten_rewards / whiten_advantages: the two batch whitenings over policy tokens. advantage_norm: the per-player
    unique-value step ("mean", "mean_std", "none"). count_padding: 0 is among a player's values (module docstring)."""
    check_mars(gamma=gamma, normalize=normalize, scope=scope, advantage_norm=advantage_norm)
    batch.require("turn")
    mask = batch.mask.double()
    G = mars_returns(batch, gamma, normalize, scope, whiten_rewards)
    A = G if advantage_norm == "none" else unique_value_norm(G, mask, players(batch), advantage_norm, count_padding)
    if whiten_advantages:
        A = ops.masked_whiten(A, mask, unbiased=True, eps=WHITEN_EPS)
    return A.to(batch.mask.dtype)
