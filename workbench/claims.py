""""Claim vs what we see": each method's central claim, what the stored reference runs show at toy scale over seeds,
and a verdict. The claims are written here, one sentence each, with the comparison that tests them; the numbers
and verdicts are computed from data/reference_runs/ (`workbench.reference`), so the table changes only when the
runs are re-made. The verdict rule is VERDICT_RULE.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from workbench.reference import load

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
    comparison: str = ""     # the reference comparison that tests it ("" = not testable here)
    metric: str = "accuracy_after"  # a summary field, or "final:<metric row key>" (mean of the last 4 rows)
    baseline: str = "grpo"   # recipe compared against; "before": the same runs before training (metric *_before)
    direction: int = 1       # +1 higher than the baseline, -1 lower, 0 no worse
    why_not: str = ""        # why it cannot be tested here (comparison "")
    reading: str = ""        # what explains the verdict, when we know (shown with it)


PAIRS_READING = ("the pairs (the right answer against it with one digit changed) are already ranked by the warm start "
                 "(92-99%); the margin grows by pushing both answers down, which costs exact answers; no setting of "
                 "about 60 tried (lr, beta, pairs, steps, warm start) avoided it")

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
    Claim("ppo", "A learned critic (GAE) gives lower-variance advantages than Monte Carlo returns.",
          why_not="the claim is about variance on long multi-step returns; our one-turn tasks end in one "
                  "terminal reward after about 10 tokens, where a critic has little to predict beyond the prompt's "
                  "success rate"),
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
    Claim("dots-rr-clip", "Clipping replayed rollouts around the current policy makes rollout replay safe.",
          why_not="it acts on replayed rollouts; the dots-rr replay buffer is not built yet, so every batch is fresh "
                  "and the loss is ppo-clip's"),
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
          why_not="the warm start never saw a budget sentence: with one the tiny model almost never answers right (10 "
                  "steps, seed 0: training accuracy 0.0 at every step with it before the question, one right answer "
                  "in 1280 samples with it after; length 9.8-10 of 10), so the reward is almost always 0; it needs "
                  "SFT on budget prompts"),
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
        return "", f"not run yet: make reference-runs ({claim.comparison})"
    mine = values(stored, claim.key, claim.metric)
    other = (values(stored, claim.key, claim.metric.replace("_after", "_before")) if claim.baseline == "before"
             else values(stored, claim.baseline, claim.metric))
    if not mine or not other:
        return "", f"no data for {claim.key} or {claim.baseline} in {claim.comparison}"
    if len(mine) != len(other):
        return "", f"{claim.key} and {claim.baseline} have different seeds in {claim.comparison}"
    differences = [a - b for a, b in zip(mine, other)]  # paired by seed: the warm start is shared
    d, s = statistics.fmean(differences) * (claim.direction or 1), max(spread(differences), NOISE_FLOOR)
    seen = (f"{claim.metric.removeprefix('final:')}: {statistics.fmean(mine):.3f} ± {spread(mine):.3f} vs "
            f"{claim.baseline} {statistics.fmean(other):.3f} ± {spread(other):.3f} ({len(mine)} seeds)")
    if claim.direction == 0:
        return seen, "contradicted" if d < -s else "reproduced (no worse)"
    return seen, "reproduced" if d > s else "contradicted" if d < -s else "no difference beyond seed noise"


def claims_table(data_dir=None, recipes=None) -> list[dict]:
    """Rows of the table: recipe, claim, comparison, what we see, verdict; then every recipe without a claim.
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
        said = f"{said} ({c.reading})" if c.reading else said
        rows.append({"recipe": c.key, "claim": c.claim, "comparison": c.comparison, "seen": seen, "verdict": said})
    return rows + unclaimed_rows()


def unclaimed_rows() -> list[dict]:
    """Every other registered recipe, so the table covers all of them: no claim written or tested yet."""
    from workbench import registry

    claimed = {c.key for c in CLAIMS}
    return [{"recipe": e.key, "claim": f"(not written yet; paper: {' '.join(e.title.split())})", "comparison": "",
             "seen": "", "verdict": "not tested yet: no reference comparison covers it"}
            for e in registry.entries("recipe") if e.key not in claimed]


def claims_markdown(data_dir=None) -> str:
    """The book's page."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|") or "&ndash;"

    lines = ["# Claim vs what we see", "",
             "Each method's central claim as we read its paper, what our reference runs show on a 0.5M-parameter "
             "model at toy scale over seeds (`make reference-runs`; plotted in notebooks 07, 08, 10 and 11), and a "
             "verdict. A verdict here is about this setting only: a claim made at 7B parameters and thousands of steps "
             "is not refuted by a tiny model on countdown, and not confirmed by it either.", "",
             VERDICT_RULE, "",
             "| recipe | claim | reference run | what we see | verdict |", "| --- | --- | --- | --- | --- |"]
    for r in claims_table(data_dir):
        lines.append(f"| `{r['recipe']}` | {cell(r['claim'])} | {cell(r['comparison'])} | {cell(r['seen'])} | "
                     f"{cell(r['verdict'])} |")
    return "\n".join(lines) + "\n"
