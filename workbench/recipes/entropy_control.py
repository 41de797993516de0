"""F3 recipes, entropy regularizers and controllers: EPO, SAFE (and its KL control), LLDS, SAC's temperature.

All on GRPO advantages except SAFE, whose paper trains a critic (A = R - V, whitened: `gae` with gamma = lam = 1).
"""
from workbench.recipes.base import Recipe, define, use
from workbench.regularizers.epo import EPO_TITLE
from workbench.regularizers.safe import SAFE_TITLE
from workbench.regularizers.sac_temperature import SAC_TITLE

LOW_VAR_KL = dict(estimator="k3", value_clamp=10.0)  # verl `low_var_kl`

define(Recipe(
    key="epo", title=EPO_TITLE,
    summary="GRPO plus EPO's entropy term: bonus 0.001 H minus a penalty on tokens whose entropy leaves "
            "[0, 2] x the historical mean of their turn (README runs), weighted by the phase schedule; "
            "max_steps=1 applies the band from turn 0 (the paper: from turn 25), so one-turn tasks use it too.",
    advantage=["grpo"], agg="token-mean",
    regularizers=[use("epo", low=0.0, high=2.0, out_range_penalty=0.1, max_steps=1),
                  use("kl-penalty", beta=0.01, **LOW_VAR_KL)],  # the GRPO branch of general_running_server.sh
    controllers=[use("epo", into="regularizer:epo.history")],
    schedules=[use("epo", into="regularizer:epo.phase_weight")]))

define(Recipe(
    key="safe-kl-control", title=SAFE_TITLE,
    summary="GRPO with PPO clip 0.2 and SAFE's trust region instead of a fixed KL term: 0.1 (kl_s - theta)^2 on the "
            "short-EMA KL above a PID/phase-controlled threshold theta in [0.1, 0.6], amplified at low entropy.",
    advantage=["grpo"], agg="token-mean", regularizers=["safe-kl-control"],
    controllers=[use("safe-kl-control", into="regularizer:safe-kl-control")]))

define(Recipe(
    key="safe", title=SAFE_TITLE,
    summary="SAFE: double soft-min critic (alpha 0.3, Huber value loss x 0.5), A = R - V whitened, PPO clip 0.2, "
            "entropy bonus 0.01 and the entropy-gated KL excess penalty with its PID/phase threshold; the paper "
            "trains 2 epochs per batch (--set ppo_epochs=2).",
    advantage=[use("gae", gamma=1.0, lam=1.0, whiten=True)], agg="token-mean", regularizers=["safe"],
    value="safe", controllers=[use("safe-kl-control", into="regularizer:safe")]))

define(Recipe(
    key="llds", title="On GRPO Collapse in Search-R1: The Lazy Likelihood-Displacement Death Spiral",
    summary="GRPO plus 0.1 x relu(old - logp) on the A >= 0 tokens of actions whose likelihood fell in the update; "
            "old_logp = logp on an on-policy step's first minibatch, so it acts from the second minibatch or epoch "
            "on (--set ppo_epochs=2).",
    advantage=["grpo"], agg="token-mean",
    regularizers=["llds", use("kl-penalty", beta=0.001, **LOW_VAR_KL)]))  # train_grpo_nqhot.sh

define(Recipe(
    key="sac-temperature", title=SAC_TITLE,
    summary="GRPO plus an entropy bonus alpha H whose alpha is learned as SAC's temperature: log alpha descends "
            "alpha (H - 0.5 nats) with Adam after every step (starts at 0.01, lr 0.05 for short runs).",
    advantage=["grpo"], agg="seq-mean-token-mean",
    regularizers=[use("sac-temperature", alpha=0.01), use("kl-penalty", beta=0.04, estimator="k3")],
    controllers=[use("sac-temperature", into="regularizer:sac-temperature.alpha", lr=0.05)]))
