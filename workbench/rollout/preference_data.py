"""Where preference data comes from: the rollout stage of a preference recipe.

Every source returns a batch with one group per item and the item's K responses as its rows, best first (K = 2:
chosen, rejected), teacher-forced: the response text is encoded, with EOS unless the response is a partial
reasoning step. Labels a loss may take ride along as [B] fields (`preference_reward`, `winrate`, `step_value`,
`step_advantage`); `workbench/objectives/preference.py` turns the rows into the loss's inputs.

Offline sources build their data once, at the first step, from the task (or a JSONL file) and keep it as their
pipeline state (checkpointed, so a resumed run trains on the same items); each step draws `prompts_per_step` items
from it. Online sources label the policy's own samples of the step's examples with the task's verifier.
"""
from __future__ import annotations

import functools
import random
from pathlib import Path

import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.rollout.engine import encode_prompts, encode_responses
from workbench.tasks.preferences import degraded_lists, pair_from, read_pairs, task_lists, task_pairs
from workbench.tasks.steps import advantage_steps, sibling_pairs

LABELS = ("preference_reward", "winrate", "step_value", "step_advantage")  # [B] fields a source may fill


def items_batch(engine, prompts: list, responses: list[list[str]], ends: list[list[bool]] | None = None,
                labels: dict | None = None) -> RolloutBatch:
    """Items (a prompt and its K responses, best first) as a batch of N x K teacher-forced rows, one group per item.
    `ends[n][k]` False scores a partial response (a reasoning step) without EOS; `labels` {field: [N][K] values}."""
    if not prompts:  # no prompt's samples separated (online pairs): a batch of no rows, nothing to train on
        return RolloutBatch(response_ids=torch.zeros(0, 1, dtype=torch.long), mask=torch.zeros(0, 1),
                            group=torch.zeros(0, dtype=torch.long), prompt_ids=torch.zeros(0, 1, dtype=torch.long),
                            prompt_mask=torch.zeros(0, 1, dtype=torch.long), rewards=torch.zeros(0),
                            truncated=torch.zeros(0, dtype=torch.bool), **{k: torch.zeros(0) for k in labels or {}})
    K = len(responses[0])
    if any(len(r) != K for r in responses):
        raise ValueError("every item needs the same number of responses")
    rows = [r for item in responses for r in item]
    prompt_ids, prompt_mask = encode_prompts(engine.tokenizer, [p for p in prompts for _ in range(K)])
    ids, mask = encode_responses(engine.tokenizer, rows,
                                 eos=None if ends is None else [e for item in ends for e in item])
    preference_reward = torch.tensor([v for item in (labels or {}).get("preference_reward", []) for v in item])
    batch = RolloutBatch(
        response_ids=ids, mask=mask, group=torch.arange(len(prompts)).repeat_interleave(K), prompt_ids=prompt_ids,
        prompt_mask=prompt_mask, truncated=torch.zeros(len(rows), dtype=torch.bool), completions=rows,
        prompts=[p for p in prompts for _ in range(K)],
        rewards=preference_reward.float() if preference_reward.numel() else torch.zeros(len(rows)))
    for name, values in (labels or {}).items():
        setattr(batch, name, torch.tensor([v for item in values for v in item], dtype=torch.float32))
    return batch


# ------------------------------------------------------------------------------------ offline: built once

# What `delivered` logs; every preference data source declares it.
PAIRS_LOGS = {
    "pairs": ("Preference recipes: items (pairs, lists or steps) trained on this step (online pair recipes: prompts "
              "whose samples the verifier separated).",
              "Offline: prompts_per_step every step. Online pair recipes: at most that; falling towards 0 means the "
              "verifier separates fewer groups (all right or all wrong), like frac_zero_std_groups rising."),
}


def delivered(ctx, batch: RolloutBatch) -> RolloutBatch:
    """Log the number of items (pairs, lists or steps) the step trains on as `pairs`."""
    ctx.metrics["pairs"] = float(torch.unique(batch.group).numel())
    return batch


def step_items(state: dict, ctx) -> dict:
    """The step's `prompts_per_step` items of an offline dataset, drawn with the step's seed."""
    rng = random.Random(f"{ctx.seed}-{ctx.step}")
    idx = rng.sample(range(len(state["prompts"])), min(ctx.prompts_per_step, len(state["prompts"])))
    return {"prompts": [state["prompts"][i] for i in idx], "responses": [state["responses"][i] for i in idx],
            "ends": None if state["ends"] is None else [state["ends"][i] for i in idx],
            "labels": {k: [v[i] for i in idx] for k, v in state["labels"].items()}}


def offline(build):
    """An offline source: `build(engine, task, sampling, ctx, **hp)` -> dataset once (kept in the component's
    state), then the step's items of it."""
    @functools.wraps(build)  # its keyword parameters are the source's (checked against a recipe's)
    def source(engine, task, examples, *, group_size, sampling, ctx=None, **hp):
        if ctx is None or ctx.state is None:
            raise ValueError(f"{build.__name__} keeps its dataset as pipeline state: call it through the pipeline")
        if not ctx.state:
            ctx.state.update(build(engine, task, sampling, ctx, **hp))
        item = step_items(ctx.state, ctx)
        return delivered(ctx, items_batch(engine, item["prompts"], item["responses"], item["ends"], item["labels"]))
    return source


def dataset(prompts, responses, ends=None, **labels) -> dict:
    return {"prompts": list(prompts), "responses": [list(r) for r in responses],
            "ends": None if ends is None else [list(e) for e in ends], "labels": labels}


def empty_state(**_) -> dict:
    return {}


def check_source(*, pairs=512, list_size=4, step_chars=2, rollouts_per_state=4, path="", fractions=(1 / 3, 2 / 3)):
    """Refuse, when the recipe is checked (before anything is built), a data source's impossible parameters: the
    dataset would otherwise fail, or come out empty, at the first step."""
    counts = {"pairs": pairs, "list_size": list_size, "step_chars": step_chars,
              "rollouts_per_state": rollouts_per_state}
    low = {"pairs": 1, "list_size": 2, "step_chars": 1, "rollouts_per_state": 1}
    bad = [f"{k}={v!r} (an int >= {low[k]})" for k, v in counts.items() if not (isinstance(v, int) and v >= low[k])]
    if bad:
        raise ValueError(f"preference data parameters out of range: {', '.join(bad)}")
    if path and not Path(path).is_file():
        raise ValueError(f"preference pairs file {path!r} does not exist; give a JSONL of prompt/chosen/rejected rows "
                         f"with --set data_path=PATH")
    if not all(0 < f < 1 for f in fractions):
        raise ValueError(f"fractions {fractions!r} must each lie in (0, 1): the share of the chosen answer's digits "
                         "removed")


@registry.rollout(
    "task-pairs", title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    family="canonical", state=empty_state, check=check_source, provides=("preference_reward",),
    summary="Offline pairs: the task's verified target against a near miss (one digit changed), `pairs` of them "
            "built once from training prompts; rewards 1 and 0.", logs=PAIRS_LOGS)
@offline
def task_pairs_source(engine, task, sampling, ctx, *, pairs=512):
    """`pairs` verified-target > corrupted-answer pairs from the task's training prompts (never the held-out set)."""
    made = task_pairs(task, pairs, seed=ctx.seed)
    return dataset([p.prompt for p in made], [[p.chosen, p.rejected] for p in made],
                   preference_reward=[[1.0, 0.0] for _ in made])


@registry.rollout(
    "file-pairs", title="Preference pairs from a local JSONL file", family="canonical", state=empty_state,
    check=check_source,
    summary="Offline pairs read from a JSONL file of {prompt, chosen, rejected} rows (TRL's explicit-prompt layout); "
            "they carry no rewards.", logs=PAIRS_LOGS)
@offline
def file_pairs(engine, task, sampling, ctx, *, path=""):
    if not path:
        raise ValueError("file-pairs needs the JSONL file: --set data_path=PATH")
    made = read_pairs(path)
    return dataset([p.prompt for p in made], [[p.chosen, p.rejected] for p in made])


@registry.rollout(
    "task-lists", title="LiPO: Listwise Preference Optimization through Learning-to-Rank", state=empty_state,
    check=check_source,
    family="canonical",
    summary="Offline lists: the task's target and list_size - 1 distinct near misses per prompt, ranked by the "
            "verifier (then length), `pairs` lists built once.", logs=PAIRS_LOGS)
@offline
def task_lists_source(engine, task, sampling, ctx, *, pairs=512, list_size=4):
    lists = task_lists(task, pairs, list_size, seed=ctx.seed)
    return dataset([p for p, _ in lists], [ranked for _, ranked in lists])


@registry.rollout(
    "degraded-pairs", title="Self-supervised Preference Optimization: Enhance Your Language Model with Preference "
                            "Degree Awareness", family="canonical", state=empty_state, provides=("preference_reward",),
    check=check_source,
    summary="Offline task pairs with copies of the chosen answer between them, each with a share `fractions` of its "
            "digits removed (the key content): chosen, copies (worse as more is removed), rejected.", logs=PAIRS_LOGS)
@offline
def degraded_pairs(engine, task, sampling, ctx, *, pairs=512, fractions=(1 / 3, 2 / 3)):
    made = task_pairs(task, pairs, seed=ctx.seed)
    lists = degraded_lists(made, fractions, seed=ctx.seed)
    return dataset([p for p, _ in lists], [ranked for _, ranked in lists],
                   preference_reward=[[1.0] + [0.0] * (len(ranked) - 1) for _, ranked in lists])


@registry.rollout(
    "advantage-steps", title="Improving Multi-Step Reasoning Abilities of Large Language Models with Direct "
                             "Advantage Policy Optimization", family="canonical", state=empty_state, check=check_source,
    provides=("step_advantage",),
    summary="Offline steps: one sample of the starting policy per prompt, cut into step_chars-character steps, each "
            "with its advantage V(s + a) - V(s) from rollouts_per_state Monte Carlo continuations per state.",
    logs=PAIRS_LOGS)
@offline
def advantage_steps_source(engine, task, sampling, ctx, *, pairs=512, step_chars=2, rollouts_per_state=4):
    with torch.random.fork_rng(devices=[]):  # seeded by the run alone, whatever step builds it
        torch.manual_seed(ctx.seed)
        steps = advantage_steps(engine, task, task.sample(pairs, random.Random(f"steps-{ctx.seed}")),
                                step_chars=step_chars, k=rollouts_per_state, max_new_tokens=sampling.max_new_tokens,
                                temperature=sampling.temperature)
    return dataset([s.prompt for s in steps], [[s.step] for s in steps], [[s.final] for s in steps],
                   step_advantage=[[s.advantage] for s in steps])


# ------------------------------------------------------------------------------------ online: the policy's samples

def win_rate(task, example, response: str, samples: list[str]) -> float:
    """P(response beats a sample of the policy), from verifier scores: 1 if higher, 1/2 if equal."""
    mine = task.score(response, example)
    scores = [task.score(s, example) for s in samples]
    return sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in scores) / len(scores)


def samples_of(engine, examples, n: int, sampling) -> list[list[str]]:
    gen = engine.generate([e.prompt for e in examples], n=n, max_new_tokens=sampling.max_new_tokens,
                          temperature=sampling.temperature, top_p=sampling.top_p, stop=sampling.stop)
    return [gen.texts[i * n:(i + 1) * n] for i in range(len(examples))]


@registry.rollout(
    "sampled-pairs", title="Direct Language Model Alignment from Online AI Feedback", family="canonical",
    provides=("preference_reward", "winrate"), check=check_source,
    summary="Online pairs: group_size samples of the policy per prompt, the verifier's best against its worst "
            "(correct > wrong, or shorter-correct > longer-correct), with rewards and win rates against the samples.",
    logs=PAIRS_LOGS)
def sampled_pairs(engine, task, examples, *, group_size, sampling, ctx):
    kept, rates, rewards = [], [], []
    for e, samples in zip(examples, samples_of(engine, examples, group_size, sampling)):
        pair = pair_from(task, e, samples)
        if pair is None or not pair.chosen or not pair.rejected:
            continue  # the samples do not separate: no preference for this prompt
        kept.append(pair)
        rates.append([win_rate(task, e, y, samples) for y in (pair.chosen, pair.rejected)])
        rewards.append([task.score(y, e) for y in (pair.chosen, pair.rejected)])
    return delivered(ctx, items_batch(engine, [p.prompt for p in kept], [[p.chosen, p.rejected] for p in kept],
                                      labels={"preference_reward": rewards, "winrate": rates}))


@registry.rollout(
    "sampled-lists", title="BRAIn: Bayesian Reward-conditioned Amortized Inference for natural language generation "
                           "from feedback", family="canonical", provides=("preference_reward",),
    check=check_source,
    summary="Online lists: list_size samples of the policy per prompt, in sampling order, each with its verifier "
            "reward.", logs=PAIRS_LOGS)
def sampled_lists(engine, task, examples, *, group_size, sampling, ctx, list_size=4):
    lists = samples_of(engine, examples, list_size, sampling)
    rewards = [task.rewards(s, [e] * list_size) for e, s in zip(examples, lists)]
    return delivered(ctx, items_batch(engine, [e.prompt for e in examples], lists,
                                      labels={"preference_reward": rewards}))


@registry.rollout(
    "sibling-steps", title="Monte Carlo Tree Search Boosts Reasoning via Iterative Preference Learning",
    family="canonical", provides=("step_value",), check=check_source,
    summary="Online step pairs: a sample of the policy cut at a random step boundary, group_size next steps "
            "(step_chars characters) from there valued by rollouts_per_state Monte Carlo rollouts; best vs worst.",
    logs=PAIRS_LOGS)
def sibling_steps(engine, task, examples, *, group_size, sampling, ctx, step_chars=2, rollouts_per_state=4):
    """`ctx` (the step's context) gives the random stream that picks each sample's branching point."""
    pairs = sibling_pairs(engine, task, examples, ctx.rng(ctx.round), step_chars=step_chars, children=group_size,
                          k=rollouts_per_state, max_new_tokens=sampling.max_new_tokens,
                          temperature=sampling.temperature)
    return delivered(ctx, items_batch(engine, [p.prompt for p in pairs], [[p.chosen, p.rejected] for p in pairs],
                                      [[p.chosen_final, p.rejected_final] for p in pairs],
                                      labels={"step_value": [[p.chosen_q, p.rejected_q] for p in pairs]}))
