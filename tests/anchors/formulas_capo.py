"""CAPO's per-token predictions and token masks, transcribed from the reference (used by tests/anchors/test_capo.py).

Source: luckeciano/stable-pg-llm at commit 933fe0176b140ffa4390e021feb6e8d7da1bd735
  src/open_r1/grpo_entropy_trainer.py, class GRPOEntropyTrainer:
    `_compute_entropy` (L2624-2630), `_get_per_token_logps` (the action one-hot, L156-160),
    `_compute_and_log_gradients_linear_model` (its token-level, `capo_only` part, L375-397),
    `_compute_token_level_gradients` (L437-453), `_compute_grad_norm_sq` (token branch, L2734-2743),
    `_compute_and_log_hessian_coefficient` (`compute_hessian_token_level`, `compute_per_sample_hessian_contributions`,
    `_compute_hessian_coefficients`, L1375-1476), `_compute_and_log_fisher_curvature` (`compute_fisher_token_level`,
    `_compute_fisher_curvatures`, L1631-1734), `_compute_hessian_token_mask` / `_compute_fisher_token_mask`
    (L1009-1048), `compute_loss` (the non-sequential masking and the PPO loss, L283-325) and `_compute_final_loss`
    (L2025-2065);
  src/open_r1/sparse_grad_ops.py: `densify_gradient_dict`;
  src/open_r1/sparse_optim_models/sparse_adam_model.py: `SparseAdamModel.batch_compute_effective_token_gradients`.

The reference's variable names and order of operations are kept. Removed: logging, accelerator gathers (one process),
`torch.cuda.empty_cache`, inference-mode wrappers, the sentence- and global-level branches (`capo_only` skips them) and
the loss's optional lambda/KL/entropy terms (0 in the CAPO recipe). Object state becomes arguments: the trainer's
`lr_scheduler.get_last_lr()[0]` -> `lr`; the sparse Adam model's `self.m`, `self.v` (dicts token id -> [H], the
ascent-direction moments), `self.t`, `self.beta1`, `self.beta2`, `self.eps` -> `m, v, t, beta1, beta2, eps`; the masks'
`self.*_tau` and `self.hessian_symmetric_clipping` -> arguments; `self.epsilon` -> `epsilon`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _compute_entropy(logits, k=200):
    # Compute the entropy of the top k logits
    top_k_logits, top_k_indices = torch.topk(logits, k=k, dim=-1)
    log_probs = F.log_softmax(top_k_logits, dim=-1)
    probs = torch.exp(log_probs)
    entropy = -(probs * log_probs).sum(dim=-1)
    return entropy, probs, top_k_indices


def action_one_hot(input_ids, top_k_indices):
    # Expand input_ids to match the shape of top_k_indices
    input_ids_expanded = input_ids.unsqueeze(-1)  # (batch_size, seq_len, 1)
    # Compare input_ids with top_k_indices
    return (input_ids_expanded == top_k_indices).float()  # (batch_size, seq_len, num_tokens)


def _compute_token_level_gradients(h, softmax_probs, one_hot_actions, advantages):
    pi = softmax_probs                                 # [B, T, V]
    e_a = one_hot_actions.to(h.dtype)                  # [B, T, V]
    v = e_a - pi                                       # [B, T, V]
    A = advantages.unsqueeze(1).to(h.dtype)            # [B, 1]
    g = A.unsqueeze(-1).unsqueeze(-1) * v.unsqueeze(-1) * h.unsqueeze(2)  # [B, T, V, H]
    return g


def densify_gradient_dict(grad_dict, token_ids, grad_dtype, device):
    if not grad_dict:
        return None
    batch_size, seq_len, topk_size = token_ids.shape
    token_ids_flat_global = token_ids.flatten()  # [B*T*V]
    keys = torch.tensor(list(grad_dict.keys()), device=device, dtype=torch.long)   # [U]
    grads = torch.stack(list(grad_dict.values())).to(device, dtype=grad_dtype)     # [U, H]
    keys_sorted, order = torch.sort(keys)                       # [U]
    grads_sorted = grads.index_select(0, order)                 # [U, H]
    idx = torch.searchsorted(keys_sorted, token_ids_flat_global)  # [N]
    valid = (idx < keys_sorted.numel()) & (keys_sorted[idx.clamp(max=keys_sorted.numel() - 1)] == token_ids_flat_global)
    grad_tensor_global_flat = torch.zeros(
        (token_ids_flat_global.numel(), grads_sorted.size(1)),
        dtype=grad_dtype, device=device
    )
    grad_tensor_global_flat[valid] = grads_sorted.index_select(0, idx[valid])
    global_gradient = grad_tensor_global_flat.view(batch_size, seq_len, topk_size, -1)
    return global_gradient


def batch_compute_effective_token_gradients(per_token_grads, token_ids, m, v, t, beta1=0.9, beta2=0.999, eps=1e-8):
    """SparseAdamModel.batch_compute_effective_token_gradients; `m`, `v`, `t` are the model's self.m, self.v, self.t.
    (The reference indexes `keys_sorted[idx]` unguarded, which raises when a token id is above every key; the guard
    above only avoids that index error and selects the same rows.)"""
    per_token_m = densify_gradient_dict(m, token_ids, per_token_grads.dtype, per_token_grads.device)
    per_token_v = densify_gradient_dict(v, token_ids, per_token_grads.dtype, per_token_grads.device)
    t_next = t + 1
    if per_token_m is None or per_token_v is None:
        return per_token_grads
    beta1_correction = 1.0 - beta1 ** t_next
    beta2_correction = 1.0 - beta2 ** t_next
    per_token_m.mul_(beta1).add_(per_token_grads, alpha=(1.0 - beta1))
    per_token_v.mul_(beta2).addcmul_(per_token_grads, per_token_grads, value=(1.0 - beta2))
    per_token_m.div_(beta1_correction)
    per_token_v.div_(beta2_correction)
    per_token_v.sqrt_().add_(eps)
    per_token_m.div_(per_token_v)
    return per_token_m


def _compute_grad_norm_sq_token(g, effective_g):
    B, T, V, H = g.shape
    bt = B * T
    token_grad_norm_sq = torch.bmm(
        g.reshape(bt, 1, V * H).contiguous(),
        effective_g.reshape(bt, V * H, 1).contiguous()
    ).reshape(B, T)
    return token_grad_norm_sq


def compute_per_sample_hessian_contributions(u, A, v, pi):
    # Step 2: First term: (vᵗ u)^2
    dot = (v * u).sum(dim=-1)  # (B, T)
    first_term = dot ** 2      # (B, T)
    # Step 3: Compute Fisher matrix F = diag(pi) - pi @ piᵗ
    F = torch.diag_embed(pi) - pi.unsqueeze(-1) @ pi.unsqueeze(-2)    # (B, T, V, V)
    # Step 4: Compute uᵗ F u = Tr(F u uᵗ)
    u_unsq = u.unsqueeze(-1)                               # (B, T, V, 1)
    F_u = torch.matmul(F, u_unsq).squeeze(-1)              # (B, T, V)
    second_term = (F_u * u).sum(dim=-1)                    # (B, T)
    # Step 5: Final term: A * (first - second)
    delta = first_term - second_term                       # (B, T)
    contrib = A * delta                        # (B, T)
    return contrib


def compute_hessian_token_level(G, A, v, h, pi):
    # Step 1: Compute u = G @ h
    u = torch.einsum('btvh,bth->btv', G, h)  # u = G h
    # Step 2: Compute per-sample contributions
    per_token_hessian = compute_per_sample_hessian_contributions(u, A, v, pi)
    return per_token_hessian


def hessian_full_update_term(h, one_hot_actions, softmax_probs, advantages, effective_g, grad_norm_sq, lr):
    """`_compute_hessian_coefficients` at granularity "token": (hessian, full_update_term), [B, T] each."""
    pi = softmax_probs                                 # [B, T, V]
    e_a = one_hot_actions.to(h.dtype)                  # [B, T, V]
    v = e_a - pi                                       # [B, T, V]
    A = advantages.unsqueeze(1).to(h.dtype)            # [B, 1]
    hessian = compute_hessian_token_level(effective_g, A, v, h, pi)
    full_update_term = lr * grad_norm_sq + 0.5 * hessian * lr**2
    return hessian, full_update_term


def compute_fisher_token_level(G, v, h):
    s = torch.einsum('btv,btvh,bth->bt', v, G, h)
    return s ** 2


def fisher_kl_term(h, one_hot_actions, softmax_probs, effective_g, lr):
    """`_compute_fisher_curvatures` at granularity "token": (fisher, kl_term), [B, T] each."""
    pi = softmax_probs                                 # [B, T, V]
    e_a = one_hot_actions.to(h.dtype)                  # [B, T, V]
    v = e_a - pi                                       # [B, T, V]
    fisher = compute_fisher_token_level(effective_g, v, h)
    kl_term = 0.5 * fisher * lr**2
    return fisher, kl_term


def capo_token_predictions(hidden_states, probs, action_one_hot_, advantages, top_k_token_ids, m, v, t, lr,
                           beta1=0.9, beta2=0.999, eps=1e-8):
    """`_compute_and_log_gradients_linear_model`, token level (`capo_only`): (full_update_term, approx_kl)."""
    per_token_gradient = _compute_token_level_gradients(hidden_states, probs, action_one_hot_, advantages)
    effective_per_token_gradients = batch_compute_effective_token_gradients(
        per_token_gradient, top_k_token_ids, m, v, t, beta1, beta2, eps)
    token_grad_norm_sq = _compute_grad_norm_sq_token(per_token_gradient, effective_per_token_gradients)
    _, full_update_term = hessian_full_update_term(hidden_states, action_one_hot_, probs, advantages,
                                                   effective_per_token_gradients, token_grad_norm_sq, lr)
    _, approx_kl = fisher_kl_term(hidden_states, action_one_hot_, probs, effective_per_token_gradients, lr)
    return full_update_term, approx_kl


def updated_mask(full_update_term, approx_kl, completion_mask, hessian_token_mask_tau, fisher_token_mask_tau,
                 hessian_symmetric_clipping=True):
    """compute_loss's non-sequential branch: completion_mask * hessian token mask * fisher token mask."""
    curvature_mask_hessian = torch.ones_like(completion_mask)
    if hessian_token_mask_tau != 0.0:
        if hessian_symmetric_clipping:
            curvature_mask_token = ((full_update_term < hessian_token_mask_tau)
                                    * (full_update_term > -hessian_token_mask_tau))
        else:
            curvature_mask_token = ((full_update_term < hessian_token_mask_tau) * (full_update_term >= 0.0))
        curvature_mask_hessian = curvature_mask_hessian * curvature_mask_token
    curvature_mask_fisher = torch.ones_like(completion_mask)
    if fisher_token_mask_tau != 0.0:
        curvature_mask_token = (approx_kl < fisher_token_mask_tau)
        curvature_mask_fisher = curvature_mask_fisher * curvature_mask_token
    return completion_mask * curvature_mask_hessian * curvature_mask_fisher


def final_loss(per_token_logps, old_per_token_logps, advantages, completion_mask, updated_mask_, epsilon=0.2):
    """compute_loss's PPO loss (beta = 0, no entropy term) and `_compute_final_loss` (no lambda terms)."""
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    per_token_loss1 = coef_1 * advantages.unsqueeze(1)
    per_token_loss2 = coef_2 * advantages.unsqueeze(1)
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    completion_mask = completion_mask * updated_mask_
    z = completion_mask.sum(dim=1).clamp(min=1)
    per_sentence_loss = (per_token_loss * completion_mask).sum(dim=1) / z
    global_loss = per_sentence_loss.mean()
    return global_loss
