"""What every pairwise preference loss (dpo, ipo, cdpo-robust, hinge, simpo) and kto shares: registration,
TRL-named metrics, clear errors on bad input. Float64 throughout."""
import pytest
import torch

from tests.helpers import D, lengths, pairs
from workbench import registry

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")

KEYS = ("dpo", "ipo", "cdpo-robust", "hinge", "simpo", "kto")


def call(key, *args, **kw):
    return registry.get("preference", key).fn(*args, **kw)


@pytest.mark.covers(*KEYS)
def test_registered_with_equation_docstring_and_trl_metrics():
    for key in KEYS:
        e = registry.get("preference", key)
        assert e.equation and e.fn.__doc__ and "beta" in e.defaults, key
    c, r, rc, rr = pairs()
    n_w, n_l = lengths()
    for key in KEYS:
        kw = {"chosen_len": n_w, "rejected_len": n_l} if key == "simpo" else {}
        loss, m = call(key, c, r, rc, rr, **kw)
        assert loss.dim() == 0 and loss.dtype == D and torch.isfinite(loss), key
        for name in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                     "logps/chosen", "logps/rejected"):
            assert isinstance(m[name], float), (key, name)


@pytest.mark.covers(*KEYS)
def test_bad_input_is_a_clear_value_error():
    c, r, rc, rr = pairs()
    n_w, n_l = lengths()
    for key in KEYS:
        kw = {"chosen_len": n_w, "rejected_len": n_l} if key == "simpo" else {}
        with pytest.raises(ValueError, match="shape"):
            call(key, c, r[:-1], rc, rr, **({} if key == "simpo" else kw))
        bad = c.detach().clone()
        bad[2] = float("nan")
        with pytest.raises(ValueError, match="NaN"):
            call(key, bad, r, rc, rr, **kw)
        e = torch.zeros(0, dtype=D)
        with pytest.raises(ValueError, match="empty"):
            call(key, e, e, e, e, **({"chosen_len": e, "rejected_len": e} if key == "simpo" else {}))
