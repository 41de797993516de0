"""A scripted rollout engine: every turn's text is given by a policy function, so multi-turn layouts can be
checked token by token. It ends turns exactly as the real engines do (the engine module's own response_mask,
cap_lengths and apply_stop_strings), and reports a constant log-prob per sampled token."""
from __future__ import annotations

import torch

from workbench.batch import left_pad
from workbench.rollout.engine import Generation, apply_stop_strings, cap_lengths, encode_prompts, response_mask

LOGP = -0.5  # mu_logp of every scripted token


class ScriptedEngine:
    """policy(history) -> the text of the next turn, where history is the row's decoded prompt and response so
    far (special tokens kept) and "<eos>" in the returned text is the EOS token."""

    def __init__(self, tokenizer, policy, max_length: int | None = None):
        self.tokenizer, self.policy, self.max_length = tokenizer, policy, max_length
        self.calls: list[tuple[str, int]] = []  # ("generate" | "generate_ids", rows) per call

    def encode(self, prompts, n: int = 1):
        ids, mask = encode_prompts(self.tokenizer, prompts)
        return ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)

    def generate(self, prompts, *, n=1, max_new_tokens=16, temperature=1.0, top_p=1.0, greedy=False, stop=None):
        ids, mask = self.encode(prompts, n)
        self.calls.append(("generate", ids.shape[0]))
        return self.sample(ids, mask, max_new_tokens, stop)

    def generate_ids(self, prompts, *, max_new_tokens=16, temperature=1.0, top_p=1.0, greedy=False, stop=None):
        ids, mask = left_pad(prompts, self.tokenizer.pad_token_id)
        self.calls.append(("generate_ids", ids.shape[0]))
        return self.sample(ids, mask, max_new_tokens, stop)

    def sample(self, prompt_ids, prompt_mask, max_new_tokens, stop) -> Generation:
        tok = self.tokenizer
        budgets = [max_new_tokens] * len(prompt_ids) if isinstance(max_new_tokens, int) else max_new_tokens
        rows = []
        for ids, keep, budget in zip(prompt_ids, prompt_mask, budgets):
            text = self.policy(tok.decode(ids[keep > 0]))
            rows.append(tok(text, add_special_tokens=False)["input_ids"][:max(budgets)])
        width = max(len(r) for r in rows)
        response = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        for i, r in enumerate(rows):
            response[i, :len(r)] = torch.tensor(r)
        mask, truncated = response_mask(response, tok.eos_token_id)
        lengths = torch.tensor([len(r) for r in rows])[:, None]
        mask = mask * (torch.arange(width)[None] < lengths)  # a scripted text shorter than the budget is all
        truncated = truncated & (lengths[:, 0] >= torch.tensor(budgets))  # a text ending early ended by itself
        mask, truncated = cap_lengths(response, mask, truncated, tok.eos_token_id, max_new_tokens)
        response, mask, truncated, texts = apply_stop_strings(tok, response, mask, truncated, stop)
        return Generation(prompt_ids, prompt_mask, response, mask, truncated, LOGP * mask, texts)


def gridworld_policy(examples, rng, p_best: float = 0.6):
    """policy(history) for gridworld episodes of `examples`: a move along a shortest path with probability
    `p_best` (the map is read from the example), a random move otherwise, so some episodes reach the goal and
    they revisit positions."""
    from workbench.envs.gridworld import distances, moved, parse_map

    def policy(history):
        example = next(e for e in examples if e.prompt in history)
        _, rows, _, goal = parse_map(example.answer)
        last = history.split("\n")[-1]  # the latest observation: "rc view"
        pos = (int(last[-7]), int(last[-6]))
        dist = distances(rows, goal)
        best = [m for m in "UDLR" if dist.get(moved(rows, pos, m), 99) < dist[pos]]
        return best[0] if rng.random() < p_best else rng.choice("UDLR")

    return policy


class PromptSpy:
    """An engine that records the prompts `generate` is asked to continue, then lets `engine` continue them."""

    def __init__(self, engine):
        self.engine, self.prompts = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, prompts, **kw):
        self.prompts.append(list(prompts))
        return self.engine.generate(prompts, **kw)
