"""Every package of workbench imports first, on its own, in a fresh interpreter: an import cycle only shows when the
cycle's entry point is imported before anything else (a notebook's first `from workbench.regularizers...`)."""
import pkgutil
import subprocess
import sys

import pytest

import workbench

PACKAGES = sorted(m.name for m in pkgutil.iter_modules(workbench.__path__, "workbench.") if m.ispkg)


def test_the_packages_are_found():
    assert {"workbench.rewards", "workbench.regularizers", "workbench.advantages", "workbench.train"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_first_in_a_fresh_interpreter(package):
    proc = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
