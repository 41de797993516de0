"""CM2's checklist scoring transcribed from namezhenzhang/CM2-RLCR-Tool-Agent @ 2758991a6b755738605bf66a70c259c2d6f961cf
(used by tests/anchors/test_cm2.py), verl_v0.6.1_checklist/verl/:

    interactions/checklist_interaction.py  ChecklistInteraction.generate_response_for_single_checklist: the
                                           per-step scores (w * result * mask, the mask closing an item once its
                                           judge label is True) and the early termination (`required_for_next_turn`)
    workers/reward_manager/checklist.py    ChecklistRewardManager._async_call: the trajectory score (per turn
                                           sum_c w_c [judged True at some step of the turn], summed over turns,
                                           / num_checklists / max_num_turns) and, for the step level, the item
                                           completion pass with dependencies (`turn_completed_standards`)

The judge's labels (their `eval_one_check` answers, one list of booleans per step) are the input; messages,
HTTP calls, the token layout and the `eta` decay (1.0 by default) are dropped. Variable names and the order of
operations are the code's.

Where the code and the paper (the catalog's Eq. 2-3, which `cm2-checklist` follows) part ways:
  - the trajectory score ignores dependencies: an item judged satisfied anywhere in the turn counts, even before
    the items it depends on;
  - the completion pass (step level) checks dependencies against items *completed* so far, including ones
    completed at the same step with a lower index, and completes an item at the first step it is judged True
    once its dependencies are complete, even if it was True before; the paper pays only a flip 0 -> 1 from a
    state x_s in which the dependencies already hold.
Without dependencies, and with labels that respect the dependencies strictly, they agree (the tests).
"""
from __future__ import annotations


def per_step_scores(flat_per_step_results, weights, not_required_for_next_turn_list):
    """generate_response_for_single_checklist, its scoring loop -> (per_step_scores, should_terminate).
    `flat_per_step_results` is their per_step_results: one list of C booleans per assistant step of the turn."""
    this_turn_checklist_mask = [1] * len(weights)
    per_step_scores = []
    for this_step_results in flat_per_step_results:
        not_required_for_next_turn_list = [a or b for a, b in zip(not_required_for_next_turn_list, this_step_results)]
        this_step_score = sum([weight * result * mask for weight, result, mask in
                               zip(weights, this_step_results, this_turn_checklist_mask)])
        this_step_score = round(this_step_score, 8)
        this_turn_checklist_mask = [bool(int(a * (1 - b))) for a, b in zip(this_turn_checklist_mask, this_step_results)]
        per_step_scores.append(this_step_score)
    should_terminate_sequence = not all(not_required_for_next_turn_list)
    return per_step_scores, should_terminate_sequence


def trajectory_score(per_step_standards, per_step_turn_indices, per_turn_weights, num_checklists=1):
    """ChecklistRewardManager: per_turn_counts / per_turn_aggregated_standards / per_turn_scores, then the reward
    tensor's sum over the turn ends divided by num_checklists and max_num_turns (= len(checklist))."""
    num_turns = len(per_turn_weights)
    per_turn_counts = [0] * num_turns
    per_turn_aggregated_standards = [[False] * len(per_turn_weights[t]) for t in range(num_turns)]
    for step_standards, turn_idx in zip(per_step_standards, per_step_turn_indices):
        if 0 <= turn_idx < num_turns:
            per_turn_counts[turn_idx] += 1
            for k in range(len(step_standards)):
                if step_standards[k]:
                    per_turn_aggregated_standards[turn_idx][k] = True
    per_turn_scores = []
    for t in range(num_turns):
        if per_turn_counts[t] == 0:
            per_turn_scores.append(0.0)
            continue
        standards_t = per_turn_aggregated_standards[t]
        weights_t = per_turn_weights[t]
        numer = 0.0
        for s_val, w_val in zip(standards_t, weights_t):
            numer += (1.0 if bool(s_val) else 0.0) * float(w_val)
        per_turn_scores.append(numer)
    total = 0.0
    for count, score in zip(per_turn_counts, per_turn_scores):
        if count == 0:
            break
        total += float(score)
    return total / num_checklists / num_turns


def completion_steps(step_standards, turn_dependence):
    """The step-level completion pass of one turn (its `turn_completed_standards[turn_idx]`): {item: the step at
    which it completes}; `turn_dependence[c]` lists the indices c depends on."""
    turn_completed_standards = {}
    for step_idx, step_standard_results in enumerate(step_standards):
        for standard_idx, standard_result in enumerate(step_standard_results):
            if standard_idx >= len(turn_dependence):
                continue
            dependencies_met = True
            for dep_idx in turn_dependence[standard_idx]:
                if dep_idx not in turn_completed_standards:
                    dependencies_met = False
                    break
            if dependencies_met and standard_idx not in turn_completed_standards:
                if standard_result:
                    turn_completed_standards[standard_idx] = step_idx
    return turn_completed_standards
