"""What every logged metric measures, and what a healthy curve of it looks like.

`GLOSSARY`: metric name -> what it measures (one line). `HEALTHY`: metric name -> the healthy range or shape of
its curve on these runs, and what a bad curve means. Both have exactly the same keys, in the same order; every
metric a recipe logs is a key (tests/train/test_trainer.py, tests/train/test_pipeline.py), and notebook 06 and the
book's glossary page show them side by side.
"""
from __future__ import annotations

import re

PER_REWARD = re.compile(r"rewards/[^/]+/(mean|std)")  # one pair per reward of a recipe: "rewards/<name>/mean"

GLOSSARY: dict[str, str] = {
    "step": "RL step index (one rollout batch per step), starting at 0.",
    "reward/mean": "Mean outcome reward of the sampled responses; rises as the policy improves.",
    "reward/std": "Std of rewards over the batch; near 0 means no learning signal is left in the groups.",
    "rewards/<name>/mean": "Mean of one reward of the recipe ('task': the environment's verifier; otherwise the reward "
                           "function's key) over the rows it applies to, before weights and aggregation (TRL's name).",
    "rewards/<name>/std": "Std of that reward over the rows it applies to (Bessel-corrected, as TRL).",
    "rewards/unscorable_frac": "Share of rows no reward applies to (every reward returned None): masked out of the update.",
    "rewards/adasearch/search_rate": "AdaSearch: share of rows that made a search (tool) call.",
    "rewards/adasearch/decision_acc": "AdaSearch: share of rows (oracle known) whose search-or-not decision matches "
                                      "whether the question is solvable without search.",
    "rewards/adasearch/f1_aware": "AdaSearch's F1_aware: F1 of the 'no search' decisions against 'solvable "
                                  "parametrically' (the positive class), over rows with a known oracle.",
    "rewards/act/parsed": "ACT: share of critic rows whose completion names one of the two candidates.",
    "rewards/act/first_label": "ACT: share of parsed choices naming the first-listed candidate (A).",
    "rewards/apo-a2fm/cost": "A^2FM: mean min(cost / cost_max, 1) of the correct rows (mode + tokens + tool calls).",
    "rewards/apo-a2fm/frac_instant": "A^2FM: share of rows in instant mode.",
    "rewards/apo-a2fm/frac_reasoning": "A^2FM: share of rows in reasoning mode.",
    "rewards/apo-a2fm/frac_agentic": "A^2FM: share of rows in agentic mode.",
    "rewards/apo-a2fm/acc_instant": "A^2FM: accuracy of the instant-mode rows.",
    "rewards/apo-a2fm/acc_reasoning": "A^2FM: accuracy of the reasoning-mode rows.",
    "rewards/apo-a2fm/acc_agentic": "A^2FM: accuracy of the agentic-mode rows.",
    "rewards/spear-tool-reward/tool_calls": "SPEAR: mean n per row the tool reward counts (calls that ran, or steps).",
    "rewards/spear-tool-reward/coef": "SPEAR: this step's c(t) = (cos(pi t/T_tool) + 1)/2 (0 after T_tool).",
    "rewards/prs/stage": "PRS: the reward's stage this step (1: format only; 2: 0.2 format + 0.8 answer BLEU).",
    "rewards/prs/format": "PRS: mean r_format, the share of well-formed steps (parsed calls, uncut answer).",
    "rewards/prs/compliance": "PRS: share of rows whose every step is well formed (stage 2 once it passes 0.9).",
    "rewards/prs/answer": "PRS (stage 2): mean r_answer: length-aware BLEU of a span answer, else the verifier's 0/1.",
    "rewards/fapo/flawed_frac": "FAPO: share of flawed positives (correct answers whose steps the detector flags) "
                                "among the correct rows.",
    "rewards/rlvmr/planning_frac": "RLVMR: share of steps tagged <planning>.",
    "rewards/rlvmr/explore_frac": "RLVMR: share of steps tagged <explore>.",
    "rewards/rlvmr/reflection_frac": "RLVMR: share of steps tagged <reflection>.",
    "rewards/rlvmr/invalid_frac": "RLVMR: share of invalid steps (a tool_error), each 0.1 off its episode score.",
    "rewards/rlvmr/redundant_frac": "RLVMR: share of <explore> steps that earned nothing: their action repeats an "
                                    "earlier valid one.",
    "rewards/rl4mle-milestones/reached_frac": "RL4MLE: share of milestones (the expert's intermediate results) the "
                                              "episodes' tool calls reached.",
    "rewards/srpo-reflection/accuracy": "SRPO: mean accuracy term (first -> last answer: wrong->right 1, right->right "
                                        "0.75, right->wrong 0.25, wrong->wrong 0; one right answer 0.5).",
    "rewards/srpo-reflection/format": "SRPO: mean format term (0.5 for think, answer, reflection, think, answer).",
    "rewards/srpo-reflection/length": "SRPO: mean length term 0.1 exp(-(|L - T| / (T_max - T))^2), T = 2 x the first "
                                      "think + answer (0 without two think and two answer blocks).",
    "rewards/reflexicoder/format": "ReflexiCoder: share of rows with a valid think -> answer -> (reflection -> answer)+ "
                                   "trajectory (F).",
    "rewards/reflexicoder/reflections": "ReflexiCoder: mean number of reflection rounds n (0 for invalid rows).",
    "rewards/reflexicoder/cycle": "ReflexiCoder: mean cycle regulation P(n) (1 for 1..5 rounds, less beyond, 0 invalid).",
    "rewards/reflexicoder/quality": "ReflexiCoder: mean P(n) R_traj (last answer's score + weighted per-round "
                                    "progress), before its weight 0.5.",
    "rewards/reflexicoder/efficiency": "ReflexiCoder: mean P(n) E, E = r_T / n + (r_T - r_1) / max(1, n - 1).",
    "cgpo/violation_rate": "CGPO: share of samples some judge flags (their calibrated reward is -1).",
    "cgpo/violation/format": "CGPO: share of samples the format judge flags (empty, or cut at the token budget).",
    "cgpo/violation/length": "CGPO: share of samples the length judge flags (an action over max_length_fraction "
                             "of max_new_tokens).",
    "cgpo/violation/copy": "CGPO: share of samples the copy judge flags (the response contains its prompt).",
    "reward:prs.stage": "PRS: the stage its controller set this step (2 once compliance passed the threshold).",
    "eapo/rounds": "EAPO: mean rounds per episode; each round becomes a training row.",
    "eapo/dropped": "EAPO: round rows dropped to cut the set to a multiple of the data-parallel size (< dp_size).",
    "eapo/discount": "EAPO: mean discount gamma^(T-1-t) over the round rows (1 when every episode is one round).",
    "retroagent/coef": "RetroAgent: the intrinsic reward's coefficient this step (exp(-5 t/T), hard-cutoff or fixed).",
    "retroagent/completion": "RetroAgent: mean completion fraction c the reflector gave the episodes (1 when solved).",
    "retroagent/intrinsic": "RetroAgent: mean intrinsic reward coef x max(0, c - phi) added to the rows' rewards.",
    "retroagent/improved_frac": "RetroAgent: share of rows that completed more of their task than its best prior phi.",
    "accuracy": "Fraction of sampled responses the verifier accepts (at the sampling temperature).",
    "frac_zero_std_groups": "Share of groups whose rewards are all equal: their group advantage is 0.",
    "advantage/mean": "Mean advantage over valid tokens (about 0 for centred estimators).",
    "advantage/abs_mean": "Mean |advantage| over valid tokens: the size of the learning signal.",
    "entropy": "Mean full-vocabulary token entropy of the policy on its own samples (nats); a collapse to 0 "
               "means no exploration.",
    "kl": "Mean per-token KL(pi || ref) estimate (recipe's estimator) to the frozen reference; grows slowly "
          "when healthy. KTO logs its batch KL baseline z_ref under this name (0 here: no mismatched pairs).",
    "kl_coef": "KL coefficient used this step when a controller drives it (adaptive-kl).",
    "kl/k1_old": "mean(old_logp - logp): how far the update moved from the sampling policy (cleanrl old_approx_kl).",
    "kl/k3_old": "mean((r - 1) - log r), a non-negative estimate of the same drift (cleanrl approx_kl).",
    "clip/region": "Fraction of tokens where PPO's clipped branch is active (clip/low + clip/high); 0 on the "
                   "first minibatch after a rollout since r = 1 there.",
    "clip/high": "Fraction of tokens with A > 0 and r > 1 + eps_high (update stopped from pushing further up).",
    "clip/low": "Fraction of tokens with A < 0 and r < 1 - eps_low.",
    "clip/out_of_band": "Fraction of tokens with r outside [1 - eps_low, 1 + eps_high], whatever the sign of A.",
    "clip/dual": "Fraction of tokens where the dual-clip cap -c A is active.",
    "ratio/mean": "Mean importance ratio pi/pi_old over valid tokens (1 when on-policy).",
    "ratio/max": "Largest token ratio in the batch: spikes flag unstable updates.",
    "loss/policy": "Policy objective value (aggregated), averaged over minibatches.",
    "loss/total": "Total loss optimized: policy + KL + entropy + value terms.",
    "value/loss": "Clipped value loss of the critic (PPO only).",
    "value/clipfrac": "Fraction of tokens where the clipped value branch is larger (PPO only).",
    "value/mean": "Mean predicted value V(s_t) (PPO only).",
    "value/explained_var": "1 - Var(R - V)/Var(R): how much of the return variance the critic explains.",
    "grad_norm": "Global gradient norm before clipping, averaged over optimizer steps.",
    "response_length/mean": "Mean number of policy tokens per response (including EOS).",
    "response_length/max": "Longest response in the batch.",
    "truncated_frac": "Share of responses that hit max_new_tokens without EOS.",
    "sampling/rounds": "Dynamic sampling (DAPO): generation rounds needed to collect informative groups.",
    "sampling/shortfall_groups": "Dynamic sampling: informative groups still missing after the last round.",
    "filtered_frac/min-abs-advantage": "Share of rollouts dropped for a near-zero advantage (LOOP's |A| < 0.01 filter).",
    "filtered_frac/overlong-filter": "Share of rollouts masked out because they were truncated (no EOS in the budget).",
    "filtered_frac/high-entropy-mask": "Share of rollouts left with no token after keeping only the high-entropy ones.",
    "filtered_frac/spo-segment": "Share of rollouts left with no token after SPO's probability mask (every token had "
                                 "p >= 0.9), or with drop_zero no non-zero-advantage token.",
    "mdpo/kl": "MDPO: mean per-token KL(pi || pi_old) estimate (k2) inside the loss.",
    "mdpo/inv_t": "MDPO: the KL weight 1/t_k at this step (grows over training).",
    "mdpo/surrogate": "MDPO: mean r * A, the unclipped surrogate being maximised.",
    "clip/cispo": "CISPO: fraction of tokens with A > 0 whose IS weight hit the cap (their weight is truncated).",
    "cispo/weight_mean": "CISPO: mean stop-gradient IS weight min(r, cap) over valid tokens.",
    "sapo/gate_weight": "SAPO: mean soft-gate derivative 4 s(1 - s), 1 on-policy, smaller where PPO would clip.",
    "sapo/gate_value": "SAPO: mean gate value f_tau(r) = (4/tau) sigmoid(tau (r - 1)); 2/tau on-policy (2 where "
                       "A > 0, 1.90 where A <= 0 with the default taus).",
    "geo/seq_ratio_mean": "GMPO: mean geometric-mean sequence ratio of the log-space-clipped token ratios.",
    "ipa/chunks_per_row": "IPA: mean number of interaction chunks (turns, or runs of policy tokens) per row.",
    "seeupo/correction_mean": "SeeUPO: mean over policy tokens of M = the stopped product of the later turns' ratios "
                              "that multiplies a turn's advantage (1 for the last turn).",
    "seeupo/correction_min": "SeeUPO: smallest correction M on a policy token.",
    "seeupo/correction_max": "SeeUPO: largest correction M on a policy token.",
    "bapo/c_low": "BAPO: lower ratio bound the per-minibatch search settled on (start 0.6, max 0.8).",
    "bapo/c_high": "BAPO: upper ratio bound the per-minibatch search settled on (start 1.2, max 2.0).",
    "bapo/pos_share": "BAPO: share pos / (pos + neg) of r |A| carried by positive-advantage tokens after the search.",
    "gbpo/target_ratio_mean": "GBPO: mean target ratio rho* = 1 - eps_low + (eps_low + eps_high) sigma(target_adv).",
    "gbpo/abs_gap": "GBPO: mean |r - rho*|, how far token ratios are from their targets (the L1 loss before |A|).",
    "r2vpo/ratio_var": "R²VPO: measured ratio variance, token mean of w (r - 1)^2 (what the dual ascent reads).",
    "objective:r2vpo.lam": "R²VPO: the penalty weight lam the dual-ascent controller set for this step.",
    "hapo/high_entropy_frac": "HAPO: share of tokens with h_hat > 0 (log-entropy above its 0.8 quantile).",
    "hapo/redistributed_frac": "HAPO: share of tokens whose advantage was rescaled by (1 + beta h_hat).",
    "hapo/eps_low_mean": "HAPO: mean adapted lower clip eps_low (1 - alpha h_hat) (wider on low-entropy tokens).",
    "hapo/eps_high_mean": "HAPO: mean adapted upper clip eps_high (1 + alpha h_hat) (wider on high-entropy tokens).",
    "aepo_clip/preserved_frac": "AEPO: share of tokens past the clip whose gradient the stop-gradient form keeps.",
    "aepo_clip/high_entropy_frac": "AEPO: share of tokens in the high-entropy set (top rho by entropy).",
    "shaping/offpolicy_frac": "Policy shaping: share of trained tokens that are off-policy (reference solutions).",
    "shaping/offpolicy_prob": "Policy shaping: mean pi_theta of the off-policy tokens (LUFFY's off_policy_prob).",
    "kl/abs_old": "Mean |logp - old_logp|: drift from the sampling policy, sign ignored.",
    "tis/mean_weight": "TIS: mean truncated/masked importance weight exp(old - mu) applied to the loss.",
    "tis/masked_frac": "TIS: fraction of valid tokens whose weight was masked to 0.",
    "rollout_is/mean_weight": "--set rollout_is: mean importance weight exp(old - mu) (truncated or masked) on "
                              "every objective's per-token loss.",
    "rollout_is/masked_frac": "--set rollout_is: fraction of valid tokens a mask mode dropped (weight 0).",
    "mismatch/abs_logp_diff_max": "TIS, MiniRL: largest |old_logp - mu_logp| over a minibatch's tokens (averaged over "
                                  "optimizer steps): rollout-engine vs trainer log-prob mismatch.",
    "mismatch/logp_abs_mean": "Mean |old_logp - mu_logp| over response tokens: trainer vs rollout-engine log-prob "
                              "gap (~1e-7 with HF generate; larger with vLLM or stale engine weights).",
    "mismatch/logp_abs_max": "Largest |old_logp - mu_logp| over the rollout batch's response tokens.",
    "mismatch/is_ratio_mean": "Mean importance ratio exp(old_logp - mu_logp) over response tokens (1 = no mismatch).",
    "mismatch/is_ratio_max": "Largest exp(old_logp - mu_logp) in the batch: what TIS's cap truncates.",
    "clip_cov/detached": "Clip-Cov: number of tokens whose gradient was detached per minibatch (averaged over the "
                         "step's optimizer steps).",
    "clip_cov/detached_frac": "Clip-Cov: fraction of valid tokens detached (high covariance band, random subset).",
    "clip_cov/candidate_frac": "Clip-Cov: fraction of valid tokens inside the covariance band (candidates).",
    "kl_cov/penalized": "KL-Cov: number of top-covariance tokens given the |logp - old| penalty per minibatch "
                        "(averaged over the step's optimizer steps).",
    "kl_cov/penalized_frac": "KL-Cov: fraction of valid tokens penalized.",
    "igpo/belief_first": "IGPO: mean belief b_0 in the ground-truth answer before the first turn (exp of its mean "
                         "token log-prob given the prompt alone).",
    "igpo/belief_last": "IGPO: mean belief before each row's last turn (after its last observation).",
    "igpo/info_gain_mean": "IGPO: mean information-gain turn reward b_{s+1} - b_s over the non-final turns.",
    "infopo/gain_mean": "InfoPO: mean counterfactual signal I_t (next action's mean log-prob with the real observation "
                        "minus with a neutral text) over the turns followed by an observation and an action.",
    "infopo/gain_positive_frac": "InfoPO: share of those turns whose observation made the next action more likely.",
    "reward_shaping:dcpo.temperature": "DCPO: target temperature T the old policy re-scores the batch at (1.2 at or "
                                       "below the entropy target H_0, 0.8 above).",
    "advantage:dcpo.entropy_gap": "DCPO: H_0 - H, the entropy target minus the last step's entropy; alpha = a/(1+a), "
                                  "a = min(|gap|, 0.1) / dcpo/correct_frac.",
    "dcpo/rho_mean": "DCPO: mean target-temperature weight pi_old^(T)(y_t) / pi_old(y_t) over the sampled tokens.",
    "dcpo/correct_frac": "DCPO: share of samples with score > 0.05 (p_correct), the denominator of alpha.",
    "spo/segments": "SPO-chain: mean number of segments per response (the prompt plus every 5th cut before a token "
                    "with p < 0.9).",
    "spo/continuations": "SPO-chain: Monte Carlo continuations sampled this step (K per distinct prefix).",
    "spo/mc_value": "SPO-chain: mean Monte Carlo value V(s) over the estimated segment boundaries.",
    "proact/rollouts": "ProAct: random-policy rollouts run this step for the Monte Carlo values (N per state, "
                       "action).",
    "proact/states": "ProAct: state groups valued this step (same prompt, turn index and environment state).",
    "proact/mc_value": "ProAct: mean Monte Carlo value over the batch's turns (Q_MC of the action taken, or V_MC).",
    "proact/fallback_frac": "ProAct MC-GRPO: share of state groups whose responses all took one action (normalized "
                            "against every move's Q_MC instead of the group's).",
    "group_transform:aepo-arbitrary.temperature": "AEPO: temperature the re-sampled prompts are drawn at (1.2 at or "
                                                  "below the entropy target, 0.8 above).",
    "group_transform:aepo-arbitrary.entropy_gap": "AEPO: entropy target minus the last step's entropy; below 0 "
                                                  "(entropy above the target) halves the rows replaced.",
    "aepo/candidates": "AEPO: re-sampled samples whose GRPO advantage is above 0.05 (correct, in a group not all "
                       "correct).",
    "aepo/replaced": "AEPO: rows of the batch replaced by those samples, trained with advantage exactly 1.",
    "epo/penalty": "EPO: aggregated smoothing penalty w P over tokens whose entropy leaves the band around the "
                   "historical entropy of their turn index (before the c_H c_s factor).",
    "epo/in_band_frac": "EPO: share of the gated tokens (late turns with a history) whose entropy is inside the band "
                        "(the reference's entropy_mask_ratio); 1 when no token is gated.",
    "epo/phase_weight": "EPO: phase weight w on the smoothing penalty this step (1 -> 0.83 over the first half of "
                        "training, 0.8 -> 0.04 over the second).",
    "safe/kl": "SAFE: token mean of logp - ref_logp on the training forward (k1), the KL its controller tracks.",
    "safe/kl_short": "SAFE: short EMA kl_s = 0.9 kl_s' + 0.1 KL compared with the threshold theta.",
    "safe/penalty": "SAFE: 0.1 (kl_s - theta)^2 g(H) where kl_s > theta, else 0.",
    "safe/gate": "SAFE: entropy gate g(H) = max(0.5, 2 / (H + 0.1)) on an active penalty (1 while inactive).",
    "safe/active": "SAFE: share of minibatches whose kl_s exceeded the threshold (penalty on).",
    "regularizer:safe-kl-control.threshold": "SAFE KL control: threshold theta set by the controller (0.3 + PID of the "
                                             "reward velocity, times the phase multiplier, clipped to [0.1, 0.6]).",
    "regularizer:safe-kl-control.kl_short_prev": "SAFE KL control: short KL EMA kl_s' after the previous step.",
    "regularizer:safe.threshold": "SAFE: threshold theta set by the safe-kl-control controller (as above).",
    "regularizer:safe.kl_short_prev": "SAFE: short KL EMA kl_s' after the previous step.",
    "llds/penalty": "LLDS: aggregated relu(old_logp - logp) over the penalized tokens (before lambda).",
    "llds/fell_frac": "LLDS: share of preserving units (actions of A >= 0 tokens) whose summed log-likelihood fell "
                      "during the update.",
    "llds/token_frac": "LLDS: share of valid tokens carrying the likelihood-preserving penalty.",
    "regularizer:sac-temperature.alpha": "SAC temperature: entropy-bonus coefficient alpha = exp(log alpha) set by "
                                         "the controller this step.",
    "minirl/w_mean": "MiniRL: mean IS weight pi_theta / mu_old.",
    "minirl/masked_frac": "MiniRL: fraction of tokens masked for staleness past the clip bound.",
    "capo/masked_frac": "CAPO: fraction of valid tokens rejected (no gradient): predicted KL >= tau_F or "
                        "|shift| >= tau_H.",
    "capo/fisher_frac": "CAPO: fraction of valid tokens whose predicted KL 1/2 lr^2 (v.u)^2 is >= tau_F.",
    "capo/hessian_frac": "CAPO: fraction of valid tokens whose predicted surrogate shift is outside (-tau_H, tau_H).",
    "capo/kl_mean": "CAPO: mean predicted per-token KL of the optimizer's next Adam step on the LM head, were it taken "
                    "on that token's gradient alone.",
    "rover/q_mean": "ROVER: mean Q = rho log(pi / pi_old) of the sampled tokens (0 on the first minibatch after a "
                    "rollout).",
    "rover/next_v_mean": "ROVER: mean uniform-policy value of the next state, rho (mean_v log pi - mean_v log pi_old) "
                         "at s_{t+1} (0 after the last token).",
    "rover/target_mean": "ROVER: mean regression target y = r~ + V_unif(s_{t+1}).",
    "rover/clip_high": "ROVER (use_rover_clip): share of tokens whose Q > log(1 + eps) is held there (target above).",
    "rover/clip_low": "ROVER (use_rover_clip): share of tokens whose Q < log(1 - eps) is held there (target below).",
    "b-coder/q_mean": "B-Coder: mean Q(s_t, a_t) = V(s_t) + alpha (log pi(a_t|s_t) - max log pi(.|s_t)) of the sampled "
                      "tokens.",
    "b-coder/target_mean": "B-Coder: mean conservative Bellman target r_t + gamma Q(s_{t+1}, a*), a* the reference's "
                           "greedy token.",
    "b-coder/td_abs": "B-Coder: mean |y - Q|, the Bellman residual the loss squares.",
    "b-coder/ref_greedy_frac": "B-Coder: share of positions where the policy's greedy token is the reference's.",
    "dispo/masked_frac": "DISPO: fraction of valid tokens with A != 0 whose ratio is outside their class's band (no "
                         "gradient).",
    "dispo/masked_pos_high": "DISPO: fraction of valid tokens of correct responses (A > 0) masked above "
                             "1 + eps_high_pos.",
    "dispo/masked_pos_low": "DISPO: fraction of valid tokens of correct responses masked below 1 - eps_low_pos.",
    "dispo/masked_neg_high": "DISPO: fraction of valid tokens of incorrect responses (A < 0) masked above "
                             "1 + eps_high_neg.",
    "dispo/masked_neg_low": "DISPO: fraction of valid tokens of incorrect responses masked below 1 - eps_low_neg.",
    "hispo/seq_masked_frac": "HiSPO: share of sequences whose geometric-mean mismatch pi_old/mu leaves "
                             "exp(+-delta_seq): the whole sequence gets no gradient.",
    "hispo/token_masked_frac": "HiSPO: share of valid tokens whose total ratio pi_theta/mu leaves the token band.",
    "vspo/zero_var_groups": "VSPO: groups of the step's first sampling round whose rewards were all equal.",
    "vspo/replaced_groups": "VSPO: zero-variance groups replaced by resampled prompts of highest task value.",
    "vspo/task_value_mean": "VSPO: mean task value p(1 - p) (smoothed pass rate p of the row's prompt) of the "
                            "trained rows; 0.25 at most.",
    "vspo/clip_scale_mean": "VSPO: mean factor 1 - lam + 4 lam v on the clip bounds (1 = plain PPO-clip band).",
    "spo-single/p_hat": "SPO (single-stream): mean tracked success estimate p = alpha / (alpha + beta) of the "
                        "step's prompts, read before this step's update (each response's baseline).",
    "spo-single/rho": "SPO (single-stream): mean forgetting rate rho applied to the step's prompts' trackers (0.96 "
                      "on first visits; 0.875 with rho='constant').",
    "spo-single/D": "SPO (single-stream): mean policy drift mean_t |log pi_then - log pi_now| on each prompt's "
                    "stored response since its last visit (0 on first visits).",
    "spo-single/first_visit_frac": "SPO (single-stream): share of the step's prompts the tracker saw for the first "
                                   "time (initialized from offline samples).",
    "spo-single/n_eff": "SPO (single-stream): mean effective sample size alpha + beta of the step's prompts' "
                        "trackers after the update.",
    "pairs": "Preference recipes: items (pairs, lists or steps) trained on this step (online pair recipes: prompts "
             "whose samples the verifier separated).",
    "loss/preference": "Preference objective value on the step's pairs.",
    "rewards/chosen": "Mean implicit reward beta * (log pi - log ref) of the chosen responses (TRL name; SimPO: "
                      "beta * per-token mean log pi; P3O, REFUEL, BRAIn: beta = 1).",
    "rewards/rejected": "Mean implicit reward of the rejected responses; it often falls, and so can chosen's.",
    "rewards/margins": "Mean chosen - rejected implicit reward: grows as the policy separates the pair.",
    "rewards/accuracies": "Share of pairs whose chosen implicit reward exceeds the rejected one.",
    "logps/chosen": "Mean summed log-prob of the chosen responses under the policy.",
    "logps/rejected": "Mean summed log-prob of the rejected responses under the policy.",
    "logps/chosen_avg": "SimPO: mean per-token (length-averaged) log-prob of the chosen responses.",
    "logps/rejected_avg": "SimPO: mean per-token log-prob of the rejected responses.",
    "dpo/weight": "DPO: mean sigma(-beta * margin), each pair's gradient weight; falls as pairs are learned.",
    "cdpo/weight": "cDPO: mean gradient weight (1 - eps) sigma(-z) - eps sigma(z), z = beta * margin: 0 at the finite "
                   "optimum, negative past it (the rdpo form's weight stays positive).",
    "ipo/margin": "IPO: mean log-ratio margin being regressed.",
    "ipo/target": "IPO: the regression target 1/(2 beta).",
    "hinge/active": "Hinge: share of pairs still inside the margin (the only ones with gradient).",
    "simpo/margin": "SimPO: mean per-token log-prob margin log pi(y_w)/|y_w| - log pi(y_l)/|y_l| (before beta and "
                    "gamma).",
    "simpo/gamma": "SimPO: the target reward margin gamma in use.",
    "kto/desirable_frac": "KTO: share of desirable (chosen) completions in the batch.",
    "sppo/target_chosen": "SPPO: mean regression target eta * (win rate - 1/2) of the chosen responses.",
    "sppo/target_rejected": "SPPO: mean regression target of the rejected responses (negative when they lose).",
    "p3o/advantage_abs": "P3O: mean |A|, A = half the KL-regularized reward difference of the pair, driving each "
                         "pair's gradient.",
    "p3o/kl": "P3O: mean sequence-level log pi_old - log pi_sft over both responses, the KL term folded into the "
              "reward (before beta).",
    "refuel/reward_gap": "REFUEL: mean reward difference of the pairs being regressed onto.",
    "refuel/sign_align": "REFUEL: share of pairs whose log-ratio margin (chosen minus rejected) is > 0, the "
                         "reference code's sign_align.",
    "inpo/h": "INPO: mean log-ratio margin h_t against the mixture of the reference and the previous iterate.",
    "inpo/target": "INPO: the regression target 1/(2 eta) that h_t is pulled towards.",
    "nash_mp/h": "Nash-MP: mean log-ratio margin against the mixture of the reference and the prox centre.",
    "nash_mp/target": "Nash-MP: the regression target eta / (2 (1 + eta beta)).",
    "apo/ref_shift": "APO: mean |log pi~_t - log pi^_t|, how far momentum moved the reference (0 = iterative DPO).",
    "brain/alpha_ess": "BRAIn: effective sample size 1/sum(alpha^2) of the posterior weights over the K samples.",
    "brain/alpha_max": "BRAIn: mean largest posterior weight (1 = all mass on one sample, 1/K = uniform).",
    "spo/reward_mean": "SPO: mean win-rate reward of the samples (exactly 1/2 for an antisymmetric judge).",
    "spo/reward_std": "SPO: spread of the win-rate rewards (0 when every group's samples tie).",
    "spo/antisymmetry_gap": "SPO: largest |P(i > j) + P(j > i) - 1| of the judge (0 for a consistent judge).",
    "arlcp/reflections": "ARLCP: mean count of reflection words (wait, but, check, hmm, ...) per response.",
    "arlcp/penalty": "ARLCP: mean penalty w1 sigma(z_c) + w2 sigma(z_L) subtracted from the correct responses' reward.",
    "grpo_ptr/lambda": "GRPO-PTR: this step's weight lambda(t) of the reasoning reward (0 -> lam_max over the first "
                       "30% of training).",
    "grpo_ptr/gamma_mean": "GRPO-PTR: mean group trust weight gamma_g (1 when the judge scores right answers' "
                           "reasoning at least as high as wrong ones').",
    "grpo_ptr/reason_mean": "GRPO-PTR: mean reasoning score R_reason from the judge (the toy judge's is in [0, 1]).",
    "spo/aux_loss": "SPO-prefdeg: the preference-degree ranking loss over the degraded copies (before lambda).",
    "spo/degree_accuracy": "SPO-prefdeg: share of (less, more degraded) copy pairs the implicit reward orders right.",
    "mcts/label_smoothing": "MCTS-DPO: mean label smoothing of the step pairs (0 = plain DPO on the steps).",
    "dapo_step/log_ratio": "Direct-Advantage-PO: mean beta * log(pi/pi_ref) of the steps, regressed onto A(s, a).",
    "dapo_step/advantage": "Direct-Advantage-PO: mean Monte Carlo advantage V(s+a) - V(s) of the steps.",
    "dapo_step/sign_agreement": "Direct-Advantage-PO: share of steps (A != 0) whose log-ratio has the sign of A.",
    "lipo/ndcg": "LiPO: NDCG of the policy's implicit-reward ranking against the verifier's ranking (1 = perfect).",
    "lipo/pair_accuracy": "LiPO: share of ordered pairs in the lists whose implicit rewards are in the right order.",
    "lipo/pairs_per_list": "LiPO: ordered (non-tied) pairs per list that carry a loss term.",
    "filtered_frac/digirl": "DigiRL: share of rollouts outside the top 10% of R - V(s_0) (the trajectory filter), "
                            "left out of the policy loss.",
    "clip/ratio_guard": "VL-DAC: share of policy tokens whose action (or minibatch) holds a token ratio above 10, so "
                        "they train on the clipped surrogate alone.",
    "value/acc": "DigiRL: accuracy of the success classifier (sigmoid(V) > 0.5 vs Monte Carlo return > 0) at the "
                 "steps' value tokens.",
    "value/progress_loss": "SPA-RL: mean squared error of the progress estimator's summed per-turn readings against "
                           "the episode's outcome.",
    "value/progress_mean": "SPA-RL: mean over rows of the estimator's prediction sum_t c_t of the outcome.",
    "nonfinite/skipped": "Updates dropped this step for a NaN/inf loss or gradient norm (only with nonfinite=skip); "
                         "healthy runs stay at 0.",
    "eval/accuracy": "Greedy accuracy on the held-out set (only on evaluation steps).",
    "eval/pass@1": "--set pass_k=K: unbiased pass@1 (mean sampled accuracy) over n samples of each held-out prompt "
                   "(only on evaluation steps).",
    "eval/pass@k": "--set pass_k=K: unbiased pass@K, the chance that at least one of K samples of a held-out prompt "
                   "is right (Chen et al. 2021; only on evaluation steps).",
    "eval/entropy": "--set pass_k=K: the policy's mean token entropy on its samples of the held-out prompts.",
    "time/step": "Wall-clock seconds for the whole step.",
    "time/rollout": "Seconds spent generating (rollout) in the step.",
    "time/train": "Seconds spent in forward/backward/optimizer in the step.",
    "tokens_per_s/rollout": "Response tokens generated per second of rollout time.",
    "tokens_per_s/train": "Response tokens trained on per second of training time (all epochs).",
}


HEALTHY: dict[str, str] = {
    "step": "Counts up by one per row. A resumed run recomputes the steps after its last checkpoint, so rows are "
            "never duplicated.",
    "reward/mean": "Noisy but trending up. Flat at the warm-start level: no signal reaches the policy. A jump to the "
                   "maximum while entropy collapses: check for reward hacking.",
    "reward/std": "Away from 0 while the task is neither solved nor hopeless; it shrinks as reward/mean nears its "
                  "minimum or maximum.",
    "rewards/<name>/mean": "Each on its own scale: the task's climbs with accuracy; a shaping reward (length, format) that "
                           "rises while the task's mean falls is being gamed.",
    "rewards/<name>/std": "Above 0 while that reward still separates samples; 0 for a reward every sample maxes out.",
    "rewards/unscorable_frac": "0 for rewards that always apply. Above 0: rows no reward scored (all None) train on nothing.",
    "rewards/adasearch/search_rate": "Settles at the share of questions that need search. Towards 1: searching "
                                     "everything (Search-R1's habit); towards 0 while accuracy falls: guessing.",
    "rewards/adasearch/decision_acc": "Rising towards 1. Stuck near the share of the majority class: the decision "
                                      "ignores the question (always or never searching).",
    "rewards/adasearch/f1_aware": "Rising towards 1. 0: the policy never skips search on a question it could "
                                  "answer (or always skips wrongly).",
    "rewards/act/parsed": "Near 1 after the warm start. Falling: the judge stops naming a candidate (format drift).",
    "rewards/act/first_label": "About 0.5 (the order is a fair coin). Far from it: a position bias, not judgement.",
    "rewards/apo-a2fm/cost": "Falling slowly as right answers get cheaper; within [0, 1] (1: the batch's priciest "
                             "row). Rising with accuracy flat: the modes drift to longer outputs.",
    "rewards/apo-a2fm/frac_instant": "Fixed by the rollout's split (about 1/3 each) when every mode is forced.",
    "rewards/apo-a2fm/frac_reasoning": "Fixed by the rollout's split (about 1/3 each) when every mode is forced.",
    "rewards/apo-a2fm/frac_agentic": "Fixed by the rollout's split (about 1/3 each) when every mode is forced.",
    "rewards/apo-a2fm/acc_instant": "Rising. Close to the other modes' accuracy: the cheap mode suffices there.",
    "rewards/apo-a2fm/acc_reasoning": "Rising; at or above instant's on hard questions.",
    "rewards/apo-a2fm/acc_agentic": "Rising; highest where tools are needed. Below instant's: the tool calls fail.",
    "rewards/spear-tool-reward/tool_calls": "Rising early as the bonus teaches tool use, then settling at what the "
                                            "task needs (calculator: one call per operator); 0 on a one-turn task.",
    "rewards/spear-tool-reward/coef": "1 at step 0, down a half cosine to 0 at T_tool, 0 after ('constant' mode: 1).",
    "rewards/prs/stage": "1, then 2 from the switch on; never back to 1.",
    "rewards/prs/format": "Rising towards 1 in stage 1. Falling in stage 2: answers bought with malformed calls.",
    "rewards/prs/compliance": "Rising; stage 2 once it passes 0.9. Stuck low: the format is not learned.",
    "rewards/prs/answer": "Rising in stage 2 with accuracy. Flat near 0: answers are well formed but wrong.",
    "rewards/fapo/flawed_frac": "Falling as training shifts from shortcut answers to reliable steps (the paper's "
                                "dynamics). Rising: the policy reaches right answers through wrong steps.",
    "rewards/rlvmr/planning_frac": "Settles where planning pays (successful episodes). 0 on untagged toy runs: the "
                                   "policy writes no tags.",
    "rewards/rlvmr/explore_frac": "Part of the tag mix; 0 on untagged toy runs. Towards 1 with redundant_frac rising: "
                                  "exploration without new actions.",
    "rewards/rlvmr/reflection_frac": "Small; rises after invalid steps. 0 on untagged toy runs.",
    "rewards/rlvmr/invalid_frac": "Falling towards 0 as the policy learns valid actions. Rising: the format of the "
                                  "actions is being lost.",
    "rewards/rlvmr/redundant_frac": "Low and falling. Rising: the agent repeats actions (the looping RLVMR targets).",
    "rewards/rl4mle-milestones/reached_frac": "Rising with training; a plateau below 1 with accuracy flat: the runs "
                                              "stall at the same milestone.",
    "rewards/srpo-reflection/accuracy": "Rising towards 0.75-1. Mostly 0.25 (right -> wrong): the reflection undoes "
                                        "right answers. A completion without answer tags counts as right -> right.",
    "rewards/srpo-reflection/format": "Rising towards 0.5 as the policy adopts the two-pass layout; 0 throughout on the "
                                      "toy tasks, whose targets have no tags (the accuracy term trains alone).",
    "rewards/srpo-reflection/length": "In [0, 0.1]; near 0.1 when the whole response is about twice the first think + "
                                      "answer. 0 while no completion has two passes.",
    "rewards/reflexicoder/format": "Rising towards 1 as the structure is learned; 0 on the toy tasks, whose targets "
                                   "have no tags (the verifier's reward drives training there).",
    "rewards/reflexicoder/reflections": "Between 1 and 5. Climbing past 5: the policy farms rounds (then P(n) < 1).",
    "rewards/reflexicoder/cycle": "Equal to the format share while rounds stay within 1..5; below it: too many rounds.",
    "rewards/reflexicoder/quality": "Rising with the last answer's score. Negative: answers stagnate below the max "
                                    "(m_t = -1) or regress.",
    "rewards/reflexicoder/efficiency": "Rising as right answers come in fewer rounds. Negative: later answers undo "
                                       "right first ones.",
    "cgpo/violation_rate": "Falling towards 0 as the policy learns the constraints. Stuck near 1: every sample is "
                           "flagged and the groups carry no signal.",
    "cgpo/violation/format": "Falling towards 0 (after the warm start the policy ends its answers). Near 1 on an "
                             "untrained model that never emits EOS.",
    "cgpo/violation/length": "Low and falling. Rising: the policy pads its responses (the hack the length judge guards "
                             "against).",
    "cgpo/violation/copy": "Near 0. Rising: the policy copies the question instead of answering (a reward hack).",
    "reward:prs.stage": "1 until compliance passes the threshold, then 2 for good (or the time switch).",
    "eapo/rounds": "Falling slowly as the discount favours shorter successful episodes; 1 on a one-turn task.",
    "eapo/dropped": "0 with dp_size 1; always below dp_size.",
    "eapo/discount": "Rising towards 1 as episodes shorten; 1 on a one-turn task. Low: long episodes.",
    "retroagent/coef": "1 at step 0, exp(-5) = 0.007 at the end (hard cutoff: 0 after 10% of the run).",
    "retroagent/completion": "Rising with accuracy and partial progress; equals accuracy on a task without subtasks.",
    "retroagent/intrinsic": "Largest early (coef near 1, phi low), fading to 0 with the coefficient and as phi rises.",
    "retroagent/improved_frac": "High at first (phi = 0 for new tasks), falling as each task's best rises.",
    "accuracy": "Follows reward/mean for 0/1 rewards. Sampled at temperature 1, so it stays below the greedy "
                "eval/accuracy.",
    "frac_zero_std_groups": "Well below 1. Climbing towards 1 means most prompts became all-right or all-wrong: "
                            "harder prompts, a larger G or dynamic sampling are needed.",
    "advantage/mean": "Near 0 for group-centred estimators. A persistent sign means right answers are systematically "
                      "longer (> 0) or shorter (< 0) than wrong ones, since the mean is per token.",
    "advantage/abs_mean": "Roughly stable (about 0.8 with std scaling). Falling while frac_zero_std_groups rises: the "
                          "learning signal is drying up.",
    "entropy": "Declines slowly. A crash towards 0 within a few steps is entropy collapse (no exploration left); a "
               "steady rise means the policy is diffusing (learning rate or entropy bonus too high).",
    "kl": "Starts at 0 and grows slowly and smoothly. A steep climb means the policy leaves the reference fast (raise "
          "the KL coefficient or lower the learning rate).",
    "kl_coef": "Drifts slowly (at most 0.2 B/horizon relative change per step): up while kl is above the target, down "
               "while below. kl is per token here, so the default target 6 (per sequence) only lowers beta.",
    "kl/k1_old": "Tiny, about 0 with one optimizer step per batch. Can be negative: it is an unbiased but noisy "
                 "estimate.",
    "kl/k3_old": "Small and never negative. PPO implementations often stop the epoch loop around 0.01 to 0.02; spikes "
                 "flag an oversized step.",
    "clip/region": "Exactly 0 with one optimizer step per batch, a few percent with several. Tens of percent: the "
                   "step size is too large for the clip range.",
    "clip/high": "A few percent at most. Persistently high: updates keep hitting the upper bound, which DAPO's "
                 "clip-higher (eps_high = 0.28) relaxes.",
    "clip/low": "A few percent at most; it grows with the number of optimizer steps per batch.",
    "clip/out_of_band": "At least clip/region. The gap is tokens that moved against their advantage, which the clip "
                        "does not stop.",
    "clip/dual": "Near 0; only logged with a dual-clip cap. Rising: the ratios of bad tokens blow up (stale data).",
    "ratio/mean": "Within a few thousandths of 1.",
    "ratio/max": "Modest (below 2 or 3). Occasional spikes are normal; growing spikes mean instability or stale data.",
    "loss/policy": "Not a progress measure: with centred advantages it hovers around 0 and does not go down as the "
                   "policy improves.",
    "loss/total": "Same caveat as loss/policy; the KL and entropy terms shift it.",
    "value/loss": "Falls, then plateaus (critic recipes only).",
    "value/clipfrac": "Small; large values mean the critic moves too far per step.",
    "value/mean": "Tracks reward/mean when the critic learns.",
    "value/explained_var": "Rises towards 1. Negative: the critic is worse than predicting a constant.",
    "grad_norm": "Stable. Often above grad_clip (1.0 here) means every step is rescaled; spikes tend to precede "
                 "instabilities.",
    "response_length/mean": "Changes slowly. A steady climb to max_new_tokens or a collapse to a few tokens points at "
                            "a length bias of the loss aggregation or at reward hacking.",
    "response_length/max": "Below max_new_tokens most of the time.",
    "truncated_frac": "Near 0. Rising: answers run out of budget and usually score 0.",
    "sampling/rounds": "1 or 2. Always at the maximum: few prompts still give any reward spread.",
    "sampling/shortfall_groups": "0: every step found enough informative groups.",
    "filtered_frac/min-abs-advantage": "Small; it rises together with frac_zero_std_groups.",
    "filtered_frac/overlong-filter": "Equal to truncated_frac and near 0. High: most of the batch gives no gradient "
                                     "at all; raise max_new_tokens or train shorter answers first.",
    "filtered_frac/high-entropy-mask": "0 with rho = 1 (a no-op); about 0.1 to 0.25 with rho = 0.2 on the smoke run. "
                                       "Rising: whole responses are confident everywhere and drop out of the update.",
    "filtered_frac/spo-segment": "Near 0; rises as the policy grows confident (short, certain answers). High: most "
                                 "responses give no gradient, raise prob_threshold or stop training.",
    "mdpo/kl": "0 on the first minibatch after a rollout, then of the order of kl/k3_old (about 1e-3 on the smoke "
               "run). Growing while mdpo/inv_t grows: the proximity term is not holding the step back.",
    "mdpo/inv_t": "Follows the schedule exactly: K/(K+1) at step 0 rising to K/2 at the last of K steps (0.91 to 5 "
                  "over 10 steps). Anything else: the schedule is not driving the objective.",
    "mdpo/surrogate": "About advantage/mean on the first minibatch (r = 1), a little higher on later ones as r grows "
                      "where A > 0. A fast climb together with mdpo/kl: the update is running away from pi_old.",
    "clip/cispo": "Near 0: with the default cap of 5 only tokens whose ratio grew fivefold are truncated (0 on the "
                  "smoke runs). Rising: several optimizer steps per batch move some tokens very far.",
    "cispo/weight_mean": "Close to 1 and equal to ratio/mean while the cap of 5 does not bind. Clearly below "
                         "ratio/mean: the cap truncates many weights, see clip/cispo.",
    "sapo/gate_weight": "Just below 1 (0.998 on the smoke run): 4 s(1 - s) is 0.99 at r = 1.2 and 0.79 at r = 2 with "
                        "tau = 1. Well below 1: ratios far from 1, and the soft gate damps most tokens.",
    "sapo/gate_value": "About 2/tau on-policy: between 1.90 (A <= 0, tau_neg = 1.05) and 2 (A > 0, tau_pos = 1); 1.92 "
                       "on the smoke run. Leaving that band: the ratios have moved far from 1.",
    "geo/seq_ratio_mean": "1 on the first minibatch after a rollout, within about 1% of 1 after. A steady drift: each "
                          "batch moves whole sequences far (the log-space clip binds only in A's direction).",
    "ipa/chunks_per_row": "The episodes' mean turn count with chunks='turn'; with chunks='runs', more than that means "
                          "masked tokens inside turns split them (e.g. a token mask), fewer that turns merged.",
    "seeupo/correction_mean": "Within a few percent of 1: the turns updated earlier in the batch moved little. Far "
                              "from 1: later turns moved a lot, the earlier turns' advantages are heavily reweighted.",
    "seeupo/correction_min": "Above about 0.8 (correction='code' floors it at 0.8). Near 0: a later turn's ratio "
                             "collapsed, its earlier turns get almost no signal.",
    "seeupo/correction_max": "Below about 1.2 to 1.5 (correction='code' caps it at 1.2). Large: a later turn's ratio "
                             "blew up, the earlier turns' steps are inflated.",
    "bapo/c_low": "0.6 to 0.8, averaged over minibatches (0.6 to 0.75 on the smoke runs). At 0.8 on every step: "
                  "negative tokens dominate even after the search; the balance rests on c_high alone.",
    "bapo/c_high": "1.2 to 2.0 (1.2 to 1.8 on notebook 10's run). Pinned at 2.0 with pos_share below 0.5: the bounds "
                   "cannot rebalance, negative tokens swamp the update (long wrong answers).",
    "bapo/pos_share": "At least rho0 = 0.5 unless both bounds hit their max (0.49 to 1.0 on the smoke run, 1.0 when no "
                      "negative token counts). Persistently below 0.5: negative-advantage tokens dominate the gradient.",
    "gbpo/target_ratio_mean": "Within [1 - eps_low, 1 + eps_high], near 1 (1.00 to 1.03 on the smoke run). Far from 1 "
                              "for long: groups split unevenly at the median, the policy is pushed one way.",
    "gbpo/abs_gap": "About |1 - rho*| on the first minibatch (r = 1), shrinking as ratios reach their targets (0.03 "
                    "to 0.15 on the smoke run). Growing across steps: ratios overshoot (lower the learning rate).",
    "r2vpo/ratio_var": "0 with one optimizer step per batch; 0.003 to 0.06 with two minibatches on the smoke run. Well "
                       "above delta (0.02) step after step while lam climbs: the penalty does not hold the update.",
    "objective:r2vpo.lam": "Starts at 1; up while r2vpo/ratio_var > delta, down while below (to 0 within about 6 "
                           "steps at delta 0.02 on notebook 10's run; near 1 at delta 0.002). Climbing without bound: "
                           "the variance budget is never met.",
    "hapo/high_entropy_frac": "About 0.2 (the 0.8 quantile; 0.13 to 0.2 on the smoke run). 0 or 1: entropy collapsed.",
    "hapo/redistributed_frac": "1 - high_entropy_frac on-policy (r = 1: 0.7 to 0.75 on the smoke run); moves with r.",
    "hapo/eps_low_mean": "Between eps_low and eps_low (1 + alpha): 0.25 on the smoke run. Stuck at eps_low: no spread.",
    "hapo/eps_high_mean": "A little above eps_high (0.21 to 0.22 on the smoke run). Stuck at eps_high: no spread.",
    "aepo_clip/preserved_frac": "0 on the first minibatch (r = 1); at most clip/high (0 to 0.02 on the smoke run).",
    "aepo_clip/high_entropy_frac": "About rho = 0.2 (ties add to it). Far above: the entropies are all alike.",
    "shaping/offpolicy_frac": "The references' share of tokens (about 0.1 at G = 4 on the smoke run). 0: none trained.",
    "shaping/offpolicy_prob": "Rises from its start (0.01 untrained) towards 1 as references are learnt; flat: stuck.",
    "kl/abs_old": "0 on the first minibatch after a rollout, a few thousandths on average (smoke run). Growing: the "
                  "unclipped KL-Cov surrogate moves too far per batch (lower lr or raise ppo_kl_coef).",
    "tis/mean_weight": "1 to within about 1e-6 with HF generate (mu equals old up to rounding). Below 1 in the mask "
                       "modes by the dropped share; far from 1: engine and trainer disagree (vLLM dtype, stale "
                       "weights).",
    "tis/masked_frac": "Always 0 in the truncate modes, and 0 with HF generate in any mode. With vLLM it should stay "
                       "small; high: much of the batch is dropped because engine and trainer log-probs disagree.",
    "rollout_is/mean_weight": "As tis/mean_weight: about 1 with HF generate; far from 1, engine and trainer disagree.",
    "rollout_is/masked_frac": "As tis/masked_frac: 0 with HF generate, small with vLLM; high, much of the batch is "
                              "dropped.",
    "mismatch/abs_logp_diff_max": "Around 1e-6 with HF generate (float rounding; 5e-7 to 6e-6 on the smoke runs). "
                                  "Orders of magnitude larger: a separate engine (vLLM, bf16) or stale engine "
                                  "weights.",
    "mismatch/logp_abs_mean": "About 1e-7 with HF generate (2e-7 to 5e-7 on the smoke runs). Larger with vLLM; a "
                              "steady climb during training means the engine is not getting the new weights.",
    "mismatch/logp_abs_max": "A few 1e-6 with HF generate (up to about 1e-4 on long runs). Much larger: a few tokens "
                             "were sampled with a probability the trainer disagrees with, what TIS caps.",
    "mismatch/is_ratio_mean": "1 to within 1e-6 with HF generate. Drifting from 1 (vLLM, stale weights): the samples "
                              "no longer come from the policy being trained; use tis or minirl, or fix the weight "
                              "push.",
    "mismatch/is_ratio_max": "1 to within about 1e-4 with HF generate. Well above TIS's cap (2 by default): some "
                             "tokens were sampled with a very different probability than the trainer gives them.",
    "clip_cov/detached": "Fixed by construction: max(1, int(2e-4 N)) per minibatch given enough candidates, so 1 on "
                         "small batches. 0: no token fell in the covariance band (see clip_cov/candidate_frac).",
    "clip_cov/detached_frac": "About clip_cov_ratio (2e-4) on large batches, 1/N on small ones (0.002 on the smoke "
                              "run). Not a health signal itself: watch entropy, which Clip-Cov keeps from collapsing.",
    "clip_cov/candidate_frac": "A few percent (2 to 5% on the smoke run), at least clip_cov/detached_frac. Near 0: no "
                               "token has a covariance in (lb, ub), so Clip-Cov is plain PPO-clip.",
    "kl_cov/penalized": "Fixed by construction: max(1, int(kl_cov_ratio N)) top-covariance tokens per minibatch, 1 on "
                        "small batches. A change means the batch size changed, not the policy.",
    "kl_cov/penalized_frac": "About kl_cov_ratio (2e-4) on large batches, 1/N on small ones (0.002 on the smoke run). "
                             "Judge the effect on entropy and kl/abs_old, not on this share.",
    "igpo/belief_first": "Flat across steps (the prompt alone says little about the answer); it rises only if the "
                         "policy learns to guess without searching.",
    "igpo/belief_last": "Rises above igpo/belief_first as the turns gather the answer; equal to it: the tools add "
                        "nothing the policy uses.",
    "igpo/info_gain_mean": "Positive and growing while searches pay off; near 0 or negative: turns that mislead or "
                           "add nothing, where IGPO's dense signal is noise.",
    "infopo/gain_mean": "Positive: the observations steer the next action. Near 0: the policy ignores its feedback "
                        "(or the feedback is empty); large negative: observations push away from what it did.",
    "infopo/gain_positive_frac": "Above 0.5 once the policy reads its observations; stuck near 0.5 means the signal "
                                 "is noise and the gated term only adds variance.",
    "reward_shaping:dcpo.temperature": "A step function of the entropy: 1.2 while it is at or below H_0, 0.8 above. "
                                       "Stuck at one value all run: entropy never reaches the target (at 1.2) or "
                                       "never comes down to it (at 0.8).",
    "advantage:dcpo.entropy_gap": "Shrinks in size as the entropy settles and then changes sign around 0. Growing in "
                                  "size: the control loses and entropy runs away from H_0.",
    "dcpo/rho_mean": "About 1 at any T, since E_{y ~ pi}[pi^T / pi] = 1; exactly 1 at T = 1. Far from 1: very few "
                     "tokens, or samples not drawn from pi_old.",
    "dcpo/correct_frac": "Equals accuracy for 0/1 scores. Near 0 pushes alpha towards 1 and fades the GRPO signal; "
                         "at 0 alpha is 0 here (the reference gives NaN).",
    "spo/segments": "1 + (unsure tokens)/5 per response: grows with response length and falls as the policy sharpens "
                    "(fewer tokens with p < 0.9). About 1: nothing is cut, the advantage is the trajectory's.",
    "spo/continuations": "Proportional to segments x K; the step's cost. Falls when rows share prefixes (identical "
                         "prefixes are sampled once).",
    "spo/mc_value": "Tracks reward/mean (V(s_0) is the prompt's success rate) and rises with it. Far above the "
                    "reward: continuations are scored more leniently than responses (truncated_score, stop strings).",
    "proact/rollouts": "About distinct (state, action) pairs x N; constant when the episodes are. A jump means the "
                       "policy visits many new states (or says many distinct action texts).",
    "proact/states": "Between the turns per group and all turns; falls as a group's episodes converge on one path.",
    "proact/mc_value": "Rises as the policy picks better moves (Q_MC of good moves is higher); it does not depend on "
                       "the policy's later moves (random play after the first action).",
    "proact/fallback_frac": "High early in an episode group only if the policy is already deterministic; 1 on turns "
                            "where rows are alone in their state. Near 1 everywhere: group normalization never fires.",
    "group_transform:aepo-arbitrary.temperature": "A step function of the entropy, as DCPO's: 1.2 at or below the "
                                                  "target, 0.8 above. Stuck at one value: the target is out of "
                                                  "reach.",
    "group_transform:aepo-arbitrary.entropy_gap": "Oscillates around 0 once the entropy is controlled. A gap growing "
                                                  "in size: too few replaced rows to steer the entropy.",
    "aepo/candidates": "Above 0 on most steps. Always 0: no re-sampled prompt had a correct sample among wrong ones, "
                       "so nothing steers the entropy.",
    "aepo/replaced": "min(ceil(3/128 B), aepo/candidates), halved above the target: up to 3 of the smoke run's 128 "
                     "rows, 1 of 16 on test runs. 0 for long stretches: no control.",
    "epo/penalty": "0 while every gated token is inside the band (always at step 0: no history yet); small and "
                   "spiky otherwise. Growing steadily: entropy drifts away from its history (collapse or blow-up).",
    "epo/in_band_frac": "Near 1 with the README band [0, 2] x history; 0.8 / 1.2 leaves most tokens outside (token "
                        "entropies spread far more than 20%). Falling: entropy leaving its historical range.",
    "epo/phase_weight": "Fixed by the schedule: non-increasing, about 0.83 at mid-run, under 0.05 at the end.",
    "safe/kl": "Starts about 0 and grows slowly; can be slightly negative (a sampled k1 estimate). Climbing fast: "
               "the policy leaves the reference, and kl_s will soon cross the threshold.",
    "safe/kl_short": "A tenth of safe/kl at first, then tracks it with a lag. Above the threshold (0.1 to 0.6): the "
                     "penalty is on.",
    "safe/penalty": "0 on healthy short runs (kl_s stays far below theta >= 0.1). Positive for many steps: the KL "
                    "budget is exceeded; a low entropy doubles it or more through the gate.",
    "safe/gate": "1 while the penalty is off; when on, 0.5 at high entropy (> 3.9 nats) up to 20 near entropy 0.",
    "safe/active": "0 on healthy runs. Near 1 for long: the threshold is too tight or the KL runs away.",
    "regularizer:safe-kl-control.threshold": "0.45 for the first 50 steps (warm-up x 1.5, PID near 0), then 0.36 "
                                             "while the reward climbs, 0.24 on a plateau, 0.3 once converged.",
    "regularizer:safe-kl-control.kl_short_prev": "Follows safe/kl_short of the previous step; see there.",
    "regularizer:safe.threshold": "As regularizer:safe-kl-control.threshold.",
    "regularizer:safe.kl_short_prev": "As regularizer:safe-kl-control.kl_short_prev.",
    "llds/penalty": "0 on the first minibatch of an on-policy step (logp = old), about 0.01 afterwards on the test "
                    "runs. Growing: the update keeps lowering the likelihood of good responses (LLD).",
    "llds/fell_frac": "0 with one minibatch and one epoch (logp = old); 0.15 to 0.4 of the preserving actions on "
                      "the test runs (2 minibatches or 2 epochs). Near 1: likelihood displacement everywhere, the "
                      "death spiral's first phase.",
    "llds/token_frac": "Below llds/fell_frac (only the tokens that fell, of A >= 0 actions that fell). Rising with "
                       "grad_norm: the collapse LLDS is meant to stop.",
    "regularizer:sac-temperature.alpha": "Moves by about lr in log space per step: falls while entropy is above the "
                                         "target (0.5 nats), rises below it. Pinned at a bound or oscillating "
                                         "widely: lr too high.",
    "minirl/w_mean": "Within a few hundredths of 1 (pi_theta/mu is 1 on-policy with HF generate). Far from 1: "
                     "staleness (see clip/region) or engine mismatch (see mismatch/is_ratio_mean).",
    "minirl/masked_frac": "Equal to clip/region (the same band test on pi_theta/pi_old): 0 on the first minibatch "
                          "after a rollout, a few percent at most. Tens of percent: the step is too large for eps.",
    "capo/masked_frac": "About half on Adam's first (sign-like) update, then a few percent (the paper: < 8%). Tens of "
                        "percent for long: lr too high for tau, most tokens lose their gradient; 1: training stalls.",
    "capo/fisher_frac": "Follows capo/masked_frac; grows as lr^2. Rising over a run: the head's steps get larger.",
    "capo/hessian_frac": "Follows capo/masked_frac; grows as lr. Near 1 with fisher_frac near 0: tau_H too tight.",
    "capo/kl_mean": "Scales as lr^2: about 1e-3 at lr 1e-3 on the smoke model, 100 times less at 1e-4. Spikes: a "
                    "large step ahead, which CAPO then masks.",
    "rover/q_mean": "Near 0, within +-0.1 on later minibatches (pi stays near pi_old at lr 1e-6). Drifting far: the "
                    "policy leaves pi_old faster than the target moves; lower lr or turn the clip on.",
    "rover/next_v_mean": "Near 0 (the same scale as rover/q_mean). Large: the next-state term, not the reward, "
                         "drives the target.",
    "rover/target_mean": "About the mean advantage (0 for a centred r~). Large and one-signed: the bootstrap "
                         "dominates.",
    "rover/clip_high": "0 on the first minibatch, a few percent later. Tens of percent: updates move the policy too "
                       "far.",
    "rover/clip_low": "As rover/clip_high, for the moves down.",
    "b-coder/q_mean": "Tracks the mean reward as the critic learns; far below the reward scale: alpha too large "
                      "(the log-prob part dominates Q).",
    "b-coder/target_mean": "Between 0 and the reward scale (binary rewards: the success rate). Outside: the critic "
                           "or the bootstrap is off.",
    "b-coder/td_abs": "Falls as Q fits its target; rising: the critic and the policy chase each other (lower lr).",
    "b-coder/ref_greedy_frac": "Near 1 at the start (the policy is the reference) and falls slowly as training moves "
                               "the greedy tokens.",
    "dispo/masked_frac": "0 on the first minibatch after a rollout (r = 1), a few percent with several. Tens of "
                         "percent: most tokens lose their gradient and learning stalls; bounds too tight for the step.",
    "dispo/masked_pos_high": "Small. High and rising: correct tokens hit the upper bound, which caps the exploration "
                             "(entropy-raising) regime; widen eps_high_pos if entropy collapses.",
    "dispo/masked_pos_low": "Small. High: correct tokens already pushed down are cut off (the distillation regime); "
                            "the paper links too much of that regime to slow entropy loss and degradation.",
    "dispo/masked_neg_high": "Small. High with repetitive samples: the paper's repetition collapse under "
                             "over-restrictive incorrect-response clipping.",
    "dispo/masked_neg_low": "Small. High with response length falling towards 0: the paper's vanishing-length "
                            "collapse; loosen eps_low_neg.",
    "hispo/seq_masked_frac": "0 with HF generate (mu equals old up to rounding). Above a few percent: the rollout "
                             "engine disagrees with the trainer on whole trajectories (vLLM, MoE routing, stale "
                             "weights); those samples are discarded.",
    "hispo/token_masked_frac": "0 on the first minibatch with HF generate, a few percent with several minibatches. "
                               "Tens of percent: staleness or mismatch moved most tokens out of the band.",
    "vspo/zero_var_groups": "Below prompts_per_step (as a share of it, what frac_zero_std_groups is for plain GRPO). "
                            "Equal to prompts_per_step: every prompt is solved, or failed, by all of its samples.",
    "vspo/replaced_groups": "Equal to vspo/zero_var_groups when the extra rounds found enough informative prompts; "
                            "well below it: few prompts still split their samples (raise max_rounds or G).",
    "vspo/task_value_mean": "Around 0.1 to 0.25 (p between about 0.15 and 0.85). Falling towards 0: the trained "
                            "prompts are nearly always or never solved.",
    "vspo/clip_scale_mean": "Between 1 - value_smoothing and 1 (0.5 to 1 by default), tracking vspo/task_value_mean; "
                            "near 1 - value_smoothing: the clip band is narrow on most samples.",
    "spo-single/p_hat": "Follows reward/mean as the policy improves (the trackers lag it by a few visits); far "
                        "below reward/mean for long: stale baselines (rho too high, or prompts rarely revisited).",
    "spo-single/rho": "Between rho_min 0.875 and 0.96; pinned at 0.875: the policy moves fast on revisited prompts "
                      "and the trackers keep only the last few outcomes.",
    "spo-single/D": "Small (about 0.001 to 0.05 per revisit at fine-tuning learning rates); growing: the policy "
                    "drifts faster than the trackers forget, so the baselines are stale.",
    "spo-single/first_visit_frac": "Falls as the prompt pool is covered; stuck at 1: prompts never repeat (a "
                                   "generated task), every baseline is the offline estimate and the tracker adds "
                                   "nothing.",
    "spo-single/n_eff": "Settles near 1 / (1 - rho), about 8 to 25; much larger: rho close to 1 (slow forgetting).",
    "pairs": "Offline: prompts_per_step every step. Online pair recipes: at most that; falling towards 0 means the "
             "verifier separates fewer groups (all right or all wrong), like frac_zero_std_groups rising.",
    "loss/preference": "Falls from its value at the reference: ln 2 for DPO and cDPO, 0.5 for KTO, 1 for hinge and "
                       "REFUEL, 1/(2 beta)^2 = 25 for IPO. Regression losses keep a floor; a rise: pairs unlearned.",
    "rewards/chosen": "0 at step 0 (policy = reference; SimPO's starts elsewhere). May drift below 0 while the margin "
                      "grows; a steep fall means the preferred answers are being unlearned too.",
    "rewards/rejected": "0 at step 0, then falling, faster than rewards/chosen. Rising along with chosen: the update "
                        "lifts both answers, and only the margin is trained.",
    "rewards/margins": "0 at step 0, then growing steadily. Flat or negative: the pairs are not learned. SPPO drops "
                       "back to 0 at each iteration (its reference moves); APO below 0 (its reference is "
                       "extrapolated).",
    "rewards/accuracies": "0 at step 0 (every implicit reward ties at 0 and the test is strict), well above 0.5 "
                          "within a few steps, then towards 1. Stuck near 0.5: the pairs are not separated.",
    "logps/chosen": "Roughly flat, or rising. Falling steadily (with rewards/chosen below 0): the preferred answers "
                    "lose likelihood too, DPO's known displacement; compare with logps/rejected.",
    "logps/rejected": "Falling, faster than logps/chosen: probability moves away from the rejected answers. Flat: "
                      "nothing is learned; rising: check that the pairs are not flipped.",
    "logps/chosen_avg": "Flat or rising towards 0 (about -0.9 per token on the smoke run). Falling along with "
                        "rejected_avg: with no reference to anchor it, the chosen answer degrades too.",
    "logps/rejected_avg": "Falling, faster than logps/chosen_avg; their gap is simpo/margin. Flat: the pairs are not "
                          "being separated.",
    "dpo/weight": "Exactly 0.5 at step 0 (margin 0 at the reference), then falling as pairs are learned. Above 0.5: "
                  "most pairs are ranked the wrong way. Near 0 early: the pairs are too easy.",
    "cdpo/weight": "0.5 (1 - 2 eps) = 0.4 at step 0 (eps = 0.1), falling to 0 at the finite optimum beta * margin = "
                   "ln((1 - eps)/eps) = 2.2 and negative past it, where overconfident pairs are pushed back.",
    "ipo/margin": "0 at step 0, rising towards ipo/target (5 with beta = 0.1) and settling there: IPO pulls margins "
                  "past the target back. Stuck near 0: the pairs are not learned.",
    "ipo/target": "Constant 1/(2 beta): 5 with the recipe's beta = 0.1. Read ipo/margin against it.",
    "hinge/active": "1 at step 0 (every margin is 0, inside 1/beta = 10 nats), falling as pairs pass the margin. At 0 "
                    "no gradient is left; stuck at 1: the margins are not growing.",
    "simpo/margin": "Above gamma/beta (0.5 with the recipe's beta = 2, gamma = 1), where the loss is ln 2, and "
                    "growing. Falling below it: chosen and rejected are no longer separated per token.",
    "simpo/gamma": "Constant beta * gamma_beta_ratio: 1.0 with the recipe's beta = 2 and ratio 0.5. Compare beta * "
                   "simpo/margin with it.",
    "kto/desirable_frac": "Exactly 0.5: the recipe feeds each pair's chosen answer as desirable and its rejected one "
                          "as undesirable. Unpaired data away from 0.5 needs re-balanced class weights (KTO eq. 8).",
    "sppo/target_chosen": "Between 0 and eta/2 = 5 (beta = 0.1), set by the data, not the policy: it falls towards 0 "
                          "as more of each group is right and the best answer wins fewer comparisons.",
    "sppo/target_rejected": "Between -eta/2 = -5 and 0 (about -1 early on the smoke run); it falls towards -5 as most "
                            "of each group becomes right and the rejected answer loses to almost every sample.",
    "p3o/advantage_abs": "Exactly 0.5 at step 0 with the verified pairs (rewards 1 and 0, no KL yet), then slowly "
                         "falling as beta times the log-ratio margin eats into the gap; 0 at a margin of 1/beta = 10.",
    "p3o/kl": "0 at step 0 (policy = SFT model). On these fixed offline pairs it is a log-ratio, not a KL, and can go "
              "well below 0. Large in size: the policy has left the SFT model far behind.",
    "refuel/reward_gap": "Exactly 1 on the task's pairs (chosen scores 1, rejected 0): data, not a training signal. "
                         "Other values only with graded rewards.",
    "refuel/sign_align": "0 at step 0 (the margins are exactly 0 and the test is strict), rising towards 1 as margins "
                         "approach eta * gap = 1. Stuck low: the regression is not separating the pairs.",
    "inpo/h": "0 at step 0; climbs towards inpo/target (5) within each 5-step iteration and drops at each boundary, "
              "where pi_t becomes the policy, to tau/eta = 0.3 of the margin over pi_ref. Flat at 0: no learning.",
    "inpo/target": "Constant 1/(2 eta): 5 with the recipe's beta (eta) = 0.1. Read inpo/h against it.",
    "nash_mp/h": "0 at step 0; climbs towards nash_mp/target (1.67) within each 5-step iteration and drops at each "
                 "boundary, where the prox centre becomes the policy, to 1/3 of the margin over pi_ref.",
    "nash_mp/target": "Constant eta / (2 (1 + eta beta)): 5/3 with the recipe's beta = 0.1 and eta = 5. Read "
                      "nash_mp/h against it.",
    "apo/ref_shift": "Float noise (about 1e-7) in the first iteration (steps 0 to 4, no earlier solution yet), then "
                     "alpha = 0.3 times how far one iteration moved the log-probs. Growing: momentum compounds.",
    "brain/alpha_ess": "Between 1 and K = 4: 4 when a list's rewards tie, about 2.7 for one right answer in four at "
                       "step 0; back towards K as the policy matches the posterior. Near 1: one sample takes all.",
    "brain/alpha_max": "Between 1/K = 0.25 and 1: 0.25 for tied rewards, about 0.54 for one right answer in four at "
                       "step 0, back towards 0.25 as the policy matches the posterior. Near 1: weight collapse.",
    "spo/reward_mean": "Exactly 0.5 with the verifier as judge (P(i > j) + P(j > i) = 1), so reward/mean reads 0.5 "
                       "too. Anything else: an inconsistent judge, see spo/antisymmetry_gap.",
    "spo/reward_std": "Above 0 while groups disagree (at most 1/3 with 0/1 rewards and G = 4); it falls towards 0 as "
                      "more groups tie, as frac_zero_std_groups rises. At 0 no learning signal is left.",
    "spo/antisymmetry_gap": "Exactly 0 with the verifier as judge (ties count 1/2 both ways). Above 0 only with a "
                            "stochastic or inconsistent judge; spo/reward_mean then leaves 0.5 as well.",
    "arlcp/reflections": "Near 0 on the toy tasks (short digit answers hold no reflection words); on reasoning models "
                         "it falls as unnecessary reflection is trained away. Rising: the penalty is too weak.",
    "arlcp/penalty": "In (0, 0.2): exactly 0.1 for a response at its group's means (a lone correct answer too). "
                     "Stuck near 0.2: correct answers sit far above their group's reflection and length.",
    "grpo_ptr/lambda": "0 at step 0, a straight ramp to lam_max (0.5) at 30% of the steps, then flat.",
    "grpo_ptr/gamma_mean": "Near 1. Falling: in many groups the judge prefers the reasoning of wrong answers, so its "
                           "reward is discounted (a judge the policy is learning to fool).",
    "grpo_ptr/reason_mean": "Slowly rising. Rising fast while accuracy falls: the policy games the judge (gamma_mean "
                            "should fall with it).",
    "spo/aux_loss": "3 ln 2 = 2.08 at step 0 (three level pairs tied at the reference), falling as the degraded "
                    "copies are ranked below the chosen answer. Rising: the copies are ranked the wrong way.",
    "spo/degree_accuracy": "Near 0 at step 0 (all levels tie and the test is strict), rising towards 1. Stuck at 0.5 "
                           "or below: the policy does not prefer full answers to ones with digits removed.",
    "mcts/label_smoothing": "Exactly 0 with the mcts-dpo recipe (the conservative smoothing is off). With chosen_q "
                            "and rejected_q passed it lies in [0, 0.5]; near 0.5 the pairs carry almost no gradient.",
    "dapo_step/log_ratio": "0 at step 0, then following dapo_step/advantage, its regression target (below 0.01 in "
                           "size on the smoke run). Much larger than the advantages: lr too high or beta too small.",
    "dapo_step/advantage": "Data, not a training signal: steps of fixed offline responses, A in [-1, 1] from 4 "
                           "rollouts per state, averaging near 0 (-0.11 to 0.08 on the smoke run).",
    "dapo_step/sign_agreement": "0 at step 0 (log-ratios are exactly 0), rising towards 1 as each step's log-ratio "
                                "takes the sign of its advantage (0.83 after 10 smoke steps). None when every A is 0.",
    "lipo/ndcg": "Exactly 1 at step 0 (tied scores are broken by the label); 0.55 (reversed) to 1 for K = 4, 0.75 for "
                 "a random order. Falling towards 0.75: the implicit rewards no longer follow the ranking.",
    "lipo/pair_accuracy": "0 at step 0 (all scores tie and the test is strict), then rising towards 1 over the 6 "
                          "ordered pairs per list. Stuck near 0.5: the policy does not rank the lists.",
    "lipo/pairs_per_list": "Constant K (K - 1)/2 = 6 with the recipe's K = 4 strictly ranked responses. Fewer only "
                           "with tied labels, which carry no term.",
    "filtered_frac/digirl": "About 0.9 by construction (ties at the cutoff keep more); much less: many rows tie "
                            "(e.g. all failed with the same baseline).",
    "clip/ratio_guard": "Near 0. Persistently above a few percent: the policy moved far from the one that sampled "
                        "(lower lr or fewer epochs).",
    "value/acc": "Rises above the share of the majority label; stuck at it: the critic predicts one class only.",
    "value/progress_loss": "Falls towards 0 as the per-turn readings learn to add up to the outcome.",
    "value/progress_mean": "Tracks reward/mean once the estimator fits.",
    "nonfinite/skipped": "0 on every step. Anything else: a NaN/inf loss or gradient norm was dropped; several in a "
                         "row mean the run diverged (lower lr, clamp log-ratios, train in float32).",
    "eval/accuracy": "Rises from evaluation to evaluation: the headline number.",
    "eval/pass@1": "Rises with training, like eval/accuracy (sampled rather than greedy).",
    "eval/pass@k": "Flat or rising. Falling while pass@1 rises: the policy is sharpening onto fewer answers "
                   "(entropy collapse): it solves the easy prompts more surely and stops exploring the others.",
    "eval/entropy": "Falls slowly. A collapse to near 0 within a few evaluations: exploration is gone and pass@k "
                    "will follow pass@1.",
    "time/step": "Flat. Growth means longer responses or memory pressure.",
    "time/rollout": "Flat; compare with time/train to see where a step's time goes.",
    "time/train": "Flat; grows with ppo_epochs and the number of minibatches.",
    "tokens_per_s/rollout": "Flat for a given model and batch size.",
    "tokens_per_s/train": "Flat for a given model and batch size.",
}


def unexplained(names) -> set[str]:
    """The metric names that are not glossary keys (a per-reward pair `rewards/<name>/mean|std` is explained by
    its pattern's entry)."""
    return {n for n in names if n not in GLOSSARY and not PER_REWARD.fullmatch(n)}
