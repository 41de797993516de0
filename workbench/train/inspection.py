"""What a run's samplers and buffers hold: `workbench inspect RUN` and the notebooks' view of a run folder.

Reads a kept checkpoint's `pipeline.pt` (the components' state, without the model): each replay buffer's entries
(age, reward, source prompt), each prompt pool's pass rate per prompt over the steps and the prompts it chose at each
step. Other components' state is named by its type.
"""
from __future__ import annotations

from pathlib import Path

from workbench.buffers.replay import ReplayBuffer
from workbench.samplers.pool import PoolState
from workbench.train.checkpoint import (PIPELINE_FILE, checkpoint_dir, kept_checkpoints, load_checkpoint,
                                       load_pipeline_state)


def pipeline_state(run: Path, step: int | None = None) -> tuple[int, dict]:
    """(step, {component: state}) of the newest kept checkpoint of `run`, or of the one at `step`."""
    kept = kept_checkpoints(run)
    if not kept:
        raise FileNotFoundError(f"{run} has no kept checkpoint (checkpoints/step_*/state.pt): not a run folder, or it "
                                "has not reached its first checkpoint yet")
    path = kept[-1] if step is None else checkpoint_dir(run, step)
    if path not in kept:
        raise ValueError(f"{run} keeps no checkpoint at step {step}; kept: "
                         f"{', '.join(str(int(p.name.split('_')[1])) for p in kept)}")
    if (path / PIPELINE_FILE).exists():
        return int(path.name.split("_")[1]), load_pipeline_state(path)
    return int(path.name.split("_")[1]), load_checkpoint(path).get("pipeline", {})  # before pipeline.pt existed


def pool_view(pool: PoolState) -> dict:
    """A prompt pool: its settings, each prompt's pass rates [(step, rate)] and the ids chosen per step."""
    return {"type": "prompt pool", "size": pool.size, "order": pool.order, "epoch": pool.epoch, "steps": pool.steps,
            "prompts": [{"id": i, "prompt": str(e.prompt), "pass_rates": [list(x) for x in pool.pass_rates.get(i, [])]}
                        for i, e in enumerate(pool.examples)],
            "chosen": [[s, list(ids)] for s, ids in pool.chosen]}


def component_view(state, step: int) -> dict:
    """A component's state as `inspect` shows it: a pool, a buffer (also one kept inside a dict), or its type."""
    if isinstance(state, PoolState):
        return pool_view(state)
    if isinstance(state, ReplayBuffer):
        return {"type": "replay buffer", **state.summary(step)}
    if isinstance(state, dict) and any(isinstance(v, (ReplayBuffer, PoolState)) for v in state.values()):
        return {name: component_view(v, step) for name, v in state.items()}
    return {"type": type(state).__name__}


def inspect_run(run: str | Path, step: int | None = None) -> dict:
    """{"step": the checkpoint's step, "components": {"slot:key": view}} of a run folder."""
    at, states = pipeline_state(Path(run), step)
    return {"run": str(run), "step": at, "components": {name: component_view(s, at) for name, s in states.items()}}


def format_inspection(info: dict, rows: int = 10) -> str:
    """The text `workbench inspect` prints: per buffer its bounds and newest `rows` entries, per pool its prompts
    with their latest pass rates and its last `rows` choices."""
    lines = [f"{info['run']}: components at checkpoint step {info['step']}"]
    for name, view in info["components"].items():
        lines += describe(name, view, rows)
    return "\n".join(lines)


def describe(name: str, view: dict, rows: int) -> list[str]:
    kind = view.get("type")
    if kind == "replay buffer":
        out = [f"\n{name}: replay buffer, {view['size']} rows of {view['prompts']} prompts (capacity "
               f"{view['capacity']}, per prompt {view['per_key']}, max age {view['max_age']}); added "
               f"{view['added']}, evicted {view['evicted']}", f"  {'age':>5} {'step':>5} {'reward':>7}  prompt"]
        out += [f"  {e['age']:>5} {e['step']:>5} {e['reward']:>7.3f}  {e['prompt'][:60]!r}"
                for e in view["entries"][-rows:]]
        return out
    if kind == "prompt pool":
        seen = [p for p in view["prompts"] if p["pass_rates"]]
        out = [f"\n{name}: prompt pool of {view['size']} ({view['order']} order, epoch {view['epoch']}, "
               f"{view['steps']} steps seen; {len(seen)} prompts trained on)",
               f"  {'id':>4} {'times':>5} {'last':>6} {'mean':>6}  prompt"]
        for p in sorted(seen, key=lambda p: -len(p["pass_rates"]))[:rows]:
            rates = [r for _, r in p["pass_rates"]]
            out.append(f"  {p['id']:>4} {len(rates):>5} {rates[-1]:>6.2f} {sum(rates) / len(rates):>6.2f}  "
                       f"{p['prompt'][:60]!r}")
        out += [f"  chose at step {s}: {ids}" for s, ids in view["chosen"][-rows:]]
        return out
    if kind is None:  # a dict holding buffers or pools
        return [line for sub, v in view.items() for line in describe(f"{name}.{sub}", v, rows)]
    return [f"\n{name}: {kind}"]

