"""One stage contract: every stage in ``pipelines/`` and ``models/`` returns ``contract.StageResult``.

Three things are checked, because each has broken or could break without anyone noticing:
- the stage functions the DAG's nodes call are annotated to return the contract type (found from the nodes
  themselves, so a new stage, or the stage node builders moving about in ``flows/``, is covered without a list to
  keep in sync — a floor of known stages makes sure the discovery itself still finds them);
- ``contract`` imports the standard library only, and ``pipelines``/``models`` take the type from it, never from the
  storage layer (``warehouse.artifacts``), which is where it used to live;
- a result that breaks the contract fails where it is made, or when the artifact store receives it, with a message
  naming what was wrong — never by publishing an artifact.
"""

from __future__ import annotations

import ast
import dis
import functools
import importlib
import inspect
import pickle
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

import contract
from contract import StageResult

# every stage entry point the default pipeline's DAG calls today (configs/default.yaml has one node of each stage)
KNOWN_STAGES = {
    "pipelines.wikidata.build_entities",
    "pipelines.wikipedia.extract.build_wiki_shard",
    "pipelines.wikipedia.resolve.build_wiki_language",
    "pipelines.wikipedia.entities.build_entity_tables",
    "pipelines.wikipedia.hard_negatives.build_hard_negatives",
    "pipelines.wikipedia.entity_vectors.build_entity_vectors",
    "pipelines.xnli.groups.build_groups",
    "pipelines.nli.triples.build_triples",
    "pipelines.bitext.sampling.build_pairs",
    "pipelines.eval_sets.build.build_eval_sets",
    "pipelines.report.build.build_report",
    "models.training.tokenizer.train_tokenizer",
    "models.training.train.train",
    "models.evaluation.suite.evaluate_model",
}
LAYERS = ("pipelines", "models")


# ------------------------------------------------------------------------------------- what the DAG's nodes call
def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _referenced(fn: Callable[..., Any]) -> Iterator[Any]:
    """Objects a node's run function can call: names it imports lazily (``from m import f`` inside the body), globals
    it names (top-level imports of a stage builder module), attributes of global modules, and closure cells."""
    while isinstance(fn, functools.partial):
        yield from (a for a in (*fn.args, *fn.keywords.values()) if callable(a))
        fn = fn.func
    if not inspect.isfunction(fn):
        fn = getattr(fn, "__call__", None)  # noqa: B004 — a callable object: look at its __call__
        if not inspect.ismethod(fn) and not inspect.isfunction(fn):
            return
        fn = getattr(fn, "__func__", fn)
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    for code in _code_objects(fn.__code__):
        module = None
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME":
                module = ins.argval
            elif ins.opname == "IMPORT_FROM" and module:
                imported = importlib.import_module(module)
                yield getattr(imported, ins.argval, None)
        for name in code.co_names:
            value = fn.__globals__.get(name)
            yield value
            if isinstance(value, types.ModuleType):
                yield from (getattr(value, n, None) for n in code.co_names)


def _qualified(fn: Any) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _is_stage(obj: Any) -> bool:
    """A function of ``pipelines``/``models`` taking the artifact folder ``out``: the architecture's stage shape
    (typed settings + input paths in, artifact written to the given folder)."""
    return (inspect.isfunction(obj) and obj.__module__.split(".")[0] in LAYERS
            and "out" in inspect.signature(obj).parameters)


def _stages_the_dag_calls() -> dict[str, Callable[..., Any]]:
    from flows.config import load_config
    from flows.dag import build_dag

    cfg = load_config(REPO / "configs" / "default.yaml", data_root=Path("/nonexistent/polysent-data-root"))
    found: dict[str, Callable[..., Any]] = {}
    for node in build_dag(cfg).values():
        for obj in _referenced(node.run):
            if _is_stage(obj):
                found[_qualified(obj)] = obj
    return found


def _return_type(fn: Callable[..., Any]) -> Any:
    ann = inspect.signature(fn, eval_str=False).return_annotation
    return eval(ann, fn.__globals__) if isinstance(ann, str) else ann


def test_every_stage_the_dag_calls_returns_the_contract_type() -> None:
    found = _stages_the_dag_calls()
    missing = KNOWN_STAGES - set(found)
    assert not missing, f"the DAG's nodes no longer reach these stages (or the discovery broke): {sorted(missing)}"
    wrong = {name: _return_type(fn) for name, fn in found.items() if _return_type(fn) is not StageResult}
    assert not wrong, f"stage functions not annotated -> contract.StageResult: {wrong}"


def test_the_discovery_tells_a_stage_from_a_helper() -> None:
    """The check above must be able to fail: a node calling a dict-returning stage is caught, a helper without an
    ``out`` folder is not taken for a stage."""

    def run(out: Path, up: Any, ctx: Any) -> StageResult:
        from models.training.components import refuse_empty_corpora  # a helper: no ``out`` parameter
        from pipelines.xnli.groups import build_groups

        refuse_empty_corpora(None, {}, "x")
        return build_groups(None, None, None, out)  # type: ignore[arg-type]

    assert {_qualified(o) for o in _referenced(run) if _is_stage(o)} == {"pipelines.xnli.groups.build_groups"}

    def old_stage(settings: Any, out: Path) -> dict:
        return {"tables": {}, "stats": {}}

    assert _return_type(old_stage) is dict  # what the models stages returned before: the test above would name it


# ----------------------------------------------------------------------------------------------------- layering
def _imports(path: Path) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, module, imported names) of every import statement, lazy ones inside functions included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, tuple(a.name for a in node.names)


def test_the_contract_imports_the_standard_library_only() -> None:
    for path in sorted((REPO / "contract").rglob("*.py")):
        for line, module, _ in _imports(path):
            top = module.split(".")[0]
            assert top in sys.stdlib_module_names or top in ("__future__", "contract"), (
                f"{path.relative_to(REPO)}:{line} imports {module}: the contract must stay dependency-free")
    code = ("import sys; before = set(sys.modules); import contract; "
            "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['contract']"


def test_pipelines_and_models_take_the_contract_from_contract_not_warehouse() -> None:
    bad = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            where = f"{path.relative_to(REPO)}"
            for line, module, names in _imports(path):
                if module == "warehouse.artifacts" or (module == "warehouse" and "artifacts" in names):
                    bad.append(f"{where}:{line} imports warehouse.artifacts")
                if "StageResult" in names and module not in ("contract", "contract.stage"):
                    bad.append(f"{where}:{line} takes StageResult from {module}, not contract")
                if layer == "models" and module.split(".")[0] == "warehouse":
                    bad.append(f"{where}:{line} imports {module}: models runs on a bare GPU machine")
    assert not bad, "\n".join(bad)


def test_pipeline_stages_import_without_the_artifact_store() -> None:
    """At run time too: importing every pipelines stage module loads ``contract`` and not ``warehouse.artifacts``
    (models is covered by tests/test_models.py's bare-machine import check)."""
    modules = sorted({name.rsplit(".", 1)[0] for name in KNOWN_STAGES if name.startswith("pipelines.")})
    code = (f"import sys, {', '.join(modules)}; "
            "print('warehouse.artifacts' in sys.modules, 'contract' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def test_warehouse_re_exports_the_same_type() -> None:
    """``flows`` (and any caller not yet moved) keeps importing it from ``warehouse.artifacts``: the same class."""
    from warehouse import artifacts

    assert artifacts.StageResult is contract.StageResult is contract.stage.StageResult


# ---------------------------------------------------------------------------------------- the contract itself
def test_a_result_holds_copies_and_round_trips_through_pickle() -> None:
    tables, stats = {"t": "t.parquet", "parts": "parts"}, {"rows": 3, "nested": {1: "fine below the top"}}
    r = StageResult(tables=tables, stats=stats)
    tables["x"], stats["y"] = "x.parquet", 1  # the stage keeps mutating its own dicts: the result does not change
    assert r.tables == {"t": "t.parquet", "parts": "parts"} and set(r.stats) == {"rows", "nested"}
    assert pickle.loads(pickle.dumps(r)) == r  # results travel back from Dask workers
    assert StageResult().tables == {} and StageResult().stats == {}


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"tables": {"t": "/abs/t.parquet"}}, ValueError, r"tables\['t'\] = '/abs/t.parquet': expected a path relative"),
    ({"tables": {"t": "../elsewhere/t.parquet"}}, ValueError, r"tables\['t'\].*stays inside it"),
    ({"tables": {"t": Path("t.parquet")}}, TypeError, r"tables\['t'\]: expected .* as a string, got PosixPath"),
    ({"tables": {"": "t.parquet"}}, TypeError, r"table name must be a non-empty string"),
    ({"tables": [("t", "t.parquet")]}, TypeError, r"tables: expected a mapping .* got list"),
    ({"stats": {1: "x"}}, TypeError, r"stats: keys must be strings .* got \[1\]"),
])
def test_a_bad_result_fails_where_it_is_made(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        StageResult(**kwargs)


def test_the_store_refuses_a_stage_that_returns_something_else(tmp_path: Path) -> None:
    """A stage (or a node's run function) still returning the old ``{"tables", "stats"}`` dict: a clear error naming
    the stage and node, and nothing published."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.artifacts import ArtifactStore
    from warehouse.layout import DataRoot

    root = DataRoot.at(tmp_path / "data")
    store = ArtifactStore(root)

    def old(out: Path) -> Any:
        pq.write_table(pa.table({"a": [1]}), out / "t.parquet")
        return {"tables": {"t": "t.parquet"}, "stats": {}}

    with pytest.raises(TypeError, match=r"stage demo \(node demo\.x\) returned dict, expected contract.StageResult"):
        store.materialize(node="demo.x", stage="demo", version="1", config={}, inputs={}, build=old)
    assert not (root.artifacts / "demo").exists() or not any((root.artifacts / "demo").iterdir())
    assert not any(p for p in root.tmp.iterdir() if p.name != "trash")
