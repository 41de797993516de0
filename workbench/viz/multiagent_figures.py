"""Figures for many agents (notebook 16): one game token by token as each agent saw it, the advantages the
multi-agent estimators give the same rows, a Kuhn poker policy's strategy against the Nash family, what one
information set moved away from equilibrium costs, and the stored F8 comparisons over seeds.

    from workbench.viz import multiagent_figures as mf
    mf.transcript_html(batch, tokenizer, episode=3)              # each agent's row of one game, side by side
    mf.agent_advantages_figure(batch, tokenizer, mf.estimator_advantages(batch), rows)
    mf.strategy_heatmap({"after RL": kuhn_task.strategies(policy)[0]})
    mf.deviation_explorer()                                      # ipywidgets: exploitability off equilibrium
    mf.game_curves(groups, summaries, keys=("eval/exploitability",))

A row of the multi-agent rollout (`workbench.rollout.agents`) is one agent's view of one game: its prompt, then its
actions (mask 1, trained) and what it observed between them (mask 0: the other agents' moves). Rows of one game
share `batch.episode`; `batch.agent` says whose row it is. The functions computing what a figure draws are public
(`transcript`, `turn_advantage_rows`, `strategy_grid`, `deviation_curves`, `with_game_start`), so a test or a
notebook prints the same numbers.

Exploitability is Kuhn poker's exact NashConv / 2 (`workbench.envs.games.kuhn`); the gains drawn beside it are each
player's best-response value minus what it gets: gain_0 = BR_0(sigma_1) - u_0(sigma), gain_1 = BR_1(sigma_0) +
u_0(sigma) (zero-sum), and exploitability = (gain_0 + gain_1) / 2.

Decisions:
  - An action's advantage is the mean over its trained tokens (`agent_episodes.turn_mean_advantages`): GRPO, Dr. MAS
    and SPIRAL give one number per row, MARS one per turn, so a Kuhn action (one token) shows each exactly.
  - SPIRAL's baseline is state kept across steps; on one batch it is computed from given role averages (default {}:
    a run's first step, every baseline starting at 0), so a notebook says which state it shows.
  - The order of play is (turn, agent): the games here let agent 0 move first in every round (MARFT's rule).
  - Seed bands are min–max over seeds, as every stored-run figure of the book (`run_curves.seed_band`).
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.envs.games import kuhn
from workbench.transforms.role_baseline import baselines
from workbench.viz.agent_episodes import (ROLE_COLORS, ROLE_LABELS, TEXT_COLORS, cell_label, episode_cells,
                                          turn_mean_advantages)
from workbench.viz.run_curves import band_note, band_traces, seed_band
from workbench.viz.style import RUN_COLORS, is_number

# ----------------------------------------------------------------------------------------------------
# One game, token by token, as each agent saw it


def episode_rows(batch: RolloutBatch, episode: int) -> list[int]:
    """The rows of one game (`batch.episode == episode`), in agent order."""
    batch.require("episode", "agent")
    rows = torch.nonzero(batch.episode == int(episode)).flatten().tolist()
    if not rows:
        raise ValueError(f"episode {episode} has no rows in this batch (its episodes: "
                         f"{sorted(set(batch.episode.tolist()))})")
    return sorted(rows, key=lambda r: int(batch.agent[r]))


def action_texts(batch: RolloutBatch, tokenizer, row: int) -> dict[int, str]:
    """{turn: the row's action on that turn}: its trained tokens (mask 1) of the turn, decoded."""
    batch.require("turn")
    ids, mask, turn = batch.response_ids[row].tolist(), batch.mask[row].tolist(), batch.turn[row].tolist()
    out: dict[int, list[int]] = {}
    for i, m, s in zip(ids, mask, turn):
        if m > 0 and s >= 0:
            out.setdefault(int(s), []).append(int(i))
    return {s: tokenizer.decode(t, skip_special_tokens=True) for s, t in out.items()}


def play_order(batch: RolloutBatch, tokenizer, episode: int) -> list[tuple[int, int, str]]:
    """(agent, turn, action) of one game's actions in the order of play: by (turn, agent), agents acting in id order
    within a round (the games here: agent 0 moves first; MARFT's ordering rule). Only the agents with a row: a Python
    opponent's moves appear as the observations of the others."""
    moves = [(int(batch.agent[r]), s, a) for r in episode_rows(batch, episode)
             for s, a in action_texts(batch, tokenizer, r).items()]
    return sorted(moves, key=lambda m: (m[1], m[0]))


def transcript(batch: RolloutBatch, tokenizer, episode: int, advantages=None) -> list[dict]:
    """Per row of the game (agent order): {"row", "agent", "return", "cells"}; cells as `episode_cells` (prompt,
    action, observation; padding left out), each with the turn's reward and its token's advantage."""
    out = []
    for row in episode_rows(batch, episode):
        cells = [c for c in episode_cells(batch, tokenizer, row, advantages=advantages, max_padding=0)
                 if c["role"] != "padding"]
        out.append({"row": row, "agent": int(batch.agent[row]),
                    "return": float(batch.rewards[row]) if batch.rewards is not None else math.nan, "cells": cells})
    return out


def _span(cell: dict, special: set) -> str:
    text, _ = cell_label(cell["token"], special)  # escaped, newlines and tabs made visible
    text = text.replace(" ", "␣")  # a space token is a token too
    role = cell["role"]
    frame = "2px solid #000" if cell["trained"] else "1px solid #bbb"
    tip = (f"{role}, mask {1 if cell['trained'] else 0}" + ("" if cell["turn"] is None else f", turn {cell['turn']}")
           + f", token {cell['token']!r}")
    return (f'<span title="{html.escape(tip)}" style="display:inline-block;min-width:1.1em;padding:1px 4px;'
            f'margin:1px;text-align:center;font-family:monospace;background:{ROLE_COLORS[role]};'
            f'color:{TEXT_COLORS[role]};border:{frame};border-radius:2px">{text or "&nbsp;"}</span>')


def _number(x, spec: str = "+.2f") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def transcript_html(batch: RolloutBatch, tokenizer, episode: int, agent_names: Sequence[str] | None = None,
                    advantages=None) -> str:
    """One game as plain HTML (it renders the same in JupyterLab and the book): the order of play, then one panel
    per agent side by side: its prompt, then one line per turn, its action (blue, framed: mask 1, trained) and what it
    observed until its next turn (orange: mask 0), ending with the turn's reward r and the action's mean advantage A
    (`advantages` [B, T], default batch.advantages; none drawn without). Hover a token for its role, mask and turn."""
    names = list(agent_names) if agent_names is not None else None
    name = (lambda k: names[k] if names and k < len(names) else f"agent {k}")
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    advantages = batch.advantages if advantages is None else advantages
    order = " → ".join(f"{html.escape(name(k))} <code>{html.escape(a)}</code>"
                       for k, _, a in play_order(batch, tokenizer, episode))
    legend = " ".join(_span({"token": label.split(":")[0], "role": role, "trained": role == "action", "turn": None},
                            set()) + f" {html.escape(ROLE_LABELS[role])}&nbsp;&nbsp;"
                      for role, label in (("prompt", "prompt"), ("action", "action"), ("observation", "observation")))
    panels = []
    for part in transcript(batch, tokenizer, episode, advantages):
        per_turn = (turn_mean_advantages(advantages, batch.mask, batch.turn, part["row"])
                    if advantages is not None else {})
        lines = [("prompt", [c for c in part["cells"] if c["role"] == "prompt"], "")]
        for s in sorted({c["turn"] for c in part["cells"] if c["role"] != "prompt"}):
            cells = [c for c in part["cells"] if c["role"] != "prompt" and c["turn"] == s]
            a = per_turn.get(s)
            note = f"r = {_number(cells[0]['reward'], 'g')}" + (f", A = {a[0]:+.2f}" if a else "")
            lines.append((f"turn {s}", cells, note))
        body = "".join(
            f'<div style="margin:2px 0;white-space:nowrap"><span style="display:inline-block;width:4.2em;color:#555">'
            f'{label}</span>{"".join(_span(c, special) for c in cells)}'
            f'<span style="margin-left:6px;color:#333;font-family:monospace;font-size:90%">{note}</span></div>'
            for label, cells, note in lines)
        panels.append(
            f'<div style="flex:1 1 300px;border:1px solid #ccc;border-radius:4px;padding:6px 8px;overflow-x:auto">'
            f'<div style="margin-bottom:4px"><b>{html.escape(name(part["agent"]))}</b> (agent {part["agent"]}, row '
            f'{part["row"]}) · return {_number(part["return"], "+g")}</div>{body}</div>')
    return (f'<div class="workbench-transcript" style="font-size:13px;line-height:1.5">'
            f'<div style="margin-bottom:4px">{legend}</div>'
            f'<div style="margin-bottom:6px">game {int(episode)}, in the order of play: {order}</div>'
            f'<div style="display:flex;flex-wrap:wrap;gap:10px">{"".join(panels)}</div></div>')


# ----------------------------------------------------------------------------------------------------
# Per-agent advantages: one batch, four estimators

ESTIMATORS = ("grpo", "dr-mas", "mars", "spiral")
ESTIMATOR_LABELS = {"grpo": "GRPO: one baseline per prompt, all agents pooled",
                    "dr-mas": "Dr. MAS: per (prompt, agent)",
                    "mars": "MARS: per player, turn-level",
                    "spiral": "SPIRAL: role baseline, R − b_role"}


def role_baseline_advantages(batch: RolloutBatch, averages: Mapping | None = None, decay: float = 0.95) \
        -> torch.Tensor:
    """SPIRAL's advantage [B, T]: each row's role baseline b_i (the role's moving average before the row, starting
    from `averages` {role: m}; default {}: a run's first step) through `remax`, A = R - b on the trained tokens."""
    batch.require("agent", "rewards")
    b = baselines(dict(averages or {}), batch.agent.tolist(), batch.rewards.double().tolist(), decay, False)
    with_b = replace(batch, baseline_rewards=torch.tensor(b, dtype=batch.rewards.dtype))
    return registry.get("advantage", "remax").fn(with_b)


def estimator_advantages(batch: RolloutBatch, estimators: Sequence[str] = ESTIMATORS,
                         role_averages: Mapping | None = None) -> dict[str, torch.Tensor]:
    """{estimator: advantages [B, T]} of one batch, each registered estimator at its defaults (what its recipe
    uses); "spiral" is `role_baseline_advantages` from `role_averages`."""
    return {name: (role_baseline_advantages(batch, role_averages) if name == "spiral"
                   else registry.get("advantage", name).fn(batch)) for name in estimators}


def turn_advantage_rows(batch: RolloutBatch, tokenizer, advantages: Mapping[str, torch.Tensor],
                        rows: Sequence[int]) -> list[dict]:
    """One dict per action (row, turn) of `rows`: row, episode, agent, turn, action, reward (the turn's), return (the
    row's), and per estimator the action's advantage (the mean over its trained tokens)."""
    batch.require("turn", "agent", "episode")
    out = []
    for r in rows:
        actions = action_texts(batch, tokenizer, r)
        per_turn = {name: turn_mean_advantages(a, batch.mask, batch.turn, r) for name, a in advantages.items()}
        for s in sorted(actions):
            reward = float(batch.turn_rewards[r, s]) if batch.turn_rewards is not None else math.nan
            out.append({"row": r, "episode": int(batch.episode[r]), "agent": int(batch.agent[r]), "turn": s,
                        "action": actions[s], "reward": reward, "return": float(batch.rewards[r]),
                        **{name: per_turn[name].get(s, (math.nan,))[0] for name in advantages}})
    return out


def agent_advantage_stats(batch: RolloutBatch, advantages: Mapping[str, torch.Tensor]) -> list[dict]:
    """Per estimator and agent, over the whole batch's actions (each action's mean advantage over its tokens): the
    mean and the standard deviation (population), and the number of actions."""
    out = []
    for name, a in advantages.items():
        for k in sorted(set(batch.agent.tolist())):
            values = [v[0] for r in torch.nonzero(batch.agent == k).flatten().tolist()
                      for v in turn_mean_advantages(a, batch.mask, batch.turn, r).values()]
            mean = sum(values) / len(values)
            out.append({"estimator": name, "agent": k, "actions": len(values), "mean": mean,
                        "std": (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5})
    return out


def agent_advantages_figure(batch: RolloutBatch, tokenizer, advantages: Mapping[str, torch.Tensor],
                            rows: Sequence[int], agent_names: Sequence[str] | None = None,
                            title: str | None = None) -> go.Figure:
    """One panel per agent: each action of `rows` (its game, turn and text on the x axis) with one bar per estimator,
    the action's advantage (mean over its trained tokens). Hover: the turn's reward and the row's return."""
    table = turn_advantage_rows(batch, tokenizer, advantages, rows)
    agents = sorted({t["agent"] for t in table})
    names = list(agent_names) if agent_names is not None else [f"agent {k}" for k in agents]
    label = (lambda k: names[k] if k < len(names) else f"agent {k}")
    fig = make_subplots(rows=len(agents), cols=1, vertical_spacing=0.5 / max(2, len(agents)) + 0.05,
                        subplot_titles=[f"{label(k)}'s actions" for k in agents])
    for j, name in enumerate(advantages):
        for i, k in enumerate(agents):
            mine = [t for t in table if t["agent"] == k]
            x = [f"g{t['episode']} t{t['turn']}<br>{html.escape(t['action'])}" for t in mine]
            fig.add_trace(go.Bar(
                x=x, y=[t[name] for t in mine], name=ESTIMATOR_LABELS.get(name, name), legendgroup=name,
                showlegend=i == 0, marker_color=RUN_COLORS[j % len(RUN_COLORS)],
                customdata=[[t["reward"], t["return"], t["row"]] for t in mine],
                hovertemplate=f"{html.escape(name)}: A = %{{y:+.3f}}<br>row %{{customdata[2]}}, turn reward "
                              "%{customdata[0]:g}, return %{customdata[1]:g}<extra></extra>"),
                row=i + 1, col=1)
        for i in range(len(agents)):
            fig.update_yaxes(title_text="advantage", zeroline=True, zerolinecolor="#888", row=i + 1, col=1)
    fig.update_xaxes(tickfont=dict(size=10))
    fig.update_xaxes(title_text="game (episode) and turn, then the action", row=len(agents), col=1)
    fig.update_layout(barmode="group", template="plotly_white", height=200 + 250 * len(agents), title=title,
                      legend=dict(orientation="h", yanchor="top", y=-0.1 - 0.1 / len(agents), x=0),
                      margin=dict(l=10, r=10, t=90 if title else 50, b=130))
    return fig


# ----------------------------------------------------------------------------------------------------
# Kuhn poker: a policy's strategy against the Nash family, and what a deviation costs

NASH_ALPHAS = (Fraction(0), Fraction(1, 6), Fraction(1, 3))  # player 0's equilibria: the ends and the middle
INFOSET_ORDER = kuhn.INFOSETS[0] + kuhn.INFOSETS[1]          # J Q K Jpb Qpb Kpb, then Jp Qp Kp Jb Qb Kb
SITUATIONS = {"": "opens", "pb": "checked, faces a bet", "p": "after a check", "b": "faces a bet"}


def infoset_label(name: str) -> str:
    """"Qpb" -> "P0 Q, checked, faces a bet": the player, its card and where it acts."""
    history = name[1:]
    return f"P{kuhn.to_act(history)} {name[0]}, {SITUATIONS[history]}"


def alpha_text(alpha) -> str:
    """alpha as a short fraction when it is one (1/6, also from a float slider), else 3 decimals."""
    simple = Fraction(alpha).limit_denominator(60)
    return str(simple) if abs(float(simple) - float(alpha)) < 1e-9 else f"{float(alpha):.3f}"


def strategy_grid(strategies: Mapping[str, Sequence[Mapping]], alphas: Sequence = NASH_ALPHAS) \
        -> tuple[list[str], list[str], list[list[float]], list[float]]:
    """(information sets, column names, z [12][C] = P(bet or call) there, exploitability of each column): the named
    strategy pairs (name -> (player 0's, player 1's)), then Kuhn's equilibria at player 0's `alphas`."""
    columns = dict(strategies)
    for alpha in alphas:
        columns[f"Nash α={alpha_text(alpha)}"] = kuhn.nash_strategy(alpha)
    z = [[float(kuhn.bet_probability(pair[0 if name in kuhn.INFOSETS[0] else 1], name)) for pair in columns.values()]
         for name in INFOSET_ORDER]
    exploit = [float(kuhn.exploitability(*pair)) for pair in columns.values()]
    return list(INFOSET_ORDER), list(columns), z, exploit


def strategy_heatmap(strategies: Mapping[str, Sequence[Mapping]], alphas: Sequence = NASH_ALPHAS,
                     title: str | None = None) -> go.Figure:
    """Rows: Kuhn poker's 12 information sets; columns: the named strategy pairs, then the Nash family at `alphas`;
    a cell: the probability of "b" (bet, or call facing a bet) there. Each column is labelled with its exploitability.
    Player 1's equilibrium is unique, player 0's moves with alpha only at J, K (open) and Q (facing a bet)."""
    sets, columns, z, exploit = strategy_grid(strategies, alphas)
    x = [f"{html.escape(c)}<br>expl. {e:.3f}" for c, e in zip(columns, exploit)]
    y = [f"{infoset_label(s)} ({s})" for s in sets]
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, zmin=0, zmax=1, colorscale="Blues", text=[[f"{v:.2f}" for v in row]
                                                                                          for row in z],
                               texttemplate="%{text}", textfont=dict(size=11), xgap=2, ygap=2,
                               colorbar=dict(title="P(b)", len=0.8),
                               hovertemplate="%{y}<br>%{x}<br>P(bet or call) %{z:.3f}<extra></extra>"))
    if strategies:  # the policies' columns apart from the equilibria's
        fig.add_shape(type="line", x0=len(strategies) - 0.5, x1=len(strategies) - 0.5, y0=-0.5, y1=len(sets) - 0.5,
                      line=dict(color="#333", width=2))
    fig.add_shape(type="line", x0=-0.5, x1=len(columns) - 0.5, y0=5.5, y1=5.5, line=dict(color="#333", width=2))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=11))
    fig.update_xaxes(side="top", tickfont=dict(size=11))
    fig.update_layout(template="plotly_white", height=560, title=title, margin=dict(l=10, r=10, t=150, b=20))
    return fig


def deviation(alpha, infoset: str, q) -> tuple[dict, dict]:
    """Kuhn's equilibrium at player 0's `alpha`, with the probability of "b" at `infoset` set to `q`."""
    pair = [dict(s) for s in kuhn.nash_strategy(alpha)]
    player = 0 if infoset in kuhn.INFOSETS[0] else 1
    kuhn.bet_probability(pair[player], infoset)  # an unknown set: the error names the player's sets
    pair[player][infoset] = q
    return pair[0], pair[1]


def gains(s0: Mapping, s1: Mapping) -> tuple[float, float, float]:
    """(gain_0, gain_1, exploitability): each player's best-response value minus what it gets, and their mean."""
    u0 = kuhn.expected_value(s0, s1)
    g0, g1 = kuhn.best_response_value(s1, 0) - u0, kuhn.best_response_value(s0, 1) + u0
    return float(g0), float(g1), float((g0 + g1) / 2)


def deviation_curves(alpha, infoset: str, points: int = 41) -> dict:
    """{"q", "gain0", "gain1", "exploitability"} over q = P(b) at `infoset` in [0, 1], the rest at equilibrium."""
    out = {"q": [i / (points - 1) for i in range(points)], "gain0": [], "gain1": [], "exploitability": []}
    for q in out["q"]:
        g0, g1, e = gains(*deviation(alpha, infoset, q))
        out["gain0"].append(g0)
        out["gain1"].append(g1)
        out["exploitability"].append(e)
    return out


def deviation_figure(alpha=Fraction(1, 6), infoset: str = "Qb", q: float = 0.5) -> go.Figure:
    """Exploitability (and each player's gain from a best response) when one information set's P(b) moves over
    [0, 1] and every other stays at the equilibrium of player 0's `alpha`; the marker is `q`, the dotted line the
    equilibrium's own value there."""
    curves = deviation_curves(alpha, infoset)
    nash = float(kuhn.bet_probability(kuhn.nash_strategy(alpha)[0 if infoset in kuhn.INFOSETS[0] else 1], infoset))
    here = gains(*deviation(alpha, infoset, q))
    fig = go.Figure()
    for key, name, color, dash in (("exploitability", "exploitability = (gain₀ + gain₁)/2", "#d62728", "solid"),
                                   ("gain0", "gain₀ = BR₀(σ₁) − u₀", "#1f77b4", "dot"),
                                   ("gain1", "gain₁ = BR₁(σ₀) − u₁", "#2ca02c", "dot")):
        fig.add_trace(go.Scatter(x=curves["q"], y=curves[key], name=name, line=dict(color=color, dash=dash),
                                 hovertemplate=f"q %{{x:.3f}}<br>{key} %{{y:.4f}}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[q, q, q], y=[here[2], here[0], here[1]], mode="markers",
                             marker=dict(size=10, color=["#d62728", "#1f77b4", "#2ca02c"]), name=f"q = {q:.2f}",
                             hovertemplate="q %{x:.3f}: %{y:.4f}<extra></extra>"))
    fig.add_vline(x=nash, line=dict(color="#555", dash="dot"))
    fig.add_annotation(x=nash, y=1.0, yref="paper", text=f"equilibrium {nash:.3f}", showarrow=False,
                       yanchor="bottom", font=dict(size=11))
    fig.update_xaxes(title_text=f"P(b) at {infoset} ({infoset_label(infoset)})", range=[-0.02, 1.02])
    fig.update_yaxes(title_text="chips per hand", rangemode="tozero")
    fig.update_layout(template="plotly_white", height=430, margin=dict(l=10, r=10, t=90, b=50),
                      title=f"Nash α = {alpha_text(alpha)}, {infoset} moved to q = {q:.2f}: exploitability "
                            f"{here[2]:.4f}<br><sup>every other information set at the equilibrium</sup>",
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig


def deviation_explorer(alpha: float = 1 / 6, infoset: str = "Qb", q: float = 0.5):
    """Sliders over player 0's alpha and one information set's P(b), a menu of the 12 sets, redrawing
    `deviation_figure` (exact exploitability each time); the book shows it at the default setting."""
    import ipywidgets as W

    from workbench.viz.widgets import explorer, slider

    menu = W.Dropdown(options=[(f"{s}: {infoset_label(s)}", s) for s in INFOSET_ORDER], value=infoset,
                      description="information set", style={"description_width": "initial"})
    return explorer({"alpha": slider(alpha, 0.0, 1 / 3, 1 / 60, "player 0's α"), "infoset": menu,
                     "q": slider(q, 0.0, 1.0, 0.05, "P(b) there")},
                    lambda alpha, infoset, q: deviation_figure(alpha, infoset, q),
                    columns=[["alpha", "q"], ["infoset"]])


# ----------------------------------------------------------------------------------------------------
# The stored comparisons: game metrics over training, over seeds

GAME_KEYS = ("exploitability", "illegal", "payoff_vs_scripted", "win", "draw", "loss", "forfeit", "win_vs_random")
GAME_LABELS = {"eval/exploitability": "exploitability (chips per hand)", "eval/illegal": "illegal action mass",
               "eval/payoff_vs_scripted": "chips per hand vs scripted", "eval/accuracy": "held-out accuracy",
               "eval/loss": "loss rate vs minimax", "eval/draw": "draw rate vs minimax",
               "eval/forfeit": "forfeit rate vs minimax", "eval/win_vs_random": "win rate vs random"}


def with_game_start(groups: Mapping[str, list[list[dict]]], summaries: Sequence[Mapping],
                    keys: Sequence[str] = ("accuracy", *GAME_KEYS)) -> dict[str, list[list[dict]]]:
    """`groups` (recipe -> metric rows per seed) with each seed's evaluation before training prepended at step -1
    (eval/<key> = the summary's <key>_before; seed i matched by its summary's "seed"). The input is not modified."""
    out = {}
    for recipe, seeds in groups.items():
        by_seed = {s.get("seed", i): s for i, s in enumerate(s for s in summaries if s.get("recipe") == recipe)}
        out[recipe] = []
        for i, rows in enumerate(seeds):
            s = by_seed.get(i, {})
            start = {f"eval/{k}": s[f"{k}_before"] for k in keys if is_number(s.get(f"{k}_before"))}
            out[recipe].append(([{"step": -1, **start}] if start else []) + [dict(r) for r in rows])
    return out


def game_curves(groups: Mapping[str, list[list[dict]]], summaries: Sequence[Mapping] = (),
                keys: Sequence[str] = ("eval/exploitability",), refs: Mapping[str, Sequence[tuple]] | None = None,
                title: str | None = None, colors: Mapping[str, str] | None = None,
                labels: Mapping[str, str] | None = None) -> go.Figure:
    """One panel per metric, x = step: per recipe the mean over seeds (line) and the min–max band, starting from the
    evaluation before training (step -1, from `summaries`). refs {key: [(y, label) or (y, label, position), ...]}:
    dotted reference lines (e.g. the uniform strategy's exploitability and 0, a Nash equilibrium), the label at
    `position` ("top right" by default; "bottom right" keeps a line near the top clear of the panel's title).
    labels {key: panel title} (default GAME_LABELS)."""
    curves = with_game_start(groups, summaries)
    cols = 1 if len(keys) == 1 else 2
    nrows = math.ceil(len(keys) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[{**GAME_LABELS, **(labels or {})}.get(k, k)
                                                                for k in keys],
                        horizontal_spacing=0.1, vertical_spacing=0.18)
    drawn: dict[str, list[float]] = {key: [y for y, *_ in (refs or {}).get(key, ())] for key in keys}
    for r, (name, seeds) in enumerate(curves.items()):
        color = (colors or {}).get(name, RUN_COLORS[r % len(RUN_COLORS)])
        shown = False
        for i, key in enumerate(keys):
            steps, mean, lo, hi = seed_band(seeds, key)
            if not steps:
                continue
            drawn[key] += lo + hi
            for trace in band_traces(steps, mean, lo, hi, name=name, color=color, banded=len(seeds) > 1,
                                     legend=not shown, opacity=0.18, mode="lines+markers", marker=dict(size=4),
                                     hovertemplate=f"{html.escape(name)}<br>step %{{x}}<br>{key} %{{y:.4f}}"
                                                   "<extra></extra>"):
                fig.add_trace(trace, row=i // cols + 1, col=i % cols + 1)
            shown = True
    for i, key in enumerate(keys):
        for y, text, *position in (refs or {}).get(key, ()):
            fig.add_hline(y=y, line=dict(color="#555", dash="dot", width=1), row=i // cols + 1, col=i % cols + 1,
                          annotation_text=text, annotation_position=(position or ["top right"])[0],
                          annotation_font=dict(size=10))
        fig.update_xaxes(title_text="step (−1: before training)", row=i // cols + 1, col=i % cols + 1)
        if drawn[key]:  # room above and below, so a reference line's label stays inside the panel
            lo, hi = min(drawn[key]), max(drawn[key])
            pad = 0.12 * (hi - lo) if hi > lo else 0.1 * max(1.0, abs(hi))
            fig.update_yaxes(range=[lo - pad, hi + pad], row=i // cols + 1, col=i % cols + 1)
    note = band_note(groups)
    height, top, bottom = 190 + 300 * nrows, 90, 110
    fig.update_layout(template="plotly_white", height=height, title=f"{title}<br><sup>{note}</sup>" if title else note,
                      # the legend 70 px below the plots: under the x axes' titles, whatever the height
                      legend=dict(orientation="h", yanchor="top", y=-70 / (height - top - bottom), x=0),
                      margin=dict(l=10, r=10, t=top, b=bottom))
    return fig
