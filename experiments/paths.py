"""Where experiments read and write: the repository, the shared data, and the ignored working folders."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = Path(os.environ.get("POLYSENT_EXPERIMENTS_DIR", REPO / "experiments"))  # the questions and ledgers
SHARED = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))
WORK = Path(os.environ.get("POLYSENT_EXPERIMENTS_WORK", REPO / "data" / "experiments"))
KITS = WORK / "kits"  # prepared tables (``experiments.kits``), carried to a GPU machine
RUNS = WORK / "runs"  # a run's model and scores while it is in flight (deleted once its row is written)
