"""SPO: segment-level Monte Carlo advantages, on a chain of cutpoints (SPO-chain) or on a sampled tree (SPO-tree).

A response y is cut into contiguous segments y = y^(1) ... y^(K); s_k = prompt + y^(1..k) is the state after
segment k (s_0 the prompt, s_K the finished response, whose value is its reward R). Each segment is an action:

    A_k = V(s_k) - V(s_{k-1})                  on every token of segment k ("rloo")
    A_k = (V(s_k) - V(s_{k-1})) / (std + 1e-8)  the tree's "grpo": std of the values of s_{k-1}'s children
    probability mask: a token with p_t = exp(old_logp_t) >= 0.9 gets no gradient (A = 0 and, with the token mask
    `spo-segment`, out of the loss); the advantages are whitened over the batch's tokens with p_t < 0.9 only

SPO-chain (`reward_shaping:spo-segment` on the plain `turns` rollout, one-turn tasks). Cutpoints are the positions
c = t - 1 of the tokens with p_t < 0.9 (state c is "after token c", c = -1 the prompt: right before an uncertain
token), and every `cutpoint_interval`-th of them, in order, is a segment boundary (5; the paper's configs try
1..10 and 100). V(s) at a boundary = mean verifier score of K continuations of prompt + y_{<=c} sampled from the
current policy (token ids, never re-tokenized; K = 9, the GSM8K chain configs' `9rolls`; the long-CoT config uses
4). Boundary 0 is always the prompt: V(s_0) = K continuations of the prompt (`v0="mc"`) or the mean reward of the
prompt's group (`v0="group"`, no extra samples: our option). The values land in `batch.segment_values` [B, S]
(V of the state each segment starts from) and the segments in `batch.segment`; the last segment ends at R.

SPO-tree (`rollout:spo-segment`). Per prompt a tree with branch factors (6, 6, 6) per depth; every node's segment
is M tokens of generation (the last depth: the rest of the budget), a child that ends (EOS, stop string) earlier is
a leaf; leaves are scored by the verifier. Each batch row is one root-to-leaf path, its segments tagged with their
node's id in `batch.segment` (a shared prefix carries the same id in every row through it), and its reward is its
leaf's. Node values come from the rows: V(n) = mean reward of the leaves below n (paper); V(root) = mean over the
tree. A node's advantage sits on its segment's tokens, so a path's segments carry different advantages.

Readings and defaults. "rloo" (the authors' `adv_method` default). Whitening on, Bessel variance, eps 1e-8
(`whiten_advantages: true`, trainers/utils.py::masked_whiten with `unbiased_variance=True`); if fewer than two
tokens have p < 0.9 the whitening uses every token (the code's fallback for none), and one token is left as is.
After whitening, confident tokens are set back to exactly 0 (the advantage alone then gives them no gradient; the
code leaves them whitened and relies on its loss mask, which the token mask `spo-segment` is). `drop_zero=True`
(the tree's `only_adv_greater_than_zero=True`, which keeps edges with a non-zero advantage, negative ones included)
leaves zero-advantage segments out of the whitening and at exactly 0; the token mask with `drop_zero=True` then takes
them out of the loss, as the code drops those edges. The chain estimates V(s_0) always (paper: s_0 is the first
state); K, the temperature and the stop strings of the continuations are parameters of the reward shaping.

Reference (AIFrameResearch/SPO @ b9fc6a2, transcribed in tests/anchors/formulas_spo.py):
`src/treetune/episode_generators/math_episode_generator_with_mc_advantages.py`
(`_create_value_estimation_requests`: cutpoints; `_compute_mc_value`; `_compute_token_advantages`: A per token),
`src/treetune/inference_strategies/hybrid_inference_strategy.py::_construct_tree` (node reward = mean of its
children's, `reward_std` = np.std), `src/treetune/episode_generators/tree_episode_generator.py::
extract_edges_from_tree` (rloo / grpo edges), `src/treetune/trainers/ppo_trainer.py` (`use_prob_mask`: loss on
exp(old) < 0.9) and `trainers/utils.py::masked_whiten`.

`reference_bug=True` reproduces the code where it departs from the paper:
  - tree: a node's value is the mean of its children's values, not of the leaves below it (they differ when a
    branch ends early: a leaf child weighs as much as a whole subtree);
  - chain: V(s_0) is estimated only if the first token is uncertain (cutpoint -1); otherwise the tokens up to the
    first boundary get A = 0;
  - the probability zeroing of the advantage is p > 0.9 (a token with p = 0.9 exactly keeps its advantage; the
    loss mask, p < 0.9, still drops it), and the whitened advantages are left on the confident tokens.
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch

TITLE = "Segment Policy Optimization: Effective Segment-Level Credit Assignment in RL for Large Language Models"
ADV_METHODS = ("rloo", "grpo")
V0 = ("mc", "group")


def check_threshold(prob_threshold) -> None:
    if prob_threshold is not None and not 0 < prob_threshold <= 1:
        raise ValueError(f"prob_threshold must be in (0, 1] or None (no probability mask), got {prob_threshold}")


# ---------------------------------------------------------------------------------------------------- segments

def check_chain(*, cutpoint_interval=5, top_p=1.0, **_) -> None:
    if cutpoint_interval < 1:
        raise ValueError(f"cutpoint_interval must be >= 1, got {cutpoint_interval}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p (the continuations' nucleus) must be in (0, 1], got {top_p}")


def cutpoints(probs: list[float], *, threshold=0.9, interval=5) -> list[int]:
    """Every `interval`-th of {t - 1 : p_t < threshold} in order: state c = after token c (-1: the prompt)."""
    check_chain(cutpoint_interval=interval)
    return [t - 1 for t, p in enumerate(probs) if p < threshold][::interval]


def chain_boundaries(probs: list[float], *, threshold=0.9, interval=5, reference_bug=False
                     ) -> tuple[list[int], list[bool]]:
    """(boundaries b_0 = -1 < b_1 < ..., estimated[k]: whether V(s after b_k) is estimated). Segment k spans tokens
    b_k + 1 .. b_{k+1} (the last: to the end). The prompt is always b_0; without the paper's V(s_0) estimate
    (`reference_bug`, first token confident) it is not estimated, as the code's `base = None`."""
    cuts = cutpoints(probs, threshold=threshold, interval=interval)
    if cuts and cuts[0] == -1:
        return cuts, [True] * len(cuts)
    return [-1] + cuts, [not reference_bug] + [True] * len(cuts)


def chain_segments(bounds: list[list[int]], lengths: list[int], T: int, first_id: int = 0) -> torch.Tensor:
    """[B, T] long segment ids (-1 past each row's `lengths[i]` tokens): row i's segment k has id first_id + the
    number of segments of the rows before it + k."""
    out = torch.full((len(bounds), T), -1, dtype=torch.long)
    next_id = first_id
    for i, (row, n) in enumerate(zip(bounds, lengths)):
        ends = [b + 1 for b in row[1:]] + [n]
        for k, (start, end) in enumerate(zip([b + 1 for b in row], ends)):
            out[i, start:end] = next_id + k
        next_id += len(row)
    return out


def segment_runs(segment: torch.Tensor) -> tuple[torch.Tensor, list[list[int]]]:
    """(k [B, T] long: index of each token's segment within its row, -1 off segments; paths[i]: the row's segment
    ids in order). A segment must be one contiguous run of its row."""
    seg = segment.long()
    on = seg >= 0
    before = torch.cat([torch.full_like(seg[:, :1], -2), seg[:, :-1]], dim=1)
    start = on & (seg != before)
    k = torch.where(on, start.long().cumsum(-1) - 1, torch.full_like(seg, -1))
    paths = [seg[i][start[i]].tolist() for i in range(seg.shape[0])]
    for i, path in enumerate(paths):
        if len(set(path)) != len(path):
            again = next(x for x in path if path.count(x) > 1)
            raise ValueError(f"spo-segment: row {i} holds segment {again} in two separate runs; a segment is one "
                             "contiguous piece of the response")
    return k, paths


# ---------------------------------------------------------------------------------------------------- values

def chain_values(segment_values: torch.Tensor, paths: list[list[int]], R: torch.Tensor) -> torch.Tensor:
    """[B, S + 1] V(s_0), ..., V(s_{n_i - 1}) from `segment_values`, then R_i (the finished response); 0 after."""
    B, S = len(paths), max((len(p) for p in paths), default=0)
    if segment_values.shape[0] != B or segment_values.shape[1] < S:
        raise ValueError(f"segment_values must have shape [B={B}, S>={S}], got {tuple(segment_values.shape)}")
    V = torch.zeros(B, S + 1, dtype=torch.float64)
    for i, path in enumerate(paths):
        n = len(path)
        V[i, :n] = segment_values[i, :n].double().cpu()
        V[i, n] = float(R[i])
    return V


def tree_structure(paths: list[list[int]], group: list[int]) -> tuple[dict, dict]:
    """(parent {node: parent}, children {node: [child, ...]}) of the trees the rows' paths trace; the root of
    group g is the key ("root", g). A node must have one parent, and a path's last node (its leaf) no children."""
    parent, children = {}, {}
    for i, (path, g) in enumerate(zip(paths, group)):
        for j, node in enumerate(path):
            up = path[j - 1] if j else ("root", g)
            if parent.setdefault(node, up) != up:
                raise ValueError(f"spo-segment: segment {node} follows {parent[node]} in one row and {up} in row "
                                 f"{i}; rows sharing a segment must share everything before it (a tree)")
            kids = children.setdefault(up, [])
            if node not in kids:
                kids.append(node)
    for i, path in enumerate(paths):
        if path and path[-1] in children:
            raise ValueError(f"spo-segment: row {i} ends at segment {path[-1]}, which other rows continue; every row "
                             "must end at its own leaf")
    return parent, children


def tree_values(paths: list[list[int]], R: list[float], group: list[int], *, reference_bug=False) -> tuple[dict, dict]:
    """({node: V(node)}, children): a leaf's value is its row's reward; an inner node's is the mean reward of the
    leaves below it (paper), or the mean of its children's values (`reference_bug`: the code's `_construct_tree`)."""
    _, children = tree_structure(paths, group)
    leaf_rows: dict = {}
    for i, path in enumerate(paths):
        if path:
            if path[-1] in leaf_rows:
                raise ValueError(f"spo-segment: rows {leaf_rows[path[-1]]} and {i} end at the same leaf "
                                 f"{path[-1]}; a leaf is one row")
            leaf_rows[path[-1]] = i
    values: dict = {}
    if not reference_bug:
        below: dict = {}
        for path, g, r in zip(paths, group, R):
            for node in [("root", g), *path]:
                below.setdefault(node, []).append(r)
        values = {node: sum(rs) / len(rs) for node, rs in below.items()}
    else:
        def value(node):
            if node not in values:
                values[node] = (R[leaf_rows[node]] if node not in children
                                else sum(value(c) for c in children[node]) / len(children[node]))
            return values[node]

        for node in list(children) + list(leaf_rows):
            value(node)
    return values, children


def tree_path_values(paths, R, group, *, adv_method="rloo", reference_bug=False):
    """(V [B, S + 1]: V(root), V(n_1), ..., V(leaf) along each row, 0 after; scale [B, S]: the divisor of each
    segment's advantage, 1 ("rloo") or np.std of the parent's children's values + 1e-8 ("grpo"))."""
    values, children = tree_values(paths, R, group, reference_bug=reference_bug)
    B, S = len(paths), max((len(p) for p in paths), default=0)
    V, scale = torch.zeros(B, S + 1, dtype=torch.float64), torch.ones(B, S, dtype=torch.float64)
    for i, (path, g) in enumerate(zip(paths, group)):
        nodes = [("root", g), *path]
        V[i, :len(nodes)] = torch.tensor([values[n] for n in nodes], dtype=torch.float64)
        if adv_method == "grpo":
            for j, up in enumerate(nodes[:-1]):
                kids = torch.tensor([values[c] for c in children[up]], dtype=torch.float64)
                scale[i, j] = kids.std(unbiased=False) + 1e-8
    return V, scale


# ---------------------------------------------------------------------------------------------------- advantage

def segment_advantages(V: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """[B, S] A_k = (V(s_{k+1}) - V(s_k)) / scale_k; a segment whose start value is unknown (NaN) gets 0."""
    A = (V[:, 1:] - V[:, :-1]) / scale
    return torch.nan_to_num(A, nan=0.0)


def confident(old_logp: torch.Tensor, prob_threshold, reference_bug=False) -> torch.Tensor:
    """[B, T] bool: tokens the probability mask takes out, p >= threshold (the code's zeroing: p > threshold)."""
    if prob_threshold is None:
        return torch.zeros_like(old_logp, dtype=torch.bool)
    p = old_logp.detach().double().exp()
    return p > prob_threshold if reference_bug else p >= prob_threshold


def whiten_over(x: torch.Tensor, stats: torch.Tensor, eps=1e-8) -> torch.Tensor:
    """(x - mean) * rsqrt(var + eps), mean and Bessel var over `stats` (bool [B, T], >= 2 tokens), everywhere."""
    s = stats.to(x.dtype)
    return (x - ops.masked_mean(x, s)) * torch.rsqrt(ops.masked_var(x, s, unbiased=True) + eps)


@registry.advantage(
    "spo-segment", title=TITLE,
    summary="Segment advantages V(s_k) - V(s_{k-1}) from Monte Carlo values: at the chain's cutpoints (every 5th "
            "token with p < 0.9; reward_shaping:spo-segment) or at the nodes of a sampled tree (rollout:spo-segment); "
            "confident tokens (p >= 0.9) get no gradient and stay out of the whitening.",
    equation=r"A_{i,t} = V(s_k) - V(s_{k-1})\ \ (t \in \text{segment } k),\quad "
             r"A_{i,t} = 0 \text{ if } \pi_{old}(y_t) \ge 0.9,\quad \text{whiten over } \pi_{old} < 0.9",
    reads=("segment", "old_logp"), choices={"adv_method": ADV_METHODS})
def spo_segment(batch: RolloutBatch, *, adv_method="rloo", prob_threshold=0.9, whiten=True, drop_zero=False,
                reference_bug=False):
    """SPO advantage [B, T]. Reads `segment` (ids >= 0, -1 off segments), `old_logp`, `rewards` (+ summed
    `token_rewards`) R, `group`, `mask`, and `segment_values` when it is set (the chain's Monte Carlo values; without
    it the segments are a tree's nodes and their values come from the rows' rewards).

    adv_method: "rloo" (A = V(child) - V(parent)) or "grpo" (/ (np.std of the parent's children's values + 1e-8),
    tree only: a chain's boundary has no siblings). prob_threshold: p = exp(old_logp) at or above it gets A = 0 and
    stays out of the whitening (None: no probability mask). whiten: z-score over the batch's remaining tokens.
    drop_zero: zero-advantage segments stay out of the whitening, at exactly 0 (the tree's
    `only_adv_greater_than_zero`). reference_bug: the authors' code (module docstring).
    """
    if adv_method not in ADV_METHODS:
        raise ValueError(f"adv_method must be one of {ADV_METHODS}, got {adv_method!r}")
    check_threshold(prob_threshold)
    batch.require("segment", "old_logp")
    if batch.segment.shape != batch.mask.shape:
        raise ValueError(f"segment has shape {tuple(batch.segment.shape)} but mask has {tuple(batch.mask.shape)}")
    R = sequence_rewards(batch).cpu()
    k, paths = segment_runs(batch.segment.cpu())
    if batch.segment_values is not None:
        if adv_method == "grpo":
            raise ValueError("spo-segment: adv_method='grpo' divides by the spread of a tree node's children; a "
                             "chain's boundaries have none (use adv_method='rloo', or the tree rollout spo-segment)")
        V = chain_values(batch.segment_values, paths, R)
        scale = torch.ones(V.shape[0], V.shape[1] - 1, dtype=torch.float64)
    else:
        V, scale = tree_path_values(paths, R.tolist(), batch.group.cpu().tolist(), adv_method=adv_method,
                                    reference_bug=reference_bug)
    device = batch.mask.device
    on = ((k >= 0) & (batch.mask.cpu() > 0)).to(device)                           # [B, T] tokens of a segment
    raw = token_advantages(segment_advantages(V, scale), k).to(device) * on      # [B, T] A before the masks
    conf = confident(batch.old_logp, prob_threshold, reference_bug) & on
    dropped = on & (raw == 0) if drop_zero else torch.zeros_like(on)
    A = raw * ~conf
    if whiten:
        low = on if prob_threshold is None else on & (batch.old_logp.detach().double().exp() < prob_threshold)
        A = whiten_tokens(A, low & ~dropped, on & ~dropped)
    keep = on & ~dropped if reference_bug else on & ~dropped & ~conf
    return (A * keep).to(batch.mask.dtype)


def token_advantages(per_segment: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """[B, T] each token's segment advantage (k [B, T] its segment's index in the row, -1: none -> 0)."""
    if per_segment.shape[1] == 0:
        return torch.zeros(k.shape, dtype=per_segment.dtype)
    return per_segment.gather(1, k.clamp(min=0)) * (k >= 0)


def whiten_tokens(A: torch.Tensor, stats: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """A whitened with the statistics of the `stats` tokens, or of the `fallback` tokens when `stats` holds fewer
    than 2 (the code falls back when it holds none); unchanged when both do (one token has no variance)."""
    for where in (stats, fallback):
        if int(where.sum()) >= 2:
            return whiten_over(A, where)
    return A


# ------------------------------------------------------------------------------------------------- the chain's values

def response_lengths(batch: RolloutBatch) -> list[int]:
    """Each row's number of response tokens; a chain row is one turn: its mask is ones then zeros."""
    lengths = batch.mask.sum(-1).long().tolist()
    for i, n in enumerate(lengths):
        if not bool((batch.mask[i, :n] > 0).all()):
            raise ValueError(f"spo-segment: row {i}'s response has masked tokens inside it (observations, or a tree's "
                             "shared prefix); the chain cuts one-turn responses (plain `turns` rollout, one-turn task)")
    return lengths


def check_one_turn(batch: RolloutBatch, task) -> None:
    if task is None or batch.prompt_ids is None:
        raise ValueError("spo-segment's chain samples continuations: it needs the step context's task and engine "
                         "and the batch's prompt_ids (run it as a reward_shaping in a trainer)")
    if task.make_env().max_turns > 1 or (batch.turn is not None and bool((batch.turn > 0).any())):
        raise ValueError(f"spo-segment's chain continues one-turn responses; task {getattr(task, 'name', task)!r} is "
                         "multi-turn. Train it on a one-turn task (countdown, addition)")


def mc_values(ctx, requests: list[tuple], *, samples: int, temperature: float, top_p: float, stop, truncated_score,
              chunk: int = 256) -> list[float]:
    """V̂ of each request (prefix ids, response-prefix text, example, budget): the mean verifier score of `samples`
    continuations of the prefix sampled with `ctx.engine.generate_ids`; a continuation that hits its budget scores
    `truncated_score` when it is a number (the code's unfinished-response penalty), else the verifier's score."""
    out = []
    for start in range(0, len(requests), chunk):
        part = requests[start:start + chunk]
        gen = ctx.engine.generate_ids([r[0] for r in part for _ in range(samples)],
                                      max_new_tokens=[r[3] for r in part for _ in range(samples)],
                                      temperature=temperature, top_p=top_p, stop=stop)
        for j, (_, text, example, _) in enumerate(part):
            scores = []
            for m in range(j * samples, (j + 1) * samples):
                cut = bool(gen.truncated[m]) and truncated_score is not None
                scores.append(float(truncated_score) if cut else float(ctx.task.score(text + gen.texts[m], example)))
            out.append(sum(scores) / samples)
    return out


SPO_CHAIN_LOGS = {
    "spo/segments": ("SPO-chain: mean number of segments per response (the prompt plus every 5th cut before a token "
                     "with p < 0.9).",
                     "1 + (unsure tokens)/5 per response: grows with response length and falls as the policy "
                     "sharpens (fewer tokens with p < 0.9). About 1: nothing is cut, the advantage is the "
                     "trajectory's."),
    "spo/continuations": ("SPO-chain: Monte Carlo continuations sampled this step (K per distinct prefix).",
                          "Proportional to segments x K; the step's cost. Falls when rows share prefixes (identical "
                          "prefixes are sampled once)."),
    "spo/mc_value": ("SPO-chain: mean Monte Carlo value V(s) over the estimated segment boundaries.",
                     "Tracks reward/mean (V(s_0) is the prompt's success rate) and rises with it. Far above the "
                     "reward: continuations are scored more leniently than responses (truncated_score, stop strings)."),
}


@registry.reward_shaping(
    "spo-segment", title=TITLE,
    summary="SPO-chain's values: cut each response at every 5th token with p < 0.9 (and the prompt), and estimate "
            "V(s) at each cut by K continuations from the current policy; fills segment and segment_values.",
    equation=r"\hat V(s_k) = \frac1K \sum_{j=1}^K R(\text{prompt} \oplus y_{\le c_k} \oplus z_j),\ "
             r"z_j \sim \pi_\theta(\cdot \mid \text{prompt} \oplus y_{\le c_k})",
    reads=("old_logp",), provides=("segment", "segment_values"), logs=SPO_CHAIN_LOGS, choices={"v0": V0},
    check=check_chain)
def spo_chain_values(batch: RolloutBatch, ctx, *, cutpoint_interval=5, prob_threshold=0.9, mc_samples=9,
                     temperature=1.0, top_p=1.0, stop=None, v0="mc", truncated_score=None, reference_bug=False):
    """Reads `old_logp` (p_t = exp(old_logp), the trainer's old policy as the code's actor log-probs), `mask`,
    `prompt_ids`, `response_ids`, `group`, `rewards`; uses `ctx.engine`, `ctx.task`, `ctx.examples`. Rewards are
    unchanged.

    mc_samples K = 9 (the GSM8K chain configs). temperature / top_p / stop: how continuations are sampled (pass the
    run's; the code samples them as it samples responses, temperature 0.6 in its configs; stop None: the task
    environment's stop strings). Budget: what the row's response left of the run's `max_new_tokens`. v0: "mc"
    (K continuations of the prompt) or "group" (the prompt group's mean reward, no sampling). truncated_score: None
    scores a cut continuation like the rollout scores a cut response (the verifier, as is); a number replaces it
    (the code's unfinished-response penalty, 0.0 in its configs). Identical prefixes are sampled once per step.
    Logs `spo/segments` (mean segments per row), `spo/continuations` (sampled this step), `spo/mc_value` (mean V̂).
    """
    check_chain(cutpoint_interval=cutpoint_interval, top_p=top_p)
    if mc_samples < 1:
        raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
    if v0 not in V0:
        raise ValueError(f"v0 must be one of {V0}, got {v0!r}")
    if prob_threshold is None:
        raise ValueError("spo-segment's chain cuts at tokens with p < prob_threshold; give a threshold (0.9)")
    check_threshold(prob_threshold)
    batch.require("old_logp", "rewards")
    check_one_turn(batch, ctx.task)
    lengths = response_lengths(batch)
    probs = (batch.old_logp.detach().double().exp() * batch.mask).cpu()
    plans = [chain_boundaries(probs[i, :n].tolist(), threshold=prob_threshold, interval=cutpoint_interval,
                              reference_bug=reference_bug) for i, n in enumerate(lengths)]
    S = max(len(bounds) for bounds, _ in plans)
    values = torch.full((batch.size, S), math.nan, dtype=torch.float64)
    group_mean = group_means(sequence_rewards(batch).cpu(), batch.group.cpu())
    prompts = [ids[keep > 0].tolist() for ids, keep in zip(batch.prompt_ids.cpu(), batch.prompt_mask.cpu())]
    response = batch.response_ids.cpu()
    tok, unique, where = ctx.engine.tokenizer, {}, []
    for i, (bounds, estimated) in enumerate(plans):
        example = ctx.examples[int(batch.group[i])]
        for k, (b, needed) in enumerate(zip(bounds, estimated)):
            if not needed:
                continue
            if b == -1 and v0 == "group":
                values[i, k] = group_mean[i]
                continue
            prefix = prompts[i] + response[i, :b + 1].tolist()
            key = (tuple(prefix), int(batch.group[i]))
            if key not in unique:
                unique[key] = (prefix, tok.decode(response[i, :b + 1].tolist(), skip_special_tokens=True), example,
                               max(1, ctx.max_new_tokens - (b + 1)))
            where.append((i, k, key))
    stop = list(stop) if stop is not None else (list(ctx.task.make_env().stop) or None)
    estimates = dict(zip(unique, mc_values(ctx, list(unique.values()), samples=mc_samples, temperature=temperature,
                                           top_p=top_p, stop=stop, truncated_score=truncated_score)))
    for i, k, key in where:
        values[i, k] = estimates[key]
    batch.segment = chain_segments([bounds for bounds, _ in plans], lengths, batch.mask.shape[1]).to(batch.mask.device)
    batch.segment_values = values.to(batch.mask.device)
    ctx.metrics["spo/segments"] = sum(len(b) for b, _ in plans) / batch.size
    ctx.metrics["spo/continuations"] = float(len(unique) * mc_samples)
    known = values[~values.isnan()]
    ctx.metrics["spo/mc_value"] = float(known.mean()) if known.numel() else 0.0
    return batch


def group_means(R: torch.Tensor, group: torch.Tensor) -> list[float]:
    """[B] each row's prompt-group mean of R."""
    return group_stats(R.double(), group)[0].tolist()


# ---------------------------------------------------------------------------------------------------- the loss mask

SPO_MASK_LOGS = {
    "filtered_frac/spo-segment": ("Share of rollouts left with no token after SPO's probability mask (every token had "
                                  "p >= 0.9), or with drop_zero no non-zero-advantage token.",
                                  "Near 0; rises as the policy grows confident (short, certain answers). High: most "
                                  "responses give no gradient, raise prob_threshold or stop training."),
}


@registry.token_mask(
    "spo-segment", title=TITLE,
    summary="SPO's probability mask: the loss trains only on tokens the old policy was unsure of (p < 0.9); "
            "optionally also drops zero-advantage segments (the tree code's edge filter).",
    equation=r"m'_{i,t} = m_{i,t}\,[\pi_{old}(y_t) < 0.9]\ (\cdot\,[A_{i,t} \ne 0])",
    reads=("old_logp", "advantages"), logs=SPO_MASK_LOGS)
def spo_prob_mask(batch: RolloutBatch, *, prob_threshold=0.9, drop_zero=False) -> torch.Tensor:
    """Reads `mask`, `old_logp`, and with drop_zero `advantages`; returns mask * [exp(old_logp) < prob_threshold]
    (the code's `use_prob_mask` in ppo_trainer.py: the PPO loss and its token count skip confident tokens).
    drop_zero: also drop tokens whose advantage is exactly 0 (pair it with `advantage:spo-segment`'s drop_zero,
    which leaves dropped segments at exactly 0: the tree code drops those edges from training)."""
    check_threshold(prob_threshold)
    batch.require("old_logp")
    keep = batch.mask > 0
    if prob_threshold is not None:
        keep = keep & (batch.old_logp.detach().double().exp() < prob_threshold)
    if drop_zero:
        batch.require("advantages")
        keep = keep & (batch.advantages != 0)
    return keep.to(batch.mask.dtype)
