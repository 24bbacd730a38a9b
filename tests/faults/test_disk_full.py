"""A full disk (ENOSPC) while the pipeline writes, simulated in-process on the warehouse's writers.

``warehouse.atomic`` is where everything that must never be seen half-written goes through: manifests, the catalog
(``current.json``, ``views.sql``), run records, report copies (temp name → fsync → rename), and the fsync of a whole
artifact folder before it is published. The simulated disk fills at a chosen write — half of the bytes land in the
temporary file, then ``OSError(ENOSPC)`` — and stays full (every later atomic write or fsync under the data root fails
too) until the test frees it. Four places in one data root, each followed by "freeing the disk" and a rerun:

1. before anything: the run record cannot be written;
2. mid-write of a manifest (``xnli_groups``): the atomic writer is interrupted;
3. the fsync before publication of ``tokenizer``'s folder (delayed allocation reports ENOSPC there);
4. the catalog update right after ``train.tiny`` was published.

Each failing run must exit 1 with an error that says "No space left on device" and names the node or file, leave no
final-name artifact of a node it could not finish, no manifest or catalog entry for it, and no temporary file or
folder; the last rerun must end equal to the reference.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from faults.harness import Reference, assert_same_as_reference, fault, flat, leftovers, write_fault_config
from warehouse.artifacts import ArtifactStore
from warehouse.layout import DataRoot

pytestmark = pytest.mark.faults


def enospc(path: Path | str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


class FullDisk:
    """The data root's disk, filling up at the first write or fsync ``trigger`` accepts."""

    def __init__(self, root: Path, trigger: Callable[[str, Path], bool]) -> None:
        self.root = root.resolve()
        self.trigger = trigger
        self.full = False
        self.failures: list[str] = []

    def _mine(self, path: Path) -> bool:
        return self.root in Path(path).resolve().parents

    def hits(self, kind: str, path: Path) -> bool:
        if not self._mine(path):
            return False
        if not self.full and self.trigger(kind, Path(path)):
            self.full = True
        if self.full:
            self.failures.append(f"{kind} {path}")
        return self.full

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import warehouse.atomic as atomic

        real_write = atomic.write_bytes_atomic
        real_fsync = os.fsync

        def write_bytes_atomic(final: Path, data: bytes) -> None:
            final = Path(final)
            if not self.hits("write", final):
                return real_write(final, data)
            with atomic.atomic_path(final) as tmp:  # the real temporary-file protocol, interrupted half-way
                with open(tmp, "wb") as fh:
                    fh.write(data[: len(data) // 2])
                raise enospc(tmp)

        def fsync(fd: int) -> None:
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if self.hits("fsync", path):
                raise enospc(path)
            return real_fsync(fd)

        monkeypatch.setattr(atomic, "write_bytes_atomic", write_bytes_atomic)
        # ``atomic.os`` is the os module for every other use; only its fsync fails
        monkeypatch.setattr(atomic, "os", SimpleNamespace(**{k: getattr(os, k) for k in dir(os)
                                                             if not k.startswith("__")} | {"fsync": fsync}))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., tuple]]:
    """``polysent run CONFIG --executor local`` in this process (so the disk can be patched): (exit code, output)."""
    import flows.nodes
    import flows.run  # noqa: F401  (imported before any patch: ``from warehouse.atomic import …`` binds at import)
    from flows.cli import main

    logger = logging.getLogger("polysent")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    monkeypatch.setenv("COLUMNS", "400")

    def run(config: Path) -> tuple[int, str]:
        capsys.readouterr()
        rc = main(["run", str(config), "--executor", "local"])
        got = capsys.readouterr()
        return rc, flat(got.out + "\n" + got.err)

    yield run
    logger.handlers[:], logger.level, logger.propagate = saved


def _current_nodes(root: DataRoot) -> set[str]:
    return set(json.loads(root.current.read_text())) if root.current.exists() else set()


def test_disk_full_fails_cleanly_then_rerun_completes(cli: Callable[..., tuple], reference: Reference,
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = write_fault_config(tmp_path)
    root = DataRoot.at(tmp_path / "data")

    def in_tmp_of(stage: str, p: Path) -> bool:
        """``p`` lies in the temporary folder of a ``stage`` artifact being built."""
        return any(d.parent == root.tmp and d.name.startswith(f"{stage}-") for d in p.parents)

    cases: list[tuple[str, str | None, Callable[[str, Path], bool], str]] = [
        ("run record", None, lambda kind, p: p.parent == root.runs, "runs"),
        ("manifest of xnli_groups", "xnli_groups",
         lambda kind, p: kind == "write" and p.name == "manifest.json" and in_tmp_of("xnli_groups", p),
         "xnli_groups"),
        # a data file of the folder (not the manifest's temporary file): the fsync before publication
        ("publish fsync of tokenizer", "tokenizer",
         lambda kind, p: kind == "fsync" and not p.name.startswith(".") and in_tmp_of("tokenizer", p), "tokenizer"),
        ("catalog after train.tiny", None,
         lambda kind, p: p == root.current and any(root.artifacts.glob("train/*/manifest.json")), "current.json"),
    ]
    for what, stage, trigger, named in cases:
        with fault(f"disk full: {what}"):
            disk = FullDisk(root.root, trigger)
            with monkeypatch.context() as m:
                disk.install(m)
                rc, out = cli(config)
            assert disk.failures, f"{what}: the simulated disk never filled up"
            assert rc == 1, out[-3000:]
            # a node's error is on its "build failed" line (then "pipeline failed at node …"); the run's own
            # bookkeeping's on the "pipeline failed" line
            start = out.find("build failed (OSError") if stage is not None else out.find("pipeline failed: OSError")
            assert start >= 0, out[-3000:]
            failed = out[start:][:600]
            assert "No space left on device" in failed, out[-3000:]
            assert named in failed, f"the error does not name {named!r}: {failed}"
            if stage is not None:
                assert f"{stage}: build failed" in out, out[-3000:]  # the log names the node it was building
                assert not list(root.artifacts.glob(f"{stage}/*")), f"{stage}: a partial artifact is visible"
                assert stage not in _current_nodes(root)
            assert not leftovers(root.root), leftovers(root.root)
            if what.startswith("catalog"):  # the artifact was complete before the catalog write failed: intact
                ref, reason = ArtifactStore(root).lookup("train", json.loads(
                    next(root.artifacts.glob("train/*/manifest.json")).read_text())["key"])
                assert ref is not None, reason
    with fault("disk freed: rerun after four ENOSPC failures"):
        rc, out = cli(config)
        assert rc == 0, out[-3000:]
        assert_same_as_reference(root.root, reference)
