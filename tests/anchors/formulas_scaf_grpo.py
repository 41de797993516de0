"""Scaf-GRPO's hint levels and replacement, re-derived from the authors' trainer on plain lists.

Source: dvlab-research/Scaf-GRPO @ 1085db539b929ea6fed5ec3b71e3ea4c48c27612, hint_mix_grpo/trainer/ray_trainer.py
    `build_new_message` L2136-2240   the cumulative hint contents per level (tiers "Knowledge Hints" and
                                     "Solution Hints"; "Planning Hints" commented out)
    `RayPPOTrainer.fit` L1467-1660   cliff detection (`(uid_rewards == 0).all()`), `min_hint_level` over rewards
                                     > 0 once `(uid_rewards == 1).any()`, and the replacement of the first row(s) of
                                     each solved uid (`replace_num`, `replace_hint_prompt`)

Variable names and the order of operations are theirs. DataProto rows are list entries: a row is a dict
{"uid", "prompt", "response", "reward"}; `generate(contents)` stands for generate_sequences + compute_reward on the
hinted batch and returns (responses, rewards). The system message and the chat template are left out (the content
string is what differs between levels).
"""
from __future__ import annotations


def build_new_message(questions, original_uids, parts_by_stage):
    """[(uid, hint_level, content)] for every question and level, in the order of the reference's loops."""
    stages = [
        ("knowledge_components_parts", "Knowledge Hints"),
        # ("planning_skeleton_parts", "Planning Hints"),
        ("solution_breakdown_parts", "Solution Hints"),
    ]
    out = []
    for i in range(len(questions)):
        hint_level_counter = 1
        for stage_key, hint_label in stages:
            parts_data = parts_by_stage.get(stage_key, [[] for _ in range(len(questions))])[i]
            for hint_count in range(1, 5):
                combined_hints = parts_data[:hint_count]
                content = f'Question: {questions[i]}\n{hint_label}: {" ".join(combined_hints)}'
                out.append((original_uids[i], hint_level_counter, content))
                hint_level_counter += 1
    return out


def hint_loop(batch, questions, parts_by_stage, generate, replace_num=1, replace_hint_prompt=False):
    """The batch (list of row dicts, rows of a uid together) after the hint loop of `fit`."""
    uids = [r["uid"] for r in batch]
    unique_uids = sorted(set(uids))
    reward_sums = [r["reward"] for r in batch]
    remove_uids = []
    for uid in unique_uids:
        uid_rewards = [reward_sums[i] for i in range(len(batch)) if uids[i] == uid]
        if all(r == 0 for r in uid_rewards):
            pass
        elif any(r == 1 for r in uid_rewards):
            remove_uids.append(uid)
    kept = [u for u in unique_uids if u not in remove_uids]  # new_gen_batch = remove_uids_from_dataproto(...)
    assert all(reward_sums[i] == 0 for i in range(len(batch)) if uids[i] in kept)  # their assert: only cliffs left
    messages = build_new_message([questions[u] for u in kept], kept, {
        k: [v[u] for u in kept] for k, v in parts_by_stage.items()})
    responses, rewards = generate([content for _, _, content in messages])
    original_uids = [m[0] for m in messages]
    hint_levels = [m[1] for m in messages]
    new_data_map = {}
    for orig_uid in sorted(set(original_uids)):
        uid_indices = [i for i, u in enumerate(original_uids) if u == orig_uid]
        uid_rewards = [rewards[i] for i in uid_indices]
        uid_hint_levels = [hint_levels[i] for i in uid_indices]
        if all(r == 0 for r in uid_rewards):
            pass
        elif any(r == 1 for r in uid_rewards):
            valid_indices = [i for i, r in enumerate(uid_rewards) if r > 0]
            min_hint_level = min(uid_hint_levels[i] for i in valid_indices)
            candidate_indices = [i for i in valid_indices if uid_hint_levels[i] == min_hint_level]
            selected_index = candidate_indices[0]
            new_data_map[orig_uid] = uid_indices[selected_index]
    batch = [dict(r) for r in batch]
    updated_uids, updated_uids_count = set(), {}
    for orig_idx, orig_uid in enumerate(uids):
        if replace_num == 1:
            if orig_uid in new_data_map and orig_uid not in updated_uids:
                new_idx = new_data_map[orig_uid]
                updated_uids.add(orig_uid)
                batch[orig_idx]["response"], batch[orig_idx]["reward"] = responses[new_idx], rewards[new_idx]
                if not replace_hint_prompt:
                    batch[orig_idx]["prompt"] = messages[new_idx][2]
        elif orig_uid in new_data_map:
            new_idx = new_data_map[orig_uid]
            updated_uids_count[orig_uid] = updated_uids_count.get(orig_uid, 0) + 1
            if updated_uids_count[orig_uid] <= replace_num:
                batch[orig_idx]["response"], batch[orig_idx]["reward"] = responses[new_idx], rewards[new_idx]
                if updated_uids_count[orig_uid] == 2:
                    batch[orig_idx]["prompt"] = messages[new_idx][2]
    return batch
