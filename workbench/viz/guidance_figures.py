"""Figures for rollouts and guidance (notebook 14): ARPO's branching tree drawn from a real batch, and a token strip
per guidance method: the prompt a sample was drawn under beside the prompt it is trained under, and every response
token coloured by what the update does with it.

ARPO's tree. A batch of `rollout:arpo-agentic` records each row's `parent` and `branch_turn`; the entropy that decided
each branch is re-measured by one forward pass of the policy over the batch, with the rollout's own top-k log-probs
(`topk_logprobs`) and entropy (`calc_entropy` / log|V|), so a node's colour is the H the branch test read (up to the
float noise between the sampler's incremental pass and a full one).

    entropies = segment_entropies(trainer.model, batch, trainer.tokenizer)   # [B, S]
    arpo_tree_figure(batch, group, entropies, tau=0.5, w=0.2)

Token strips. Each response token gets one role, read from the batch as the update reads it:

    sampled    mask 1, drawn by the policy and trained on-policy
    offpolicy  mask 1 and offpolicy_mask 1: a teacher's or reference's token, or one drawn under another prompt
               (ICPO's steered rows, Critique-GRPO's refinement), trained by the objective's off-policy branch
    distilled  mask 1 on a row SRPO routes to self-distillation (`route` = 1): trained towards the self-teacher
    given      mask 0, never sampled here: a prefix given as context (PrefixRL, R3L's replayed turns), an observation
    masked     sampled (mask 1 after the rollout) but zeroed by a token mask (R3L's pivotal credit)

The prompt a row was drawn under is read off the engine: `recording(trainer)` wraps the trainer's engine for one
`make_batch` and keeps every generation, and a row is matched to the generation that produced its first sampled turn
(same tokens, bitwise the same behaviour log-probs). A row no generation produced (a reference solution, a teacher's)
has none. Each token's weight is the objective's own gradient weight d(-L)/d(log pi_t) at A = 1
(`gradient_shares.token_gradient_weights`); on a distilled row, SRPO's entropy weight exp(-H_teacher) / mean.

    with recording(trainer) as rec:
        batch = trainer.make_batch(0)
    guided = guided_batch(trainer, batch, rec)
    strip_figure(guided, group=guided_groups(guided)[0])
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from workbench.batch import RolloutBatch
from workbench.objectives.srpo_route import SDPO, entropy_weights
from workbench.rollout.arpo import ENTROPY_TOKENS, LOGPROBS, branch_probability, calc_entropy, prefix_owner
from workbench.rollout.engine import encode_prompts, response_logits, topk_logprobs
from workbench.viz.agent_episodes import CELL_PX, cell_label, token_texts
from workbench.viz.gradient_shares import token_gradient_weights
from workbench.viz.style import NEGATIVE, POSITIVE, display_token
from workbench.viz.weight_surfaces import NotDrawable

ENTROPY_SCALE = "Viridis"  # a node's entropy H (>= 0): dark = sure, yellow = uncertain
SUCCESS, FAILURE = "#2ca02c", NEGATIVE
KEY_LINE_PX = 17     # one line of the strip's prompt key
CHAR_PX = 6.7        # one character of 11 px monospace
CELL_STEP_PX = 30    # one token cell of the strip and the gap after it
FIGURE_MIN_PX = 600  # a strip is at least this wide (the book's text column: about 620 px in a 1200 px window)


# ----------------------------------------------------------------------------------------------------
# ARPO's tree


@torch.no_grad()
def segment_entropies(model, batch: RolloutBatch, tokenizer, *, temperature: float = 1.0,
                      tokens: int = ENTROPY_TOKENS, logprobs: int = LOGPROBS) -> torch.Tensor:
    """[B, S] ARPO's H of every row's action s (NaN where the row has no turn s): the top-`logprobs` entropy of the
    action's first `tokens` tokens over log|V|, as `arpo.segment_entropy` measures it while sampling, here from one
    forward pass of `model` over the batch."""
    logits, _ = response_logits(model, batch.prompt_ids, batch.prompt_mask, batch.response_ids)
    topk = topk_logprobs(logits.float() / temperature, batch.response_ids, logprobs)        # [B, T, k + 1]
    S = int(batch.turn.max()) + 1
    out = torch.full((batch.size, S), math.nan, dtype=torch.float64)
    vocab = math.log(len(tokenizer.get_vocab()))
    for i in range(batch.size):
        for s in range(S):
            action = (batch.turn[i] == s) & (batch.mask[i] > 0)
            if bool(action.any()):
                seg = topk[i][action][None]                                                   # [1, n, k + 1]
                out[i, s] = float(calc_entropy(seg, torch.ones(seg.shape[:2]), tokens)) / vocab
    return out


def group_rows(batch: RolloutBatch, group: int) -> list[int]:
    """The batch rows of `group`, in order (ARPO: creation order, so `parent` indexes this list)."""
    return torch.nonzero(batch.group == group).flatten().tolist()


def turns_of(batch: RolloutBatch, row: int) -> int:
    """Number of actions the row took."""
    return int(batch.turn[row].max()) + 1


def lanes(parents: Sequence[int]) -> list[int]:
    """Each row's lane (y) in a depth-first order: a root, then its branches under it, each with its own."""
    children = {j: [c for c, p in enumerate(parents) if p == j] for j in range(len(parents))}
    order: list[int] = []

    def visit(j):
        order.append(j)
        for c in children[j]:
            visit(c)

    for root in (j for j, p in enumerate(parents) if p < 0):
        visit(root)
    return [order.index(j) for j in range(len(parents))]


def tree_nodes(batch: RolloutBatch, group: int, entropies: torch.Tensor, *, tau: float, w: float) -> list[dict]:
    """One node per action sampled in the group's tree (a row's turns from its `branch_turn` on; earlier ones are its
    parent's): row (index in the group), turn, lane, action text, H, dH = H - H_init (H_init: the row's first own
    measurement), p_branch = clip(tau + w dH, 0, 1) after its tool response (None on the row's last action),
    branches (rows copied from it after this turn), source (the node it continues: (row, turn) or None) and reward
    (the row's return on its last action, else None)."""
    rows = group_rows(batch, group)
    parents, starts = batch.parent[rows].tolist(), batch.branch_turn[rows].tolist()
    lane = lanes(parents)
    nodes = []
    for j, row in enumerate(rows):
        last = turns_of(batch, row) - 1
        for s in range(starts[j], last + 1):
            h, h_init = float(entropies[row, s]), float(entropies[row, starts[j]])
            source = (j, s - 1) if s > starts[j] else (
                (prefix_owner(parents, starts, parents[j], s - 1), s - 1) if parents[j] >= 0 else None)
            nodes.append(dict(row=j, turn=s, lane=lane[j], action=batch.turn_info[row][s].get("action", ""),
                              entropy=h, dH=h - h_init,
                              p_branch=branch_probability(h - h_init, tau, w) if s < last else None,
                              branches=sum(parents[c] == j and starts[c] == s + 1 for c in range(len(rows))),
                              source=source, reward=float(batch.rewards[row]) if s == last else None))
    return nodes


def arpo_tree_figure(batch: RolloutBatch, group: int, entropies: torch.Tensor, *, tau: float, w: float,
                     h_range: tuple[float, float] | None = None, title: str | None = None,
                     height: int | None = None) -> go.Figure:
    """ARPO's tree of one prompt: a node per sampled action (x: turn, y: the row's lane), coloured by its entropy H,
    lines from each node to the action that continues it (a branch: a diagonal into the copy's lane); nodes a branch
    was taken after ringed black; each row's end marked by its reward (green: solved, red: not). Five traces always
    (edges, nodes, branch points, solved, failed), so an explorer can redraw it in place; `h_range` fixes the
    colour scale (e.g. the whole batch's)."""
    nodes = tree_nodes(batch, group, entropies, tau=tau, w=w)
    at = {(n["row"], n["turn"]): n for n in nodes}
    ex, ey = [], []
    for n in nodes:
        if n["source"] is not None:
            src = at[n["source"]]
            ex += [src["turn"], n["turn"], None]
            ey += [src["lane"], n["lane"], None]
    fig = go.Figure(go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#9e9e9e", width=2), hoverinfo="skip",
                               name="continues / branches"))
    hs = [n["entropy"] for n in nodes]
    lo, hi = h_range or (min(hs), max(hs))
    fig.add_trace(go.Scatter(
        x=[n["turn"] for n in nodes], y=[n["lane"] for n in nodes], mode="markers+text", name="action (colour: H)",
        text=[display_token(n["action"]) for n in nodes], textposition="top center",
        textfont=dict(size=10, family="monospace"),
        marker=dict(size=16, color=hs, colorscale=ENTROPY_SCALE, cmin=lo, cmax=max(hi, lo + 1e-9),
                    line=dict(width=0.5, color="#444444"), colorbar=dict(title="H", len=0.8, thickness=14)),
        customdata=[[n["row"], n["turn"], n["entropy"], n["dH"], "–" if n["p_branch"] is None else
                     f"{n['p_branch']:.2f}", n["branches"], display_token(n["action"])] for n in nodes],
        hovertemplate="row %{customdata[0]} · turn %{customdata[1]} · %{customdata[6]}<br>H = %{customdata[2]:.3f}, "
                      "ΔH = %{customdata[3]:+.3f}<br>P(branch after its tool response) = %{customdata[4]}<br>"
                      "branches taken here: %{customdata[5]}<extra></extra>"))
    forks = [n for n in nodes if n["branches"]]
    fig.add_trace(go.Scatter(x=[n["turn"] for n in forks], y=[n["lane"] for n in forks], mode="markers",
                             name="branch taken after this turn", hoverinfo="skip",
                             marker=dict(size=24, color="rgba(0,0,0,0)", line=dict(width=2.5, color="#000000"))))
    for solved, color, symbol in ((True, SUCCESS, "circle"), (False, FAILURE, "x")):
        ends = [n for n in nodes if n["reward"] is not None and (n["reward"] >= 1) == solved]
        fig.add_trace(go.Scatter(
            x=[n["turn"] + 0.45 for n in ends], y=[n["lane"] for n in ends], mode="markers+text",
            name="solved (R ≥ 1)" if solved else "not solved", text=[f"R={n['reward']:g}" for n in ends],
            textposition="middle right", textfont=dict(size=10, color=color),
            marker=dict(size=11, symbol=symbol, color=color), hoverinfo="skip"))
    n_rows, width = max(n["lane"] for n in nodes) + 1, max(n["turn"] for n in nodes) + 1
    prompt = batch.prompts[group_rows(batch, group)[0]] if batch.prompts else f"group {group}"
    fig.update_xaxes(tickvals=list(range(width)), ticktext=[f"turn {s}" for s in range(width)],
                     range=[-0.5, width + 0.4], showgrid=False, zeroline=False)
    fig.update_yaxes(visible=False, range=[n_rows - 0.4, -0.8])
    fig.update_layout(
        title=title or (f"ARPO's tree for {display_token(prompt)}: {n_rows} rows, {len(forks)} branch points<br>"
                        "<sup>node colour: the entropy H of the action (top-10, first 20 tokens, / log|V|)<br>ringed: "
                        "a branch was taken after its tool response</sup>"),
        template="plotly_white", height=height or int(150 + 42 * n_rows),
        legend=dict(orientation="h", yanchor="top", y=-0.08, x=0), margin=dict(l=30, r=30, t=100, b=60))
    return fig


# ----------------------------------------------------------------------------------------------------
# What the engine was asked: the prompt each row was drawn under


@dataclasses.dataclass
class Recording:
    """What one `make_batch` did that the batch does not keep: every generation (prompt ids and mask, response ids,
    mask and behaviour log-probs), the step's context (its task and examples: a method that adds groups adds their
    examples), how many examples the step drew (`n_prompts`) and the mask before the token masks."""

    generations: list = dataclasses.field(default_factory=list)
    context: object = None
    n_prompts: int = 0
    rollout_mask: torch.Tensor | None = None


class RecordingEngine:
    """The trainer's engine, keeping every `Generation` it returns in `record.generations`."""

    def __init__(self, engine, record: Recording):
        self.engine, self.record = engine, record

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, prompts, **kw):
        return self._kept(self.engine.generate(prompts, **kw))

    def generate_ids(self, prompts, **kw):
        return self._kept(self.engine.generate_ids(prompts, **kw))

    def _kept(self, gen):
        self.record.generations.append(gen)
        return gen


@contextlib.contextmanager
def recording(trainer):
    """Within the block, the trainer samples through a `RecordingEngine` and keeps its step context, the number of
    examples its rollout stage was given and the mask before the token masks in the yielded `Recording`; everything
    is as it was afterwards."""
    record, engine, context, runners = Recording(), trainer.engine, trainer.context, trainer.stage_runners

    def kept_context(step):
        record.context = context(step)
        return record.context

    def kept_runners():
        stages = runners()
        rollout, masks = stages["rollout"], stages["token_masks"]

        def counted_rollout(batch, ctx):
            record.n_prompts = len(ctx.examples)
            return rollout(batch, ctx)

        def token_masks(batch, ctx):
            record.rollout_mask = batch.mask.clone()
            return masks(batch, ctx)
        return {**stages, "rollout": counted_rollout, "token_masks": token_masks}

    trainer.engine, trainer.context, trainer.stage_runners = RecordingEngine(engine, record), kept_context, kept_runners
    try:
        yield record
    finally:
        trainer.engine = engine
        del trainer.context, trainer.stage_runners  # the class's methods again


def first_sampled(batch: RolloutBatch, row: int, sampled_mask: torch.Tensor) -> torch.Tensor:
    """[T] bool: the tokens of the row's first turn that holds sampled tokens (`sampled_mask` [B, T] > 0)."""
    on = sampled_mask[row] > 0
    if batch.turn is None or not bool(on.any()):
        return on
    return on & (batch.turn[row] == int(batch.turn[row][on].min()))


def generation_key(ids: torch.Tensor, mu_logp: torch.Tensor) -> tuple:
    """What identifies a sampled turn: its token ids and the bytes of its behaviour log-probs."""
    return tuple(ids.tolist()), mu_logp.float().numpy().tobytes()


def sampled_prompt_ids(batch: RolloutBatch, record: Recording) -> list[list[int] | None]:
    """Per row, the prompt ids its first sampled turn was generated from (the engine's input: the prompt and what
    preceded the turn, a given prefix included), or None when no recorded generation produced it. Each generation
    answers one row: rows without off-policy tokens are matched first, so a reference solution scored under the plain
    prompt (bitwise the log-probs a sample of the same tokens got) finds the samples' generations taken. (A branch
    copied from another row, ARPO's, shares its parent's first turn: only one of the two is matched.)"""
    sampled = record.rollout_mask if record.rollout_mask is not None else batch.mask
    made: dict[tuple, list] = {}
    for gen in record.generations:
        for k in range(gen.response_ids.shape[0]):
            on = gen.mask[k] > 0
            made.setdefault(generation_key(gen.response_ids[k][on], gen.mu_logp[k][on]), []).append(
                gen.prompt_ids[k][gen.prompt_mask[k] > 0].tolist())
    off = batch.offpolicy_mask if batch.offpolicy_mask is not None else torch.zeros_like(batch.mask)
    out: list = [None] * batch.size
    for i in sorted(range(batch.size), key=lambda i: bool((off[i] > 0).any())):
        on = first_sampled(batch, i, sampled)
        left = made.get(generation_key(batch.response_ids[i][on], batch.mu_logp[i][on]), []) if bool(on.any()) else []
        out[i] = left.pop(0) if left else None
    return out


# ----------------------------------------------------------------------------------------------------
# Roles and weights of the response tokens


ROLES = ("sampled", "offpolicy", "distilled", "given", "masked")
ROLE_COLORS = {"sampled": POSITIVE, "offpolicy": "#2ca02c", "distilled": "#9467bd", "given": "#ff9f40",
               "masked": "#b0b0b0"}
ROLE_LABELS = {"sampled": "sampled, trained on-policy", "offpolicy": "off-policy: teacher / reference / other prompt",
               "distilled": "distilled towards the self-teacher", "given": "given context, mask 0",
               "masked": "sampled, masked out of the loss"}


def token_roles(batch: RolloutBatch, rollout_mask: torch.Tensor | None = None) -> list[list[str]]:
    """Per row, the role (`ROLES`) of each response token up to the row's end (turn id -1: padding, left out).
    rollout_mask: the mask before the token masks (default the batch's: nothing masked)."""
    before = batch.mask if rollout_mask is None else rollout_mask
    off = batch.offpolicy_mask if batch.offpolicy_mask is not None else torch.zeros_like(batch.mask)
    routes = batch.route.tolist() if batch.route is not None else [None] * batch.size
    out = []
    for i in range(batch.size):
        length = int((batch.turn[i] >= 0).sum()) if batch.turn is not None else int((batch.mask[i] > 0).sum())
        row = []
        for t in range(length):
            if batch.mask[i, t] > 0:
                row.append("offpolicy" if off[i, t] > 0 else "distilled" if routes[i] == SDPO else "sampled")
            else:
                row.append("masked" if before[i, t] > 0 else "given")
        out.append(row)
    return out


def unit_weights(batch: RolloutBatch, objective: str, **kw) -> np.ndarray:
    """[B, T] each token's weight in the update at A = 1: the objective's gradient weight d(-L)/d(log pi_t) at the
    batch's old log-probs (`token_gradient_weights`), 0 off the mask. An objective that reads what a batch does not
    hold (SRPO's live logits) falls back to PPO-clip's weight (1) and, on distilled tokens (`route` = 1), SRPO's
    entropy weight exp(-beta H_teacher) / mean over them (kw's beta, default 1)."""
    if batch.old_logp is None:
        raise ValueError("unit_weights reads batch.old_logp: build the batch with minibatches > 1 or ppo_epochs > 1 "
                         "(an on-policy step takes the old log-probs from the training forward)")
    unit = dataclasses.replace(batch, advantages=batch.mask.clone())
    try:
        w, _ = token_gradient_weights(objective, unit, batch.old_logp, **kw)
        return w
    except NotDrawable:
        w, _ = token_gradient_weights("ppo-clip", unit, batch.old_logp)
    if batch.route is not None:
        sdpo = ((batch.route == SDPO)[:, None] & (batch.mask > 0)).numpy()
        if sdpo.any():
            entropy = batch.teacher_entropy.double()[torch.as_tensor(sdpo)]
            w[sdpo] = entropy_weights(entropy, kw.get("beta", 1.0)).numpy()
    return w


# ----------------------------------------------------------------------------------------------------
# One recipe's batch, ready to draw


@dataclasses.dataclass
class GuidedBatch:
    """A recipe's batch with what its strips show: roles, weights, and the prompt ids each row was drawn under,
    trained under, and its example's plain prompt (`plain` [B]); `teacher` [B]: SRPO's teacher prompt ids (None
    elsewhere); `n_prompts`: the examples the step drew (a group id beyond is a copy the method added)."""

    key: str
    n_prompts: int
    batch: RolloutBatch
    tokenizer: object
    roles: list
    weights: np.ndarray
    sampled: list
    trained: list
    plain: list
    teacher: list


def teacher_prompt_ids(trainer, batch: RolloutBatch, record: Recording) -> list[list[int] | None]:
    """SRPO's teacher prompt of each row it routes to self-distillation (the row's prompt with its first correct
    sibling's text, `srpo_teacher.teacher_prompts`, the recipe's template), None on the others."""
    from workbench.transforms.srpo_teacher import TEACHER_TEMPLATE, routes, teacher_prompts

    if batch.route is None:
        return [None] * batch.size
    kw = next((u.kw for u in trainer.recipe.group_transforms if u.key == "srpo-route"), {})
    _, sibling = routes(batch.scores >= kw.get("threshold", 1.0), batch.group)
    rows = torch.nonzero(batch.route == SDPO).flatten().tolist()
    prompts = teacher_prompts(record.context.task, record.context.examples, batch, rows, sibling,
                              kw.get("template", TEACHER_TEMPLATE))
    out: list = [None] * batch.size
    for i, prompt in zip(rows, prompts):
        ids, mask = encode_prompts(trainer.tokenizer, [prompt])
        out[i] = ids[0][mask[0] > 0].tolist()
    return out


def guided_batch(trainer, batch: RolloutBatch, record: Recording) -> GuidedBatch:
    """`batch` (made by `trainer.make_batch` inside `recording(trainer)`) with its roles, unit weights and prompts."""
    objective = trainer.recipe.objective
    examples, task = record.context.examples, record.context.task
    plain = {}
    for g in batch.group.unique().tolist():
        ids, mask = encode_prompts(trainer.tokenizer, [task.opening(examples[g])])
        plain[g] = ids[0][mask[0] > 0].tolist()
    return GuidedBatch(
        key=trainer.recipe.key, n_prompts=record.n_prompts, batch=batch, tokenizer=trainer.tokenizer,
        roles=token_roles(batch, record.rollout_mask), weights=unit_weights(batch, objective.key, **objective.kw),
        sampled=sampled_prompt_ids(batch, record),
        trained=[batch.prompt_ids[i][batch.prompt_mask[i] > 0].tolist() for i in range(batch.size)],
        plain=[plain[g] for g in batch.group.tolist()], teacher=teacher_prompt_ids(trainer, batch, record))


def guided_rows(g: GuidedBatch) -> list[int]:
    """Rows the guidance touched: a token not plainly sampled, drawn or trained under a prompt that is not the
    example's plain one, drawn by nothing (a teacher's), or in a group the method added (POPE's copies)."""
    return [i for i in range(g.batch.size)
            if set(g.roles[i]) - {"sampled"} or g.sampled[i] != g.plain[i] or g.trained[i] != g.plain[i]
            or int(g.batch.group[i]) >= g.n_prompts]


def guided_groups(g: GuidedBatch) -> list[int]:
    """Groups holding a guided row, those whose rewards differ first (where the guidance gave GRPO a signal), each
    kind in batch order."""
    groups = list(dict.fromkeys(int(g.batch.group[i]) for i in guided_rows(g)))
    return sorted(groups, key=lambda k: bool(g.batch.rewards[g.batch.group == k].unique().numel() < 2))


# ----------------------------------------------------------------------------------------------------
# The strip


def prompt_key(g: GuidedBatch, rows: Sequence[int]) -> dict[tuple, str]:
    """Prompt ids -> label ("P0", "P1", ...) of every prompt the rows were drawn, trained or taught under, the plain
    prompt first."""
    labels: dict[tuple, str] = {}
    for ids in [g.plain[i] for i in rows] + [p for i in rows for p in (g.sampled[i], g.trained[i], g.teacher[i])]:
        if ids is not None and tuple(ids) not in labels:
            labels[tuple(ids)] = f"P{len(labels)}"
    return labels


def prompt_note(g: GuidedBatch, row: int, labels: Mapping[tuple, str]) -> str:
    """"P1 → P0" (drawn under P1, trained under P0; "–" when nothing sampled the row), then SRPO's teacher
    prompt."""
    drawn = labels[tuple(g.sampled[row])] if g.sampled[row] is not None else "–"
    note = f"{drawn} → {labels[tuple(g.trained[row])]}"
    if g.teacher[row] is not None:
        note += f" · teacher {labels[tuple(g.teacher[row])]}"
    return note


def key_lines(g: GuidedBatch, labels: Mapping[tuple, str], width: int = 100) -> list[str]:
    """The prompts written out, one or more lines each ("↵" for a newline), the plain one marked."""
    plain = {tuple(p) for p in g.plain}
    lines = []
    for ids, label in labels.items():
        text = display_token(g.tokenizer.decode(list(ids), skip_special_tokens=True))
        head = f"{label}{' (plain)' if ids in plain else ''}: "
        wrapped = textwrap.wrap(text, width - len(head), break_on_hyphens=False, drop_whitespace=False) or [""]
        lines += [head + wrapped[0]] + [" " * len(head) + part for part in wrapped[1:]]
    return lines


def strip_cells(g: GuidedBatch, rows: Sequence[int]) -> list[dict]:
    """The strip's cells: x (position), y (line), role, token (a space shown as "␣"), weight (None on a token the loss
    does not read)."""
    special = set(getattr(g.tokenizer, "all_special_tokens", ()))
    cells = []
    for y, i in enumerate(rows):
        texts = token_texts(g.tokenizer, g.batch.response_ids[i][:len(g.roles[i])].tolist())
        for t, (role, token) in enumerate(zip(g.roles[i], texts)):
            cells.append(dict(x=t, y=y, role=role, token=cell_label(token.replace(" ", "␣"), special)[0], raw=token,
                              weight=float(g.weights[i, t]) if role not in ("given", "masked") else None))
    return cells


def weight_label(w: float) -> str:
    """A weight under its cell in at most 4 characters: "1", "0.18", "<.01"."""
    return "1" if w == 1 else f"{w:.2f}" if abs(w) >= 0.01 else "<.01"


def strip_title(g: GuidedBatch, rows: Sequence[int]) -> str:
    """The group, how many rows, and whether the method touched it: added it (a copy) or left it as GRPO's."""
    group = int(g.batch.group[rows[0]])
    how = (" (a copy the method added)" if group >= g.n_prompts else "" if set(rows) & set(guided_rows(g))
           else " (untouched: the method did not act on it)")
    return f"{g.key}: group {group}{how}, {len(rows)} rows"


def row_note(g: GuidedBatch, row: int, labels) -> str:
    """The row's reward, its mean advantage over its trained tokens (none on a distilled row: it is trained towards
    the teacher, not by A) and `prompt_note`."""
    b = g.batch
    adv = b.advantages[row][b.mask[row] > 0] if b.advantages is not None else torch.zeros(0)
    a = f"{float(adv.mean()):+.2f}" if len(adv) and "distilled" not in g.roles[row] else "  – "
    return f"R = {float(b.rewards[row]):g} · A = {a} · {prompt_note(g, row, labels)}"


def strip_figure(g: GuidedBatch, group: int | None = None, rows: Sequence[int] | None = None, *,
                 title: str | None = None, width: int | None = None, height: int | None = None) -> go.Figure:
    """One line per row of `group` (default: the first guided group): its response tokens coloured by role, each
    trained token's weight (at A = 1) under it, then the row's reward, advantage and the prompts it was drawn and
    trained under; the prompts written out below. One trace per role and one of weights, always, so an explorer can
    redraw it in place (give it a fixed `width` and `height`: a redraw keeps the first figure's size)."""
    if rows is None:
        group = next(iter(guided_groups(g)), 0) if group is None else group
        rows = group_rows(g.batch, group)
    labels, cells = prompt_key(g, rows), strip_cells(g, rows)
    fig = go.Figure()
    for role in ROLES:
        mine = [c for c in cells if c["role"] == role]
        fig.add_trace(go.Scatter(
            x=[c["x"] for c in mine], y=[c["y"] for c in mine], mode="markers+text", name=ROLE_LABELS[role],
            text=[c["token"] for c in mine], textfont=dict(size=12, color="#ffffff" if role != "masked" else "#222222",
                                                            family="monospace"),
            marker=dict(symbol="square", size=CELL_PX - 3, color=ROLE_COLORS[role]),
            customdata=[[display_token(repr(c["raw"])), ROLE_LABELS[role],
                         "–" if c["weight"] is None else f"{c['weight']:.3f}"] for c in mine],
            hovertemplate="token %{customdata[0]} · %{customdata[1]}<br>weight at A = 1: %{customdata[2]}"
                          "<extra></extra>"))
    weighted = [c for c in cells if c["weight"] is not None]
    fig.add_trace(go.Scatter(x=[c["x"] for c in weighted], y=[c["y"] + 0.42 for c in weighted], mode="text",
                             text=[weight_label(c["weight"]) for c in weighted], textfont=dict(size=8, color="#555555"),
                             hoverinfo="skip", showlegend=False))
    cells_wide = max((len(g.roles[i]) for i in rows), default=1)
    notes = [row_note(g, i, labels) for i in rows]
    plot_px = CELL_STEP_PX * (cells_wide + 0.7) + CHAR_PX * max(len(n) for n in notes) + 16
    fig_px = width or max(FIGURE_MIN_PX, int(plot_px + 90))
    for y, note in enumerate(notes):
        fig.add_annotation(x=cells_wide - 0.3, y=y, text=note, showarrow=False, xanchor="left",
                           font=dict(size=11, family="monospace"))
    lines = ["A → B: drawn under prompt A, trained under B (–: nothing sampled the row)"] + key_lines(
        g, labels, width=int((fig_px - 80) / CHAR_PX))
    fig.add_annotation(x=0, y=0, xref="paper", yref="paper", yanchor="top", xanchor="left", align="left",
                       showarrow=False, text="<br>".join(lines), font=dict(size=11, family="monospace"), yshift=-12)
    fig.update_xaxes(visible=False, range=[-0.7, -0.7 + (fig_px - 90) / CELL_STEP_PX])
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=[f"row {i}" for i in rows], showgrid=False,
                     zeroline=False, range=[len(rows) - 0.3, -0.7])
    fig.update_layout(
        title=title or f"{strip_title(g, rows)}<br><sup>colour: what the update does with each token; small numbers: "
                       "its weight at A = 1 (d(-L)/d log π)</sup>",
        template="plotly_white", width=fig_px, height=height or int(150 + 36 * len(rows) + KEY_LINE_PX * len(lines)),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, font=dict(size=10)),
        margin=dict(l=70, r=20, t=95, b=24 + KEY_LINE_PX * len(lines)), plot_bgcolor="#ffffff")
    return fig
