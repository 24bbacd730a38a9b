"""``docs/configuration.md``: the configuration reference, generated from the settings classes themselves.

Every key of a pipeline YAML is a field of a settings class: pydantic models for the data stages' sections (beside
their stages in ``pipelines/``, gathered by ``flows.config.PipelineConfig``) and ``models.settings`` dataclasses for the
model stages' sections (``tokenizer``, ``training``, ``evaluation``; each objective kind's dataclass in its own module
of ``models/objectives/``, each evaluation task's in ``models/evaluation/tasks/``). This module walks that tree from
``PipelineConfig`` — through nested models, lists, mappings, the ``format``-tagged source unions and the
``kind``-tagged objective union — and writes one section per class: its key path, its docstring, and a table of its
keys with type, default and description. A key's description is written where its field is defined, as the field's
attribute docstring — the string literal right below it::

    steps: AtLeastOne = 300
    '''optimizer updates of the run …'''

read here from the class source (``attribute_docstrings``) for dataclasses and pydantic models alike, so a model need
not set pydantic's ``use_attribute_docstrings`` (which reads each class's source as the class is created: about
0.05 s more to import ``flows.config`` on 2 cores, for no reader at run time). A pydantic ``Field(description=…)`` is
read first (kept where the text is computed from a constant), and a dataclass field that code adds to a class (the
``evaluation`` section's one key per evaluation task) carries its text as ``metadata["description"]``. A docstring is
text, not data: it enters no cache key.
A page of ``docs/`` a description names (``docs/training.md#vmsst``) becomes a link.
Nothing is typed by hand, so the page cannot drift from what ``load_config`` accepts; ``tests/test_config_reference.py``
fails when the committed page differs from what this module writes, and when a key has no description.

    python -m flows.config_reference            # rewrite docs/configuration.md
    python -m flows.config_reference --check    # exit 1 when it differs (what the test checks)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Tag
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "configuration.md"


@dataclass
class Key:
    name: str
    type: str
    default: str
    description: str


@dataclass
class Section:
    cls: type
    path: str  # the first key path the class is found at (``corpora.bitext_pairs``, ``sources.bitext[]``)
    tag: str = ""  # ``format: tmx`` / ``kind: mpcl`` for a member of a tagged union
    also: list[str] = field(default_factory=list)  # further key paths of the same class
    keys: list[Key] = field(default_factory=list)

    @property
    def title(self) -> str:
        path = self.path or "top level"
        return f"{path} ({self.tag})" if self.tag else path

    @property
    def heading(self) -> str:
        path = f"`{self.path}`" if self.path else "The top level"
        return f"{path} ({self.tag})" if self.tag else path

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")


# -- walking the settings tree --------------------------------------------------------------------------------------
class Reference:
    """The sections of the reference, in the order a reader meets the keys in a config file."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self._by_class: dict[tuple[type, str], Section] = {}

    def visit(self, cls: type, path: str, tag: str = "") -> Section:
        known = self._by_class.get((cls, tag))
        if known is not None:
            if path not in (known.path, *known.also):
                known.also.append(path)
            return known
        section = Section(cls, path, tag)
        self._by_class[(cls, tag)] = section
        self.sections.append(section)
        for name, tp, default, description in _fields(cls):
            section.keys.append(Key(name, self.type_text(tp, f"{path}.{name}" if path else name),
                                    _default_text(default), description))
        return section

    def type_text(self, tp: Any, path: str) -> str:
        """``tp`` in words; a settings class met on the way gets its own section (linked)."""
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            base, *meta = args
            if _tags(base):  # a ``format``-tagged union (bitext, STS sources)
                return self._tagged(base, path)
            bounds = [b for m in meta if (b := _bound_text(m))]
            members = typing.get_args(base)
            if bounds and typing.get_origin(base) in (typing.Union, types.UnionType) and type(None) in members:
                # pydantic's ``int | None = Field(ge=2)``: the bound is the integer's
                rest = [a for a in members if a is not type(None)]
                inner = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
                return f"{self.type_text(typing.Annotated[(inner, *meta)], path)} or null"
            text = self.type_text(base, path)
            return f"{text} {' and '.join(bounds)}" if bounds else text
        if origin in (typing.Union, types.UnionType):
            members = [a for a in args if a is not type(None)]
            text = " or ".join(self.type_text(a, path) for a in members)
            return f"{text} or null" if type(None) in args else text
        if origin is Literal:
            values = ", ".join(f"`{_scalar(a)}`" for a in args)
            return values if len(args) == 1 else f"one of {values}"
        if origin in (list, tuple):
            item = args[0] if args else Any
            if isinstance(item, type) and hasattr(item, "settings_kinds"):  # the objectives: told apart by kind
                links = [self._link(self.visit(cls, f"{path}[]", f"kind: {kind}"))
                         for kind, cls in sorted(item.settings_kinds().items())]
                return "list of objectives, each a mapping with a `kind`: " + ", ".join(links)
            return f"list of {_plural(self.type_text(item, f'{path}[]'))}"
        if origin is dict:
            return f"mapping of names to {_plural(self.type_text(args[1], f'{path}.<name>'))}"
        if _is_settings(tp):
            return self._link(self.visit(tp, path))
        return {str: "string", int: "integer", float: "number", bool: "`true` or `false`", Path: "path",
                type(None): "null", Any: "any value"}.get(tp, getattr(tp, "__name__", str(tp)))

    def _tagged(self, union: Any, path: str) -> str:
        members = _tags(union)
        links = [self._link(self.visit(cls, path, f"format: {tag}")) for tag, cls in members]
        return "a mapping told apart by `format`: " + ", ".join(links)

    @staticmethod
    def _link(section: Section) -> str:
        return f"[{section.tag or section.cls.__name__}](#{section.anchor})"


_PLURALS = {"string": "strings", "integer": "integers", "number": "numbers", "path": "paths"}


def _plural(text: str) -> str:
    """``string or integer`` → ``strings or integers``; anything else as it is."""
    parts = text.split(" or ")
    return " or ".join(_PLURALS[p] for p in parts) if all(p in _PLURALS for p in parts) else text


def _is_settings(tp: Any) -> bool:
    return isinstance(tp, type) and (issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp))


def _tags(union: Any) -> list[tuple[str, type]]:
    """(tag, class) of each member of a pydantic tagged union ``Annotated[X, Tag("x")] | …``; [] for anything else."""
    if typing.get_origin(union) not in (typing.Union, types.UnionType):
        return []
    found = []
    for arg in typing.get_args(union):
        if typing.get_origin(arg) is not typing.Annotated:
            return []
        base, *meta = typing.get_args(arg)
        tag = next((m.tag for m in meta if isinstance(m, Tag)), None)
        if tag is None:
            return []
        found.append((tag, base))
    return found


def _fields(cls: type) -> Iterator[tuple[str, Any, Any, str]]:
    """(name, type, default, description) of every key of a settings class, in definition order. A required key's
    default is ``_REQUIRED``; the description is the field's attribute docstring (``attribute_docstrings``) — for a
    pydantic model, pydantic's own ``description`` first (``Field(description=…)``, or the docstring pydantic read
    itself where the model sets ``use_attribute_docstrings``); for a dataclass field a class gains from code, without
    source to read (``evaluation.<task>``: ``models.evaluation.settings``), its ``metadata["description"]``."""
    docstrings = attribute_docstrings(cls)
    if issubclass(cls, BaseModel):
        for name, info in cls.model_fields.items():
            yield name, _pydantic_type(info), _pydantic_default(info), \
                _markdown(info.description or docstrings.get(name, ""))
        return
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = _REQUIRED
        text = docstrings.get(f.name) or f.metadata.get("description", "")  # a field made by code: its metadata
        yield f.name, hints[f.name], default, _markdown(text)


def _pydantic_type(info: FieldInfo) -> Any:
    """A pydantic field's annotation with its constraints (``ge``, ``min_length`` …) put back as ``Annotated``
    metadata, where pydantic keeps them apart."""
    tp = info.annotation
    meta = [m for m in info.metadata if _bound_text(m)]
    return typing.Annotated[(tp, *meta)] if meta else tp


def _pydantic_default(info: FieldInfo) -> Any:
    if info.is_required():
        return _REQUIRED
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return info.default


class _Required:
    pass


_REQUIRED = _Required()


def _bound_text(meta: Any) -> str:
    """A constraint in words: ``models.settings.Range`` and annotated_types' ``Ge``/``Gt``/``Le``/``Lt``/``MinLen``."""
    if hasattr(meta, "bounds") and callable(meta.bounds):  # models.settings.Range
        return " and ".join(f"{op} {b:g}" for _, op, b in meta.bounds())
    for attr, op in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
        if type(meta).__name__.lower() == attr:
            return f"{op} {getattr(meta, attr):g}"
    if type(meta).__name__ == "MinLen":
        return f"(at least {meta.min_length})"
    if type(meta).__name__ == "MaxLen":
        return f"(at most {meta.max_length})"
    return ""


def attribute_docstrings(cls: type) -> dict[str, str]:
    """Field name → its attribute docstring: the string literal on the lines right after the field in the class
    body (``steps: AtLeastOne = 300`` and below it the text of ``steps``), as Sphinx autodoc, mkdocstrings and
    pydantic's ``use_attribute_docstrings`` read it. The classes of ``cls``'s MRO that define fields (dataclasses,
    pydantic models) are read base first, so a subclass's docstring of a field replaces its base's. A class whose
    source cannot be read has none."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        own = vars(klass)
        if not ("__dataclass_fields__" in own or ("__pydantic_fields__" in own and klass is not BaseModel)):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = getattr(ast.parse(source).body[0], "body", [])
        for stmt, after in itertools.pairwise(body):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                out[stmt.target.id] = inspect.cleandoc(after.value.value)
    return out


# -- text -----------------------------------------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if text == "" or re.search(r"[:#{}\[\],&*?|<>=!%@`'\"]|^\s|\s$", text) or text in ("null", "true", "false"):
        return '"' + text.replace('"', '\\"') + '"'
    return text


def _flow(value: Any) -> str:
    """A default value as YAML flow text (what one would write in the config)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = getattr(value, "kind", None)
        return f"{{kind: {kind}}}" if kind else "{}"
    if isinstance(value, BaseModel):
        return "{}"
    return _scalar(value)


def _default_text(default: Any) -> str:
    if default is _REQUIRED:
        return "**required**"
    if isinstance(default, BaseModel) or (dataclasses.is_dataclass(default) and not isinstance(default, type)):
        return "its defaults"
    return f"`{_flow(default)}`"


def _literals(text: str) -> str:
    """rST literals and roles (````x````, ``:class:`x```) as Markdown code (```x```)."""
    text = re.sub(r":(?:class|func|mod|data|meth|attr):`~?([^`]+)`", r"``\1``", text)
    return text.replace("``", "`")


_DOCS_PAGE = re.compile(r"`?\bdocs/([a-z0-9_-]+\.md(?:#[a-z0-9-]+)?)`?")


def _markdown(description: str) -> str:
    """A field's description as one Markdown paragraph: rST literals as code, its lines joined, and a page of
    ``docs/`` it names (``docs/training.md#vmsst``) a link from this page, which lives in ``docs/`` too."""
    text = " ".join(_literals(description).split())
    return _DOCS_PAGE.sub(r"[docs/\1](\1)", text)


def _docstring(cls: type) -> str:
    """A class docstring as Markdown: rST literals to backticks, lines joined into paragraphs, list items kept."""
    doc = inspect.getdoc(cls) if cls.__doc__ else None
    if not doc or (issubclass(cls, BaseModel) and doc == inspect.getdoc(BaseModel)):
        return ""
    doc = _literals(doc)
    paragraphs, current = [], []
    for line in doc.splitlines():
        stripped = line.strip()
        if not stripped:
            if current:
                paragraphs.append(" ".join(current))
            current = []
        elif stripped.startswith(("- ", "* ")):
            if current:
                paragraphs.append(" ".join(current))
            current = ["- " + stripped[2:]]
        else:
            current.append(stripped)
    if current:
        paragraphs.append(" ".join(current))
    out = []
    for i, p in enumerate(paragraphs):
        is_item = p.startswith("- ")
        if out and not (is_item and paragraphs[i - 1].startswith("- ")):
            out.append("")
        out.append(p)
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(reference: Reference | None = None) -> str:
    from flows import config

    if reference is None:
        reference = Reference()
        reference.visit(config.PipelineConfig, "")
    intro = _docstring(type("Intro", (), {"__doc__": config.__doc__}))
    lines = [
        "# Configuration reference",
        "",
        "<!-- generated by `python -m flows.config_reference` from the settings classes; do not edit -->",
        "Generated by `python -m flows.config_reference` from the settings classes themselves (`flows/config.py`,",
        "the pydantic models beside each stage in `pipelines/`, the `models/settings.py` dataclasses and each",
        "objective's dataclass in `models/objectives/`); `tests/test_config_reference.py` fails when this page differs",
        "from what it generates. Do not edit it by hand: change the class, then rerun the command.",
        "",
        intro,
        "",
        "Key paths: `a.b` is a key `b` inside the mapping `a`; `a[]` an item of the list `a`; `a.<name>` a mapping",
        "whose keys you choose (a training run's name, a mining entry's name). A default `its defaults` means the",
        "section exists with every key at its default when the config leaves it out.",
        "",
        "## Sections",
        "",
    ]
    lines += [f"- [{s.heading}](#{s.anchor}) — `{s.cls.__name__}`" for s in reference.sections]
    for s in reference.sections:
        lines += ["", f'<a id="{s.anchor}"></a>', "", f"## {s.heading}", ""]
        what = f"`{s.cls.__name__}`"
        if s.also:
            what += "; also at " + ", ".join(f"`{p}`" for p in s.also)
        lines += [what, ""]
        doc = _docstring(s.cls)
        if doc:
            lines += [doc, ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        lines += [f"| `{k.name}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.description)} |" for k in s.keys]
    return "\n".join(lines) + "\n"


def documented_paths(reference: Reference) -> set[str]:
    """Every key path the page documents, list items and named entries written ``[]`` and ``<name>``."""
    out = set()
    for s in reference.sections:
        for base in (s.path, *s.also):
            prefix = f"{base}." if base else ""
            out.update(f"{prefix}{k.name}" for k in s.keys)
    return out


def undocumented(raw: Any, documented: set[str], prefix: str = "") -> list[str]:
    """Key paths of ``raw`` (a config, or part of one, as YAML data) that the page does not document. A mapping whose
    keys the user names (``training.<name>``) is followed through ``<name>``; a free-form mapping (``dumps: {en: …}``)
    ends at its key; list items are ``[]``."""
    out: list[str] = []
    if isinstance(raw, list):
        for item in raw:
            out += undocumented(item, documented, f"{prefix}[]")
    elif isinstance(raw, dict):
        for key, value in raw.items():
            path, named = (f"{prefix}.{key}" if prefix else str(key)), f"{prefix}.<name>"
            if path in documented:
                out += undocumented(value, documented, path)
            elif any(p.startswith(f"{named}.") for p in documented):
                out += undocumented(value, documented, named)
            elif prefix not in documented:
                out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m flows.config_reference", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the page differs from what is generated")
    p.add_argument("--out", type=Path, default=PAGE, help=f"the page (default: {PAGE.relative_to(REPO)})")
    a = p.parse_args(argv)
    text = render()
    current = a.out.read_text(encoding="utf-8") if a.out.is_file() else None
    if current == text:
        print(f"{a.out}: up to date")
        return 0
    if a.check:
        print(f"{a.out} differs from the settings classes: run `python -m flows.config_reference`", file=sys.stderr)
        return 1
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text, encoding="utf-8")
    print(f"{a.out}: written ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
