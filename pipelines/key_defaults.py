"""Settings fields added after configs were written, kept out of a pydantic settings dump while they hold their
default: the pydantic side of the one cache-key rule (``contract.cache_keys``, where the rule and its reasons are).

A node's cache key is its settings' dump (``flows.graph.canonical`` / ``portable``). A pydantic settings class derives
from :class:`KeyWhenSet` and names its late fields in ``KEY_WHEN_SET``; its dump (at any nesting level, in either
mode) then leaves each out while it equals its default. :func:`without_defaults` is the same rule for a class that
writes its own ``model_serializer`` with the names inline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, model_serializer

from contract.cache_keys import without_unset


def without_defaults(model: BaseModel, data: Any, names: Iterable[str]) -> Any:
    """``data`` (``model``'s dump, from a ``model_serializer(mode="wrap")`` handler) without the fields ``names`` whose
    value equals the field's default."""
    names = tuple(names)
    return without_unset(type(model), data, {n: getattr(model, n) for n in names}, names)


class KeyWhenSet(BaseModel):
    """A pydantic settings class whose ``KEY_WHEN_SET`` fields stay out of its dump (and cache keys) while unset."""

    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _key(self, handler: Any) -> Any:
        """The dump without the ``KEY_WHEN_SET`` fields that hold their default (``contract.cache_keys``)."""
        return without_defaults(self, handler(self), self.KEY_WHEN_SET)
