"""Figures for multi-turn agents (notebook 09): one episode token by token, per-turn rewards and advantages of a
group's episodes, and success curves of runs compared over seeds. Pure functions: a `RolloutBatch` (or metric
rows) in, `go.Figure` out; the helpers that compute what a figure draws are public, so a notebook or a test can
print the same numbers.

Every token of an episode has one of four roles, read from the batch exactly as the trainer reads it:

    prompt        the opening messages (batch.prompt_ids where prompt_mask is 1)
    action        a response token with mask 1: the policy produced it, the update trains on it
    observation   a response token with mask 0 and a turn id >= 0: the environment's (a tool result), never trained
    padding       turn id -1 (past the episode's end)

(after a token-mask stage, e.g. an overlong filter, an action token whose mask was zeroed shows as not trained:
the role follows the mask the update uses.)

    from workbench.viz.agent_episodes import episode_tokens, turn_advantages, success_curves
"""
from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench.batch import RolloutBatch
from workbench.viz.run_curves import band_note, metric_series, seed_band_curves
from workbench.viz.style import SIGNED_SCALE, display_token, to_numpy

ROLES = ("prompt", "action", "observation", "padding")
ROLE_COLORS = {"prompt": "#d0d0d0", "action": "#1f77b4", "observation": "#ff9f40", "padding": "#f4f4f4"}
ROLE_LABELS = {"prompt": "prompt", "action": "action: mask 1, trained", "observation": "observation: mask 0",
               "padding": "padding: turn -1"}
TEXT_COLORS = {"prompt": "#222222", "action": "#ffffff", "observation": "#222222", "padding": "#999999"}
CELL_PX = 24        # one token cell, in pixels


# ----------------------------------------------------------------------------------------------------
# One episode, token by token


def token_texts(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each id decoded on its own (special tokens kept), so one cell shows exactly one sampled token."""
    return [tokenizer.decode([int(i)]) for i in ids]


def cell_label(token: str, special: set[str] = frozenset()) -> tuple[str, int]:
    """(text, font size) of a token's cell: special tokens lose their brackets ("<eos>" -> "eos"), whitespace is
    made visible, and longer tokens get a smaller font so that they fit their cell."""
    text = token.strip("<|>") if token in special else token
    shown = display_token(text)
    return shown, int(min(12, max(6, round(38 / max(1, len(text))))))


def _per_turn(batch: RolloutBatch, row: int, field) -> dict[int, float]:
    """{turn: value} of a [B, S] field of one row (turn_rewards), over the row's turns."""
    if field is None:
        return {}
    turns = sorted({int(s) for s in batch.turn[row].tolist() if s >= 0}) if batch.turn is not None else []
    values = to_numpy(field[row])
    return {s: float(values[s]) for s in turns if s < len(values)}


def turn_mean_advantages(advantages, mask, turn, row: int) -> dict[int, tuple[float, float, float]]:
    """{turn: (mean, min, max)} of `advantages` over the trained tokens (mask 1) of each turn of one row."""
    a, m, t = to_numpy(advantages[row]), to_numpy(mask[row]) > 0, to_numpy(turn[row]).astype(int)
    out = {}
    for s in sorted(set(t[m].tolist())):
        vals = a[m & (t == s)]
        out[int(s)] = (float(vals.mean()), float(vals.min()), float(vals.max()))
    return out


def episode_cells(batch: RolloutBatch, tokenizer, row: int, *, advantages=None, max_padding: int = 4) -> list[dict]:
    """The cells `episode_tokens` draws, in order: one dict per token with
    position (prompt tokens -P..-1, response tokens 0..T-1), token (its text), role (see the module docstring),
    trained (the batch's mask; False off the response), turn (the turn id; None on the prompt, -1 on padding),
    reward (the token's turn's reward from batch.turn_rewards, or None) and advantage (the token's entry of
    `advantages`, default batch.advantages, or None).
    Only the first `max_padding` padding tokens are kept (padding carries nothing)."""
    if not 0 <= row < batch.size:
        raise IndexError(f"row {row} is outside the batch (B = {batch.size})")
    if batch.turn is None:
        raise ValueError("episode_cells needs batch.turn (the turn id of every response token): sample the "
                         "batch with the multi-turn rollout `turns`")
    advantages = batch.advantages if advantages is None else advantages
    cells = []
    if batch.prompt_ids is not None:
        keep = batch.prompt_mask[row] > 0 if batch.prompt_mask is not None else torch.ones_like(batch.prompt_ids[row])
        ids = batch.prompt_ids[row][keep.bool()].tolist()
        for k, text in enumerate(token_texts(tokenizer, ids)):
            cells.append(dict(position=k - len(ids), token=text, role="prompt", trained=False, turn=None,
                              reward=None, advantage=None))
    rewards = _per_turn(batch, row, batch.turn_rewards)
    mask, turn = to_numpy(batch.mask[row]) > 0, batch.turn[row].tolist()
    adv = to_numpy(advantages[row]) if advantages is not None else None
    texts = token_texts(tokenizer, batch.response_ids[row].tolist())
    padding = 0
    for t, text in enumerate(texts):
        s = int(turn[t])
        role = "padding" if s < 0 else "action" if mask[t] else "observation"
        if role == "padding":
            padding += 1
            if padding > max_padding:
                continue
        cells.append(dict(position=t, token=text, role=role, trained=bool(mask[t]), turn=s,
                          reward=rewards.get(s), advantage=None if adv is None else float(adv[t])))
    return cells


def _lines(cells: list[dict], wrap: int) -> list[tuple[str, list[dict]]]:
    """(label, cells) per display line: the prompt, then one line per turn (action then its observation), then
    padding; a line longer than `wrap` cells continues on the next."""
    def key(c):
        return "prompt" if c["role"] == "prompt" else "padding" if c["role"] == "padding" else f"turn {c['turn']}"

    grouped: list[tuple[str, list[dict]]] = []
    for c in cells:
        if grouped and grouped[-1][0] == key(c):
            grouped[-1][1].append(c)
        else:
            grouped.append((key(c), [c]))
    lines = []
    for label, group in grouped:
        for k in range(0, len(group), wrap):
            lines.append((label if k == 0 else f"{label} (cont.)", group[k:k + wrap]))
    return lines


def _fmt(x, spec: str = "+.3f") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def episode_tokens(batch: RolloutBatch, tokenizer, row: int, *, advantages=None, wrap: int = 36,
                   max_padding: int = 4, title: str | None = None) -> go.Figure:
    """One multi-turn episode token by token: a cell per token, coloured by role (prompt / action / observation /
    padding), trained tokens (mask 1) framed in black; one line for the prompt and one per turn (the action, then
    the observation that answers it). Hover: position, role, mask, turn id, the turn's reward and the token's
    advantage. Each turn's line ends with its reward r and the mean advantage A over its trained tokens.

    advantages: [B, T] to show instead of batch.advantages (e.g. another estimator's on the same batch).
    A static figure (the book) and an interactive one (JupyterLab) alike; legend entries toggle a role.
    """
    cells = episode_cells(batch, tokenizer, row, advantages=advantages, max_padding=max_padding)
    lines = _lines(cells, wrap)
    wrap = max(len(line) for _, line in lines)  # the figure is as wide as its longest line
    advantages = batch.advantages if advantages is None else advantages
    per_turn_adv = (turn_mean_advantages(advantages, batch.mask, batch.turn, row) if advantages is not None else {})
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    fig = go.Figure()
    for role in ROLES:
        xs, ys, text, sizes, custom, widths = [], [], [], [], [], []
        for y, (_, line) in enumerate(lines):
            for x, c in enumerate(line):
                if c["role"] != role:
                    continue
                xs.append(x)
                ys.append(y)
                label, size = cell_label(c["token"], special)
                text.append(label)
                sizes.append(size)
                widths.append(2.5 if c["trained"] else 0.0)
                custom.append([c["position"], c["role"], "1 (trained)" if c["trained"] else "0 (not trained)",
                               "–" if c["turn"] is None else str(c["turn"]), _fmt(c["reward"], "g"),
                               _fmt(c["advantage"]), html.escape(repr(c["token"]))])
        if not xs:
            continue
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers+text", name=ROLE_LABELS[role], text=text, customdata=custom,
            textfont=dict(size=sizes, color=TEXT_COLORS[role], family="monospace"),
            marker=dict(symbol="square", size=CELL_PX - 3, color=ROLE_COLORS[role],
                        line=dict(width=widths, color="#000000")),
            hovertemplate="position %{customdata[0]} · %{customdata[1]}<br>token %{customdata[6]}<br>"
                          "mask %{customdata[2]}<br>turn %{customdata[3]} · turn reward %{customdata[4]}<br>"
                          "advantage %{customdata[5]}<extra></extra>"))
    for y, (label, line) in enumerate(lines):
        if not label.startswith("turn ") or label.endswith("(cont.)"):
            continue
        s = line[0]["turn"]
        a = per_turn_adv.get(s)
        note = f"r = {_fmt(line[0]['reward'], 'g')}   A = {_fmt(a[0] if a else None, '+.2f')}"
        if a and a[2] - a[1] > 1e-6:
            note += f" ({a[1]:+.2f}..{a[2]:+.2f})"
        fig.add_annotation(x=wrap - 0.3, y=y, text=note, showarrow=False, xanchor="left",
                           font=dict(size=11, family="monospace"))
    reward = float(batch.rewards[row]) if batch.rewards is not None else float("nan")
    fig.update_xaxes(visible=False, range=[-0.7, wrap + 9.0])
    fig.update_yaxes(tickvals=list(range(len(lines))), ticktext=[label for label, _ in lines],
                     showgrid=False, zeroline=False, range=[len(lines) - 0.4, -0.6])
    fig.update_layout(
        title=title or f"row {row}: episode return {reward:g}, {int(batch.mask[row].sum())} trained tokens of "
                       f"{int((batch.turn[row] >= 0).sum())} response tokens",
        template="plotly_white", width=int(CELL_PX * (wrap + 9.7) + 110), height=int(CELL_PX * 1.25 * len(lines) + 190),
        legend=dict(orientation="h", yanchor="top", y=-0.02, x=0), margin=dict(l=90, r=20, t=60, b=90),
        plot_bgcolor="#ffffff")
    return fig


def expert_episode(task, example, tokenizer, actions: Sequence[str] | None = None, seed: int = 0) -> RolloutBatch:
    """A one-row batch of `actions` (default: the task's expert actions) played through the task's environment and
    encoded exactly as the multi-turn rollout encodes a sampled episode (`turns.encode_expert`), with the per-turn
    rewards and anchor states of the replay: what `episode_tokens` shows, without a model."""
    from workbench.rollout.engine import encode_prompts
    from workbench.rollout.turns import encode_expert, pad_episodes, prompt_of

    actions = list(task.expert_actions(example) if actions is None else actions)
    messages, episode = encode_expert(tokenizer, task.make_env(), example, actions, seed)
    env = task.make_env()
    _, info = env.reset(example, seed)
    rewards, infos = [], []
    for action in actions:  # replay (the encoding does not step the last action)
        _, reward, _, step_info = env.step(action)
        infos.append({"state": info.get("state"), "tool_error": step_info.get("tool_error")})
        rewards.append(float(reward))
        info = step_info
    ids, mask, turn, mu_logp = pad_episodes([episode], tokenizer.pad_token_id)
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [prompt_of(messages)])
    return RolloutBatch(response_ids=ids, mask=mask, group=torch.zeros(1, dtype=torch.long),
                        rewards=torch.tensor([sum(rewards)]), prompt_ids=prompt_ids, prompt_mask=prompt_mask,
                        mu_logp=mu_logp, turn=turn, turn_rewards=torch.tensor([rewards]),
                        truncated=torch.zeros(1, dtype=torch.bool), completions=[episode.completion],
                        prompts=[example.prompt], turn_info=[infos])


# ----------------------------------------------------------------------------------------------------
# Per-turn rewards and advantages of a group


def group_rows(batch: RolloutBatch, rows) -> list[int]:
    """`rows` as a list of row indices: an int stands for its whole group (advantages are relative to it)."""
    if isinstance(rows, (int, np.integer)):
        if not 0 <= int(rows) < batch.size:
            raise IndexError(f"row {rows} is outside the batch (B = {batch.size})")
        return torch.nonzero(batch.group == batch.group[int(rows)]).flatten().tolist()
    out = [int(r) for r in (rows.tolist() if isinstance(rows, torch.Tensor) else rows)]
    if not out or not all(0 <= r < batch.size for r in out):
        raise IndexError(f"rows {out} must be a non-empty list of rows of the batch (B = {batch.size})")
    return out


def default_state_labels(states: list[list]) -> list[list[str]]:
    """Short labels of anchor states: string parts shared by every state shown (the prompt, e.g. the calculator's
    (prompt, results)) are dropped; a gridworld position (r, c) reads "r,c"."""
    flat = [s for row in states for s in row]
    shared = set()
    if flat and all(isinstance(s, tuple) and len(s) == len(flat[0]) for s in flat):
        shared = {k for k in range(len(flat[0]))
                  if isinstance(flat[0][k], str) and all(s[k] == flat[0][k] for s in flat)}

    def label(state):
        if state is None:
            return "–"
        if isinstance(state, tuple):
            parts = [p for k, p in enumerate(state) if k not in shared]
            if parts and len(parts) == len(state) and all(isinstance(p, (int, np.integer)) for p in parts):
                return ",".join(str(p) for p in parts)
            state = parts[0] if len(parts) == 1 else tuple(parts)
        text = str(state).replace(" ", "")
        return text if len(text) <= 14 else text[:13] + "…"

    return [[label(s) for s in row] for row in states]


def as_advantage_sets(batch: RolloutBatch, advantages) -> dict[str, torch.Tensor]:
    if advantages is None:
        batch.require("advantages")
        return {"advantage": batch.advantages}
    if isinstance(advantages, Mapping):
        return dict(advantages)
    return {"advantage": advantages}


def turn_table(batch: RolloutBatch, rows, advantages=None,
               state_label: Callable[[list[list]], list[list[str]]] = default_state_labels) -> dict:
    """What `turn_advantages` draws, for the episodes `rows` (an int: that row's whole group):
    rows, steps (0..S-1), reward [R, S] (batch.turn_rewards; NaN past a row's turns), state [R][S] labels
    (from batch.turn_info; "" past a row's turns), episode_return [R], and per advantage set a dict
    {"mean", "min", "max"} of [R, S] arrays over each turn's trained tokens (NaN where a turn has none)."""
    rows = group_rows(batch, rows)
    batch.require("turn")
    sets = as_advantage_sets(batch, advantages)
    n_turns = [int(batch.turn[r].max()) + 1 for r in rows]
    S = max(n_turns)
    reward = np.full((len(rows), S), np.nan)
    states: list[list] = []
    for k, r in enumerate(rows):
        if batch.turn_rewards is not None:
            reward[k, :n_turns[k]] = to_numpy(batch.turn_rewards[r])[:n_turns[k]]
        info = batch.turn_info[r] if batch.turn_info else []
        states.append([info[s].get("state") if s < len(info) else None for s in range(n_turns[k])])
    labels = state_label(states)
    labels = [row + [""] * (S - len(row)) for row in labels]
    out = {"rows": rows, "steps": list(range(S)), "reward": reward, "state": labels,
           "episode_return": [float(batch.rewards[r]) for r in rows] if batch.rewards is not None else None,
           "advantages": {}}
    for name, adv in sets.items():
        stats = {k: np.full((len(rows), S), np.nan) for k in ("mean", "min", "max")}
        for k, r in enumerate(rows):
            for s, (mean, lo, hi) in turn_mean_advantages(adv, batch.mask, batch.turn, r).items():
                stats["mean"][k, s], stats["min"][k, s], stats["max"][k, s] = mean, lo, hi
        out["advantages"][name] = stats
    return out


def turn_advantages(batch: RolloutBatch, rows, advantages=None, *,
                    state_label: Callable[[list[list]], list[list[str]]] = default_state_labels,
                    title: str | None = None) -> go.Figure:
    """Per-turn rewards and advantages of a group's episodes, side by side: one heatmap of the per-turn
    environment rewards (each cell labelled with the anchor state the turn acted from), then one per advantage
    set (each cell: the turn's advantage, the mean over its trained tokens), all episodes x turns.

    rows: an int (that row's whole group) or a list of rows. advantages: None (batch.advantages), a [B, T]
    tensor, or {name: [B, T]} to compare estimators on the same episodes (e.g. {"GRPO": ..., "GiGPO": ...}).
    GRPO's advantage is one number per episode (a flat row); GiGPO's changes from turn to turn where the
    group's episodes share states.
    """
    table = turn_table(batch, rows, advantages, state_label)
    sets = table["advantages"]
    names = list(sets)
    R = table["reward"].shape[0]
    ylabels = [f"row {r}" + ("" if table["episode_return"] is None else f" · R={table['episode_return'][k]:g}")
               for k, r in enumerate(table["rows"])]
    titles = ["per-turn reward (cell: the state the turn acted from)"] + [f"{n}: per-turn advantage" for n in names]
    fig = make_subplots(rows=1 + len(names), cols=1, shared_xaxes=True, vertical_spacing=0.28 / (1 + len(names)),
                        subplot_titles=titles)
    states = np.array(table["state"], dtype=object)
    hover_common = "%{y}, turn %{x}<br>state %{customdata[0]}<br>"
    finite = np.isfinite(table["reward"])
    fig.add_trace(go.Heatmap(
        z=table["reward"], x=table["steps"], y=ylabels, text=states, texttemplate="%{text}",
        textfont=dict(size=10), colorscale="Greens", zmin=0,
        zmax=max(1.0, float(np.nanmax(table["reward"])) if finite.any() else 1.0),
        showscale=False, customdata=states[..., None], hoverongaps=False,
        hovertemplate=hover_common + "reward %{z:g}<extra></extra>"), row=1, col=1)
    peak = max([float(np.nanmax(np.abs(s["mean"]))) for s in sets.values() if np.isfinite(s["mean"]).any()]
               + [1e-9])
    for j, name in enumerate(names):
        mean = sets[name]["mean"]
        text = np.where(np.isfinite(mean), np.vectorize(lambda v: f"{v:+.2f}")(np.nan_to_num(mean)), "")
        spread = np.stack([states, np.vectorize(lambda v: _fmt(float(v)))(sets[name]["min"]),
                           np.vectorize(lambda v: _fmt(float(v)))(sets[name]["max"])], axis=-1)
        fig.add_trace(go.Heatmap(
            z=mean, x=table["steps"], y=ylabels, text=text, texttemplate="%{text}", textfont=dict(size=10),
            coloraxis="coloraxis", customdata=spread, hoverongaps=False,
            hovertemplate=hover_common + f"{html.escape(name)} advantage %{{z:+.3f}} "
                                         "(tokens %{customdata[1]}..%{customdata[2]})<extra></extra>"),
            row=2 + j, col=1)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(dtick=1)
    fig.update_xaxes(title_text="turn", row=1 + len(names), col=1)
    panel = 22 * R + 50
    fig.update_layout(
        title=title or f"{R} episodes of group {int(batch.group[table['rows'][0]])}: per-turn rewards and advantages",
        template="plotly_white", height=panel * (1 + len(names)) + 120,  # width: the page's (a book column)
        coloraxis=dict(colorscale=SIGNED_SCALE, cmin=-peak, cmax=peak, colorbar=dict(title="A", len=0.6, y=0.35)),
        margin=dict(t=70, b=50))
    return fig


# ----------------------------------------------------------------------------------------------------
# Comparing runs: success curves over seeds


def with_trailing_mean(groups: Mapping[str, list[list[dict]]], key: str = "accuracy",
                       window: int = 10) -> tuple[dict[str, list[list[dict]]], str]:
    """Copies of every run's rows with one more metric, the trailing `window`-step mean of `key` (the smoothing
    `workbench compare` uses for steps-to-target); returns (groups, the new key's name)."""
    from workbench.train.compare import smoothed

    name = f"{key} ({window}-step mean)"
    out = {}
    for recipe, seeds in groups.items():
        out[recipe] = []
        for rows in seeds:
            steps, values = metric_series(rows, key)
            mean = dict(zip(steps, smoothed(values, window)))
            out[recipe].append([{**row, name: mean[row["step"]]} if row.get("step") in mean else dict(row)
                                for row in rows])
    return out, name


def window_means(rows: list[dict], key: str = "accuracy", window: int = 10) -> tuple[float, float]:
    """Mean of `key` over the first and the last `window` logged steps of one run."""
    _, values = metric_series(rows, key)
    if not values:
        return float("nan"), float("nan")
    w = min(window, len(values))
    return float(np.mean(values[:w])), float(np.mean(values[-w:]))


def success_curves(groups: Mapping[str, list[list[dict]]], key: str = "accuracy", window: int = 10,
                   extra: Sequence[str] = ("entropy", "kl", "response_length/mean"),
                   title: str | None = None) -> go.Figure:
    """Per recipe the sampled success rate (`key`, the share of episodes that reached reward 1) and its trailing
    `window`-step mean, with a min–max band over seeds (`seed_band_curves`; none with one seed), then the health
    signals `extra`."""
    smooth, name = with_trailing_mean(groups, key, window)
    return seed_band_curves(smooth, keys=[key, name, *extra],
                            title=title or f"sampled success rate per step ({band_note(groups)})")
