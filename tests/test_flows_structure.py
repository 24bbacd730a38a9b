"""The shape of ``flows/``: no import cycle among its modules, and every DAG node ships to a worker process.

A cycle (``flows/dag.py`` importing a stage module that imports it back, as ``dag_wiki`` once did) works only while
every import of it stays inside a function; the import graph is read from the source with ``ast`` so a lazy import
inside a function counts too. A node's ``run`` must pickle with the standard library's ``pickle`` — what a Dask or
Prefect worker in another process needs, and what no closure over loop variables does.
"""

from __future__ import annotations

import ast
import graphlib
import pickle
from functools import partial
from pathlib import Path

import pytest
from conftest import REPO

from flows.config import load_config
from flows.dag import STAGES, build_dag


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports anywhere (module level or inside a function; not under
    ``if TYPE_CHECKING:``, which never runs)."""
    modules = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
        while stack:
            node = stack.pop()
            if _is_type_checking(node):
                stack.extend(node.orelse)  # type: ignore[attr-defined]
                continue
            stack.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:  # ``from pkg import module`` imports the submodule
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_flows_has_no_import_cycle() -> None:
    graph = import_graph(REPO, "flows")
    assert {"flows.dag", "flows.graph", "flows.stages.wiki", "flows.stages.train"} <= graph.keys()
    assert "flows.stages.wiki" in graph["flows.dag"]  # the graph sees imports (else no cycle could show)
    assert import_cycle(graph) is None, f"import cycle in flows/: {' → '.join(import_cycle(graph) or [])}"


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dag.py").write_text("def build():\n    from pkg.wiki import add\n")
    (pkg / "wiki.py").write_text("from . import dag\nfrom typing import TYPE_CHECKING\n"
                                 "if TYPE_CHECKING:\n    from pkg import other\n")
    (pkg / "other.py").write_text("import pkg.wiki\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.dag"] == {"pkg.wiki"} and graph["pkg.wiki"] == {"pkg.dag"}  # TYPE_CHECKING left out
    assert sorted(set(import_cycle(graph) or [])) == ["pkg.dag", "pkg.wiki"]
    (pkg / "wiki.py").write_text("import json\n")
    assert import_cycle(import_graph(tmp_path, "pkg")) is None


@pytest.fixture(scope="module")
def default_dag() -> dict:
    return build_dag(load_config(REPO / "configs" / "default.yaml", data_root=Path("/nonexistent/polysent-data")))


def test_every_node_pickles_with_a_top_level_run_function(default_dag: dict) -> None:
    assert {n.stage for n in default_dag.values()} >= {"wikidata", "wiki_shard", "wiki_extract", "entities",
                                                        "hard_negatives", "entity_vectors", "xnli_groups",
                                                        "nli_triples", "bitext_pairs", "eval_sets", "tokenizer",
                                                        "train", "evaluate", "report"}
    for name, node in default_dag.items():
        assert isinstance(node.run, partial), f"{name}: run is {node.run!r}, not a partial of a top-level function"
        assert "<locals>" not in node.run.func.__qualname__, f"{name}: run is a closure"
        back = pickle.loads(pickle.dumps(node))
        assert (back.name, back.stage, back.version, back.config, back.files, back.deps) == (
            node.name, node.stage, node.version, node.config, node.files, node.deps)
        assert back.run.func is node.run.func and back.run.keywords.keys() == node.run.keywords.keys()


def test_corpus_nodes_of_one_dag_share_one_leakage_index(default_dag: dict) -> None:
    """The evaluation texts are read once per DAG for all corpus nodes — Wikipedia's hard negatives too — not once
    per node; a DAG built again (a scheduled rerun in one process) reads them afresh."""
    names = ("hard_negatives", "xnli_groups", "nli_triples", "bitext_pairs")
    indexes = {id(default_dag[n].run.keywords["leakage"]) for n in names}
    assert len(indexes) == 1
    assert default_dag["hard_negatives"].config["leakage"] == default_dag["bitext_pairs"].config["leakage"]
    again = build_dag(load_config(REPO / "configs" / "default.yaml", data_root=Path("/nonexistent/polysent-data")))
    assert id(again["hard_negatives"].run.keywords["leakage"]) not in indexes


def test_build_dag_lists_the_stages_in_dag_order(default_dag: dict) -> None:
    """Each stage's nodes depend only on nodes of their own stage or of the stages before it: what lets build_dag call
    the builders in the order of ``STAGES``."""
    cfg = load_config(REPO / "configs" / "default.yaml", data_root=Path("/nonexistent/polysent-data"))
    stage_of = {node.name: i for i, builder in enumerate(STAGES) for node in builder(cfg, default_dag)}
    assert stage_of.keys() == default_dag.keys()
    late = {n: d for n, node in default_dag.items() for d in node.deps.values() if stage_of[d] > stage_of[n]}
    assert not late, f"nodes depending on a node of a later stage: {late}"
