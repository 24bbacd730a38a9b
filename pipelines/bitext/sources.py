"""Where bitext comes from: one config entry per source, told apart by ``format`` (default ``moses``).

Each format is one class in ``pipelines.bitext.formats`` that knows how to read itself; :data:`BitextSource` is the
union of :data:`~pipelines.bitext.formats.FORMATS` the pipeline config reads ``sources.bitext`` with.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from pipelines.bitext.formats import (
    DEFAULT_FORMAT,
    FORMATS,
    BitextFormat,
    HubSource,
    MinedSource,
    MosesSource,
    NwaySource,
    OpusZipSource,
    ParquetSource,
    TmxSource,
)

__all__ = ["BitextFormat", "BitextSource", "HubSource", "MinedSource", "MosesSource", "NwaySource", "OpusZipSource",
           "ParquetSource", "TmxSource", "format_name"]


def format_name(cls: type[BitextFormat]) -> str:
    """The ``format`` tag of a format class (its ``format: Literal["<name>"]`` field)."""
    (name,) = typing.get_args(cls.model_fields["format"].annotation)
    return name


def _format_of(v: Any) -> str:
    if isinstance(v, dict):
        return v.get("format", DEFAULT_FORMAT)
    return getattr(v, "format", DEFAULT_FORMAT)


BitextSource = Annotated[
    Union[tuple(Annotated[cls, Tag(format_name(cls))] for cls in FORMATS)],  # noqa: UP007 (built from the list)
    Discriminator(_format_of),
]
