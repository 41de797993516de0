"""Start-up time of the command line: each command in a fresh interpreter, as a user runs it (a table, not a test).

    python bench/bench_cli.py [--repeats 3]

Every command runs `repeats` times as `python -m workbench.cli ...` in a new process (so the imports it pulls in
are paid each time, as they are at a prompt); the table gives the median, min and max wall-clock seconds and the
modules it imported (torch or not). Targets: `--help` under 1 s, `list` under 3 s; `show` imports the registry
(every component, with torch) and the claims, so it is not fast, only measured.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = (["--help"], ["list"], ["list", "--kind", "recipe"], ["list", "--missing"], ["show", "grpoo"],
            ["show", "ppo-clip"])
IMPORTS_TORCH = ("import sys\nfrom workbench import cli\ntry:\n    cli.main(sys.argv[1:])\n"
                 "except SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)")


def wall_seconds(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "workbench.cli", *argv], capture_output=True)
    return time.perf_counter() - t0


def imports_torch(argv: list[str]) -> bool:
    proc = subprocess.run([sys.executable, "-c", IMPORTS_TORCH, *argv], capture_output=True, text=True)
    return proc.stderr.strip().splitlines()[-1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; {args.repeats} fresh processes per command")
    print(f"| {'command':32s} | median s | min s | max s | imports torch |")
    print(f"|{'-' * 34}|----------|-------|-------|---------------|")
    for argv in COMMANDS:
        seconds = [wall_seconds(argv) for _ in range(args.repeats)]
        print(f"| {'workbench ' + ' '.join(argv):32s} | {statistics.median(seconds):8.2f} | {min(seconds):5.2f} | "
              f"{max(seconds):5.2f} | {'yes' if imports_torch(argv) else 'no':13s} |", flush=True)


if __name__ == "__main__":
    main()
