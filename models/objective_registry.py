"""The objective registry: one entry per objective ``kind`` — its settings dataclass, the corpus tables it reads and the
training component that turns a step into a loss.

Why a registry: an objective's ``kind`` decides what a YAML mapping under ``training.<run>.objectives`` is read into,
which corpus nodes the DAG wires to the training node, which rows ``refuse_empty_corpora`` demands, and which
``Component`` trains it. Each of these was an ``isinstance`` ladder of its own (``models/components.py``,
``models/settings.py``, the config's error messages in ``flows/config.py``), so adding an objective meant finding and
editing all of them. Now they all ask this module:

* the settings reader (``models.settings_io``, for the pipeline config and for job files alike) reads the
  ``objectives`` list as a union told apart by ``kind`` whose members are ``kinds()`` — so the error for an unknown
  kind lists the registered ones (``expected one of 'contrastive', 'mpcl', …``);
* ``objective_tables`` → ``TrainSettings.tables()`` and the DAG's wiring of corpus tables to training nodes;
  ``objective_languages`` → what the report says each objective keeps of its corpora;
* ``spec_of(o).required_rows(o)`` → ``models.components.refuse_empty_corpora``;
* ``spec_of(o).component_class()`` → ``models.components.build_components``.

This module imports neither torch nor pydantic: a component may be given as ``"module:Class"`` and is imported on first
use, so the pipeline's config loader lists the kinds without loading torch. The built-in objectives register
themselves where their settings are defined (``@objective(...)`` in ``models/settings.py``); a plug-in calls
``register_objective`` before the config is read. The README's "Adding an objective" gives the steps.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

S = TypeVar("S")
Need = tuple[str, str, tuple[str, ...]]  # (table, filter column, values): rows an objective must find; () = any row


@dataclass(frozen=True)
class ObjectiveSpec:
    """What the pipeline knows of one objective kind.

    ``tables(o)``: the corpus tables an objective with settings ``o`` reads (its DAG inputs, in a fixed order).
    ``component``: the ``models.components.Component`` subclass (or its ``"module:Class"`` path) built as
    ``component(name, o, tables, settings, stream, device, student)``. ``needs(o)``: (table, column, values) the
    objective must find rows in before training starts; by default any row of each of its tables. ``languages(o)``:
    the languages the objective restricts itself to (empty: every language of its corpora); by default its
    ``languages`` field, if it has one."""

    kind: str
    settings: type
    tables: Callable[[Any], tuple[str, ...]]
    component: type | str
    needs: Callable[[Any], list[Need]] | None = None
    languages: Callable[[Any], tuple[str, ...]] | None = None

    def component_class(self) -> type:
        if isinstance(self.component, str):
            module, _, name = self.component.partition(":")
            return getattr(importlib.import_module(module), name)
        return self.component

    def required_rows(self, o: Any) -> list[Need]:
        return self.needs(o) if self.needs is not None else [(t, "", ()) for t in self.tables(o)]


_REGISTRY: dict[str, ObjectiveSpec] = {}


def register_objective(settings: type[S], *, tables: Callable[[Any], tuple[str, ...]] | tuple[str, ...],
                       component: type | str, needs: Callable[[Any], list[Need]] | None = None,
                       languages: Callable[[Any], tuple[str, ...]] | None = None, replace: bool = False) -> type[S]:
    """Register the settings dataclass ``settings`` (a frozen dataclass deriving from ``models.settings.Objective``
    whose ``kind`` field is ``Literal["<kind>"] = "<kind>"``, with ``weight`` and ``batch_size``) under its kind.
    ``tables``: a tuple, or a function of the settings. A kind registered twice is refused unless ``replace``."""
    from models.settings import Objective

    kind = _kind_of(settings)
    if not (isinstance(settings, type) and issubclass(settings, Objective)):
        raise TypeError(f"objective {kind!r}: {settings.__name__} must derive from models.settings.Objective")
    names = {f.name for f in dataclasses.fields(settings)}
    if missing := sorted({"weight", "batch_size"} - names):
        raise TypeError(f"objective {kind!r}: {settings.__name__} lacks the field(s) {missing} every objective has "
                        "(the trainer weighs its loss and logs its batch)")
    if kind in _REGISTRY and not replace and _REGISTRY[kind].settings is not settings:
        raise ValueError(f"objective kind {kind!r} is already registered ({_REGISTRY[kind].settings.__name__})")
    fixed = tables if callable(tables) else (lambda _o, t=tuple(tables): t)
    _REGISTRY[kind] = ObjectiveSpec(kind, settings, fixed, component, needs, languages)
    return settings


def objective(*, tables: Callable[[Any], tuple[str, ...]] | tuple[str, ...], component: type | str,
              needs: Callable[[Any], list[Need]] | None = None,
              languages: Callable[[Any], tuple[str, ...]] | None = None) -> Callable[[type[S]], type[S]]:
    """``register_objective`` as a class decorator, written above ``@dataclass(frozen=True)``."""
    return lambda settings: register_objective(settings, tables=tables, component=component, needs=needs,
                                               languages=languages)


def unregister_objective(kind: str) -> None:
    """Remove a kind (a test's toy objective, a plug-in unloaded)."""
    _REGISTRY.pop(kind, None)


def kinds() -> dict[str, type]:
    """kind → settings dataclass, in registration order (the first is the default when a mapping names no kind)."""
    import models.settings  # noqa: F401  (registers the built-in objectives)

    return {k: s.settings for k, s in _REGISTRY.items()}


def spec_of(o: Any) -> ObjectiveSpec:
    """The entry of an objective's settings (or of a kind name)."""
    import models.settings  # noqa: F401  (registers the built-in objectives)

    kind = o if isinstance(o, str) else getattr(o, "kind", None)
    spec = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if spec is None or not isinstance(o, (str, spec.settings)):
        raise LookupError(f"objective {kind!r} is not registered ({type(o).__name__}); registered kinds: "
                       f"{', '.join(_REGISTRY)} (models.objective_registry.register_objective)")
    return spec


def objective_tables(o: Any) -> tuple[str, ...]:
    """The corpus tables an objective reads."""
    return spec_of(o).tables(o)


def objective_languages(o: Any) -> tuple[str, ...]:
    """The languages an objective restricts itself to (empty: every language of its corpora)."""
    spec = spec_of(o)
    return spec.languages(o) if spec.languages is not None else tuple(getattr(o, "languages", ()))


def _kind_of(settings: type) -> str:
    if not dataclasses.is_dataclass(settings):
        raise TypeError(f"{settings!r}: an objective's settings must be a dataclass")
    field = next((f for f in dataclasses.fields(settings) if f.name == "kind"), None)
    hint = typing.get_type_hints(settings).get("kind")
    if field is None or not isinstance(field.default, str) or typing.get_args(hint) != (field.default,):
        raise TypeError(f"{settings.__name__}: an objective's settings need a field kind: Literal['name'] = 'name'")
    return field.default


def resolve_all() -> Mapping[str, type]:
    """kind → component class, every import path resolved (a test checks that each built-in names a real class)."""
    import models.settings  # noqa: F401

    return {k: s.component_class() for k, s in _REGISTRY.items()}
