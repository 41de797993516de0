""""Claim vs what we see": each method's central claim, what the stored runs show at toy scale over seeds, and a
verdict. The claims are written here, one sentence each, with the comparison that tests them; the numbers and
verdicts are computed from data/stored_runs/ (`workbench.results.stored_runs`), so the table changes only when the
runs are re-made. The verdict rule is VERDICT_RULE.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from workbench.results.stored_runs import load

NOISE_FLOOR = 0.01  # a difference below this is at most 2 held-out prompts in 200 (1 in 100): never a verdict alone
VERDICT_RULE = ("Verdict rule (3 seeds are few): the method and its baseline are paired by seed (the same seed and "
                "warm start); with d = direction × the mean over seeds of (method − baseline) and s the standard "
                f"deviation of those differences, at least {NOISE_FLOOR} (2 of 200 held-out prompts, 1 of 100; "
                "0.01 nats of entropy), reproduced "
                "if d > s, contradicted if d < −s, else no difference beyond seed noise; a claim of \"no worse\" is "
                "reproduced unless d < −s.")


@dataclass(frozen=True)
class Claim:
    key: str                 # the recipe (registry key)
    claim: str               # the paper's central claim, as we read it
    comparison: str = ""     # the stored comparison that tests it ("" = not testable here)
    metric: str = "accuracy_after"  # a summary field, or "final:<metric row key>" (mean of the last 4 rows)
    baseline: str = "grpo"   # recipe compared against; "before": the same runs before training (metric *_before)
    direction: int = 1       # +1 higher than the baseline, -1 lower, 0 no worse
    why_not: str = ""        # why it cannot be tested here (comparison "")
    reading: str = ""        # what explains the verdict, when we know (shown with it)
    runs: str = ""           # the recipe whose runs test it, when not the key's own (a loss tested inside another)


PAIRS_READING = ("the pairs (the right answer against it with one digit changed) are already ranked by the warm start "
                 "(92-99%); the margin grows by pushing both answers down, which costs exact answers; no setting of "
                 "about 60 tried (lr, beta, pairs, steps, warm start) avoided it")

POOL_READING = ("a fixed pool of 64 prompts, revisited 25 times each in 100 steps, generalises less to the 200 "
                "held-out puzzles than 1,600 fresh ones (grpo-pool 0.247 ± 0.010 against grpo 0.283 ± 0.026), so "
                "every pool-based recipe is read against grpo-pool, GRPO on the same pool, as the papers compare on "
                "one dataset")
NO_KL_READING = ("the recipe follows its paper's script: no KL term, where grpo has k3 KL 0.04; with grpo's KL added "
                 "(f3-entropy-kl, same 3 seeds) clip_cov, kl_cov and dcpo end at train entropy 0.41 (grpo 0.39) and "
                 "pass@8 0.69-0.70 (grpo 0.67): here the missing KL term, not the mechanism, lowers entropy")
NO_KL = "the recipe follows its paper's script: no KL term, where grpo has k3 KL 0.04 (see clip_cov)"

OVERLONG_READING = ("countdown answers are 4-8 tokens of a 10-token budget: almost nothing reaches the last 2 tokens "
                    "the punishment covers, so there is little to cut")
COSINE_READING = ("the reward pays longer wrong answers more (-1 at length 0 to -0.5 at the budget); with most groups "
                  "all wrong the only signal left is length, and the policy pads wrong answers to the budget: the "
                  "length hacking the paper answers with a repetition penalty")
ARLCP_READING = ("the toy policy writes no reflection words, so only the length term acts; run as its script (RLOO, "
                 "k1 KL 0.001 in the reward) where grpo has k3 KL 0.04 in the loss")
JUDGE_READING = ("its length judge flags more than 9 of 10 tokens, above every right countdown answer; the policy "
                 "then pads up to that threshold instead of the budget: a judge's threshold is a proxy too")
TIGHT_READING = ("a threshold of 7.5 tokens leaves no room to pad, but also flags the 8-token right answers (about 30% "
                 "of countdown targets), so it punishes some correct work")
NO_TAGS = "the toy policy writes no <think> tags, so the reward is a constant 0 with no gradient; it needs SFT with them"
NO_REFLECTION = "needs answer-reflection-answer transcripts; the tiny model writes one answer"
NO_MILESTONES = ("on calculator the tiny model after its warm start reaches no milestone or checklist item (2-step "
                 "checks): the reward is 0 everywhere")
NO_AGENT = ("a multi-turn tool-use claim; our tool environments after the default warm start give almost no reward "
            "signal (see 09_agents), so it is not run in a comparison")
F1_NO_KL = ("run as its paper's script, with no KL term as strong as grpo's (k3 0.04 in the loss); every such recipe "
            "in f1-more drifts further from the warm start (KL 0.23-0.40 vs grpo's 0.18) and ends with lower entropy "
            "(0.27-0.32 vs 0.35) and pass@8 (0.53-0.65 vs 0.69), as in f3-entropy")
GAMES = ("a judge with cycles would test it: workbench/preference/games.py runs the method's exact dynamics on "
         "rock-paper-scissors and random intransitive games, but no LLM task here has such a judge")
TRANSITIVE = ("our preferences come from the verifier (right over wrong), which is transitive: the Nash policy is "
              "then just the right answer, and win rates against the policy order answers as the 0/1 reward does; "
              + GAMES)
NO_BUDGET_SFT = ("the warm start never saw a budget sentence: with one the tiny model almost never answers right (10 "
                 "steps, seed 0: training accuracy 0.0 at every step with it before the question, one right answer in "
                 "1280 samples with it after; length 9.8-10 of 10), so the reward is almost always 0; it needs SFT on "
                 "budget prompts")
KEYDOOR = ("on the key-door corridor (f4-keydoor: 30-step warm start, greedy 0.99, sampled pass@1 0.46; 40 steps of 4 "
           "corridors x 8 episodes) grpo reaches pass@1 0.81")
HIDDEN_KEY = ("the observation is the room, never whether the key is held, so a group of steps that share the last "
              "rooms mixes histories with and without the key: anchor or context groups cannot see what matters "
              "(section 3 of notebook 13, the exact advantage: correlation 0.34 for gigpo, 0.31 for hgpo, 0.38 for "
              "grpo)")
SCREEN = ("on the text form (f4-screen: 375-step warm start, greedy 1.0, sampled pass@1 0.62; 40 steps of 4 forms x "
          "8 episodes) grpo reaches pass@1 0.88")
COUNTDOWN_F4 = ("f4-countdown runs f2-countdown's setting (lr 3e-4, 80 steps, pass@8 on 100 held-out prompts), where "
                "grpo ends at greedy 0.40, pass@1 0.38, pass@8 0.69")
STALL = ("where GRPO stalls (f5-stall-addition: 100 SFT steps on 2-digit addition, sampled pass@1 0.015 and 91 % of "
         "groups all wrong; 100 steps at lr 3e-4 move GRPO only to 0.018)")
CALC_STALL = ("no sample of any recipe succeeds (every group all wrong on every step of every seed): at 400 SFT steps on "
              "5-operand calculator episodes (f5-stall-calculator: sampled pass@1 0.004) the stall is too deep for any "
              "method to find a signal in 60 steps; with the default 600-step warm start (sampled 0.25) PrefixRL's "
              "prefixes do lift the pass rate (0.19-0.63 prefixed against 0.03-0.28 unprefixed over 6 steps of seed 0), "
              "but GRPO is not stalled there")
PROMPT_OOD = ("the 0.5M-parameter warm start was trained on plain prompts only: a prompt with a hint, demonstration, "
              "critique or previous attempt in it is text it never saw, and it does not use it")
SEARCH = ("on 3-hop search after the default warm start (f4-search: sampled pass@1 0.50, 0.30-0.70 over seeds; 55-60% "
          "of groups with no reward spread) 40 steps of grpo leave held-out sampled success where it was (0.50)")
GIGPO_READING = ("on the grid world (state = the cell; reward 1 on reaching the goal) the step term does act: gigpo's "
                 "mean |advantage| is 0.72-0.91 where grpo's is 0.43-0.53; but the anchor groups only rank episodes "
                 "that reach the goal (a group whose episodes all fail has step returns all 0; 27-43% of groups have "
                 "no reward spread at all), and in 100 "
                 "steps of 4 maps x G = 8 both raise held-out sampled success alike (pass@1 0.144 -> 0.265 vs 0.268; "
                 "seeds differ by -0.05 to +0.02) while greedy success barely moves (0.32 -> 0.30 vs 0.33). Both "
                 "share gigpo's loss (token mean, k3 KL 0.01), so only the advantage differs")
F7_MORE = ("f7-more reruns dpo beside the recipes in f7-addition's setting, on another CPU whose SFT gives another "
           "warm start (greedy 0.425 / 0.765 / 0.75, held-out preference accuracy 0.89 / 0.97 / 0.975 for seeds 0-2); "
           "there too dpo lowers greedy accuracy (0.647 -> 0.550) and holds preference accuracy (0.945 -> 0.935)")
HINGE_READING = ("the margins stay far below the hinge's 1 (beta x log-ratio margin 0.15 after 200 steps), so the hinge "
                 "acts on every pair with a constant gradient while DPO's sigmoid weight stays near 0.5: under Adam's "
                 "normalised step the two updates are almost the same and the curves overlap. The paper's baseline, "
                 "PPO on a reward model learned from human preferences (TL;DR), is not run: our pairs come from the "
                 "verifier; " + F7_MORE)
APO_READING = ("its pairs are fresh samples of the policy judged by the verifier (online), against a reference "
               "that becomes the policy every 5 steps (extrapolated with the previous iterate): the margin never "
               "leaves 0 (|margin| < 0.02 at every step) and the loss stays at log 2, so each step pushes the "
               "policy's likely mistakes down at full weight, and greedy accuracy falls below "
               "dpo's on every seed (by 0.055-0.125), as online-dpo's does in f7-addition. Plain iterative DPO (the "
               "recipe at alpha = 0), the baseline of the paper's faster-rate claim, is not run")
LIPO_READING = ("each list is the right answer and 3 corruptions of it, graded 0/1 by the verifier and ordered by "
                "length, then alphabetically, among the wrong ones: one right/wrong split, as in DPO's pairs, and not "
                "the graded reward-model scores the paper's gain comes from. The LambdaLoss pushes the last-ranked "
                "answer far down (log-prob -10.3 -> -13.2; dpo's rejected -8.9 -> -9.1) while the right one falls as "
                "with dpo (-1.47 -> -1.74); greedy differs from dpo's by -0.065 to +0.045 over seeds")
SPO_READING = ("the extra term ranks the chosen answer above copies of it with 1/3 and 2/3 of its digits removed, which "
               "props the chosen answer up a little (log-prob -1.23 vs dpo's -1.29 at step 199): greedy accuracy "
               "still falls from the warm start (0.647 -> 0.577) but less than dpo's (0.550), by 0.02-0.03 on every "
               "seed. The degrees it learns are counts of missing digits (a copy with digits removed is another, "
               "wrong number), which no held-out pair asks about")
BRAIN_READING = ("the only F7 loss here that keeps greedy accuracy (0.647 -> 0.648; dpo 0.550; above dpo on every seed "
                 "by 0.07-0.125): its 4 samples a prompt are the policy's own, weighted towards pi_ref tilted by the "
                 "verifier's 0/1 reward, so the update re-weights each group's right samples over its wrong ones, "
                 "on-policy RL on the verifier held near pi_ref, rather than pushing a fixed wrong answer down. The "
                 "paper's learned Bradley-Terry reward, its tasks (summarisation, dialogue) and its distribution-"
                 "matching baselines are not run")
NO_STEPS = ("addition and countdown answers are one number or one expression with no written steps: the recipe's "
            "'steps' are 2-character pieces of that answer, so its step values are digit-level; the claim is about "
            "multi-step solutions (GSM8K, MATH) whose steps can be judged apart. It needs a task whose answers "
            "carry their working")

KUHN_PURE = ("within 10 steps every self-play recipe (all but the scripted-opponent control) turns its near-uniform "
             "warm start (exploitability 0.463) into a pure strategy pair, exploitability exactly 1/3 (as 484 of the "
             "4,096 pure pairs): policy-gradient's last iterate does not mix as a Nash equilibrium of Kuhn poker does")


CLAIMS = (
    Claim("grpo", "A group-mean baseline (no critic) improves reasoning accuracy over the SFT start.",
          "f1-countdown", baseline="before"),
    Claim("dr_grpo", "Dropping the length and std normalisations removes a bias towards long wrong answers.",
          "f1-countdown", metric="final:response_length/mean", direction=-1),
    Claim("dr_grpo", "(same paper) ... with no loss of accuracy.", "f1-countdown", direction=0),
    Claim("dapo", "Clip-higher, dynamic sampling, token-level loss and overlong shaping beat GRPO's accuracy.",
          "f1-countdown"),
    Claim("dapo", "(same paper) Clip-higher keeps entropy from collapsing.", "f1-countdown", metric="final:entropy"),
    Claim("rloo", "A leave-one-out REINFORCE baseline is enough: no critic, and as good as the alternatives.",
          "f1-countdown", direction=0),
    Claim("gspo", "Sequence-level ratios and clipping train more efficiently than GRPO's token-level ratio.",
          "f1-countdown"),
    Claim("cispo", "Clipping the importance weight instead of the update keeps every token's gradient and learns "
          "faster than GRPO/DAPO.", "f1-countdown"),
    Claim("dpo", "Training on preference pairs directly (no reward model, no RL) raises the policy's preference "
          "for the chosen answers.", "f7-addition", metric="preference_accuracy_after", baseline="before",
          reading=PAIRS_READING),
    Claim("dpo", "(same paper) ... without costing the task.", "f7-addition", baseline="before", direction=0,
          reading=PAIRS_READING),
    Claim("ipo", "A squared loss to a fixed margin does not overfit deterministic preferences as DPO does.",
          "f7-addition", baseline="dpo"),
    Claim("simpo", "A reference-free, length-normalised reward with a target margin matches or beats DPO.",
          "f7-addition", baseline="dpo", direction=0),
    Claim("kto", "Unpaired desirable / undesirable labels are enough to match DPO.", "f7-addition", baseline="dpo",
          direction=0),
    Claim("online-dpo", "Pairs sampled from the current policy beat fixed offline pairs.", "f7-addition",
          baseline="dpo", reading="its rejected answers are the policy's own likely mistakes; pushing them down "
                                  "moves probability to other wrong answers (round numbers) at this scale"),
    # F7, more losses (f7-more: f7-addition's setting, dpo rerun beside them); the papers score generations (win
    # rates), greedy held-out accuracy here, and held-out preference accuracy is what the losses optimise
    Claim("hinge", "(SLiC-HF) Calibrating sequence likelihood on preference pairs with a hinge loss (no reward model in "
          "the loop, no RL) matches RLHF at a fraction of the cost; here: as good as DPO's sigmoid on the same pairs.",
          "f7-more", baseline="dpo", direction=0, reading=HINGE_READING),
    Claim("hinge", "(same paper) ... and ranks held-out pairs as well.", "f7-more",
          metric="preference_accuracy_after", baseline="dpo", direction=0, reading=HINGE_READING),
    Claim("apo-accelerated", "Nesterov extrapolation of the reference makes iterative DPO converge faster, to a better "
          "policy than (iterative) DPO.", "f7-more", baseline="dpo", reading=APO_READING),
    Claim("apo-accelerated", "(same paper) ... and a higher preference accuracy.", "f7-more",
          metric="preference_accuracy_after", baseline="dpo", reading=APO_READING),
    Claim("lipo", "Ranking a whole list of graded responses (LambdaLoss weights) beats pairwise DPO.", "f7-more",
          baseline="dpo", reading=LIPO_READING),
    Claim("lipo", "(same paper) ... and ranks held-out pairs better.", "f7-more", metric="preference_accuracy_after",
          baseline="dpo", reading=LIPO_READING),
    Claim("spo-prefdeg", "An auxiliary loss that ranks copies of the chosen answer with more of its key content "
          "removed teaches the degree of preference and improves DPO.", "f7-more", baseline="dpo",
          reading=SPO_READING),
    Claim("spo-prefdeg", "(same paper) ... and its preference accuracy.", "f7-more",
          metric="preference_accuracy_after", baseline="dpo", reading=SPO_READING),
    Claim("brain", "Distilling the reward-conditioned posterior with self-normalised weights and a baseline beats DPO "
          "(and earlier distribution matching) on summarisation and dialogue.", "f7-more", baseline="dpo",
          reading=BRAIN_READING),
    Claim("brain", "(same paper) ... and ranks held-out pairs better than DPO.", "f7-more",
          metric="preference_accuracy_after", baseline="dpo", reading=BRAIN_READING),
    # F7 recipes with no stored run: why each claim cannot be tested on our verifier-labelled pairs
    Claim("cdpo-robust", "Label smoothing keeps DPO aligned when a share of the preference labels are flipped.",
          why_not="the claim is about flipped labels, and our pairs are labelled by the verifier and never flipped; "
                  "f7-addition with a share of its training pairs flipped (say 20%), cdpo-robust against dpo on "
                  "held-out preference accuracy, would test it"),
    Claim("sppo", "Self-play regression onto win rates against the policy converges to the Nash policy of a general "
          "preference and beats iterative DPO and IPO.", why_not=TRANSITIVE),
    Claim("inpo", "No-regret online mirror descent on the preference game reaches the Nash policy of general "
          "preferences without a reward model, beating iterative DPO.", why_not=TRANSITIVE),
    Claim("nash-mp", "Mirror-prox steps reach the regularised Nash equilibrium at a linear rate, faster than "
          "Nash-MD's single mirror-descent step.", why_not=TRANSITIVE),
    Claim("p3o", "A pairwise policy gradient on reward differences, with PPO-style clipping, is invariant to "
          "per-prompt reward shifts and beats PPO and DPO on the reward-KL frontier.",
          why_not="the invariance is to prompt-dependent offsets of a learned reward model; the verifier's reward has "
                  "none, and on verified pairs the reward difference is always 1, so it is a clipped pairwise "
                  "gradient with a constant weight; we train no reward model to draw its reward-KL frontier"),
    Claim("refuel", "Regressing the relative future of two dialogue branches (from a random turn) trains multi-turn "
          "RLHF better than single-turn methods.",
          why_not="it needs multi-turn dialogues with a (simulated) user; on a one-turn task it is REBEL, and on "
                  "verified pairs the reward difference is always 1, so every margin is regressed onto the constant "
                  "eta = 1, an IPO-like target"),
    Claim("mcts-dpo", "Step-level preferences collected by MCTS improve reasoning over instance-level preference "
          "learning.", why_not=NO_STEPS),
    Claim("direct-advantage-po", "A critic trained first on partial solutions gives step-level advantages that, "
          "regressed offline into the policy, improve multi-step reasoning over response-level methods.",
          why_not=NO_STEPS),
    Claim("ppo", "A learned critic (GAE) gives lower-variance advantages than Monte Carlo returns.",
          why_not="the claim is about variance on long multi-step returns; our one-turn tasks end in one "
                  "terminal reward after about 10 tokens, where a critic has little to predict beyond the prompt's "
                  "success rate"),
    # F1, more policy-gradient recipes (f1-more: f2-countdown's setting, lr 3e-4, 80 steps, pass@8 on 100 prompts)
    Claim("gmpo", "The geometric mean of token ratios is less swayed by outlier tokens than GRPO's arithmetic mean, so "
          "updates stay stable and accuracy beats GRPO's.", "f1-more",
          reading=F1_NO_KL),
    Claim("sapo", "A smooth temperature-controlled gate instead of the hard clip keeps the signal of near-on-policy "
          "tokens and trains more stably, to higher accuracy than GRPO.", "f1-more", reading=F1_NO_KL),
    Claim("gpg", "The plain policy gradient (no ratio, no clip, no KL) with a group baseline rescaled for degenerate "
          "groups is a stronger baseline than GRPO.", "f1-more",
          reading="no ratio, no clip and no KL: the furthest drift from the warm start here (KL 0.39, a spike of 2.2 "
                  "on seed 2); seed 0 fell from 0.42 held-out at step 40 to 0.24 at step 80, the others ended at 0.38"),
    Claim("opo", "Exactly on-policy training with the variance-optimal (length-weighted) baseline beats GRPO's "
          "accuracy ...", "f1-more"),
    Claim("opo", "(same paper) ... and keeps entropy higher (more diverse answers).", "f1-more",
          metric="final:entropy", reading=F1_NO_KL),
    Claim("reinforce_plus_plus", "Normalising advantages over the whole batch (no critic, no per-prompt groups) "
          "trains as well as GRPO, and more robustly.", "f1-more", direction=0,
          reading="above grpo on every seed (0.44 each), with lower pass@8 (0.59 vs 0.69): sharper, not broader"),
    Claim("lite-ppo", "Two tricks, group-mean advantages scaled by the batch's std and a token-level loss, let "
          "critic-free vanilla PPO beat GRPO.", "f1-more", reading=F1_NO_KL),
    Claim("dapo_lite", "(DAPO's ablation) Without dynamic sampling, clip-higher, the token-level loss and masking "
          "truncated answers still beat GRPO.", "f1-more"),
    Claim("dapo_lite", "(same paper) Clip-higher keeps entropy from collapsing.", "f1-more", metric="final:entropy",
          reading=F1_NO_KL + "; clip-higher alone with grpo's KL (f3-entropy) ends level with grpo"),
    Claim("mdpo", "A KL proximity term to the previous policy instead of PPO's clip does as well or better (here "
          "against grpo, whose objective is the clip).", "f1-more", direction=0,
          reading="the proximity term acts only on the second of each batch's 2 minibatches (1 epoch; the recipe is "
                  "meant for ppo_epochs=4, which would need a 4-epoch grpo beside it); above grpo on every seed "
                  "(0.44 vs 0.40), with pass@8 0.65 vs 0.69"),
    Claim("remax", "A greedy rollout's reward as the baseline (no critic) matches PPO, with less memory and time.",
          "f1-more", baseline="ppo", direction=0,
          reading="ppo keeps k1 KL 0.05 in the reward and remax none: remax drifts twice as far (KL 0.34 vs 0.17) "
                  "and its seeds spread (0.47, 0.35, 0.38 vs ppo's 0.44-0.46); the memory and time the paper saves "
                  "are not measured on a shared 2-core CPU"),
    Claim("salsa", "A KL reference made by averaging two SFT models (a model soup) lets PPO move further and reach a "
          "higher reward than PPO anchored at one SFT model.",
          why_not="the soup needs two SFT runs from one pretrained model, which stay in one basin; our tiny model is "
                  "trained from scratch from each seed's random init, so the average of the SFT runs of seeds s and "
                  "s + 1 is a broken model: at seed 0 it answers no held-out countdown prompt (greedy 0.00, pass@8 "
                  "0.00, entropy 1.65 where one SFT run has 0.51) and 80 PPO steps earn no reward. It needs the two "
                  "SFT runs to share one init (differing in data order)"),
    Claim("minirl", "For on-policy training the plain policy gradient with an importance weight for the "
          "training-inference mismatch is the most stable; off-policy updates need clipping and Routing Replay.",
          why_not="its weight corrects the rollout engine's log-probs (vLLM, MoE routing) against the trainer's; our "
                  "HF engine samples with the trained model itself, so the weight is pi/pi_old and the recipe is "
                  "group-mean REINFORCE with PPO's mask: the mismatch and the MoE routing the claim is about do not "
                  "exist here"),
    Claim("t-ppo", "Truncated rollouts with extended GAE make PPO train 2.5 times faster without losing accuracy.",
          why_not="its speed comes from windowed generation, which is not modelled (HF generate runs every response "
                  "to its end); EGAE acts only on responses cut at the budget, about 1 in 1000 countdown samples "
                  "(f6-length), so here it is PPO"),
    Claim("ppo-max", "PPO-max's stabilizers (reward normalisation and clipping, KL in the reward, value clipping, "
          "whitened advantages) keep RLHF PPO stable over long runs where vanilla PPO collapses.",
          why_not="the collapse it prevents (reward hacking, rising perplexity, pattern collapse) comes in long runs "
                  "against a learned reward model; our 80-step runs on a 0/1 verifier have no collapse to prevent"),
    Claim("spo-minimax", "Self-play with each sample's share of wins against the policy's own samples as its reward "
          "(no reward model) learns faster than reward-model RL and is robust to intransitive, noisy preferences.",
          why_not="with the verifier as judge a right answer's win rate exceeds a wrong one's by G/(2(G - 1)) in "
                  "every group (4/7 at G = 8), so the advantage is dr_grpo's times a constant; the claim is about "
                  "intransitive or stochastic preferences, which a verifier never gives; " + GAMES),
    Claim("adora", "Damping groups whose longest correct answer is shorter than their wrong ones (weight 0.1) favours "
          "long reasoning and raises accuracy over GRPO.", "f4-countdown",
          reading=COUNTDOWN_F4),
    Claim("xrpo-sharpening", "A novelty bonus on correct answers the policy finds unlikely sharpens exploitation and "
          "raises accuracy over GRPO.", "f4-countdown",
          reading=COUNTDOWN_F4),
    Claim("hbpo-advantage", "Intra-budget plus inter-group advantages teach a model to fit its reasoning length to the "
          "problem, cutting tokens at equal or higher accuracy.",
          why_not="the same budget rollout and reward as hbpo-reward: " + NO_BUDGET_SFT),
    Claim("spo-single", "One response per prompt with a persistent Beta value tracker matches or beats GRPO's groups "
          "at a fraction of the rollouts.", "f4-countdown", direction=0,
          reading=("at equal samples a step (128 prompts x 1 against 16 x 8); it ends sharper (entropy 0.23 vs "
                   "0.34, pass@8 0.64 vs 0.69); " + COUNTDOWN_F4)),
    Claim("hgpo", "Groups keyed by the last k observations remove GiGPO's context inconsistency and raise long-horizon "
          "agent success (ALFWorld, WebShop).", "f4-keydoor", metric="pass@1_after",
          reading=KEYDOOR + "; " + HIDDEN_KEY + "; its population-std normalisation of small groups adds spread"),
    Claim("hgpo", "(same paper) ... above GiGPO's.", "f4-keydoor", metric="pass@1_after", baseline="gigpo"),
    Claim("flow-grpo", "Broadcasting the trajectory's outcome to every planner turn trains a planner that uses tools "
          "better than with a trajectory-level update.", "f4-keydoor", metric="pass@1_after",
          reading="it has the outcome advantage grpo broadcasts, pooled over turns instead of episodes, but also its "
                  "script's clip-higher (0.3) and k3 KL 0.001 where grpo has 0.04: entropy ends at 1.33 vs 0.99, so the"
                  " looser update may explain the gain as much as the pooling; " + KEYDOOR),
    Claim("ui-s1", "Semi-online rollouts along expert trajectories with patched mismatches and step returns raise "
          "multi-turn GUI success over offline and online RL.", "f4-screen", metric="pass@1_after",
          reading="the 375-step warm start already imitates the expert (greedy 1.0, sampled pass@1 0.62) and grpo "
                  "raises sampled success to 0.88; patching mismatches with the expert's action (mask 0) and stopping "
                  "after 2 keeps the episodes close to what SFT taught, which leaves less to learn from"),
    Claim("igpo", "Information-gain turn rewards give dense credit where outcome rewards are all equal, raising "
          "multi-turn search accuracy over GRPO.", "f4-search", metric="pass@1_after",
          reading=("its turn rewards do act: the policy's belief in the answer rises from 0.001 before the first "
                   "search to 0.71 before the answer (seed 0, mean gain 0.22 a turn) and |advantage| is 1.04 where "
                   "grpo's is 0.32; but in 40 steps neither recipe moves held-out success; " + SEARCH)),
    Claim("infopo", "A counterfactual information signal per turn, fused by a variance gate, helps agents that must "
          "ask for information.", "f4-search", metric="pass@1_after",
          reading=("its counterfactual gain is large and almost always positive (seed 0: mean 5.2 nats, 99.8% of "
                   "turns): each next search copies a name from the observation, so a neutral text in its place always "
                   "makes the action unlikely, and the signal does not single out the informative turns; the claim is "
                   "about asking a user, here the agent asks a tool; " + SEARCH)),
    Claim("cm2-advantage", "Checklist advantages at the step level learn faster than turn or trajectory ones early on.",
          "f4-calculator", metric="pass@1_after",
          reading=("the checklist gives nearly every group a reward spread (10-24% of groups without one, against grpo's "
                   "62-72% under the 0/1 outcome), but at lr 1e-4 with 4 x 8 episodes a step both recipes lower held-out "
                   "sampled success in 40 steps (0.21 -> 0.13 and 0.14; greedy 0.35 -> 0.22 and 0.25): the warm start's "
                   "tool use is fragile and neither signal repairs it here")),
    Claim("ipa", "Credit and ratios over interaction chunks stabilise long-horizon agent training over token-level "
          "PPO.", "f4-keydoor", metric="pass@1_after",
          reading=KEYDOOR + "; one-letter actions make a chunk one token, so the chunk ratio is the token ratio and "
                            "only the aggregation differs"),
    Claim("seeupo", "Reverse-order sequential turn updates improve monotonically where simultaneous PPO-style updates "
          "do not, and reach higher agent success.", "f4-keydoor", metric="pass@1_after",
          reading="one optimizer step per turn (5-7 per minibatch where grpo takes 1), so it also takes several times "
                  "more optimizer steps per batch and ends sharper (entropy 0.59 vs 0.99): the order's own effect is "
                  "isolated only in the tabular test (tests/objectives/test_seeupo.py); " + KEYDOOR),
    Claim("spo-segment", "Segment-level Monte Carlo advantages (cuts at low-probability tokens) give finer credit than "
          "GRPO and raise accuracy at equal rollouts.", "f4-countdown",
          reading=("countdown answers are 4-8 tokens, so a cut every 5th token (where p < 0.9) leaves one or two "
                   "segments per answer: little finer than the outcome; " + COUNTDOWN_F4)),
    Claim("spo-tree", "(SPO-tree) Tree-structured sampling with node values from the leaves below raises accuracy over "
          "GRPO at equal rollouts.", "f4-countdown",
          reading=("a 4 x 4 tree of 4-token segments splits a 4-8 token answer once or twice; " + COUNTDOWN_F4)),
    Claim("proact-mc-critic", "A random-policy Monte Carlo critic gives turn-level advantages that raise agent success "
          "in planning games (2048, Sokoban).", "f4-keydoor", metric="pass@1_after",
          reading="the uniform random policy rarely takes the key and walks to the door, so its Monte Carlo Q values "
                  "are near 0 (batch mean 0.08-0.2 where the policy succeeds half the time): the normalisation over a "
                  "state's turns amplifies small differences, biased for the policy that samples (section 3: |bias| "
                  "0.44); " + KEYDOOR),
    Claim("proact-mc-ppo", "(ProAct MC-PPO) Mixing the Monte Carlo value into the critic's baseline stabilises "
          "turn-level PPO.", "f4-keydoor", metric="pass@1_after", baseline="vl-dac",
          reading="the mixed baseline is 0.9 x the random policy's V_MC (0.01-0.08 here) + 0.1 x a critic that has not "
                  "learned yet: the TD errors of the turns before the last are small noise, which the batch z-score "
                  "scales to unit size; within 4 steps training success falls 0.53 -> 0.06 and entropy rises 0.87 -> "
                  "1.6, and it never recovers"),
    Claim("vl-dac", "An environment-step critic with token-level PPO transfers from synthetic worlds to real agent "
          "tasks.", "f4-keydoor", metric="pass@1_after",
          reading="only training in one synthetic world is tested, not the transfer the claim is about; its step critic"
                  " matches grpo there (and on the text screen)"),
    Claim("vl-dac", "(on the text screen) ... the step critic trains a GUI agent as well as GRPO or better.",
          "f4-screen", metric="pass@1_after", reading=SCREEN),
    Claim("poad", "Token-level credit inside multi-token actions (no discount within an action) learns faster than "
          "action-level PPO.", "f4-keydoor", metric="pass@1_after", baseline="vl-dac",
          reading="keydoor's actions are one letter each, so there is no token inside an action to credit and POAD is "
                  "action-level PPO with a token critic (section 3: with the exact critic poad and vl-dac have the same"
                  " error); it needs multi-token actions (calculator, search)"),
    Claim("hiper", "Hierarchical advantages over subgoal windows lower variance and raise long-horizon success over "
          "flat GAE.", "f4-keydoor", metric="pass@1_after", baseline="vl-dac",
          reading="the key is its subgoal (window 0 until the key is taken, 1 after): the window's bootstrapped return "
                  "does see the key, but a critic learned in 40 steps (coefficient 0.1) values states about as well as "
                  "vl-dac's"),
    Claim("hiper", "(on the text screen, subgoal = the fields filled) ... above flat GAE.", "f4-screen",
          metric="pass@1_after", baseline="vl-dac", reading=SCREEN),
    Claim("digirl", "Filtered advantage-weighted regression with a success-classifier critic trains device-control "
          "agents past imitation and prompting.", "f4-screen", metric="pass@1_after",
          reading="it updates on the top 10% of episodes by R - V(s0) (3 of 32 a step), a tenth of grpo's samples; on "
                  "the key-door corridor it barely moves (pass@1 0.46 -> 0.49, grpo 0.81)"),
    Claim("spa-rl", "Progress attribution (learned per-step rewards that sum to the outcome) raises agent success over "
          "outcome-only PPO.", "f4-keydoor", metric="pass@1_after",
          reading="its critic (coefficient 0.1, as the authors' trainer) does not fit the step returns in 40 steps "
                  "(explained variance 0.03-0.10, value loss 1.8-3.6), and the grounding bonus (0.5 for every action "
                  "that runs, up to 3.5 an episode against 1 for success) dominates them: the advantage ranks actions "
                  "by how many steps follow them, not by success; held-out sampled success falls from 0.46 to 0.17 "
                  "(3 seeds)"),
    Claim("rover", "Regressing onto the uniform random policy's Q values is enough for verifiable-reward reasoning: "
          "higher pass@k and more distinct correct answers than GRPO.", "f4-countdown", metric="pass@k_after",
          reading=("greedy 0.43 vs 0.40 and pass@1 level with grpo, but lower entropy (0.29 vs 0.34) and pass@8: the "
                   "diversity the paper reports does not appear; " + COUNTDOWN_F4)),
    Claim("b-coder", "Value-based learning with a conservative Bellman operator trains program synthesis competitively "
          "with policy-gradient methods.", "f4-countdown", direction=0,
          reading=("at this learning rate the token Q regression diverges: its loss grows from 0.3 to 5.7 by step "
                   "50 while entropy rises to 4.1, then the policy collapses to the end token (empty answers, greedy "
                   "0.00 on every seed); the lower default lr (1e-4) was not run; " + COUNTDOWN_F4)),
    Claim("gigpo", "Step-level advantages over anchor states that a group's episodes share give agents finer credit "
          "than GRPO's episode advantage, and higher success (ALFWorld, WebShop).", "f4-gridworld",
          metric="pass@1_after", reading=GIGPO_READING),
    Claim("gigpo", "(same paper) ... and higher greedy success.", "f4-gridworld", reading=GIGPO_READING),
    Claim("gigpo", "(on the key-door corridor) ... higher sampled success where an early action decides the reward.",
          "f4-keydoor", metric="pass@1_after", reading=KEYDOOR + "; " + HIDDEN_KEY),
    Claim("loop", "A critic-free, reference-free PPO with leave-one-out baselines (one model copy) trains "
          "long-horizon API agents (AppWorld) past much larger models.",
          why_not="the claim is about multi-step agents in a stateful app environment; on a one-turn task loop is "
                  "rloo's baseline with PPO's clip made symmetric in log space and near-zero advantages dropped, "
                  "whose claim f1-countdown tests (rloo); " + NO_AGENT),
    Claim("m-grpo", "End-to-end multi-turn GRPO on binary task success trains web agents (WebArena-Lite: a 3B model "
          "from 6.1% to 33.9%).",
          why_not="on a one-turn task each response is one action, so it is grpo without the KL term; its per-action "
                  "averaging needs multi-turn episodes, and " + NO_AGENT),
    # F2, beyond the clip (f2-countdown: lr 3e-4, 80 steps, pass@8 on 100 held-out prompts)
    Claim("bapo", "Adaptive clipping bounds that keep positive tokens' share of the loss balanced beat fixed-clip "
          "training on accuracy.", "f2-countdown"),
    Claim("bapo", "(same paper) ... and keep entropy from collapsing.", "f2-countdown", metric="final:entropy",
          reading=NO_KL),
    Claim("gbpo", "Regressing each ratio to the analytic bounded target is at least as good as PPO's clip.",
          "f2-countdown", direction=0),
    Claim("dispo", "Separate clip bounds for correct and incorrect responses train more efficiently than one band.",
          "f2-countdown"),
    Claim("capo", "Masking the tokens whose predicted update is too large keeps an aggressive learning rate from "
          "collapsing, so it learns more from the same samples.", "f2-countdown"),
    Claim("r2vpo", "Constraining the ratio's variance instead of clipping keeps the gradients clipping throws away and "
          "learns better.", "f2-countdown"),
    Claim("hapo", "Tailoring temperature, advantage and clip bounds to each token's entropy beats uniform treatment.",
          "f2-countdown"),
    Claim("aepo-agentic-clip", "Keeping the gradient of clipped high-entropy tokens (with an entropy-aware advantage) "
          "improves on GRPO.", "f2-countdown"),
    Claim("gui-libra", "Scaling down negative advantages in groups that mostly fail (unreliable negatives) improves "
          "on GRPO.", "f2-countdown"),
    Claim("vspo", "Replacing groups with no reward spread by high-value prompts converges faster than GRPO.",
          "f2-countdown"),
    Claim("policy-shaping", "Mixing in off-policy reference solutions, shaped by p/(p + gamma), beats purely on-policy "
          "RL.", "f2-countdown"),
    Claim("hispo", "Masking sequences and tokens whose importance ratios drift keeps long agentic RL stable.",
          why_not="it acts on the mismatch between the rollout engine and the trainer (MoE, vLLM); our HF engine "
                  "samples with the trained model itself, so nothing is masked"),
    Claim("safe-kl-control", "A PID-controlled KL threshold keeps RLHF from KL blow-ups.",
          why_not="the claim concerns long RLHF runs against a learned reward model; our 80-step verifier runs have no "
                  "KL blow-up to prevent"),
    # F3, entropy (f3-entropy: the same setting, where GRPO's pass@8 and entropy fall while pass@1 rises)
    Claim("clip-higher", "A higher upper clip lets low-probability tokens grow and keeps entropy up.", "f3-entropy",
          metric="final:entropy"),
    Claim("entropy-bonus", "An entropy bonus keeps the policy exploring.", "f3-entropy", metric="final:entropy"),
    Claim("clip_cov", "Detaching a few high-covariance tokens keeps entropy above GRPO's ...", "f3-entropy",
          metric="final:entropy", reading=NO_KL_READING),
    Claim("clip_cov", "(same paper) ... and improves accuracy.", "f3-entropy"),
    Claim("clip_cov", "(same paper) ... and exploration: more problems solved in k tries.", "f3-entropy",
          metric="pass@k_after", reading=NO_KL_READING),
    Claim("kl_cov", "A KL penalty on the top-covariance tokens keeps entropy far above GRPO's plateau ...",
          "f3-entropy", metric="final:entropy", reading=NO_KL_READING),
    Claim("kl_cov", "(same paper) ... and improves accuracy.", "f3-entropy", reading=NO_KL_READING),
    Claim("kl_cov", "(same paper) ... and pass@k.", "f3-entropy", metric="pass@k_after", reading=NO_KL_READING),
    Claim("clip_cov", "(with grpo's KL term, so only the mechanism differs) ... entropy above GRPO's.",
          "f3-entropy-kl", metric="final:entropy"),
    Claim("kl_cov", "(with grpo's KL term) ... entropy above GRPO's.", "f3-entropy-kl", metric="final:entropy"),
    Claim("dcpo", "(with grpo's KL term) ... entropy above GRPO's.", "f3-entropy-kl", metric="final:entropy"),
    Claim("aepo-arbitrary", "(with grpo's KL term) ... entropy above GRPO's.", "f3-entropy-kl",
          metric="final:entropy"),
    Claim("clip_cov", "(with grpo's KL term) ... and pass@k above GRPO's.", "f3-entropy-kl", metric="pass@k_after"),
    Claim("epo", "Smoothing entropy against its history stops collapse and improves agents' success.", "f3-entropy",
          reading="on a one-turn task the band acts on turn 0 only"),
    Claim("dcpo", "Steering entropy to a target with a temperature importance weight keeps it from collapsing ...",
          "f3-entropy", metric="final:entropy", reading=NO_KL_READING),
    Claim("dcpo", "(same paper) ... and beats GRPO's accuracy.", "f3-entropy"),
    Claim("aepo-arbitrary", "Entropy is controllable: temperature-switched positive samples hold it at a target "
          "(0.5 here) above GRPO's.", "f3-entropy", metric="final:entropy",
          reading=NO_KL + "; it replaces 3 of 128 rows a step (the reference's 60 of 2560)"),
    Claim("aepo-arbitrary", "(same paper) ... without losing accuracy.", "f3-entropy", direction=0),
    Claim("safe", "Entropy-gated KL control with a soft-min double critic trains RLHF more stably.",
          why_not="the claim concerns long RLHF runs with a learned reward model and a critic; at 80 verifier-reward "
                  "steps there is no instability to remove"),
    Claim("llds", "Penalizing falling likelihoods stops GRPO's collapse in multi-turn search agents.",
          why_not="the collapse (lazy likelihood displacement) appears after hundreds of steps of multi-turn tool "
                  "use; our countdown runs do not collapse in 80 steps"),
    Claim("sac-temperature", "An auto-tuned temperature holds the policy's entropy at the target.",
          why_not="a port of SAC's temperature with no LLM paper claim; its dynamics are tested on a toy softmax "
                  "(tests/controllers/test_sac_temperature.py) and drawn in notebook 11"),
    Claim("hapo-temperature", "(HAPO) Sampling high-entropy tokens hotter explores where it matters.",
          why_not="part of hapo, whose claim is tested in f2-countdown with its adaptive temperature on"),
    # F6, rewards (f6-length: length terms on countdown; f6-hacking: a reward built to be gamed, and CGPO's judges)
    Claim("soft-overlong", "Punishing responses that run into the budget cuts truncated samples ...", "f6-length",
          metric="final:truncated_frac", direction=-1, reading=OVERLONG_READING),
    Claim("soft-overlong", "(same paper) ... without costing accuracy.", "f6-length", direction=0),
    Claim("cosine-length", "A cosine length-scaled reward keeps response length from growing ...", "f6-length",
          metric="final:response_length/mean", direction=-1, reading=COSINE_READING),
    Claim("cosine-length", "(same paper) ... and keeps accuracy.", "f6-length", direction=0, reading=COSINE_READING),
    Claim("length-bias", "(teaching example) A reward model's length bias gets gamed: answers grow ...", "f6-hacking",
          metric="final:response_length/mean"),
    Claim("length-bias", "(same) ... and fewer are right.", "f6-hacking", direction=-1),
    Claim("length-bias-cgpo", "(CGPO) Constraint judges stop the reward hack: answers stay short ...", "f6-hacking",
          metric="final:response_length/mean", baseline="length-bias", direction=-1, reading=JUDGE_READING),
    Claim("length-bias-cgpo", "(same) ... and accuracy is kept.", "f6-hacking", baseline="length-bias",
          reading=JUDGE_READING),
    Claim("length-bias-cgpo-tight", "(CGPO, a length judge at 3/4 of the budget) ... answers stay short ...",
          "f6-hacking", metric="final:response_length/mean", baseline="length-bias", direction=-1,
          reading=TIGHT_READING),
    Claim("length-bias-cgpo-tight", "(same) ... and accuracy is kept.", "f6-hacking", baseline="length-bias",
          reading=TIGHT_READING),
    Claim("cgpo", "A mixture of judges with constrained optimizers beats RLHF on a reward model and stops hacking.",
          why_not="tested as length-bias-cgpo in f6-hacking (its judges on a hackable reward); the recipe cgpo puts "
                  "them on the verifier's reward, which has nothing to hack"),
    Claim("accuracy-reward", "Rule-based answer checking alone (no reward model) teaches reasoning.",
          why_not="it is the verifier every run trains on (grpo in f1-countdown, before vs after); math-verify's "
                  "boxed answers do not occur in the toy tasks"),
    Claim("format-reward", "A format reward teaches the <think>...</think> layout alongside accuracy.",
          why_not=NO_TAGS),
    Claim("repetition-penalty", "An n-gram repetition penalty stops the model from gaming length rewards by "
          "repeating itself.", why_not="countdown answers are one whitespace-free word of 4-8 tokens: no word "
                                       "n-gram exists, and token 3-grams almost never repeat"),
    Claim("arlcp", "Penalizing reflection words and length relative to the group's correct answers shortens "
          "responses ...", "f6-length", metric="final:response_length/mean", direction=-1, reading=ARLCP_READING),
    Claim("arlcp", "(same paper) ... without losing accuracy.", "f6-length", direction=0, reading=ARLCP_READING),
    Claim("hbpo-reward", "Budget-conditioned rewards teach one model to reason at several lengths.",
          why_not=NO_BUDGET_SFT),
    Claim("srpo-reflection", "Rewarding reflections that fix a first answer improves multimodal reasoning.",
          why_not=NO_REFLECTION),
    Claim("reflexicoder", "Rewarding multi-round self-correction teaches code models to fix their own answers.",
          why_not=NO_REFLECTION),
    Claim("grpo-ptr", "A trust-weighted reasoning reward introduced progressively improves explainable reasoning.",
          why_not="needs a reward model that grades explanations; ours is a rule-based stand-in and the toy answers "
                  "carry no explanation"),
    Claim("fapo", "Penalizing flawed positives (right answers with a wrong step) makes reasoning reliable and "
          "efficient.", why_not="countdown answers have no written steps for the detector to check; the reward equals "
                                "the ±1 rule reward there"),
    Claim("ssl", "Tiered rewards around the sweet spot guide learning better than binary rewards.", "f6-dense",
          reading="on countdown the tiers pay an expression over the given numbers whose value is near the target "
                  "(relative distance, sigma 0.1)"),
    Claim("rl4mle-milestones", "Partial credit from program milestones trains ML-engineering agents faster.",
          why_not=NO_MILESTONES),
    Claim("cm2-checklist", "Checklist rewards train multi-turn tool-use agents without verifiable outcomes.",
          why_not=NO_MILESTONES),
    Claim("rlvmr", "Rewarding verifiable meta-reasoning steps makes long-horizon agents robust.", why_not=NO_AGENT),
    Claim("spear-tool-reward", "A decaying tool-call bonus teaches tool use first, then trusts outcome rewards.",
          why_not=NO_AGENT),
    Claim("eapo", "Geometric per-round discounting favours short successful research trajectories.",
          why_not=NO_AGENT),
    Claim("retroagent", "Retrospective intrinsic rewards for subtask progress help agents keep improving.",
          why_not=NO_AGENT),
    Claim("prs", "Staged rewards (format first, then answers) train agentic QA more stably.", why_not=NO_AGENT),
    Claim("adasearch", "Rewarding the search-or-not decision cuts needless searches without losing accuracy.",
          why_not=NO_AGENT),
    Claim("act", "Training to pick the expert action among candidates improves agents.",
          why_not="its toy task (act) is new and has no warm start of its own yet; not run in a comparison"),
    Claim("apo-a2fm", "Mode-stratified sampling with a cost-regularized reward picks cheap modes at equal accuracy.",
          why_not=NO_AGENT),
    # F5 part 1: rollout control and guidance, where plain GRPO stalls (f5-stall-addition: one-turn;
    # f5-stall-calculator: tool episodes). Claims about accuracy read held-out pass@1 (greedy is 0 almost everywhere
    # here); claims about pass@k read pass@8 (addition) or pass@4 (calculator).
    Claim("arpo-agentic", "Branching after tool calls when entropy rises beats trajectory-level sampling at the same "
          "rollout budget, with fewer tool calls.", "f5-stall-calculator", metric="pass@1_after",
          reading="it branches (3.9 branches per prompt, at 3.7 tool calls an episode), and every branch fails: "
                  + CALC_STALL),
    Claim("aepo-agentic", "Splitting the budget by entropy and penalising consecutive high-entropy branches beats "
          "ARPO.", "f5-stall-calculator", metric="pass@1_after", baseline="arpo-agentic",
          reading=("its pre-monitoring keeps 3.2 global rollouts per prompt and it branches more than ARPO (4.5 per "
                   "prompt), and every branch fails: " + CALC_STALL)),
    Claim("xrpo", "Giving extra rollouts to uncertain prompts and exemplars to unsolved ones beats GRPO at the same "
          "budget.", "f5-stall-addition", metric="pass@1_after",
          reading=("its extra samples and exemplars act (on average 93 rows a step are drawn with solved exemplars"
                   " in the prompt) but " + PROMPT_OOD + "; 96 % of groups stay all wrong " + STALL)),
    Claim("scalinginter-rl", "A turn cap that grows in stages trains better long-horizon agents than a fixed one.",
          "f5-horizon-keydoor", metric="pass@1_after",
          reading=("the cap acts, and costs: at 5 turns (steps 0-13) training success is 0.00-0.07 where GRPO's is "
                   "0.62, and held-out pass@1 falls from 0.46 to 0.10-0.35 at step 9; the 7- and 9-turn stages recover "
                   "it (0.83 and 0.78 at step 39 on seeds 0-1, level with GRPO; 0.60 on seed 2). It runs its script's "
                   "loss (token mean, low-variance KL 0.001, entropy bonus 0.001) where grpo has k3 KL 0.04; on the "
                   "corridors of f4-keydoor (5-7 turns at best), not BabyAI's long missions")),
    Claim("pope", "Guided copies of hard problems let RL learn problems GRPO never solves, and the gain transfers to "
          "the unguided problems.", "f5-stall-addition", metric="pass@k_after",
          reading=("the guided copies rarely exist: 92 % of groups are hard, and a prefix of the answer that "
                   "yields a success is found for 4 % of them; " + PROMPT_OOD + " " + STALL)),
    Claim("pope", "(on tool episodes) ... the same, where the guide is the start of the expert's episode.",
          "f5-stall-calculator", metric="pass@k_after",
          reading="no prefix of the expert's episode yields a success, so no guided copy is ever made: " + CALC_STALL),
    Claim("prefixrl", "RL on problems prefixed with part of a solution raises accuracy on the unprefixed problems.",
          "f5-stall-addition", metric="pass@1_after",
          reading=("the prefixed problems do give a signal (pass rate 0.53 with 75 % of the answer given) but it "
                   "does not transfer: the unprefixed pass rate in training stays at 0.007, and held-out pass@1 "
                   "falls below GRPO's " + STALL)),
    Claim("prefixrl", "(on tool episodes) ... with the expert's first turns replayed as the prefix.",
          "f5-stall-calculator", metric="pass@1_after",
          reading="with half the expert's episode replayed the continuations still all fail: " + CALC_STALL),
    Claim("ghpo", "Escalating solution hints on all-wrong groups gives GRPO a signal on hard prompts and raises "
          "accuracy.", "f5-stall-addition", metric="pass@1_after",
          reading=("hints go to 94 % of groups (at 69 % of the answer on average), yet 91 % stay all wrong: "
                   + PROMPT_OOD + "; entropy rises (1.51 against GRPO's 1.37) " + STALL)),
    Claim("scaf-grpo", "The least hint that solves a learning-cliff prompt raises accuracy over GRPO on hard "
          "problems.", "f5-stall-addition", metric="pass@1_after",
          reading=("after its 50-step warm-up 94 % of groups are at the cliff and a hint rescues 0.1 % of them: "
                   + PROMPT_OOD + " " + STALL)),
    Claim("ampo", "Teachers only when the policy fails raise accuracy and keep pass@k above GRPO's.",
          "f5-stall-addition", metric="pass@1_after",
          reading=("teachers fill 90 % of groups (29 teacher rows a step, whole answers), which raises greedy "
                   "accuracy to 0.033 (GRPO 0.007) but not sampled pass@1 in 100 steps; " + STALL)),
    Claim("ampo", "(same paper) ... and keep pass@k above GRPO's.", "f5-stall-addition", metric="pass@k_after",
          reading=("28.7 teacher rows a step make training accuracy 0.24, but held-out pass@8 falls (0.093 against"
                   " GRPO's 0.133): at toy scale the teachers of an addition differ only in form "
                   "(tasks/teachers.py), so they add no diversity " + STALL)),
    Claim("icpo", "Samples steered by a solved example, trained under the plain prompt, beat GRPO without an expert "
          "model.", "f5-stall-addition", metric="pass@1_after",
          reading=("no steered sample is ever right (0 of every step's): " + PROMPT_OOD
                   + "; the expert bonus has nothing to reward " + STALL)),
    Claim("rl-plus", "External solutions trained with a multiple-importance ratio widen pass@k where GRPO narrows it.",
          "f5-stall-addition", metric="pass@k_after",
          reading=("the one key above GRPO: one reference answer per group (trained with the MIS ratio, mean "
                   "exploration weight 0.60) lifts pass@8 to 0.153 (GRPO 0.133) and greedy to 0.040 (0.007); "
                   "pass@1 0.021 against 0.018 is within seed noise " + STALL)),
    Claim("critique-grpo", "Refinements after a critique raise accuracy over GRPO with the reward alone.",
          "f5-stall-addition", metric="pass@1_after",
          reading=("refinements after a critique are right 0.1 % of the time: " + PROMPT_OOD
                   + "; the wrong refinements trained under the plain prompt (policy shaping, no KL term) drive the "
                   "policy far from its start (entropy 2.8, KL to the reference 199) " + STALL)),
    Claim("r3l", "Retries from the pivot with language guidance and pivotal credit beat GRPO on multi-turn tasks.",
          "f5-stall-calculator", metric="pass@1_after",
          reading=("4 retries a step from the pivot turn (the first tool error or departure from the solution), none "
                   "succeeds: " + CALC_STALL)),
    Claim("r3l", "(on one-turn answers, where the pivot is the first token) ... and on one-turn tasks.",
          "f5-stall-addition", metric="pass@1_after",
          reading=("retries with the verifier's diagnosis succeed 0.1 % of the time (4 retries a step): " + PROMPT_OOD
                   + " " + STALL)),
    Claim("igrpo", "Conditioning the group on the best of its own drafts beats GRPO at the same budget.",
          "f5-stall-addition", metric="pass@1_after",
          reading=("the best of the drafts is right 5 % of the time, the refinements drawn after it 0.1 %: "
                   + PROMPT_OOD + " " + STALL)),
    Claim("srpo-route", "Failed samples distilled from a teacher that saw a correct sibling, correct ones by GRPO, "
          "learn faster than either alone.", "f5-stall-addition", metric="pass@1_after",
          reading=("the distillation drives a collapse: at step 0, 11 % of rows are distilled toward the policy "
                   "prompted with a correct sibling's text (a prompt it never saw), and within 8 steps entropy rises "
                   "1.43 -> 2.29 and answers grow (3.4 -> 7.8 tokens of 10); no sample is right afterwards, so "
                   "later steps distil 0.2 % of rows and GRPO has nothing to learn from. With grpo's k3 KL 0.04 added "
                   "(3 seeds, not stored: --set recipe_overrides.regularizers=[[\"kl-penalty\", {\"beta\": 0.04, "
                   "\"estimator\": \"k3\"}]]) it still falls, to pass@1 0.005 ± 0.002: the distillation, not the "
                   "missing KL term, does it " + STALL)),
    # F5 part 2: data selection and replay on a pool of mixed difficulty (countdown, 2-5 numbers)
    Claim("arpo-gui", "Replaying a stored success into groups that fail throughout gives GRPO a signal there and "
          "raises success over GRPO.", "f5-data-countdown", baseline="grpo-pool",
          reading=("replay acts: 37-45 % of groups fail throughout and 13-15 % get a stored success (about 300 rows "
                   "stored), cutting groups without signal from 61 % to 42 %; yet it ends where GRPO on the same pool "
                   "does, and so does its ablation without replay (arpo-gui-no-replay, 0.240 ± 0.013). Against GRPO "
                   "on fresh prompts (0.283) all three are lower: " + POOL_READING)),
    Claim("arpo-gui-no-replay", "(ARPO's ablation) Without its replay, the same recipe (pool, loss) learns less.",
          "f5-data-countdown", baseline="arpo-gui", direction=-1,
          reading=("without replay 61 % of groups carry no signal (42 % with it), yet held-out accuracy is the same: "
                   "the revived groups' one positive row is a success the policy already produced for that prompt")),
    Claim("ahpo", "Expert supervision switched on only where the policy's group fails beats GRPO on hard prompts.",
          "f5-data-countdown",
          reading=("the gate opens for 51-56 % of groups (all wrong), whose exact countdown expression is trained "
                   "by the SFT term (NLL 0.80 on average); at step 50 held-out accuracy is lower (0.238 vs 0.293), "
                   "at step 100 no different")),
    Claim("grpo-roc", "Oversampling and keeping the cleanest correct traces (with the failures' share kept) trains "
          "better than GRPO on its plain groups.", "f5-data-countdown",
          reading=("the trace-quality ranking cannot act here (no tool calls, no answer tags: every correct trace has "
                   "penalty 1.5); what acts is sampling 2G and dropping the 48-52 % of groups with equal rewards, "
                   "which reaches GRPO's accuracy with twice its rollouts (25,600 against 12,800)")),
    Claim("pf-ppo", "Training PPO on the samples whose reward is reliable (redrawn by |R|^2) beats PPO on all of "
          "them.", "f5-data-countdown", baseline="ppo",
          reading=("with 0/1 verifier rewards, weights |R|^2 keep the successes only (1 against 1e-8): every redrawn "
                   "batch is all R = 1 (zero-spread groups 100 %, 14-37 % of rows distinct). PPO whitens its GAE "
                   "advantages over the batch, so half of those correct answers are pushed down (|A| stays 0.8 "
                   "with no failure in sight); answers lengthen (4.8 -> 9 tokens), entropy doubles and accuracy "
                   "collapses (0.26 -> 0.01). The paper filters a learned reward model's unreliable middle, which "
                   "exact rewards do not have (R^2 of rewards to the verifier: 1.0)")),
    Claim("bfs-prover-v2", "Training only on steps inside the central perplexity band (neither trivial nor noisy) "
          "beats training on all of them.", "f5-data-countdown",
          reading=("the band (log-perplexity 0.13-1.10 of the sampler's) keeps 83 % of responses; dropping the tails "
                   "changes nothing measurable in 100 steps")),
    Claim("grpo-pool", "(the control of the pool-based recipes) GRPO on a fixed pool of 64 prompts learns as much as "
          "GRPO on fresh prompts.", "f5-data-countdown", direction=0, reading=POOL_READING),
    Claim("dots-rr", "Difficulty-targeted online selection with rollout replay reaches GRPO's held-out accuracy "
          "with fewer rollouts.", "f5-data-countdown", baseline="grpo-pool", direction=0,
          reading=("it spends half the rollouts (6,528 against 12,800: after the first round half of each step's 16 "
                   "groups are replayed, 12.7 steps old on average) and selects as the paper says (its fresh draws "
                   "lean to 3- and 4-number puzzles, the 16 most drawn prompts are 53 % of draws), but groups without "
                   "spread stay at 67 % (a replayed group keeps its old rewards) and held-out accuracy is lower; the "
                   "same replay without the behaviour weight (dots-rr-ppo) ends at grpo-pool's level with half its "
                   "rollouts: the weight, not the replay, costs (see dots-rr-clip)")),
    Claim("dots-rr-clip", "Clipping replayed rollouts around the current policy, importance-corrected to the "
          "behaviour policy (pi_old/mu), makes rollout replay safe: it learns better than the same replay under plain "
          "PPO-clip.", "f5-data-countdown", runs="dots-rr", baseline="dots-rr-ppo",
          reading=("the untruncated weight pi_old/mu of replayed rows reaches 3.2-3.4 at every step (rows 12 steps "
                   "old on average; its mean stays 1.0), in a token-mean loss without KL: a few heavily weighted "
                   "tokens move the policy further than fresh rows can. In the paper replayed rows are a few steps "
                   "old; here, with a pool of 64 and half of each step replayed, they are older. With the weight "
                   "truncated at 1 (--set recipe_overrides.objective.cap=1.0, as DART's TIS; 3 seeds, not stored) "
                   "dots-rr ends at 0.247 ± 0.013, grpo-pool's accuracy with half its rollouts: the untruncated "
                   "weight, not the replay, costs")),
    Claim("dots-rr-ppo", "(DOTS's ablation) The same replay without the behaviour weight pi_old/mu learns less.",
          "f5-data-countdown", baseline="dots-rr", direction=-1,
          reading="it learns more than dots-rr, as much as grpo-pool (0.247) with half its rollouts (6,528)"),
    Claim("dots", "(DOTS alone, no replay) Selecting the prompts predicted half solved reaches GRPO's accuracy in "
          "fewer steps.", "f5-data-countdown", baseline="grpo-pool",
          reading=("the selection acts: groups without spread fall from grpo-pool's 64 % to 51 % and the draws lean "
                   "to 3- and 4-number puzzles; held-out accuracy is within seed noise of grpo-pool's, lower at "
                   "every evaluation")),
    Claim("pcl", "Training on the prompts whose value-model-predicted pass rate is closest to 0.5 gives more groups "
          "with signal and reaches GRPO's accuracy in fewer steps than uniform sampling.", "f5-data-countdown",
          baseline="grpo-pool",
          reading=("the first half holds: groups without spread fall from grpo-pool's 64 % to 37 % (V fits the pass "
                   "rates, MSE 0.035; the chosen prompts' |V - 0.5| is 0.31 against 0.42 for the candidates); the "
                   "second does not: training concentrates on the prompts V puts near 0.5 (the 16 most drawn are 65 % "
                   "of draws; 3- and 4-number puzzles 74 %, 2-number ones 11 %), and held-out accuracy over all "
                   "sizes falls")),
    Claim("trapo", "With half the prompts labeled, adding the unlabeled prompts whose pass-rate trajectory resembles "
          "the labeled ones' (trained on majority-vote rewards) comes close to fully supervised training.",
          "f5-data-countdown", baseline="grpo-pool", direction=0,
          reading=("fully supervised training is grpo-pool (every prompt of the pool labeled). The pseudo-labels are "
                   "poor at this policy's accuracy: 47 % of unlabeled groups have no majority answer, and the "
                   "majority answer is right 32 % of the time (36 % for the selected ones), so the unlabeled prompts "
                   "it keeps (9 % of unlabeled groups over the run) are mostly trained towards wrong answers; the "
                   "paper's policies answer its unlabeled math prompts well above chance")),
    Claim("rapo", "Pruning prompts the whole group already solves, rescaling advantages by the share of rows that "
          "carry a signal, and replaying a prompt's latest success into its all-fail groups train better than GRPO "
          "under sparse rewards.", "f5-data-countdown", baseline="grpo-pool",
          reading=("all three parts act: solved prompts are pruned (2-number puzzles fall to 2 % of draws), 22 % of "
                   "groups get a stored success, groups without spread fall to 33 %, and the batch-level advantage "
                   "scale (N / rows with A != 0) multiplies the step by about 1.5 (1 / 0.67). The held-out set keeps "
                   "its easy puzzles, which the policy no longer practises, and the scale acts as a larger step size: "
                   "the lowest accuracy of the comparison")),
    Claim("spear", "Replaying the policy's own above-baseline successes (A = R - p50 of recent group means) with a "
          "self-imitation weight that rises over training raises success over plain group-relative RL.",
          "f5-data-countdown",
          reading=("on fresh prompts, as GRPO: the buffer fills past its trigger every few steps and replays 11 rows "
                   "a step on average (6 % of rows) with A = R - 0.02 (the p50 of group means is near 0: most groups "
                   "fail); the replay weight rises to 1 by step 50. Within seed noise of GRPO, with the widest "
                   "spread of the comparison (± 0.049)")),
    Claim("remix", "Mixing the last steps' rollouts into each batch, clipped to their own behaviour policy, with a "
          "higher update-to-data ratio, a KL-Convex constraint and policy reincarnation reaches on-policy accuracy "
          "with fewer rollouts.", "f5-data-countdown", direction=0,
          reading=("as implemented the replayed groups are added to the step's fresh ones (a share p = 0.5 of the "
                   "batch until the reincarnation at step 50, then none), so it samples GRPO's 12,800 rollouts and "
                   "trains on more rows, twice (UTD 2): there is no rollout saving to measure, and it ends lower "
                   "than GRPO (KL to the base 0.12 on average over the run)")),
    Claim("exit", "Training on start states that revise the policy's own earlier attempts, prioritized by "
          "learnability, plus a diversity bonus, trains a better policy than GRPO on the tasks alone.",
          "f5-data-countdown", baseline="grpo-pool",
          reading=("up to half the start states carry a previous attempt ('Previous attempt: ...' before the "
                   "puzzle), text the character-level warm start never saw: groups without spread rise to 78 % (grpo-pool 64 %); "
                   "the diversity bonus scales correct answers by 1.16 on average. " + PROMPT_OOD)),
    Claim("a3t", "Policy gradient with binarized rewards over accumulated successes and the latest failures raises "
          "success more than training on the current samples alone.", "f5-data-countdown", baseline="grpo-pool",
          reading=("its loss is REINFORCE with A = +1 / -1 and no baseline, clip or KL (the paper's form), over the "
                   "step's rows plus 16 stored successes; with 70 % of rows failing, most of each step pushes "
                   "failures down, and held-out accuracy falls below grpo-pool's")),
    Claim("dart", "Fewer rollouts for tasks already solved, training on high-entropy trajectories and truncated "
          "importance weights reach higher success with fewer rollouts than plain GRPO.", "f5-data-countdown",
          baseline="grpo-pool",
          reading=("with 16 % fewer rollouts (10,735: 6.7 a prompt on average, 2 for the prompts it solves) and half "
                   "of each step's rows trained (the higher-entropy half) it ends above GRPO on the same pool, though "
                   "not above GRPO on fresh prompts (0.283); its loss also differs (clip 0.1 / 0.28, dual clip, k3 "
                   "KL 0.1)")),
    Claim("rl4mle-duration", "Weighting each sample by its action's duration keeps slow, rewarding actions from being "
          "out-voted by fast ones in asynchronous actor-learner RL.",
          why_not=("the bias it corrects comes from asynchronous actors, whose fast actions reach the learner more "
                   "often; our rollouts are synchronous (every episode of a step finishes before the update), so "
                   "there is no arrival bias to undo and the weight only rescales episodes by their step count "
                   "(the recipe trains and resumes; tests simulate the queue it corrects)")),
    # F8: many agents, on games whose solutions are known (exploitability exact, lower is better)
    Claim("self-play", "Self-play drives a two-player zero-sum game's policy towards a Nash equilibrium: its "
          "exploitability falls.", "f8-kuhn", metric="exploitability_after", baseline="before", direction=-1,
          reading=(KUHN_PURE + "; self-play leaves that plateau at steps 79-129, but its illegal mass grows (0.29 "
                   "at the end; seed 0's entropy leaves 0.7 at step 104 and passes 3 two steps later, grad norm "
                   "618 at step 105), and exploitability is that of the legal actions renormalized")),
    Claim("self-play-vs-scripted", "Training against a fixed opponent learns to exploit that opponent.",
          "f8-kuhn", metric="payoff_vs_scripted_after", baseline="self-play",
          reading=("it wins 0.153 chips a hand from the scripted player (which bets only with K) and becomes "
                   "exploitable itself: 0.844 at the end, against self-play's 0.171")),
    Claim("self-play-vs-past", "Playing frozen earlier iterates (fictitious-play style) instead of the current policy "
          "avoids self-play's cycling: exploitability ends lower.", "f8-kuhn", metric="exploitability_after",
          baseline="self-play", direction=-1,
          reading=KUHN_PURE + "; against its own past it stays there longer (two of three seeds end at 0.33 and 0.37)"),
    Claim("self-play-separate", "Giving each player its own policy (its own adapter and optimizer state) lets both "
          "improve against each other: exploitability falls further than with one shared policy.", "f8-kuhn-policies",
          metric="exploitability_after", baseline="self-play", direction=-1,
          reading=("both at LoRA rank 8 and lr 1e-3: both reach the pure-strategy plateau (1/3) within 30 steps and "
                   "stay near it; separate adapters end at 0.336 ± 0.004 with illegal mass 0.10 ± 0.07, one shared "
                   "adapter at 0.312 ± 0.036 (one seed below the plateau, 0.27) with 0.012")),
    Claim("dr-mas", "Normalizing advantages per agent (each agent against its own reward distribution) stabilizes "
          "multi-agent RL and improves on a global GRPO baseline.", "f8-kuhn", metric="exploitability_after",
          baseline="self-play", direction=-1,
          reading=("no KL term (the authors' script), and no drift into illegal answers (0.003 against self-play's 0.29); "
                   "one seed stays on the pure-strategy plateau (0.33)")),
    Claim("mars", "Turn-level returns with per-player normalization make self-play in strategic games learn better "
          "than trajectory-level GRPO.", "f8-kuhn", metric="exploitability_after", baseline="self-play",
          direction=-1,
          reading=("the lowest mean (0.148 ± 0.028) and no drift into illegal answers (0.003), within seed noise of "
                   "self-play's 0.171 ± 0.046")),
    Claim("marft", "Agent-sequential GAE with a shared critic fine-tunes cooperating agents better than independent "
          "trajectory-level updates.", "f8-kuhn", metric="exploitability_after", baseline="self-play",
          direction=-1,
          reading=("MARFT's setting is cooperative; here one critic is shared by the two opponents of a zero-sum game: "
                   "0.284 ± 0.068, illegal mass 0.07 ± 0.10 at the end")),
    Claim("spiral", "A role-conditioned baseline (an average return per role) keeps self-play on zero-sum games "
          "stable and learning: lower variance than a shared baseline.", "f8-kuhn", metric="exploitability_after",
          baseline="self-play", direction=-1,
          reading=("all three seeds stay on the pure-strategy plateau (exploitability exactly 1/3) for all 150 steps: A = "
                   "R - b_role with no per-group centring; " + KUHN_PURE)),
    Claim("vision-zero", "Alternating self-play (clue) and verifiable-reward (vote) phases keeps the game's self-play "
          "improving where pure self-play plateaus.",
          why_not=("not run yet at a scale where it can show: the spy game's rows (4 players and 8 judges a game) make "
                   "its warm start about 4 s a step on this CPU, 40 minutes for the default 600 steps before any "
                   "comparison; the recipe trains and resumes, its rewards agree with the authors' code")),
    Claim("cory", "Two copies of the model, a pioneer and an observer that sees the pioneer's answer, trained on their "
          "collective reward with roles swapped every T steps, reach a better reward-KL trade-off than PPO on one "
          "agent.",
          why_not=("not run yet at a scale where it can show: on plan-act (2-digit sums) a 300-step warm start of the "
                   "noisy expert leaves the tiny model's pioneer at about 4 % exact answers, so both agents' rewards "
                   "are nearly always 0; the recipe trains, swaps exactly every T steps and resumes, each adapter "
                   "learning only from its own rows")),
    Claim("cory-ppo", "(CORY's control) PPO on the pioneer alone, the observer seat played by the exact solver and "
          "not trained.", why_not="the control of cory, run with it (see cory)"),
    Claim("lspo", "Iterating latent-space game solving (k-means intents, CFR) and DPO back to language makes werewolf "
          "agents stronger each iteration.",
          why_not=("not run yet: a comparison needs a warm start that plays werewolf legally (after 100 SFT steps the "
                   "greedy tiny model made an illegal move in 28 % of its games and won 28 %, against 83 % for the "
                   "scripted village) before LSPO's iterations can mean anything; the pairs, the CFR solve (Kuhn "
                   "poker and Myerson's card game reach their known equilibria) and the resume are tested")),
    Claim("ssp", "Search self-play (one policy posing questions it then answers with the tool, the proposer paid by "
          "the solver's failures) improves the search agent without supervision.",
          why_not=("the untrained tiny model poses no valid question (0 of the proposals in a 2-step run after a "
                   "20-step warm start pass the RAG check), so the proposer earns nothing and the solver gets no "
                   "questions; it needs the full warm start on both roles (about 10 minutes on this CPU) before "
                   "a comparison; the transform's step is checked with a scripted engine")),
)


def values(stored, recipe: str, metric: str) -> list[float]:
    """Per seed: a summary field, or the mean of the last 4 stored rows of a metric ("final:<key>")."""
    _, groups, summaries = stored
    if metric.startswith("final:"):
        key = metric.split(":", 1)[1]
        return [statistics.fmean(r[key] for r in seed[-4:] if r.get(key) is not None)
                for seed in groups.get(recipe, [])]
    return [s[metric] for s in summaries if s["recipe"] == recipe and s.get(metric) is not None]


def spread(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def verdict(claim: Claim, stored) -> tuple[str, str]:
    """(what we see, verdict) for one claim."""
    if not claim.comparison:
        return "", f"not testable here: {claim.why_not}"
    if stored is None:
        return "", f"not run yet: make stored-runs ({claim.comparison})"
    mine = values(stored, claim.runs or claim.key, claim.metric)
    other = (values(stored, claim.key, claim.metric.replace("_after", "_before")) if claim.baseline == "before"
             else values(stored, claim.baseline, claim.metric))
    if not mine or not other:
        return "", f"no data for {claim.runs or claim.key} or {claim.baseline} in {claim.comparison}"
    if len(mine) != len(other):
        return "", f"{claim.runs or claim.key} and {claim.baseline} have different seeds in {claim.comparison}"
    differences = [a - b for a, b in zip(mine, other)]  # paired by seed: the warm start is shared
    d, s = statistics.fmean(differences) * (claim.direction or 1), max(spread(differences), NOISE_FLOOR)
    seen = (f"{claim.metric.removeprefix('final:')}: {claim.runs + ' ' if claim.runs else ''}"
            f"{statistics.fmean(mine):.3f} ± {spread(mine):.3f} vs "
            f"{claim.baseline} {statistics.fmean(other):.3f} ± {spread(other):.3f} ({len(mine)} seeds)")
    if claim.direction == 0:
        return seen, "contradicted" if d < -s else "reproduced (no worse)"
    return seen, "reproduced" if d > s else "contradicted" if d < -s else "no difference beyond seed noise"


VERDICT_KINDS = {  # the words a verdict starts with -> a short slug (filters and colours on the claims page)
    "reproduced": "reproduced", "contradicted": "contradicted", "no difference beyond seed noise": "no-difference",
    "not testable here": "not-testable", "not run yet": "not-run", "no data": "not-run",
}
COMPARISON_FAMILY = {"f1": "canonical", "f2": "surrogate", "f3": "entropy", "f4": "credit", "f6": "rewards",
                     "f7": "preference", "f8": "multiagent"}


def verdict_kind(said: str) -> str:
    """The slug of a verdict ("reproduced (no worse)" -> "reproduced"); "not-run" for anything unrecognised."""
    return next((slug for start, slug in VERDICT_KINDS.items() if said.startswith(start)), "not-run")


def family_of(key: str, comparison: str = "") -> str:
    """The catalog family of a recipe (data/catalog.tsv); a recipe the catalog does not list (a toy or a preset such
    as dapo_lite) takes the family of the comparison that tests it, else "canonical"."""
    from workbench import registry

    family = registry.catalog().get(key, {}).get("family")
    return family or COMPARISON_FAMILY.get(comparison[:2], "canonical")


def claims_table(data_dir=None, recipes=None) -> list[dict]:
    """Rows of the table: recipe, family, claim, comparison, what we see, verdict and what explains it (`reading`).
    `recipes` keeps only the rows of those recipes (a notebook's family)."""
    if recipes is not None:
        keep = set(recipes)
        return [row for row in claims_table(data_dir) if row["recipe"] in keep]
    kw = {"data_dir": data_dir} if data_dir is not None else {}
    cache: dict[str, object] = {}
    rows = []
    for c in CLAIMS:
        if c.comparison and c.comparison not in cache:
            cache[c.comparison] = load(c.comparison, **kw)
        seen, said = verdict(c, cache.get(c.comparison))
        rows.append({"recipe": c.key, "family": family_of(c.key, c.comparison), "claim": c.claim,
                     "comparison": c.comparison, "seen": seen, "verdict": said, "reading": c.reading})
    return rows + unclaimed_rows()


def unclaimed_rows() -> list[dict]:
    """Every other registered recipe, so the table covers all of them: no claim written or tested yet."""
    from workbench import registry

    claimed = {c.key for c in CLAIMS}
    return [{"recipe": e.key, "family": family_of(e.key),
             "claim": f"(not written yet; paper: {' '.join(e.title.split())})", "comparison": "", "seen": "",
             "verdict": "not tested yet: no stored comparison covers it", "reading": ""}
            for e in registry.entries("recipe") if e.key not in claimed]
