"""The stage order is written once (`workbench.stages`): the registry, the recipes, the pipeline and the trainer's
loop read it from there."""
from workbench import registry, stages
from workbench.recipes import SLOTS
from workbench.recipes.base import Recipe
from workbench.train import make_config
from workbench.train.pipeline import BEFORE_UPDATE
from workbench.train.trainer import Trainer


def test_the_registry_kinds_and_signatures_follow_the_stage_table():
    assert list(registry.SIGNATURES) == [k.kind for k in stages.KINDS] == list(registry.KINDS)
    assert all(registry.SIGNATURES[k.kind] == k.signature for k in stages.KINDS)


def test_recipe_slots_are_the_kinds_that_have_one_in_pipeline_order():
    assert SLOTS == {k.slot: k.kind for k in stages.KINDS if k.slot}
    assert set(SLOTS) <= {f.name for f in Recipe.__dataclass_fields__.values()}
    assert {slot for stage in stages.STAGES for slot in stage.slots} | {"schedules"} == set(SLOTS)


def test_the_stages_before_the_update_are_what_the_trainer_runs_in_that_order(tmp_path):
    assert stages.BATCH_STAGES == ("sampler", "rollout", "rewards", "group_transforms", "forward passes",
                                   "reward_shaping", "advantage", "token_masks")
    assert stages.SAMPLING_STAGES == ("sampler", "rollout", "rewards")
    trainer = Trainer(make_config("smoke", recipe="grpo", task="addition"), tmp_path, progress=False)
    assert set(trainer.stage_runners()) == set(stages.BATCH_STAGES)  # a runner per stage, each run in the table's order
    assert BEFORE_UPDATE == ["sampler", "rollout", "rewards", "group_transforms", "reward_shaping", "advantage",
                             "token_masks"]


def test_token_masks_run_after_the_advantage_and_loss_weights_in_the_update():
    names = [s.name for s in stages.STAGES]
    assert names.index("advantage") < names.index("token_masks") < names.index("update")
    update = next(s for s in stages.STAGES if s.name == "update")
    assert update.slots == ("loss_weights", "objective", "regularizers", "value")


def test_the_book_catalog_shows_the_kinds_in_the_order_they_run():
    from workbench.book.catalog_page import KIND_TITLES

    assert list(KIND_TITLES) == list(registry.KINDS) and KIND_TITLES["loss_weight"] == "Loss weights"
