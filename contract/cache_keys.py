"""The one rule for cache keys: a settings field added after keys were made enters a key only when it is set.

A node's cache key holds its settings as plain data (``flows.graph.canonical`` / ``portable``), and an experiment
ledger row's hash holds its training settings (``models.settings.key_view``). A field added to a settings class would
enter every such dump, so every cached artifact and every ledger row keyed before the field existed would move though
nothing it computes changed. So a settings class — a pydantic model of ``pipelines/`` or a dataclass of ``models/``
alike — names those fields in a class attribute::

    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("documents", "held_out_every")

and :func:`without_unset` drops each of them from the class's dump while its value equals the field's default. A
config that sets one gets a new key, as it must; a field that changes what every run computes does not belong in the
list (it must move every key: bump the stage version instead).

Where the rule is applied (each calls :func:`without_unset`, nothing else decides):

* dataclass settings (``TrainSettings``, each objective, any other) — :func:`plain`, which ``flows.graph.canonical``
  uses for every dataclass, at every nesting level;
* pydantic settings — their own dump (``pipelines.key_defaults.KeyWhenSet``, a ``model_serializer``), so the rule
  holds at every nesting level and for ``portable`` too;
* a training dump made without the object (``models.settings_io.to_mapping``, the experiments' row hash) —
  ``models.settings.key_view``, which knows the ``kind``-tagged objective union.

Standard library only (the contract's rule, ``contract/__init__.py``): ``pipelines`` and ``models`` both import it,
neither imports the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

_NO_DEFAULT = object()


def late_fields(cls: type) -> tuple[str, ...]:
    """The fields ``cls`` keeps out of a cache key while they hold their default (its ``KEY_WHEN_SET``)."""
    return tuple(getattr(cls, "KEY_WHEN_SET", ()))


def field_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of a dataclass or pydantic model class (a default factory called); for a field
    without one, a value equal to nothing a field holds."""
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name:
                if f.default is not dataclasses.MISSING:
                    return f.default
                if f.default_factory is not dataclasses.MISSING:
                    return f.default_factory()
                return _NO_DEFAULT
        raise KeyError(f"{cls.__name__} has no field {name!r} (KEY_WHEN_SET)")
    fields = getattr(cls, "model_fields", None)  # a pydantic model, without importing pydantic
    if fields is None or name not in fields:
        raise KeyError(f"{cls.__name__} has no field {name!r} (KEY_WHEN_SET)")
    return fields[name].get_default(call_default_factory=True)


def without_unset(cls: type, data: Any, values: Mapping[str, Any] | None = None,
                  names: Iterable[str] | None = None) -> Any:
    """``data`` — a plain dump of an instance of ``cls`` — without each of ``cls``'s late fields (``names``, default
    its ``KEY_WHEN_SET``) whose value equals the field's default. The value is ``values[name]`` when given (the
    instance's own attributes), else the dumped ``data[name]``; anything but a dict is returned as it is."""
    names = late_fields(cls) if names is None else tuple(names)
    if not names or not isinstance(data, dict):
        return data
    seen = data if values is None else values
    unset = {n for n in names if n in seen and seen[n] == field_default(cls, n)}
    return {k: v for k, v in data.items() if k not in unset} if unset else data


def plain(obj: Any, path: Callable[[Path], str] = str) -> Any:
    """``obj`` as plain JSON-able data for a cache key: a dataclass as its fields in order, less its late fields at
    their default (:func:`without_unset`), recursively; a dict with ``str`` keys; a list or tuple as a list; a path
    as ``path(p)``; anything else as it is. For dataclasses this is ``dataclasses.asdict`` with the rule applied."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        data = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        kept = without_unset(type(obj), data, names=late_fields(type(obj)))
        return {k: plain(v, path) for k, v in kept.items()}
    if isinstance(obj, dict):
        return {str(k): plain(v, path) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v, path) for v in obj]
    if isinstance(obj, Path):
        return path(obj)
    return obj
