"""The one rule for cache keys (``contract.cache_keys``): a field a settings class names in ``KEY_WHEN_SET`` stays out
of a key while it holds its default — for pydantic settings (the data stages) and dataclass settings (training runs,
objectives) alike, at any nesting level, through ``flows.graph.canonical``/``portable`` and through
``models.settings.key_view`` (the experiments' row hash) with the same result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import Field

from contract.cache_keys import field_default, late_fields, plain, without_unset
from flows.graph import canonical, portable
from models.objective_registry import kinds
from models.settings import FreezeSettings, TrainSettings, key_view
from models.settings_io import to_mapping
from pipelines.bitext.sources import NwaySource
from pipelines.key_defaults import KeyWhenSet
from pipelines.leakage import EvalSetSpec


@dataclass(frozen=True)
class _Inner:
    keep: int = 1
    late: str = "off"
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("late",)


@dataclass(frozen=True)
class _Outer:
    inner: tuple[_Inner, ...] = (_Inner(),)
    by_name: dict[str, _Inner] = field(default_factory=lambda: {"a": _Inner()})
    path: Path = Path("/data/x.txt")
    added: int | None = None
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("added",)


class _Model(KeyWhenSet):
    keep: int = 1
    files: list[str] = Field(default_factory=list)
    path: Path = Path("/data/y.txt")
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("files",)


def test_a_late_field_leaves_the_key_while_at_its_default_at_every_level() -> None:
    assert canonical(_Outer()) == {"inner": [{"keep": 1}], "by_name": {"a": {"keep": 1}}, "path": "/data/x.txt"}
    set_ = _Outer(inner=(_Inner(late="on"),), added=3)
    assert canonical(set_) == {"inner": [{"keep": 1, "late": "on"}], "by_name": {"a": {"keep": 1}},
                               "path": "/data/x.txt", "added": 3}
    assert canonical(_Model()) == {"keep": 1, "path": "/data/y.txt"}
    assert portable(_Model(files=["a"])) == {"keep": 1, "files": ["a"], "path": "y.txt"}
    assert plain(_Outer(), path=lambda p: p.name)["path"] == "x.txt"


def test_the_rule_is_asdict_less_the_unset_late_fields() -> None:
    """For a class without late fields the key is ``dataclasses.asdict`` as JSON-able data, as it always was."""
    s = FreezeSettings(embeddings=False, layers=2)
    assert canonical(s) == dataclasses.asdict(s)
    assert without_unset(_Inner, {"keep": 1, "late": "off"}) == {"keep": 1}
    assert without_unset(_Inner, {"keep": 1, "late": "on"}) == {"keep": 1, "late": "on"}
    assert without_unset(_Inner, {"keep": 1, "late": "x"}, values={"late": "off"}) == {"keep": 1}
    assert field_default(_Model, "files") == [] and field_default(_Outer, "by_name") == {"a": _Inner()}


def test_a_training_run_s_key_is_the_same_from_the_object_and_from_its_mapping() -> None:
    """``canonical`` (the DAG's train node) and ``key_view(to_mapping(…))`` (the experiments' row hash) agree, for a
    run of every objective kind, at their defaults and with every late field set."""
    runs = [TrainSettings(objectives=(cls(),)) for cls in kinds().values()]
    runs.append(TrainSettings(interpolate_start=0.5, freeze=FreezeSettings(), embedding_updates="lazy",
                              packed_forward=False))
    for cls in kinds().values():
        changed = {n: _other_than(field_default(cls, n)) for n in late_fields(cls)}
        runs.append(TrainSettings(objectives=(dataclasses.replace(cls(), **changed),)))
    for ts in runs:
        assert canonical(ts) == key_view(to_mapping(ts)) == key_view(canonical(ts))
    assert "packed_forward" not in canonical(TrainSettings())
    assert canonical(runs[-len(kinds()) - 1])["packed_forward"] is False


def _other_than(value: object) -> object:
    """A value of a late field other than its default (the type kept)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if value is None:
        return 1.0
    if isinstance(value, str):
        return {"source": "self"}.get(value, value + "x")
    raise AssertionError(f"no other value for {value!r}")


@pytest.mark.parametrize("cls", [TrainSettings, *kinds().values(), NwaySource, EvalSetSpec],
                         ids=lambda c: c.__name__)
def test_every_late_field_is_a_field_with_a_default(cls: type) -> None:
    """A typo in ``KEY_WHEN_SET`` would leave a field in every key: each name is a field, and has a default."""
    for name in late_fields(cls):
        field_default(cls, name)  # KeyError for a name that is no field
    fields = ({f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else cls.model_fields)
    assert set(late_fields(cls)) <= set(fields)
