"""Run settings that add or swap components: rollout_is adds the rollout-is loss weight, pairs sizes an offline
preference data source, data_path swaps the task's pairs for a file's."""
import pytest

from workbench.recipes import get_recipe, with_overrides
from workbench.recipes.run_settings import with_preference_data, with_rollout_correction


@pytest.mark.covers("tis")
def test_the_run_setting_adds_it_to_any_recipe_or_refuses_a_double_correction():
    grpo = with_rollout_correction(get_recipe("grpo"), "token_mask", cap=1.1, low=0.9)
    assert [(u.key, u.kw) for u in grpo.loss_weights] == [("rollout-is", {"mode": "token_mask", "cap": 1.1,
                                                                           "low": 0.9})]
    assert with_rollout_correction(get_recipe("grpo"), "none", cap=2.0, low=None) == get_recipe("grpo")
    with pytest.raises(ValueError, match="would correct twice: objective 'minirl'"):
        with_rollout_correction(get_recipe("minirl"), "token_truncate", cap=2.0, low=None)


def test_pairs_sizes_an_offline_source_and_data_path_swaps_in_the_files_pairs():
    dpo = with_preference_data(get_recipe("dpo"), pairs=24, data_path="")
    assert (dpo.rollout.key, dpo.rollout.kw) == ("task-pairs", {"pairs": 24})
    from_file = with_preference_data(get_recipe("dpo"), pairs=24, data_path="my_pairs.jsonl")
    assert (from_file.rollout.key, from_file.rollout.kw) == ("file-pairs", {"path": "my_pairs.jsonl"})
    online = get_recipe("online-dpo")
    assert with_preference_data(online, pairs=24, data_path="") == online  # samples its pairs: no size to set
    with pytest.raises(ValueError, match=r"data_path='p.jsonl' gives preference pairs, but recipe 'online-dpo' "
                                         r"samples with rollout 'sampled-pairs', which reads none"):
        with_preference_data(online, pairs=24, data_path="p.jsonl")
    with pytest.raises(ValueError, match="which reads none"):
        with_preference_data(get_recipe("grpo"), pairs=24, data_path="p.jsonl")
    overridden = with_overrides(get_recipe("lipo"), {"rollout": {"pairs": 8}})  # the run's pairs would replace it
    with pytest.raises(ValueError, match=r"pairs=8 through recipe_overrides is not used: .* --set pairs=N"):
        with_preference_data(overridden, pairs=24, data_path="")
