"""PrefixRL: groups continue a prefix of the solution whose tokens are context only (mask 0), the prefix length is
chosen by running pass rates, and a run without prefixes is the plain rollout."""
import random

import pytest
import torch

from tests.helpers import TINY, metric_rows, resumes_exactly
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.context import StepContext
from workbench.models import char_tokenizer
from workbench.rollout import Sampling, turns
from workbench.rollout.prefixrl import PassRates, choose_fraction, prefixrl
from workbench.rollout.turns import Given, episode_batch, play
from workbench.tasks import get_task
from workbench.tasks.guidance import solution_prefix
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("prefixrl")


def ctx(step=0, state=None):
    return StepContext(step=step, total_steps=10, seed=0, group_size=2, prompts_per_step=4, max_new_tokens=8,
                       state=PassRates() if state is None else state, component="rollout:prefixrl")


def test_registered_with_the_catalogs_reading():
    entry = registry.get("rollout", "prefixrl")
    assert entry.defaults == {"grid": (0.25, 0.5, 0.75), "unprefixed": 0.5, "decay": 0.9}
    assert entry.needs == ("solution",) and entry.state is PassRates


@pytest.mark.parametrize("actions, fraction, whole, partial", [
    (["46"], 0.5, (), "4"), (["46"], 1.0, (), "46"), (["46"], 0.0, (), ""),
    (["[2*39]", "[54+94]", "A:22"], 0.5, ("[2*39]",), "[5"), (["ab", "cd"], 1.0, ("ab",), "cd"),
])
def test_a_prefix_is_whole_actions_then_the_start_of_the_next(actions, fraction, whole, partial):
    assert solution_prefix(actions, fraction) == (whole, partial)
    assert len("".join(whole) + partial) == round(fraction * len("".join(actions)))


def test_without_prefixes_it_is_the_plain_rollout(engine):
    """Catalog (1): h = 0 for every group is base RL (the same samples under the same seed)."""
    task = get_task("addition")
    examples = task.sample(3, random.Random(0))
    torch.manual_seed(4)
    ours = prefixrl(engine, task, examples, group_size=4, sampling=Sampling(6), ctx=ctx(), unprefixed=1.0)
    torch.manual_seed(4)
    plain = turns(engine, task, examples, group_size=4, sampling=Sampling(6))
    assert torch.equal(ours.response_ids, plain.response_ids) and torch.equal(ours.mask, plain.mask)


def test_prefix_tokens_are_context_and_the_environment_scores_the_whole_answer():
    """Catalog (2): the prefix's tokens are in every prefixed row with mask 0; the policy's continuation is masked
    in; the verifier reads prefix + continuation."""
    tok = char_tokenizer()
    task = get_task("addition")
    example = task.sample(1, random.Random(3))[0]
    prefix = example.target[:2]
    engine = ScriptedEngine(tok, lambda history: example.target[2:] + "<eos>")  # continues the answer correctly
    played = play(engine, task, [example], group_size=2, sampling=Sampling(8), given=[Given((), prefix)] * 2)
    batch = episode_batch(played, 2, tok.pad_token_id)
    ids = tok(prefix, add_special_tokens=False)["input_ids"]
    n = len(ids)
    assert batch.response_ids[:, :n].tolist() == [ids, ids] and batch.mask[:, :n].sum() == 0
    assert batch.mask[0, n:].sum() == len(example.target) - 2 + 1  # the continuation and EOS
    assert batch.completions == [example.target] * 2 and batch.rewards.tolist() == [1.0, 1.0]
    assert batch.turn[0, :n].tolist() == [0] * n  # the prefix belongs to the step it starts


def test_a_multi_turn_prefix_replays_whole_actions_through_the_environment(engine):
    task = get_task("calculator")
    example = task.eval_set(1)[0]
    actions = task.expert_actions(example)
    played = play(engine, task, [example], group_size=1, sampling=Sampling(8),
                  given=[Given(tuple(actions[:2]), actions[2][:2])])
    episode = played.episodes[0]
    assert episode.completion.startswith(actions[0]) and actions[1] in episode.completion
    assert [info["action"] for info in episode.info[:2]] == actions[:2]  # the env was stepped with them
    given = episode.completion.index(actions[2][:2]) + 2  # characters up to the end of the given partial action
    assert "".join(episode.pieces)[:given].endswith(actions[2][:2])
    first_sampled = episode.mask.index(1.0)
    assert all(m == 0 for m in episode.mask[:first_sampled]) and episode.turn[first_sampled] == 2


def test_pass_rate_grows_with_the_prefix_on_the_toy():
    """Catalog (3): a policy that only ends its answer passes exactly when the prefix holds the whole answer, so the
    pass rate is non-decreasing in h."""
    tok = char_tokenizer()
    task = get_task("addition")
    examples = task.sample(20, random.Random(5))
    engine = ScriptedEngine(tok, lambda history: "<eos>")
    rates = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        given = [Given(*solution_prefix([e.target], fraction)) if fraction else Given() for e in examples]
        batch = episode_batch(play(engine, task, examples, group_size=1, sampling=Sampling(8), given=given), 1,
                              tok.pad_token_id)
        rates.append(float(batch.rewards.mean()))
    assert rates == sorted(rates) and rates[0] == 0.0 and rates[-1] == 1.0


def test_fractions_are_chosen_inside_the_band_or_nearest_one_half():
    rates = PassRates({0.25: 0.0, 0.5: 0.3, 0.75: 0.9})
    assert {choose_fraction(rates, (0.25, 0.5, 0.75), random.Random(s)) for s in range(20)} == {0.5}
    rates = PassRates({0.25: 0.0, 0.5: 0.1, 0.75: 0.85})
    assert choose_fraction(rates, (0.25, 0.5, 0.75), random.Random(0)) == 0.75  # |0.85 - 0.5| < |0.1 - 0.5|
    assert PassRates().of(0.5) == 0.5  # unseen: inside the band
    moving = PassRates()
    moving.update(0.5, 1.0, decay=0.9)
    assert moving.of(0.5) == pytest.approx(0.55)


def test_half_the_groups_are_prefixed_and_the_rates_move(engine):
    task = get_task("addition")
    c = ctx()
    batch = prefixrl(engine, task, task.sample(4, random.Random(1)), group_size=2, sampling=Sampling(6), ctx=c)
    assert c.metrics["prefixrl/prefixed_groups"] == 0.5 and batch.size == 8
    assert set(c.state.rate) <= {0.25, 0.5, 0.75} and c.state.rate
    greedy = prefixrl(engine, task, task.sample(2, random.Random(1)), group_size=1, sampling=Sampling(6, greedy=True),
                      ctx=ctx())
    assert (greedy.mask[:, 0] == 1).all()  # evaluation is never prefixed


@pytest.mark.parametrize("kw, match", [
    (dict(grid=(0.0, 0.5)), r"distinct prefix fractions in \(0, 1\]"), (dict(grid=(0.5, 1.5)), r"in \[0, 1\]"),
    (dict(unprefixed=2.0), "unprefixed=2.0"), (dict(decay=1.0), "decay=1.0"),
])
def test_bad_settings_are_refused_before_training(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="prefixrl", **{**TINY, "recipe_overrides": {"rollout": kw}}),
                tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_and_resumes_exactly_with_its_pass_rates(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="prefixrl", **TINY), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert all(r["prefixrl/prefixed_groups"] == 0.5 for r in rows)
