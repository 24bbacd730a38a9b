"""Regenerate ``pipelines/export/mteb_tasks.json`` (the mteb task metadata ``polysent export-results`` needs) from the
installed mteb: ``make mteb-tasks``, or ``.venv/bin/python tools/mteb_tasks.py [--tasks Tatoeba BUCC …]``.

Per task: type, main_score, eval_splits, the dataset revision, hf_subset → languages (``xxx-Scrp``) and num_samples
(split → hf_subset → samples, from mteb's descriptive statistics). The tasks are the file's own ``task_names`` unless
``--tasks`` names others. ``tests/test_mteb_export.py`` fails when the file is not what this script writes from the
installed mteb (and skips where mteb is not installed: it is in the dev extra).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA_FILE = REPO / "pipelines" / "export" / "mteb_tasks.json"


def mteb_task_table(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Name → type, main score, evaluation splits, dataset revision, hf_subset → languages and the number of samples
    per split and subset (mteb's descriptive statistics), from the installed mteb."""
    import mteb

    table = {}
    for name in names:
        meta = mteb.get_task(name).metadata
        stats = meta.descriptive_stats or {}
        samples: dict[str, dict[str, int]] = {}
        for split in meta.eval_splits:
            s = stats.get(split) or {}
            per = s.get("hf_subset_descriptive_stats")
            samples[split] = ({k: v["num_samples"] for k, v in per.items()} if per
                              else {"default": s["num_samples"]} if "num_samples" in s else {})
        table[name] = {"type": meta.type, "main_score": meta.main_score, "eval_splits": list(meta.eval_splits),
                       "revision": meta.revision, "languages": dict(meta.hf_subsets_to_langscripts),
                       "num_samples": samples}
    return table


def render(names: Sequence[str], version: str | None = None) -> str:
    """The file's text for ``names`` from the installed mteb (``version``: the installed mteb's, by default)."""
    version = version or importlib.metadata.version("mteb")
    doc = {"generated_by": "tools/mteb_tasks.py", "mteb_version": version, "task_names": list(names),
           "tasks": mteb_task_table(names)}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def current_names(path: Path = DATA_FILE) -> list[str]:
    """The task names the file lists now."""
    return list(json.loads(path.read_text(encoding="utf-8"))["task_names"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=None, help="mteb task names (default: the file's own)")
    parser.add_argument("--out", type=Path, default=DATA_FILE, help=f"default: {DATA_FILE.relative_to(REPO)}")
    args = parser.parse_args(argv)
    try:
        import mteb  # noqa: F401
    except ImportError:
        print("tools/mteb_tasks.py needs mteb (the dev extra: pip install -e '.[dev]')", file=sys.stderr)
        return 2
    names = args.tasks or current_names(args.out if args.out.is_file() else DATA_FILE)
    text = render(names)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(names)} task(s), mteb {importlib.metadata.version('mteb')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
