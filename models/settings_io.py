"""Settings dataclasses from plain mappings (YAML/JSON), strictly, without pydantic.

The pipeline validates ``models.settings`` through pydantic (``flows/config.py``); a bare GPU machine running
``python -m models.train --config FILE`` has no pydantic, so this module does the same job for the types the settings
use: nested frozen dataclasses, ``Literal``, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, unions of dataclasses
told apart by their ``kind`` field, ``int``/``float``/``bool``/``str``, and ``Annotated`` numbers with a
``models.settings.Range``. Unknown keys, wrong types and values out of range raise ``SettingsError`` naming the dotted
key path, the value and what was expected.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class SettingsError(ValueError):
    """A settings mapping that does not fit its dataclass; the message names the key path."""


def from_mapping(cls: type[T], data: Any, where: str = "") -> T:
    """``cls(**data)`` with every nested value converted and checked against ``cls``'s type hints."""
    return _convert(cls, data, where or cls.__name__)


def to_mapping(obj: Any) -> Any:
    """A dataclass as plain JSON-able data (tuples as lists); the inverse of ``from_mapping``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_mapping(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_mapping(v) for k, v in obj.items()}
    return obj


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Annotated:
        converted = _convert(args[0], value, where)
        for meta in tp.__metadata__:
            check = getattr(meta, "problem", None)  # models.settings.Range: the values the setting can take
            if check is not None and (expected := check(converted)) is not None:
                raise SettingsError(f"{where}: out of range (value {value!r}); expected {expected}")
        return converted
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _convert(members[0], value, where)
        if all(dataclasses.is_dataclass(m) for m in members):
            return _tagged(members, value, where)
        for m in members:
            try:
                return _convert(m, value, where)
            except SettingsError:
                continue
        raise SettingsError(f"{where}: expected {_name(tp)}, got {value!r}")
    if origin is Literal:
        if value not in args:
            raise SettingsError(f"{where}: expected one of {', '.join(repr(a) for a in args)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise SettingsError(f"{where}: expected a list, got {value!r}")
        inner = args[0]
        return tuple(_convert(inner, v, f"{where}.{i}") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise SettingsError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SettingsError(f"{where}: expected a string, got {value!r}")
        return value
    raise SettingsError(f"{where}: unsupported settings type {_name(tp)}")


def _dataclass(cls: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(value) and isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise SettingsError(f"{where}: expected a mapping of {cls.__name__} settings, got {value!r}")
    hints = typing.get_type_hints(cls, include_extras=True)  # keep Annotated: its Range is checked
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in value if k not in names]
    if unknown:
        raise SettingsError(f"{where}.{unknown[0]}: unknown key (value {value[unknown[0]]!r}); expected one of: "
                            f"{', '.join(names)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}") for k, v in value.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise SettingsError(f"{where}: {exc}") from None


def _tagged(members: list[Any], value: Any, where: str) -> Any:
    kinds = {typing.get_type_hints(m)["kind"].__args__[0]: m for m in members}
    if isinstance(value, Mapping):
        kind = value.get("kind", next(iter(kinds)))
        if kind in kinds:
            return _dataclass(kinds[kind], value, where)
        raise SettingsError(f"{where}.kind: expected one of {', '.join(repr(k) for k in kinds)}, got {kind!r}")
    for m in members:
        if isinstance(value, m):
            return value
    raise SettingsError(f"{where}: expected a mapping with a kind ({', '.join(kinds)}), got {value!r}")


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)
