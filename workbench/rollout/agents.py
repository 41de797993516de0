"""The multi-agent rollout: games of a `MultiAgentEnv` played turn by turn, one batch row per (episode, agent).

Each agent the policy plays gets its own row, its own view of the game:

    prompt        the agent's opening messages and whatever it observed before its first turn
    response      its action_0 | what it observed until its next turn | action_1 | ... | pad
    mask          1 on its own actions, 0 on observations (the other agents' actions as the game shows them)
    turn          its own step ids (an observation joins the action before it)

Rewards: every env step gives each agent a reward; an agent's reward is added to its latest action's step (rewards
before its first action to that first step), so `turn_rewards[r, s]` is agent r's reward for its step s and
`rewards[r]` its return. A row that never acted (the game ended before its first turn) is dropped.

Seats. `opponent="self"`: the policy plays every agent (self-play; every agent has a row). Otherwise the policy
plays one seat per episode (`seat`: an agent id or role name, or None: drawn from the episode's seed, so who moves
first is seeded too) and the opponent the others: a named Python player (`MultiAgentEnv.players`: "random",
"scripted", "solver"), with its own seeded random stream, or "past", a frozen earlier iterate of the policy (the
recipe's reference keeps it and moves it to the policy every few steps: `previous-iterate`), sampled like the policy
but never trained (its rows are not in the batch). Rows: `group` = the example (its group_size episodes x agents),
`agent` = the agent id, `episode` = the episode's index in the batch, `policy` = the trained policy that played it:
with separate policies (a recipe's `policies="separate"`: one LoRA adapter each) policy k plays agent k, or agent
(k + step // swap_every) mod n when roles swap (CORY), and each policy's turns are sampled with its adapter.

History is never re-tokenized (as in `workbench.rollout.turns`): each turn continues the row's token ids, and the
observations waiting for a row are encoded once, just before its next action. The SFT warm start encodes Python
players' games with the same bookkeeping (`expert_rows`), and held-out evaluation reads the policy through
`GamePolicy` (games against Python players, action probabilities at given contexts).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.batch import RolloutBatch, left_pad
from workbench.envs.multiagent import MultiAgentEnv, agent_id, seat_rng
from workbench.episodes import group_seeds
from workbench.models import per_policy
from workbench.rollout.engine import Sampling, encode_prompts, plain_text, policy_forward
from workbench.rollout.turns import (TURNS_PROVIDES, Episode, action_ids, merged_stop, observation_ids, pad_episodes,
                                     padded, prompt_of, unpadded)

POLICY = None  # the seat the policy plays (a Python player's seat holds its name)


@dataclass
class Row:
    """One agent's view of one game as the trainer will score it."""

    agent: int
    opening: list[dict]                                  # its opening messages
    inbox: list[dict] = field(default_factory=list)      # observations not yet encoded (before its next action)
    prompt_ids: list[int] | None = None                 # fixed at its first action: opening + inbox
    prompt: str = ""                                     # that prompt's text
    episode: Episode = field(default_factory=Episode)
    early_reward: float = 0.0                            # rewards before its first action
    kept: bool = True                                    # in the batch (False: a frozen opponent's row)
    state_info: dict = field(default_factory=dict)      # the info of the state it acts from next
    forfeited: bool = False                              # one of its actions was refused (info["tool_error"])

    @property
    def prompt_messages(self) -> list[dict]:
        return self.opening + self.inbox

    def reward(self, value: float) -> None:
        """A reward for this agent from a step that was not its own action."""
        if self.episode.rewards:
            self.episode.rewards[-1] += value
        else:
            self.early_reward += value


@dataclass
class Game:
    env: MultiAgentEnv
    seats: list                   # per agent: POLICY or a Python player's name
    rows: dict                    # agent -> Row, for the agents whose rows are kept
    rng: object                   # the Python players' random stream
    policies: list = field(default_factory=list)  # per agent: the trained policy that plays it (separate policies)
    over: bool = False

    def apply(self, agent: int, action: str) -> None:
        """Agent `agent` acts (its row, if kept, has already appended the action's tokens)."""
        observations, rewards, done, info = self.env.step(action)
        for k, row in self.rows.items():
            if k == agent:
                row.episode.record(rewards[k] + row.early_reward, row.state_info, info)
                row.early_reward = 0.0
                row.forfeited |= info.get("tool_error") is not None
            else:
                row.reward(rewards[k])
            row.inbox += observations[k]
            row.state_info = info
        self.over = done


def make_games(task, examples, group_size: int, seats_of, shift: int = 0) -> list[Game]:
    """Reset one game per row of the grouped examples; `seats_of(seed, n_agents)` -> (seats, kept agents); agent k
    is played by policy (k + shift) mod n (separate policies swap roles as `shift` moves)."""
    games = []
    for example, seed in zip([e for e in examples for _ in range(group_size)], group_seeds(examples, group_size)):
        env = task.make_env()
        if not isinstance(env, MultiAgentEnv):
            raise ValueError(f"task {task.name!r} is not a multi-agent game; the rollout `agents` plays games such as "
                             "kuhn or tictactoe (use `turns` for a one-agent task)")
        views, info = env.reset(example, seed)
        n = len(env.agents)
        seats, kept = seats_of(seed, n)
        sampled = set(kept) | {k for k in range(n) if seats[k] in LM_OPPONENTS}  # a frozen opponent samples too
        rows = {k: Row(k, list(views[k]), state_info=info, kept=k in kept) for k in sorted(sampled)}
        games.append(Game(env, seats, rows, seat_rng(seed, "players"), [(k + shift) % n for k in range(n)]))
    return games


def python_turns(game: Game, encode=None) -> int | None:
    """Play the game's Python seats until the policy must act (its agent id) or the game ends (None). `encode`
    (the SFT warm start): the Python player's rows are kept too, its actions encoded as an expert's."""
    while not game.over:
        k = game.env.to_move()
        if k is None:
            game.over = True
            return None
        if game.seats[k] is POLICY or game.seats[k] in LM_OPPONENTS:
            return k
        action = game.env.play(game.seats[k], game.rng)
        if encode is not None and k in game.rows:
            row = game.rows[k]
            open_turn(row, encode)
            row.episode.act(action_ids(encode, action, game.env.stop), action)
        game.apply(k, action)
    return None


def open_turn(row: Row, tokenizer) -> None:
    """Before an action: the row's prompt is fixed at its first one (opening + observations so far), later ones
    append what it observed since (mask 0)."""
    if row.prompt_ids is None:
        encode_first_prompts(tokenizer, [row])
    elif row.inbox:
        last = row.episode.ids[-1] if row.episode.ids else None
        ids = observation_ids(tokenizer, row.inbox, after_eos=last == tokenizer.eos_token_id)
        row.episode.observe(ids, tokenizer.decode(ids, skip_special_tokens=True))
        row.inbox = []


def encode_first_prompts(tokenizer, rows: list[Row]) -> None:
    """Prompt ids of rows about to take their first action (their opening messages and what they observed so far),
    in one tokenizer call; a chat template renders the messages and the assistant's generation prompt."""
    fresh = [r for r in rows if r.prompt_ids is None]
    if fresh:
        ids, mask = encode_prompts(tokenizer, [prompt_of(r.prompt_messages) for r in fresh])
        for row, prompt in zip(fresh, unpadded(ids, mask)):
            row.prompt_ids, row.prompt, row.inbox = prompt, plain_text(row.prompt_messages), []


def play_games(engine, games: list[Game], sampling: Sampling, *, max_turns: int | None = None,
               max_total_tokens: int | None = None, opponents: dict | None = None) -> list[Game]:
    """Run every game to its end: Python seats move at once, the policy's pending turns of all games are sampled
    in one `generate_ids` call per round (per policy, with separate policies), a frozen opponent's with its engine
    (`opponents[name]`). A row that hits its token budget, or an agent past `max_turns` actions (default the
    env's), ends its game truncated."""
    tok = engine.tokenizer
    stop = merged_stop(sampling, [g.env for g in games])
    total = max_total_tokens if max_total_tokens is not None else getattr(engine, "max_length", None)
    while True:
        pending = []
        for g in games:
            k = python_turns(g) if not g.over else None
            if k is None:
                continue
            row = g.rows[k]
            if row.episode.steps >= (max_turns or g.env.max_turns):
                g.over, row.episode.truncated = True, True
                continue
            pending.append((g, k))
        if not pending:
            return games
        rows = [g.rows[k] for g, k in pending]
        encode_first_prompts(tok, rows)  # one call for every row's first turn
        for row in rows:
            open_turn(row, tok)
        room = [None if total is None else total - len(r.prompt_ids) - len(r.episode.ids) for r in rows]
        cut = [(g, r) for (g, _), r, left in zip(pending, rows, room) if left is not None and left < 1]
        for g, r in cut:
            g.over, r.episode.truncated = True, True
        go = [i for i, left in enumerate(room) if left is None or left >= 1]
        budgets = {i: sampling.max_new_tokens if room[i] is None else min(sampling.max_new_tokens, room[i])
                   for i in go}
        sampled = {}
        for sampler, policy, share in samplers(engine, opponents or {}, pending, go):
            with policy:  # separate policies: each one's rows with its own adapter
                gen = sampler.generate_ids([rows[i].prompt_ids + rows[i].episode.ids for i in share],
                                           max_new_tokens=[budgets[i] for i in share],
                                           temperature=sampling.temperature, top_p=sampling.top_p,
                                           greedy=sampling.greedy, stop=stop)
            response, mu_logp, truncated = gen.response_ids.tolist(), gen.mu_logp.tolist(), gen.truncated.tolist()
            lengths = gen.mask.sum(-1).long().tolist()
            for j, i in enumerate(share):
                sampled[i] = (response[j][:lengths[j]], gen.texts[j], mu_logp[j][:lengths[j]], truncated[j])
        for i in go:  # in the pending order: the environments step the same way whatever the split
            (g, k), row = pending[i], rows[i]
            ids, text, mu, cut_short = sampled[i]
            row.episode.act(ids, text, mu)
            g.apply(k, row.episode.action)
            row.episode.truncated |= cut_short


def samplers(engine, opponents: dict, pending: list, go: list[int]):
    """[(engine, context, request ids)]: the policy's requests (`by_policy`), then each frozen opponent's with its
    engine (which holds one policy)."""
    seat = {i: pending[i][0].seats[pending[i][1]] for i in go}
    unknown = sorted({s for s in seat.values() if s is not POLICY and s not in opponents})
    if unknown:
        raise ValueError(f"opponent {unknown[0]!r} is a frozen earlier iterate: the recipe's reference must keep one "
                         "(reference previous-iterate, which moves it to the policy every few steps)")
    mine = [(i, pending[i][0].policies[pending[i][1]]) for i in go if seat[i] is POLICY]
    out = [(engine, policy, share) for policy, share in by_policy(engine, mine)]
    for name in sorted({s for s in seat.values() if s is not POLICY}):
        out.append((opponents[name], contextlib.nullcontext(), [i for i in go if seat[i] == name]))
    return out


def by_policy(engine, requests: list[tuple[int, int]]):
    """[(context, request ids)]: all requests in one call when the engine holds one policy, else one call per
    policy inside the engine's context for it (`HFEngine.policy`)."""
    if getattr(engine, "policies", 1) == 1:
        return [(contextlib.nullcontext(), [i for i, _ in requests])] if requests else []
    policies = sorted({p for _, p in requests})
    return [(engine.policy(p), [i for i, q in requests if q == p]) for p in policies]


def learner_seats(opponent: str, seat):
    """`seats_of` for the rollout: self-play (every seat the policy's, every row kept) or the policy in one seat
    (fixed, or drawn from the episode's seed) against a Python player."""
    def seats_of(seed: int, n: int):
        if opponent == "self":
            return [POLICY] * n, list(range(n))
        mine = seat_rng(seed, "seat").randrange(n) if seat is None else seat
        return [POLICY if k == mine else opponent for k in range(n)], [mine]
    return seats_of


def games_batch(games: list[Game], group_size: int, pad_id: int) -> RolloutBatch:
    """The kept rows of finished games as one RolloutBatch (rows that never acted dropped)."""
    rows, meta = [], []
    for e, g in enumerate(games):
        for k in sorted(g.rows):
            if g.rows[k].kept and g.rows[k].episode.steps:
                rows.append(g.rows[k])
                meta.append((e // group_size, k, e, g.policies[k]))
    if not rows:
        raise ValueError("no agent played by the policy acted in any game")
    episodes = [r.episode for r in rows]
    response_ids, mask, turn, mu_logp = pad_episodes(episodes, pad_id)
    prompt_ids, prompt_mask = left_pad([r.prompt_ids for r in rows], pad_id)
    group, agent, episode, policy = (torch.tensor(col, dtype=torch.long) for col in zip(*meta))
    return RolloutBatch(
        response_ids=response_ids, mask=mask, group=group, agent=agent, episode=episode, policy=policy,
        rewards=torch.tensor([ep.episode_return for ep in episodes], dtype=torch.float32),
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, mu_logp=mu_logp, turn=turn,
        turn_rewards=padded([ep.rewards for ep in episodes], max(len(ep.rewards) for ep in episodes), 0.0,
                            torch.float32),
        truncated=torch.tensor([ep.truncated for ep in episodes]),
        completions=[ep.completion for ep in episodes], prompts=[r.prompt for r in rows],
        turn_info=[ep.info for ep in episodes])


LM_OPPONENTS = ("past",)  # opponents sampled from a language model: the frozen previous iterate
OPPONENTS = ("self", "random", "scripted", "solver", *LM_OPPONENTS)  # the policy, a Python player, a frozen iterate


def check_agents(*, opponent="self", seat=None, swap_every=None, max_turns=None, **_) -> None:
    if swap_every is not None and (isinstance(swap_every, bool) or not isinstance(swap_every, int) or swap_every < 1):
        raise ValueError(f"swap_every must be None (roles never swap) or an integer >= 1 (steps between swaps), got "
                         f"{swap_every!r}")
    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {OPPONENTS} (the policy itself, a Python player every game "
                         f"offers, or the frozen previous iterate), got {opponent!r}")
    if seat is not None and (isinstance(seat, bool) or not isinstance(seat, (int, str))):
        raise ValueError(f"seat is None (drawn per episode) or an agent id / role name, got {seat!r}")
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
        raise ValueError(f"max_turns must be None (the game's own) or an integer >= 1, got {max_turns!r}")


@registry.rollout(
    "agents", title="Multi-agent rollout: one row per (episode, agent), the others' actions as observations",
    family="multiagent",
    summary="Plays games of a multi-agent environment: self-play (the policy in every seat) or the policy in one "
            "seeded seat against a Python player (random, scripted, the exact solver); each agent's row holds its "
            "actions (mask 1) and what it observed between them (mask 0), with `agent` and `episode` ids.",
    reads=(), provides=TURNS_PROVIDES + ("agent", "episode", "policy"), check=check_agents, needs=("agents",),
    choices={"opponent": OPPONENTS})
def agents(engine, task, examples, *, group_size: int, sampling: Sampling, ctx=None, opponent: str = "self",
           seat=None, swap_every: int | None = None, max_turns: int | None = None,
           max_total_tokens: int | None = None) -> RolloutBatch:
    """`group_size` games per example; rows of the policy's agents (see the module docstring). Separate policies:
    policy k plays agent k, or agent (k + step // swap_every) mod n when roles swap every `swap_every` steps."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not examples:
        raise ValueError("agents needs at least one example")
    env = task.make_env()
    fixed = seat if seat is None or not isinstance(env, MultiAgentEnv) else agent_id(env, seat)
    shift = (ctx.step // swap_every) if swap_every and ctx is not None else 0
    games = make_games(task, examples, group_size, learner_seats(opponent, fixed), shift)  # refuses a one-agent task
    play_games(engine, games, sampling, max_turns=max_turns, max_total_tokens=max_total_tokens,
               opponents=getattr(ctx, "opponents", None))
    return games_batch(games, group_size, engine.tokenizer.pad_token_id)


# ----------------------------------------------------------------------------- the warm start and evaluation

def expert_rows(tokenizer, task, example, seed: int) -> list[tuple[list[int], Episode]]:
    """(prompt ids, Episode) of every agent's row of one game played by the task's expert Python player in every
    seat, encoded as the rollout encodes the policy's rows (its actions with mask 1): the SFT warm start's rows."""
    env = task.make_env()
    views, info = env.reset(example, seed)
    game = Game(env, [task.expert] * len(env.agents), {k: Row(k, list(views[k]), state_info=info)
                                                       for k in range(len(env.agents))}, seat_rng(seed, "players"))
    python_turns(game, encode=tokenizer)
    return [(row.prompt_ids, row.episode) for row in game.rows.values() if row.episode.steps]


class GamePolicy:
    """The policy as a game's evaluation sees it: games against Python players, and the probability of given
    actions at given contexts (prompt messages, then (own action, observations after it) pairs)."""

    def __init__(self, engine, model, tokenizer, sampling: Sampling, seed: int = 0):
        self.engine, self.model, self.tokenizer, self.sampling, self.seed = engine, model, tokenizer, sampling, seed

    def play(self, task, example, *, opponent: str, games: int) -> list[dict]:
        """`games` games of `example` against Python player `opponent`, the policy in seat i % n of game i; per game
        {"seat", "return", "result": "win" | "draw" | "loss", "illegal" (the policy forfeited), "transcript"}."""
        n = len(task.make_env().agents)
        seats_of = iter([([POLICY if k == i % n else opponent for k in range(n)], [i % n]) for i in range(games)])
        played = make_games(task, [example], games, lambda seed, _: next(seats_of))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 1_000_003 + 77)  # the same draws at every evaluation
            play_games(self.engine, played, self.sampling)
        out = []
        for i, g in enumerate(played):
            row = g.rows[i % n]
            ret = row.episode.episode_return + row.early_reward
            out.append({"seat": i % n, "return": ret, "result": "win" if ret > 0 else "loss" if ret < 0 else "draw",
                        "illegal": row.forfeited, "transcript": row.prompt + row.episode.completion})
        return out

    @torch.no_grad()
    def action_probs(self, task, contexts: list, actions: list[str], agents: list[int] | None = None) -> list:
        """[N][A] probability of each action text (its tokens, EOS or the stop string that ends it included) at each
        context of `task`'s game: (prompt messages, [(own action, observations after it), ...]), what a row holds
        when it acts there; `agents[i]`: who acts at context i (separate policies: policy k plays agent k)."""
        tok, stop = self.tokenizer, task.make_env().stop
        prompts, responses, masks = [], [], []
        for messages, turns in contexts:
            row = Row(0, list(messages))
            open_turn(row, tok)
            for action, observed in turns:
                row.episode.act(action_ids(tok, action, stop), action)
                row.inbox = list(observed)
                open_turn(row, tok)
            for action in actions:
                ids = action_ids(tok, action, stop)
                prompts.append(row.prompt_ids)
                responses.append(row.episode.ids + ids)
                masks.append([0.0] * len(row.episode.ids) + [1.0] * len(ids))
        device = next(self.model.parameters()).device
        prompt_ids, prompt_mask = left_pad(prompts, tok.pad_token_id, device)
        width = max(map(len, responses))
        response_ids = padded(responses, width, tok.pad_token_id, torch.long, device)
        mask = padded(masks, width, 0.0, torch.float32, device)
        policy = torch.tensor([a for a in (agents or [0] * len(contexts)) for _ in actions], device=device)
        logp, _, _ = per_policy(self.model, policy, policy_forward, prompt_ids, prompt_mask, response_ids, mask)
        return (logp.float().cpu() * mask.cpu()).sum(-1).exp().view(len(contexts), len(actions)).tolist()


def check_seat(task, *, anchors=(), seat=None, opponent="self", **_) -> None:
    """Before training: a fixed seat names one of the game's agents; a frozen-iterate opponent has one to play
    (`anchors`: the frozen models the recipe's reference keeps)."""
    if seat is not None:
        agent_id(task.make_env(), seat)
    if opponent in LM_OPPONENTS and "prev" not in anchors:
        raise ValueError(f"opponent {opponent!r} is a frozen earlier iterate of the policy: the recipe's reference must "
                         "keep one (reference previous-iterate, which moves it to the policy every few steps)")


agents.check_task = check_seat
