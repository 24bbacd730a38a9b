"""The card of the default config's kind of model: a small encoder trained from scratch with the pipeline's own
tokenizer, its best checkpoint chosen on the evaluation sets (``dev``). The issue's defects: a start model `None`, "no
public start model", the evaluation table listed as training data, a nameless bullet for the tokenizer, no word that
it is a toy; and plain 🤗 failing on a long input (``model_max_length`` 1e30 against 64 positions)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from conftest import tiny_config_dict, write_config

RUN = "tiny"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("toy")
    cfg = tiny_config_dict(base / "data", steps=6)
    cfg["sources"].pop("wikipedia", None)  # EASE's corpora: not what this test is about
    cfg["training"][RUN]["objectives"] = [o for o in cfg["training"][RUN]["objectives"] if o["kind"] != "ease"]
    cfg["evaluation"]["geometry"] = None
    path = write_config(base / "toy.yaml", cfg)
    from flows.cli import main

    assert main(["run", str(path), "--executor", "local"]) == 0
    out = base / "toy-model"
    assert main(["export-model", RUN, str(out), "--data-root", str(base / "data")]) == 0
    text = (out / "README.md").read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert m
    return {"out": out, "root": base / "data", "meta": yaml.safe_load(m.group(1)), "body": m.group(2),
            "facts": json.loads((out / "polysent_card.json").read_text(encoding="utf-8"))}


def _section(body: str, title: str) -> str:
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", body, re.S | re.M)
    assert m, title
    return m.group(1)


def test_the_start_is_stated_as_none_and_no_delta_is_promised(toy: dict[str, Any]) -> None:
    body = toy["body"]
    assert "`None`" not in body and "no public start model" not in body
    assert "trained with polysent from randomly initialised weights (no start model)" in body
    evaluation = _section(body, "Evaluation")
    assert f"Headline results of `{RUN}` (trained from scratch: no start model to compare with, so no Δ)" in evaluation
    header = next(line for line in evaluation.splitlines() if line.startswith("| task"))
    assert "Δ" not in header and "(start)" not in header
    assert "base_model" not in toy["meta"]


def test_evaluation_sets_are_not_training_data_and_every_artifact_is_named(toy: dict[str, Any]) -> None:
    body, facts = toy["body"], toy["facts"]
    data = _section(body, "Training data")
    assert "eval_" not in data, data
    assert not re.search(r"built from: ;|inputs: $", data, re.M), data
    for line in data.splitlines():
        if line.startswith("- "):
            assert re.match(r"- \*\*`\w+`\*\* \(", line), line  # every bullet names its table or artifact
    tok = next(c for c in facts["corpora"] if c["stage"] == "tokenizer")
    assert f"- **`tokenizer`** (content hash `{tok['content_hash'][:16]}`): a {tok['stats']['vocab_size']:,}-entry " \
           "subword vocabulary" in data
    assert [d["stage"] for d in facts["dev"]] == ["eval_sets"]
    assert all(c["stage"] != "eval_sets" for c in facts["corpora"])
    checkpoint = next(line for line in _section(body, "Training").splitlines() if line.startswith("| checkpoint"))
    assert "`eval_tatoeba`" in checkpoint and "evaluation data, not training data" in checkpoint
    assert f"step {facts['stats']['best_step']}" in checkpoint


def test_the_toy_says_it_is_a_toy(toy: dict[str, Any]) -> None:
    from pipelines.export.limitations import TOY_PARAMETERS

    facts = toy["facts"]
    params = facts["stats"]["parameters"]
    assert params < TOY_PARAMETERS
    limits = _section(toy["body"], "Limitations")
    assert f"**A toy model.** A {params:,}-parameter encoder trained from randomly initialised weights for 6 steps" \
           in limits
    assert "not a usable sentence encoder" in limits


def test_plain_transformers_reads_a_long_input(toy: dict[str, Any]) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    out = toy["out"]
    tok = AutoTokenizer.from_pretrained(str(out))
    text = " ".join(["The cat sat on the mat and looked at the birds in the garden."] * 50)
    assert len(tok(text)["input_ids"]) > 600
    batch = tok([text], truncation=True, return_tensors="pt")
    model, info = AutoModel.from_pretrained(str(out), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert batch["input_ids"].shape[1] == model.config.max_position_embeddings == 64
    with torch.no_grad():
        assert model(**batch).last_hidden_state.shape[:2] == (1, 64)
    st = json.loads((out / "sentence_bert_config.json").read_text())
    table = {r.split("|")[1].strip(): r.split("|")[2].strip()
             for r in _section(toy["body"], "Training").splitlines() if r.startswith("| ")}
    assert st["max_seq_length"] == 32 and table["max sequence length"].startswith("32 tokens (trained;")
    assert "reads up to 64" in table["max sequence length"]


def test_a_run_without_a_start_cannot_be_interpolated(toy: dict[str, Any], tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli import main

    assert main(["export-model", RUN, str(tmp_path / "x"), "--data-root", str(toy["root"]),
                 "--interpolate-start", "0.5"]) == 2
    assert f"training run '{RUN}' has no start model (encoder.pretrained) to interpolate with" in \
        capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_the_exported_folder_names_a_tokenizer_class_transformers_4_has(toy: dict[str, Any]) -> None:
    """export-model passes the train artifact's folder through ``models.export_files.write_portable``: transformers 5
    saved the tokenizer as ``TokenizersBackend`` (no class of transformers 4); the export names
    ``PreTrainedTokenizerFast`` and carries no argument of one load. The train artifact itself is left as it is."""
    from models.export_files import LOAD_ARGUMENTS

    tok = json.loads((toy["out"] / "tokenizer_config.json").read_text())
    assert tok["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert not set(LOAD_ARGUMENTS) & set(tok), tok
    trained = next((toy["root"] / "artifacts" / "train").glob("*/model/tokenizer_config.json"))
    assert json.loads(trained.read_text())["tokenizer_class"] in ("TokenizersBackend", "PreTrainedTokenizerFast")
