"""F2 masks and reweightings: DISPO's four-bound IS mask, HiSPO's sequence + token masks, GUI-Libra's
success-adaptive negatives under a KL trust region, VSPO's value-based resampling and value-smoothing clip."""
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="dispo", title="DISPO: Enhancing Training Efficiency and Stability in Reinforcement Learning for Large "
                       "Language Model Mathematical Reasoning",
    summary="GRPO advantages, CISPO-style -sg(r) A logp with separate up/down bounds for correct and incorrect "
            "responses (0.2/0.28 each) and no gradient outside them; token-level loss, no KL.",
    advantage=["grpo"], objective="dispo", agg="token-mean"))

define(Recipe(
    key="hispo", title="LongCat-Flash-Prover: Advancing Native Formal Reasoning via Agentic Tool-Integrated "
                       "Reinforcement Learning",
    summary="GRPO advantages and PPO clip (0.2/0.28), with sequences masked when their geometric-mean engine "
            "mismatch pi_old/mu leaves [1/2, 2] and tokens masked when pi_theta/mu leaves [0.8, 1.28].",
    advantage=["grpo"], objective="hispo", agg="seq-mean-token-mean"))

define(Recipe(
    key="gui-libra", title="GUI-Libra: Training Native GUI Agents to Reason and Act with Action-aware Supervision "
                           "and Partially Verifiable RL",
    summary="GRPO whose negative advantages are scaled by clip(0.5 + 1.5 x group success rate, 0, 1), with a k3 "
            "KL trust region in the loss (beta 0.001) and PPO clip 0.2 with dual clip 3 (EasyR1), token-level "
            "loss. The action-aware SFT warm start is outside RL training and not modelled.",
    advantage=["grpo", "gui-libra"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0,
                                                   logr_clamp=20.0),
    agg="token-mean", regularizers=[use("kl-penalty", beta=0.001, estimator="k3", value_clamp=10.0)]))

define(Recipe(
    key="vspo", title="Enhancing Agentic RL with Progressive Reward Shaping and Value-based Sampling Policy "
                      "Optimization",
    summary="GRPO whose zero-variance groups are replaced by resampled prompts of highest task value p(1 - p) "
            "(smoothed pass rates), and whose clip band shrinks with the prompt's task value (value-smoothing "
            "clip); the PRS reward half is not part of this recipe.",
    advantage=["grpo"], objective="vspo", agg="seq-mean-token-mean", group_transforms=["vspo"],
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3")]))
