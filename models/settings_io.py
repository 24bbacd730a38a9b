"""The one reader of the model stages' settings (``models.settings``): YAML/JSON → frozen dataclasses, strictly.

Both ways into training read their settings here: the pipeline config (``flows/config.py`` hands this module the
``tokenizer``, ``training`` and ``evaluation`` sections of the YAML file) and the job file of
``python -m models.training.train --config FILE`` on a bare GPU machine (``read_yaml``). Unknown keys, wrong types and
values out of range are rejected, every problem of the mapping at once, one line each, in the form

    FILE:LINE: key.path: <problem> (value V); expected …

with the line found in ``yaml.compose`` of the same text (``line_of``).

Why this mechanism and not pydantic: ``models`` must import with torch, transformers, numpy, pyarrow and pyyaml alone
(a training node runs on a bare GPU machine), so the job-file reader cannot be pydantic. Letting pydantic read the same
dataclasses in the pipeline made two readers of one schema that disagreed (pydantic took ``"5"`` for an integer and
``"yes"`` for true, the job reader refused them) and whose messages for the ``kind``-tagged objective union needed
~120 lines of repair in ``flows/config.py``. The types these settings use are few — nested frozen dataclasses,
``Literal``, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, ``int``/``float``/``bool``/``str``, ``Annotated``
numbers with a ``models.settings.Range``, and a base class whose members a registry names by ``kind``
(``models.objective_registry.Objective`` → its ``kinds()``) — so one small reader that writes the messages we want
is less code than a general one repaired. The data-stage sections (``pipelines/*``) stay pydantic models beside their
stages: ``flows`` and ``pipelines`` have pydantic, and those models use validators, ``Path`` and tagged unions of
their own.

Strict means: an integer is an integer (not ``true``, not ``5.0``, not ``"5"``), a flag is ``true``/``false``, a list
is a list. One leniency, for a YAML 1.1 quirk: PyYAML reads ``1e-3`` (an exponent without a dot) as text, so a number
field takes text that is a float literal (``lr: 1e-3`` means 0.001, as the pipeline has always read it).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Loc = tuple[str | int, ...]
_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # 1e-3, 5E+2: what YAML 1.1 leaves as text


class SettingsError(ValueError):
    """Settings that do not fit their dataclass. ``str()``: one line per problem; ``problems``: those lines."""

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class _Invalid(Exception):
    """Problems found while converting, as (key path, message) pairs; turned into ``SettingsError`` lines at the top."""

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        self.problems = problems


def from_mapping(cls: type[T], data: Any, where: str = "") -> T:
    """``cls(**data)`` with every nested value converted and checked against ``cls``'s type hints; a message starts
    with ``where`` (the class name when not given) and the dotted key path: ``TrainSettings.steps: …``."""
    try:
        return _convert(cls, data, ())
    except _Invalid as exc:
        prefix = where or cls.__name__
        raise SettingsError([f"{_dotted((prefix, *loc))}: {msg}" for loc, msg in exc.problems]) from None


def read_section(cls: type[T], data: Any, file: Path | str, tree: Any = None, at: Loc = ()) -> T:
    """``from_mapping`` for the section ``at`` (e.g. ``("training", "base")``) of the YAML file ``file``: messages read
    ``FILE:LINE: training.base.steps: …``, the line taken from ``tree`` (``yaml.compose`` of the file's text)."""
    try:
        return _convert(cls, data, ())
    except _Invalid as exc:
        raise SettingsError([located(file, tree, (*at, *loc), msg) for loc, msg in exc.problems]) from None


def read_yaml(cls: type[T], path: Path | str) -> T:
    """A whole YAML (or JSON) file read into ``cls`` — a job file of ``python -m models.training.train``."""
    data, tree = load_yaml(path)
    return read_section(cls, data, path, tree)


def load_yaml(path: Path | str) -> tuple[Any, Any]:
    """The file's data (``yaml.safe_load``) and its node tree (``yaml.compose``, for line numbers); a missing file or
    invalid YAML raises ``SettingsError`` naming the file."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError([f"{path}: no such config file"]) from None
    except IsADirectoryError:
        raise SettingsError([f"{path}: is a folder; expected a YAML config file"]) from None
    except UnicodeDecodeError as exc:
        raise SettingsError([f"{path}: not a UTF-8 text file (byte {exc.start}); expected a YAML config "
                             "file"]) from None
    except OSError as exc:
        raise SettingsError([f"{path}: cannot be read ({exc.strerror or exc})"]) from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.YAMLError as exc:
        raise SettingsError([f"{path}: not valid YAML: {exc}"]) from None


def located(file: Path | str, tree: Any, loc: Loc, message: str) -> str:
    """``FILE:LINE: dotted.key.path: message`` (``FILE:`` alone when the line is unknown)."""
    line = line_of(tree, loc)
    return f"{file}:{line}: {_dotted(loc) or '(top level)'}: {message}" if line else \
        f"{file}: {_dotted(loc) or '(top level)'}: {message}"


def line_of(node: Any, loc: Loc) -> int | None:
    """The 1-based line of the deepest key of ``loc`` present in a ``yaml.compose`` tree (None without a tree)."""
    import yaml

    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(part):
                    line = k.start_mark.line + 1
                    node = v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def to_mapping(obj: Any) -> Any:
    """A dataclass as plain JSON-able data (tuples as lists); the inverse of ``from_mapping``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_mapping(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_mapping(v) for k, v in obj.items()}
    return obj


def expected(tp: Any) -> str:
    """What a value of type ``tp`` looks like, in words (the ``expected …`` of a message)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        for meta in tp.__metadata__:
            if hasattr(meta, "expected"):
                return meta.expected("an integer" if args[0] is int else "a number")
        return expected(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(expected(a) for a in args)
    if origin is Literal:
        return _choices(args)
    if origin is tuple:
        return f"a list of {_plural(expected(args[0]))}"
    if origin is dict:
        return f"a mapping of names to {_plural(expected(args[1]))}"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} keys ({', '.join(f.name for f in dataclasses.fields(tp))})"
    if hasattr(tp, "settings_kinds"):
        return f"a mapping with a kind ({', '.join(tp.settings_kinds())})"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}.get(
        tp, getattr(tp, "__name__", str(tp)))


# -- conversion ---------------------------------------------------------------------------------------------------
def _convert(tp: Any, value: Any, loc: Loc) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Annotated:
        try:
            converted = _convert(args[0], value, loc)
        except _Invalid as exc:  # a wrong type: the expectation names the range too (``an integer ≥ 1``)
            (where, msg), *more = exc.problems
            if more or where != loc or "; expected " not in msg:
                raise
            raise _Invalid([(loc, f"{msg.rpartition('; expected ')[0]}; expected {expected(tp)}")]) from None
        for meta in tp.__metadata__:
            check = getattr(meta, "problem", None)  # models.settings.Range: the values the setting can take
            if check is not None and (want := check(converted)) is not None:
                raise _Invalid([(loc, f"out of range (value {value!r}); expected {want}")])
        return converted
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            try:
                return _convert(members[0], value, loc)
            except _Invalid as exc:
                if value is None or len(exc.problems) != 1 or exc.problems[0][0] != loc:
                    raise
                # a wrong value of an optional setting: say that null is allowed too
                raise _Invalid([(loc, f"{exc.problems[0][1]} or null")]) from None
        for m in members:
            try:
                return _convert(m, value, loc)
            except _Invalid:
                continue
        raise _Invalid([(loc, f"wrong type (value {value!r}); expected {expected(tp)}")])
    if origin is Literal:
        if not any(a == value and type(a) is type(value) for a in args):  # 1 is not True, True is not 1
            raise _Invalid([(loc, f"not one of the choices (value {value!r}); expected {_choices(args)}")])
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise _Invalid([(loc, f"not a list (value {value!r}); expected {expected(tp)}")])
        return tuple(_each(args[0], enumerate(value), loc))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _Invalid([(loc, f"not a mapping (value {value!r}); expected {expected(tp)}")])
        return dict(zip((str(k) for k in value), _each(args[1], ((str(k), v) for k, v in value.items()), loc),
                        strict=True))
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, loc)
    if isinstance(tp, type) and hasattr(tp, "settings_kinds"):
        return _tagged(tp, value, loc)
    return _scalar(tp, value, loc)


def _each(tp: Any, items: Any, loc: Loc) -> list[Any]:
    """Convert every item, collecting the problems of all of them."""
    out, problems = [], []
    for key, v in items:
        try:
            out.append(_convert(tp, v, (*loc, key)))
        except _Invalid as exc:
            problems += exc.problems
    if problems:
        raise _Invalid(problems)
    return out


def _scalar(tp: Any, value: Any, loc: Loc) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Invalid([(loc, f"not true or false (value {value!r}); expected true or false")])
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Invalid([(loc, f"not a valid integer (value {value!r}); expected an integer")])
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
            return float(value)  # YAML 1.1 reads 1e-3 as text (see the module docstring)
        raise _Invalid([(loc, f"not a valid number (value {value!r}); expected a number")])
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Invalid([(loc, f"not a string (value {value!r}); expected a string")])
    raise _Invalid([(loc, f"unsupported settings type {getattr(tp, '__name__', tp)} (value {value!r})")])


def _dataclass(cls: Any, value: Any, loc: Loc) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise _Invalid([(loc, f"not a mapping (value {value!r}); expected {expected(cls)}")])
    hints = typing.get_type_hints(cls, include_extras=True)  # keep Annotated: its Range is checked
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    problems: list[tuple[Loc, str]] = []
    kwargs = {}
    for key, v in value.items():
        if key not in names:
            problems.append(((*loc, key), f"unknown key (value {v!r}); expected one of: {', '.join(names)}"))
            continue
        try:
            kwargs[key] = _convert(hints[key], v, (*loc, key))
        except _Invalid as exc:
            problems += exc.problems
    for f in fields:
        if f.name not in value and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(((*loc, f.name), f"required key is missing; expected {expected(hints[f.name])}"))
    if problems:
        raise _Invalid(problems)
    return cls(**kwargs)


def _tagged(base: Any, value: Any, loc: Loc) -> Any:
    """A member of a union told apart by ``kind``: ``base.settings_kinds()`` maps each kind to its dataclass (the
    first is the default when ``kind`` is left out)."""
    kinds = base.settings_kinds()
    if isinstance(value, base):
        return value
    if not isinstance(value, Mapping):
        raise _Invalid([(loc, f"not a mapping (value {value!r}); expected {expected(base)}")])
    kind = value.get("kind", next(iter(kinds)))
    if kind not in kinds:
        raise _Invalid([((*loc, "kind"), f"unknown {base.__name__.lower()} kind (value {kind!r}); expected one of "
                                         f"{', '.join(repr(k) for k in kinds)}")])
    return _dataclass(kinds[kind], value, loc)


def _choices(args: Sequence[Any]) -> str:
    """``'a', 'b' or 'c'`` (YAML spellings: true/false/null)."""
    words = ["null" if a is None else str(a).lower() if isinstance(a, bool) else repr(a) for a in args]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _plural(what: str) -> str:
    for one, many in (("an integer", "integers"), ("a number", "numbers"), ("a string", "strings"),
                      ("true or false", "flags"), ("a mapping", "mappings")):
        if what.startswith(one):
            return many + what[len(one):]
    return what


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc)
