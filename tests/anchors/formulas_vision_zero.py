"""Re-derivation of Vision-Zero's game rewards and phase switch, for tests/anchors/test_vision_zero.py.

Transcribed from wangqinsi1/Vision-Zero @ fa3c01c162c9d8110c78856684e86270ce6876de:
- `src/open-r1-multimodal/src/open_r1/clevr_spotdiff_generator.py`: `CLEVRSpotDiffGenerator.calculate_game_rewards`
  (L477-536), `_calculate_detective_reward` (L538-566), `_calculate_spy_reward` (L568-606), `update_role_baselines`
  and `apply_role_advantage_adjustment` (L608-684, the single-process path of the unified adjustment),
  `CLEVRPotentialBasedRewardShaping` (L815-892), `_calculate_strategic_clue_rewards` (L1516-1761, its reward lines),
  the God-decision reward loop of `_calculate_enhanced_two_phase_rewards_with_god_decision` (L2361-2434, from
  `vote_info` and the format verdict on);
- `src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py`: `_apply_group_normalization` (L2070-2114) and the
  interactive phase switch of `_handle_clevr_spotdiff_training` (L909-923).
Votes are the authors' vote dicts ({"voted_spy": int | "N/A"} or None); players 1-based. Prints, stack-frame
inspection and metrics removed; variable names and order of operations kept.
"""
from __future__ import annotations

import torch


class Generator:
    """The parts of CLEVRSpotDiffGenerator the rewards use: the game rewards and the role baselines."""

    def __init__(self):
        self.b_spy = 0.0
        self.b_civ = 0.0
        self.alpha = 0.9

    def calculate_game_rewards(self, game_data, player_votes):
        num_players = game_data["num_players"]
        spy_player = game_data["spy_player"]
        alpha = 0.6
        beta = 0.5
        vote_counts = {i: 0 for i in range(1, num_players + 1)}
        valid_votes = []
        for player_id, vote_info in enumerate(player_votes, 1):
            if vote_info and "voted_spy" in vote_info:
                voted_spy = vote_info["voted_spy"]
                if voted_spy == "N/A":
                    valid_votes.append("N/A")
                elif isinstance(voted_spy, int) and 1 <= voted_spy <= num_players:
                    vote_counts[voted_spy] += 1
                    valid_votes.append(voted_spy)
                else:
                    valid_votes.append(None)
            else:
                valid_votes.append(None)
        rewards = [0.0] * num_players
        for player_id in range(1, num_players + 1):
            player_idx = player_id - 1
            vote_info = player_votes[player_idx]
            if player_id == spy_player:
                reward = self._calculate_spy_reward(player_id, vote_info, vote_counts, valid_votes, num_players,
                                                    spy_player, alpha, beta)
            else:
                reward = self._calculate_detective_reward(player_id, vote_info, vote_counts, spy_player,
                                                          num_players, alpha)
            rewards[player_idx] = max(-1.0, min(1.0, reward))
        return rewards

    def _calculate_detective_reward(self, player_id, vote_info, vote_counts, spy_player, num_players, alpha):
        if not vote_info or "voted_spy" not in vote_info:
            return -1.0
        voted_spy = vote_info["voted_spy"]
        if voted_spy == spy_player:
            case_solving_score = 1.0
        else:
            case_solving_score = -1.0
        votes_received = vote_counts[player_id]
        suspicion_penalty = -alpha * votes_received / (num_players - 1)
        total_reward = case_solving_score + suspicion_penalty
        return total_reward

    def _calculate_spy_reward(self, spy_id, vote_info, vote_counts, valid_votes, num_players, spy_player, alpha,
                              beta):
        votes_received = vote_counts[spy_id]
        stealth_score = 1.0 - votes_received / (num_players - 1)
        mislead_count = 0
        for vote in valid_votes:
            if vote is not None and vote != spy_player:
                if vote == "N/A":
                    mislead_count += 0.5
                else:
                    mislead_count += 1.0
        misleading_bonus = beta * mislead_count / (num_players - 1)
        self_reveal_penalty = 0.0
        if vote_info and "voted_spy" in vote_info:
            voted_spy = vote_info["voted_spy"]
            if voted_spy == spy_player:
                self_reveal_penalty = -1.0
            elif voted_spy == "N/A":
                self_reveal_penalty = 0.0
        total_reward = stealth_score + misleading_bonus + self_reveal_penalty
        return total_reward

    def update_role_baselines(self, spy_reward, civilian_avg_reward):
        self.b_spy = self.alpha * self.b_spy + (1 - self.alpha) * spy_reward
        self.b_civ = self.alpha * self.b_civ + (1 - self.alpha) * civilian_avg_reward

    def apply_role_advantage_adjustment(self, rewards, spy_player):
        adjusted_rewards = []
        spy_reward = rewards[spy_player - 1]
        civilian_rewards = [rewards[i] for i in range(len(rewards)) if i != spy_player - 1]
        civilian_avg = sum(civilian_rewards) / len(civilian_rewards) if civilian_rewards else 0.0
        self.update_role_baselines(spy_reward, civilian_avg)
        for i, reward in enumerate(rewards):
            player_id = i + 1
            if player_id == spy_player:
                adjusted_reward = reward - self.b_spy
            else:
                adjusted_reward = reward - self.b_civ
            adjusted_rewards.append(adjusted_reward)
        return adjusted_rewards


def calculate_strategic_clue_rewards(game_data, all_votes, num_players, beta=0.1, lambda_param=0.1, generator=None,
                                     apply_role_advantage=True):
    """`_calculate_strategic_clue_rewards`: the list of rewards it returns (its 'rewards' entry)."""
    spy_player = game_data["spy_player"]
    vote_counts = {player_id: 0 for player_id in range(1, num_players + 1)}
    for god_idx, vote_info in enumerate(all_votes):
        if vote_info and "voted_spy" in vote_info:
            voted_spy = vote_info["voted_spy"]
            if voted_spy == "N/A" or voted_spy == "NA":
                pass
            elif isinstance(voted_spy, int) and 1 <= voted_spy <= num_players:
                vote_counts[voted_spy] += 1
    v_U = vote_counts[spy_player]
    civilian_votes = []
    for player_id in range(1, num_players + 1):
        if player_id != spy_player:
            civilian_votes.append(vote_counts[player_id])
    v_C_bar = sum(civilian_votes) / len(civilian_votes) if civilian_votes else 0
    psi = v_U - v_C_bar
    delta_psi = psi
    rewards = [0.0] * num_players
    for player_id in range(1, num_players + 1):
        player_idx = player_id - 1
        if player_id == spy_player:
            rewards[player_idx] = -beta * delta_psi
        else:
            num_civilians = num_players - 1
            shared_reward = beta * delta_psi / num_civilians
            v_C_j = vote_counts[player_id]
            individual_suspicion = -lambda_param * (v_C_j - v_C_bar)
            rewards[player_idx] = shared_reward + individual_suspicion
    if apply_role_advantage and generator is not None:
        return generator.apply_role_advantage_adjustment(rewards, spy_player)
    return rewards


class PBRS:
    """CLEVRPotentialBasedRewardShaping as the God-decision reward builds it."""

    def __init__(self, gamma=0.99, lambda_fmt=0.3, kappa_v=0.0, beta_acc=1.2):
        self.gamma = gamma
        self.lambda_fmt = lambda_fmt
        self.kappa_v = kappa_v
        self.beta_acc = beta_acc

    def phi_acc(self, correct):
        return 1.0 if correct else 0.0


def god_decision_reward(vote_info, spy_player, fmt_ok):
    """One God-decision completion's reward (the loop body after the format check)."""
    pbrs = PBRS(gamma=0.99, lambda_fmt=0.3, kappa_v=0.0, beta_acc=1.2)
    if vote_info and "voted_spy" in vote_info:
        voted_spy = vote_info["voted_spy"]
        if voted_spy == spy_player:
            accuracy_component = 1.0
        elif voted_spy == "N/A":
            accuracy_component = -0.5
        else:
            accuracy_component = -1.0
    else:
        accuracy_component = -1.0
    r_fmt = pbrs.lambda_fmt * (2 * int(fmt_ok) - 1)
    r_acc = accuracy_component * pbrs.beta_acc
    phi_prev = 0.0
    phi_next = pbrs.phi_acc(accuracy_component > 0)
    shaped_term = pbrs.gamma * phi_next - phi_prev
    reward = r_fmt + r_acc + shaped_term
    return reward


def apply_group_normalization(rewards, eps=1e-8):
    if len(rewards) <= 1:
        return rewards
    rewards_tensor = torch.tensor(rewards, dtype=torch.float32)
    group_mean = rewards_tensor.mean()
    group_std = rewards_tensor.std(unbiased=False)
    max_diff = (rewards_tensor.max() - rewards_tensor.min()).item()
    if group_std > eps and max_diff > eps:
        normalized_rewards = (rewards_tensor - group_mean) / (group_std + eps)
    else:
        normalized_rewards = rewards_tensor - group_mean
    return normalized_rewards.tolist()


def interactive_training_phase(global_step, interactive_cycle_length=10):
    current_step = global_step
    total_cycle_length = interactive_cycle_length * 2
    cycle_position = current_step % total_cycle_length
    if cycle_position < interactive_cycle_length:
        training_phase = 'decision'
    else:
        training_phase = 'clue'
    return training_phase
