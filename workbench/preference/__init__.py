"""Preference objectives (family F7): `fn(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, **hp)`."""
from workbench.preference import kto, pairwise  # noqa: F401
from workbench.preference import games, selfplay  # noqa: F401
from workbench.preference import amortized, listwise, proximal, stepwise  # noqa: F401
