"""Preference recipes: the same pipeline as every recipe, with a preference data source as the rollout, a
preference loss as the objective (`workbench/objectives/preference.py`) and, for iterated methods, a reference that
moves (`workbench/references/builders.py`).

Offline recipes draw each step's items from data built once (sampler `none`: no task examples); online ones label
the policy's own samples of the step's prompts with the task's verifier.
"""
from workbench.recipes.base import Recipe, define, use

OFFLINE = {"sampler": "none"}  # the rollout brings its own items (kept as its state)


def loss(key: str, *inputs: str, **kw):
    """The objective: preference loss `key` with its keywords and the per-item inputs it takes ("kw=source")."""
    return use("preference", loss=key, inputs=tuple(inputs), **kw)


define(Recipe(
    key="dpo", title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    summary="Sigmoid loss on the implicit reward margin beta * (log-ratio of chosen - of rejected).",
    objective=loss("dpo", beta=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="ipo", title="A General Theoretical Paradigm to Understand Learning from Human Preferences",
    summary="Squared regression of the log-ratio margin onto 1/(2 beta): bounded, no overfitting to "
            "deterministic preferences (summed log-probs, the paper's convention).",
    objective=loss("ipo", beta=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="cdpo-robust", title="Provably Robust DPO: Aligning Language Models with Noisy Feedback",
    summary="DPO with label smoothing (cDPO, eps = 0.1) for noisy preference labels.",
    objective=loss("cdpo-robust", beta=0.1, label_smoothing=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="hinge", title="SLiC-HF: Sequence Likelihood Calibration with Human Feedback",
    summary="Hinge loss on the implicit reward margin (TRL's relu(1 - beta * margin)).",
    objective=loss("hinge", beta=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="simpo", title="SimPO: Simple Preference Optimization with a Reference-Free Reward",
    summary="Reference-free: length-averaged log-prob margin beyond gamma = 0.5 beta (beta = 2).",
    objective=loss("simpo", "chosen_len", "rejected_len", beta=2.0, gamma_beta_ratio=0.5),
    rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="kto", title="KTO: Model Alignment as Prospect Theoretic Optimization",
    summary="Unpaired prospect-theoretic loss: chosen answers as desirable, rejected as undesirable.",
    objective=loss("kto", beta=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="online-dpo", title="Direct Language Model Alignment from Online AI Feedback",
    summary="DPO on pairs sampled from the current policy each step and judged by the verifier.",
    objective=loss("online-dpo", beta=0.1), rollout=use("sampled-pairs")))

define(Recipe(
    key="sppo", title="Self-Play Preference Optimization for Language Model Alignment",
    summary="Iterative self-play: regress each response's log-ratio to the previous iterate onto eta * "
            "(win rate against the policy - 1/2); the reference moves to the policy every iteration.",
    objective=loss("sppo", "chosen_winrate", "rejected_winrate", beta=0.1), rollout=use("sampled-pairs"),
    reference=use("iterate", every=5)))

define(Recipe(
    key="refuel", title="Regressing the Relative Future: Efficient Policy Optimization for Multi-turn RLHF",
    summary="Regress the log-ratio margin onto eta * (reward difference) of the verified pair.",
    objective=loss("refuel", "chosen_reward", "rejected_reward", eta=1.0), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="p3o", title="Pairwise Proximal Policy Optimization: Harnessing Relative Feedback for LLM Alignment",
    summary="Pairwise policy gradient on the reward difference with PPO-style clipping, KL-regularized reward.",
    objective=loss("p3o", "chosen_reward", "rejected_reward", beta=0.1), rollout=use("task-pairs"), **OFFLINE))

define(Recipe(
    key="lipo", title="LiPO: Listwise Preference Optimization through Learning-to-Rank",
    summary="Listwise: K = 4 responses per prompt ranked by the verifier (and length), LambdaLoss-weighted "
            "pairwise logistic terms.",
    objective=loss("lipo", beta=0.1), rollout=use("task-lists", list_size=4), **OFFLINE))

define(Recipe(
    key="inpo",
    title="Iterative Nash Policy Optimization: Aligning LLMs with General Preferences via No-Regret Learning",
    summary="Online mirror descent on the preference game: IPO-style regression anchored at the geometric mixture "
            "of the fixed reference and the previous iterate pi_t, which moves to the policy every 5 steps.",
    objective=loss("inpo", "prev_chosen_logp", "prev_rejected_logp", beta=0.1, tau=0.03), rollout=use("sampled-pairs"),
    reference=use("previous-iterate", every=5)))

define(Recipe(
    key="nash-mp", title="Accelerating Nash Learning from Human Feedback via Mirror Prox",
    summary="Mirror-prox steps of the regularized preference game: pairs from the moving iterate (the opponent), "
            "prox centre pi^k = the previous iterate, updated every 5 steps; fixed reference.",
    objective=loss("nash-mp", "prev_chosen_logp", "prev_rejected_logp", beta=0.1, eta=5.0),
    rollout=use("sampled-pairs"),
    reference=use("previous-iterate", every=5)))

define(Recipe(
    key="apo-accelerated", title="Accelerated Preference Optimization for Large Language Model Alignment",
    summary="Iterative DPO with Nesterov momentum: every 5 steps the reference becomes the policy, and DPO is "
            "taken against (1 + alpha) log pi^_t - alpha log pi^_{t-1} (alpha = 0.3).",
    objective=loss("apo-accelerated", "prev_ref_chosen_logp=prev_chosen_logp",
                   "prev_ref_rejected_logp=prev_rejected_logp", beta=0.1, alpha=0.3),
    rollout=use("sampled-pairs"),
    reference=use("momentum", every=5)))

define(Recipe(
    key="brain", title="BRAIn: Bayesian Reward-conditioned Amortized Inference for natural language generation "
                       "from feedback",
    summary="K = 4 policy samples per prompt; distil the reward-conditioned posterior pi_ref(y) sigma((r - r0)/beta) "
            "into the policy by self-normalised importance weights (verifier rewards, beta = 0.25).",
    objective=loss("brain", "rewards=list_rewards", beta=0.25), rollout=use("sampled-lists", list_size=4)))

define(Recipe(
    key="spo-prefdeg", title="Self-supervised Preference Optimization: Enhance Your Language Model with Preference "
                             "Degree Awareness",
    summary="DPO plus a ranking loss over copies of the chosen answer with 1/3 and 2/3 of its digits removed "
            "(the key content), lambda = 0.1.",
    objective=loss("spo-prefdeg", "degraded_logp", "ref_degraded_logp", beta=0.1, lam=0.1),
    rollout=use("degraded-pairs"), **OFFLINE))

define(Recipe(
    key="mcts-dpo", title="Monte Carlo Tree Search Boosts Reasoning via Iterative Preference Learning",
    summary="Step-level DPO on sibling steps: from a random step boundary of a sampled answer, G next steps "
            "(2 characters) valued by 4 rollouts each; best vs worst sibling, summed from the branching point. The "
            "values' conservative label smoothing is off: on [0, 1] values it is q_w/(1+q_w), 0.5 (no gradient) "
            "for a surely correct step.",
    objective=loss("mcts-dpo", beta=0.1), rollout=use("sibling-steps", step_chars=2, rollouts_per_state=4)))

define(Recipe(
    key="direct-advantage-po",
    title="Improving Multi-Step Reasoning Abilities of Large Language Models with Direct Advantage Policy "
          "Optimization",
    summary="Offline step-level regression of beta log(pi/pi_ref) of each 2-character step of a reference sample "
            "onto its advantage V(s+a) - V(s), values from 4 Monte Carlo rollouts per state.",
    objective=loss("direct-advantage-po", "advantages", beta=0.1),
    rollout=use("advantage-steps", step_chars=2, rollouts_per_state=4), **OFFLINE))
