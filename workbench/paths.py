"""Where the package finds its shipped data (catalog, held-out evaluation sets) and its cache."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"


def data_file(*parts: str) -> Path:
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"shipped data file {path} is missing: workbench expects a source checkout "
            "(pip install -e .) with its data/ folder next to the package"
        )
    return path


def cache_dir() -> Path:
    """Cache for derived artifacts (SFT warm-starts); override with WORKBENCH_CACHE."""
    path = Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench"))
    path.mkdir(parents=True, exist_ok=True)
    return path
