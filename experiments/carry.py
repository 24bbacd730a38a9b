"""What a GPU drain reads from the kits, gathered under one folder small enough for the device tool to carry.

The device tool carries at most 64 MiB of ignored paths with the working tree. The kits (``data/experiments/kits``)
with multilingual-e5-small's packed start are about 60 MB, and the all-language corpora (``--all-languages``) add
about 47 MB, so the kits whole no longer fit. ``carry`` copies (hard links where it can) what the drain's pending
rows read: each kit's manifest (verbatim, so every row's hash reads the same there), its packed start and tokenizer,
every scoring table (report, decision, full) and only the *training* tables the pending rows train on
(``ConditionSpec.kit_tables``); a training table left out stays named in the manifest and absent on disk, which no
row of this drain reads. The folder is built under a temporary name and renamed whole. On the device:
``POLYSENT_EXPERIMENTS_WORK=$PWD/data/experiments/carry python3 -m experiments gpu-drain --out $OUT``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from experiments import kits
from experiments.paths import REPO

log = logging.getLogger("polysent.experiments.carry")

LIMIT = 64 * 2**20  # the device tool's carry limit (all carried paths together)


def needed_tables(names: list[str] | None = None, *, include_cpu: bool = False) -> dict[str, set[str]]:
    """Kit → the training tables the pending drain rows read (those of ``drain.pending_gpu_rows``)."""
    from experiments.drain import pending_gpu_rows
    from experiments.question import load_question

    need: dict[str, set[str]] = {}
    for p in pending_gpu_rows(names, include_cpu=include_cpu):
        q = load_question(p.question)
        need.setdefault(q.kit, set()).update(q.condition(p.key.condition).kit_tables())
    return need


def _place(src: Path, dst: Path) -> int:
    """Hard-link (else copy) ``src`` — a file or a folder — to ``dst``; returns the bytes placed."""
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    size = 0
    for f in files:
        target = dst if src.is_file() else dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, target)
        except OSError:
            shutil.copy2(f, target)
        size += f.stat().st_size
    return size


def carry(out: Path, *, names: list[str] | None = None, include_cpu: bool = False, root: Path | None = None,
          limit: int = LIMIT) -> dict[str, Any]:
    """Gather under ``out/kits`` what the pending drain rows read (module docstring) and the commit they were planned
    at (``out/kits/COMMIT``). A folder over ``limit`` bytes is an error naming its largest tables. Returns per kit
    the training tables carried and left, and the total size."""
    need = needed_tables(names, include_cpu=include_cpu)
    tmp = out.with_name(f".{out.name}.building")
    if tmp.exists():
        shutil.rmtree(tmp)
    report: dict[str, Any] = {"kits": {}}
    sizes: dict[str, int] = {}
    for kit in kits.KIT_NAMES:
        src = kits.kit_dir(kit, root)
        if not (src / "manifest.json").is_file():
            log.info("carry: kit %s is not prepared, left out", kit)
            continue
        dst = tmp / "kits" / kit
        manifest = kits.load_manifest(kit, root)
        sizes[f"{kit}/manifest.json"] = _place(src / "manifest.json", dst / "manifest.json")
        for extra in ("start", manifest.get("tokenizer")):
            if extra and (src / extra).exists():
                sizes[f"{kit}/{extra}"] = _place(src / extra, dst / extra)
        for which in ("report", "decision", "full"):
            for rel in manifest["tables"].get(which, {}).values():
                if f"{kit}/{rel}" not in sizes:  # full sets share files with the report's
                    sizes[f"{kit}/{rel}"] = _place(src / rel, dst / rel)
        train = manifest["tables"].get("train", {})
        wanted = sorted(need.get(kit, set()) & set(train))
        for name in wanted:
            sizes[f"{kit}/{train[name]}"] = _place(src / train[name], dst / train[name])
        report["kits"][kit] = {"train_carried": wanted, "train_left": sorted(set(train) - set(wanted))}
    total = sum(sizes.values())
    if total > limit:
        top = ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
        shutil.rmtree(tmp)
        raise ValueError(f"carry: {total / 2**20:.1f} MiB is over the device tool's {limit / 2**20:.0f} MiB (largest: "
                         f"{top}); drain fewer questions (--question) or leave out CPU rows")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    (tmp / "kits").mkdir(parents=True, exist_ok=True)
    (tmp / "kits" / "COMMIT").write_text(commit + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    report["bytes"] = total
    log.info("carry: %.1f MiB under %s (%s)", total / 2**20, out, report["kits"])
    return report
