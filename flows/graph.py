"""The DAG as plain data: the ``Node`` every stage builder returns, and what turns settings into cache-key material.

This module sits under every other module of ``flows/`` that knows nodes (``flows/stages/*`` build them, ``flows/dag``
lists the stages, ``flows/nodes`` executes them) and imports none of them, so the package has no import cycle
(``tests/test_flows_structure.py``). It is not ``flows/nodes.py``: that one *executes* nodes under the cache contract.

A node's ``run`` is a picklable callable — a top-level function bound to its parameters with ``functools.partial`` —
never a closure: a Dask or Prefect worker in another process unpickles it by the function's module and name, and a
reader sees every parameter a node depends on at the line that builds it.
"""

from __future__ import annotations

import dataclasses
import graphlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contract import StageResult
from contract.cache_keys import plain
from warehouse.artifacts import ArtifactRef

RunFn = Callable[[Path, Mapping[str, ArtifactRef], Mapping[str, Any]], StageResult]


@dataclass
class Node:
    """One stage instance. What enters its cache key: ``stage``, ``version``, ``config`` and the content of its
    ``files`` and of its upstream artifacts (``deps``: input name → upstream node name). ``run(out, upstream by input
    name, context)`` writes the artifact into ``out``."""

    name: str
    stage: str
    version: str
    config: dict[str, Any]
    run: RunFn
    files: dict[str, Path] = field(default_factory=dict)
    deps: dict[str, str] = field(default_factory=dict)  # input name → upstream node name


def canonical(settings: Any) -> dict[str, Any]:
    """Settings → plain JSON-able dict (the config part of a cache key), for stages and training runs alike. Fields
    added to a settings class later stay out while at their default — the one rule, ``contract.cache_keys``: a
    pydantic model applies it in its own dump (``pipelines.key_defaults.KeyWhenSet``), a dataclass through
    ``contract.cache_keys.plain`` (``dataclasses.asdict`` with the rule applied at every level: ``TrainSettings``,
    each objective)."""
    if isinstance(settings, BaseModel):
        return settings.model_dump(mode="json")
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        return plain(settings)
    return _jsonable(settings)


def portable(settings: Any) -> Any:
    """``canonical`` with every path cut to its file name: where a file lives is not part of a cache key (its content
    enters through ``Node.files``), so a moved checkout or data folder keeps its cache."""
    if isinstance(settings, BaseModel):
        return _jsonable(settings.model_dump(mode="python"), path=lambda p: p.name)
    return canonical(settings)


def _jsonable(obj: Any, path: Callable[[Path], str] = str) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v, path) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v, path) for v in obj]
    if isinstance(obj, Path):
        return path(obj)
    return obj


def folder_files(prefix: str, folder: Path) -> dict[str, Path]:
    """Every file of a local model folder as a node input (``prefix/relative/path`` → path): content in the key."""
    return {f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*")) if p.is_file()}


def topological(nodes: Mapping[str, Node]) -> list[Node]:
    order = graphlib.TopologicalSorter({n.name: set(n.deps.values()) for n in nodes.values()}).static_order()
    return [nodes[n] for n in order]
