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
# # Many agents: self-play, per-agent credit and exploitability
#
# In a game several agents act in turn and each sees only its own part of it: its card, its opponent's moves, never
# the opponent's card. Training one language model to play every seat (self-play) or one seat against a fixed
# opponent changes what a batch row is and what an advantage compares. The methods of this family (F8) differ in
# that comparison:
#
# - **which baseline**: GRPO pools every agent's rows of a prompt (`self-play`), Dr. MAS gives each agent its own
#   (`dr-mas`), MARS normalizes per player and per turn (`mars`), SPIRAL keeps a moving average per role (`spiral`),
#   MARFT runs GAE along the agents' actions in order of play with one shared critic (`marft`);
# - **who plays**: the policy in every seat, against a scripted player (`self-play-vs-scripted`), or one LoRA
#   adapter per player (`self-play-separate`); two copies that cooperate and swap roles (`cory`); one policy that
#   poses questions for itself and answers them (`ssp`);
# - **what is trained when**: alternating phases of one game (`vision-zero`), or strategies found in a latent space
#   and translated back by preference pairs (`lspo`).
#
# Kuhn poker is the test bed: three cards, one bet, solved exactly. Its **exploitability** (how much a best
# responder wins against the policy) is computed in closed form from the policy's probabilities at the game's 12
# information sets, read off the model: 0.458 chips a hand for the uniform random strategy the warm start imitates,
# 0 at a Nash equilibrium. This notebook shows:
#
# 1. **the multi-agent rollout**: one row per (game, agent), what each agent saw, token by token, from a short
#    self-play run of its own;
# 2. **per-agent advantages**: four estimators on the same rows;
# 3. **what the policy plays**: its strategy against the Nash family, and an exact explorer of exploitability;
# 4. **the stored comparisons**: exploitability over training for six recipes over 3 seeds, shared against separate
#    policies, and tic-tac-toe against the exact minimax player;
# 5. each paper's claim against what the runs show, and exercises.
#
# ## Key equations
#
# **Exploitability.** Player 0's expected payoff over the 6 deals and the game tree, a best response's value, and
# the distance to equilibrium (zero-sum: $u_1 = -u_0$):
#
# $$u_0(\sigma_0, \sigma_1) = \sum_{(c_0, c_1)} \tfrac{1}{6} \sum_{z} \pi^{\sigma}(z \mid c_0, c_1)\, u_0(z),
#   \qquad \mathrm{BR}_i(\sigma_{-i}) = \max_{\sigma_i'} u_i(\sigma_i', \sigma_{-i}),$$
#
# $$\mathrm{NashConv}(\sigma) = \sum_i \big[\mathrm{BR}_i(\sigma_{-i}) - u_i(\sigma)\big]
#   = \mathrm{BR}_0(\sigma_1) + \mathrm{BR}_1(\sigma_0), \qquad
#   \mathrm{expl}(\sigma) = \tfrac{1}{2}\,\mathrm{NashConv}(\sigma) \ge 0,$$
#
# 0 exactly at a Nash equilibrium. Kuhn's equilibria: player 0 bets J with $\alpha \in [0, 1/3]$, K with $3\alpha$,
# calls a bet with Q with $\alpha + 1/3$; player 1's strategy is unique.
#
# **Dr. MAS**: GRPO whose group is the pair (prompt $q$, agent $k$), each agent z-scored against its own rewards:
#
# $$A_i = \frac{R_i - \mu_{q,k}}{\sigma_{q,k} + \epsilon}, \qquad (q, k) = (\mathrm{group}(i), \mathrm{agent}(i)).$$
#
# **MARS**: turn rewards centred per player $k$, placed on each turn's last token and whitened ($\hat r$), summed to
# the end of the row, then centred over the *distinct* values of each player's returns (0 among them):
#
# $$\tilde r_{i,s} = r_{i,s} - \mathrm{mean}_{k(i)}\, r, \qquad G_t = \sum_{t' \ge t} \hat r_{t'}, \qquad
#   A_t = G_t - \mathrm{mean}\, U_k, \quad U_k = \{G_t : t \text{ a token of player } k\} \cup \{0\}
#   \ \text{(each value once)},$$
#
# then whitened over the batch.
#
# **MARFT**: GAE along the actions $u$ of a game in order of play, (step, agent), with one shared critic $V$:
#
# $$\delta_u = r_u + \gamma V_{u+1} - V_u, \qquad A_u = \delta_u + \gamma \lambda A_{u+1}
#   \qquad (\gamma = 0.99,\ \lambda = 0.95).$$
#
# **SPIRAL**: a role baseline, the moving average of the role's returns before each row:
#
# $$b_i = m_{k(i)}, \qquad m_k \leftarrow d\, m_k + (1 - d)\, R_i, \qquad A_i = R_i - b_i \qquad (d = 0.95).$$
#
# **SSP** (search self-play): the solver tries each valid question $j$ $n = 5$ times, $p_j$ the share it solves;
# the proposer is paid for its failures, $r_j = 1 - p_j$, or for intermediate difficulty,
# $r_j = 4 p_j (1 - p_j)$ for $0 < p_j < 1$ and 0 otherwise.
#
# **Vision-Zero** (who is the spy): the clue turns' rewards come from the judges' votes, zero-sum across players,
# minus a running baseline per role; the judges' vote is scored against the true spy. The trained phase alternates
# step by step: $m'_{i,t} = m_{i,t}\,[\mathrm{phase}(t) = p_{\text{step}}]$, $p_{\text{step}}$ = clue, vote, clue, ...
#
# **CORY**: a pioneer answers, an observer answers after seeing it; both rows are paid the collective
# $R = r(x, y_P) + r(x, y_O)$, each minus its own KL to the reference, and the two policies swap roles every
# $T$ steps: policy $j$ plays agent $(j + \lfloor \text{step} / T \rfloor) \bmod 2$.
#
# **LSPO** (werewolf): cluster the statements into $k$ latent intents, solve the latent game by CFR, train DPO on
# pairs of statements whose intents the latent policy ranks, grow $k$ and repeat.
#
# The rollout every recipe here shares (`workbench.rollout.agents`), in pseudocode:
#
# ```text
# for each example (a deal) and each of its G games:
#     views = env.reset(example, seed)              # one opening view per agent: its card
#     while (k := env.to_move()) is not None:
#         row[k] += what k observed since its last action            (mask 0)
#         action = policy.sample(row[k])            # or a Python player's move, if it holds seat k
#         row[k] += action                                           (mask 1)
#         observations, rewards, done = env.step(action)
#         for every agent j: inbox[j] += observations[j]; reward[j] += rewards[j]
# batch: one row per (game, agent): prompt, response, mask, turn, agent, episode (the game), group (the deal)
# advantages = estimator(batch)                     # grpo, dr-mas, mars, marft, spiral (role baseline + remax)
# ```

# %% tags=["parameters"]
preset = "smoke"        # "smoke": a 24-step self-play run on the tiny model (about 20 s after the cached warm start)
seed = 0                # the run's and the batches' seed
recipe = "self-play"    # sections 1-3: the recipe of the notebook's own run (any F8 recipe over the `agents` rollout)
steps = 24              # its RL steps (another preset: 6 x, 144, near the stored comparisons' 150)
prompts_per_step = 16   # deals a step
group_size = 8          # games per deal
stored_runs_dir = None  # where the stored runs are read from (None: data/stored_runs)
solutions = False       # True fills in the exercises' answers (the learner's cells start empty)
runs_dir = "runs"       # where the run folders go (`make run` / `workbench notebook` point it at their folder)

# %%
import dataclasses
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import pandas as pd
import torch
from IPython.display import HTML, display
from transformers.utils import logging as hf_logging

from workbench.rollout.agents import GamePolicy
from workbench.train import Trainer, make_config
from workbench.train.metrics import read_rows
from workbench.viz import multiagent_figures as mf

torch.set_num_threads(1)
hf_logging.disable_progress_bar()
big = preset != "smoke"

# %% [markdown]
# ## 1. The multi-agent rollout: one row per (game, agent)
#
# Kuhn poker as a text game: player 0's row starts from `P0 Q:` (its card), player 1's from `P1 K:` followed by
# player 0's first move; an action is one letter, `p` (pass: check or fold) or `b` (bet or call). The warm start
# imitated the uniform random player (200 SFT steps, as the stored comparisons': exploitability 0.46); the run
# below trains `recipe` from it by self-play: the policy plays both seats, `prompts_per_step` deals a step,
# `group_size` games each. Before training, the
# policy's strategy is read off the model at the 12 information sets (the probability of `b` after each context,
# encoded as the rollout encodes it), then again after.

# %%
config = make_config("smoke", recipe=recipe, seed=seed, task="kuhn", sft_steps=200,
                     steps=steps * (6 if big else 1), prompts_per_step=prompts_per_step, group_size=group_size,
                     eval_every=4,
                     checkpoint_every=steps * (6 if big else 1))
out = Path(runs_dir) / f"16_many_agents-{recipe}-{config.short_hash()}"
trainer = Trainer(config, out, progress=False).setup()
task, tokenizer = trainer.task, trainer.tokenizer
agents = task.make_env().agents
policy = GamePolicy(trainer.engine, trainer.model, tokenizer, dataclasses.replace(trainer.sampling, greedy=True),
                    seed=seed)
strategy_before, illegal_before = task.strategies(policy)  # the warm start (setup loads it, not the checkpoint)
summary = trainer.run()  # trains, or resumes a finished run; then evaluates
strategy_after, illegal_after = task.strategies(policy)
rows = read_rows(out / "metrics.jsonl")
print(f"{recipe}: {len(rows)} steps of {prompts_per_step} deals x {group_size} games; exploitability "
      f"{summary['exploitability_before']:.3f} -> {summary['exploitability_after']:.3f} chips a hand (uniform 0.458, "
      f"Nash 0); chips a hand against the scripted player {summary['payoff_vs_scripted_before']:+.3f} -> "
      f"{summary['payoff_vs_scripted_after']:+.3f}; illegal mass {illegal_before:.4f} -> {illegal_after:.4f}")

# %% [markdown]
# A batch of the trained policy, as the trainer makes it: each game gives one row per agent. Rows of one game share
# `episode`, rows of one deal share `group`, `agent` says whose row it is.

# %%
batch = trainer.make_batch(config.steps)
first = [r for e in (0, group_size, 2 * group_size) for r in mf.episode_rows(batch, e)]  # a game of 3 deals
display(pd.DataFrame({"row": first, "episode": batch.episode[first].tolist(), "agent": batch.agent[first].tolist(),
                      "group (deal)": batch.group[first].tolist(), "prompt": [batch.prompts[r] for r in first],
                      "response": [batch.completions[r] for r in first],
                      "mask": [batch.mask[r, :int((batch.turn[r] >= 0).sum())].int().tolist() for r in first],
                      "return": batch.rewards[first].tolist()}).set_index("row"))
episode = next((e for e in sorted(set(batch.episode.tolist())) if len(mf.play_order(batch, tokenizer, e)) == 3), 0)
display(HTML(mf.transcript_html(batch, tokenizer, episode, agents)))

# %% [markdown]
# **What to look at:** the table's `mask` column is 1 on the agent's own actions and 0 on what it observed. In the
# game drawn above (one where player 0 checked, player 1 bet and player 0 answered), player 0's row holds its
# check `p` (blue, framed: trained), then player 1's bet `b` (orange: an observation, mask 0, never trained but
# read by every later token), then its own answer; player 1's row saw the check in its prompt and holds one action.
# Each turn ends with its reward `r` (the chips arrive on the agent's last action: +1/-1 for a fold, ±2 after a
# call) and its advantage `A` (GRPO's, the recipe's: one number per row). The two returns sum to 0: the game is
# zero-sum. A healthy batch has no `illegal` observations (a token other than `p` or `b` forfeits the hand).
#
# ## 2. Per-agent advantages: four estimators on the same rows
#
# The same batch through four advantage estimators (each at its recipe's defaults): GRPO's one baseline per deal
# over both players' rows; Dr. MAS's per (deal, agent); MARS's per player and per turn; SPIRAL's role baseline
# $R - b_{\text{role}}$. SPIRAL's baseline is a moving average kept across steps: here it stands at each role's
# mean return over the batch, where the average settles after many steps of batches like this one. Below, one
# deal's games (the deal of the game above).

# %%
role_averages = {k: float(batch.rewards[batch.agent == k].mean()) for k in sorted(set(batch.agent.tolist()))}
advantages = mf.estimator_advantages(batch, role_averages=role_averages)
deal = torch.nonzero(batch.group == batch.group[mf.episode_rows(batch, episode)[0]]).flatten().tolist()
cards = [batch.prompts[r].split()[1][0] for r in mf.episode_rows(batch, episode)]
mf.agent_advantages_figure(batch, tokenizer, advantages, deal, agents,
                           title=f"one deal's {len(deal) // len(agents)} games (player 0 holds {cards[0]}, player 1 "
                                 f"{cards[1]}): each action's advantage<br><sup>x: game g, turn t, then the action; "
                                 "role baselines at each role's mean return</sup>").show()
display(pd.DataFrame(mf.agent_advantage_stats(batch, advantages)).round(3).set_index(["estimator", "agent"]))

# %% [markdown]
# **What to look at:** within one deal the cards are fixed, so a player's return follows the actions only. GRPO
# measures every row against the deal's mean over *both* players: in a zero-sum deal that mean is near 0, so the
# player holding the better card gets positive advantages for nearly everything it does, and the other negative
# ones: the card, not the action, is credited. Dr. MAS compares each player with itself on the same deal: an
# expected loss with J costs little, and the bars that stand out are the actions that did better or worse than
# that player usually does there. MARS is per player over the whole batch, so within a deal it looks like GRPO's,
# but it is per turn: player 0's check and its later call can differ. SPIRAL subtracts one number per role, so its
# bars keep the card's luck. The table, over the whole batch: each agent's mean advantage is 0 under Dr. MAS by
# construction (per deal and agent); under GRPO the seat that won more this batch has a positive mean, its edge
# credited to its moves; MARS centres turn rewards and distinct return values per player, not actions, so its
# means need not be 0 either; SPIRAL's is near 0 with the baselines at the roles' means, but a role baseline still
# far from the role's returns (a run's first steps start it at 0) gives every row of a role the same sign.
#
# ## 3. What the policy plays: its strategy against the Nash family
#
# The probability of `b` at each information set, read off the model before and after the run, beside three of
# Kuhn's equilibria; each column is labelled with its exploitability (exact). And the run's exploitability over its
# steps (evaluated every 4), from the warm start's at step −1.

# %%
mf.strategy_heatmap({"warm start": strategy_before, f"after {config.steps} steps": strategy_after},
                    title="P(bet or call) at Kuhn poker's 12 information sets<br><sup>the policy before and after "
                          "its run, then equilibria (player 0's α; player 1's is unique)</sup>").show()
mf.game_curves({recipe: [rows]}, [{"recipe": recipe, "seed": 0, **summary}],
               keys=("eval/exploitability", "eval/payoff_vs_scripted"),
               refs={"eval/exploitability": [(0.458, "uniform 0.458", "bottom right"), (0.0, "Nash 0")],
                     "eval/payoff_vs_scripted": [(0.0, "a Nash strategy: 0")]},
               title=f"this notebook's {recipe} run").show()

# %% [markdown]
# **What to look at:** the warm start imitated the uniform player, but not everywhere equally well: read its
# column for the cells near 0.5 and those SFT pushed to a pure action (its exploitability is below the uniform
# strategy's 0.458). A policy moving towards equilibrium bets K and calls with K (dark cells, as every Nash
# column), never calls with J, and bets J now and then as a bluff; the cells where the equilibria differ (J, K
# opening and Qpb) are free within the family. A healthy run's exploitability falls from 0.4 towards 0 over many
# steps; a few steps move it little, and it is noisy (the evaluation is exact, the training is not). If it rises,
# the policy is drifting to a pure strategy a best responder punishes. The payoff against the scripted player (who
# bets and calls with K only) rises above 0 as the policy learns to exploit it, which a Nash strategy does not do.
#
# Exploitability is a function of the 12 numbers: move one information set away from an equilibrium and watch what
# a best responder gains. The explorer computes it exactly at every setting (in the book: the default one).

# %%
mf.deviation_explorer(alpha=1 / 6, infoset="Qb", q=0.5)

# %% [markdown]
# **What to look at:** at the equilibrium value (dotted line) the curve touches 0. Moving a set off it makes only
# the *other* player gain (the deviator is indifferent where it mixes: its own gain stays at 0), and the
# exploitability is half that gain. The slopes differ by information set: a set reached often (Qb: player 1 with Q
# facing a bet) costs more per unit of deviation than a rare one. For player 0's sets J, K and Qpb the equilibrium
# moves with α: the whole family is at 0.
#
# ## 4. Exploitability over training, 3 seeds
#
# The stored comparison `f8-kuhn` trains each recipe 150 steps of 16 deals × 8 games from the same warm start, 3
# seeds, exploitability evaluated every 10 steps (`python -m workbench.results.stored_runs f8-kuhn`).

# %%
from workbench.results.claims import CLAIMS, VERDICT_RULE, claims_table
from workbench.results.stored_runs import load, made_by
from workbench.viz.tables import before_after_table, claims_html

KUHN_REFS = {"eval/exploitability": [(0.458, "uniform 0.458", "bottom right"), (0.0, "Nash 0")],
             "eval/payoff_vs_scripted": [(0.0, "a Nash strategy: 0")]}
KUHN_TABLE = (("exploitability", "exploitability"), ("payoff_vs_scripted", "chips vs scripted"),
              ("illegal", "illegal mass"))


def stored(name):
    """The stored comparison `name`, or None (and a line saying how to make it) when it has not been run."""
    found = load(name) if stored_runs_dir is None else load(name, data_dir=Path(stored_runs_dir))
    if found is None:
        print(f"{name}: not run yet: make it with `python -m workbench.results.stored_runs {name}`")
    else:
        print(made_by(found[0]))
    return found


kuhn_runs = stored("f8-kuhn")
if kuhn_runs is not None:
    meta, runs, summaries = kuhn_runs
    mf.game_curves(runs, summaries, keys=("eval/exploitability",), refs=KUHN_REFS,
                   title="f8-kuhn: exploitability over training (exact, chips a hand)").show()
    before_after_table(summaries, "f8-kuhn: before → after 150 steps (mean ± std over seeds)", KUHN_TABLE).show()

# %% [markdown]
# **What to look at:** each line is a recipe's mean over seeds, its band the min–max of the 3 seeds, from the warm
# start at step −1 (every recipe of a seed starts from the same near-uniform strategy, 0.463). A healthy self-play
# curve falls steadily and its band stays narrow. What the stored runs show instead: within 10 steps every self-play
# recipe sits at exactly 1/3, the exploitability of many *pure* strategy pairs (484 of the 4,096): policy gradient's
# last iterate turns deterministic, where Kuhn poker's equilibria mix. Self-play (at steps 79-129) and MARS (29-99)
# leave that plateau and end lowest (0.171 and 0.148), SPIRAL's role baseline never leaves it; watch the table's
# illegal mass beside them (self-play's grows to 0.29 late: the strategy shown is the legal actions' renormalized). The
# fixed-opponent control (`self-play-vs-scripted`) learns to beat the scripted player (+0.153 chips a hand) and
# becomes far more exploitable (0.844): exploiting one opponent is not being unexploitable. A method's claim holds
# here when its band lies below self-play's by more than the seeds spread.
#
# ## 5. Shared against separate policies
#
# `f8-kuhn-policies`: the same self-play with one LoRA adapter (rank 8, lr 1e-3) shared by both players, or one
# adapter per player, each trained only on its own rows with its own optimizer state.

# %%
policies_runs = stored("f8-kuhn-policies")
if policies_runs is not None:
    meta, runs, summaries = policies_runs
    mf.game_curves(runs, summaries, keys=("eval/exploitability", "eval/payoff_vs_scripted"), refs=KUHN_REFS,
                   title="f8-kuhn-policies: one shared adapter against one adapter per player").show()

# %% [markdown]
# **What to look at:** with separate policies each player learns only from its own half of the rows, so it sees
# half the data a shared policy sees, but its updates never pull the other seat's strategy along. If the
# separate curve falls no faster, sharing cost nothing here (Kuhn's two seats need different strategies, but the
# prompt already says which seat is asked). Bands that overlap: no difference beyond seed noise.
#
# ## 6. Tic-tac-toe against minimax
#
# `f8-tictactoe`: 100 steps from a random-move warm start; every 20 steps the policy plays the exact minimax player
# (which never loses) and the random player, taking X in half the games. Its accuracy is the share of games not
# lost to minimax (a draw is the best anyone gets).

# %%
ttt_runs = stored("f8-tictactoe")
if ttt_runs is not None:
    meta, runs, summaries = ttt_runs
    mf.game_curves(runs, summaries, keys=("eval/accuracy", "eval/forfeit", "eval/win_vs_random"),
                   labels={"eval/accuracy": "non-loss rate vs minimax"},
                   refs={"eval/accuracy": [(1.0, "minimax against itself", "bottom right")]},
                   title="f8-tictactoe: against the exact minimax player and the random one").show()
    before_after_table(summaries, "f8-tictactoe: before → after 100 steps (mean ± std over seeds)",
                       (("accuracy", "not lost to minimax"), ("forfeit", "forfeits vs minimax"),
                        ("win_vs_random", "wins vs random"))).show()

# %% [markdown]
# **What to look at:** the non-loss rate against minimax rises only by learning to draw: blocking its lines and
# taking the centre. Forfeits (illegal moves: a taken cell) fall first, since each costs a whole game. A policy that
# beats the random player more often but still loses to minimax has learned to attack, not to defend. The
# fixed-opponent control trains against the scripted rule player (win, block, centre), which is closer to minimax
# than a random self-play partner is.
#
# ## 7. Claim vs what we see
#
# Each method's central claim as we read it, and what its comparison shows over seeds (the same rows as the book's
# claims page). A comparison not stored yet says "not run yet".

# %%
claimed = {c.key for c in CLAIMS}  # the F8 recipes with a claim written (cory and lspo have none yet)
print(VERDICT_RULE)
display(HTML(claims_html([row for row in claims_table(None if stored_runs_dir is None else Path(stored_runs_dir))
                          if row["family"] == "multiagent" and row["recipe"] in claimed])))

# %% [markdown]
# ## Exercises
#
# 1. In Kuhn poker, player 0 always bets (and calls), player 1 always passes (checks, and folds facing a bet). What
#    is player 0's best-response value $\mathrm{BR}_0(\sigma_1)$, player 1's $\mathrm{BR}_1(\sigma_0)$, and the
#    pair's exploitability? Three numbers, in that order.
# 2. Dr. MAS: one prompt, a solver (agent 0) with rewards 1, 0, 0 and a verifier (agent 1) with rewards 0.3, 0.1,
#    0.2 (one turn per row). What are the verifier's three advantages (Bessel std, $\epsilon = 10^{-6}$)?
# 3. MARS: one player's returns on its policy tokens are 1, 1, 1, −1, 0.5 (and its rows' padding holds 0). What
#    does MARS's distinct-value step subtract from them, and what is then the advantage of a token whose return is
#    1 (before the batch whitening that follows)? Two numbers.
# 4. SSP: the solver attempts three proposed questions 5 times each and solves them 5, 2 and 0 times. What does the
#    proposer get for each under `1-acc` ($1 - p$), and under the intermediate difficulty ($4p(1-p)$ for
#    $0 < p < 1$, else 0)? Six numbers, the three `1-acc` rewards first.
#
# Write your answers in the cell below (they start as `None`) and run the check cell after it. The worked
# solutions are in the folded cell in between: they fill in the answers only when the notebook runs with
# `-p solutions=True`.

# %%
kuhn_answer = None       # 1: [BR_0(sigma_1), BR_1(sigma_0), exploitability]
verifier_advantages = None  # 2: [A, A, A]
mars_answer = None       # 3: [the mean subtracted, the advantage of a token of return 1]
proposer_rewards = None  # 4: [1 - p for the 3 questions, then 4 p (1 - p) for the 3]

# %% tags=["hide-input"]
# The solutions, worked by hand: filled in only when the notebook runs with solutions=True (the headless checks).
# Try the exercises first; in the book this cell is folded.
if solutions:
    # 1. Player 1 always folds: betting wins the ante every hand, BR_0 = 1. Facing player 0's bet every hand, player
    #    1 calls with K (+2), folds J (-1), and with Q either (0): BR_1 = (2 + 0 - 1) / 3. NashConv / 2:
    kuhn_answer = [1.0, 1 / 3, (1 + 1 / 3) / 2]
    # 2. The verifier's own mean 0.2 and Bessel std sqrt((0.01 + 0.01 + 0) / 2) = 0.1:
    verifier_advantages = [(r - 0.2) / (0.1 + 1e-6) for r in (0.3, 0.1, 0.2)]
    # 3. Distinct values {-1, 0, 0.5, 1} (0 from the padding), mean 0.5 / 4:
    mars_answer = [0.125, 1 - 0.125]
    # 4. p = 1, 0.4, 0:
    proposer_rewards = [0.0, 0.6, 1.0] + [0.0, 4 * 0.4 * 0.6, 0.0]

# %%
from workbench.exercises.answers import check_answers
from workbench.exercises.nb16_many_agents import (check_dr_mas, check_kuhn_exploitability, check_mars_shift,
                                                  check_ssp_rewards)

check_answers([(1, kuhn_answer, check_kuhn_exploitability),
               (2, verifier_advantages, check_dr_mas),
               (3, mars_answer, check_mars_shift),
               (4, proposer_rewards, check_ssp_rewards)])
