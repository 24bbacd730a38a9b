"""Fixtures of the fault suite: one reference run per session, the Prefect home, selection and the session summary.

The suite runs with ``make test-faults`` (``pytest -m faults tests/faults``). A plain ``pytest`` (``make test``) leaves
it out: its tests are deselected unless the ``-m`` expression names ``faults`` or a path inside ``tests/faults`` is
given on the command line.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from faults.harness import TALLY, Reference, base_env, contents, run_config, snapshot, write_fault_config

HERE = Path(__file__).resolve().parent


def _selected(config: pytest.Config) -> bool:
    if "faults" in (config.option.markexpr or ""):
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _selected(config):
        return
    mine = [i for i in items if HERE in Path(str(i.path)).resolve().parents]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [i for i in items if i not in mine]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.injected:
        terminalreporter.write_sep("=", "fault suite")
        terminalreporter.write_line(TALLY.line())
        lost = sorted(set(TALLY.injected) - set(TALLY.survived))
        if lost:
            terminalreporter.write_line(f"not survived: {', '.join(lost)}")


@pytest.fixture(scope="session")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Prefect home of the session's own: its API database is created once and may be damaged by a test."""
    return tmp_path_factory.mktemp("prefect-home")


@pytest.fixture(scope="session")
def env(prefect_home: Path) -> dict[str, str]:
    return base_env(prefect_home)


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Reference:
    """The uninterrupted run every faulty run must end up equal to (local executor; the Prefect executor builds
    byte-identical artifacts, which the Prefect-executed fault runs check against it too)."""
    config = write_fault_config(tmp_path_factory.mktemp("reference"))
    t0 = time.perf_counter()
    done = run_config(config, env)
    assert done.rc == 0, done.explain()
    data_root = config.parent / "data"
    ref = Reference(config, data_root, contents(data_root), snapshot(data_root), time.perf_counter() - t0)
    assert len(ref.contents) == 18 and ref.rows > 5000, (ref.contents, ref.rows)
    return ref
