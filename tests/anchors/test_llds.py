"""Agreement with the LLDS authors' code (vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1,
`verl/workers/actor/dp_actor.py`, commit c19a0942), transcribed in tests/anchors/formulas_entropy.py."""
import pytest
import torch

from tests.helpers import D, anchor_mask, assert_agree, seeded
from tests.anchors.formulas_entropy import llds_loss_noreduce
from tests.regularizers.test_llds import run


@pytest.mark.covers("llds")
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("gate, chunk", [("action", True), ("response", False)])
def test_matches_the_released_code(seed, gate, chunk):
    g = seeded(seed)
    B, T = 8, 10
    mask = anchor_mask(B, T, g, holes=True)
    old = -2 * torch.rand(B, T, generator=g, dtype=D)
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    A = torch.randn(B, T, generator=g, dtype=D)  # per-token signs split actions, as the code's chunking does
    theirs = llds_loss_noreduce(logp, old, A, mask, no_reduce_lambda=0.2, chunk_noreduce=chunk)
    ours, _ = run(logp, old, A, mask, coef=0.2, gate=gate)
    assert theirs.item() > 0
    assert_agree(ours, theirs, leaf=logp)
