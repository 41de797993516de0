"""LSPO's translation step: preference pairs from a latent policy, and the DPO loss trained on them.

Latent Space Policy Optimization iterates three steps (the card's reading; no reference implementation located):

    1. latent space   utterances -> k intents z(y) (k-means on embeddings, `workbench.preference.latent`)
    2. latent policy  sigma*(I, z): the abstracted game (statements replaced by intents) solved by CFR
                      (`workbench.envs.games.cfr`; the werewolf latent game in `workbench.envs.werewolf`)
    3. translation    DPO on pairs of utterances y_w, y_l sampled at the same decision point (same prompt x, the
                      same latent information set I) with sigma*(I, z(y_w)) > sigma*(I, z(y_l)):

    L = -log sigmoid(beta * [log pi(y_w|x)/pi_ref(y_w|x) - log pi(y_l|x)/pi_ref(y_l|x)])          (`lspo` = `dpo`)

then expand the latent space (k -> k + 1) and repeat.

Pairs (`latent_pairs`). Rows are candidate utterances, each with a key (its decision point: DPO needs one prompt per
pair, so the key is the prompt text; its latent information set is a function of it), its intent and the latent
policy's probability of that intent there. Per key, in the order keys first appear: chosen = the first row of highest
probability, rejected = the first row of lowest; no pair when the two differ by no more than `min_gap` (default 0:
strictly higher), so a key whose rows share one intent (one cluster) or tied intents gives none. One pair per key,
best against worst, as the online sources pair a prompt's samples (`sampled-pairs`). `intent_probs` reads the
probabilities off a solved policy {set: {action label: probability}} whose talk actions are the intents' numbers
("0", "1", ...), as the werewolf latent game names them.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from workbench import registry
from workbench.preference.base import TRL_LOGS
from workbench.preference.pairwise import DPO_LOGS, dpo

LSPO_TITLE = "Learning Strategic Language Agents in the Werewolf Game with Iterative Latent Space Policy Optimization"


@dataclass(frozen=True)
class LatentPair:
    key: Hashable          # the decision point (the prompt both utterances answer)
    chosen: str
    rejected: str
    chosen_intent: int
    rejected_intent: int
    chosen_prob: float     # sigma*(I, z(chosen))
    rejected_prob: float   # sigma*(I, z(rejected)) < chosen_prob - min_gap


def intent_probs(policy: Mapping[str, Mapping[str, float]], infosets: Sequence[str],
                 intents: Sequence[int]) -> list[float]:
    """sigma*(I_i, z_i) of each row: the latent policy at its set `infosets[i]`, its intent `intents[i]` (action
    label str(z))."""
    if len(infosets) != len(intents):
        raise ValueError(f"{len(infosets)} information sets for {len(intents)} intents: one of each per row")
    out = []
    for name, z in zip(infosets, intents):
        if name not in policy:
            raise ValueError(f"the latent policy has no information set {name!r} (is the latent game the one the "
                             f"intents were assigned for?)")
        if str(int(z)) not in policy[name]:
            raise ValueError(f"intent {int(z)} is not an action at {name!r}; its actions: {sorted(policy[name])}")
        out.append(float(policy[name][str(int(z))]))
    return out


def latent_pairs(keys: Sequence[Hashable], texts: Sequence[str], intents: Sequence[int], probs: Sequence[float], *,
                 min_gap: float = 0.0) -> list[LatentPair]:
    """One (chosen, rejected) pair per key whose rows' latent-policy probabilities differ by more than `min_gap`:
    the first row of highest probability against the first of lowest (see the module docstring)."""
    n = len(keys)
    if not len(texts) == len(intents) == len(probs) == n:
        raise ValueError(f"keys, texts, intents and probs need one entry per row; got {n}, {len(texts)}, "
                         f"{len(intents)}, {len(probs)}")
    if min_gap < 0:
        raise ValueError(f"min_gap must be >= 0 (how much likelier the chosen intent must be), got {min_gap}")
    bad = [i for i, p in enumerate(probs) if not 0.0 <= float(p) <= 1.0]
    if bad:
        raise ValueError(f"probs are latent-policy probabilities in [0, 1]; rows {bad[:10]} are not")
    rows: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        rows.setdefault(key, []).append(i)
    pairs = []
    for key, idx in rows.items():
        best = max(idx, key=lambda i: (float(probs[i]), -i))  # the first of the highest
        worst = min(idx, key=lambda i: (float(probs[i]), i))  # the first of the lowest
        if float(probs[best]) - float(probs[worst]) > min_gap:
            pairs.append(LatentPair(key, texts[best], texts[worst], int(intents[best]), int(intents[worst]),
                                    float(probs[best]), float(probs[worst])))
    return pairs


@registry.preference(
    "lspo", title=LSPO_TITLE,
    summary="DPO translating a latent policy back to language: pairs of utterances sampled at one decision point, "
            "the one whose intent (k-means cluster) the CFR-solved latent game plays more likely chosen.",
    equation=r"\mathcal{L} = -\log\sigma(\beta\Delta),\quad \sigma^*(I, z(y_w)) > \sigma^*(I, z(y_l)),\quad "
             r"\sigma^* = \mathrm{CFR}(\text{latent game}),\ z = \text{k-means intent}",
    logs={**TRL_LOGS, **DPO_LOGS})
def lspo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1):
    r"""LSPO's translation loss: `dpo` on latent-policy pairs (`latent_pairs`), L = -log sigma(beta * Delta).

    Inputs are summed sequence log-probs [B] of the chosen / rejected utterances under the policy and the reference
    (the policy at the start of the iteration, which the recipe moves every iteration). The value and gradient are
    exactly `dpo`'s; what makes it LSPO is where the pairs come from. Metrics: `dpo`'s.
    """
    return dpo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=beta)
