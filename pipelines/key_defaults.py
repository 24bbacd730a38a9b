"""Settings fields added after configs were written, kept out of a dump while they hold their default.

A node's cache key is its settings' dump (``flows.graph.canonical`` / ``portable``). A field added to a settings class
enters every dump, so every cached artifact of every existing config would rebuild though nothing it computes
changed. A settings class lists such fields and drops them from its dump while they equal their default; a config
that sets one gets a new key, as it must.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel


def without_defaults(model: BaseModel, data: Any, names: Iterable[str]) -> Any:
    """``data`` (``model``'s dump, from a ``model_serializer(mode="wrap")`` handler) without the fields ``names`` whose
    value equals the field's default."""
    if not isinstance(data, dict):
        return data
    fields = type(model).model_fields
    for name in names:
        if getattr(model, name) == fields[name].get_default(call_default_factory=True):
            data.pop(name, None)
    return data
