"""A data root's artifacts on an object store (any fsspec URL: ``s3://bucket/polysent``, ``gs://…``, ``abfs://…``,
``file:///mnt/shared/polysent``, ``memory://…``): ``push`` publishes, ``pull`` fetches, so machines share one build
cache without a shared POSIX file system.

Artifacts are immutable and content-addressed (``artifacts/<stage>/<cache key>/``), which makes the mirror simple
and safe:

* **push** uploads every locally *published and verified* artifact the remote lacks: its files first, its
  ``manifest.json`` last. A remote artifact counts as present only when its manifest exists, so a reader of the
  store never takes a half-uploaded artifact for a complete one, and an interrupted push is finished by the next
  (files are re-uploaded, the manifest last).
* **pull** downloads every remote artifact (one with a manifest) the local root lacks into ``<root>/tmp``, checks
  every file against the manifest's sha256 and its content hash, restores the manifest's mtimes (so the local fast
  verification path applies) and renames the folder into place — the node contract's publication. A corrupt or
  incomplete download is refused with the file named, and nothing is published.

After a pull, ``polysent run CONFIG`` finds the pulled artifacts as cache hits and points the warehouse views at
them. The catalog (DuckDB views) stays local: DuckDB reads Parquet on object stores only through its ``httpfs``
extension, which this project does not require.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec

from warehouse.hashing import sha256_file
from warehouse.manifest import MANIFEST_NAME, Manifest, content_hash, verify

log = logging.getLogger("polysent.warehouse.remote")


@dataclass
class SyncCounts:
    copied: list[str] = field(default_factory=list)  # stage/key
    present: int = 0
    skipped: list[str] = field(default_factory=list)  # stage/key: reason

    def summary(self) -> str:
        return (f"{len(self.copied)} artifact(s) copied, {self.present} already there"
                + (f", {len(self.skipped)} skipped" if self.skipped else ""))


def _fs(url: str) -> tuple[Any, str]:
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def _remote_artifacts(fs: Any, base: str) -> set[str]:
    """stage/key of every remote artifact whose manifest exists."""
    pattern = f"{base}/artifacts/*/*/{MANIFEST_NAME}"
    out = set()
    for p in fs.glob(pattern):
        parts = p.rstrip("/").split("/")
        out.add(f"{parts[-3]}/{parts[-2]}")
    return out


def push(root: Path, url: str) -> SyncCounts:
    """Upload the data root's published, intact artifacts that ``url`` lacks (manifest last)."""
    fs, base = _fs(url)
    remote = _remote_artifacts(fs, base)
    counts = SyncCounts()
    for mpath in sorted(Path(root, "artifacts").glob(f"*/*/{MANIFEST_NAME}")):
        folder = mpath.parent
        name = f"{folder.parent.name}/{folder.name}"
        if name in remote:
            counts.present += 1
            continue
        manifest = Manifest.load(mpath)
        reason = verify(folder, manifest)
        if reason is not None:  # never publish a damaged artifact; the next run rebuilds it locally
            counts.skipped.append(f"{name}: {reason}")
            log.warning("push: skipped %s: %s", name, reason)
            continue
        dest = f"{base}/artifacts/{name}"
        for rel in manifest.files:
            target = f"{dest}/{rel}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(folder / rel), target)
        fs.put_file(str(mpath), f"{dest}/{MANIFEST_NAME}")  # last: the artifact now exists for readers
        counts.copied.append(name)
        log.info("push: %s (%d files)", name, len(manifest.files))
    return counts


def pull(url: str, root: Path) -> SyncCounts:
    """Download the artifacts of ``url`` that the data root lacks; each is verified, then published by rename."""
    fs, base = _fs(url)
    counts = SyncCounts()
    root = Path(root)
    for name in sorted(_remote_artifacts(fs, base)):
        final = root / "artifacts" / name
        if (final / MANIFEST_NAME).exists():
            counts.present += 1
            continue
        src = f"{base}/artifacts/{name}"
        # <…>-<pid>-<random>, as the store's temporary folders: a killed pull's leftovers are swept by the next run
        tmp = root / "tmp" / f"pull-{name.replace('/', '-')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            fs.get_file(f"{src}/{MANIFEST_NAME}", str(tmp / MANIFEST_NAME))
            manifest = Manifest.load(tmp / MANIFEST_NAME)
            for rel, meta in manifest.files.items():
                local = tmp / rel
                local.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(f"{src}/{rel}", str(local))
                if local.stat().st_size != meta["size"] or sha256_file(local) != meta["sha256"]:
                    raise ValueError(f"pull: {url}/artifacts/{name}/{rel} does not match the sha256 in its manifest")
                os.utime(local, ns=(meta["mtime_ns"], meta["mtime_ns"]))
            if content_hash(manifest.files) != manifest.content_hash:
                raise ValueError(f"pull: {url}/artifacts/{name}/{MANIFEST_NAME}: the listed files do not give its "
                                 "content hash")
            extra = sorted({p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()}
                           - set(manifest.files) - {MANIFEST_NAME})
            if extra:
                raise ValueError(f"pull: {name}: unexpected files {extra}")
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tmp, final)  # publication: the folder appears whole or not at all
            except OSError:
                if not (final / MANIFEST_NAME).exists():  # a concurrent pull or build published it first: fine
                    raise
                counts.present += 1
                continue
            counts.copied.append(name)
            log.info("pull: %s (%d files)", name, len(manifest.files))
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return counts
