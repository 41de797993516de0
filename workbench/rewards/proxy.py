"""A reward built to be gamed, for notebook 12 (a teaching example, not a catalog method).

`length-bias`: a reward model's preference for long answers, isolated (r = |y| / L). Added to the verifier's
score it pays a long wrong answer almost as much as a short right one, so a policy that cannot solve a prompt
pads instead: "looking thorough" is a classic reward-model hack.

The f6-hacking comparison pairs it with CGPO's constraint judges (`cgpo`), the papers' fix.
"""
from __future__ import annotations

from workbench import registry


@registry.reward(
    "length-bias", title="A hackable proxy: a reward model's length bias (teaching example, not a paper)",
    summary="|y| / L: the share of the token budget a response uses, as a reward model that likes long answers "
            "pays it; added to the verifier it can be gamed by padding.",
    equation=r"r = \min(|y| / L, 1)", family="rewards")
def length_bias(completions, *, completion_ids, max_new_tokens=None, max_len=None, **columns) -> list[float]:
    """|y| = len(completion_ids[i]) (EOS included), L = `max_len` or the run's `max_new_tokens`."""
    budget = max_len or max_new_tokens
    if not budget or budget < 1:
        raise ValueError("length-bias needs the budget L: max_len=... (or the run's max_new_tokens column)")
    return [min(len(ids) / budget, 1.0) for ids in completion_ids]

