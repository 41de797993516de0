"""A reward built to be gamed, for notebook 12 (a teaching example, not a catalog method).

`length-bias`: a reward model's preference for long answers, isolated (r = |y| / L). Added to the verifier's
score it pays a long wrong answer almost as much as a short right one, so a policy that cannot solve a prompt
pads instead: "looking thorough" is a classic reward-model hack.

The f6-hacking comparison pairs it with CGPO's constraint judges (`cgpo`), the papers' fix.
"""
from __future__ import annotations

from workbench import registry
from workbench.rewards.length import length_budget, token_lengths


@registry.reward(
    "length-bias", title="A hackable proxy: a reward model's length bias (teaching example, not a paper)",
    summary="|y| / L: the share of the token budget a response uses, as a reward model that likes long answers "
            "pays it; added to the verifier it can be gamed by padding.",
    equation=r"r = \min(|y| / L, 1)", family="rewards")
def length_bias(completions, *, completion_ids, max_len=None, **columns) -> list[float]:
    """|y| = len(completion_ids[i]) (EOS included; `length.token_lengths`), L = `max_len` or the run's
    `max_new_tokens` column (`length.length_budget`: an int >= 1, TRL users name it)."""
    budget = length_budget(max_len, columns, reward="length-bias", param="max_len")
    return (token_lengths(completion_ids, len(completions)) / budget).clamp(max=1.0).tolist()
