"""docs/configuration.md is what ``flows.config_reference`` generates from the settings classes, and it documents every
key the project's own configs use: a field added, renamed or given another default changes the page, and this test
fails until the page is regenerated (``python -m flows.config_reference``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from conftest import REPO
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from flows.config_reference import PAGE, Reference, documented_paths, main, render, undocumented
from models.settings import Range


def test_the_committed_page_is_what_the_settings_classes_generate() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), "run `python -m flows.config_reference`"
    assert main(["--check"]) == 0


def test_check_fails_on_a_stale_page_and_leaves_it_alone(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# an old page\n", encoding="utf-8")
    assert main(["--check", "--out", str(stale)]) == 1
    assert stale.read_text(encoding="utf-8") == "# an old page\n"
    assert main(["--out", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == render()
    assert main(["--check", "--out", str(stale)]) == 0


def _reference() -> Reference:
    from flows.config import PipelineConfig

    ref = Reference()
    ref.visit(PipelineConfig, "")
    return ref


def test_every_key_of_every_project_config_is_documented() -> None:
    documented = documented_paths(_reference())
    configs = sorted((REPO / "configs").rglob("*.yaml"))
    assert len(configs) >= 13
    missing: list[str] = []
    for config in configs:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        missing += [f"{config.relative_to(REPO)}: {p}" for p in undocumented(raw, documented)]
    assert not missing, missing
    # the walk does reach deep keys: objectives of each kind, tagged sources, mining sides
    for path in ("training.<name>.objectives[].temperature", "training.<name>.encoder.pretrained",
                 "sources.bitext[].src_file", "sources.bitext[].src_column", "sources.bitext[].hub_id",
                 "sources.eval.sts[].splits", "mining.<name>.src.max_sentences", "mining.<name>.index.nprobe",
                 "corpora.bitext_pairs.quota_per_language", "evaluation.xsim.pivot", "execution.address"):
        assert path in documented, path


def test_the_page_states_types_defaults_ranges_and_descriptions() -> None:
    page = render()
    lines = page.splitlines()

    def row(section: str, key: str) -> str:
        start = lines.index(f"## {section}")
        return next(line for line in lines[start:] if line.startswith(f"| `{key}` |"))

    assert row("`corpora.bitext_pairs`", "quota_per_language") == \
        "| `quota_per_language` | integer ≥ 1 | `1000` | equal: pairs kept per (pivot, language) |"
    assert row("`corpora.bitext_pairs`", "pivots").startswith(
        "| `pivots` | list of strings (at least 1) | `[en, es]` | every pair is kept as (pivot, other language)")
    assert row("`training.<name>`", "precision").startswith("| `precision` | one of `auto`, `fp32`, `bf16` | `auto` |")
    assert row("`training.<name>.objectives[]` (kind: mpcl)", "temperature").startswith(
        "| `temperature` | number > 0 | `0.05` |")
    assert row("`sources.bitext[]` (format: parquet)", "src_column") .startswith("| `src_column` | string | `src` |")
    assert row("`sources.bitext[]` (format: tmx)", "format").startswith("| `format` | `tmx` | **required** |")
    assert row("`mining.<name>.index`", "nlist").endswith(  # a dataclass field's attribute docstring
        "| ivf: inverted lists per shard (null: 4·√rows rounded); always capped so that every list has at least 39 of "
        "the shard's rows to train on |")
    assert row("`training.<name>.objectives[]` (kind: vmsst)", "kind").endswith(  # a docs/ page it names, linked
        "and its baselines ([docs/training.md#vmsst](training.md#vmsst)) |")
    assert row("`evaluation`", "tatoeba").startswith("| `tatoeba` | [TatoebaSettings](#evaluation-tatoeba) or null "
                                                     "| its defaults |")
    assert row("`evaluation`", "xsim").endswith(  # a section the task registry adds: its field's metadata
        "(`eval_parallel`); null: the task does not run |")
    # every registered objective kind has its section, linked from training.<name>.objectives
    from models.objective_registry import kinds

    for kind in kinds():
        anchor = f"training-name-objectives-kind-{kind.replace('_', '-')}"
        assert f'<a id="{anchor}"></a>' in page and f"(#{anchor})" in page, kind
    # every link to a section has its anchor
    import re

    for target in re.findall(r"\]\(#([a-z0-9-]+)\)", page):
        assert f'<a id="{target}"></a>' in page, target


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _A(_Strict):
    format: Literal["a"]
    size: int | None = Field(None, ge=2, description="how big")
    """pydantic's own ``description`` comes first"""


class _B(_Strict):
    """The B format."""

    model_config = ConfigDict(use_attribute_docstrings=True)
    format: Literal["b"]
    names: list[str] = Field(default_factory=lambda: ["x", "y"])
    """the names, read by pydantic
    too (``use_attribute_docstrings``)"""


def _format(v: Any) -> str:
    return v["format"] if isinstance(v, dict) else v.format


@dataclass(frozen=True)
class _Inner:
    """Inner settings, ``code`` in rST quotes."""

    rate: Annotated[float, Range(gt=0.0, lt=1.0)] = 0.5  # a comment is no description
    """a fraction, see
    docs/training.md#vmsst"""
    mode: Literal["on", "off"] = "on"


class _Top(_Strict):
    name: str
    items: list[Annotated[Annotated[_A, Tag("a")] | Annotated[_B, Tag("b")], Discriminator(_format)]] = \
        Field(default_factory=list)
    """the items (a model without ``use_attribute_docstrings``: read from its source)"""
    runs: dict[str, _Inner] = Field(default_factory=dict)


def test_the_generator_reads_tagged_unions_named_mappings_dataclass_ranges_and_attribute_docstrings() -> None:
    ref = Reference()
    ref.visit(_Top, "")
    by_title = {s.title: s for s in ref.sections}
    assert list(by_title) == ["top level", "items[] (format: a)", "items[] (format: b)", "runs.<name>"]
    keys = {(s.title, k.name): k for s in ref.sections for k in s.keys}
    assert keys[("items[] (format: a)", "size")].type == "integer ≥ 2 or null"
    assert keys[("items[] (format: a)", "size")].description == "how big"
    assert keys[("items[] (format: b)", "names")].default == "`[x, y]`"
    assert keys[("runs.<name>", "rate")].type == "number > 0 and < 1"
    assert keys[("items[] (format: b)", "names")].description == \
        "the names, read by pydantic too (`use_attribute_docstrings`)"
    assert _B.model_fields["names"].description == "the names, read by pydantic\ntoo (``use_attribute_docstrings``)"
    assert keys[("runs.<name>", "rate")].description == "a fraction, see [docs/training.md#vmsst](training.md#vmsst)"
    assert keys[("runs.<name>", "mode")].description == ""
    assert keys[("top level", "items")].description == \
        "the items (a model without `use_attribute_docstrings`: read from its source)"
    assert _Top.model_fields["items"].description is None
    assert keys[("runs.<name>", "mode")].type == "one of `on`, `off`"
    assert keys[("top level", "name")].default == "**required**"
    assert keys[("top level", "runs")].type == "mapping of names to [_Inner](#runs-name)"
    assert documented_paths(ref) == {"name", "items", "runs", "items[].format", "items[].size", "items[].names",
                                     "runs.<name>.rate", "runs.<name>.mode"}


def undescribed(reference: Reference) -> set[str]:
    """Key paths of the reference with an empty description (a tagged section's keys carry the tag:
    ``x.y (kind: z)``)."""
    return {f"{s.path}.{k.name}".removeprefix(".") + (f" ({s.tag})" if s.tag else "")
            for s in reference.sections for k in s.keys if not k.description.strip()}


def test_the_description_check_finds_a_key_without_one() -> None:
    ref = Reference()
    ref.visit(_Top, "")
    assert undescribed(ref) == {"name", "runs", "items[].format (format: a)", "items[].format (format: b)",
                                "runs.<name>.mode"}


def test_every_key_has_a_description() -> None:
    """Every key of docs/configuration.md says what it does, written where the field is defined: its attribute
    docstring (the string right after the field), or pydantic's ``Field(description=…)`` where a model still has one.
    A description is text about a setting, not its value: it enters no cache key (``tests/test_dag_specs.py``)."""
    missing = sorted(undescribed(_reference()))
    assert not missing, f"keys without a description: {missing}"
