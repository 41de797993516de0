"""LSPO's data source: preference pairs among the statements of the step's own self-play games, ranked by the latent
game's CFR solution (`workbench.preference.lspo` has the loss and the pairing rule).

One step (the rollout `lspo`, on `--task werewolf`):

    games       group_size self-play games per example (`rollout.agents`: the policy in every seat), played out
    talk        every statement is its seat's first action, so its context x is the row's prompt (the opening and the
                statements heard before it); at each x, `candidates` more statements y ~ pi(. | x) are sampled (stop
                "\\n"); the played statement and these are the rows of x
    space       z(y) in 0..k-1: k-means on what the others hear of every statement of the step (`latent.fit`, k at
                the first iteration; `latent.expand`, k -> k + 1 with the previous centroids first, at each later one,
                up to k_max; refitted with the same number once k_max is reached)
    solve       sigma* = CFR+ (`cfr_iterations`) on the latent game with the space's k intents, started from the
                behaviour policy of the step's played moves (`WerewolfTask.latent_solution`, `latent_moves`)
    pairs       at each x, with I(x) the latent set of the seat to move (the intents of the statements before it):
                chosen = the row of highest sigma*(I(x), z(y)), rejected = the row of lowest, when they differ by more
                than `min_gap` (`lspo.latent_pairs`; one cluster, or tied intents, gives no pair)
    batch       one group per pair (chosen, rejected), teacher-forced: the prompt is x's exact token ids, each
                response the statement's tokens as sampled (the stop "\\n" kept, no EOS: a mid-game turn)

An LSPO iteration is `every` steps: the space and sigma* are fitted at its first step (from that step's games) and
kept, with the iteration count, as the component's pipeline state (checkpointed: a resumed run pairs with the same
space and policy); every step pairs the statements of its own games with them. The recipe moves the DPO reference to
the policy at the end of each iteration (`reference: iterate` with the same `every`), as LSPO's next iteration
fine-tunes from the last.

Decisions (the paper is abstract-only here; see `lspo` and `werewolf` for the latent game's):
- Only statements are paired. Votes are already the latent game's own actions (a seat number); LSPO's translation
  step is about free-form talk.
- The played statement is one of the rows of its context (a sample of the same pi(. | x) as the candidates); the
  behaviour start of CFR counts only played moves (candidates were not played).
- A decision point is its exact context ids: equal contexts (the same deal and the same statements before, in two
  games) are one point, their rows pooled. `latent_pairs` is called with row indices as its texts, so a pair names
  its rows' token ids.
- The space of an iteration is fitted on the statements of its first step only, all ranks' (`ctx.gather_objects`,
  as are the played moves CFR starts from), so every rank keeps the same state.
- A step whose games held no statement (every row cut by the token budget) pairs nothing and leaves the state.
- No pair: a batch of no rows (`preference_data.items_batch`), which the trainer skips (grad_norm 0, `pairs` 0).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.batch import RolloutBatch, left_pad
from workbench.envs import werewolf
from workbench.preference import latent
from workbench.preference.lspo import LSPO_TITLE, intent_probs, latent_pairs
from workbench.rollout.agents import by_policy, learner_seats, make_games, play_games
from workbench.rollout.preference_data import PAIRS_LOGS, delivered, items_batch
from workbench.rollout.turns import merged_stop, padded

LSPO_LOGS = {
    "lspo/k": ("Intents (k-means clusters of statements) of the latent space the step pairs with.",
               "k at the first iteration, one more each iteration up to k_max; below that, the statements have fewer "
               "distinct embeddings (a collapsed policy)."),
    "lspo/nash_conv": ("NashConv of the iteration's latent policy (CFR+ on the latent game; 0 at a Nash equilibrium).",
                       "Near 0 (< 0.01); larger means too few cfr_iterations for this k."),
    "lspo/village_win": ("The village's chance of winning under the iteration's latent policy.",
                         "1/2 is babbling (talk ignored); above it the intents carry the seer's information (about "
                         "2/3 from scripted-like talk with 3 players)."),
}
MAX_TERMINALS = 100_000  # the largest latent game solved here (a CFR+ iteration: about 1 ms per 1,000 terminals)


@dataclass
class Talk:
    """One statement decision point of a played game: its context and the statements made or sampled there."""

    game: int
    seat: int
    context: list[int]                                # the row's prompt ids (the seat speaks at its first action)
    prompt: str                                       # their text
    said: list[list[int]] = field(default_factory=list)  # token ids of each statement, the played one first
    texts: list[str] = field(default_factory=list)    # each one's text as sampled
    heard: list[str] = field(default_factory=list)    # what the others would hear of it


def talk_points(games, max_chars: int) -> list[Talk]:
    """The statements of finished games: every seat whose first action was its statement, with that action."""
    out = []
    for g, game in enumerate(games):
        for seat, statement in enumerate(game.env.statements):
            row = game.rows[seat]
            ep = row.episode
            ids = [t for t, m, s in zip(ep.ids, ep.mask, ep.turn) if s == 0 and m > 0]  # action 0's tokens
            text = ep.pieces[0]
            out.append(Talk(g, seat, list(row.prompt_ids), row.prompt, [ids], [text],
                            [werewolf.clean_statement(text, max_chars)[0]]))
            if out[-1].heard[0] != statement:
                raise RuntimeError(f"seat {seat}'s first action is not the statement the game heard ({statement!r})")
    return out


def sample_candidates(engine, games, talks: list[Talk], n: int, sampling, max_chars: int) -> None:
    """n more statements at each talk context, one `generate_ids` call per policy (the budget: the turn's, within
    the engine's context)."""
    stop = merged_stop(sampling, [g.env for g in games])
    total = getattr(engine, "max_length", None)
    requests = [(i, games[t.game].policies[t.seat]) for i, t in enumerate(talks)
                if total is None or total - len(t.context) >= 1]
    for policy, share in by_policy(engine, requests):
        rows = [i for i in share for _ in range(n)]
        with policy:
            gen = engine.generate_ids(
                [talks[i].context for i in rows],
                max_new_tokens=[sampling.max_new_tokens if total is None
                                else min(sampling.max_new_tokens, total - len(talks[i].context)) for i in rows],
                temperature=sampling.temperature, top_p=sampling.top_p, greedy=sampling.greedy, stop=stop)
        lengths = gen.mask.sum(-1).long().tolist()
        for j, (i, ids) in enumerate(zip(rows, gen.response_ids.tolist())):
            talks[i].said.append(ids[:lengths[j]])
            talks[i].texts.append(gen.texts[j])
            talks[i].heard.append(werewolf.clean_statement(gen.texts[j], max_chars)[0])


def next_space(texts: list[str], previous: latent.LatentSpace | None, k: int, k_max: int,
               seed: int) -> latent.LatentSpace:
    """The iteration's latent space: k intents the first time, one more than the previous space after (its
    centroids first, so intent ids keep their meaning), refitted at k_max."""
    if previous is None:
        return latent.fit(texts, k, seed=seed)
    if previous.k < k_max:
        return latent.expand(previous, texts, seed=seed)
    return latent.fit(texts, previous.k, seed=seed, previous=previous, dim=previous.dim)


def game_moves(games, talks: list[Talk], played: list[int]) -> dict[int, list[tuple[str, str]]]:
    """{game: its played moves as latent-game moves (set name, action)}, given the played statements' intents
    (`played[i]`: talks[i]'s); a game's first moves are its statements, in seat order."""
    intents: dict[int, list[int]] = {}
    for t, z in zip(talks, played):
        intents.setdefault(t.game, []).append(z)
    return {g: game.env.latent_moves(intents.get(g, [])) for g, game in enumerate(games)}


def pairs_batch(pad_id: int, talks: list[Talk], items: list[tuple[tuple[int, int], tuple[int, int]]]) -> RolloutBatch:
    """(chosen, rejected) items, each row a (talk point, statement) index pair of one context (equal contexts of two
    games pool their rows), as one group of two teacher-forced rows each: the context's ids, the statement's ids."""
    rows = [row for item in items for row in item]
    said = [talks[i].said[r] for i, r in rows]
    prompt_ids, prompt_mask = left_pad([talks[i].context for i, _ in rows], pad_id)
    width = max(map(len, said))
    return RolloutBatch(
        response_ids=padded(said, width, pad_id, torch.long),
        mask=padded([[1.0] * len(s) for s in said], width, 0.0, torch.float32),
        group=torch.arange(len(items)).repeat_interleave(2), prompt_ids=prompt_ids, prompt_mask=prompt_mask,
        truncated=torch.zeros(len(rows), dtype=torch.bool), rewards=torch.zeros(len(rows)),
        completions=[talks[i].texts[r] for i, r in rows], prompts=[talks[i].prompt for i, _ in rows])


def new_iteration(state: dict, step: int, every: int) -> bool:
    """This step starts an LSPO iteration: none yet, or the first step of the next `every` (once per step)."""
    return "centroids" not in state or (step % every == 0 and state["fitted_at"] != step)


def fit_space(state: dict, ctx, talks: list[Talk], k: int, k_max: int) -> latent.LatentSpace:
    """The new iteration's space, fitted on every rank's statements of the step."""
    previous = latent.LatentSpace(state["centroids"]) if "centroids" in state else None
    return next_space(ctx.gather_objects([h for t in talks for h in t.heard]), previous, k, k_max, seed=ctx.seed)


def solve(state: dict, ctx, task, space: latent.LatentSpace, moves: list, cfr_iterations: int) -> None:
    """sigma* of the space's latent game from every rank's played moves; kept in `state` with the space."""
    solution = task.latent_solution(space.k, ctx.gather_objects(moves), iterations=cfr_iterations)
    state.update(centroids=space.centroids, policy=solution.policy, nash_conv=solution.nash_conv,
                 village_win=solution.village_win, fitted_at=ctx.step, iteration=state.get("iteration", -1) + 1)


def check_lspo(*, candidates=3, k=2, k_max=6, every=20, cfr_iterations=200, min_gap=0.0) -> None:
    def whole(v, low):
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    bad = [f"{name}={v!r} (an int >= {low})" for name, v, low in
           (("candidates", candidates, 1), ("k", k, 1), ("k_max", k_max, 1), ("every", every, 1),
            ("cfr_iterations", cfr_iterations, 1)) if not whole(v, low)]
    if bad:
        raise ValueError(f"lspo parameters out of range: {', '.join(bad)}")
    if k > k_max:
        raise ValueError(f"k={k} > k_max={k_max}: the latent space starts at k intents and expands up to k_max")
    if not (isinstance(min_gap, (int, float)) and not isinstance(min_gap, bool) and 0 <= min_gap < 1):
        raise ValueError(f"min_gap={min_gap!r} must be in [0, 1) (how much likelier the chosen intent must be)")


def check_task(task, *, k_max=6, **_) -> None:
    """Before training: the task has a latent game (werewolf), small enough at k_max to solve every iteration."""
    env = task.make_env()
    if not callable(getattr(task, "latent_solution", None)) or not callable(getattr(env, "latent_moves", None)):
        raise ValueError(f"task {task.name!r} has no latent game of its statements to solve: LSPO trains on "
                         "--task werewolf")
    n = task.players
    terminals = len(werewolf.deals(n)) * k_max ** n * (n - 1) ** n
    if terminals > MAX_TERMINALS:
        fits = max(j for j in range(1, 17) if len(werewolf.deals(n)) * j ** n * (n - 1) ** n <= MAX_TERMINALS)
        raise ValueError(f"the {n}-player latent game with k_max={k_max} intents has {terminals:,} terminals, more "
                         f"than the {MAX_TERMINALS:,} solved here every iteration: use k_max <= {fits}"
                         + (" or players=3" if n > 3 else ""))


@registry.rollout(
    "lspo", title=LSPO_TITLE, family="multiagent", state=dict, check=check_lspo, needs=("agents",),
    summary="Self-play werewolf games; at each statement's context, candidates more statements sampled; statements "
            "clustered into k latent intents (expanded by one each iteration), the latent game solved by CFR+ from "
            "the played moves; pairs: the likeliest intent's statement against the least likely one's.",
    logs={**PAIRS_LOGS, **LSPO_LOGS})
def lspo_source(engine, task, examples, *, group_size, sampling, ctx=None, candidates=3, k=2, k_max=6, every=20,
                cfr_iterations=200, min_gap=0.0):
    """The step's pairs (see the module docstring); the iteration's space and latent policy live in `ctx.state`."""
    if ctx is None or ctx.state is None:
        raise ValueError("lspo keeps its latent space and policy as pipeline state: call it through the pipeline")
    state = ctx.state
    games = make_games(task, examples, group_size, learner_seats("self", None))
    play_games(engine, games, sampling)
    talks = talk_points(games, task.max_chars)
    items = []
    if talks:
        sample_candidates(engine, games, talks, candidates, sampling, task.max_chars)
        fresh = new_iteration(state, ctx.step, every)
        space = fit_space(state, ctx, talks, k, k_max) if fresh else latent.LatentSpace(state["centroids"])
        rows = [(i, r) for i, t in enumerate(talks) for r in range(len(t.heard))]
        intents = space.assign([talks[i].heard[r] for i, r in rows]).tolist()  # one call for the whole step
        played = [z for (i, r), z in zip(rows, intents) if r == 0]
        moves = game_moves(games, talks, played)
        if fresh:
            solve(state, ctx, task, space, [m for g in moves.values() for m in g], cfr_iterations)
        sets = [moves[t.game][t.seat][0] for t in talks]  # I(x): the seat's set given the intents heard before
        keys = [tuple(talks[i].context) for i, _ in rows]
        probs = intent_probs(state["policy"], [sets[i] for i, _ in rows], intents)
        for pair in latent_pairs(keys, list(range(len(rows))), intents, probs, min_gap=min_gap):
            items.append((rows[pair.chosen], rows[pair.rejected]))
        ctx.metrics.update({"lspo/k": float(space.k), "lspo/nash_conv": float(state["nash_conv"]),
                            "lspo/village_win": float(state["village_win"])})
    batch = pairs_batch(engine.tokenizer.pad_token_id, talks, items) if items else items_batch(engine, [], [])
    return delivered(ctx, batch)


lspo_source.check_task = check_task
