"""ARPO's entropy monitor, branch rule and rollout bookkeeping transcribed (one process, no vLLM, no Ray, no tools).

Source: dongguanting/ARPO @ e257337d1f105ba685057cb662c75e509d1c7b34
    ARPO/verl_arpo_entropy/verl/workers/rollout/vllm_rollout/vllm_rollout_with_tools.py, class vLLMRolloutWithTools
        L83-86    `__init__`: initial_rollouts, beam_size, branch_probability, entropy_weight (defaults n, 1, 0.5, 0.5)
        L114-115  `self.logprobs = 10`, `self.initial_entropy_dict = {}` (never cleared afterwards)
        L172-177  `_calc_entropy`
        L181-555  `generate_sequences`: L239-260 initial rollouts, L264-282 the generation loop, L283-305 the entropy
                  monitor, L311-361 tool calls, L425-426 results appended (mask 0), L428-432 still running, L434-488
                  branching, L490-508 refill, L510-526 new rows, L528-555 num_samples rows per prompt.

Names and the order of operations are theirs. Dropped: vLLM (`generate` is a callable returning objects with vLLM's
`outputs[0].token_ids / logprobs / finish_reason / stop_reason`), the tool executor (`execute(full_text, tag)` returns
the result's token ids; the thread pool, retries, timeouts and metrics go; results are appended in submission order,
not completion order, which changes nothing: each goes to its own row), `_extract_content` (every call has content),
logging, sampling-parameter updates, and the tensor padding after L555. A tool's tag is its stop string itself (theirs:
`</tag>` stripped to `tag`). `random` is a parameter (an object
with `.random()`, Python's global `random` module in the reference); `initial_entropy_dict` is a parameter so that a
test can show it carrying over from one call to the next, as the instance attribute does.
"""
from __future__ import annotations

import math


def _calc_entropy(logprobs):
    if not logprobs:
        return 0.0
    p_list = [math.exp(l) for l in logprobs]  # noqa: E741
    entropy = -sum(p * l for p, l in zip(p_list, logprobs))  # noqa: E741
    return entropy


def entropy_monitor(outputs, active_indices, vocab_size, initial_entropy_dict):
    """L283-305: current_entropy_dict {rollout index: H}; fills initial_entropy_dict for indices not in it yet."""
    entropy_norm_factor = math.log(vocab_size)
    current_entropy_dict = {}
    for i, out_idx in enumerate(active_indices):
        output = outputs[i]
        logprobs = []
        tokens = output.outputs[0].token_ids
        for j in range(min(20, len(tokens))):
            try:
                logprob_info = output.outputs[0].logprobs[j]
            except Exception:
                logprob_info = output.outputs[0].logprobs[-1]
            token_list = list(logprob_info.values())
            token_logprobs = [token.logprob for token in token_list]
            logprobs.extend(token_logprobs)
        if logprobs:
            entropy = _calc_entropy(logprobs) / entropy_norm_factor
        else:
            entropy = 0.0
        current_entropy_dict[out_idx] = entropy
        if out_idx not in initial_entropy_dict:
            initial_entropy_dict[out_idx] = entropy
    return current_entropy_dict


def branch_decision(random, entropy_now, entropy_init, entropy_weight, branch_probability):
    """L470-477: True when the branch is made (the code's `continue` skips it)."""
    entropy_delta = entropy_now - entropy_init
    prob = random.random() - entropy_weight * entropy_delta

    prob = max(0.0, min(1.0, prob))
    if prob > branch_probability:
        return False
    return True


def generate_sequences(prompt_token_ids_list, *, num_samples, initial_rollouts, beam_size, branch_probability,
                       entropy_weight, generate, execute, stop_sequences, eos_token_id, vocab_size, random,
                       max_len=10 ** 9, tool_call_limit=5, initial_entropy_dict=None):
    """L235-555 without vLLM: (output_sequences, output_result_masks, sample_to_indices, parents), the last ours: the
    rollout index each new index was copied from (None for the initial rollouts and the refills), for the tests."""
    initial_entropy_dict = {} if initial_entropy_dict is None else initial_entropy_dict
    batch_size = len(prompt_token_ids_list)
    initial_rollouts = min(initial_rollouts, num_samples)

    curr_inputs = []
    init_inputs = []
    result_masks = []
    call_counters = []
    active_indices = []
    parents = []

    for i, ids in enumerate(prompt_token_ids_list):
        for _ in range(initial_rollouts):
            curr_inputs.append(ids.copy())
            init_inputs.append(ids.copy())
            result_masks.append([])
            call_counters.append(0)
            active_indices.append(len(curr_inputs) - 1)
            parents.append(None)

    rollouts_per_sample = [initial_rollouts] * batch_size
    sample_to_indices = {i: [i * initial_rollouts + j for j in range(initial_rollouts)] for i in range(batch_size)}

    while active_indices:
        active_prompts = [curr_inputs[i] for i in active_indices]
        outputs = generate(active_prompts)
        current_entropy_dict = entropy_monitor(outputs, active_indices, vocab_size, initial_entropy_dict)

        tool_requests = {tag: [] for tag in stop_sequences}
        next_active_indices = []

        for i, out_idx in enumerate(active_indices):
            output = outputs[i]
            generated_tokens = output.outputs[0].token_ids
            curr_inputs[out_idx].extend(generated_tokens)
            result_masks[out_idx].extend([1] * len(generated_tokens))

            finish_reason = output.outputs[0].finish_reason
            stop_reason = output.outputs[0].stop_reason
            is_tool_call = finish_reason == 'stop' and stop_reason in stop_sequences

            if is_tool_call:
                tag = stop_reason
                if call_counters[out_idx] < tool_call_limit:
                    call_counters[out_idx] += 1
                    tool_requests[tag].append({"index": out_idx})
                    next_active_indices.append(out_idx)
                else:
                    curr_inputs[out_idx].append(eos_token_id)
                    result_masks[out_idx].append(1)

            elif finish_reason == 'length':
                if len(curr_inputs[out_idx]) - len(init_inputs[out_idx]) < max_len:
                    next_active_indices.append(out_idx)

            elif finish_reason == 'stop':  # EOS
                pass

        for tag, requests in tool_requests.items():  # L363-426, in submission order instead of completion order
            for req in requests:
                idx = req["index"]
                result_tokens = execute(curr_inputs[idx], tag)
                curr_inputs[idx].extend(result_tokens)
                result_masks[idx].extend([0] * len(result_tokens))

        final_active_indices = []
        for idx in next_active_indices:
            response_len = len(curr_inputs[idx]) - len(init_inputs[idx])
            if response_len < max_len:
                final_active_indices.append(idx)

        new_inputs = []
        new_init_inputs = []
        new_result_masks = []
        new_call_counters = []
        new_sample_origins = []
        new_parents = []

        active_by_sample = {}
        for idx in final_active_indices:
            orig_sample = None
            for sample_idx, indices in sample_to_indices.items():
                if idx in indices:
                    orig_sample = sample_idx
                    break

            if orig_sample is not None:
                if orig_sample not in active_by_sample:
                    active_by_sample[orig_sample] = []
                active_by_sample[orig_sample].append(idx)

        for orig_sample, active_idxs in active_by_sample.items():
            remaining_slots = num_samples - rollouts_per_sample[orig_sample]
            if remaining_slots <= 0:
                continue
            branches_created = 0
            for source_idx in active_idxs:
                branches_per_idx = min(beam_size - 1, remaining_slots - branches_created)
                if branches_per_idx <= 0:
                    break
                for _ in range(branches_per_idx):
                    entropy_now = current_entropy_dict.get(source_idx, 0.0)
                    entropy_init = initial_entropy_dict.get(source_idx, 0.0)
                    if not branch_decision(random, entropy_now, entropy_init, entropy_weight, branch_probability):
                        continue
                    new_inputs.append(curr_inputs[source_idx].copy())
                    new_init_inputs.append(init_inputs[source_idx].copy())
                    new_result_masks.append(result_masks[source_idx].copy())
                    new_call_counters.append(call_counters[source_idx])
                    new_sample_origins.append(orig_sample)
                    new_parents.append(source_idx)
                    rollouts_per_sample[orig_sample] += 1
                    branches_created += 1
                if branches_created >= remaining_slots:
                    break

        for orig_sample in range(batch_size):
            if orig_sample not in active_by_sample and rollouts_per_sample[orig_sample] < num_samples:
                branches_to_add = min(1, num_samples - rollouts_per_sample[orig_sample])
                if branches_to_add <= 0:
                    continue

                source_idx = sample_to_indices[orig_sample][0]

                for _ in range(branches_to_add):
                    new_inputs.append(init_inputs[source_idx].copy())
                    new_init_inputs.append(init_inputs[source_idx].copy())
                    new_result_masks.append([])
                    new_call_counters.append(0)
                    new_sample_origins.append(orig_sample)
                    new_parents.append(None)
                    rollouts_per_sample[orig_sample] += 1

        if new_inputs:
            start_idx = len(curr_inputs)
            curr_inputs.extend(new_inputs)
            init_inputs.extend(new_init_inputs)
            result_masks.extend(new_result_masks)
            call_counters.extend(new_call_counters)
            parents.extend(new_parents)

            final_active_indices.extend(range(start_idx, start_idx + len(new_inputs)))

            for i, new_idx in enumerate(range(start_idx, start_idx + len(new_inputs))):
                orig_sample = new_sample_origins[i]
                sample_to_indices.setdefault(orig_sample, []).append(new_idx)

        active_indices = final_active_indices

    for idx in range(len(curr_inputs)):
        response_len = len(curr_inputs[idx]) - len(init_inputs[idx])
        if response_len > max_len:
            offset = len(init_inputs[idx])
            curr_inputs[idx] = curr_inputs[idx][:offset + max_len]
            result_masks[idx] = result_masks[idx][:max_len]

    output_sequences = []
    output_result_masks = []
    for i in range(batch_size):
        sample_indices = sample_to_indices.get(i, [])
        selected_indices = sample_indices[:num_samples]

        while len(selected_indices) < num_samples:
            if selected_indices:
                selected_indices.append(selected_indices[-1])
            else:
                break

        for idx in selected_indices:
            output_sequences.append(curr_inputs[idx][len(prompt_token_ids_list[i]):])
            output_result_masks.append(result_masks[idx])
    return output_sequences, output_result_masks, sample_to_indices, parents
