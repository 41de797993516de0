"""Critique-GRPO's advantage, loss, critique, refinement prompt and refinement selection, re-derived from the authors'
code.

Source: zhangxy-2019/critique-GRPO @ e8f03a20b49511e10e71f361c70e46aae3ae8753, `verl/verl/critique_grpo/`
    critique_core_algos.py          `compute_grpo_outcome_advantage` (L113-167)
                                    `compute_token_on_off_policy_loss` (L504-692)
    critique_prompts.py             `generate_critique` (L85-135), the "simple_gt" and "simple" branches
    refinement_prompts.py           `refine_prompt` (L17-30)
    critique_vllm_rollout_spmd.py   `process_refinement_groups` (L61-97)

Variable names and the order of operations are theirs. Left out: the debug prints; in the loss, the reshape branches
the script does not take (on_policy_reshape other than "no_reshape", off_policy_reshape other than "p_div_p_0.1"),
the `target_probs` branch (the actor passes None) and the off-policy max / min clips and `all_max_clip` (all -1 in
the config, i.e. None); verl's `masked_mean` is written out (its 1e-8 in the denominator kept). The loss returns the
entries of its dict the tests read. `generate_critique`'s "text" branch (a GPT-4o call) is left out.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def masked_mean(values, mask, axis=None):  # verl.utils.torch_functional.masked_mean
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True):
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores


def compute_token_on_off_policy_loss(old_log_prob, log_prob, advantages, response_mask, cliprange, clip_upper_bound,
                                     prefix_mask, off_policy_reshape="p_div_p_0.1", loss_remove_token_mean=False,
                                     loss_remove_clip=False):
    negative_approx_kl = log_prob - old_log_prob
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)

    ratio = torch.exp(negative_approx_kl)  # on_policy_reshape == "no_reshape"

    on_pg_losses = -advantages * ratio
    upper_bound = max(clip_upper_bound, 1.0 + cliprange)

    if loss_remove_clip is False:
        on_pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, upper_bound)
        on_pg_clipfrac = masked_mean(torch.gt(on_pg_losses2, on_pg_losses).float(), response_mask)
        on_pg_losses = torch.max(on_pg_losses, on_pg_losses2)
        on_pg_loss = masked_mean(on_pg_losses, (~prefix_mask) * response_mask)
    else:
        on_pg_loss = masked_mean(on_pg_losses, (~prefix_mask) * response_mask)
        on_pg_clipfrac = torch.tensor(0.0)

    # compute off-policy loss (target_probs is None)
    off_ratio = torch.exp(log_prob)  # [bsz, l]
    if off_policy_reshape == "no_reshape":
        pass
    elif off_policy_reshape == "p_div_p_0.1":
        off_ratio = off_ratio / (off_ratio + 0.1)
    else:
        raise ValueError(f"Invalid off_policy_reshape: {off_policy_reshape}")

    off_pg_losses = -advantages * off_ratio
    off_pg_loss = masked_mean(off_pg_losses, prefix_mask * response_mask)
    if off_pg_loss.isnan().item() is True:
        off_pg_loss = torch.tensor(0.0)

    prefix_mask = prefix_mask.float()
    pg_losses = off_pg_losses * prefix_mask + on_pg_losses * (1 - prefix_mask)

    if loss_remove_token_mean is True:
        pg_loss = (pg_losses * response_mask).sum() / response_mask.shape[-1]
    else:
        pg_loss = masked_mean(pg_losses, response_mask)

    return {"pg_loss": pg_loss, "off_pg_loss": off_pg_loss, "on_pg_loss": on_pg_loss,
            "on_pg_clipfrac": on_pg_clipfrac, "ppo_kl": ppo_kl}


def generate_critique(sample, critique_type):
    if critique_type == "simple_gt":
        if sample["score"] > 0:
            critique = "The generated solution is correct, the ground truth is " + sample["gt"] + "."
        else:
            critique = "The generated solution is incorrect, the ground truth is " + sample["gt"] + "."
        sample["critique"] = critique

    elif critique_type == "simple":
        if sample["score"] > 0:
            critique = "The generated solution is correct."
        else:
            critique = "The generated solution is incorrect."
        sample["critique"] = critique

    return sample


def refine_prompt(question, failed_solution, critique):

    prompt =  f"""Given the following inputs:
        **Question**: {question}
        **Previous Solution**: {failed_solution}
        **Critique**: {critique}

        Please re-answer by:
        - Correcting potential errors identified in the critique, if they exist.
        - Providing clear, step-by-step reasoning.
        - Formatting the final answer as `\\boxed{{answer}}`.

        Ensure the revised solution addresses all issues raised in the critique."""
    return prompt


def process_refinement_groups(refinement_dicts, num_samples=7):
    selected_refinements = []
    refinement_scores = []

    # Split into groups of num_samples
    for i in range(0, len(refinement_dicts), num_samples):
        group = refinement_dicts[i:i + num_samples]

        # Try to find a perfect score (1.0) first
        perfect_refinements = [item for item in group if item['score'] == 1.0]

        if perfect_refinements:
            # If multiple perfect scores, pick the first one
            selected = perfect_refinements[0]
            refine_score = 1
        else:
            # Otherwise select the highest scoring refinement
            selected = max(group, key=lambda x: x['score'])
            refine_score = 0

        selected_refinements.append(selected)
        refinement_scores.append(refine_score)

    return selected_refinements, refinement_scores
