"""The exported model folder as a user meets it outside polysent (``models/export_files.py``, ``SentenceEncoder.save``):
plain 🤗 ``transformers`` truncates a long input where the model can read it, loads every weight (nothing missing or
unexpected), the folder carries no loader argument that only sentence-transformers' torch backend accepts, and every
file is world-readable."""

from __future__ import annotations

import json
import logging
import os
import stat
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import SAMPLE

from models.encoder import SentenceEncoder
from models.export_files import has_pooler_weights, positions
from models.settings import EncoderSettings, TokenizerSettings

TINY = EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32, dropout=0.0)
LONG = " ".join(["Der Mann spielt Gitarre und singt dazu ein altes Lied aus seiner Heimat."] * 60)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.training.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tok")
    texts = (SAMPLE / "bitext" / "en-de.de").read_text().splitlines() + \
        (SAMPLE / "bitext" / "en-de.en").read_text().splitlines()
    pq.write_table(pa.table({"text": [t for t in texts if t.strip()]}), root / "t.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=500), {"t": root / "t.parquet"}, root)
    return root / "tokenizer"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory, tokenizer: Path) -> dict[str, object]:
    """The default config's kind of model: a small BERT built from scratch (64 positions), trained at 32 tokens, saved
    under a restrictive umask."""
    torch.manual_seed(0)
    enc = SentenceEncoder.from_settings(TINY, tokenizer)
    out = tmp_path_factory.mktemp("toy") / "model"
    old = os.umask(0o077)
    try:
        enc.save(out)
    finally:
        os.umask(old)
    return {"encoder": enc, "folder": out}


def test_tokenizer_limit_is_the_positions_and_max_seq_length_the_trained_length(toy: dict) -> None:
    folder: Path = toy["folder"]  # type: ignore[assignment]
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    assert tok_cfg["model_max_length"] == config["max_position_embeddings"] == 64
    st = json.loads((folder / "sentence_bert_config.json").read_text())
    assert st["max_seq_length"] == 32  # what training read, and what sentence-transformers truncates at
    assert SentenceEncoder.load(folder).max_length == 32


def test_plain_transformers_reads_a_long_input_and_every_weight(toy: dict) -> None:
    """The issue's failure: ``truncation=True`` cut nothing (``model_max_length`` 1e30) and a 603-token input failed in
    the position embeddings; ``pooler.dense.*`` were reported MISSING."""
    from transformers import AutoModel, AutoTokenizer

    folder: Path = toy["folder"]  # type: ignore[assignment]
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert len(tok(LONG)["input_ids"]) > 600
    batch = tok([LONG, "kurz"], truncation=True, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] == 64
    model, info = AutoModel.from_pretrained(str(folder), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    assert hidden.shape == (2, 64, 32)
    # the pooler written for 🤗 is the identity map (sentence embeddings never read it)
    assert torch.equal(model.pooler.dense.weight, torch.eye(32)) and not model.pooler.dense.bias.any()


def test_no_loader_argument_only_the_torch_backend_accepts(toy: dict) -> None:
    folder: Path = toy["folder"]  # type: ignore[assignment]
    st = json.loads((folder / "sentence_bert_config.json").read_text())
    assert not {"model_args", "model_kwargs"} & set(st), st  # ORTModel rejects add_pooling_layer
    assert has_pooler_weights(folder)
    # polysent reads its own export back without the pooler and without a load report
    again = SentenceEncoder.load(folder)
    assert again.backbone.pooler is None
    texts = ["Ein Mann spielt Gitarre.", "A man plays the guitar."]
    np.testing.assert_allclose(again.encode(texts), toy["encoder"].encode(texts), atol=1e-6)  # type: ignore[union-attr]


def test_every_file_is_world_readable(toy: dict) -> None:
    folder: Path = toy["folder"]  # type: ignore[assignment]
    paths = [folder, *folder.rglob("*")]
    assert (folder / "model.safetensors") in paths
    for p in paths:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))


def test_positions_of_roberta_types_leave_out_the_padding_offset() -> None:
    from transformers import BertConfig, XLMRobertaConfig

    assert positions(XLMRobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert positions(BertConfig(max_position_embeddings=512)) == 512


def test_sentence_transformers_loads_it_quietly_with_the_same_embeddings(toy: dict) -> None:
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    folder: Path = toy["folder"]  # type: ignore[assignment]
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.WARNING)
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = SentenceTransformer(str(folder), device="cpu")
    finally:
        logging.getLogger().removeHandler(handler)
    assert not [r for r in records if r.name.startswith(("sentence_transformers", "transformers"))], \
        [r.getMessage() for r in records]
    assert not [w for w in caught if "transformers" in str(w.filename)], [str(w.message) for w in caught]
    texts = ["Ein Mann spielt Gitarre.", LONG]
    ours = toy["encoder"].encode(texts)  # type: ignore[union-attr]
    np.testing.assert_allclose(model.encode(texts, normalize_embeddings=True), ours, atol=1e-5)


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_other_sentence_transformers_backends_give_the_same_embeddings(toy: dict, tmp_path: Path,
                                                                       backend: str) -> None:
    """Needs sentence-transformers' extra for the backend (optimum; its ONNX export needs transformers < 4.58 today),
    so it is skipped where that does not install."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("optimum.onnxruntime" if backend == "onnx" else "optimum.intel")
    import shutil

    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "m"
    shutil.copytree(toy["folder"], folder)  # type: ignore[arg-type]
    model = SentenceTransformer(str(folder), device="cpu", backend=backend)
    texts = ["Ein Mann spielt Gitarre.", "A man plays the guitar."]
    np.testing.assert_allclose(model.encode(texts, normalize_embeddings=True),
                               toy["encoder"].encode(texts), atol=1e-4)  # type: ignore[union-attr]
