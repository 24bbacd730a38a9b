"""The objective registry: the base of every objective's settings, and the table of objective kinds.

An objective is one module, ``models/objectives/<kind>.py`` (or ``<kind>/__init__.py`` with the parts only it uses
beside it, as ``ease/``), holding its settings dataclass (registered here with ``@objective`` where it is defined), its
component (batch building and forward, ``models.training.components.Component``) and its loss. Adding one is that file
and its test: the registry imports every module of the ``models.objectives`` package (``pkgutil`` over the package's
``__path__``, names starting with ``_`` skipped) the first time a kind is asked for, so nothing else lists the
objectives. What asks:

* the settings reader (``models.settings_io``, for the pipeline config and for job files alike) reads the
  ``objectives`` list as a union told apart by ``kind`` whose members are ``kinds()`` — the error for an unknown kind
  lists the registered ones (``expected one of 'contrastive', 'mpcl', …``); a mapping without ``kind`` is
  ``DEFAULT_KIND``;
* ``objective_tables`` → ``TrainSettings.tables()`` and the DAG's wiring of corpus tables to training nodes;
  ``objective_languages`` → what the report says each objective keeps of its corpora; ``objective_citation`` → the
  paper the model card cites for it;
* ``spec_of(o).required_rows(o)`` → ``models.training.components.refuse_empty_corpora``.

The trainer builds an objective's component through the settings object itself (``Objective.build``: the component
class that declared ``builds=`` the settings class), and the pipeline finds the models an objective reads besides the
student (a teacher) through ``Objective.models`` / ``Objective.with_models``: no code outside an objective's module
tests its kind or its fields.

This module imports nothing of the project and neither torch nor pydantic: the pipeline's config loader lists the kinds
without loading torch (the objective modules take torch lazily, ``models.lazy_torch``).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

S = TypeVar("S")
Settings = TypeVar("Settings", bound="Objective")
Need = tuple[str, str, tuple[str, ...]]  # (table, filter column, values): rows an objective must find; () = any row
DEFAULT_KIND = "contrastive"  # the kind of an ``objectives`` entry that names none
OBJECTIVES_PACKAGE = "models.objectives"


@dataclass(frozen=True)
class Citation:
    """The paper an objective follows: authors, year, title and venue in one line (``text``), and where to read it
    (``url``). Defined in the objective's module and registered with it (``@objective(citation=…)``); the model card
    cites it from there."""

    text: str
    url: str


class Objective:
    """Base of every objective's settings dataclass (no fields of its own, so each dataclass keeps its field order;
    field order and defaults are part of every training cache key through ``dataclasses.asdict``).

    A subclass is a frozen dataclass with ``kind: Literal["<kind>"] = "<kind>"``, ``weight`` and ``batch_size``; its
    component class names it (``class <Kind>Component(Component, builds=<Kind>Objective)``), and ``build`` constructs
    that class. ``models``/``with_models``: the model ids it reads besides the student (none by default)."""

    kind: str
    weight: float
    batch_size: int
    # fields added after rows and caches were keyed with the objective: left out of a cache key while at their default
    # (the one rule, ``contract.cache_keys``), so a run that does not use one keeps the key it had before it existed
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ()

    def build(self, name: str, tables: Mapping[str, Any], settings: Any, stream: int, device: Any,
              student: Any) -> Any:
        """This objective's training component (a ``models.training.components.Component``), named ``name``
        (``kind``, ``kind.2`` …), fed by ``tables`` (corpus table → Parquet path), for the run's ``settings``
        (``models.settings.TrainSettings``) on ``device``, training ``student`` (``models.encoder.SentenceEncoder``):
        the component class bound to this settings class (``component_of``), constructed from exactly these. Typed
        loosely here: this module sits below the components and settings it would name."""
        component = component_of(type(self))
        if component is None:
            raise NotImplementedError(
                f"objective {self.kind!r}: no component builds {type(self).__name__}; declare "
                f"class <Kind>Component(Component, builds={type(self).__name__}) in its module")
        return component(name, self, tables, settings, stream, device, student)

    def models(self) -> dict[str, str]:
        """role → model id of every model the objective loads besides the student (``teacher`` …)."""
        return {}

    def with_models(self: Settings, resolve: Callable[[str, str], str]) -> Settings:
        """A copy with each of ``models()``'s ids replaced by ``resolve(role, id)`` (a resolved folder)."""
        return self

    @classmethod
    def settings_kinds(cls) -> dict[str, type]:
        return kinds()


@dataclass(frozen=True)
class ObjectiveSpec:
    """What the pipeline knows of one objective kind.

    ``tables(o)``: the corpus tables an objective with settings ``o`` reads (its DAG inputs, in a fixed order).
    ``needs(o)``: (table, column, values) the objective must find rows in before training starts; by default any row of
    each of its tables. ``languages(o)``: the languages the objective restricts itself to (empty: every language of
    its corpora); by default its ``languages`` field, if it has one. ``citation``: the paper it follows (none: listed
    without one)."""

    kind: str
    settings: type
    tables: Callable[[Any], tuple[str, ...]]
    needs: Callable[[Any], list[Need]] | None = None
    languages: Callable[[Any], tuple[str, ...]] | None = None
    citation: Citation | None = None

    def required_rows(self, o: Any) -> list[Need]:
        return self.needs(o) if self.needs is not None else [(t, "", ()) for t in self.tables(o)]


_REGISTRY: dict[str, ObjectiveSpec] = {}
_COMPONENTS: dict[type, type] = {}  # settings class → the component class that builds it


def bind_component(settings: type, component: type) -> None:
    """Make ``component`` the class ``settings.build`` constructs. Called by ``models.training.components.Component``
    for each subclass declared ``class <Kind>Component(Component, builds=<Kind>Objective)``; a second class naming the
    same settings is refused."""
    if not (isinstance(settings, type) and issubclass(settings, Objective)):
        raise TypeError(f"{component.__name__}: builds={settings!r} is not an objective's settings class")
    old = _COMPONENTS.get(settings)
    if old is not None and old is not component:
        raise ValueError(f"{component.__name__}: {settings.__name__} is built by {old.__module__}.{old.__name__} "
                         "already")
    _COMPONENTS[settings] = component


def component_of(settings: type) -> type | None:
    """The component class that builds the objective ``settings`` (a settings class), or None when none is bound."""
    return _COMPONENTS.get(settings)


def register_objective(settings: type[S], *, tables: Callable[[Any], tuple[str, ...]] | tuple[str, ...],
                       needs: Callable[[Any], list[Need]] | None = None,
                       languages: Callable[[Any], tuple[str, ...]] | None = None, citation: Citation | None = None,
                       replace: bool = False) -> type[S]:
    """Register the settings dataclass ``settings`` (a frozen dataclass deriving from ``Objective`` whose ``kind``
    field is ``Literal["<kind>"] = "<kind>"``, with ``weight`` and ``batch_size``) under its kind. ``tables``: a
    tuple, or a function of the settings. A kind registered twice by different classes is refused unless
    ``replace``."""
    kind = _kind_of(settings)
    if not (isinstance(settings, type) and issubclass(settings, Objective)):
        raise TypeError(f"objective {kind!r}: {settings.__name__} must derive from models.objective_registry.Objective")
    names = {f.name for f in dataclasses.fields(settings)}
    if missing := sorted({"weight", "batch_size"} - names):
        raise TypeError(f"objective {kind!r}: {settings.__name__} lacks the field(s) {missing} every objective has "
                        "(the trainer weighs its loss and logs its batch)")
    old = _REGISTRY.get(kind)
    if old is not None and not replace and old.settings is not settings:
        raise ValueError(f"objective kind {kind!r} is already registered ({old.settings.__module__}."
                         f"{old.settings.__name__})")
    fixed = tables if callable(tables) else (lambda _o, t=tuple(tables): t)
    _REGISTRY[kind] = ObjectiveSpec(kind, settings, fixed, needs, languages, citation)
    return settings


def objective(*, tables: Callable[[Any], tuple[str, ...]] | tuple[str, ...],
              needs: Callable[[Any], list[Need]] | None = None,
              languages: Callable[[Any], tuple[str, ...]] | None = None,
              citation: Citation | None = None) -> Callable[[type[S]], type[S]]:
    """``register_objective`` as a class decorator, written above ``@dataclass(frozen=True)``."""
    return lambda settings: register_objective(settings, tables=tables, needs=needs, languages=languages,
                                               citation=citation)


def unregister_objective(kind: str) -> None:
    """Remove a kind and its component (a test's toy objective, a plug-in unloaded)."""
    spec = _REGISTRY.pop(kind, None)
    if spec is not None:
        _COMPONENTS.pop(spec.settings, None)


def discover() -> None:
    """Import every objective module of the ``models.objectives`` package (each registers itself). Cheap when nothing
    is new: a folder listing; a module already imported is not imported again."""
    package = importlib.import_module(OBJECTIVES_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{OBJECTIVES_PACKAGE}.{info.name}")


def kinds() -> dict[str, type]:
    """kind → settings dataclass, ``DEFAULT_KIND`` first, then by name (the same order whichever module was imported
    first)."""
    discover()
    order = sorted(_REGISTRY, key=lambda k: (k != DEFAULT_KIND, k))
    return {k: _REGISTRY[k].settings for k in order}


def spec_of(o: Any) -> ObjectiveSpec:
    """The entry of an objective's settings (or of a kind name)."""
    kind = o if isinstance(o, str) else getattr(o, "kind", None)
    if not isinstance(kind, str) or kind not in _REGISTRY:
        discover()
    spec = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if spec is None or not isinstance(o, (str, spec.settings)):
        raise LookupError(f"objective {kind!r} is not registered ({type(o).__name__}); registered kinds: "
                          f"{', '.join(_REGISTRY)} (a module in models/objectives/ defining it with @objective)")
    return spec


def objective_tables(o: Any) -> tuple[str, ...]:
    """The corpus tables an objective reads."""
    return spec_of(o).tables(o)


def objective_languages(o: Any) -> tuple[str, ...]:
    """The languages an objective restricts itself to (empty: every language of its corpora)."""
    spec = spec_of(o)
    return spec.languages(o) if spec.languages is not None else tuple(getattr(o, "languages", ()))


def objective_citation(o: Any) -> Citation | None:
    """The paper an objective (settings, or a kind name) follows, as its module registered it; None when it names
    none."""
    return spec_of(o).citation


def _kind_of(settings: type) -> str:
    if not dataclasses.is_dataclass(settings):
        raise TypeError(f"{settings!r}: an objective's settings must be a dataclass")
    field = next((f for f in dataclasses.fields(settings) if f.name == "kind"), None)
    hint = typing.get_type_hints(settings).get("kind")
    if field is None or not isinstance(field.default, str) or typing.get_args(hint) != (field.default,):
        raise TypeError(f"{settings.__name__}: an objective's settings need a field kind: Literal['name'] = 'name'")
    return field.default
