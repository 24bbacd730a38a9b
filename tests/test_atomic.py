from __future__ import annotations

from pathlib import Path

import pytest

from warehouse.atomic import atomic_path, publish_dir, write_text_atomic


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "f.txt"
    write_text_atomic(target, "old")
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    write_text_atomic(target, "complete")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash while writing")
    assert target.read_text() == "complete"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_publish_dir_replaces_existing_folder(tmp_path: Path) -> None:
    final = tmp_path / "artifacts" / "x"
    final.mkdir(parents=True)
    (final / "old.parquet").write_text("old")
    new = tmp_path / "tmp" / "x-new"
    new.mkdir(parents=True)
    (new / "new.parquet").write_text("new")
    publish_dir(new, final, tmp_path / "trash")
    assert sorted(p.name for p in final.iterdir()) == ["new.parquet"]
    assert not new.exists()
    assert not any((tmp_path / "trash").iterdir())
