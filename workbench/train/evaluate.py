"""Held-out evaluation: greedy accuracy (one greedy episode per example through the rollout), the unbiased
pass@k of sampled episodes, and preference accuracy (the verified answer ranked above a near miss)."""
from __future__ import annotations

import math
import random
import statistics

import torch

from workbench.rollout import policy_forward
from workbench.rollout.engine import Sampling, encode_prompts, encode_responses
from workbench.rollout.turns import play
from workbench.tasks import Example, Task
from workbench.tasks.preferences import PreferencePair, corrupt


def list_logps(model, tokenizer, prompts: list[str], lists: list[list[str]], temperature: float = 1.0,
               ends: list[list[bool]] | None = None):
    """Summed response log-probs and token counts of K responses per prompt, [B, K] each, in one forward pass.

    `ends[b][k]` False scores a partial response (a reasoning step) without the EOS token."""
    K = len(lists[0])
    if any(len(responses) != K for responses in lists):
        raise ValueError("every list needs the same number of responses")
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [p for p in prompts for _ in range(K)], device)
    ids, mask = encode_responses(tokenizer, [r for responses in lists for r in responses], device,
                                 eos=None if ends is None else [e for row in ends for e in row])
    logp, _, _ = policy_forward(model, prompt_ids, prompt_mask, ids, mask, temperature)
    return (logp * mask).sum(-1).view(-1, K), mask.sum(-1).view(-1, K)


def sequence_logps(model, tokenizer, pairs: list[PreferencePair], temperature: float = 1.0):
    """Summed log-probs of chosen and rejected ([B] each) and their token counts: a pair is a list of two."""
    logps, lengths = list_logps(model, tokenizer, [p.prompt for p in pairs], [[p.chosen, p.rejected] for p in pairs],
                                temperature)
    return logps[:, 0], logps[:, 1], lengths[:, 0], lengths[:, 1]


def held_out_pairs(task, n: int) -> list[PreferencePair]:
    """target ≻ corrupted target on the task's fixed held-out prompts."""
    rng = random.Random("held-out-pairs")
    return [PreferencePair(e.prompt, e.target, corrupt(e.target, rng)) for e in task.eval_set(n)]


@torch.no_grad()
def preference_accuracy(model, tokenizer, task, n: int, temperature: float = 1.0) -> float:
    """Share of `n` held-out pairs (`held_out_pairs`) where the policy gives the verified answer the higher log-prob."""
    chosen, rejected, _, _ = sequence_logps(model, tokenizer, held_out_pairs(task, n), temperature)
    return float((chosen > rejected).float().mean())


def greedy_accuracy(engine, task: Task, examples: list[Example], *, max_new_tokens: int, batch_size: int = 256,
                    stop: list[str] | None = None, max_turns: int | None = None,
                    max_total_tokens: int | None = None) -> tuple[float, list[dict]]:
    """(accuracy, per-example records with prompt, completion, answer, correct) of greedy episodes run by the
    multi-turn rollout (`turns.play`, group_size 1): `max_new_tokens` per turn, turns ending at EOS, a `stop`
    string or one of the environment's, as in training. `correct` is the episode's return (the verifier's score
    for a one-turn task, whose completion is the answer; for a multi-turn task the completion is the whole
    transcript after the prompt)."""
    if not examples:
        raise ValueError(f"task {task.name!r} has an empty evaluation set")
    sampling = Sampling(max_new_tokens, greedy=True, stop=tuple(stop) if stop else None)
    records = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        played = play(engine, task, chunk, group_size=1, sampling=sampling, max_turns=max_turns,
                      max_total_tokens=max_total_tokens)
        records += [{"prompt": e.prompt, "completion": ep.completion, "answer": e.answer, "correct": ep.episode_return}
                    for e, ep in zip(chunk, played.episodes)]
    return sum(r["correct"] for r in records) / len(records), records


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one prompt from n samples of which c are correct (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code", eq. 1): 1 - C(n - c, k) / C(n, k), as the product prod_{i=n-c+1}^{n}
    (1 - k / i) so that no binomial overflows."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must be within 0..n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def sampled_pass_at_k(correct: list[int], n: int, k: int) -> dict[str, float]:
    """{"pass@1", "pass@k"}: the mean over prompts of the unbiased estimate from each prompt's correct count."""
    return {"pass@1": statistics.fmean(pass_at_k(n, c, 1) for c in correct),
            "pass@k": statistics.fmean(pass_at_k(n, c, k) for c in correct)}
