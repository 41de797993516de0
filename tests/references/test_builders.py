"""References that move: the anchors of iterated preference methods follow the policy every `every` steps."""
import pytest
import torch

from workbench import registry
from workbench.references.builders import iteration_ends


def models(*values):
    out = []
    for v in values:
        m = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.constant_(m.weight, v)
        out.append(m)
    return out


def weight(m) -> float:
    return m.weight.item()


def moves(key, anchors, policy, steps, every=3):
    entry = registry.get("reference", key)
    for step in range(steps):
        entry.moves(anchors, policy, step, every=every)


def test_an_iteration_ends_after_every_k_steps():
    assert [s for s in range(10) if iteration_ends(s, 3)] == [2, 5, 8]
    with pytest.raises(ValueError, match="every >= 1"):
        iteration_ends(0, 0)


@pytest.mark.covers("sppo")
def test_iterate_moves_the_reference_to_the_policy_at_each_iteration_end():
    ref, policy = models(0.0, 1.0)
    moves("iterate", {"ref": ref}, policy, steps=2)
    assert weight(ref) == 0.0  # mid-iteration: still the start
    moves("iterate", {"ref": ref}, policy, steps=3)
    assert weight(ref) == 1.0 and registry.get("reference", "iterate").keeps == ("ref",)


@pytest.mark.covers("inpo", "nash-mp")
def test_previous_iterate_moves_prev_and_leaves_the_reference():
    ref, prev, policy = models(0.0, 0.0, 2.0)
    moves("previous-iterate", {"prev": prev}, policy, steps=3)
    assert weight(prev) == 2.0 and weight(ref) == 0.0
    assert registry.get("reference", "previous-iterate").keeps == ("prev",)


@pytest.mark.covers("apo-accelerated")
def test_momentum_keeps_the_reference_before_as_prev():
    ref, prev, policy = models(0.5, 0.0, 2.0)
    moves("momentum", {"ref": ref, "prev": prev}, policy, steps=3)
    assert weight(prev) == 0.5 and weight(ref) == 2.0  # pi_hat_{t-1} <- pi_ref <- pi
    policy.weight.data.fill_(3.0)
    moves("momentum", {"ref": ref, "prev": prev}, policy, steps=3)
    assert weight(prev) == 2.0 and weight(ref) == 3.0


def test_a_fixed_reference_moves_nothing():
    assert registry.get("reference", "sft").moves is None and registry.get("reference", "sft").keeps == ()
    with pytest.raises(ValueError, match="moves and keeps a reference's"):
        registry.register("objective", "probe-moves", title="t", summary="s", moves=lambda *a: None)


@pytest.mark.parametrize("every", [0, -1, 2.5, "5"])
def test_an_impossible_iteration_length_is_refused_when_the_recipe_is_checked(every):
    import dataclasses

    from workbench.recipes import get_recipe, use
    from workbench.train.pipeline import Pipeline

    for key in ("iterate", "previous-iterate", "momentum"):
        with pytest.raises(ValueError, match=r"every must be an int >= 1|every=.* needs a whole number"):
            Pipeline(dataclasses.replace(get_recipe("sppo"), reference=use(key, every=every)))
