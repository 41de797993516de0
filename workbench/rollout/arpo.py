"""ARPO's entropy-triggered branching rollout (`arpo-agentic`): trajectories fork after tool responses where the
policy's uncertainty rose, until each prompt holds exactly n = group_size rows.

    n_init  = initial_rollouts global rollouts per prompt (default n // 2: 8 of 16, 6 of 12 in the scripts)
    H_s     = -sum_{t < min(20, |a_s|)} sum_{v in E_t} p_v log p_v / log|V|      entropy of action s
              (E_t: the top-10 tokens of step t plus the sampled one, vLLM's `logprobs=10` dict; summed, not averaged)
    dH      = H_s - H_init                                  H_init: the trajectory's first measured entropy
    after each tool response, while the prompt holds fewer than n rows, every trajectory still running draws
    u ~ U(0, 1) for each of its beam_size - 1 branch slots:
        branch  iff  clip(u - w dH, 0, 1) <= tau,           P(branch) = clip(tau + w dH, 0, 1)  (1 when tau = 1)
    a branch copies the trajectory (token ids, episode, the environment by `Env.copy()`) and samples on by itself;
    a prompt none of whose trajectories is running any more, with fewer than n rows, starts one fresh global rollout
    per round (the refill), so every prompt ends with exactly n rows.

Rows are `turns`' layout (prompt | action_0 obs_0 action_1 ... | pad), a prompt's rows in creation order (its initial
rollouts, then branches and refills as they were made), plus `parent` [B] (the row a branch was copied from, as its
index among its group's rows, -1 for a root) and `branch_turn` [B] (the first turn the row sampled itself: its earlier
turns are its parent's tokens, ids, mask and turn ids alike; 0 for a root). A shared prefix is thus trained once per
copy ("soft" attribution, plain GRPO over every row, the only form in public code): its gradient is the sum of its
copies'. `advantage:arpo-agentic` is the catalog's "hard" attribution (unverified): each shared-prefix token gets the
mean advantage of the rows sharing it. Since every copy stays trained, the two give the same gradient wherever no
clip is active (the surrogate is linear in A there); they differ when copies with advantages of both signs are
clipped.

Reference: dongguanting/ARPO @ e257337d1f105ba685057cb662c75e509d1c7b34 (also RUC-NLPIR/ARPO @ a95cd08),
ARPO/verl_arpo_entropy/verl/workers/rollout/vllm_rollout/vllm_rollout_with_tools.py, class vLLMRolloutWithTools:
`__init__` L83-86 (initial_rollouts, beam_size, branch_probability, entropy_weight; code defaults n, 1, 0.5, 0.5),
L114 (logprobs = 10); `_calc_entropy` L172-177; `generate_sequences`: L239-260 (initial rollouts), L283-305 (entropy
monitor), L434-488 (branching), L490-508 (refill of prompts with no active rollout), L536-555 (n rows per prompt).
Scripts: ARPO/scripts/ARPO_7B_Reasoning_1node.sh (n 16, initial 8, beam 2, tau 0.5, w 0.2; the 8B / 14B deep-search
scripts: w 0.2 too). The transcription is tests/anchors/formulas_arpo.py.

Where this differs from the reference, and why:
- The entropy that decides a branch after tool response s is that of action s (the segment that ended in the tool
  call), as in the code: a trajectory's H is measured on every segment it generates, and the branch test runs
  after the tool response that segment asked for. So a root's first test has dH = 0 (P = tau). The paper's wording
  (sample k tokens after the response, then decide) would need a look-ahead sample the code does not take.
- H_init is kept per trajectory and per rollout call. The reference keys `self.initial_entropy_dict` by rollout index
  and never clears it, so from the second training step on H_init of index i is the entropy index i had in the
  very first batch; we read it as a bug. A branch's H_init is its own first measurement (dH = 0 at its first tool
  response), not its parent's, as in the code (a new index).
- Entropies come from the HF sampler's scores, the distribution sampled from (after temperature and top-p). Which
  distribution vLLM 0.8.4 logs depends on its engine version (raw logits in V1, processed ones in V0); the scripts
  sample at temperature 1, top-p 1, where the two agree. The vLLM engine does not report top-k log-probs here: the
  rollout refuses it (engine='hf').
- u comes from the step's seeded stream (`ctx.rng()`), not Python's global `random`, so runs replay exactly.
- The environment decides when an episode ends (`env.step`), a turn ends at the env's stop strings or EOS, and a turn
  that hits its budget ends the episode truncated (`turns`' rules); the reference ends a trajectory on a tool call it
  cannot parse, resumes one cut by the per-call token budget, and caps tool calls at `call_limit` (here max_turns).
- The reference then duplicates the last row of a prompt that ended with fewer than n (L545-550); its loop only stops
  once every prompt has n rows, and so does ours, so that branch never runs.
- Greedy sampling (evaluation, baselines) samples group_size plain rollouts, no branch, no entropy: the reference's
  do_sample=False / validate path sets beam_size 1 too (and one row per prompt, where our batch keeps its groups).
"""
from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field, replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch, left_pad
from workbench.envs.base import Env
from workbench.episodes import episode_seed
from workbench.rollout.turns import TURNS_PROVIDES, Episode, Played, episode_batch, merged_stop, observation_ids, \
    prompt_of

ARPO_TITLE = "Agentic Reinforced Policy Optimization"
ENTROPY_TOKENS = 20  # L291: the first min(20, len) generated tokens of a segment
LOGPROBS = 10        # L114: vLLM's logprobs=10, the top-10 entries (and the sampled token's) per token
ARPO_PROVIDES = TURNS_PROVIDES + ("parent", "branch_turn")

ARPO_LOGS = {
    "arpo/branches_per_prompt": ("Entropy branching: rows per prompt that are branches copied from another row "
                                 "(the rest are global rollouts).",
                                 "Between 0 and group_size - initial_rollouts; 0 for long means no trajectory reaches "
                                 "a tool response (no tool calls) or the entropy never rises."),
    "arpo/branch_frac": ("Entropy branching: share of the batch's rows that are branches.",
                         "Below 1 - initial_rollouts / group_size (0.5 by default); near 0 means the budget is "
                         "refilled by fresh global rollouts instead."),
    "arpo/branch_dH": ("Entropy branching: mean entropy change dH = H - H_init at the tool responses where a branch "
                       "was taken (None when none was).",
                       "Near 0 or above; strongly positive when branching is driven by rising uncertainty after tool "
                       "responses."),
    "arpo/tool_calls": ("Entropy branching: tool responses per row (observations appended), branches counting their "
                        "copied prefix.",
                        "Grows as the policy learns to call the tool; 0 means branching never triggers."),
}


# ----------------------------------------------------------------------------- entropy and the branch rule

def calc_entropy(topk_logp: torch.Tensor, mask: torch.Tensor, tokens: int = ENTROPY_TOKENS) -> torch.Tensor:
    """[B] -sum p log p over the logged entries (topk_logp [B, T, E], -inf: no entry) of each row's first
    min(tokens, length) tokens (mask [B, T], a prefix): summed over entries and tokens, as `_calc_entropy` (L172)."""
    first = (mask > 0) & (torch.arange(mask.shape[1], device=mask.device) < tokens)[None]  # [B, T]
    logp = topk_logp.double()
    p_logp = torch.where(torch.isfinite(logp), logp.exp() * logp, torch.zeros_like(logp))  # [B, T, E]: 0 log 0 = 0
    return -(p_logp.sum(-1) * first).sum(-1)


def segment_entropy(gen, tokens: int, vocab_size: int) -> list[float]:
    """H of each generated segment: `calc_entropy` / log|V| (L284-300; |V| = the tokenizer's vocabulary)."""
    return (calc_entropy(gen.topk_logp, gen.mask, tokens) / math.log(vocab_size)).tolist()


def branch_probability(delta_h: float, tau: float, w: float) -> float:
    """P(branch) for u ~ U(0, 1): clip(tau + w dH, 0, 1), and 1 when tau = 1 (clip(., 0, 1) <= 1 always holds)."""
    return 1.0 if tau >= 1 else min(1.0, max(0.0, tau + w * delta_h))


def branches(u: float, delta_h: float, tau: float, w: float) -> bool:
    """The reference's test (L473-477): prob = clip(u - w dH, 0, 1); no branch when prob > tau."""
    return min(1.0, max(0.0, u - w * delta_h)) <= tau


# ----------------------------------------------------------------------------- trajectories

@dataclass
class Trace:
    """A row in the making: its episode, its environment, and where it sits in its prompt's tree."""

    group: int
    index: int                  # its place among its group's rows (creation order)
    prompt: list[int]           # its prompt's token ids (unpadded), shared with its branches, never changed
    opened: list[dict]          # the messages that opened its episode
    env: Env
    state: dict                 # info of the state its next action is taken from
    horizon: int                # actions it may take
    episode: Episode = field(default_factory=Episode)
    parent: int = -1            # index of the row it was copied from (-1: a root)
    branch_turn: int = 0        # its first own turn: earlier turns are its parent's
    entropies: list[float] = field(default_factory=list)  # H of each action it sampled itself; [0] is H_init
    streak: int = 0             # consecutive tool responses at which its path branched (AEPO's penalty)
    calls: int = 0              # tool responses appended (observations)


def open_roots(engine, task, examples, wanted: list[tuple[int, int]], max_turns) -> list[Trace]:
    """Fresh global rollouts: (group, index) -> an environment reset on the example with `turns`' seed for that index
    (the first rows of a group get the seeds the plain rollout gives them), its prompt encoded once per call."""
    if not wanted:
        return []
    envs = [task.make_env() for _ in wanted]
    opened = [env.reset(examples[g], episode_seed(examples[g], j)) for env, (g, j) in zip(envs, wanted)]
    ids, keep = engine.encode([prompt_of(messages) for messages, _ in opened], 1)
    prompts = [row[m > 0].tolist() for row, m in zip(ids.cpu(), keep.cpu())]
    return [Trace(g, j, prompt, messages, env, info, max_turns or env.max_turns)
            for (g, j), prompt, (messages, info), env in zip(wanted, prompts, opened, envs)]


def branch(trace: Trace, index: int) -> Trace:
    """A copy of `trace` mid-episode that samples on by itself: tokens, episode and environment state copied."""
    return replace(trace, index=index, env=trace.env.copy(), state=copy.deepcopy(trace.state),
                   episode=copy.deepcopy(trace.episode), parent=trace.index, branch_turn=trace.episode.steps,
                   entropies=[], streak=trace.streak + 1)


def take_turn(trace: Trace, ids: list[int], text: str, mu_logp: list[float], truncated: bool, tok,
              total: int | None) -> bool:
    """`play`'s turn for one row: append the action, step the environment, append its observation. True when the
    episode goes on (an observation was appended: a tool response); the same ending rules as `play`."""
    ep = trace.episode
    ep.act(ids, text, mu_logp)
    observations, reward, done, info = trace.env.step(text)
    ep.record(reward, trace.state, info)
    trace.state = info
    if truncated:
        ep.truncated = True
        return False
    if done or ep.steps >= trace.horizon:
        return False
    obs = observation_ids(tok, observations, after_eos=ids[-1] == tok.eos_token_id)
    if total is not None and total - len(trace.prompt) - len(ep.ids) - len(obs) < 1:
        ep.truncated = True  # no room for another action token
        return False
    ep.observe(obs, tok.decode(obs, skip_special_tokens=True))
    trace.calls += 1
    return True


def budget(trace: Trace, max_new_tokens: int, total: int | None) -> int:
    if total is None:
        return max_new_tokens
    room = total - len(trace.prompt) - len(trace.episode.ids)
    if room < 1:  # only a fresh root can get here (a running row kept room when its observation was appended)
        raise ValueError(f"a prompt of {len(trace.prompt)} tokens leaves no room under max_total_tokens={total}")
    return min(max_new_tokens, room)


# ----------------------------------------------------------------------------- the tree, round by round

@dataclass
class Forest:
    """Every prompt's rows (creation order) and the dH of every branch taken."""

    rows: list[list[Trace]]
    deltas: list[float]


def branch_round(running: list[Trace], rows: list[list[Trace]], group_size: int, beam_size: int, decide, rng,
                 deltas: list[float]) -> list[Trace]:
    """L442-488: per prompt (in the order its first running row appears), each running row in order takes up to
    beam_size - 1 branches while the prompt has fewer than n rows, one u ~ U(0, 1) per slot; `decide(trace, dH, u)`.
    A row that branched extends its streak, any other running row resets it."""
    by_group: dict[int, list[Trace]] = {}
    for t in running:
        by_group.setdefault(t.group, []).append(t)
    born, branched = [], set()
    for g, sources in by_group.items():
        remaining = group_size - len(rows[g])
        if remaining <= 0:
            continue
        created = 0
        for src in sources:
            slots = min(beam_size - 1, remaining - created)
            if slots <= 0:
                break
            for _ in range(slots):
                delta = src.entropies[-1] - src.entropies[0]
                if not decide(src, delta, rng.random()):
                    continue
                child = branch(src, len(rows[g]))
                rows[g].append(child)
                born.append(child)
                deltas.append(delta)
                branched.add(id(src))
                created += 1
            if created >= remaining:
                break
    for t in running:
        t.streak = t.streak + 1 if id(t) in branched else 0
    return born


def grow(engine, task, examples, *, group_size: int, sampling, initial: list[int], beam_size: int, decide, rng,
         entropy_tokens: int = ENTROPY_TOKENS, logprobs: int = LOGPROBS, max_turns=None,
         max_total_tokens=None) -> Forest:
    """Sample every prompt's rows: `initial[g]` global rollouts, branches (`branch_round`), refills, until each
    prompt has `group_size` rows and none is running. One engine call per round over every running row."""
    tok = engine.tokenizer
    vocab = len(tok.get_vocab())
    total = max_total_tokens if max_total_tokens is not None else getattr(engine, "max_length", None)
    rows: list[list[Trace]] = [[] for _ in examples]
    active = open_roots(engine, task, examples, [(g, j) for g, n in enumerate(initial) for j in range(n)], max_turns)
    for t in active:
        rows[t.group].append(t)
    stop = merged_stop(sampling, [t.env for t in active])
    deltas: list[float] = []
    while active:
        gen = engine.generate_ids([t.prompt + t.episode.ids for t in active],
                                  max_new_tokens=[budget(t, sampling.max_new_tokens, total) for t in active],
                                  temperature=sampling.temperature, top_p=sampling.top_p, greedy=sampling.greedy,
                                  stop=stop, topk=logprobs)
        entropy = segment_entropy(gen, entropy_tokens, vocab) if logprobs else [0.0] * len(active)  # greedy: unused
        response, mu_logp, truncated = gen.response_ids.tolist(), gen.mu_logp.tolist(), gen.truncated.tolist()
        lengths = gen.mask.sum(-1).long().tolist()
        running = []
        for k, t in enumerate(active):
            t.entropies.append(entropy[k])
            n = lengths[k]
            if take_turn(t, response[k][:n], gen.texts[k], mu_logp[k][:n], truncated[k], tok, total):
                running.append(t)
        born = branch_round(running, rows, group_size, beam_size, decide, rng, deltas)
        # L490-508: a prompt with no running row and fewer than n rows starts one fresh global rollout
        busy = {t.group for t in running}
        refills = [(g, len(rows[g])) for g in range(len(examples)) if g not in busy and len(rows[g]) < group_size]
        fresh = open_roots(engine, task, examples, refills, max_turns)
        for t in fresh:
            rows[t.group].append(t)
        active = running + born + fresh
    return Forest(rows, deltas)


def forest_batch(forest: Forest, group_size: int, pad_id: int, device=None) -> RolloutBatch:
    """Every prompt's rows, in creation order, as `turns`' RolloutBatch plus `parent` and `branch_turn` [B]."""
    traces = [t for row in forest.rows for t in row]
    prompt_ids, prompt_mask = left_pad([t.prompt for t in traces], pad_id, device)
    batch = episode_batch(Played([t.episode for t in traces], [t.opened for t in traces], prompt_ids, prompt_mask),
                          group_size, pad_id)
    batch.parent = torch.tensor([t.parent for t in traces], dtype=torch.long)
    batch.branch_turn = torch.tensor([t.branch_turn for t in traces], dtype=torch.long)
    return batch


def forest_metrics(forest: Forest) -> dict:
    traces = [t for row in forest.rows for t in row]
    n_branches = sum(t.parent >= 0 for t in traces)
    return {"arpo/branches_per_prompt": n_branches / len(forest.rows), "arpo/branch_frac": n_branches / len(traces),
            "arpo/branch_dH": sum(forest.deltas) / len(forest.deltas) if forest.deltas else float("nan"),
            "arpo/tool_calls": sum(t.calls for t in traces) / len(traces)}


# ----------------------------------------------------------------------------- checks and the registered rollout

def check_arpo(*, initial_rollouts=None, beam_size=2, branch_probability=0.5, entropy_weight=0.5,
               entropy_tokens=ENTROPY_TOKENS, logprobs=LOGPROBS, group_size=None, who="arpo-agentic",
               count="initial_rollouts", **_) -> None:
    """Settings the rollout cannot take, each named with its fix (checked when the recipe is built, with the run's
    group_size when it is known)."""
    def whole(x):
        return isinstance(x, int) and not isinstance(x, bool)

    if initial_rollouts is not None:
        if not whole(initial_rollouts) or initial_rollouts < 1:
            raise ValueError(f"{who}: {count} must be an int >= 1 (or null for group_size // 2), got "
                             f"{initial_rollouts!r}")
        if group_size is not None and initial_rollouts > group_size:
            raise ValueError(f"{who}: {count}={initial_rollouts} exceeds group_size={group_size}, the rows each "
                             f"prompt gets; set {count} <= group_size")
    if not whole(beam_size) or beam_size < 1:
        raise ValueError(f"{who}: beam_size must be an int >= 1 (1 + branches a row may take at a tool response), got "
                         f"{beam_size!r}")
    if not 0 <= branch_probability <= 1:
        raise ValueError(f"{who}: branch_probability (tau) must be in [0, 1], got {branch_probability}")
    if not entropy_weight >= 0:
        raise ValueError(f"{who}: entropy_weight (w) must be >= 0 (a negative weight branches where entropy falls), "
                         f"got {entropy_weight}")
    for name, value in (("entropy_tokens", entropy_tokens), ("logprobs", logprobs)):
        if not whole(value) or value < 1:
            raise ValueError(f"{who}: {name} must be an int >= 1, got {value!r}")


def check_engine_and_env(engine, task, who: str) -> None:
    """The rollout's needs the recipe check cannot see: an engine that reports top-k log-probs, copyable envs."""
    if not getattr(engine, "reports_topk", False):
        raise ValueError(f"{who} measures entropy from the engine's top-k log-probs, which {type(engine).__name__} "
                         "does not report; use the HF engine (engine='hf')")
    env = task.make_env()
    if not getattr(env, "copyable", False):
        raise ValueError(f"{who} branches copy the environment mid-episode (Env.copy()), and {type(env).__name__} "
                         "cannot copy its state; train on a task whose environments can (calculator, search, "
                         "gridworld)")


def step_rng(ctx) -> random.Random:
    """The u ~ U(0, 1) stream: the step's seeded stream of this component (a fixed one without a pipeline)."""
    return ctx.rng(ctx.round) if ctx is not None else random.Random(0)


@registry.rollout(
    "arpo-agentic", title=ARPO_TITLE,
    summary="Per prompt n/2 global rollouts; after each tool response a trajectory branches (copying tokens and "
            "environment) with P = clip(tau + w dH, 0, 1), dH = H - H_init of the top-10 entropy of its first 20 "
            "tokens, until the prompt has n rows; fresh rollouts fill what is left.",
    equation=r"\text{branch iff } \mathrm{clip}(u - w\,\Delta H, 0, 1) \le \tau,\ u \sim U(0, 1),\quad "
             r"\Delta H = H_s - H_{init},\ "
             r"H = -\tfrac{1}{\log|V|}\sum_{t<20}\sum_{v \in \mathrm{top}_{10}} p_v \log p_v",
    reads=(), provides=ARPO_PROVIDES, needs=("multi_turn", "env_copy", "topk_logprobs"), logs=ARPO_LOGS, check=check_arpo)
def arpo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, initial_rollouts=None, beam_size=2,
                 branch_probability=0.5, entropy_weight=0.5, entropy_tokens=ENTROPY_TOKENS, logprobs=LOGPROBS,
                 max_turns=None, max_total_tokens=None) -> RolloutBatch:
    """`group_size` rows per example (module docstring): initial_rollouts global rollouts (None: group_size // 2, at
    least 1), beam_size - 1 branches per running row per tool response, tau = branch_probability, w = entropy_weight
    (the code's default 0.5; the scripts 0.2), entropy over the first `entropy_tokens` tokens' `logprobs` entries.
    max_turns / max_total_tokens: as `turns`. Logs `ARPO_LOGS` through `ctx.metrics`."""
    check_arpo(initial_rollouts=initial_rollouts, beam_size=beam_size, branch_probability=branch_probability,
               entropy_weight=entropy_weight, entropy_tokens=entropy_tokens, logprobs=logprobs, group_size=group_size)
    # int(): the recipe check probes this with a stand-in group_size, which takes int() but not //
    n_init = initial_rollouts if initial_rollouts is not None else max(1, int(group_size) // 2)
    return branching(engine, task, examples, group_size=group_size, sampling=sampling, ctx=ctx,
                     initial=[n_init] * len(examples), beam_size=beam_size, entropy_tokens=entropy_tokens,
                     logprobs=logprobs, max_turns=max_turns, max_total_tokens=max_total_tokens, who="arpo-agentic",
                     decide=lambda trace, delta, u: branches(u, delta, branch_probability, entropy_weight))


def branching(engine, task, examples, *, group_size, sampling, ctx, initial, beam_size, decide, entropy_tokens,
              logprobs, max_turns, max_total_tokens, who) -> RolloutBatch:
    """The branching rollout as one batch, its metrics logged; greedy sampling: `group_size` plain rollouts."""
    if not examples:
        raise ValueError(f"{who} needs at least one example")
    if sampling.greedy:  # the reference's do_sample=False path: n = 1 per prompt, beam_size 1, no entropy needed
        initial, beam_size, logprobs = [group_size] * len(examples), 1, 0
    else:
        check_engine_and_env(engine, task, who)
    forest = grow(engine, task, examples, group_size=group_size, sampling=sampling, initial=initial,
                  beam_size=beam_size, decide=decide, rng=step_rng(ctx), entropy_tokens=entropy_tokens,
                  logprobs=logprobs, max_turns=max_turns, max_total_tokens=max_total_tokens)
    if ctx is not None and not sampling.greedy:  # a greedy baseline's rows are not the step's rollout
        ctx.metrics.update(forest_metrics(forest))
    return forest_batch(forest, group_size, engine.tokenizer.pad_token_id)


# ----------------------------------------------------------------------------- hard attribution (unverified)

def prefix_owner(parent: list[int], branch_turn: list[int], row: int, turn: int) -> int:
    """The row that sampled turn `turn` of row `row`: its own from its branch turn on, else its parent's owner."""
    while parent[row] >= 0 and turn < branch_turn[row]:
        row = parent[row]
    return row


@registry.advantage(
    "arpo-agentic", title=ARPO_TITLE, confidence="partial",
    summary="ARPO's hard attribution (unverified, not in public code): a token of a prefix shared by branches gets "
            "the mean advantage of the rows sharing it; a row's own tokens keep theirs.",
    equation=r"A_{j,t} \leftarrow \frac{1}{|S(j,t)|}\sum_{i \in S(j,t)} A_{i,t},\quad S(j,t) = \{i : "
             r"\text{token } t \text{ of row } i \text{ is the same sample as row } j\text{'s}\}",
    reads=("advantages", "parent", "branch_turn", "turn"))
def hard_attribution(batch) -> torch.Tensor:
    """Reads `advantages` [B, T] (e.g. `grpo` listed before it), `parent`, `branch_turn` [B] (`rollout:arpo-agentic`),
    `turn` [B, T] and `group` (a group's rows consecutive, in the order they were made); returns [B, T]: each token of
    turn s of row j averaged over the rows whose turn s is the same sample (its owner's and every copy's, all at the
    same positions), 0 off the mask."""
    batch.require("advantages", "parent", "branch_turn", "turn")
    A, turn = batch.advantages, batch.turn
    B, T = A.shape
    groups, first = batch.group.tolist(), {}
    for i, g in enumerate(groups):
        first.setdefault(g, i)
    parent = [first[g] + p if p >= 0 else -1 for g, p in zip(groups, batch.parent.tolist())]  # as batch rows
    start, S = batch.branch_turn.tolist(), max(int(turn.max()) + 1, 1)
    owner = torch.tensor([[prefix_owner(parent, start, i, s) for s in range(S)] for i in range(B)],
                         device=turn.device)                                                    # [B, S]
    valid = turn >= 0
    key = owner.gather(1, turn.clamp(min=0)) * T + torch.arange(T, device=turn.device)[None]     # [B, T]: (owner, t)
    flat = key[valid]
    sums = torch.zeros(B * T, dtype=A.dtype, device=A.device).index_add_(0, flat, A[valid])
    counts = torch.zeros(B * T, dtype=A.dtype, device=A.device).index_add_(0, flat, torch.ones_like(A[valid]))
    out = torch.zeros_like(A)
    out[valid] = sums[flat] / counts[flat]
    return out * batch.mask.to(A.dtype)
