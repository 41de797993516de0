"""ARPO's rollout against the authors' code (tests/anchors/formulas_arpo.py, dongguanting/ARPO @ e257337):

    entropy          vLLM-style top-10 log-prob dicts of a segment (some with the sampled token as an 11th entry,
                     segments shorter and longer than 20 tokens) -> `entropy_monitor` / `_calc_entropy` vs ours
    branch rule      (u, tau, w, dH) on a grid with its edges -> the code's test (L470-477) vs `branches`
    the whole tree   one scripted model and tool, the same u stream -> `generate_sequences`' rows per prompt, their
                     tokens, result masks and parents vs our batch (n rows per prompt, branches and refills alike)

and the departure we document: their `initial_entropy_dict` outlives a call, so a second batch measures dH against
the first batch's entropies (REFERENCES-AGENTS.md, section 4)."""
import math
import random
import re
from dataclasses import dataclass

import pytest
import torch

from tests.anchors import formulas_arpo as ref
from tests.helpers import step_context
from tests.rollout.test_arpo import EXAMPLES, EntropyEngine, TallyTask, random_policy, spread_of
from workbench.models import char_tokenizer
from workbench.rollout import Sampling
from workbench.rollout.arpo import arpo_rollout, branches, segment_entropy

pytestmark = pytest.mark.covers("arpo-agentic")

VOCAB = 100  # the char tokenizer's


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    token_ids: list
    logprobs: list          # one {token id: Logprob} per generated token
    finish_reason: str
    stop_reason: object


@dataclass
class RequestOutput:
    outputs: list


def dicts_of(topk_logp: torch.Tensor) -> list[dict]:
    """vLLM's per-token dicts from [T, E] logged log-probs (-inf: no entry)."""
    return [{j: Logprob(float(v)) for j, v in enumerate(row.tolist()) if v != -math.inf} for row in topk_logp]


def random_segments(seed: int, n: int = 6, k: int = 10):
    """[B, T, k + 1] random logged log-probs (a softmax's top k, some rows with an extra sampled entry) and
    lengths from 0 to 30 tokens."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 31, (n,), generator=g).tolist()[:-1] + [0]  # the last segment empty: H = 0
    T = max(lengths + [1])
    logp = torch.log_softmax(torch.randn(n, T, 40, generator=g, dtype=torch.float64) * 2, -1)
    top = logp.topk(k, -1).values
    extra = torch.where(torch.rand(n, T, 1, generator=g) < 0.3, logp[..., -1:],
                        torch.full((n, T, 1), -math.inf, dtype=torch.float64))
    return torch.cat([top, extra], -1), lengths


@pytest.mark.parametrize("seed", range(5))
def test_our_entropy_is_their_entropy_monitor(seed):
    topk, lengths = random_segments(seed)
    outputs = [RequestOutput([CompletionOutput(list(range(n)), dicts_of(topk[i, :n]), "stop", None)])
               for i, n in enumerate(lengths)]
    theirs = ref.entropy_monitor(outputs, list(range(len(lengths))), VOCAB, {})

    class Gen:
        topk_logp = topk
        mask = (torch.arange(topk.shape[1])[None] < torch.tensor(lengths)[:, None]).float()

    ours = segment_entropy(Gen, 20, VOCAB)
    assert ours == pytest.approx([theirs[i] for i in range(len(lengths))], rel=1e-12, abs=1e-15)
    assert ref._calc_entropy([]) == 0.0


def test_the_entropy_sums_entries_and_tokens_and_divides_by_log_V():
    """Their H of two tokens with dicts {-0.1, -2.5} and {-0.7}: -sum p log p over all three entries / log|V|."""
    outputs = [RequestOutput([CompletionOutput([5, 6], [{1: Logprob(-0.1), 2: Logprob(-2.5)}, {3: Logprob(-0.7)}],
                                               "stop", None)])]
    hand = -sum(math.exp(x) * x for x in (-0.1, -2.5, -0.7)) / math.log(VOCAB)
    assert ref.entropy_monitor(outputs, [0], VOCAB, {})[0] == pytest.approx(hand, rel=1e-15)


class Fixed:
    """`random` whose next draw is u."""

    def __init__(self, u):
        self.u = u

    def random(self):
        return self.u


def test_our_branch_rule_is_theirs_on_a_grid_and_its_edges():
    us = [0.0, 1e-9, 0.1, 0.25, 0.3, 0.5, 0.5 + 1e-12, 0.7, 0.999999]
    for tau in (0.0, 0.25, 0.5, 0.75, 1.0):
        for w in (0.0, 0.2, 0.5, 3.0):
            for now, init in ((0.3, 0.3), (0.5, 0.25), (0.1, 0.6), (2.0, 0.0), (0.0, 2.0)):
                for u in us:
                    theirs = ref.branch_decision(Fixed(u), now, init, w, tau)
                    assert branches(u, now - init, tau, w) == theirs, (u, tau, w, now, init)


# ----------------------------------------------------------------------------- the whole tree

def reference_rows(seed, *, group_size, initial_rollouts, beam_size, tau, w, u_stream):
    """Their `generate_sequences` on the scripted model (`random_policy(seed)`, `spread_of`) and TallyEnv's tool."""
    tok = char_tokenizer()
    engine = EntropyEngine(tok, random_policy(seed))  # only to encode the prompts as our rollout does
    ids, keep = engine.encode([e.prompt for e in EXAMPLES], 1)
    prompts = [row[m > 0].tolist() for row, m in zip(ids, keep)]
    policy = random_policy(seed)

    def generate(active_prompts):
        outs = []
        for prompt in active_prompts:
            history = tok.decode(prompt)
            text = policy(history)
            token_ids = tok(text, add_special_tokens=False)["input_ids"]
            spread = spread_of(history)
            logged = {j: Logprob(-math.log(spread)) for j in range(min(10, spread))}
            call = text.endswith(";")
            outs.append(RequestOutput([CompletionOutput(token_ids, [logged] * len(token_ids), "stop",
                                                        ";" if call else None)]))
        return outs

    def execute(curr_input, tag):  # TallyEnv's answer: the first characters of every call so far
        seen = "".join(re.findall(r"(\w);", tok.decode(curr_input)))
        return tok(f"={seen}\n", add_special_tokens=False)["input_ids"]

    return ref.generate_sequences(prompts, num_samples=group_size, initial_rollouts=initial_rollouts,
                                  beam_size=beam_size, branch_probability=tau, entropy_weight=w, generate=generate,
                                  execute=execute, stop_sequences=[";"], eos_token_id=tok.eos_token_id,
                                  vocab_size=VOCAB, random=u_stream)


@pytest.mark.parametrize("seed, group_size, initial, beam, tau, w", [
    (0, 6, 3, 2, 0.5, 0.5), (1, 6, 3, 2, 1.0, 0.0), (2, 8, 2, 3, 0.5, 2.0), (3, 4, 1, 2, 0.2, 0.2),
    (4, 6, 3, 2, 0.0, 0.0), (5, 5, 5, 2, 1.0, 0.5), (6, 16, 8, 2, 0.5, 0.2),
])
def test_our_rows_are_their_rows(seed, group_size, initial, beam, tau, w):
    ctx = step_context(step=seed, component="rollout:arpo-agentic")
    engine = EntropyEngine(char_tokenizer(), random_policy(seed))
    ours = arpo_rollout(engine, TallyTask(), EXAMPLES, group_size=group_size, sampling=Sampling(8), ctx=ctx,
                        initial_rollouts=initial, beam_size=beam, branch_probability=tau, entropy_weight=w)
    sequences, masks, sample_to_indices, parents = reference_rows(
        seed, group_size=group_size, initial_rollouts=initial, beam_size=beam, tau=tau, w=w, u_stream=ctx.rng(0))
    assert [len(sample_to_indices[g]) for g in range(len(EXAMPLES))] == [group_size] * len(EXAMPLES)
    assert len(sequences) == ours.size == group_size * len(EXAMPLES)
    for i, (sequence, mask) in enumerate(zip(sequences, masks)):
        n = int((ours.turn[i] >= 0).sum())
        assert ours.response_ids[i, :n].tolist() == sequence and ours.mask[i, :n].tolist() == mask, i
    local = [sample_to_indices[g].index(parents[idx]) if parents[idx] is not None else -1
             for g in range(len(EXAMPLES)) for idx in sample_to_indices[g]]
    assert ours.parent.tolist() == local


def test_some_trees_branch_and_some_refill():
    """The comparisons above cover both paths: branches (tau = 1) and fresh global rollouts (tau = 0)."""
    _, _, _, parents = reference_rows(1, group_size=6, initial_rollouts=3, beam_size=2, tau=1.0, w=0.0,
                                      u_stream=random.Random(0))
    assert any(p is not None for p in parents)
    _, _, _, parents = reference_rows(4, group_size=6, initial_rollouts=3, beam_size=2, tau=0.0, w=0.0,
                                      u_stream=random.Random(0))
    assert all(p is None for p in parents) and len(parents) == 18


def test_their_initial_entropies_outlive_a_call_ours_do_not():
    """Their `initial_entropy_dict` (an instance attribute, never cleared) keeps index i's first entropy of the first
    batch: in the next batch index i's dH is measured against it, so its first tool response need not have dH = 0."""
    first = {}
    low = [RequestOutput([CompletionOutput([1], [{0: Logprob(-0.01)}], "stop", None)])]
    high = [RequestOutput([CompletionOutput([1], [{0: Logprob(-0.7), 1: Logprob(-0.7)}], "stop", None)])]
    now = ref.entropy_monitor(low, [0], VOCAB, first)
    assert first[0] == now[0]
    later = ref.entropy_monitor(high, [0], VOCAB, first)  # the next training step's batch, same index 0
    assert first[0] == now[0] != later[0]  # H_init is still the first batch's
    # ours: every call measures H_init afresh, so the same scripted batch twice gives the same tree
    a, b = (arpo_rollout(EntropyEngine(char_tokenizer(), random_policy(9)), TallyTask(), EXAMPLES, group_size=6,
                         sampling=Sampling(8), ctx=step_context(component="c"), entropy_weight=2.0) for _ in range(2))
    assert torch.equal(a.parent, b.parent) and torch.equal(a.response_ids, b.response_ids)
