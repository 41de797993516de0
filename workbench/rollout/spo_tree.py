"""SPO-tree's rollout: per prompt a tree of sampled segments, one batch row per root-to-leaf path.

Depth d (0-based) gives every open node `branch_factors[d]` children, each M = `segment_tokens` tokens sampled from
the current policy after the node's prefix (token ids, never re-tokenized); the last depth gets what is left of
the run's `max_new_tokens` (the authors' last depth is unbounded, up to the context). A child that ends (EOS or a
stop string) before its budget is a leaf, so is every child of the last depth; a leaf is scored by the task's
environment on the whole path's text, as the plain rollout scores a response. The node values and advantages are
`advantage:spo-segment`'s (module workbench/advantages/spo.py), from the rows' rewards and segment ids.

Rows. Row = one leaf (depth-first order, children in sampling order): response = the path's segments, `segment`
[B, T] = each token's node id (ids >= 0, unique in the batch, increasing from root to leaf; -1 on padding), reward
= the leaf's score, `group` = the prompt. A prefix shared by several leaves is repeated in each of their rows, so
every row is an ordinary prompt + response the trainer scores in one forward pass. How the loss counts it
(`shared`): "once" (default) trains each node's tokens in one row only, the first row through the node (mask 0 on
its copies in the later rows, where they only condition): every edge of the tree is trained once, as the authors'
`extract_edges_from_tree` makes one training episode per edge; "per_path" trains every copy, so a node weighs as
many times as it has leaves below it.

Defaults: branch factors 6-6-6 (`configs/episode_generators/branch_factor_666.jsonnet`; also 4-4-4, 4-5-6, 8-8-8),
M = 30 tokens (the GSM8K tree configs; 600 for long chain-of-thought MATH). The authors also replay edges from
earlier iterations (an on-policy buffer, at most 32 edges per question): not here, a step trains on its own tree.
The tree fixes a group's size (its number of leaves, at most the product of the branch factors): `group_size` is
not used. One-turn tasks only (a segment is a piece of one response).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.advantages.spo import TITLE
from workbench.batch import RolloutBatch, left_pad
from workbench.episodes import episode_seed
from workbench.rollout.engine import plain_text
from workbench.rollout.turns import merged_stop, prompt_of

SHARED = ("once", "per_path")
TREE_PROVIDES = ("response_ids", "mask", "segment", "mu_logp", "rewards", "truncated", "completions", "prompts",
                 "prompt_ids", "prompt_mask", "group")


@dataclass
class Node:
    """A sampled segment: its tokens, what the engine reported, and where it sits."""

    id: int
    parent: Node | None
    depth: int
    ids: list[int] = field(default_factory=list)
    mu_logp: list[float] = field(default_factory=list)
    text: str = ""
    ended: bool = False                      # EOS or a stop string inside its budget
    children: list[Node] = field(default_factory=list)

    def path(self) -> list[Node]:
        """The segments from the root's first child down to this node (the root itself has no tokens)."""
        out, node = [], self
        while node.parent is not None:
            out.append(node)
            node = node.parent
        return out[::-1]

    def used(self) -> int:
        return sum(len(n.ids) for n in self.path())


def check_shape(*, branch_factors=(6, 6, 6), segment_tokens=30, **_) -> tuple[int, ...]:
    """The branch factors as a tuple; refuses a tree that has no shape (checked when the recipe is built)."""
    factors = tuple(branch_factors)
    if not factors or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in factors):
        raise ValueError(f"spo-segment: branch_factors must be a non-empty list of ints >= 1, got {branch_factors!r}")
    if segment_tokens < 1:
        raise ValueError(f"spo-segment: segment_tokens must be >= 1, got {segment_tokens}")
    return factors


def check_tree(branch_factors, segment_tokens: int, max_new_tokens: int) -> tuple[int, ...]:
    factors = check_shape(branch_factors=branch_factors, segment_tokens=segment_tokens)
    if segment_tokens * (len(factors) - 1) >= max_new_tokens:
        raise ValueError(f"spo-segment: {len(factors) - 1} segments of {segment_tokens} tokens leave nothing of "
                         f"max_new_tokens={max_new_tokens} for the last depth; lower segment_tokens or use fewer "
                         "depths")
    return factors


def grow(engine, roots: list[Node], prompts: list[list[int]], factors, *, segment_tokens: int, sampling, stop,
         next_id: int) -> list[Node]:
    """Expand the trees depth by depth (one engine call per depth); returns every node created, in creation order."""
    created, frontier = [], [(root, g) for g, root in enumerate(roots)]
    for depth, factor in enumerate(factors):
        last = depth == len(factors) - 1
        asks = [(node, g) for node, g in frontier for _ in range(factor)]
        if not asks:
            break
        left = [sampling.max_new_tokens - node.used() for node, _ in asks]
        budgets = [room if last else min(segment_tokens, room) for room in left]
        gen = engine.generate_ids([prompts[g] + [t for n in node.path() for t in n.ids] for node, g in asks],
                                  max_new_tokens=budgets, temperature=sampling.temperature, top_p=sampling.top_p,
                                  greedy=sampling.greedy, stop=stop)
        frontier = []
        for k, (node, g) in enumerate(asks):
            keep = gen.mask[k] > 0
            child = Node(next_id, node, depth + 1, gen.response_ids[k][keep].tolist(),
                         gen.mu_logp[k][keep].tolist(), gen.texts[k], ended=not bool(gen.truncated[k]))
            next_id += 1
            node.children.append(child)
            created.append(child)
            if not (child.ended or last or budgets[k] == left[k]):  # cut at M with budget left: grow it further
                frontier.append((child, g))
    return created


def leaves(root: Node) -> list[Node]:
    """The leaves under `root`, depth first, children in sampling order."""
    if not root.children:
        return [root]
    return [leaf for child in root.children for leaf in leaves(child)]


def leaf_score(task, example, index: int, text: str) -> float:
    """The environment's reward for the path's text (a one-turn episode: reset, one step)."""
    env = task.make_env()
    env.reset(example, episode_seed(example, index))
    _, reward, _, _ = env.step(text)
    return float(reward)


def tree_rows(roots: list[Node], examples, task, *, shared: str) -> list[dict]:
    """One dict per leaf: its group, tokens, mask, segment ids, behaviour log-probs, text, reward, truncation."""
    rows, owned = [], set()
    for g, (root, example) in enumerate(zip(roots, examples)):
        for index, leaf in enumerate(leaves(root)):
            ids, mask, seg, mu = [], [], [], []
            for node in leaf.path():
                train = shared == "per_path" or node.id not in owned
                owned.add(node.id)
                ids += node.ids
                mask += [float(train)] * len(node.ids)
                seg += [node.id] * len(node.ids)
                mu += node.mu_logp if train else [0.0] * len(node.ids)
            text = "".join(node.text for node in leaf.path())
            rows.append({"group": g, "ids": ids, "mask": mask, "segment": seg, "mu_logp": mu, "text": text,
                         "reward": leaf_score(task, example, index, text), "truncated": not leaf.ended})
    return rows


def rows_batch(rows: list[dict], prompts: list[list[int]], prompt_texts: list[str], pad_id: int, device
               ) -> RolloutBatch:
    B, T = len(rows), max(max(len(r["ids"]) for r in rows), 1)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    mask, mu = torch.zeros(B, T), torch.zeros(B, T)
    segment = torch.full((B, T), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["ids"])
        ids[i, :n], mask[i, :n] = torch.tensor(r["ids"], dtype=torch.long), torch.tensor(r["mask"])
        segment[i, :n], mu[i, :n] = torch.tensor(r["segment"], dtype=torch.long), torch.tensor(r["mu_logp"])
    group = [r["group"] for r in rows]
    prompt_ids, prompt_mask = left_pad([prompts[g] for g in group], pad_id, device)
    return RolloutBatch(
        response_ids=ids.to(device), mask=mask.to(device), group=torch.tensor(group, device=device),
        rewards=torch.tensor([r["reward"] for r in rows], dtype=torch.float32, device=device),
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, mu_logp=mu.to(device), segment=segment.to(device),
        truncated=torch.tensor([r["truncated"] for r in rows], device=device),
        completions=[r["text"] for r in rows], prompts=[prompt_texts[g] for g in group])


@registry.rollout(
    "spo-segment", title=TITLE,
    summary="SPO-tree: per prompt a tree of sampled segments (branch factors 6-6-6, M tokens a segment, the last "
            "depth unbounded); one row per root-to-leaf path, tokens tagged with their node in `segment`.",
    equation=r"\text{children of } n: y^{(d+1)}_j \sim \pi_\theta(\cdot \mid x \oplus \text{path}(n)),\ "
             r"j = 1..b_d,\ |y^{(d+1)}_j| \le M",
    reads=(), provides=TREE_PROVIDES, check=check_shape,
    choices={"shared": SHARED})
def spo_tree(engine, task, examples, *, group_size: int, sampling, ctx=None, branch_factors=(6, 6, 6), segment_tokens=30,
             shared="once"):
    """Trees for `examples` as one RolloutBatch (module docstring); `group_size` is not used (the tree sets it)."""
    if shared not in SHARED:
        raise ValueError(f"spo-segment: shared must be one of {SHARED}, got {shared!r}")
    if not examples:
        raise ValueError("spo-segment: the tree rollout needs at least one example")
    factors = check_tree(branch_factors, segment_tokens, sampling.max_new_tokens)
    env = task.make_env()
    if env.max_turns > 1:
        raise ValueError(f"spo-segment's tree cuts one response into segments; task {getattr(task, 'name', task)!r} "
                         "is multi-turn. Train it on a one-turn task (countdown, addition)")
    opened = [env.reset(example, episode_seed(example, 0))[0] for example in examples]
    ids, keep = engine.encode([prompt_of(messages) for messages in opened], 1)
    prompts = [row[m > 0].tolist() for row, m in zip(ids.cpu(), keep.cpu())]
    roots = [Node(-1, None, 0) for _ in examples]
    grow(engine, roots, prompts, factors, segment_tokens=segment_tokens, sampling=sampling,
         stop=merged_stop(sampling, [env]), next_id=0)
    rows = tree_rows(roots, examples, task, shared=shared)
    return rows_batch(rows, prompts, [plain_text(m) for m in opened], engine.tokenizer.pad_token_id, ids.device)
