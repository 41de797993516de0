"""SPO's segment advantages transcribed from AIFrameResearch/SPO @ b9fc6a263dec54e28137fd488a9b9c0e0d026025
(used by tests/anchors/test_spo.py), src/treetune/:

    episode_generators/math_episode_generator_with_mc_advantages.py
        MathEpisodeGeneratorWithMCAdvantages._create_value_estimation_requests   the cutpoints (chain)
        MathEpisodeGeneratorWithMCAdvantages._compute_mc_value                   a boundary's Monte Carlo value
        MathEpisodeGeneratorWithMCAdvantages._compute_token_advantages           the chain's token advantages
    inference_strategies/hybrid_inference_strategy.py
        HybridInferenceStrategy._construct_tree      node `reward` = mean of its children's, `reward_std` = np.std
    episode_generators/tree_episode_generator.py
        TreeEpisodeUtils.extract_edges_from_tree      one training episode per edge, advantage rloo / grpo
    trainers/utils.py
        masked_whiten                                 the advantage whitening over tokens with exp(old) < 0.9

The generation (vLLM, guidance programs, datasets on disk) and the tokenizer are dropped: the inputs are what those
functions read, the response's token log-probs, the cutpoints' Monte Carlo rewards, a tree as nested dicts with the
leaves' rewards. Variable names and the order of operations are the code's; the async tree search is a plain
recursion over a tree whose children are given.
"""
from __future__ import annotations

import copy
import json

import numpy as np
import torch


def cutpoints_from_logprobs(response_logprobs, cutpoint_interval=5):
    """_create_value_estimation_requests, per trajectory: (cutpoints, response_probs)."""
    response_probs = np.exp(response_logprobs)
    cutpoints = np.where(response_probs < 0.9)[0]  # TODO: Change 0.9 to a parameter
    cutpoints = cutpoints - 1  # Real cutpoints, sample position
    cutpoints = cutpoints[::cutpoint_interval]
    return cutpoints, response_probs


def compute_mc_value(rewards):
    """_compute_mc_value on the continuations' rewards (truncated ones already given the unfinished penalty)."""
    if len(rewards) == 0:
        mc_value = 0.0
        mc_std = -1  # Set to -1 to indentify this
    else:
        mc_value = np.mean(rewards)
        mc_std = np.std(rewards)
    return mc_value, mc_std


def compute_token_advantages(score, cutpoints, cutpoints_values, response_prob):
    """_compute_token_advantages (the std bookkeeping dropped): (token_values, advantages), one per response token."""
    n = len(response_prob)
    token_values = [None] * n
    advantages = [None] * n

    token_values[-1] = score

    base = None
    cutpoints = list(cutpoints)
    cutpoints_values = list(cutpoints_values)

    if len(cutpoints) == 0:
        token_values = [score] * n
        advantages = [0] * n
        return token_values, advantages

    if cutpoints[0] == -1:
        base = cutpoints_values[0]
        cutpoints = cutpoints[1:]
        cutpoints_values = cutpoints_values[1:]

    for idx, value in zip(cutpoints, cutpoints_values):
        token_values[idx] = value

    for i in range(len(token_values)):
        if token_values[i] is not None:
            if base == None:
                advantages[i] = 0
            else:
                advantages[i] = token_values[i] - base
            base = token_values[i]

    for i in range(len(token_values) - 1, -1, -1):
        if advantages[i] is None:
            advantages[i] = advantages[i + 1]

    for i in range(len(token_values)):
        if response_prob[i] > 0.9:
            advantages[i] = 0

    return token_values, advantages


def construct_tree(tree):
    """_construct_tree's values on a built tree: `tree` is {"text", "full_text", "children": [...]} down to leaves
    {"text", "full_text", "reward"} (a leaf: no "children"); fills `reward`, `reward_std` and `leaf` in place."""

    def dfs(node):
        if "children" not in node:
            node["leaf"] = True
            return
        node["leaf"] = False
        children = node["children"]
        for child in children:
            dfs(child)
        child_rewards = [child["reward"] for child in children]
        node["reward"] = np.mean(child_rewards)
        node["reward_std"] = np.std(child_rewards)

    dfs(tree)
    return tree


def extract_edges_from_tree(tree, adv_method="rloo", only_adv_greater_than_zero=True):
    """TreeEpisodeUtils.extract_edges_from_tree (the `instance` and `question_id` fields dropped)."""
    edges = []

    def dfs(node, parent=None):

        def BoK(value, bok=4):
            return 1 - (1 - value) ** bok

        if parent is not None:  # For each node in the tree except the root
            query_text = parent["full_text"]
            response_text = node["text"]
            parent_reward = parent["reward"]
            assert "reward_std" in parent
            parent_reward_std = parent["reward_std"]
            child_reward = node["reward"]
            leaf = node["leaf"]
            if adv_method == "rloo":
                advantage = child_reward - parent_reward
            elif adv_method == "grpo":
                advantage = (child_reward - parent_reward) / (parent_reward_std + 1e-8)
            else:
                raise ValueError(f"adv_method {adv_method} is not supported")
            prover_advantage = BoK(child_reward) - BoK(parent_reward)
            pav_advantage = advantage + prover_advantage
            edge = {"query_text": query_text, "response_text": response_text, "prover_advantage": prover_advantage,
                    "advantage": advantage, "value": child_reward, "leaf": leaf, "reward": child_reward}
            if only_adv_greater_than_zero:
                if pav_advantage != 0:
                    edges.append(edge)
            else:
                edges.append(edge)
        for child in node.get("children", []):
            dfs(child, node)
        node.pop("children", None)

    tree_copy = copy.deepcopy(tree)
    dfs(tree_copy)
    edges = json.loads(json.dumps(edges))
    return edges


def masked_mean(values, mask, axis=None):
    if axis is not None:
        return (values * mask).sum(axis=axis) / mask.sum(axis=axis)
    else:
        return (values * mask).sum() / mask.sum()


def masked_var(values, mask, unbiased=True):
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values, mask, logprobs=None, shift_mean=True, unbiased_variance=False):
    """trainers/utils.py::masked_whiten without the distributed branch; `mask` is a bool tensor."""
    mask_bak = mask
    if logprobs is not None:
        prob_mask = torch.exp(logprobs) < 0.9
        mask = mask & prob_mask

    if mask.sum() == 0:
        mask = mask_bak

    mean, var = masked_mean(values, mask), masked_var(values, mask, unbiased=unbiased_variance)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened
