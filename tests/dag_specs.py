"""What enters every cache key of a configuration's DAG, except the upstream content hashes: per node its stage, code
version, canonical config (hashed), upstream node names and external input files. Two DAGs with equal specs give equal
cache keys on equal inputs, node by node, because a key is ``hash(stage, version, config, input hashes)`` and the input
hashes chain through the same upstream nodes and files.

``tests/test_dag_specs.py`` compares ``build_dag`` with the snapshots in ``tests/fixtures/dag_specs/`` for
``configs/default.yaml`` and every ``configs/examples/*.yaml``: a refactor of ``flows/`` must leave them unchanged. A
deliberate change (a stage version bump, a new setting) rewrites them with

    .venv/bin/python -m tests.dag_specs --write

and the diff of the JSON files shows exactly which nodes' keys moved.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SNAPSHOTS = REPO / "tests" / "fixtures" / "dag_specs"
CONFIGS = [REPO / "configs" / "default.yaml", *sorted((REPO / "configs" / "examples").glob("*.yaml"))]


def _where(path: Path) -> str:
    """A file input's path relative to the checkout's parent (the checkout and ``../shared`` sit side by side), so the
    snapshot holds on any machine."""
    path = Path(path).resolve()  # ../shared may be a symbolic link: compare real paths
    shared = (REPO.parent / "shared").resolve()
    packages = [(Path(p).resolve(), "<site-packages>") for p in {sysconfig.get_path("purelib"),
                                                                 sysconfig.get_path("platlib")}]
    for base, name in (*packages, (REPO.resolve(), "<repo>"), (shared, "<parent>/shared"),
                       (REPO.parent.resolve(), "<parent>")):
        if path.is_relative_to(base):
            return f"{name}/{path.relative_to(base).as_posix()}"
    return str(path)


def dag_specs(config: Path) -> dict[str, Any]:
    from flows.config import load_config
    from flows.dag import build_dag
    from warehouse.hashing import hash_obj

    cfg = load_config(config, data_root=Path("/nonexistent/polysent-data-root"))
    return {name: {"stage": n.stage, "version": n.version, "config": hash_obj(n.config),
                   "deps": dict(sorted(n.deps.items())), "files": {k: _where(p) for k, p in sorted(n.files.items())}}
            for name, n in sorted(build_dag(cfg).items())}


def snapshot_path(config: Path) -> Path:
    return SNAPSHOTS / f"{config.stem}.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the snapshots from the current code")
    args = ap.parse_args()
    for config in CONFIGS:
        specs = json.dumps(dag_specs(config), indent=1, sort_keys=True) + "\n"
        path = snapshot_path(config)
        if args.write:
            SNAPSHOTS.mkdir(parents=True, exist_ok=True)
            path.write_text(specs, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)} ({len(json.loads(specs))} nodes)")
        else:
            same = path.exists() and path.read_text(encoding="utf-8") == specs
            print(f"{config.name}: {'unchanged' if same else 'CHANGED'}")


if __name__ == "__main__":
    main()
