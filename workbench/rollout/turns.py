"""The multi-turn rollout: episodes of a task's environment, sampled turn by turn, as one RolloutBatch.

A row's response is everything after its prompt, actions and observations interleaved, right-padded:

    prompt | action_0 obs_0 action_1 obs_1 ... action_{n-1} | pad
    mask      1...1   0..0  1...1    0..0       1...1         0      the policy produced it
    turn      0...0   0..0  1...1    1..1       n-1..n-1      -1     step id (an observation joins its action)

The history is never re-tokenized: each turn is generated from the token ids so far and the observation
tokens are appended as ids, so the trainer's one forward pass over prompt + response scores exactly the
sampled tokens (and observation tokens condition later actions without being trained on). Turn 0 is the
engine's plain `generate(prompts, n=group_size)` call, so a one-turn task gives the batch group sampling
always gave. The SFT warm-start encodes expert episodes with the same helpers (`encode_expert`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.episodes import group_seeds
from workbench.rollout.engine import Sampling, plain_text


# ----------------------------------------------------------------------------- encoding (shared with SFT)

def prompt_of(messages: list[dict]):
    """What the engine is given for an episode's opening messages: one user message as its text (as the
    one-turn tasks always were), anything else as the message list."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return list(messages)


def ends_with_stop(text: str, stop) -> bool:
    return any(text.endswith(s) for s in stop or ())


def action_ids(tokenizer, text: str, stop=()) -> list[int]:
    """Token ids of an action given as text (an expert's): the text, then EOS unless a stop string ends it,
    which is how a sampled turn ends (for a one-turn task: target + EOS, the SFT target it always was)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids if ends_with_stop(text, stop) else ids + [tokenizer.eos_token_id]


def chat_suffix_ids(tokenizer, messages: list[dict], after_eos: bool) -> list[int]:
    """Ids the chat template puts between an assistant turn and the next one: the tool turn(s) `messages`
    and the assistant's generation prompt (TRL's `_get_tool_suffix_ids` recipe: render a dummy conversation
    with and without them and keep the difference, cut at the assistant's end-of-turn EOS). If the action
    did not end with EOS (a stop string ended it), the suffix starts with that EOS: the template's turn
    boundary is then an observation token, not a policy one."""
    dummy = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]

    def render(msgs, gen):
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prefix, full = render(dummy, False), render(dummy + list(messages), True)
    eos = [t for t, i in enumerate(prefix) if i == tokenizer.eos_token_id]
    if not eos:
        raise ValueError("the chat template ends an assistant turn without the EOS token; cannot place tool turns")
    prefix = prefix[:eos[-1] + 1] if after_eos else prefix[:eos[-1]]
    if full[:len(prefix)] != prefix:
        raise ValueError("the chat template renders tool turns by rewriting the history before them")
    return full[len(prefix):]


def observation_ids(tokenizer, messages: list[dict], after_eos: bool) -> list[int]:
    """Token ids of an environment's observation messages, appended after an action without re-tokenizing it:
    their contents as text (no chat template), or the template's tool turns + generation prompt."""
    if getattr(tokenizer, "use_chat_template", False):
        return chat_suffix_ids(tokenizer, messages, after_eos)
    return tokenizer(plain_text(messages), add_special_tokens=False)["input_ids"] if messages else []


@dataclass
class Episode:
    """One row's response after its prompt, as the trainer scores it, plus what the environment said."""

    ids: list[int] = field(default_factory=list)       # actions and observations, in order
    mask: list[float] = field(default_factory=list)    # 1 on action tokens
    turn: list[int] = field(default_factory=list)      # step id of every token
    mu_logp: list[float] = field(default_factory=list)  # behaviour log-probs (0 on observations)
    pieces: list[str] = field(default_factory=list)    # decoded text of each action / observation
    rewards: list[float] = field(default_factory=list)  # one per step
    info: list[dict] = field(default_factory=list)     # one per step: the state acted from, tool_error, ...
    steps: int = 0                                      # actions taken so far
    truncated: bool = False
    pending: str = ""                                   # given start of the coming action (a guidance prefix)
    action: str = ""                                    # the text of the last action, given part included

    @property
    def completion(self) -> str:
        """The decoded transcript after the prompt (a one-turn task: the answer's text)."""
        return "".join(self.pieces)

    @property
    def episode_return(self) -> float:
        return sum(self.rewards, 0.0)

    def act(self, ids: list[int], text: str, mu_logp: list[float] | None = None, sampled: bool = True) -> None:
        """Append the next action turn (step id `self.steps`; the env's answer is recorded by `record`); its text
        continues any given start (`give`). `sampled=False`: an action the policy did not sample (a guidance
        prefix's whole action), mask 0."""
        self._append(ids, text, float(sampled), self.steps, mu_logp)
        self.steps += 1
        self.action, self.pending = self.pending + text, ""

    def give(self, ids: list[int], text: str) -> None:
        """Append the given start of the coming action (a guidance prefix the policy continues): mask 0, the
        coming step's id; the next `act` completes the action's text."""
        self._append(ids, text, 0.0, self.steps, None)
        self.pending += text

    def _append(self, ids: list[int], text: str, mask: float, step: int, mu_logp: list[float] | None) -> None:
        self.ids += ids
        self.mask += [mask] * len(ids)
        self.turn += [step] * len(ids)
        self.mu_logp += mu_logp if mu_logp is not None else [0.0] * len(ids)
        self.pieces.append(text)

    def record(self, reward: float, state_info: dict, step_info: dict) -> None:
        """The step just acted: its reward, and the info of the state it acted from plus the step's own
        entries (tool_error, ...) and its action text."""
        before = {k: v for k, v in state_info.items() if k != "tool_error"}  # that was the previous step's
        extra = {k: v for k, v in step_info.items() if k != "state"}
        self.info.append({**before, "tool_error": None, **extra, "state": state_info.get("state"),
                          "action": self.action})  # reward functions read each step's action text
        self.rewards.append(float(reward))

    def observe(self, ids: list[int], text: str) -> None:
        """Append the observation that follows the last action (same step id, mask 0)."""
        self._append(ids, text, 0.0, self.steps - 1, None)


def pad_episodes(episodes: list[Episode], pad_id: int, device=None):
    """response_ids [B, T] (pad), mask [B, T] float (0), turn [B, T] long (-1), mu_logp [B, T] float (0);
    T = the longest episode."""
    width = max(len(e.ids) for e in episodes)
    ids = padded([e.ids for e in episodes], width, pad_id, torch.long, device)
    mask = padded([e.mask for e in episodes], width, 0.0, torch.float32, device)
    turn = padded([e.turn for e in episodes], width, -1, torch.long, device)
    return ids, mask, turn, padded([e.mu_logp for e in episodes], width, 0.0, torch.float32, device)


def padded(rows: list[list], width: int, fill, dtype, device=None) -> torch.Tensor:
    """[B, width] tensor of right-padded lists (one tensor call: a call per row costs more on a big batch)."""
    return torch.tensor([row + [fill] * (width - len(row)) for row in rows], dtype=dtype, device=device)


def encode_expert(tokenizer, env, example, actions: list[str], seed: int = 0) -> tuple[list[dict], Episode]:
    """(opening messages, Episode) of replaying `actions` through `env`, encoded as the rollout encodes a
    sampled episode. The last action is not stepped (nothing follows it, and scoring it costs a verifier call
    per SFT example); every earlier one must leave the episode running."""
    if not actions:
        raise ValueError("an expert episode needs at least one action")
    messages, _ = env.reset(example, seed)
    tok, episode = tokenizer, Episode()
    for s, action in enumerate(actions):
        ids = action_ids(tok, action, env.stop)
        episode.act(ids, action)
        if s == len(actions) - 1:
            break
        observations, _, done, _ = env.step(action)
        if done:
            raise ValueError(f"expert action {s} ({action!r}) ends the episode but {len(actions) - 1 - s} follow")
        obs = observation_ids(tok, observations, after_eos=ids[-1] == tok.eos_token_id)
        episode.observe(obs, tok.decode(obs, skip_special_tokens=True))
    return messages, episode


# ----------------------------------------------------------------------------- the rollout

def merged_stop(sampling: Sampling, envs) -> list[str] | None:
    """The sampling's stop strings, then the environment's (all rows of a task share them)."""
    env_stops = {tuple(e.stop) for e in envs}
    if len(env_stops) > 1:
        raise ValueError(f"the task's environments disagree on their stop strings: {sorted(env_stops)}")
    stop = list(dict.fromkeys([*(sampling.stop or ()), *env_stops.pop()]))
    return stop or None


def first_turn(engine, opened: list[list[dict]], group_size: int, sampling: Sampling, stop, total: int | None):
    """Turn 0 of every row with one `engine.generate` call: prompts repeated n=group_size times when the
    rows of a group opened with the same messages (always, for a task's env), else one prompt per row."""
    groups = [opened[g] for g in range(0, len(opened), group_size)]
    shared = all(opened[i] == groups[i // group_size] for i in range(len(opened)))
    prompts, n = ([prompt_of(m) for m in groups], group_size) if shared else ([prompt_of(m) for m in opened], 1)
    budget = sampling.max_new_tokens
    if total is not None:
        width = engine.encode(prompts, 1)[0].shape[1]
        budget = min(budget, total - width)
        if budget < 1:
            raise ValueError(f"a prompt of {width} tokens leaves no room under max_total_tokens={total}")
    return engine.generate(prompts, n=n, max_new_tokens=budget, temperature=sampling.temperature,
                           top_p=sampling.top_p, greedy=sampling.greedy, stop=stop)


TURNS_PROVIDES = ("response_ids", "mask", "turn", "mu_logp", "rewards", "turn_rewards", "turn_info", "truncated",
                  "completions", "prompts", "prompt_ids", "prompt_mask", "group")  # what `turns` fills


@registry.rollout(
    "turns", title="Multi-turn rollout over an environment (single-turn is one turn)", family="canonical",
    summary="Samples every row's episode turn by turn: actions from the policy (stopping at the env's stop "
            "strings or EOS), observations appended as token ids with mask 0; rewards are episode returns.",
    reads=(), provides=TURNS_PROVIDES)
def turns(engine, task, examples, *, group_size: int, sampling: Sampling, ctx=None, max_turns: int | None = None,
          max_total_tokens: int | None = None) -> RolloutBatch:
    """Episodes of `task.make_env()` for `group_size` rows per example (row i answers examples[i // group_size]),
    as one RolloutBatch (layout in the module docstring; rewards [B] = episode returns, turn_rewards [B, S],
    turn_info[i][s] = the info of the state step s acted from, with the step's tool_error). See `play`."""
    played = play(engine, task, examples, group_size=group_size, sampling=sampling, max_turns=max_turns,
                  max_total_tokens=max_total_tokens)
    return episode_batch(played, group_size, engine.tokenizer.pad_token_id)


@dataclass
class Played:
    """Finished episodes, one per row, with what opened them and the prompt tensors turn 0 was sampled from."""

    episodes: list[Episode]
    opened: list[list[dict]]      # each row's opening messages
    prompt_ids: torch.Tensor      # [B, P] left-padded
    prompt_mask: torch.Tensor     # [B, P]


@dataclass(frozen=True)
class Given:
    """Where a guided episode starts before the policy samples (a prefix of a solution): whole `actions` replayed
    through the environment (their observations appended), then the `partial` start of the next action; every
    given token has mask 0, so it conditions the policy but is never trained on."""

    actions: tuple[str, ...] = ()
    partial: str = ""

    def __bool__(self) -> bool:
        return bool(self.actions or self.partial)


def play(engine, task, examples, *, group_size: int, sampling: Sampling, max_turns: int | None = None,
         max_total_tokens: int | None = None, given: list[Given] | None = None) -> Played:
    """Run every row's episode to its end.

    sampling: per-turn budget, temperature, top_p, extra stop strings, greedy. max_turns: actions per episode
    (default the env's `max_turns`). max_total_tokens: prompt + whole response (default the engine's
    `max_length`, e.g. the model's positions). A turn that hits its budget (per-turn or what is left of the
    total) ends the episode as truncated, after the env has scored it (as a one-turn task's truncated answer
    always was); an observation that would leave no room for another action token ends it truncated too,
    without being appended. An action ending in EOS does not by itself end the episode: the env decides.
    given: one `Given` per row (or None), where a guided row starts (`start_given`).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not examples:
        raise ValueError("turns needs at least one example")
    tok = engine.tokenizer
    rows = [e for e in examples for _ in range(group_size)]
    envs = [task.make_env() for _ in rows]
    opened = [env.reset(ex, seed) for env, ex, seed in zip(envs, rows, group_seeds(examples, group_size))]
    state_info = [info for _, info in opened]
    horizon = [max_turns or env.max_turns for env in envs]
    stop = merged_stop(sampling, envs)
    total = max_total_tokens if max_total_tokens is not None else getattr(engine, "max_length", None)
    episodes = [Episode() for _ in rows]

    if given is not None and any(given):
        gen, prompt_ids, prompt_mask, prompts = start_given(engine, envs, episodes, [m for m, _ in opened],
                                                            state_info, given, sampling, stop, total)
    else:
        gen = first_turn(engine, [m for m, _ in opened], group_size, sampling, stop, total)
        prompt_ids, prompt_mask = gen.prompt_ids, gen.prompt_mask  # [B, P] the opening messages
        prompts = unpadded(prompt_ids, prompt_mask)
    active = list(range(len(rows)))
    while active:
        running, budgets = [], []
        # one conversion per tensor, then Python lists: per-row tensor indexing costs ~10 us a call, B times
        response, mu_logp, truncated = gen.response_ids.tolist(), gen.mu_logp.tolist(), gen.truncated.tolist()
        lengths = gen.mask.sum(-1).long().tolist()  # the mask is a prefix: up to and including EOS / stop token
        for k, i in enumerate(active):
            ep, env = episodes[i], envs[i]
            ids = response[k][:lengths[k]]
            ep.act(ids, gen.texts[k], mu_logp[k][:lengths[k]])
            observations, reward, done, info = env.step(ep.action)
            ep.record(reward, state_info[i], info)
            state_info[i] = info
            if truncated[k]:
                ep.truncated = True
                continue
            if done or ep.steps >= horizon[i]:
                continue
            obs = observation_ids(tok, observations, after_eos=ids[-1] == tok.eos_token_id)
            room = None if total is None else total - len(prompts[i]) - len(ep.ids) - len(obs)
            if room is not None and room < 1:
                ep.truncated = True
                continue
            ep.observe(obs, tok.decode(obs, skip_special_tokens=True))
            running.append(i)
            budgets.append(sampling.max_new_tokens if room is None else min(sampling.max_new_tokens, room))
        active = running
        if active:
            gen = engine.generate_ids([prompts[i] + episodes[i].ids for i in active], max_new_tokens=budgets,
                                      temperature=sampling.temperature, top_p=sampling.top_p,
                                      greedy=sampling.greedy, stop=stop)
    return Played(episodes, [m for m, _ in opened], prompt_ids, prompt_mask)


def unpadded(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> list[list[int]]:
    """Each row's prompt ids without its padding."""
    return [[t for t, keep in zip(ids, mask) if keep] for ids, mask in zip(prompt_ids.tolist(), prompt_mask.tolist())]


def start_given(engine, envs, episodes, opened, state_info, given, sampling, stop, total):
    """Turn 0 of rows that start from a `Given` prefix: its whole actions replayed through each row's environment
    (scored and recorded, mask 0), its partial action appended (mask 0), then one `generate_ids` call continues
    every row from its prompt and given tokens. Returns (the generation, prompt ids and mask [B, P], prompts)."""
    tok = engine.tokenizer
    prompt_ids, prompt_mask = engine.encode([prompt_of(m) for m in opened], 1)
    prompts = unpadded(prompt_ids, prompt_mask)
    for i, start in enumerate(given):
        ep, env = episodes[i], envs[i]
        for s, action in enumerate(start.actions if start else ()):
            ids = action_ids(tok, action, env.stop)
            ep.act(ids, action, sampled=False)
            observations, reward, done, info = env.step(action)
            ep.record(reward, state_info[i], info)
            state_info[i] = info
            if done:
                raise ValueError(f"a given prefix's action {s} ({action!r}) ends the episode: a prefix must leave the "
                                 "policy something to do (give fewer actions)")
            obs = observation_ids(tok, observations, after_eos=ids[-1] == tok.eos_token_id)
            ep.observe(obs, tok.decode(obs, skip_special_tokens=True))
        if start and start.partial:
            ep.give(tok(start.partial, add_special_tokens=False)["input_ids"], start.partial)
    room = [None if total is None else total - len(prompts[i]) - len(ep.ids) for i, ep in enumerate(episodes)]
    if any(r is not None and r < 1 for r in room):
        raise ValueError(f"a given prefix leaves no room under max_total_tokens={total}: shorten the prefix")
    budgets = [sampling.max_new_tokens if r is None else min(sampling.max_new_tokens, r) for r in room]
    gen = engine.generate_ids([prompts[i] + ep.ids for i, ep in enumerate(episodes)], max_new_tokens=budgets,
                              temperature=sampling.temperature, top_p=sampling.top_p, greedy=sampling.greedy,
                              stop=stop)
    return gen, prompt_ids, prompt_mask, prompts


def episode_batch(played: Played, group_size: int, pad_id: int) -> RolloutBatch:
    """The finished episodes as one RolloutBatch (rewards = episode returns, float32 as verifier scores)."""
    episodes, device = played.episodes, played.prompt_ids.device
    response_ids, mask, turn, mu_logp = pad_episodes(episodes, pad_id, device)
    turn_rewards = padded([e.rewards for e in episodes], max(len(e.rewards) for e in episodes), 0.0,
                          torch.float32)  # [B, S]
    n_examples = len(episodes) // group_size
    return RolloutBatch(
        response_ids=response_ids, mask=mask, group=torch.arange(n_examples).repeat_interleave(group_size),
        rewards=torch.tensor([e.episode_return for e in episodes], dtype=torch.float32),
        prompt_ids=played.prompt_ids, prompt_mask=played.prompt_mask, mu_logp=mu_logp, turn=turn,
        turn_rewards=turn_rewards, truncated=torch.tensor([e.truncated for e in episodes], device=device),
        completions=[e.completion for e in episodes], prompts=[plain_text(m) for m in played.opened],
        turn_info=[e.info for e in episodes])
