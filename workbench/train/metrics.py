"""The metrics log (one JSON row per step, appended and flushed as training goes) and its glossary."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from workbench.files import write_atomic

GLOSSARY: dict[str, str] = {
    "step": "RL step index (one rollout batch per step), starting at 0.",
    "reward/mean": "Mean outcome reward of the sampled responses; rises as the policy improves.",
    "reward/std": "Std of rewards over the batch; near 0 means no learning signal is left in the groups.",
    "accuracy": "Fraction of sampled responses the verifier accepts (at the sampling temperature).",
    "frac_zero_std_groups": "Share of groups whose rewards are all equal: their group advantage is 0.",
    "advantage/mean": "Mean advantage over valid tokens (about 0 for centred estimators).",
    "advantage/abs_mean": "Mean |advantage| over valid tokens: the size of the learning signal.",
    "entropy": "Mean full-vocabulary token entropy of the policy on its own samples (nats); a collapse to 0 "
               "means no exploration.",
    "kl": "Mean per-token KL(pi || ref) estimate (recipe's estimator) to the frozen reference; grows slowly "
          "when healthy.",
    "kl/beta": "KL coefficient used this step when a controller drives it (adaptive-kl).",
    "kl/k1_old": "mean(old_logp - logp): how far the update moved from the sampling policy (cleanrl old_approx_kl).",
    "kl/k3_old": "mean((r - 1) - log r), a non-negative estimate of the same drift (cleanrl approx_kl).",
    "clip/region": "Fraction of tokens where PPO's clipped branch is active (clip/low + clip/high); 0 on the "
                   "first minibatch after a rollout since r = 1 there.",
    "clip/high": "Fraction of tokens with A > 0 and r > 1 + eps_high (update stopped from pushing further up).",
    "clip/low": "Fraction of tokens with A < 0 and r < 1 - eps_low.",
    "clip/out_of_band": "Fraction of tokens with r outside [1 - eps_low, 1 + eps_high], whatever the sign of A.",
    "clip/dual": "Fraction of tokens where the dual-clip cap -c A is active.",
    "ratio/mean": "Mean importance ratio pi/pi_old over valid tokens (1 when on-policy).",
    "ratio/max": "Largest token ratio in the batch: spikes flag unstable updates.",
    "loss/policy": "Policy objective value (aggregated), averaged over minibatches.",
    "loss/total": "Total loss optimized: policy + KL + entropy + value terms.",
    "value/loss": "Clipped value loss of the critic (PPO only).",
    "value/clipfrac": "Fraction of tokens where the clipped value branch is larger (PPO only).",
    "value/mean": "Mean predicted value V(s_t) (PPO only).",
    "value/explained_var": "1 - Var(R - V)/Var(R): how much of the return variance the critic explains.",
    "grad_norm": "Global gradient norm before clipping, averaged over optimizer steps.",
    "response_length/mean": "Mean number of policy tokens per response (including EOS).",
    "response_length/max": "Longest response in the batch.",
    "truncated_frac": "Share of responses that hit max_new_tokens without EOS.",
    "sampling/rounds": "Dynamic sampling (DAPO): generation rounds needed to collect informative groups.",
    "sampling/shortfall_groups": "Dynamic sampling: informative groups still missing after the last round.",
    "filtered_frac/min-abs-advantage": "Share of rollouts dropped for a near-zero advantage (LOOP's |A| < 0.01 filter).",
    "filtered_frac/overlong-filter": "Share of rollouts masked out because they were truncated (no EOS in the budget).",
    "filtered_frac/high-entropy-mask": "Share of rollouts left with no token after keeping only the high-entropy ones.",
    "mdpo/kl": "MDPO: mean per-token KL(pi || pi_old) estimate (k2) inside the loss.",
    "mdpo/inv_t": "MDPO: the KL weight 1/t_k at this step (grows over training).",
    "mdpo/surrogate": "MDPO: mean r * A, the unclipped surrogate being maximised.",
    "clip/cispo": "CISPO: fraction of tokens with A > 0 whose IS weight hit the cap (their weight is truncated).",
    "cispo/weight_mean": "CISPO: mean stop-gradient IS weight min(r, cap) over valid tokens.",
    "sapo/gate_weight": "SAPO: mean soft-gate derivative 4 s(1 - s), 1 on-policy, smaller where PPO would clip.",
    "sapo/gate_value": "SAPO: mean gate value f_tau(r) (1 on-policy).",
    "geo/seq_ratio_mean": "GMPO: mean geometric-mean sequence ratio of the log-space-clipped token ratios.",
    "kl/abs_old": "Mean |logp - old_logp|: drift from the sampling policy, sign ignored.",
    "tis/mean_weight": "TIS: mean truncated/masked importance weight exp(old - mu) applied to the loss.",
    "tis/masked_frac": "TIS: fraction of valid tokens whose weight was masked to 0.",
    "mismatch/abs_logp_diff_max": "Largest |old_logp - mu_logp|: rollout-engine vs trainer log-prob mismatch.",
    "mismatch/logp_abs_mean": "Mean |old_logp - mu_logp| over response tokens: trainer vs rollout-engine log-prob "
                              "gap (~1e-7 with HF generate; larger with vLLM or stale engine weights).",
    "mismatch/logp_abs_max": "Largest |old_logp - mu_logp| over the rollout batch's response tokens.",
    "mismatch/is_ratio_mean": "Mean importance ratio exp(old_logp - mu_logp) over response tokens (1 = no mismatch).",
    "mismatch/is_ratio_max": "Largest exp(old_logp - mu_logp) in the batch: what TIS's cap truncates.",
    "clip_cov/detached": "Clip-Cov: number of tokens whose gradient was detached this minibatch.",
    "clip_cov/detached_frac": "Clip-Cov: fraction of valid tokens detached (high covariance band, random subset).",
    "clip_cov/candidate_frac": "Clip-Cov: fraction of valid tokens inside the covariance band (candidates).",
    "kl_cov/penalized": "KL-Cov: number of top-covariance tokens given the |logp - old| penalty.",
    "kl_cov/penalized_frac": "KL-Cov: fraction of valid tokens penalized.",
    "minirl/w_mean": "MiniRL: mean IS weight pi_theta / mu_old.",
    "minirl/masked_frac": "MiniRL: fraction of tokens masked for staleness past the clip bound.",
    "pairs": "Preference recipes: pairs trained on this step (online: prompts whose samples the verifier separated).",
    "loss/preference": "Preference objective value on the step's pairs.",
    "rewards/chosen": "Mean implicit reward beta * (log pi - log ref) of the chosen responses (TRL name).",
    "rewards/rejected": "Mean implicit reward of the rejected responses; it often falls, and so can chosen's.",
    "rewards/margins": "Mean chosen - rejected implicit reward: grows as the policy separates the pair.",
    "rewards/accuracies": "Share of pairs whose chosen implicit reward exceeds the rejected one.",
    "logps/chosen": "Mean summed log-prob of the chosen responses under the policy.",
    "logps/rejected": "Mean summed log-prob of the rejected responses under the policy.",
    "logps/chosen_avg": "SimPO: mean per-token (length-averaged) log-prob of the chosen responses.",
    "logps/rejected_avg": "SimPO: mean per-token log-prob of the rejected responses.",
    "dpo/weight": "DPO: mean sigma(-beta * margin), each pair's gradient weight; falls as pairs are learned.",
    "cdpo/weight": "cDPO: mean gradient weight after label smoothing (never reaches 0).",
    "ipo/margin": "IPO: mean log-ratio margin being regressed.",
    "ipo/target": "IPO: the regression target 1/(2 beta).",
    "hinge/active": "Hinge: share of pairs still inside the margin (the only ones with gradient).",
    "simpo/margin": "SimPO: mean length-normalized reward margin minus gamma.",
    "simpo/gamma": "SimPO: the target reward margin gamma in use.",
    "kto/desirable_frac": "KTO: share of desirable (chosen) completions in the batch.",
    "sppo/target_chosen": "SPPO: mean regression target eta * (win rate - 1/2) of the chosen responses.",
    "sppo/target_rejected": "SPPO: mean regression target of the rejected responses (negative when they lose).",
    "p3o/advantage_abs": "P3O: mean |reward difference| (KL-regularized) driving each pair's gradient.",
    "p3o/kl": "P3O: mean sequence KL term beta * (log pi_old - log pi_sft) folded into the reward.",
    "refuel/reward_gap": "REFUEL: mean reward difference of the pairs being regressed onto.",
    "refuel/sign_align": "REFUEL: share of pairs whose log-ratio margin has the sign of the reward gap.",
    "inpo/h": "INPO: mean log-ratio margin h_t against the mixture of the reference and the previous iterate.",
    "inpo/target": "INPO: the regression target 1/(2 eta) that h_t is pulled towards.",
    "nash_mp/h": "Nash-MP: mean log-ratio margin against the mixture of the reference and the prox centre.",
    "nash_mp/target": "Nash-MP: the regression target eta / (2 (1 + eta beta)).",
    "apo/ref_shift": "APO: mean |log pi~_t - log pi^_t|, how far momentum moved the reference (0 = iterative DPO).",
    "brain/alpha_ess": "BRAIn: effective sample size 1/sum(alpha^2) of the posterior weights over the K samples.",
    "brain/alpha_max": "BRAIn: mean largest posterior weight (1 = all mass on one sample, 1/K = uniform).",
    "spo/reward_mean": "SPO: mean win-rate reward of the samples (exactly 1/2 for an antisymmetric judge).",
    "spo/reward_std": "SPO: spread of the win-rate rewards (0 when every group's samples tie).",
    "spo/antisymmetry_gap": "SPO: largest |P(i > j) + P(j > i) - 1| of the judge (0 for a consistent judge).",
    "spo/aux_loss": "SPO-prefdeg: the preference-degree ranking loss over the degraded copies (before lambda).",
    "spo/degree_accuracy": "SPO-prefdeg: share of (less, more degraded) copy pairs the implicit reward orders right.",
    "mcts/label_smoothing": "MCTS-DPO: mean label smoothing of the step pairs (0 = plain DPO on the steps).",
    "dapo_step/log_ratio": "Direct-Advantage-PO: mean beta * log(pi/pi_ref) of the steps, regressed onto A(s, a).",
    "dapo_step/advantage": "Direct-Advantage-PO: mean Monte Carlo advantage V(s+a) - V(s) of the steps.",
    "dapo_step/sign_agreement": "Direct-Advantage-PO: share of steps (A != 0) whose log-ratio has the sign of A.",
    "lipo/ndcg": "LiPO: NDCG of the policy's implicit-reward ranking against the verifier's ranking (1 = perfect).",
    "lipo/pair_accuracy": "LiPO: share of ordered pairs in the lists whose implicit rewards are in the right order.",
    "lipo/pairs_per_list": "LiPO: ordered (non-tied) pairs per list that carry a loss term.",
    "nonfinite/skipped": "Updates dropped this step for a NaN/inf loss or gradient norm (only with nonfinite=skip); "
                         "healthy runs stay at 0.",
    "eval/accuracy": "Greedy accuracy on the held-out set (only on evaluation steps).",
    "time/step": "Wall-clock seconds for the whole step.",
    "time/rollout": "Seconds spent generating (rollout) in the step.",
    "time/train": "Seconds spent in forward/backward/optimizer in the step.",
    "tokens_per_s/rollout": "Response tokens generated per second of rollout time.",
    "tokens_per_s/train": "Response tokens trained on per second of training time (all epochs).",
}


def clean(value):
    """JSON-safe float: NaN/inf become None so rows stay valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsError(ValueError):
    """metrics.jsonl holds something resuming would have to drop."""


TENSORBOARD_INSTALL = "pip install tensorboard (or pip install -e '.[tensorboard]')"


class TensorBoardMissing(ModuleNotFoundError):
    """report_to="tensorboard" without the tensorboard package."""


def summary_writer_class():
    """`torch.utils.tensorboard.SummaryWriter`, or TensorBoardMissing naming the install command."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:  # torch.utils.tensorboard imports the tensorboard package
        raise TensorBoardMissing(f"report_to='tensorboard' needs the tensorboard package ({err}); install it: "
                                 f"{TENSORBOARD_INSTALL}") from None
    return SummaryWriter


class TensorBoardLog:
    """The rows of a MetricsLog as TensorBoard scalars (offline event files in `folder`): one scalar per numeric
    metric at step row["step"]; None, NaN/inf, text and flags are skipped. The writer (and its event file) is
    created at the first row, so a process that never logs (a data-parallel rank other than 0) writes nothing."""

    def __init__(self, folder: str | Path):
        self.folder, self.writer_class, self.writer = Path(folder), summary_writer_class(), None
        self.purge_step: int | None = None

    def append(self, row: dict) -> None:
        if self.writer is None:
            # purge_step: TensorBoard hides the events at or after it in earlier event files (steps recomputed
            # after a resume); the rows logged again here are the ones shown
            self.writer = self.writer_class(log_dir=str(self.folder), purge_step=self.purge_step)
        step = row["step"]
        for key, value in row.items():
            value = clean(value)
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()  # as metrics.jsonl: a crash loses no logged row

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class MetricsLog:
    """Append-only `metrics.jsonl`; each row is flushed so a crash loses nothing already logged. With
    `tensorboard` (a folder), every row also goes to TensorBoard event files there (`TensorBoardLog`)."""

    def __init__(self, path: str | Path, tensorboard: str | Path | None = None):
        self.path = Path(path)
        self.tensorboard = TensorBoardLog(tensorboard) if tensorboard is not None else None

    def append(self, row: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({k: clean(v) for k, v in row.items()}) + "\n")
            f.flush()
        if self.tensorboard is not None:
            self.tensorboard.append(row)

    def close(self) -> None:
        """Close the TensorBoard writer (metrics.jsonl is closed after every row)."""
        if self.tensorboard is not None:
            self.tensorboard.close()

    def truncate(self, before_step: int) -> None:
        """Keep only rows with step < before_step (steps after the last checkpoint are recomputed). A torn last
        line (a write cut by a kill) is dropped with a warning; any other damage is refused (`resumable_rows`)."""
        if self.tensorboard is not None and self.tensorboard.writer is None:
            self.tensorboard.purge_step = before_step
        if not self.path.exists():
            return
        rows = [r for r in resumable_rows(self.path) if r["step"] < before_step]
        write_atomic(self.path, "".join(json.dumps(r) + "\n" for r in rows))


def run_log(out: str | Path, config) -> MetricsLog:
    """A trainer's log: RUN/metrics.jsonl, and RUN/tensorboard/ when config.report_to == "tensorboard" (checked
    here, when the trainer is built: a missing package is an error before anything is trained)."""
    out = Path(out)
    board = out / "tensorboard" if getattr(config, "report_to", "none") == "tensorboard" else None
    return MetricsLog(out / "metrics.jsonl", tensorboard=board)


def parse_row(line: str) -> dict:
    row = json.loads(line)
    if not isinstance(row, dict) or not isinstance(row.get("step"), int):
        raise ValueError("not a metrics row (a JSON object with an integer step)")
    return row


def resumable_rows(path: str | Path, warn: bool = True) -> list[dict]:
    """Every row of a metrics.jsonl, or a MetricsError naming the first bad line when one is not the last.

    Only the last line can be torn by an interrupted append; a bad line before others is damage (a disk error,
    a hand edit), and dropping the rows after it would lose them silently."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(parse_row(line))
        except ValueError as err:  # JSONDecodeError is a ValueError
            if number == len(lines):
                if warn:
                    print(f"warning: {path}: dropped a torn last line {number} ({line[:60]!r}): an interrupted write",
                          file=sys.stderr)
                break
            raise MetricsError(
                f"{path}:{number}: not a metrics row ({err}); {len(lines) - number} lines follow it, and resuming "
                f"would have to drop them. Repair or delete line {number} (the rows after it are kept), then run "
                f"the same command again") from None
    return rows


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a metrics.jsonl for reading (reports, comparisons): lines that do not parse are skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rows.append(parse_row(line))
        except ValueError:
            continue
    return rows
