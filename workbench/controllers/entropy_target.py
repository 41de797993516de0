"""Entropy targeting through the sampling temperature: the switch DCPO and AEPO-arbitrary share.

    T   = T_high if H <= H_target else T_low     H: the previous step's mean policy entropy
    gap = H_target - H                           DCPO's alpha uses |gap|; AEPO halves its sample count when gap < 0

Both references (597358816/DCPO and 597358816/AEPO, the same `verl/trainer/ray_trainer.py`) test
`entropy <= entropy_base`, with `entropy` the previous update's logged actor entropy, 0 before the first one.
One controller class is registered under both keys; it drives a whole component (`into="kind:key"`) and sets
those of {temperature, entropy_gap} that the component takes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from workbench import registry
from workbench.advantages.aepo import AEPO_TITLE
from workbench.advantages.dcpo import DCPO_TITLE

DRIVES = ("temperature", "entropy_gap")  # what the controller can set on the component it drives
SWITCH = r"T = \begin{cases} T_{high} & H \le H_{target} \\ T_{low} & H > H_{target} \end{cases}"


def target_temperature(entropy: float, *, entropy_base: float, t_high: float, t_low: float) -> float:
    """T_high while the entropy is at or below the target (raise it), T_low above (lower it)."""
    return t_high if entropy <= entropy_base else t_low


def check_switch(*, entropy_base: float, t_high: float, t_low: float) -> None:
    if not (math.isfinite(entropy_base) and entropy_base >= 0):
        raise ValueError(f"entropy_base must be a finite entropy >= 0 (nats), got {entropy_base}")
    if not 0 < t_low <= t_high < math.inf:
        raise ValueError(f"need 0 < t_low <= t_high (finite temperatures), got t_low={t_low}, t_high={t_high}")


@dataclass(frozen=True)
class EntropyTargetState:
    entropy: float        # H seen after the last step (`initial_entropy` before the first)
    entropy_base: float   # H_target
    t_high: float
    t_low: float
    params: tuple         # the driven component's parameters this controller sets, a subset of DRIVES

    @property
    def temperature(self) -> float:
        return target_temperature(self.entropy, entropy_base=self.entropy_base, t_high=self.t_high, t_low=self.t_low)

    @property
    def entropy_gap(self) -> float:
        return self.entropy_base - self.entropy


# What the pipeline logs of the parameters each controller drives, `<target>.<param>` (`Pipeline.driven_metrics`), for
# the recipes' targets.
DCPO_DRIVEN_LOGS = {
    "reward_shaping:dcpo.temperature": ("DCPO: target temperature T the old policy re-scores the batch at (1.2 at or "
                                        "below the entropy target H_0, 0.8 above).",
                                        "A step function of the entropy: 1.2 while it is at or below H_0, 0.8 above. "
                                        "Stuck at one value all run: entropy never reaches the target (at 1.2) or "
                                        "never comes down to it (at 0.8)."),
    "advantage:dcpo.entropy_gap": ("DCPO: H_0 - H, the entropy target minus the last step's entropy; alpha = a/(1+a), "
                                   "a = min(|gap|, 0.1) / dcpo/correct_frac.",
                                   "Shrinks in size as the entropy settles and then changes sign around 0. Growing "
                                   "in size: the control loses and entropy runs away from H_0."),
}


AEPO_DRIVEN_LOGS = {
    "group_transform:aepo-arbitrary.temperature": ("AEPO: temperature the re-sampled prompts are drawn at (1.2 at or "
                                                   "below the entropy target, 0.8 above).",
                                                   "A step function of the entropy, as DCPO's: 1.2 at or below the "
                                                   "target, 0.8 above. Stuck at one value: the target is out of "
                                                   "reach."),
    "group_transform:aepo-arbitrary.entropy_gap": ("AEPO: entropy target minus the last step's entropy; below 0 "
                                                   "(entropy above the target) halves the rows replaced.",
                                                   "Oscillates around 0 once the entropy is controlled. A gap "
                                                   "growing in size: too few replaced rows to steer the entropy."),
}


@registry.controller(
    "dcpo", title=DCPO_TITLE, reads=("entropy",),
    summary="Target temperature from the last entropy: 1.2 at or below H_0, 0.8 above; drives DCPO's scoring "
            "temperature and the entropy gap H_0 - H of its advantage weight.",
    equation=SWITCH + r",\quad \Delta H = H_0 - H", logs=DCPO_DRIVEN_LOGS)
@registry.controller(
    "aepo-arbitrary", title=AEPO_TITLE, reads=("entropy",),
    summary="Temperature switch on the last entropy (T_high at or below H_target, T_low above) for AEPO's "
            "re-sampling; the sign of H_target - H halves the number of replaced samples above the target.",
    equation=SWITCH, logs=AEPO_DRIVEN_LOGS)
class EntropyTarget:
    """State: the last entropy and the switch's constants. Defaults: H_target = `entropy_base` = 0.5, T_high = 1.2,
    T_low = 0.8 (AEPO `verl/trainer/config.py` TrainerConfig and both example scripts; DCPO hard-codes 1.2 / 0.8
    and reads the same `entropy_base`; the papers' best targets are 0.75 for AEPO and 0.25 for DCPO, pass them as
    `entropy_base`). `initial_entropy` = 0.0 is the references' `entropy = 0` before the first
    update, so step 0 samples hot.

    Our reading: H is the step row's `entropy`, the mean full-vocabulary entropy of the policy on its own samples.
    The references use the update's `actor/entropy_loss`, -mean log pi(y_t) of the sampled tokens, an estimator
    with the same expectation. The switch is `<=` as in the code (the AEPO README writes `<`; they differ only at
    H = H_target exactly).
    """

    @staticmethod
    def init(*, initial, entropy_base=0.5, t_high=1.2, t_low=0.8, initial_entropy=0.0):
        check_switch(entropy_base=entropy_base, t_high=t_high, t_low=t_low)
        if not isinstance(initial, dict):
            raise ValueError("the entropy-target controller drives a whole component (into='kind:key') and sets "
                             f"those of {list(DRIVES)} it takes; got into a single parameter")
        params = tuple(p for p in DRIVES if p in initial)
        if not params:
            raise ValueError(f"the component driven by the entropy-target controller takes none of {list(DRIVES)}; "
                             f"its parameters: {sorted(initial)}")
        if not math.isfinite(initial_entropy):
            raise ValueError(f"initial_entropy must be finite, got {initial_entropy}")
        return EntropyTargetState(float(initial_entropy), float(entropy_base), float(t_high), float(t_low), params)

    @staticmethod
    def update(state, batch, metrics):
        entropy = metrics.get("entropy")
        if entropy is None or not math.isfinite(entropy):
            raise ValueError(f"the entropy-target controller needs the step's finite mean entropy, got {entropy}")
        return replace(state, entropy=float(entropy))

    @staticmethod
    def value(state):
        return {p: getattr(state, p) for p in state.params}
