# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Rollouts and guidance: where the samples come from
#
# GRPO learns only from a group whose rewards differ. A prompt the policy never solves gives G failures, every
# advantage is 0, and the step teaches nothing about it; a prompt it always solves, the same. Every method of this
# family (F5, part 1) acts on the samples themselves, before any advantage is computed:
#
# - **rollout control** decides how many samples a prompt gets and where they fork: `arpo-agentic` and
#   `aepo-agentic` branch a multi-turn trajectory after a tool call where the policy's entropy rose, `xrpo` spends
#   extra samples on the prompts whose success rate they would pin down best, `scalinginter-rl` caps the turns of an
#   episode and lifts the cap as training goes on;
# - **hints and prefixes** put part of the task's solution in front of the policy: `ghpo`, `scaf-grpo` and `pope` in
#   the prompt of a group that failed, `prefixrl` as the start of the response;
# - **other policies' tokens**: a reference solution (`rl-plus`), teachers' solutions (`ampo`), samples drawn with a
#   solved demonstration in context (`icpo`), trained beside the policy's own with their own weights;
# - **critiques and retries**: a refinement after a critique (`critique-grpo`), after the best own draft (`igrpo`), a
#   retry from the turn where an episode went wrong (`r3l`);
# - **routing**: `srpo-route` trains a failed sample towards the same model prompted with a correct sibling.
#
# This notebook draws what each does to one real batch:
#
# 1. **an ARPO branching tree** from a real rollout on the calculator tool task, every node coloured by the
#    entropy that decided the branch;
# 2. **a token strip per guidance method**: the prompt each sample was drawn under beside the one it is trained under,
#    and what the update does with every response token;
# 3. **the stall comparison**: the stored runs on tasks where GRPO stalls;
# 4. each paper's claim against what the runs show, and exercises.
#
# ## Key equations
#
# GRPO's advantage of sample $i$ in a group of $G$ is $A_i = (R_i - \bar R)/\sigma_R$, 0 for every sample when the
# rewards agree. Entropy-guided branching (ARPO) measures, after the action $a_s$ that called a tool, the top-10
# entropy of its first 20 tokens over the vocabulary size,
#
# $$H_s = -\frac{1}{\log |V|} \sum_{t < 20} \sum_{v \in \mathrm{top}_{10}(t)} p_v \log p_v, \qquad
#   P(\text{branch}) = \mathrm{clip}\big(\tau + w\,(H_s - H_{init}),\ 0,\ 1\big),$$
#
# $H_{init}$ the trajectory's first measurement ($\tau = 0.5$, $w = 0.2$ in ARPO's scripts); a branch copies the
# trajectory, its tokens and its environment, and samples on by itself. A hint is the first $\mathrm{round}(\omega
# |y^\star|)$ characters of the solution $y^\star$ in the prompt, $x' = x \oplus y^\star_{1:\mathrm{round}(\omega
# |y^\star|)}$. A token the policy did not sample from the plain prompt is trained without a ratio, by its own weight
# on $A\,\nabla \log \pi_\theta$: LUFFY's policy shaping (`icpo`, `ampo`, `critique-grpo`) trains
# $f(p) = p/(p + \gamma)$, whose weight is
#
# $$\frac{\partial f}{\partial \log p} = \frac{\gamma\, p}{(p + \gamma)^2} \le \frac14, \qquad \gamma = 0.1,$$
#
# and RL-PLUS multiplies A by a bounded multiple-importance ratio and an exploration weight,
#
# $$w_t = \frac{2\,\pi_\theta(e_t)}{\pi_{old}(e_t) + \frac12\big(\pi_{old}(e_t) + 1\big)}\,
#   \big(1 - \mathrm{sg}\,\pi_\theta(e_t)\big)^{0.5}.$$
#
# SRPO trains a failed sample $y_i$ with a correct sibling $y_j$ by $w_t\,\mathrm{KL}(q_t \,\|\, \pi_\theta)$, $q_t$ the
# policy before the update prompted with $y_j$, $w_t = e^{-H(q_t)} / \mathrm{mean}\, e^{-H(q)}$.

# %% tags=["parameters"]
preset = "smoke"     # "smoke": one batch per recipe on CPU in about a minute; "full": bigger batches to browse
seed = 0             # the warm starts' and the batches' seed
arpo_sft_steps = 150  # section 1: SFT steps of the calculator warm start (tests/rollout/test_arpo.py's)
guidance_sft_steps = 100  # section 2: SFT steps of the addition warm start: right on some prompts, wrong on others
guidance_digits = 1  # section 2: digits of the addition operands
stored_runs_dir = None  # where the stored runs are read from (None: data/stored_runs)
solutions = False    # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"    # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import ipywidgets as W
import pandas as pd
import torch
from IPython.display import display
from transformers.utils import logging as hf_logging

from workbench import registry
from workbench.train import Trainer, make_config
from workbench.viz import guidance_figures as gf
from workbench.viz.widgets import explorer

torch.set_num_threads(1)
hf_logging.disable_progress_bar()
big = preset != "smoke"


def trainer_for(recipe, **settings):
    """A trainer of `recipe` on the tiny model (every preset: these sections show one batch, not a run), its run
    folder named by its config."""
    config = make_config("smoke", recipe=recipe, seed=seed, **settings)
    out = Path(runs_dir) / f"14_rollouts_and_guidance-{recipe}-{config.short_hash()}"
    return Trainer(config, out, progress=False).setup()


# %% [markdown]
# ## 1. An ARPO branching tree from a real rollout
#
# The calculator task asks for $a \pm b \pm c$ with one-digit operands; the agent calls the tool with `[a+b]`, reads
# its answer, and ends with `A:<number>`. After a short SFT warm start (cached after the first run) it calls the tool
# and often gets the answer wrong. The `arpo-agentic` trainer's `make_batch(0)` runs the real rollout: $G/2$ global
# rollouts per prompt, then after each tool response every running trajectory branches with probability
# $\mathrm{clip}(0.5 + 0.2\,\Delta H, 0, 1)$ until the prompt has $G$ rows. The batch records each row's `parent` (the
# row it was copied from) and `branch_turn` (its first own turn); the entropies are measured again from the batch by
# one forward pass (`segment_entropies`: the rollout's own top-10 entropy, from a full pass instead of the sampler's).

# %%
arpo = trainer_for("arpo-agentic", task="calculator", task_kw={"n_operands": 3, "digits": 1},
                   sft_steps=arpo_sft_steps, prompts_per_step=16 if big else 4, group_size=8, max_new_tokens=8,
                   eval_size=16)
tree_batch = arpo.make_batch(0)
entropies = gf.segment_entropies(arpo.model, tree_batch, arpo.tokenizer)
settings = {**registry.get("rollout", "arpo-agentic").defaults, **arpo.recipe.rollout.kw}  # the recipe's, else defaults
tau, w = settings["branch_probability"], settings["entropy_weight"]
h_range = (float(entropies.nan_to_num(1e9).min()), float(entropies.nan_to_num(-1e9).max()))
arpo.close()
print({k: round(v, 3) for k, v in arpo.rollout_info.items()})
print(f"{tree_batch.size} rows of {len(tree_batch.group.unique())} prompts; branches: "
      f"{int((tree_batch.parent >= 0).sum())}; solved: {float(tree_batch.rewards.mean()):.2f}; tau = {tau}, w = {w}")

# %% [markdown]
# Pick a prompt in the explorer (it needs a live kernel; it opens on the prompt with the most branch points, and every
# prompt shares one colour scale). Hover a node for its $H$, $\Delta H$ and the branch probability after its tool
# response.

# %%
groups = tree_batch.group.unique().tolist()
forks = {g: sum(n["branches"] > 0 for n in gf.tree_nodes(tree_batch, g, entropies, tau=tau, w=w)) for g in groups}


def show_tree(group):
    return gf.arpo_tree_figure(tree_batch, group, entropies, tau=tau, w=w, h_range=h_range, height=520)


explorer({"group": W.Dropdown(options=groups, value=max(groups, key=forks.get), description="prompt")}, show_tree)

# %% [markdown]
# And the prompt its rows solve most often (another one, where the batch has it):

# %%
solved = {g: float(tree_batch.rewards[tree_batch.group == g].sum()) for g in groups if g != max(groups, key=forks.get)}
if solved:
    show_tree(max(solved, key=solved.get)).show()

# %% [markdown]
# **What to look at:** every lane is one row of the batch; a diagonal line is a branch: the copy shares every turn
# left of it with its parent (drawn once, in the parent's lane) and samples on by itself. A healthy tree branches
# where the entropy rose after a tool response (a ringed node with a brighter colour than the trajectory's first
# one) and ends with rows whose rewards differ, so that the group has a signal; a group whose branches all copy one
# another to the same answer adds G rows and no information. At $w = 0.2$ the entropy moves the probability only a
# little ($\Delta H = 0.3$ gives 0.56 instead of 0.5): most of the branching is the base rate $\tau$.
#
# `aepo-agentic` runs the same tree with the budget split by a pre-monitoring trajectory
# ($m = G\,\sigma(\beta(H_{root} - H_{tool}))$ global rollouts) and multiplies the branch probability by
# $\lambda^c$ after $c$ consecutive branches on a path; `scalinginter-rl` does not branch at all, it caps an episode's
# turns at a schedule's horizon and lifts the cap every $K$ steps.
#
# ## 2. How each guidance method changes the prompt and which tokens it trains
#
# Each method's trainer on one-digit addition after a short warm start, which solves some prompts and fails others:
# a group of all failures is where the guidance acts. `make_batch(0)` is the exact batch step 0 trains on;
# `gf.recording` keeps the generations the engine made for it, so each row is matched to the prompt it was drawn under.
# Scaf-GRPO's warm-up (50 steps of plain GRPO in its script) is set to 0 so that its hints act at step 0.
#
# What each method's paper says it does with the tokens, and what the strip shows:
#
# - `ghpo`: a group whose samples all fail is sampled again with 25, then 50, then 75 % of the solution in the prompt;
#   the hinted samples replace the group, drawn and trained under the hinted prompt, all on-policy.
# - `scaf-grpo`: a group at a "learning cliff" (all 0) is sampled once per tiered hint level; the lowest level with a
#   correct sample replaces the group's first row, hinted prompt included.
# - `pope`: a hard problem gets a guided copy (a new group) with the shortest oracle prefix in the prompt that yields a
#   success; the oracle's tokens are context, never targets.
# - `prefixrl`: half the groups continue a prefix of the solution; the prefix sits in the response with mask 0
#   (given context), the continuation is on-policy RL.
# - `icpo`: one sample per group is drawn with a solved demonstration in the prompt and trained under the plain prompt
#   through $-A\,p/(p + 0.1)$: off-policy, no ratio.
# - `rl-plus`: one row per group is the reference solution, sampled by nothing; its tokens get the MIS ratio times the
#   exploration weight, the sampled ones the unclipped ratio.
# - `ampo`: a group with no correct sample gets up to 2 teacher solutions in place of failed samples, trained by
#   $-A\,p/(p + 0.1)$ and kept out of the group's baseline.
# - `critique-grpo`: every response gets a critique (correct or not, and the ground truth) and a refinement; one
#   refinement per group replaces its first row, drawn under the critique and trained under the plain question,
#   off-policy.
# - `igrpo`: half the budget drafts (never in the batch); the best draft is appended to the prompt, and the other half,
#   drawn and trained under that prompt, is the GRPO group.
# - `r3l`: each failure is retried from its pivot turn with the verifier's diagnosis in the prompt; the retry is
#   trained under the plain prompt, and a verified correction also under the guided one with $A = 1$; turns before
#   the pivot are masked (on a one-turn task the pivot is 0: nothing is masked). Its loss is $-A \log\pi / 2$.
# - `srpo-route`: a failed sample with a correct sibling is distilled towards the policy prompted with that sibling
#   (the teacher prompt of its row); the others are GRPO's.
# - `xrpo`: extra samples go to the prompts whose success rate is least certain; a prompt with no success so far draws
#   them with solved exemplars in context, and they are trained under that prompt.

# %%
GUIDANCE = ("ghpo", "scaf-grpo", "pope", "prefixrl", "icpo", "rl-plus", "ampo", "critique-grpo", "igrpo", "r3l",
            "srpo-route", "xrpo")
guided, acted = {}, {}
for key in GUIDANCE:
    trainer = trainer_for(key, task="addition", task_kw={"digits": guidance_digits}, sft_steps=guidance_sft_steps,
                          prompts_per_step=32 if big else 8, group_size=4, max_new_tokens=6, eval_size=16,
                          recipe_overrides={"group_transforms": {"warmup_steps": 0}} if key == "scaf-grpo" else {})
    with gf.recording(trainer) as record:
        batch = trainer.make_batch(0)
    guided[key] = gf.guided_batch(trainer, batch, record)
    acted[key] = {"rows": batch.size, "guided groups": len(gf.guided_groups(guided[key])),
                  "logged": ", ".join(f"{k} {v:.2f}" for k, v in trainer.rollout_info.items()) or "–"}
    trainer.close()
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(acted).T)

# %% [markdown]
# The table is what each method's own logs say it did in this step (`logged`: its metrics, shares of the step's
# groups or rows) and how many groups hold a row it touched. Pick a method and one of its guided groups in the
# explorer; the static strips below show, for each method, its first guided group whose rewards differ (else its
# first guided group).

# %%
def show_strip(method, nth):
    g = guided[method]
    groups = gf.guided_groups(g) or [0]
    return gf.strip_figure(g, groups[nth % len(groups)], width=600, height=460)


explorer({"method": W.Dropdown(options=list(GUIDANCE), description="method"),
          "nth": W.IntSlider(value=0, min=0, max=15, description="guided group", continuous_update=False)},
         show_strip)

# %%
for key in GUIDANCE:
    gf.strip_figure(guided[key]).show()

# %% [markdown]
# **What to look at:** the colour of a token is what the update does with it. Blue tokens are plain on-policy RL
# (weight 1 at $A = 1$, 0.5 under R3L's halved loss); green ones are trained off-policy, and their small weights are
# the point: LUFFY's $\gamma p/(p + \gamma)^2$ is at most 1/4 and tiny on the tokens the policy finds unlikely,
# RL-PLUS's MIS ratio stays below 1 at $\pi_\theta = \pi_{old}$; orange tokens are context (mask 0); purple ones are
# pulled towards the self-teacher, weighted by its confidence. The arrow says which prompt a row was drawn under and
# which it is trained under: ICPO, Critique-GRPO and R3L's retries are drawn under a longer prompt and trained under the
# plain one, so the gradient moves $\pi_\theta(\cdot \mid x)$ towards what only the guided prompt made reachable; GHPO,
# POPE, iGRPO and XRPO train under the prompt they drew from, so what the policy learns is to use the hint. A healthy
# batch has guided groups with rewards that differ (a success among failures): a guided group that still fails
# everywhere (all $A = 0$) gave GRPO nothing either. The tiny character-level model has never seen the hints'
# instructions, and a one-digit sum has one or two characters: 25 and 50 % of a one-character answer round to no hint
# at all (exercise 1), which is why GHPO's and POPE's hints rescue few groups here, and Scaf-GRPO's tiered hints
# rarely any (`scaf/rescued_groups` in the table).
#
# ## 3. The stall comparison
#
# The claims of this family are about prompts plain GRPO cannot learn from. The stored comparisons train each recipe
# from the same warm start as GRPO where that warm start solves few prompts: `f5-stall-addition` (the one-turn
# guidance keys) and `f5-stall-calculator` (the branching rollouts and the keys that work on tool episodes);
# `f5-horizon-keydoor` puts `scalinginter-rl`'s growing turn cap beside GRPO's whole horizon on the key-door corridors
# (`python -m workbench.results.stored_runs f5-stall-addition f5-stall-calculator f5-horizon-keydoor`;
# `workbench/results/stored_runs.py` says why each setting). One panel per method: its held-out pass@1 (and pass@k)
# against GRPO's in grey, the band the min-max over seeds; step -1 is the warm start. A method that gets a stalled task
# moving lies above the grey band.

# %%
from IPython.display import HTML

from workbench.results.claims import VERDICT_RULE, claims_table
from workbench.results.stored_runs import load, made_by
from workbench.viz.credit_comparisons import against_baseline_grid
from workbench.viz.run_curves import with_start
from workbench.viz.tables import before_after_table, claims_html

for name in ("f5-stall-addition", "f5-stall-calculator", "f5-horizon-keydoor"):
    stored = load(name) if stored_runs_dir is None else load(name, data_dir=Path(stored_runs_dir))
    if stored is None:
        print(f"no stored comparison {name} yet: make it with `python -m workbench.results.stored_runs {name}`")
        continue
    meta, runs, summaries = stored
    print(made_by(meta))
    curves = with_start(runs, summaries)
    for key, label in (("eval/pass@1", "pass@1"), ("eval/pass@k", "pass@k")):
        if not any(key in row for seeds in curves.values() for rows in seeds for row in rows):
            continue  # a comparison without sampled pass@k
        against_baseline_grid(curves, key=key,
                              title=f"{name}: held-out {label} against grpo (grey)<br><sup>colour: the method; lines: "
                                    "mean over seeds, bands: min–max; step -1: the warm start</sup>").show()
    before_after_table(summaries, title=f"{name}: held-out before → after (mean ± std over seeds)").show()

# %% [markdown]
# **What the stored runs show** (3 seeds each; the tables above). On the stalled addition (a 100-step warm start:
# sampled pass@1 0.015, 91 % of groups all wrong) GRPO barely moves in 100 steps (pass@1 0.018, pass@8 0.13), and so
# does almost everything else. Only RL-PLUS lies above the grey band, a little: one reference answer per group lifts
# pass@8 to 0.15 and greedy accuracy to 0.04. The methods that put their guidance in the prompt (GHPO, Scaf-GRPO,
# POPE, ICPO, XRPO, Critique-GRPO, iGRPO, R3L) all act, as the strips of section 2 show, but their guided samples
# still fail: this warm start saw plain prompts only and does not read a hint (a pretrained model does). PrefixRL's
# prefixed problems pass half the time, yet the unprefixed ones do not follow; AMPO's teachers raise greedy accuracy
# but lower pass@8; Critique-GRPO and SRPO fall below GRPO. On the stalled calculator no sample of any recipe
# succeeds in 60 steps (at 400 SFT steps even half the expert's episode given is not enough), so no method has a
# signal there. ScalingInter-RL's 5-turn stage costs held-out success that the longer stages win back. A healthy
# guidance method here would lift its coloured curve off the floor within the first tens of steps, while the grey
# one stays flat.
#
# ## 4. Claim vs what we see
#
# Each method's central claim as we read it, and what its comparison shows over seeds (the same rows as the book's
# claims page); where the mechanism cannot act here, the row says why.

# %%
F5_KEYS = ("arpo-agentic", "aepo-agentic", "xrpo", "scalinginter-rl", "ghpo", "scaf-grpo", "pope", "prefixrl", "ampo",
           "icpo", "rl-plus", "critique-grpo", "r3l", "igrpo", "srpo-route")
print(VERDICT_RULE)
display(HTML(claims_html([row for row in claims_table() if row["recipe"] in F5_KEYS])))

# %% [markdown]
# ## Exercises
#
# 1. GHPO hints with the first $\mathrm{round}(\omega\,|y^\star|)$ characters of the solution, $\omega \in \{0.25, 0.5,
#    0.75\}$. How many characters of the two-character solution `15` does the hint hold at each stage (three whole
#    numbers, with Python's `round`)?
# 2. A calculator trajectory's first action measured $H_{init} = 0.15$; after its second tool call, the action that
#    made the call measured $H = 0.65$. With the recipe's $\tau = 0.5$ and $w = 0.2$, what is the probability that ARPO
#    branches the trajectory there?
# 3. A demonstration token has $\pi_\theta = \pi_{old} = 0.2$ (the first minibatch). What factor multiplies
#    $A\,\nabla \log \pi_\theta$ on it under RL-PLUS (MIS ratio times the exploration weight, exponent 0.5), and under
#    LUFFY's policy shaping ($\gamma = 0.1$)? Two numbers, RL-PLUS's first.
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
hint_lengths = None      # 1: three whole numbers
p_branch = None          # 2: a float
token_weights = None     # 3: [RL-PLUS's, LUFFY's]

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    hint_lengths = [round(omega * 2) for omega in (0.25, 0.5, 0.75)]   # round(0.5) = 0 and round(1.5) = 2: half to even
    p_branch = min(1.0, max(0.0, 0.5 + 0.2 * (0.65 - 0.15)))          # 0.6
    p = 0.2
    token_weights = [4 * p / (3 * p + 1) * (1 - p) ** 0.5,            # 2p / (p + (p + 1)/2) = 4p / (3p + 1), times C_t
                     0.1 * p / (p + 0.1) ** 2]                        # d/dlog p of p / (p + 0.1)

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb14_rollouts_and_guidance import (check_arpo_branch_probability, check_ghpo_hint_lengths,
                                                            check_off_policy_weights)

check_answers([(1, hint_lengths, check_ghpo_hint_lengths),
               (2, p_branch, check_arpo_branch_probability),
               (3, token_weights, check_off_policy_weights)])
