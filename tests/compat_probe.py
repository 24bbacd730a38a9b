"""Load sentence-transformers folders as a user with another transformers would. Run by
``tests/test_model_folder_compat.py`` with the compat environment's Python (``make test-compat``: transformers 4.x
< 4.58, sentence-transformers with its ONNX extra, torch CPU); it imports nothing of polysent::

    .venv-compat/bin/python tests/compat_probe.py --texts TEXTS.json --out OUT NAME=FOLDER …

For each folder (copied first, so the ONNX export cannot touch it): the ``tokenizer_class`` of its
``tokenizer_config.json`` must be one this transformers has, and the tokenizer ``SentenceTransformer`` loads must be of
that class (no silent fallback); the folder is loaded with the torch backend (warnings of transformers and
sentence-transformers recorded) and with ``backend="onnx"``, and each encodes the texts (normalised) into
``OUT/NAME.<backend>.npy``. ``OUT/probe.json`` holds the versions and, per folder, the problems (a class or a loader
argument this version lacks shows up as a failed load, with the exception) and the warnings.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import traceback
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("transformers", "sentence-transformers", "tokenizers", "torch", "optimum", "optimum-onnx", "onnxruntime")
BACKENDS = ("torch", "onnx")


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def tokenizer_class_problems(folder: Path) -> list[str]:
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    cfg_file = folder / "tokenizer_config.json"
    name = json.loads(cfg_file.read_text(encoding="utf-8")).get("tokenizer_class") if cfg_file.is_file() else None
    if name is not None and tokenizer_class_from_name(name) is None:
        return [f"tokenizer_config.json: tokenizer_class {name!r} is no class of transformers "
                f"{metadata.version('transformers')}"]
    return []


def load_and_encode(folder: Path, backend: str, texts: list[str]) -> tuple[Any, Any, list[str]]:
    """(model, embeddings, warnings of transformers / sentence-transformers while loading)."""
    from sentence_transformers import SentenceTransformer

    keep = Keep()
    logging.getLogger().addHandler(keep)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = SentenceTransformer(str(folder), device="cpu", backend=backend)
    finally:
        logging.getLogger().removeHandler(keep)
    said = [f"{r.name}: {r.getMessage()}" for r in keep.records if r.name.startswith(("sentence_transformers",
                                                                                          "transformers"))]
    said += [f"{w.category.__name__}: {w.message}" for w in caught if "transformers" in str(w.filename)]
    return model, model.encode(texts, normalize_embeddings=True, convert_to_numpy=True), said


def probe(name: str, folder: Path, texts: list[str], out: Path) -> dict[str, Any]:
    import numpy as np

    result: dict[str, Any] = {"folder": str(folder), "problems": tokenizer_class_problems(folder), "warnings": {},
                              "tokenizer": None, "embeddings": {}}
    named = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("tokenizer_class")
    for backend in BACKENDS:
        with tempfile.TemporaryDirectory(prefix=f"compat-{name}-{backend}-") as tmp:
            copy = Path(tmp) / folder.name
            shutil.copytree(folder, copy)
            try:
                model, emb, said = load_and_encode(copy, backend, texts)
            except Exception as exc:
                result["problems"].append(f"{backend} backend: {type(exc).__name__}: {exc}")
                result[f"{backend}_traceback"] = traceback.format_exc()
                continue
        loaded = type(model.tokenizer).__name__
        result["tokenizer"] = loaded
        if named is not None and loaded != named:
            result["problems"].append(f"{backend} backend: tokenizer_config.json names {named}, "
                                      f"sentence-transformers loaded {loaded}")
        result["warnings"][backend] = said
        np.save(out / f"{name}.{backend}.npy", np.asarray(emb, dtype=np.float32))
        result["embeddings"][backend] = f"{name}.{backend}.npy"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=Path, required=True, help="a JSON list of strings")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("folders", nargs="+", help="NAME=FOLDER")
    args = parser.parse_args(argv)
    texts = json.loads(args.texts.read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"versions": versions(), "python": sys.version.split()[0], "folders": {}}
    for spec in args.folders:
        name, _, folder = spec.partition("=")
        report["folders"][name] = probe(name, Path(folder), texts, args.out)
    (args.out / "probe.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
