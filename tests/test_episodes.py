"""Episodes replayed exactly: the seed is the same in every process, and replay rebuilds a recorded state."""
import subprocess
import sys

import pytest

from workbench.episodes import episode_seed, replay
from workbench.tasks import Example, get_task

EX = Example("Bov?", "Zar|Mip>Kel,Bov>Kel,Kel>Zar,Dut>Lon,Lon>Zar", "A:Zar")


def test_the_seed_is_fixed_by_the_example_and_the_index_in_every_process():
    here = [episode_seed(EX, i) for i in range(4)]
    code = ("from workbench.episodes import episode_seed; from workbench.tasks import Example; "
            f"print([episode_seed(Example(*{(EX.prompt, EX.answer, EX.target)!r}), i) for i in range(4)])")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert fresh.strip() == str(here)  # unlike hash(), which Python salts per process
    assert len(set(here)) == 4 and all(0 <= s < 2 ** 32 for s in here)
    assert episode_seed(Example("Bov?", "Zar|Bov>Zar", "A:Zar"), 0) != here[0]


def test_replay_reaches_the_recorded_state_and_refuses_actions_after_the_end():
    task = get_task("search", hops=2)
    env = replay(task, EX, episode_seed(EX, 0), ["[Bov]", "[Kel]"])
    assert env.searched == {"Bov", "Kel"} and env.step("A:Zar")[1:3] == (1.0, True)
    with pytest.raises(ValueError, match="action 0 .'A:Zar'. ends the episode but 1 follow"):
        replay(task, EX, 0, ["A:Zar", "[Bov]"])
