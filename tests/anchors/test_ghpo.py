"""GHPO against the authors' trainer (transcribed in formulas_ghpo.py): the same groups re-sampled at the same stages
with the same hint text, the same samples and rewards kept; the one difference is the prompt a group solved at an
earlier stage trains under."""
import pytest

from tests.anchors.formulas_ghpo import generate_and_score, hint_prompt
from tests.transforms.test_ghpo import EXAMPLES, G, HINT, NEEDED, SOLUTION, HintWorld, context, first_batch
from workbench.tasks.guidance import GHPO_TEMPLATE
from workbench.transforms.ghpo import ghpo

pytestmark = pytest.mark.covers("ghpo")


def reference(world: HintWorld):
    """The transcription on the same batch, its `sample` drawing from the same world."""
    batch = first_batch()
    inputs = [{"prompt": e.prompt, "solution_hint": SOLUTION} for e in EXAMPLES for _ in range(G)]
    calls = []

    def sample(inputs_redo):
        calls.append(len(calls))
        prompts = [x["prompt"] for x in inputs_redo]
        scores = [float(world.solves(p) and i % G == 0) for i, p in enumerate(prompts)]
        return [f"h{len(calls)}/{i // G}/{i % G}" for i in range(len(prompts))], scores

    return generate_and_score(inputs, list(batch.completions), batch.scores.tolist(), G, sample)


def test_the_hint_sentence_is_the_references():
    assert GHPO_TEMPLATE.format(prompt="P", hint="H") == "P" + hint_prompt + "H" and HINT == hint_prompt


def test_same_groups_same_hints_same_samples_as_the_reference():
    prompts, completions, accuracy, redone = reference(HintWorld(NEEDED))
    world = HintWorld(NEEDED)
    out = ghpo(first_batch(), context(world))
    assert redone == [list(range(G, 5 * G)), list(range(2 * G, 5 * G)), list(range(3 * G, 5 * G))]
    assert [len(call) * G for call in world.calls] == [len(rows) for rows in redone]
    assert out.completions == completions and out.scores.tolist() == accuracy
    # the difference (REFERENCES-AGENTS.md): the reference re-encodes every prompt at each stage that re-samples, so
    # q1 and q2, solved at 25 % and 50 %, train under their plain prompt there and under their hinted one here
    for g, q in enumerate(NEEDED):
        ours, theirs = out.prompts[g * G], prompts[g * G]
        assert (ours == theirs) == (q not in ("q1", "q2")), q
        assert theirs.split(hint_prompt)[0] == ours.split(hint_prompt)[0] == q
