"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)` (every module
here registers at import; `registry` imports them all)."""
