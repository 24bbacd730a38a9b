"""mteb task metadata for ``pipelines.export.mteb_results``: the package data file ``mteb_tasks.json`` beside this
module, generated from the installed mteb by ``tools/mteb_tasks.py`` (``make mteb-tasks``). Kept as data so the export
needs neither mteb nor torch; ``tests/test_mteb_export.py`` fails when the file is not what the generator writes from
the installed mteb.

Per task (``TASKS``): type, main_score, eval_splits, the dataset revision, hf_subset → languages (``xxx-Scrp``) and
num_samples (split → hf_subset → samples, from mteb's descriptive statistics).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

DATA_FILE = "mteb_tasks.json"


def _load() -> dict[str, Any]:
    """The data file as shipped with the package (read through ``importlib.resources``: a wheel or a zip works too)."""
    return json.loads(resources.files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8"))


_DATA = _load()
MTEB_VERSION: str = _DATA["mteb_version"]
MTEB_TASK_NAMES: tuple[str, ...] = tuple(_DATA["task_names"])
TASKS: dict[str, dict[str, Any]] = _DATA["tasks"]
