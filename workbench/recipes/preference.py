"""Preference recipes: offline pairs labelled by the task's verifier, or online items from the policy."""
from workbench.recipes.base import PreferenceRecipe, define

define(PreferenceRecipe(
    key="dpo", title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    summary="Sigmoid loss on the implicit reward margin beta * (log-ratio of chosen - of rejected).",
    loss="dpo", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="ipo", title="A General Theoretical Paradigm to Understand Learning from Human Preferences",
    summary="Squared regression of the log-ratio margin onto 1/(2 beta): bounded, no overfitting to "
            "deterministic preferences (summed log-probs, the paper's convention).",
    loss="ipo", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="cdpo-robust", title="Provably Robust DPO: Aligning Language Models with Noisy Feedback",
    summary="DPO with label smoothing (cDPO, eps = 0.1) for noisy preference labels.",
    loss="cdpo-robust", loss_kw={"beta": 0.1, "label_smoothing": 0.1}))

define(PreferenceRecipe(
    key="hinge", title="SLiC-HF: Sequence Likelihood Calibration with Human Feedback",
    summary="Hinge loss on the implicit reward margin (TRL's relu(1 - beta * margin)).",
    loss="hinge", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="simpo", title="SimPO: Simple Preference Optimization with a Reference-Free Reward",
    summary="Reference-free: length-averaged log-prob margin beyond gamma = 0.5 beta (beta = 2).",
    loss="simpo", loss_kw={"beta": 2.0, "gamma_beta_ratio": 0.5}, loss_inputs=("chosen_len", "rejected_len")))

define(PreferenceRecipe(
    key="kto", title="KTO: Model Alignment as Prospect Theoretic Optimization",
    summary="Unpaired prospect-theoretic loss: chosen answers as desirable, rejected as undesirable.",
    loss="kto", loss_kw={"beta": 0.1}))

define(PreferenceRecipe(
    key="online-dpo", title="Direct Language Model Alignment from Online AI Feedback",
    summary="DPO on pairs sampled from the current policy each step and judged by the verifier.",
    loss="online-dpo", loss_kw={"beta": 0.1}, online=True))

define(PreferenceRecipe(
    key="sppo", title="Self-Play Preference Optimization for Language Model Alignment",
    summary="Iterative self-play: regress each response's log-ratio to the previous iterate onto eta * "
            "(win rate against the policy - 1/2); the reference moves to the policy every iteration.",
    loss="sppo", loss_kw={"beta": 0.1}, loss_inputs=("chosen_winrate", "rejected_winrate"), online=True,
    iteration_steps=5))

define(PreferenceRecipe(
    key="refuel", title="Regressing the Relative Future: Efficient Policy Optimization for Multi-turn RLHF",
    summary="Regress the log-ratio margin onto eta * (reward difference) of the verified pair.",
    loss="refuel", loss_kw={"eta": 1.0}, loss_inputs=("chosen_reward", "rejected_reward")))

define(PreferenceRecipe(
    key="p3o", title="Pairwise Proximal Policy Optimization: Harnessing Relative Feedback for LLM Alignment",
    summary="Pairwise policy gradient on the reward difference with PPO-style clipping, KL-regularized reward.",
    loss="p3o", loss_kw={"beta": 0.1}, loss_inputs=("chosen_reward", "rejected_reward")))

define(PreferenceRecipe(
    key="lipo", title="LiPO: Listwise Preference Optimization through Learning-to-Rank",
    summary="Listwise: K = 4 responses per prompt ranked by the verifier (and length), LambdaLoss-weighted "
            "pairwise logistic terms.",
    loss="lipo", loss_kw={"beta": 0.1}, data="lists", list_size=4))

define(PreferenceRecipe(
    key="inpo",
    title="Iterative Nash Policy Optimization: Aligning LLMs with General Preferences via No-Regret Learning",
    summary="Online mirror descent on the preference game: IPO-style regression anchored at the geometric mixture "
            "of the fixed reference and the previous iterate pi_t, which moves to the policy every 5 steps.",
    loss="inpo", loss_kw={"beta": 0.1, "tau": 0.03}, loss_inputs=("prev_chosen_logp", "prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="prev"))

define(PreferenceRecipe(
    key="nash-mp", title="Accelerating Nash Learning from Human Feedback via Mirror Prox",
    summary="Mirror-prox steps of the regularized preference game: pairs from the moving iterate (the opponent), "
            "prox centre pi^k = the previous iterate, updated every 5 steps; fixed reference.",
    loss="nash-mp", loss_kw={"beta": 0.1, "eta": 5.0}, loss_inputs=("prev_chosen_logp", "prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="prev"))

define(PreferenceRecipe(
    key="apo-accelerated", title="Accelerated Preference Optimization for Large Language Model Alignment",
    summary="Iterative DPO with Nesterov momentum: every 5 steps the reference becomes the policy, and DPO is "
            "taken against (1 + alpha) log pi^_t - alpha log pi^_{t-1} (alpha = 0.3).",
    loss="apo-accelerated", loss_kw={"beta": 0.1, "alpha": 0.3},
    loss_inputs=("prev_ref_chosen_logp=prev_chosen_logp", "prev_ref_rejected_logp=prev_rejected_logp"),
    online=True, iteration_steps=5, iteration_update="momentum"))

define(PreferenceRecipe(
    key="brain", title="BRAIn: Bayesian Reward-conditioned Amortized Inference for natural language generation "
                       "from feedback",
    summary="K = 4 policy samples per prompt; distil the reward-conditioned posterior pi_ref(y) sigma((r - r0)/beta) "
            "into the policy by self-normalised importance weights (verifier rewards, beta = 0.25).",
    loss="brain", loss_kw={"beta": 0.25}, loss_inputs=("rewards=list_rewards",), online=True, data="lists",
    list_size=4))

define(PreferenceRecipe(
    key="spo-prefdeg", title="Self-supervised Preference Optimization: Enhance Your Language Model with Preference "
                             "Degree Awareness",
    summary="DPO plus a ranking loss over copies of the chosen answer with 1/3 and 2/3 of its digits removed "
            "(the key content), lambda = 0.1.",
    loss="spo-prefdeg", loss_kw={"beta": 0.1, "lam": 0.1}, loss_inputs=("degraded_logp", "ref_degraded_logp"),
    data="degraded"))

define(PreferenceRecipe(
    key="mcts-dpo", title="Monte Carlo Tree Search Boosts Reasoning via Iterative Preference Learning",
    summary="Step-level DPO on sibling steps: from a random step boundary of a sampled answer, G next steps "
            "(2 characters) valued by 4 rollouts each; best vs worst sibling, summed from the branching point. The "
            "values' conservative label smoothing is off: on [0, 1] values it is q_w/(1+q_w), 0.5 (no gradient) "
            "for a surely correct step.",
    loss="mcts-dpo", loss_kw={"beta": 0.1}, online=True, data="siblings", step_chars=2, rollouts_per_state=4))

define(PreferenceRecipe(
    key="direct-advantage-po",
    title="Improving Multi-Step Reasoning Abilities of Large Language Models with Direct Advantage Policy "
          "Optimization",
    summary="Offline step-level regression of beta log(pi/pi_ref) of each 2-character step of a reference sample "
            "onto its advantage V(s+a) - V(s), values from 4 Monte Carlo rollouts per state.",
    loss="direct-advantage-po", loss_kw={"beta": 0.1}, loss_inputs=("advantages",), data="steps", step_chars=2,
    rollouts_per_state=4))
