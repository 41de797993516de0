"""Off-policy guidance (LUFFY): each group holds G - 1 sampled responses and the task's reference solution.

The reference solution is `task.expert_actions(example)` (a one-turn task: `Example.target`, the completion the SFT
warm start imitates), replayed through the task's environment exactly as a sampled episode is encoded: action
tokens end with EOS (or their stop string), observations are appended as ids with mask 0, and the environment
scores it, so its reward is the verifier's. Its policy tokens are marked in `offpolicy_mask` [B, T] for
`objective:policy-shaping`.

Registered as a *rollout* under the method's key: the reference must be tokenized as a response, and only a
rollout is given the engine (its tokenizer) and the task; a group transform sees neither. DESIGN.md lists hints
among the rollout strategies.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch, concat
from workbench.episodes import episode_seed
from workbench.objectives.policy_shaping import LUFFY_TITLE
from workbench.rollout.turns import (Episode, Played, action_ids, episode_batch, observation_ids, prompt_of,
                                     TURNS_PROVIDES, turns)


def replay(tokenizer, env, info: dict, actions: list[str]) -> Episode:
    """The episode of `actions` in `env` (already reset; `info` its opening info), scored step by step."""
    if not actions:
        raise ValueError("the reference solution has no action")
    episode = Episode()
    for s, action in enumerate(actions):
        ids = action_ids(tokenizer, action, env.stop)
        episode.act(ids, action)
        observations, reward, done, step_info = env.step(action)
        episode.record(reward, info, step_info)
        info = step_info
        if done and s < len(actions) - 1:
            raise ValueError(f"reference action {s} ({action!r}) ends the episode but {len(actions) - 1 - s} follow")
        if s < len(actions) - 1:
            obs = observation_ids(tokenizer, observations, after_eos=ids[-1] == tokenizer.eos_token_id)
            episode.observe(obs, tokenizer.decode(obs, skip_special_tokens=True))
    return episode


def reference_batch(engine, task, examples, *, index: int, temperature: float) -> RolloutBatch:
    """One row per example: its reference solution as the `index`-th sample of the example's group. Its mu_logp
    are the policy's own log-probs at `temperature`: nothing sampled these tokens, and the policy's log-probs keep
    the mismatch metrics and a rollout importance correction (`rollout_is`) neutral on them (w = 1); the
    policy-shaping loss uses no ratio there."""
    opened, episodes = [], []
    for example in examples:
        env = task.make_env()
        messages, info = env.reset(example, episode_seed(example, index))
        opened.append(messages)
        episodes.append(replay(engine.tokenizer, env, info, task.expert_actions(example)))
    prompt_ids, prompt_mask = engine.encode([prompt_of(m) for m in opened], 1)  # [n, P]
    room = getattr(engine, "max_length", None)
    longest = int(prompt_mask.sum(-1).max()) + max(len(e.ids) for e in episodes)
    if room is not None and longest > room:
        raise ValueError(f"a reference solution needs {longest} positions (prompt + response) and the model takes "
                         f"{room}; policy-shaping cannot score it")
    batch = episode_batch(Played(episodes, opened, prompt_ids, prompt_mask), 1, engine.tokenizer.pad_token_id)
    mu_logp = engine.logprobs(batch, temperature).to(batch.mu_logp.dtype)  # [n, T], 0 off the mask
    return replace(batch, mu_logp=mu_logp, offpolicy_mask=batch.mask.clone())


@registry.rollout(
    "policy-shaping", title=LUFFY_TITLE,
    summary="Off-policy guidance: G - 1 sampled responses per prompt plus the task's reference solution, scored by "
            "the verifier and marked in offpolicy_mask for the policy-shaping loss.",
    equation=r"\{y_1, \dots, y_{G-1}\} \sim \pi_\theta(\cdot\mid x),\quad y_G = y^\star(x),\quad "
             r"m^{\mathrm{off}}_{G,t} = m_{G,t}",
    reads=(), provides=TURNS_PROVIDES + ("offpolicy_mask",))
def offpolicy_guidance(engine, task, examples, *, group_size: int, sampling, ctx=None):
    """Rows grouped per example: G - 1 samples of the `turns` rollout, then the reference solution (LUFFY's
    `n_prefix=1` with prefix ratio 1: one of the G responses is the whole off-policy solution). Greedy rollouts
    (a baseline, evaluation) are the plain `turns` rollout. `offpolicy_mask` [B, T] is 1 on the reference rows'
    policy tokens, 0 elsewhere (see `reference_batch` for their mu_logp)."""
    if sampling.greedy:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    if group_size < 2:
        raise ValueError(f"policy-shaping puts one reference solution among the G responses of a group and needs "
                         f"group_size >= 2 (at least one sampled response), got {group_size}")
    sampled = turns(engine, task, examples, group_size=group_size - 1, sampling=sampling)
    sampled = replace(sampled, offpolicy_mask=torch.zeros_like(sampled.mask))
    reference = reference_batch(engine, task, examples, index=group_size - 1, temperature=sampling.temperature)
    both = concat([sampled, reference], pad_id=engine.tokenizer.pad_token_id)
    return both.select(torch.argsort(both.group, stable=True))  # each group's rows together, the reference last
