"""The preference objective: ranked rows of a batch -> the registered preference loss on its declared layout."""
import pytest
import torch

from workbench import registry
from workbench.objectives.preference import check_preference, preference, preference_reads

# 3 items x K = 2 rows, 4 tokens each, lengths 4 3 2 4 1 3
LENGTHS = torch.tensor([4, 3, 2, 4, 1, 3])
MASK = (torch.arange(4)[None, :] < LENGTHS[:, None]).float()
GROUP = torch.tensor([0, 0, 1, 1, 2, 2])

pytestmark = pytest.mark.covers("preference")


def token_logps(seed: int) -> torch.Tensor:
    return -torch.rand(6, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * MASK


def sums(x: torch.Tensor) -> torch.Tensor:
    return (x * MASK).sum(-1).view(3, 2)


def run(loss, inputs=(), logp=None, **kw):
    logp = token_logps(0) if logp is None else logp
    return preference(logp, None, None, MASK, loss=loss, inputs=inputs, group=GROUP, ref_logp=token_logps(1), **kw)


@pytest.mark.covers("dpo")
def test_a_pair_loss_sees_the_first_row_as_chosen_and_the_last_as_rejected():
    value, metrics = run("dpo", beta=0.3)
    s, r = sums(token_logps(0)), sums(token_logps(1))
    expected, _ = registry.get("preference", "dpo").fn(s[:, 0], s[:, 1], r[:, 0], r[:, 1], beta=0.3)
    assert torch.equal(value, expected) and metrics["loss/preference"] == value.item()


def test_the_gradient_reaches_every_token_of_both_rows():
    logp = token_logps(0).requires_grad_(True)
    value, _ = run("dpo", logp=logp)
    value.backward()
    assert torch.equal(logp.grad != 0, MASK.bool())  # every response token, nothing past a row's end


@pytest.mark.covers("simpo")
def test_inputs_are_taken_from_the_rows_chosen_first_rejected_last():
    value, _ = run("simpo", inputs=("chosen_len", "rejected_len"), beta=2.0)
    s = sums(token_logps(0))
    lengths = LENGTHS.view(3, 2).double()
    expected, _ = registry.get("preference", "simpo").fn(s[:, 0], s[:, 1], chosen_len=lengths[:, 0],
                                                         rejected_len=lengths[:, 1], beta=2.0)
    assert torch.equal(value, expected)


def test_a_renamed_input_reads_its_source_field():
    prev = token_logps(2)
    value, _ = preference(token_logps(0), None, None, MASK, loss="apo-accelerated", group=GROUP,
                          ref_logp=token_logps(1), prev_logp=prev, alpha=0.3,
                          inputs=("prev_ref_chosen_logp=prev_chosen_logp", "prev_ref_rejected_logp=prev_rejected_logp"))
    s, r, p = sums(token_logps(0)), sums(token_logps(1)), sums(prev)
    expected, _ = registry.get("preference", "apo-accelerated").fn(
        s[:, 0], s[:, 1], r[:, 0], r[:, 1], alpha=0.3, prev_ref_chosen_logp=p[:, 0], prev_ref_rejected_logp=p[:, 1])
    assert torch.equal(value, expected)


@pytest.mark.covers("lipo")
def test_a_list_loss_takes_the_whole_ranked_list():
    group = torch.tensor([0, 0, 0, 1, 1, 1])  # 2 lists of K = 3
    value, _ = preference(token_logps(0), None, None, MASK, loss="lipo", group=group, ref_logp=token_logps(1))
    s, r = (token_logps(0) * MASK).sum(-1).view(2, 3), (token_logps(1) * MASK).sum(-1).view(2, 3)
    expected, _ = registry.get("preference", "lipo").fn(s, None, r, None)
    assert torch.equal(value, expected)


@pytest.mark.covers("direct-advantage-po")
def test_a_one_response_loss_takes_each_row_with_its_step_advantage():
    group, adv = torch.arange(6), torch.linspace(-1, 1, 6)
    value, _ = preference(token_logps(0), None, None, MASK, loss="direct-advantage-po", group=group,
                          ref_logp=token_logps(1), step_advantage=adv, inputs=("advantages",))
    s, r = (token_logps(0) * MASK).sum(-1), (token_logps(1) * MASK).sum(-1)
    expected, _ = registry.get("preference", "direct-advantage-po").fn(s, r, advantages=adv)
    assert torch.equal(value, expected)


def test_its_reads_follow_its_inputs():
    assert preference_reads() == ("ref_logp", "group")
    assert preference_reads(inputs=("chosen_winrate", "rejected_winrate", "chosen_len")) == (
        "ref_logp", "group", "winrate")
    assert preference_reads(inputs=("prev_chosen_logp",)) == ("ref_logp", "group", "prev_logp")


def test_bad_parameters_are_refused_naming_what_exists():
    with pytest.raises(ValueError, match=r"loss='dpx' is no registered preference loss \(did you mean 'dpo'\?\)"):
        check_preference(loss="dpx")
    with pytest.raises(ValueError, match=r"takes no \['bta'\]"):
        check_preference(loss="dpo", bta=1)
    with pytest.raises(ValueError, match=r"\['winrates'\] are not known sources"):
        check_preference(loss="sppo", inputs=("chosen_winrate=winrates",))
    with pytest.raises(ValueError, match="same number of responses per item"):
        preference(token_logps(0), None, None, MASK, loss="dpo", group=torch.tensor([0, 0, 0, 1, 1, 2]),
                   ref_logp=token_logps(1))


def test_the_loss_own_checks_run_when_the_recipe_is_built():
    """The loss is called with stand-ins for its log-probs and its inputs: what it refuses before reading them (a
    setting, an input it needs and the recipe does not give) is refused here, as are its `check`'s refusals."""
    rewards = ("chosen_reward", "rejected_reward")
    check_preference(loss="refuel", inputs=rewards, eta=2.0)
    with pytest.raises(ValueError, match=r"eta must be > 0, got 0"):
        check_preference(loss="refuel", inputs=rewards, eta=0.0)
    with pytest.raises(ValueError, match=r"refuel needs chosen_reward and rejected_reward"):
        check_preference(loss="refuel")
    with pytest.raises(ValueError, match=r"the IPO loss takes no label smoothing, got label_smoothing=0.1"):
        check_preference(loss="mcts-dpo", loss_type="ipo", label_smoothing=0.1)


def test_it_is_registered_as_an_objective_that_minibatches_whole_items():
    entry = registry.get("objective", "preference")
    assert entry.whole_groups and entry.coefficients == {"kl_coef": "beta"} and entry.check is check_preference
    layouts = {e.key: e.layout for e in registry.entries("preference")}
    assert layouts["lipo"] == layouts["brain"] == "list" and layouts["direct-advantage-po"] == "one"
    assert layouts["dpo"] == "pair" and set(layouts.values()) <= set(registry.LAYOUTS)
