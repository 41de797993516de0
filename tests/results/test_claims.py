"""The claims table: verdicts computed from stored runs by the stated rule."""
import json

from workbench import registry
from workbench.results.claims import CLAIMS, Claim, claims_table, verdict


def stored(after: dict[str, list[float]], before=0.3, entropy=None):
    """A loaded comparison: (meta, recipe -> rows per seed, summaries)."""
    summaries = [{"recipe": r, "seed": i, "accuracy_before": before, "accuracy_after": a}
                 for r, xs in after.items() for i, a in enumerate(xs)]
    groups = {r: [[{"step": s, "entropy": (entropy or {}).get(r, 1.0)} for s in range(5)] for _ in xs]
              for r, xs in after.items()}
    return {}, groups, summaries


def test_the_verdict_follows_the_rule():
    claim = Claim("dapo", "higher", "f1")
    assert verdict(claim, stored({"dapo": [0.5, 0.52, 0.48], "grpo": [0.3, 0.32, 0.28]}))[1] == "reproduced"
    assert verdict(claim, stored({"dapo": [0.3, 0.32, 0.28], "grpo": [0.5, 0.52, 0.48]}))[1] == "contradicted"
    noisy = stored({"dapo": [0.41, 0.3, 0.5], "grpo": [0.4, 0.3, 0.45]})
    assert verdict(claim, noisy)[1] == "no difference beyond seed noise"
    assert verdict(Claim("dapo", "no worse", "f1", direction=0), noisy)[1] == "reproduced (no worse)"
    # paired by seed: a consistent gain is reproduced even when the seeds' own spread is larger than it ...
    assert verdict(claim, stored({"dapo": [0.45, 0.65, 0.85], "grpo": [0.4, 0.6, 0.8]}))[1] == "reproduced"
    # ... but never on a difference below the noise floor (1 or 2 held-out prompts)
    assert verdict(claim, stored({"dapo": [0.405, 0.605], "grpo": [0.4, 0.6]}))[1] == "no difference beyond seed noise"
    lower = Claim("dapo", "lower entropy", "f1", metric="final:entropy", direction=-1)
    seen, said = verdict(lower, stored({"dapo": [0.4, 0.4], "grpo": [0.4, 0.4]}, entropy={"dapo": 0.2, "grpo": 0.5}))
    assert said == "reproduced" and seen.startswith("entropy: 0.200 ± 0.000 vs grpo 0.500")
    assert verdict(Claim("grpo", "improves", "f1", baseline="before"), stored({"grpo": [0.5, 0.52]}))[1] == "reproduced"
    assert verdict(Claim("ppo", "x", why_not="too short"), None)[1] == "not testable here: too short"
    assert verdict(claim, None)[1].startswith("not run yet: make stored-runs")


def test_every_claim_names_a_recipe_and_a_comparison_or_a_reason():
    recipes = {e.key for e in registry.entries("recipe")}
    for c in CLAIMS:
        assert c.key in recipes, c.key
        assert bool(c.comparison) != bool(c.why_not), c
        assert c.direction in (-1, 0, 1) and c.claim.strip()


def test_the_table_reads_the_stored_data(tmp_path):
    lines = [{"meta": {"name": "f1-countdown"}}]
    lines += [{"summary": {"recipe": r, "seed": i, "accuracy_before": 0.3, "accuracy_after": a}}
              for r, xs in {"grpo": [0.4, 0.41, 0.39], "dapo": [0.6, 0.61, 0.59]}.items() for i, a in enumerate(xs)]
    (tmp_path / "f1-countdown.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = {(r["recipe"], r["claim"][:20]): r for r in claims_table(tmp_path)}
    dapo = next(r for (key, _), r in rows.items() if key == "dapo" and r["seen"].startswith("accuracy"))
    assert dapo["verdict"] == "reproduced" and "0.600 ± 0.010 vs grpo 0.400 ± 0.010 (3 seeds)" in dapo["seen"]
