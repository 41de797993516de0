"""R³L's reflect-then-retry rollout: half the budget samples base episodes, every failure is diagnosed and retried
from its pivot turn with the diagnosis in the prompt, and the retry is trained under the plain prompt.

    tau_1 .. tau_{N/2} ~ pi(. | x)                                   base episodes (the group's first N/2 rows)
    r_i = reflect(tau_i) = (outcome, root cause, suggestion, k_i)    the verifier's diagnosis, k_i = k_pivot
    for every tau_i with R(tau_i) < R_success:
        tau'_i = tau_{i,<k_i} (+) tau'_{i,>=k_i},  tau'_{i,>=k_i} ~ pi(. | g_i (+) x, tau_{i,<k_i})
                 the prefix's actions replayed through the environment (mask 0), the rest sampled with the
                 guidance g_i = render(r_i) in the prompt
        D_distill: tau'_i trained under the plain prompt x (the guidance removed), in x's group
        D_retry:   tau'_i under g_i (+) x as well, when it beats tau_i (a verified correction), A = 1 (SFT)
    every row records its pivot in turn_info[row][s]["pivot"] (base rows with a retry: k_i; others 0) and its role
    in turn_info[row][s]["r3l_role"] ("base", "retry", "sft"): `token_mask:r3l` zeroes turns k < k_pivot of a base
    row and its retry, `advantage:r3l` keeps the D_retry rows out of the group's statistics.

The pivot rule (ours; the paper's model names k_pivot in its reflection). For a failed episode with steps 0..n-1:
    1. the first step whose `turn_info[s]["tool_error"]` is set (the tool refused the call, the move was wasted);
    2. else the first step s whose action text differs from the task's solution's action s (`Task.expert_actions`,
       replayed deterministically by the environment; a step beyond the solution's length differs too); when every
       action agrees with the solution and the episode still failed (cut off), the last step;
    3. else 0 (start over).
k_pivot is at most n - 1, so the replayed prefix never ends the episode and the retry redoes at least one step. A
one-turn task's pivot is always 0 (the retry is a fresh answer with the diagnosis in the prompt). Rule 1 comes first
even when an earlier step departs from the solution: a tool error is in the environment's feedback, what the
reference's reflector reads in the transcript; a departure from a solution it never sees is the fallback.

The reflection is computed, not generated: it is the verifier's and the environment's diagnosis rendered as text,
never the model's. The paper's model writes a structured reflection (outcome class, root cause, suggestion, pivot);
here the outcome is the verifier's (success iff the episode return reaches `success`, the reference's
`reward >= 1.0`), the root cause names the pivot step and why it was chosen (its tool error, or its departure from a
solution), the suggestion is not to repeat that step's action. The rendered guidance never quotes the solution's
actions (the diagnosis says where the episode went wrong, not what is right), e.g.
    "Previous attempt: failure (reward 0). Step 1 '[3*]' got a tool error: malformed call: expected [a op b] with
     two integers. Retry from step 1: do not repeat '[3*]'."

Reference: shiweijiezero/R3L @ d503f6c6b0725a4e8a39311e6f9b71de6bb2f64b,
`trinity/common/workflows/envs/R3L/alfworld/R3L_workflow.py::R3LAlfworldWorkflow.run` (L190-349: n // 2 first
rollouts, a reflection of each, a second rollout when the reflection is valid and not "perfect"; the second's
guidance-free `distill_trajectory` joins the explore group, L268-293; when the retry beats the first attempt
(L319-321) the reflection and the guided `second_trajectory` are added with reward 1.0, each in its own group,
L322-341), `_adjust_action_mask_for_retry` (L149-188: the first retry_step assistant turns get mask 0, in the retry
and in the first attempt, L273-278); `alfworld/utils.py::second_rollout` (L116-283: the first attempt's responses
replayed up to retry_step, the guidance inserted before the pivot, the distill trajectory without it),
`validate_reflect_report` (L529-587: outcomes "success" / "success_but_inefficient" / "failure", 0 <= retry_from_step
< steps), `prompts/self_correction.j2` (the guidance wrapper). Paper: shiweijiezero/Trinity-RFT
`writing/ARR_EMNLP_R3L/paper_arxiv/main.tex`, section "Language-Guided Reflect-Then-Retry".

Differences, and why:
- The reflection is the verifier's diagnosis (above), so there is no D_reflect: the reference trains the model's
  reflection text with reward 1 when the retry beats the first attempt (or when a successful attempt's reflection
  says "success"); a computed diagnosis is nothing to learn.
- Only failures are retried. The reference also retries a success its model judges "success_but_inefficient"; the
  verifier offers no such judgement. A group therefore holds N/2 + (number of failures) explore rows, N at most:
  the reference fills nothing either (an all-success group keeps its N/2 rows), and neither do we.
- The guidance goes into the opening prompt (`HintedTask`, `template`, default "{hint}\\n{prompt}": before the
  question, where the tiny character model's answer follows the question as in the plain prompt). The reference
  appends it to the system prompt when retry_step = 0 and inserts it as a system message right before the pivot
  turn otherwise. Either way the training sample D_distill has no guidance.
- The replayed prefix is the original's action texts, re-tokenized (`Given`, as every guided rollout here): token
  for token the original's where decoding then encoding round-trips (the character tokenizer always), and the
  observations are the environment's, encoded the same way. The environment replays the prefix from a fresh reset
  with the seed of row 0 of a one-row group, not the original row's; every built-in environment is deterministic,
  and the rollout refuses a replay that reaches a different state than the original did.
- D_retry ("SFT on verified corrections") rows stay in the prompt's group id (a group id names the example the
  rewards are read for) and are told apart by their role; the reference gives each its own group (a singleton,
  whose advantage is 1.0 for reward 1). A correction is verified by the reference's test (L319-321): the retry
  succeeds and either beats the first attempt's reward or takes fewer steps. `retry_sft=False` leaves them out.
  The paper's L_SFT(D_retry) is a separate mean added to the RL term; here, as in the code, these rows are trained by
  the same loss with A = 1 (`advantage:r3l`), so their weight is their share of the loss's tokens, not a term of
  its own.
- A retry whose guided prompt and replayed prefix leave no room under the engine's `max_length` is not made (its
  base row is then unmasked), as the reference drops a second rollout that fails (R3L_workflow.py L344-345).
- The decision to retry and the diagnosis read the environment's reward (the episode return), not the recipe's
  reward functions: a rollout runs before the reward stage.
- Greedy rollouts (evaluation, baselines) are plain `turns` with the whole group: reflect-then-retry is exploration.
- The loop's reward metrics average every row, retries and corrections included; r3l/base_success is the policy's
  own success rate on the plain prompt.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from workbench import registry
from workbench.advantages.r3l import BASE, PIVOT, R3L_TITLE, RETRY, ROLE, SFT
from workbench.batch import RolloutBatch, concat
from workbench.rollout.turns import TURNS_PROVIDES, Given, episode_batch, play, prompt_of, turns
from workbench.tasks.guidance import check_template, hinted_copies, solution_actions

R3L_TEMPLATE = "{hint}\n{prompt}"  # the guidance first, the question last (see the module docstring)

R3L_LOGS = {
    "r3l/retries": ("R3L: retried episodes per prompt this step (one per failed base episode).",
                    "N/2 x (1 - r3l/base_success): N/2 early on, falling to 0 as the base episodes succeed."),
    "r3l/base_success": ("R3L: share of base episodes (sampled from the plain prompt) that succeed.",
                         "Rises over training; it is the on-policy success rate the retries are compared with."),
    "r3l/retry_success": ("R3L: share of retries (guided, from the pivot) that succeed, each a verified correction "
                          "(only failures are retried); 0 when none was retried.",
                          "Above the failed episodes' 0: the diagnosis helps. Near 0 for long: the guidance or the "
                          "pivot does not help the policy."),
    "r3l/pivot": ("R3L: mean pivot turn k_pivot of the retried episodes (0 when none was retried).",
                  "Between 0 and the episodes' length - 1; 0 throughout on a one-turn task."),
}


@dataclass(frozen=True)
class Reflection:
    """The diagnosis of one episode: what the paper's model writes, computed from the verifier and the environment."""

    outcome: str      # "success" | "failure"
    reward: float     # the episode return
    root_cause: str   # why the pivot step is blamed ("" for a success)
    suggestion: str   # what to do differently from the pivot on ("" for a success)
    pivot: int        # k_pivot: the first turn the retry samples (0 for a success)

    def guidance(self) -> str:
        """g: the diagnosis rendered as the text put into the retry's prompt."""
        return (f"Previous attempt: {self.outcome} (reward {self.reward:g}). {self.root_cause}. "
                f"Retry from step {self.pivot}: {self.suggestion}.")


def first_tool_error(steps: list[dict]) -> int | None:
    """Rule 1: the first step whose tool call failed (`tool_error` set), or None."""
    return next((s for s, info in enumerate(steps) if info.get("tool_error")), None)


def first_departure(steps: list[dict], solution: list[str]) -> int:
    """Rule 2: the first step whose action differs from the solution's at that step (a step past its end differs);
    the last step when every action agrees (an episode that followed the solution and was still cut off)."""
    for s, info in enumerate(steps):
        if s >= len(solution) or info["action"] != solution[s]:
            return s
    return len(steps) - 1


def pivot_turn(steps: list[dict], solution: list[str] | None) -> tuple[int, str]:
    """(k_pivot, the rule that chose it: "tool_error" | "departure" | "none") of a failed episode's steps
    (`turn_info[row]`), in [0, len(steps) - 1]."""
    error = first_tool_error(steps)
    if error is not None:
        return error, "tool_error"
    if solution is not None:
        return min(first_departure(steps, solution), len(steps) - 1), "departure"
    return 0, "none"


def reflect(steps: list[dict], reward: float, truncated: bool, solution: list[str] | None,
            success: float = 1.0) -> Reflection:
    """The verifier's diagnosis of one episode: its outcome, the pivot by `pivot_turn`, why, and the suggestion."""
    if reward >= success:
        return Reflection("success", reward, "", "", 0)
    pivot, rule = pivot_turn(steps, solution)
    action = steps[pivot]["action"]
    if rule == "tool_error":
        cause = f"Step {pivot} {action!r} got a tool error: {steps[pivot]['tool_error']}"
    elif rule == "departure":
        cause = f"Step {pivot} {action!r} departs from a solution"
    else:
        cause = "The episode was cut off at the token budget" if truncated else "The episode did not succeed"
    suggestion = f"do not repeat {action!r}" if rule != "none" else "try another approach"
    return Reflection("failure", reward, cause, suggestion, pivot)


def verified_correction(reward: float, steps: int, retry_reward: float, retry_steps: int, success: float) -> bool:
    """The reference's test for keeping a retry as a verified correction (R3L_workflow.py L319-321): it succeeds and
    either beats the first attempt's reward or takes fewer steps."""
    return retry_reward >= success and (retry_reward > reward or retry_steps < steps)


def check_r3l(*, group_size=None, template=R3L_TEMPLATE, success=1.0, retry_sft=True, **_) -> None:
    """An even group of at least 2 (N/2 base episodes, up to N/2 retries), a template with {prompt} and {hint}."""
    if group_size is not None and (group_size < 2 or group_size % 2):
        raise ValueError(f"group_size={group_size}: R3L samples N/2 base episodes per prompt and retries the failed "
                         "ones from their pivot (up to N/2 more), so the group size N must be even and >= 2: set "
                         "group_size=8 (the paper's) or another even number")
    check_template(template)
    if not isinstance(retry_sft, bool):
        raise ValueError(f"retry_sft={retry_sft!r}: give true (train verified corrections under the guided prompt, "
                         "the reference's D_retry) or false")
    if not isinstance(success, (int, float)) or isinstance(success, bool):
        raise ValueError(f"success={success!r}: give the episode return that counts as solved (the reference's 1.0)")


@registry.rollout(
    "r3l", title=R3L_TITLE,
    summary="N/2 base episodes per prompt; each failure is diagnosed by the verifier (pivot: first tool error, else "
            "first departure from the solution), replayed up to its pivot and retried with the diagnosis in the "
            "prompt; the retry is trained under the plain prompt, and under the guided one too when it succeeds.",
    equation=r"\tau' = \tau_{<k_{pivot}} \oplus \tau'_{\ge k_{pivot}},\quad "
             r"\tau'_{\ge k_{pivot}} \sim \pi_\theta(\cdot \mid g \oplus x, \tau_{<k_{pivot}}),\quad "
             r"\text{trained as } \pi_\theta(\tau' \mid x)",
    reads=(), provides=TURNS_PROVIDES, needs=("solution",), logs=R3L_LOGS, check=check_r3l)
def r3l_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, success=1.0, template=R3L_TEMPLATE,
                retry_sft=True):
    """Rows grouped per example: its N/2 base episodes, then the retries of the failed ones (plain prompt), then,
    with `retry_sft`, the verified corrections again under their guided prompt. Every row's steps carry `pivot` and
    `r3l_role` in turn_info (module docstring). Logs r3l/retries, base_success, retry_success, pivot."""
    check_r3l(group_size=None if sampling.greedy else group_size, template=template, success=success,
              retry_sft=retry_sft)
    if sampling.greedy:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    half = group_size // 2
    base = turns(engine, task, examples, group_size=half, sampling=sampling)  # [n * N/2] rows, grouped per example
    reflections = [reflect(base.turn_info[i], float(base.rewards[i]), bool(base.truncated[i]),
                           solution_actions(task, examples[i // half]), success) for i in range(base.size)]
    failed = [i for i, r in enumerate(reflections) if r.outcome != "success"]
    retried, rows = retry(engine, task, [examples[i // half] for i in failed], base, failed,
                          [reflections[i] for i in failed], sampling, template)
    pivots = {i: reflections[i].pivot for i in rows}  # retried base row -> k_pivot
    verified = verified_rows(base, retried, rows, success)
    if ctx is not None:
        ctx.metrics.update(r3l_metrics(base, retried, list(pivots.values()), len(examples), success))
    parts = training_parts(base, retried, rows, pivots, verified if retry_sft else [])
    batch = concat(parts, pad_id=engine.tokenizer.pad_token_id)
    return batch.select(torch.argsort(batch.group, stable=True))  # each group's rows together: base, retries, SFT


def verified_rows(base: RolloutBatch, retried: RolloutBatch | None, rows: list[int], success: float) -> list[int]:
    """The retries (their index j, retry of base row rows[j]) that are verified corrections of their base episode."""
    if retried is None:
        return []
    return [j for j, i in enumerate(rows) if verified_correction(float(base.rewards[i]), len(base.turn_info[i]),
                                                                 float(retried.rewards[j]),
                                                                 len(retried.turn_info[j]), success)]


def training_parts(base: RolloutBatch, retried: RolloutBatch | None, rows: list[int], pivots: dict,
                   sft: list[int]) -> list[RolloutBatch]:
    """The rows trained on, with their roles and pivots: the base rows (pivot where retried, else 0); the retries
    under their base row's plain prompt (D_distill: the guidance removed); the retries `sft` under their guided
    prompt (D_retry)."""
    parts = [with_roles(base, BASE, [pivots.get(i, 0) for i in range(base.size)])]
    if retried is None:
        return parts
    plain = replace(retried, prompt_ids=base.prompt_ids[rows], prompt_mask=base.prompt_mask[rows],
                    prompts=[base.prompts[i] for i in rows])
    parts.append(with_roles(plain, RETRY, [pivots[i] for i in rows]))
    if sft:
        parts.append(with_roles(retried.select(torch.tensor(sft)), SFT, [pivots[rows[j]] for j in sft]))
    return parts


def retry(engine, task, examples, base: RolloutBatch, rows: list[int], reflections: list[Reflection], sampling,
          template: str) -> tuple[RolloutBatch | None, list[int]]:
    """(retries, the base rows retried): one retry per failed base row `rows[j]` (of examples[j]) whose guided prompt
    and prefix leave room for a token (`max_length`), its first k_pivot actions replayed (`Given`, mask 0), the rest
    sampled with the guidance in the prompt (`hinted_copies`). Rows in `rows`' order, base's group ids, prompts still
    guided; (None, []) when nothing is retried."""
    if not rows:
        return None, []
    hinted, copies = hinted_copies(task, examples, [r.guidance() for r in reflections], template)
    room = retry_room(engine, hinted, copies, base, rows, reflections)
    keep = [j for j, r in enumerate(room) if r is None or r >= 1]
    if not keep:
        return None, []
    rows, reflections = [rows[j] for j in keep], [reflections[j] for j in keep]
    given = [Given(tuple(info["action"] for info in base.turn_info[i][:r.pivot])) for i, r in zip(rows, reflections)]
    played = play(engine, hinted, [copies[j] for j in keep], group_size=1, sampling=sampling, given=given)
    retried = episode_batch(played, 1, engine.tokenizer.pad_token_id)
    for j, (i, r) in enumerate(zip(rows, reflections)):
        check_replayed(base.turn_info[i], retried.turn_info[j], r.pivot)
    return replace(retried, group=base.group[rows]), rows


def retry_room(engine, hinted, copies, base: RolloutBatch, rows: list[int], reflections: list[Reflection]) -> list:
    """Tokens left under the engine's `max_length` after each retry's guided prompt and replayed prefix (the base
    row's tokens of turns < k_pivot: the same ids where decoding round-trips), None without a limit: the base episode
    fit under its plain prompt, the guidance can push a long prefix over."""
    total = getattr(engine, "max_length", None)
    if total is None:
        return [None] * len(rows)
    opened = [hinted.make_env().reset(c)[0] for c in copies]  # the messages `play` will open each retry with
    _, prompt_mask = engine.encode([prompt_of(m) for m in opened], 1)                        # [R, P]
    prefix = [int(((base.turn[i] >= 0) & (base.turn[i] < r.pivot)).sum()) for i, r in zip(rows, reflections)]
    return [total - int(p) - k for p, k in zip(prompt_mask.sum(-1).tolist(), prefix)]


def check_replayed(original: list[dict], retried: list[dict], pivot: int) -> None:
    """The retry acted from the original's states up to and including its pivot step (a deterministic replay)."""
    for s in range(min(pivot + 1, len(retried))):
        if retried[s]["state"] != original[s]["state"]:
            raise ValueError(f"R3L: replaying the first {pivot} actions reached state {retried[s]['state']!r} at step "
                             f"{s}, where the original episode was in {original[s]['state']!r}; a retry from the "
                             "pivot needs an environment that replays deterministically from its reset")


def with_roles(batch: RolloutBatch, role: str, pivots: list[int]) -> RolloutBatch:
    """`batch` whose every row's steps carry its role and pivot (new dicts: rows copied from others share none)."""
    info = [[{**step, ROLE: role, PIVOT: k} for step in row] for row, k in zip(batch.turn_info, pivots, strict=True)]
    return replace(batch, turn_info=info)


def r3l_metrics(base: RolloutBatch, retried: RolloutBatch | None, pivots: list[int], n_examples: int,
                success: float) -> dict:
    n_retries = len(pivots)
    retry_success = float((retried.rewards >= success).float().mean()) if retried is not None else 0.0
    return {"r3l/retries": n_retries / n_examples,
            "r3l/base_success": float((base.rewards >= success).float().mean()),
            "r3l/retry_success": retry_success,
            "r3l/pivot": sum(pivots) / n_retries if n_retries else 0.0}
