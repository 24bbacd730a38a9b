"""Configuration of the ``eval_sets`` stage: where the evaluation sets are (:class:`EvalSources`, ``sources.eval``)
and how to read them (:class:`EvalSetsSettings`, ``corpora.eval_sets``).

Both are built from the evaluation tasks' declarations (``pipelines.eval_task_registry``) when this module is first
imported: ``sources.eval`` has one key per task that reads a set of its own (``EvalSet.source``, in task order), then
``hub`` (mteb's hub copies, which feed the same tables); ``corpora.eval_sets`` has each set's own settings
(``EvalSet.settings``), then ``hub_subsets``. Each kind of entry is defined beside the reader that reads it
(``sts.StsSource``, ``classification.ClassificationSource`` … on the shared base of ``source_config``); no reader and
no task module imports this module.

The form configs have used so far stays valid: ``sources.eval: {tatoeba: DIR, sts: DIR, clustering: DIR}``, where a
plain ``sts`` path is one SemEval-layout folder holding STS17 (``{format: semeval, path: DIR, dataset: sts17}``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, create_model, field_validator, model_serializer

from pipelines.eval_sets.hub import HUB_DATASETS
from pipelines.eval_sets.source_config import StrictConfig
from pipelines.eval_task_registry import eval_sets
from pipelines.key_defaults import without_defaults


class _SourcesBase(StrictConfig):
    """What ``EvalSources`` does besides holding its keys."""

    @field_validator("hub", check_fields=False)
    @classmethod
    def _known_hub(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in HUB_DATASETS]
        if unknown:
            raise ValueError(f"unknown mteb datasets {unknown}; known: {sorted(HUB_DATASETS)}")
        return value

    def configured(self) -> bool:
        """True when at least one evaluation set is configured."""
        return any(getattr(self, s.key) for s in eval_sets()) or bool(self.hub)

    def files(self) -> dict[str, Path]:
        """Every local input file, keyed ``kind/…`` (for the stage's cache key); a missing folder raises naming the
        ``sources.eval`` key."""
        out: dict[str, Path] = {}
        for s in eval_sets():
            value = getattr(self, s.key)
            if value:
                out.update(s.files(value))
        return out


class _SettingsBase(StrictConfig):
    """What ``EvalSetsSettings`` does besides holding its keys."""

    @field_validator("hub_subsets", check_fields=False)
    @classmethod
    def _hub_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = [k for k in value if k not in HUB_DATASETS]
        if unknown:
            raise ValueError(f"corpora.eval_sets.hub_subsets: unknown mteb datasets {unknown}; known: "
                             f"{sorted(HUB_DATASETS)}")
        return value

    @model_serializer(mode="wrap")
    def _key(self, handler: Any) -> Any:
        """The sets' settings added after configs were written (``EvalSet.key_when_set``: an unset
        ``clustering_max_per_language`` …) stay out of the dump while at their default, so cache keys of configs
        without them do not move."""
        return without_defaults(self, handler(self), [n for s in eval_sets() for n in s.key_when_set])


def _sources_model() -> type[StrictConfig]:
    fields: dict[str, Any] = {s.key: s.source for s in eval_sets()}
    fields["hub"] = (list[str], Field(default_factory=list, description=f"mteb datasets to load from the hub when "
                                                                        f"online: {', '.join(HUB_DATASETS)}"))
    return create_model("EvalSources", __base__=_SourcesBase, __module__=__name__, **fields)


def _settings_model() -> type[StrictConfig]:
    fields: dict[str, Any] = {name: spec for s in eval_sets() for name, spec in s.settings.items()}
    fields["hub_subsets"] = (dict[str, list[str]], Field(
        default_factory=dict, description="mteb dataset → subsets to load (deu-eng, zh-en, de, eng_Latn); absent or "
                                          "empty = all"))
    return create_model("EvalSetsSettings", __base__=_SettingsBase, __module__=__name__, **fields)


EvalSources = _sources_model()
EvalSetsSettings = _settings_model()
