"""A preference loss as the update's objective: the batch's ranked responses -> the registered preference loss.

A preference data source (`workbench/rollout/preference_data.py`) fills the batch with K rows per item, best first,
one group per item (K = 2: chosen, rejected; chosen, degraded copies, rejected; K ranked samples; K = 1: a step).
Each row's sequence log-prob is the sum over its tokens, for the policy and the reference (and the previous iterate):

    s_{n,k} = sum_t logp_{(n,k),t} mask_{(n,k),t}        [N, K]

and the loss is the registered preference loss on the layout it declares (`registry.LAYOUTS`): the best row against
the worst, the whole list, or one row. Per-item inputs a loss takes beyond the log-probs are named in `inputs`
("kw" or "kw=source"), from the sources of `SOURCES` (chosen_* is the first row's, rejected_* the last's).
"""
from __future__ import annotations

import inspect

import torch

from workbench import registry
from workbench.params import check_choice, check_value, did_you_mean
from workbench.probe import probe_settings

# source -> (the batch field it comes from, which rows: "chosen", "rejected", "list" [N, K] or "middle" [N, K-2])
SOURCES = {
    "chosen_len": ("mask", "chosen"), "rejected_len": ("mask", "rejected"),
    "chosen_reward": ("preference_reward", "chosen"), "rejected_reward": ("preference_reward", "rejected"),
    "list_rewards": ("preference_reward", "list"),
    "chosen_winrate": ("winrate", "chosen"), "rejected_winrate": ("winrate", "rejected"),
    "chosen_q": ("step_value", "chosen"), "rejected_q": ("step_value", "rejected"),
    "advantages": ("step_advantage", "chosen"),
    "prev_chosen_logp": ("prev_logp", "chosen"), "prev_rejected_logp": ("prev_logp", "rejected"),
    "degraded_logp": ("logp", "middle"), "ref_degraded_logp": ("ref_logp", "middle"),
}
SEQUENCE_FIELDS = ("mask", "logp", "ref_logp", "prev_logp")  # [B, T] fields summed over each row's tokens
ROWS = {"chosen": lambda x: x[:, 0], "rejected": lambda x: x[:, -1], "list": lambda x: x,
        "middle": lambda x: x[:, 1:-1]}


def parse_inputs(inputs) -> list[tuple[str, str]]:
    """[(keyword, source)] of "kw" / "kw=source" specs, each source checked against `SOURCES`."""
    specs = [(kw, source or kw) for kw, _, source in (spec.partition("=") for spec in inputs)]
    unknown = sorted(source for _, source in specs if source not in SOURCES)
    if unknown:
        raise ValueError(f"preference inputs {unknown} are not known sources; sources: {sorted(SOURCES)}")
    return specs


def preference_reads(*, inputs=(), **_) -> tuple:
    """The batch fields the loss reads: the reference's log-probs, the group ids, and the fields its inputs need."""
    fields = [SOURCES[source][0] for _, source in parse_inputs(inputs)]
    return tuple(dict.fromkeys(["ref_logp", "group", *(f for f in fields if f not in ("mask", "logp"))]))


def by_item(x: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """[B] row values -> [N, K], K rows per group in batch order (a data source keeps an item's rows together)."""
    _, counts = torch.unique_consecutive(group, return_counts=True)
    if bool((counts != counts[0]).any()):
        raise ValueError(f"a preference batch needs the same number of responses per item, its rows together; got "
                         f"{counts.tolist()} rows per item")
    return x.view(len(counts), -1)


def sequence_logp(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T] token log-probs -> [B] summed over each row's response tokens."""
    return (per_token * mask).sum(-1)


def call_loss(entry: registry.Entry, s: torch.Tensor, r: torch.Tensor, kw: dict):
    """The preference loss on its declared layout: s, r are [N, K] policy and reference sequence log-probs."""
    if entry.layout == "list":
        return entry.fn(s, None, r, None, **kw)
    if entry.layout == "one":
        return entry.fn(s[:, 0], r[:, 0], **kw)
    return entry.fn(s[:, 0], s[:, -1], r[:, 0], r[:, -1], **kw)


def loss_call(entry: registry.Entry):
    """The loss as `call_loss` calls it on its layout, its log-probs positional (for `probe_settings`)."""
    if entry.layout == "list":
        return lambda s, r, **kw: entry.fn(s, None, r, None, **kw)
    if entry.layout == "one":
        return lambda s, r, **kw: entry.fn(s, r, **kw)
    return lambda s, s_last, r, r_last, **kw: entry.fn(s, s_last, r, r_last, **kw)


def check_preference(*, loss="dpo", inputs=(), **hp) -> None:
    """Refuse, before anything runs, an unknown loss, an unknown input source, a keyword the loss does not take or a
    value of the wrong type or out of range (`workbench.params`), and what the loss's own checks refuse: its `check`
    and those it makes before it reads an input (called with stand-ins for the log-probs and the `inputs`)."""
    known = [e.key for e in registry.entries("preference")]
    if not isinstance(loss, str) or loss not in known:
        raise ValueError(f"loss={loss!r} is no registered preference loss{did_you_mean(str(loss), known)}; "
                         f"losses: {', '.join(known)}")
    entry = registry.get("preference", loss)
    specs = parse_inputs(inputs)
    params = inspect.signature(entry.fn).parameters
    unknown = sorted(set(hp) - set(params))
    if unknown:
        raise ValueError(f"preference loss {loss!r} takes no {unknown}{did_you_mean(unknown[0], params)}; its "
                         f"keywords: {sorted(k for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)}")
    for name, value in hp.items():
        if params[name].default is not inspect.Parameter.empty:
            check_value(f"preference loss {loss!r}", name, value, params[name].default)
        if name in entry.choices:
            check_choice(f"preference loss {loss!r}", name, value, entry.choices[name])
    if entry.check is not None:
        entry.check(**hp)
    probe_settings(loss_call(entry), hp, inputs=tuple(kw for kw, _ in specs))


# The preference objective's own metric; the rest of its metrics are the loss's (`registry.preference`'s logs).
PREFERENCE_LOGS = {
    "loss/preference": ("Preference objective value on the step's pairs.",
                        "Falls from its value at the reference: ln 2 for DPO and cDPO, 0.5 for KTO, 1 for hinge and "
                        "REFUEL, 1/(2 beta)^2 = 25 for IPO. Regression losses keep a floor; a rise: pairs unlearned."),
}


@registry.objective(
    "preference", title="Preference losses on the update's batch", family="preference", reads=preference_reads,
    whole_groups=True, check=check_preference,
    coefficients={"kl_coef": "beta"},
    summary="Sum each ranked response's token log-probs, reshape to [items, K], and apply the registered "
            "preference loss `loss` (DPO, IPO, SPPO, LiPO, ...) on its layout, with the per-item inputs it takes.",
    equation=r"s_{n,k} = \textstyle\sum_t \log\pi_\theta(y_{n,k,t}\mid x_n, y_{n,k,<t}),\quad "
             r"\mathcal{L} = \ell_{\text{loss}}(s_{n,1}, s_{n,K}, s^{ref}_{n,1}, s^{ref}_{n,K})", logs=PREFERENCE_LOGS)
def preference(logp, old_logp, advantages, mask, *, agg=None, denom=None, loss="dpo", inputs=(), group=None,
               ref_logp=None, **fields_and_hp):
    """(loss, metrics) of registered preference loss `loss` over the batch's items; `agg` and `denom` are unused (a
    preference loss averages over items). Batch fields the inputs need arrive as keywords (`preference_reads`);
    every other keyword is the loss's own (beta, ...)."""
    entry = registry.get("preference", loss)
    specs = parse_inputs(inputs)
    fields = {name: fields_and_hp.pop(name) for name in set(SOURCES[s][0] for _, s in specs) if name in fields_and_hp}
    fields.update(mask=mask, logp=logp, ref_logp=ref_logp)
    items = {}
    for name, value in fields.items():
        rows = sequence_logp(value, mask) if name in SEQUENCE_FIELDS else value
        items[name] = by_item(rows, group)
    s, r = items["logp"], items["ref_logp"]
    kw = {**fields_and_hp, **{k: ROWS[SOURCES[src][1]](items[SOURCES[src][0]]) for k, src in specs}}
    value, metrics = call_loss(entry, s, r, kw)
    return value, {"loss/preference": value.item(), **metrics}
