"""Stored runs: the comparisons that matter, trained over seeds at a scale where differences show, and kept as
small JSONL files under data/stored_runs/ (as CleanRL publishes its benchmarks). The book (notebooks 07, 08 and 10
to 13, the claims page) plots them, labelled with the command, commit and machine that made them; smoke runs stay a
quick live check.

    make stored-runs                                          # every comparison below
    python -m workbench.results.stored_runs f1-countdown      # one of them
    python -m workbench.results.stored_runs f2-countdown --recipes hapo   # re-run one recipe's seeds after a change

Each (recipe, seed) trains into runs/stored_runs/NAME/RECIPE-sSEED with `workbench.train.compare.compare` (resumable:
rerun after a stop), then NAME.jsonl is written: a `meta` line (command, commit, machine, settings), one `summary`
line per run (greedy held-out accuracy before/after; a preference run's held-out preference accuracy too), and every
`every`-th metrics row of each run (`row` lines). `--recipes` re-runs only those recipes of a stored comparison
(into runs/stored_runs/NAME@COMMIT) and replaces their lines; the meta line lists each such re-run (`reruns`: recipes,
commit, date, machine) beside the commit of the rest.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from workbench.files import write_atomic
from workbench.paths import DATA_DIR, ROOT
from workbench.train.glossary import PER_REWARD

DATA = DATA_DIR / "stored_runs"
KEPT = ("accuracy", "reward/mean", "entropy", "kl", "response_length/mean", "clip/region", "frac_zero_std_groups",
        "loss/preference", "rewards/margins", "rewards/accuracies", "logps/chosen", "logps/rejected",
        "pairs", "eval/accuracy", "eval/pass@1", "eval/pass@k", "eval/entropy", "truncated_frac", "rollouts",
        "time/step", *(f"eval/{k}" for k in ("exploitability", "illegal", "payoff_vs_scripted", "win", "draw", "loss",
                                             "forfeit", "win_vs_random")))  # the curves the book draws (games' too)
TOTAL_ROLLOUTS = "rollouts/total"  # added to each stored row: the rows sampled up to and including its step
SUMMARY_KEPT = ("accuracy_before", "accuracy_after",  # per run; the preference ones only preference runs have
                "preference_accuracy_before", "preference_accuracy_after", "pass_k", "pass@1_before",
                "pass@1_after", "pass@k_before", "pass@k_after", "entropy_before", "entropy_after",
                *(f"{k}_{when}" for k in ("exploitability", "illegal", "payoff_vs_scripted", "win", "draw", "loss",
                                          "forfeit", "win_vs_random") for when in ("before", "after")))  # games


@dataclass(frozen=True)
class Comparison:
    recipes: tuple[str, ...]
    task: str
    seeds: int
    sets: tuple[str, ...]      # --set assignments shared by every run
    every: int = 5             # keep every k-th step's row (and the last)
    question: str = ""         # what the comparison is for, one line
    recipe_sets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per recipe, applied after `sets`
    preset: str = "smoke"      # the preset every run starts from (workbench/train/config.py PRESETS)


# Settings two comparisons share, so that their runs of the same recipe and seed are the same runs
# f7-*. Stored by the preference loop before the one trainer: one optimizer step per step whatever `minibatches` said.
# The one trainer splits a step into `minibatches` steps for every recipe: add --set minibatches=1 to reproduce them
# (the offline recipes then exactly; the online ones draw their prompts through the sampler stage now).
F7_SETS = ("sft_steps=500", "sft_lr=1e-3", "lr=1e-5", "steps=200", "eval_size=200", "checkpoint_every=50")
F4_SETS = ("steps=40", "prompts_per_step=4", "eval_size=100", "pass_k=4", "eval_every=10",
           "checkpoint_every=20")  # the multi-turn f4-* comparisons: 40 steps of 4 episodes x G, pass@1 of 4 samples
# every f8-kuhn* run: a 200-step warm start imitating the uniform random player (exploitability 0.46, seed 0; the
# default 600 steps get no closer), then 150 steps of 16 deals x 8 games
F8_KUHN_SETS = ("sft_steps=200", "steps=150", "eval_every=10", "checkpoint_every=50")
F2_SETS = ("lr=3e-4", "steps=80", "pass_k=8", "eval_every=40", "eval_size=100", "checkpoint_every=40")  # f2, f1-more

COMPARISONS = {
    "f1-countdown": Comparison(
        recipes=("grpo", "dr_grpo", "dapo", "rloo", "gspo", "cispo"), task="countdown", seeds=3,
        sets=("steps=200", "eval_size=200", "checkpoint_every=50"),
        question="The F1 policy-gradient recipes from one warm start: which learns countdown fastest, and what "
                 "happens to entropy, KL and length on the way?"),
    # The default warm start (600 SFT steps at 3e-3) sits on a plateau before SFT's sudden jump on addition
    # (greedy 0.075-0.16 over seeds; 1200 steps give 0.985): from there nothing tried raised either accuracy, not
    # even more SFT or GRPO. 500 steps at 1e-3 stop partway (greedy 0.555 / 0.86 / 0.79 for seeds 0-2), where more
    # SFT at lr 1e-5 still helps. lr 1e-5 was the least harmful of 1e-6..3e-3 for every recipe (beta, pairs,
    # batch, steps and online group size changed nothing); see the F7 search in the report.
    "f7-addition": Comparison(
        recipes=("dpo", "ipo", "simpo", "kto", "online-dpo"), task="addition", seeds=3,
        sets=F7_SETS,
        every=10,
        question="The F7 preference recipes from a partly-right addition warm start: does any raise what it "
                 "optimises (held-out preference accuracy) without lowering greedy accuracy, and do the chosen "
                 "answers' log-probs fall as the margin grows?"),
    # The other F7 losses that can act on verified pairs, in exactly f7-addition's setting (dpo again as the baseline,
    # paired by seed): SLiC-HF's hinge, APO's Nesterov-extrapolated iterative DPO (reference moved every 5 steps),
    # LiPO's listwise LambdaLoss (lists of 4), SPO's degraded copies of the chosen answer, and BRAIn's posterior
    # distillation from 4 policy samples a prompt. A run takes 10-40 s after its warm start (the whole comparison
    # about 8 minutes on 2 shared cores), so nothing was cut.
    "f7-more": Comparison(
        recipes=("dpo", "hinge", "apo-accelerated", "lipo", "spo-prefdeg", "brain"), task="addition", seeds=3,
        sets=F7_SETS,
        every=10,
        question="More F7 losses from f7-addition's warm start: does a hinge, an accelerated iterative reference, a "
                 "listwise rank, degraded copies or posterior distillation raise held-out preference accuracy or "
                 "greedy accuracy above DPO's?"),
    # F4, step-level credit: GiGPO against GRPO on the grid world, whose episodes revisit states (anchor-state groups
    # form). Notebook 09's comparison (smoke: 100-step warm start, 4 maps x G = 8 a step, both with gigpo's loss, token
    # mean and k3 KL 0.01, so the advantage is the only difference) at 100 steps instead of 30, 3 seeds instead of 1,
    # and held-out sampled success (pass@1 of 4 samples on 100 maps), which moves where greedy barely does. A run
    # takes about 2 min (100-140 s of training), 17 min for the six beside other jobs; 150 steps would not fit 15.
    "f4-gridworld": Comparison(
        recipes=("grpo", "gigpo"), task="gridworld", seeds=3,
        sets=("sft_steps=100", "steps=100", "prompts_per_step=4", "eval_size=100", "pass_k=4", "checkpoint_every=50",
              "recipe_overrides.agg=token-mean", "kl_coef=0.01"),
        question="Does GiGPO's step-level advantage over anchor states (the same grid cell in a group's episodes) "
                 "raise held-out success on the grid world above GRPO's episode advantage?"),
    # F4 on the key-door corridor, where the first action (take the key) decides a reward 5-7 turns later and the
    # observation never shows it. The 30-step warm start leaves greedy success at 0.99 but sampled success (pass@1 of
    # 4 samples at temperature 1) at 0.48, in the 0.2-0.6 band where GRPO has room: GRPO alone reaches 0.83 in 40
    # steps of 4 corridors x G = 8 (seed 0). Each recipe runs as its paper's script (its own clip, KL and loss
    # aggregation); a run takes about 70 s, the comparison about 45 min on one core.
    "f4-keydoor": Comparison(
        recipes=("grpo", "gigpo", "hgpo", "flow-grpo", "ipa", "seeupo", "proact-mc-critic", "proact-mc-ppo", "vl-dac",
                 "poad", "hiper", "digirl", "spa-rl"),
        task="keydoor", seeds=3,
        sets=("sft_steps=30", *F4_SETS),
        question="Where an early action decides a late reward, does any step-, turn- or critic-level credit raise "
                 "held-out sampled success faster than GRPO's episode advantage?"),
    # The GUI and device keys on the text form, whose 375-step warm start leaves sampled success at 0.565.
    "f4-screen": Comparison(
        recipes=("grpo", "ui-s1", "digirl", "vl-dac", "hiper"), task="screen", seeds=3,
        sets=("sft_steps=375", *F4_SETS),
        question="On a text screen filled field by field, do semi-online rollouts along the expert (UI-S1), a "
                 "success-classifier critic (DigiRL), a step critic (VL-DAC) or subgoal windows (HiPER) raise "
                 "held-out sampled success above GRPO's?"),
    # The belief and information keys on 3-hop search, after the default 600-step warm start: sampled success 0.54
    # with most groups all right or all wrong (no reward spread, so GRPO's advantage is 0): the setting IGPO's dense
    # turn rewards are for. 16 tokens a turn (a search "[Bov]" or an answer "A:Kel").
    "f4-search": Comparison(
        recipes=("grpo", "igpo", "infopo"), task="search", seeds=3,
        sets=("max_new_tokens=16", *F4_SETS),
        question="Where most groups' outcomes are all equal, do IGPO's information-gain turn rewards or InfoPO's "
                 "counterfactual signal raise held-out sampled success above GRPO's?"),
    # CM2's checklist (rule judge of calculator states: each intermediate result among the tool results, then the
    # answer) on 5-operand calculator episodes (4 tool calls, then the answer) after the default 600-step warm start:
    # sampled success 0.15, just under the 0.2-0.6 band (2000 steps solve the task: 0.985), where GRPO still rises
    # (0.15 -> 0.24 in 300 steps, README).
    "f4-calculator": Comparison(
        recipes=("grpo", "cm2-advantage"), task="calculator", seeds=3,
        sets=("max_new_tokens=16", *F4_SETS),
        question="Do CM2's step-level checklist advantages (a reward for each intermediate result the episode "
                 "reaches) raise held-out sampled success on the calculator faster than GRPO's outcome advantage?"),
    # The one-turn F4 keys in f2-countdown's setting (the same warm start and lr 3e-4 as F2_SETS, so grpo's runs
    # are the same runs): outcome reshaping per group (adora, xrpo-sharpening), one sample per prompt with a tracked
    # baseline (spo-single at equal samples per step: 128 prompts x 1 against 16 x 8), segment Monte Carlo values
    # (spo-segment's chain, spo-tree) and the value-based objectives (rover, b-coder).
    "f4-countdown": Comparison(
        recipes=("grpo", "adora", "xrpo-sharpening", "spo-single", "spo-segment", "spo-tree", "rover", "b-coder"),
        task="countdown", seeds=3,
        sets=F2_SETS,
        recipe_sets={"spo-single": ("group_size=1", "prompts_per_step=128")},
        question="On one-turn countdown, do group reshaping, a single-sample tracked baseline, segment Monte Carlo "
                 "credit or value-based objectives beat GRPO on held-out accuracy or pass@8?"),
    # The same sharpening setting for the F2 objectives: which of them trade accuracy, pass@8 or entropy
    # differently from GRPO's clip? (hispo, dots-rr-clip and safe-kl-control need a rollout-trainer mismatch, a
    # replay buffer or a KL budget to act on; their claims say why they are not run here.)
    "f2-countdown": Comparison(
        recipes=("grpo", "bapo", "gbpo", "dispo", "capo", "r2vpo", "hapo", "aepo-agentic-clip", "gui-libra", "vspo",
                 "policy-shaping"),
        task="countdown", seeds=3,
        sets=F2_SETS,
        question="Beyond the clip: from one warm start and one learning rate, does any F2 objective beat GRPO's "
                 "clip on held-out accuracy or pass@8, and what does each do to entropy?"),
    # lr 3e-4 (3x the smoke default) makes GRPO sharpen within 80 steps: on seed 0, pass@1 0.31 -> 0.42 while
    # pass@8 falls 0.75 -> 0.70 and the held-out entropy 0.52 -> 0.36 (at 1e-3 accuracy falls too).
    "f3-entropy": Comparison(
        recipes=("grpo", "clip-higher", "entropy-bonus", "clip_cov", "kl_cov", "epo", "dcpo", "aepo-arbitrary"),
        task="countdown", seeds=3,
        sets=("lr=3e-4", "steps=80", "pass_k=8", "eval_every=20", "eval_size=100", "checkpoint_every=40"),
        question="GRPO sharpens: entropy and pass@8 fall while pass@1 rises. Which entropy controls keep entropy "
                 "and pass@8 up, and what do they cost in accuracy?"),
    # f3-entropy runs each recipe as its paper's script does; those scripts drop the KL term that grpo keeps (k3,
    # 0.04), which alone lowers entropy. Here every recipe gets grpo's KL term, so only the entropy mechanism differs.
    "f3-entropy-kl": Comparison(
        recipes=("grpo", "clip_cov", "kl_cov", "dcpo", "aepo-arbitrary"), task="countdown", seeds=3,
        sets=("lr=3e-4", "steps=80", "pass_k=8", "eval_every=20", "eval_size=100", "checkpoint_every=40",
              "kl_coef=0.04"),
        question="With grpo's KL term in every recipe, do Clip-Cov, KL-Cov, DCPO and AEPO keep entropy and pass@8 "
                 "above GRPO's?"),
    # F6: the same countdown setting; how each length reward moves response length (countdown answers are 4-8
    # tokens of a 10-token budget), and at what cost in accuracy. hbpo-reward is not here: the warm start never saw
    # a budget sentence, and with one (before or after the question) it almost never answers right (its claim says so).
    "f6-length": Comparison(
        recipes=("grpo", "soft-overlong", "cosine-length", "arlcp"), task="countdown", seeds=3,
        sets=("lr=3e-4", "steps=80", "eval_size=100", "checkpoint_every=40"),
        question="Response length over training with no length term, DAPO's overlong punishment, the cosine "
                 "length reward and ARLCP's group-relative length penalty: which shortens answers, and does "
                 "accuracy pay for it?"),
    # More F1 policy-gradient recipes, in f2-countdown's setting, each run as its paper's script (most have no KL
    # term where grpo has k3 0.04). ppo is here as the baseline ReMax's claim names. Left out, with the reason in
    # their claims (workbench/results/claims.py): salsa (the soup of two from-scratch SFT runs is a broken model: greedy
    # 0.00), minirl (corrects a rollout-engine mismatch we do not have), t-ppo (its gain is windowed generation,
    # not modelled), ppo-max (stability over long RLHF runs), spo-minimax (with the verifier's order it is dr_grpo
    # scaled), and the agent recipes gigpo, loop, m-grpo (on a one-turn task they reduce to grpo/rloo variants).
    "f1-more": Comparison(
        recipes=("grpo", "gmpo", "sapo", "gpg", "opo", "reinforce_plus_plus", "lite-ppo", "dapo_lite", "mdpo",
                 "ppo", "remax"),
        task="countdown", seeds=3,
        sets=F2_SETS,
        question="More of F1 from one warm start and one learning rate: does any other ratio, baseline or "
                 "normalisation beat GRPO on held-out accuracy or pass@8, and does ReMax's greedy baseline match "
                 "PPO's critic?"),
    # A denser reward than the verifier's 0/1: SSL's tiers of "nearly right" (the expression's value near the target).
    "f6-dense": Comparison(
        recipes=("grpo", "ssl"), task="countdown", seeds=3,
        sets=("lr=3e-4", "steps=80", "eval_size=100", "checkpoint_every=40"),
        question="Do SSL's tiered rewards (exact, then rings of relative distance to the target) train countdown "
                 "better than the verifier's binary reward?"),
    # A reward built to be gamed (a reward model's length bias), and CGPO's judges as the fix.
    "f6-hacking": Comparison(
        recipes=("grpo", "length-bias", "length-bias-cgpo", "length-bias-cgpo-tight"), task="countdown", seeds=3,
        sets=("lr=3e-4", "steps=80", "eval_size=100", "checkpoint_every=40"),
        question="Does the policy game a reward model's length bias (longer, truncated, less often right), and do "
                 "CGPO's format and length judges stop it, with a length threshold above or below the longest right "
                 "answer?"),
    # F5 part 1, where plain GRPO stalls: prompts the warm start almost never solves. The task knobs tried first put
    # addition beyond what the tiny model learns at all (digits=3 after 600 SFT steps: greedy 0.00, pass@1 0.004, and
    # 200 RL steps of rl-plus's reference rows move nothing), so the stall is made by the warm start's budget on a task
    # it can learn: 100 SFT steps on 2-digit addition leave greedy 0.00, sampled pass@1 0.022, pass@8 0.18 (seed 0),
    # most groups all wrong. Every recipe from the same warm start and lr (3e-4, F2_SETS'), each with its paper's loss.
    "f5-stall-addition": Comparison(
        recipes=("grpo", "ghpo", "scaf-grpo", "pope", "prefixrl", "icpo", "xrpo", "rl-plus", "ampo", "critique-grpo",
                 "igrpo", "r3l", "srpo-route"),
        task="addition", seeds=3,
        sets=("sft_steps=100", "lr=3e-4", "steps=100", "pass_k=8", "eval_every=50", "eval_size=100",
              "checkpoint_every=50"),
        question="Where the warm start solves almost no prompt (2% sampled, most groups all wrong), do hints, "
                 "prefixes, demonstrations, teachers, critiques or retries raise held-out pass@1 and pass@8 above "
                 "GRPO's?"),
    # The multi-turn stall: calculator episodes (5 operands: 4 tool calls, then the answer) after 400 SFT steps leave
    # greedy 0.00, sampled pass@1 0.004 and pass@8 0.03 (seed 0; 600 steps give 0.25), and 60 GRPO steps of 8
    # episodes x G = 8 see no reward at all (seed 0). The branching rollouts (their budget is the same G rows a
    # prompt) and the guidance keys that work on tool episodes, from that warm start and lr 3e-4.
    "f5-stall-calculator": Comparison(
        recipes=("grpo", "arpo-agentic", "aepo-agentic", "prefixrl", "pope", "r3l"), task="calculator", seeds=3,
        sets=("sft_steps=400", "lr=3e-4", "steps=60", "prompts_per_step=8", "max_new_tokens=16", "pass_k=4",
              "eval_every=30", "eval_size=100", "checkpoint_every=30"),
        question="Where tool episodes almost never succeed, do entropy-triggered branches, solution prefixes or "
                 "retries from the pivot give the policy a signal and raise held-out pass@1 and pass@4 above GRPO's?"),
    # ScalingInter-RL's turn cap needs episodes that can end sooner than they may last: the key-door corridors of
    # f4-keydoor (3-5 rooms: 5-7 turns at best, 9 allowed) in its setting, the cap 5 / 7 / 9 turns over steps
    # 0-13 / 14-27 / 28-39 (at 5 only the 3-room corridors can be solved), against GRPO's fixed 9.
    "f5-horizon-keydoor": Comparison(
        recipes=("grpo", "scalinginter-rl"), task="keydoor", seeds=3,
        sets=("sft_steps=30", *F4_SETS),
        recipe_sets={"scalinginter-rl": ("recipe_overrides.schedules.rounds=[5,7,9]",
                                         "recipe_overrides.schedules.every=14")},
        question="Does a turn cap that grows in stages (5, 7, then 9 turns) train the key-door agent better than "
                 "GRPO with the whole horizon from the start?"),
    # F5 part 2, data selection and replay: a pool of mixed difficulty, countdown with 2 to 5 numbers (after the smoke
    # warm start, greedy held-out accuracy 0.76 / 0.44 / 0.20 / 0.09 for 2 / 3 / 4 / 5 numbers after 60 GRPO steps,
    # seed 0), where GRPO's uniform sampling leaves 55-70 % of its groups with one reward (no signal). Each recipe's
    # rows a step are logged as `rollouts` (oversampling methods pay more): accuracy against rollouts spent.
    "f5-data-countdown": Comparison(
        recipes=("grpo", "arpo-gui", "grpo-roc", "pf-ppo", "bfs-prover-v2", "ahpo", "ppo", "arpo-gui-no-replay",
                 "grpo-pool", "dots-rr", "dots-rr-ppo", "dots", "pcl", "trapo", "rapo", "spear", "remix", "exit", "a3t",
                 "dart"),
        task="countdown", seeds=3,
        sets=("task_kw.min_numbers=2", "task_kw.n_numbers=5", "steps=100", "eval_every=25", "eval_size=200",
              "checkpoint_every=50"),
        question="On a pool of easy, learnable and nearly impossible prompts, do data selection and replay reach "
                 "GRPO's held-out accuracy with fewer rollouts, and how many of their groups carry no signal?"),
    # F8: games whose solutions are known. Kuhn poker's exploitability is exact (read off the model at its 12
    # information sets every 10 steps); the warm start imitates the uniform random player (exploitability 0.458).
    "f8-kuhn": Comparison(
        recipes=("self-play", "self-play-vs-scripted", "self-play-vs-past", "dr-mas", "mars", "marft", "spiral"),
        task="kuhn", seeds=3,
        sets=F8_KUHN_SETS, every=5,
        question="From a uniform-random warm start, does self-play drive Kuhn poker's exploitability towards 0, does a "
                 "fixed opponent, and do the multi-agent advantages (per-agent, per-player, agent-sequential GAE, "
                 "role baselines) get there faster?"),
    "f8-kuhn-policies": Comparison(
        recipes=("self-play", "self-play-separate"), task="kuhn", seeds=3,
        sets=(*F8_KUHN_SETS, "lora_r=8", "lr=1e-3"), every=5,
        question="Shared against separate policies (one LoRA adapter per player on one base, both at rank 8): does "
                 "giving each player its own weights change how fast exploitability falls?"),
    "f8-tictactoe": Comparison(
        recipes=("self-play", "self-play-vs-scripted"), task="tictactoe", seeds=3,
        sets=("sft_steps=300", "steps=100", "eval_every=20", "checkpoint_every=50"), every=5,
        question="From a random-move warm start, does self-play learn not to lose against the exact minimax player, "
                 "and does training against the scripted rule player get there first?"),
    # A real pretrained model on this CPU (the small preset): SmolLM2-135M-Instruct, no SFT, 1-digit products asked
    # in words, the reply's last number as its answer. TRL's GRPOTrainer from the same start is its peer
    # (bench/peer_trl.py --store small-products -> small-products-trl.jsonl).
    "small-products": Comparison(
        recipes=("grpo",), task="reasoning_gym:products", seeds=3, sets=(), every=1, preset="small",
        question="Does GRPO make a real pretrained model (SmolLM2-135M-Instruct) better at a task, beyond seed "
                 "noise, within about an hour of this CPU per seed, and does TRL's GRPOTrainer from the same start "
                 "learn the same?"),
}


def machine() -> str:
    """The CPU (or GPU) and core count, as a reader comparing numbers needs it."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch

    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{cpu}, {os.cpu_count()} cores{gpu}; torch {torch.__version__}"


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(name: str, spec: Comparison) -> dict:
    """What made the data: taken when the training starts (the commit whose code runs)."""
    return {"name": name, **asdict(spec), "command": f"python -m workbench.results.stored_runs {name}",
            "commit": commit(), "machine": machine(), "date": datetime.date.today().isoformat()}


def made_by(meta: dict) -> str:
    """What made a stored comparison, in the lines a notebook prints above its plots: the command, commit, date,
    machine, seeds and settings, and each later re-run of some of its recipes."""
    preset = f"--preset {meta['preset']} " if meta.get("preset", "smoke") != "smoke" else ""
    lines = [f"{meta['command']}  (commit {meta['commit']}, {meta['date']}, {meta['machine']}; {meta['seeds']} "
             f"seeds, {preset}{' '.join(meta['sets'])})"]
    lines += [f"  re-run {', '.join(r['recipes'])}: {r['command']}  (commit {r['commit']}, {r['date']}, "
              f"{r['machine']})" for r in meta.get("reruns", [])]
    return "\n".join(lines)


def kept(metric: str) -> bool:
    """A curve the book draws: one of KEPT, or one reward of a multi-reward recipe (rewards/<name>/mean|std)."""
    return metric in KEPT or bool(PER_REWARD.fullmatch(metric))


def data_lines(meta: dict, spec: Comparison, runs_dir: Path) -> list[dict]:
    """The JSONL content of a finished comparison (its run folders under `runs_dir`)."""
    from workbench.train.metrics import read_rows

    lines = [{"meta": meta}]
    for recipe in spec.recipes:
        for seed in range(spec.seeds):
            folder = runs_dir / f"{recipe}-s{seed}"
            summary = json.loads((folder / "summary.json").read_text())
            lines.append({"summary": {"recipe": recipe, "seed": seed,
                                      **{k: summary[k] for k in SUMMARY_KEPT if summary.get(k) is not None}}})
            rows, total = read_rows(folder / "metrics.jsonl"), 0.0
            for row in rows:  # every k-th row, the last, and every evaluation step's
                total += row.get("rollouts") or 0.0  # the x-axis of sample efficiency, summed over every step
                if row["step"] % spec.every == 0 or row is rows[-1] or row.get("eval/accuracy") is not None:
                    lines.append({"row": {"recipe": recipe, "seed": seed, "step": row["step"],
                                          **{k: v for k, v in row.items() if kept(k) and v is not None},
                                          **({TOTAL_ROLLOUTS: total} if "rollouts" in row else {})}})
    return lines


def run(name: str, runs_root: Path = ROOT / "runs" / "stored_runs", data_dir: Path = DATA,
        progress: bool = True) -> Path:
    """Train (or finish) the comparison `name` and write data_dir/NAME.jsonl; returns its path."""
    from workbench.train.compare import compare

    if name not in COMPARISONS:
        raise ValueError(f"no stored comparison {name!r}; choose from {sorted(COMPARISONS)}")
    spec = COMPARISONS[name]
    meta = provenance(name, spec)
    compare(list(spec.recipes), task=spec.task, preset=spec.preset, seeds=spec.seeds, out=runs_root / name,
            sets=list(spec.sets), recipe_sets={k: list(v) for k, v in spec.recipe_sets.items()}, progress=progress)
    data_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line) + "\n" for line in data_lines(meta, spec, runs_root / name))
    return write_atomic(data_dir / f"{name}.jsonl", text)


def rerun(name: str, recipes: list[str], runs_root: Path = ROOT / "runs" / "stored_runs", data_dir: Path = DATA,
          progress: bool = True) -> Path:
    """Re-train `recipes` (every seed) of the stored comparison `name` with the code of this commit and replace
    their lines in data_dir/NAME.jsonl, keeping the other recipes' runs; the meta line records the re-run. A recipe
    added to the comparison since it was stored is trained the same way and joins it."""
    from workbench.train.compare import compare

    if name not in COMPARISONS:
        raise ValueError(f"no stored comparison {name!r}; choose from {sorted(COMPARISONS)}")
    spec, path = COMPARISONS[name], data_dir / f"{name}.jsonl"
    unknown = [r for r in recipes if r not in spec.recipes]
    if unknown:
        raise ValueError(f"comparison {name!r} has no recipes {unknown}; its recipes: {list(spec.recipes)}")
    if not path.exists():
        raise ValueError(f"{path} does not exist: run the whole comparison first (python -m "
                         f"workbench.results.stored_runs {name})")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    meta = lines[0]["meta"]
    stored = {k: meta.get(k) for k in ("task", "seeds", "sets", "every", "recipe_sets")}
    if stored != json.loads(json.dumps({k: getattr(spec, k) for k in stored})):
        raise ValueError(f"comparison {name!r} has changed since {path} was stored (task, seeds, sets or every): "
                         f"re-run the whole comparison (python -m workbench.results.stored_runs {name})")
    made = provenance(name, spec)
    out = runs_root / f"{name}@{made['commit']}"
    compare(list(recipes), task=spec.task, preset=spec.preset, seeds=spec.seeds, out=out, sets=list(spec.sets),
            recipe_sets={k: list(v) for k, v in spec.recipe_sets.items() if k in recipes}, progress=progress)
    fresh = data_lines({}, replace(spec, recipes=tuple(recipes)), out)[1:]
    kept_lines = [line for line in lines[1:] if next(iter(line.values()))["recipe"] not in recipes]
    check_same_start(name, spec, meta, kept_lines, fresh)
    meta["reruns"] = [*meta.get("reruns", []), {"recipes": list(recipes),
                                                 "command": f"{made['command']} --recipes {' '.join(recipes)}",
                                                 **{k: made[k] for k in ("commit", "machine", "date")}}]
    order = {r: i for i, r in enumerate(spec.recipes)}
    body = sorted(kept_lines + fresh, key=lambda line: order[next(iter(line.values()))["recipe"]])  # stable
    held = {next(iter(line.values()))["recipe"] for line in body}
    meta["recipes"] = [r for r in spec.recipes if r in held]  # a recipe added to the comparison joins it here
    return write_atomic(path, "".join(json.dumps(line) + "\n" for line in [{"meta": meta}, *body]))


def check_same_start(name: str, spec: Comparison, meta: dict, kept_lines: list[dict], fresh: list[dict]) -> None:
    """Refuse to splice re-run recipes into a comparison whose runs started from another warm start: the greedy
    accuracy before training of each seed must be the stored one (recipes with their own settings left out)."""
    def before(lines):
        return {(s["seed"], s["accuracy_before"]) for line in lines if "summary" in line
                for s in [line["summary"]] if s["recipe"] not in spec.recipe_sets}
    stored, now = dict(before(kept_lines)), dict(before(fresh))
    changed = {seed: (stored[seed], acc) for seed, acc in now.items() if seed in stored and stored[seed] != acc}
    if changed:
        raise ValueError(f"the re-run starts from another warm start than the stored runs of {name!r} (accuracy before "
                         f"training, stored -> now, by seed: {changed}): the code that makes the warm start changed "
                         f"since, or the machine (the same SFT code gives another warm start on another CPU: stored on "
                         f"{meta.get('machine')}, now on {machine()}); re-run the whole comparison (python -m "
                         f"workbench.results.stored_runs {name}). The re-run's folders are kept")


def load(name: str, data_dir: Path = DATA) -> tuple[dict, dict[str, list[list[dict]]], list[dict]] | None:
    """(meta, recipe -> rows per seed, summaries) of a stored comparison, or None when it has not been run."""
    path = data_dir / f"{name}.jsonl"
    if not path.exists():
        return None
    meta, groups, summaries = {}, {}, []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if "meta" in item:
            meta = item["meta"]
        elif "summary" in item:
            summaries.append(item["summary"])
        else:
            row = item["row"]
            seeds = groups.setdefault(row["recipe"], [])
            while len(seeds) <= row["seed"]:
                seeds.append([])
            seeds[row["seed"]].append({k: v for k, v in row.items() if k not in ("recipe", "seed")})
    return meta, groups, summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.results.stored_runs", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"comparisons to run (default: all of {sorted(COMPARISONS)})")
    parser.add_argument("--recipes", nargs="+", metavar="RECIPE",
                        help="re-run only these recipes of one stored comparison and replace their lines")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.recipes:
        if len(args.names) != 1:
            print("error: --recipes re-runs recipes of one comparison: name exactly one", file=sys.stderr)
            return 2
        try:
            print(f"wrote {rerun(args.names[0], args.recipes, progress=not args.quiet)}")
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for name in args.names or sorted(COMPARISONS):
        print(f"stored comparison {name}: {COMPARISONS[name].question}" if name in COMPARISONS else name)
        try:
            print(f"wrote {run(name, progress=not args.quiet)}")
        except (ValueError, KeyError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
