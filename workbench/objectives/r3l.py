"""R³L's policy loss: REINFORCE on the amplified advantages, no ratio, no clip, scaled by 1 / (1 + tau).

    l = agg_t( -A_t log pi_theta(y_t) ) / (1 + tau)      tau = 1 (the released runs: OPMD's loss), 0 (the paper's)

On-policy, the gradient of -A log pi is the policy gradient; retries sampled under a guided prompt are trained as if
the plain prompt had produced them, where an importance ratio pi / pi_old would compare two different prompts'
distributions, so none is taken (the paper: "we remove both importance sampling and KL constraints"). The 1 / (1 + tau)
is OPMD's: its loss is the mirror-descent step with regularization strength tau towards the current policy.

Reference: shiweijiezero/R3L @ d503f6c6b0725a4e8a39311e6f9b71de6bb2f64b,
`trinity/algorithm/policy_loss_fn/opmd_policy_loss.py::OPMDPolicyLossFn.__call__` (L20-30: `-advantages * logprob`,
`masked_loss(..., "token-mean")`, `/ (1.0 + self.tau)`, defaults tau 1.0 and token-mean, L32-34); the algorithm
`opmd_reweight_adv` (`trinity/algorithm/algorithm.py` L197-218) adds `kl_loss_fn: k2` at its default kl_coef 0.001
(`trinity/algorithm/kl_fn/kl_fn.py` L101): the recipe's `kl-penalty` regularizer, outside this loss as there.
Paper: shiweijiezero/Trinity-RFT `writing/ARR_EMNLP_R3L/paper_arxiv/main.tex`, eq. `R3L`: -E[(1/|tau|) sum mask A^ log
pi] + L_SFT, i.e. tau = 0 and `agg="seq-mean-token-mean"` with no KL. Transcribed in tests/anchors/formulas_r3l.py.

Differences: the reference's `masked_mean` adds 1e-8 to the token count (here `ops.aggregate`, none; a batch
always has tokens). The paper's 1/|tau| counts a trajectory's tokens; seq-mean-token-mean here counts its trained
(mask 1) tokens, the pivot-masked prefix excluded. It is `objective:gpg` divided by (1 + tau): the same metrics.
"""
from __future__ import annotations

from workbench import registry
from workbench.objectives.ppo import CLIP_LOGS
from workbench.objectives.reinforce import reinforce
from workbench.advantages.r3l import R3L_TITLE


def check_tau(*, tau=1.0, **_) -> None:
    if not isinstance(tau, (int, float)) or isinstance(tau, bool) or tau < 0:
        raise ValueError(f"tau={tau!r}: OPMD's regularization strength must be a number >= 0 (the loss is divided "
                         "by 1 + tau; 1 in the released runs, 0 for the paper's plain loss)")


@registry.objective(
    "r3l", title=R3L_TITLE,
    summary="-A log pi with no ratio and no clip, divided by 1 + tau (OPMD's loss, tau = 1 in the released runs; "
            "tau = 0 is the paper's).",
    equation=r"\ell = \frac{1}{1+\tau}\,\mathrm{agg}_t\!\left(-\hat A_t \log\pi_\theta(y_t \mid x, y_{<t})\right)",
    logs={k: CLIP_LOGS[k] for k in ("ratio/mean", "ratio/max", "kl/k1_old", "clip/region")}, check=check_tau)
def opmd_loss(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, tau=1.0):
    """`objective:gpg`'s loss and metrics, the loss divided by 1 + tau (`old_logp` only feeds the drift metrics)."""
    check_tau(tau=tau)
    loss, metrics = reinforce(logp, old_logp, advantages, mask, agg=agg, denom=denom)
    return loss / (1.0 + tau), metrics
