"""The data and anchors behind the remaining F7 recipes: previous-iterate models (INPO, Nash-MP, APO), degraded
copies (SPO-prefdeg), K-sample lists (BRAIn), Monte Carlo step values (MCTS-DPO, Direct-Advantage-PO)."""
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import resumes_exactly
from workbench.models import build_tiny
from workbench.rollout.engine import encode_responses
from workbench.tasks import get_task
from workbench.tasks.base import Example
from workbench.tasks.preferences import DIGITS, degraded_lists, task_pairs
from workbench.tasks.steps import advantage_steps, prefix_values, sibling_pairs, split_steps
from workbench.train import make_config, make_trainer
from workbench.train.metrics import read_rows
from workbench.train.preference import list_logps

PREF = dict(task="addition", steps=6, prompts_per_step=8, pairs=32, sft_steps=60, eval_size=16,
            checkpoint_every=3, lr=1e-3, max_new_tokens=5, group_size=6)


class ScriptedEngine:
    """generate() continues `prompt` with `script(prompt, j)` for the j-th sample: deterministic values."""

    def __init__(self, script, max_len=99):
        self.script, self.max_len, self.calls = script, max_len, []

    def generate(self, prompts, *, n=1, max_new_tokens=16, temperature=1.0, top_p=1.0):
        self.calls.append((list(prompts), n, max_new_tokens))
        full = [self.script(p, j) for p in prompts for j in range(n)]
        texts = [t[:max_new_tokens] for t in full]
        return SimpleNamespace(texts=texts, truncated=torch.tensor([len(t) > max_new_tokens for t in full]))


def anchors(trainer):
    fresh = make_trainer(trainer.config, trainer.out / "fresh", progress=False).setup()
    same = lambda a, b: all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))  # noqa: E731
    return fresh, same


# ------------------------------------------------------------------ previous-iterate anchors


@pytest.mark.covers("inpo", "nash-mp")
@pytest.mark.parametrize("recipe", ["inpo", "nash-mp"])
def test_inpo_and_nash_mp_move_the_previous_iterate_and_keep_the_reference(recipe, tmp_path):
    config = make_config("smoke", recipe=recipe, **PREF)
    trainer = make_trainer(config, tmp_path / "run", progress=False)
    trainer.run()
    fresh, same = anchors(trainer)
    assert same(trainer.ref, fresh.ref)            # pi_ref stays the warm start
    assert not same(trainer.prev, fresh.prev)      # pi_t became the policy at step 5
    assert sum(r["pairs"] for r in read_rows(tmp_path / "run" / "metrics.jsonl")) > 0


@pytest.mark.covers("apo-accelerated")
def test_apo_momentum_shifts_reference_and_keeps_the_iterate_before(tmp_path):
    config = make_config("smoke", recipe="apo-accelerated", **PREF)
    trainer = make_trainer(config, tmp_path / "run", progress=False)
    trainer.run()
    fresh, same = anchors(trainer)
    assert same(trainer.prev, fresh.ref)           # pi^_{t-1}: the warm start (the reference before step 5)
    assert not same(trainer.ref, fresh.ref)        # pi^_t: the policy at step 5
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    shifts = {r["step"]: r["apo/ref_shift"] for r in rows if "apo/ref_shift" in r}
    assert all(abs(shifts[s]) < 1e-5 for s in shifts if s < 5)  # first iteration: pi^_{t-1} = pi^_t, no momentum


def test_inpo_resumes_exactly_across_an_iteration_boundary(tmp_path):
    config = make_config("smoke", recipe="inpo", **PREF)
    assert resumes_exactly(config, tmp_path, stop_after_step=3)


def test_a_prev_input_without_a_previous_model_is_a_clear_error(tmp_path, monkeypatch):
    import dataclasses

    from workbench import recipes

    broken = dataclasses.replace(recipes.RECIPES["inpo"], iteration_update="ref")
    monkeypatch.setitem(recipes.RECIPES, "inpo", broken)
    with pytest.raises(ValueError, match="keeps no previous model"):
        make_trainer(make_config("smoke", recipe="inpo", **{**PREF, "steps": 1}), tmp_path, progress=False).run()


# ------------------------------------------------------------------ degraded copies, lists


@pytest.mark.covers("spo-prefdeg")
def test_degraded_copies_drop_nested_growing_shares_of_the_digits():
    pairs = task_pairs(get_task("countdown"), 20, seed=1)
    for (prompt, responses), pair in zip(degraded_lists(pairs, (1 / 3, 2 / 3), seed=0), pairs):
        chosen, light, heavy, rejected = responses
        assert (prompt, chosen, rejected) == (pair.prompt, pair.chosen, pair.rejected)
        digits = lambda s: sum(ch in DIGITS for ch in s)  # noqa: E731
        n = digits(chosen)
        assert digits(light) == n - round(n / 3) and digits(heavy) == n - round(2 * n / 3)
        strip = lambda s: "".join(ch for ch in s if ch not in DIGITS)  # noqa: E731
        assert strip(light) == strip(heavy) == strip(chosen)  # only key content is removed


@pytest.mark.covers("spo-prefdeg", "brain")
@pytest.mark.parametrize("recipe,k", [("spo-prefdeg", 4), ("brain", 4)])
def test_list_recipes_feed_k_responses_per_prompt(recipe, k, tmp_path):
    config = make_config("smoke", recipe=recipe, **{**PREF, "steps": 2})
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    items, _ = trainer.step_items(0)
    assert all(len(r) == k for r in items.responses)
    rows = read_rows(tmp_path / "metrics.jsonl")
    key = "spo/degree_accuracy" if recipe == "spo-prefdeg" else "brain/alpha_ess"
    assert all(key in r for r in rows)
    if recipe == "brain":
        assert items.inputs["list_rewards"].shape == (len(items), k)
        assert all(1.0 <= r["brain/alpha_ess"] <= k for r in rows)


# ------------------------------------------------------------------ partial steps


def test_a_partial_step_is_scored_without_eos():
    model, tok = build_tiny(seed=0)
    full, _ = list_logps(model, tok, ["12+3="], [["15"]])
    partial, n = list_logps(model, tok, ["12+3="], [["15"]], ends=[[False]])
    eos_only, _ = list_logps(model, tok, ["12+3=15"], [[""]])
    assert n.item() == 2
    assert torch.allclose(full - partial, eos_only, atol=1e-5)  # log p(15 EOS) = log p(15) + log p(EOS | 15)
    with pytest.raises(ValueError, match="empty partial response"):
        encode_responses(tok, [""], eos=[False])


# ------------------------------------------------------------------ Monte Carlo step values


def test_split_steps_and_prefix_values():
    assert split_steps("12345", 2) == ["12", "34", "5"] and split_steps("", 3) == [""]
    with pytest.raises(ValueError, match="step_chars"):
        split_steps("1", 0)
    task, e = get_task("addition"), Example("1+2=", "3", "3")
    # from "" the scripted policy answers "3" on even samples and "4" on odd ones: V = 1/2
    engine = ScriptedEngine(lambda prompt, j: "3" if j % 2 == 0 else "4")
    assert prefix_values(engine, task, [(e, ""), (e, "")], k=4, max_new_tokens=5) == [0.5, 0.5]


@pytest.mark.covers("direct-advantage-po")
def test_step_advantages_telescope_to_the_final_score_minus_the_start_value():
    task = get_task("addition")
    examples = [Example("12+30=", "42", "42"), Example("11+11=", "22", "22")]
    answers = {"12+30=": "4213", "11+11=": "22"}  # the first sample answers wrong (4213), the second right

    def script(prompt, j):
        for p, a in answers.items():
            if prompt.startswith(p):
                done = prompt[len(p):]
                return a[len(done):] if j == 0 else (a if p == "11+11=" else "42")[len(done):]
        raise AssertionError(prompt)

    items = advantage_steps(ScriptedEngine(script), task, examples, step_chars=2, k=2, max_new_tokens=8)
    by_example = [[i for i in items if i.prompt.startswith(e.prompt)] for e in examples]
    for e, steps in zip(examples, by_example):
        assert "".join(s.step for s in steps) == answers[e.prompt]
        assert [s.final for s in steps] == [False] * (len(steps) - 1) + [True]
        assert all(s.prompt == e.prompt + "".join(t.step for t in steps[:i]) for i, s in enumerate(steps))
    # V("") = mean of {own sample, alternative}; A sums to score - V("")
    wrong, right = by_example
    assert sum(s.advantage for s in wrong) == pytest.approx(0.0 - 0.5)   # V("") = (0 + 1)/2
    assert sum(s.advantage for s in right) == pytest.approx(1.0 - 1.0)
    assert wrong[-1].advantage == pytest.approx(0.0 - 0.5)  # "42" then "13": the last step ruins the answer


@pytest.mark.covers("mcts-dpo")
def test_sibling_pairs_prefer_the_higher_value_next_step():
    task, e = get_task("addition"), Example("12+30=", "42", "42")
    # the first sample is "42"; children from the cut state: "4" (then "2": value 1) or "5" (value 0)
    def script(prompt, j):
        done = prompt[len(e.prompt):]
        if done == "":
            return "42" if j == 0 else ("4" if j % 2 == 0 else "5") + "2"
        return {"4": "2", "5": "2"}.get(done, "")

    cut_at_start = SimpleNamespace(randrange=lambda n: 0)
    pairs = sibling_pairs(ScriptedEngine(script), task, [e], cut_at_start, step_chars=1, children=4, k=2,
                          max_new_tokens=4)
    assert len(pairs) == 1
    prompt, chosen, rejected, chosen_final, rejected_final, q_w, q_l = pairs[0]
    assert prompt == e.prompt and (chosen, rejected) == ("4", "5") and not chosen_final and not rejected_final
    assert (q_w, q_l) == (1.0, 0.0)


@pytest.mark.covers("mcts-dpo", "direct-advantage-po")
@pytest.mark.parametrize("recipe", ["mcts-dpo", "direct-advantage-po"])
def test_step_level_recipes_train_on_partial_steps(recipe, tmp_path):
    config = make_config("smoke", recipe=recipe, **{**PREF, "steps": 2, "pairs": 8})
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    if recipe == "direct-advantage-po":
        items = trainer.items
        assert (tmp_path / "items.json").exists() and trainer.ref_cache.shape == (len(items), 1)
        assert any(not end[0] for end in items.ends)  # partial steps are scored without EOS
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 2 and all(r.get("grad_norm", 0) >= 0 for r in rows)


# ------------------------------------------------------------------ RL recipes with preference components


@pytest.mark.covers("spo-minimax")
def test_preferences_from_scores_give_rank_win_rates():
    from workbench.preference.selfplay import preferences_from_scores, spo_minimax

    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    P = preferences_from_scores(scores)
    assert torch.equal(P + P.transpose(-1, -2), torch.ones_like(P))  # a consistent judge
    rewards, _ = spo_minimax(P)
    # a correct sample beats the two wrong ones and ties the other correct one: (1 + 1 + 1/2) / 3
    assert torch.allclose(rewards[0], torch.tensor([5 / 6, 1 / 6, 1 / 6, 5 / 6], dtype=rewards.dtype))
    assert torch.allclose(rewards[1], torch.full((4,), 0.5, dtype=rewards.dtype))


@pytest.mark.covers("spo-minimax")
def test_spo_recipe_trains_on_win_rates(tmp_path):
    config = make_config("smoke", recipe="spo-minimax", **{**PREF, "steps": 2, "group_size": 4})
    trainer = make_trainer(config, tmp_path, progress=False).setup()
    batch = trainer.make_batch(0)
    assert torch.allclose(batch.rewards.view(-1, 4).mean(-1), torch.full((8,), 0.5, dtype=batch.rewards.dtype))
    wins = batch.rewards.view(-1, 4)
    scores = batch.scores.view(-1, 4)
    assert all(wins[g, i] > wins[g, j] for g in range(8) for i in range(4) for j in range(4)
               if scores[g, i] > scores[g, j])  # the reward orders the samples as the verifier does
    trainer.run()
    assert all(r["spo/reward_mean"] == pytest.approx(0.5) for r in read_rows(tmp_path / "metrics.jsonl"))


@pytest.mark.covers("salsa")
def test_salsa_starts_at_and_stays_anchored_to_the_soup_of_two_sft_runs(tmp_path):
    import dataclasses

    from workbench.models import load_model
    from workbench.train.sft import warm_start

    config = make_config("smoke", recipe="salsa", **{**PREF, "steps": 2})
    trainer = make_trainer(config, tmp_path, progress=False).setup()
    sft = [load_model(str(warm_start(dataclasses.replace(config, seed=s), trainer.task, progress=False)),
                      seed=s)[0].state_dict() for s in (0, 1)]
    for name, p in trainer.model.state_dict().items():
        assert torch.allclose(p, (sft[0][name] + sft[1][name]) / 2, atol=1e-6), name
        assert torch.equal(p, trainer.ref.state_dict()[name])
    assert not torch.equal(sft[0]["lm_head.weight"], sft[1]["lm_head.weight"])  # two different SFT runs
    trainer.run()
    assert read_rows(tmp_path / "metrics.jsonl")[0]["kl"] == pytest.approx(0.0, abs=1e-6)
