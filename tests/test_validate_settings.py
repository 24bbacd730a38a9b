"""Settings that cannot mean anything (issue 21, item 4) are rejected before anything runs, naming the file, line, key
path and value; ``validate`` reports missing inputs as ``run`` does and warns about a configuration that builds no
EASE pairs."""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path

import pytest
import yaml

from flows.cli import main
from flows.config import ConfigError, config_warnings, load_config
from models import settings as S
from models.settings_io import SettingsError, from_mapping

BITEXT = {"bitext": [{"src": "en", "tgt": "de", "src_file": "en-de.en", "tgt_file": "en-de.de"}]}


def config(tmp_path: Path, **sections: object) -> Path:
    for name in ("en-de.en", "en-de.de"):
        (tmp_path / name).write_text("A cat.\n", encoding="utf-8")
    cfg = {"name": "t", "data_root": str(tmp_path / "data"), "sources": BITEXT,
           "corpora": {"bitext_pairs": {"pivots": ["en"]}}, **sections}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


NONSENSE = [
    ({"training": {"r": {"objectives": [{"kind": "contrastive", "batch_size": -8}]}}},
     "training.r.objectives.0.batch_size", "batch_size:", "out of range (value -8); expected an integer ≥ 1"),
    ({"training": {"r": {"steps": 0}}}, "training.r.steps", "steps:",
     "out of range (value 0); expected an integer ≥ 1"),
    ({"training": {"r": {"lr": -0.001}}}, "training.r.lr", "lr:", "out of range (value -0.001); expected a number > 0"),
    ({"training": {"r": {"objectives": [{"kind": "mpcl", "temperature": 0}]}}},
     "training.r.objectives.0.temperature", "temperature:", "out of range (value 0); expected a number > 0"),
    ({"training": {"r": {"encoder": {"dropout": 1.5}}}}, "training.r.encoder.dropout", "dropout:",
     "out of range (value 1.5); expected a number < 1"),
    ({"training": {"r": {"objectives": [{"kind": "vmsst", "kl_anneal_steps": 0}]}}},
     "training.r.objectives.0.kl_anneal_steps", "kl_anneal_steps:", "out of range (value 0); expected an integer ≥ 1"),
    ({"evaluation": {"batch_size": 0}}, "evaluation.batch_size", "batch_size:",
     "out of range (value 0); expected an integer ≥ 1"),
    ({"tokenizer": {"vocab_size": -5}}, "tokenizer.vocab_size", "vocab_size:",
     "out of range (value -5); expected an integer ≥ 1"),
    ({"corpora": {"bitext_pairs": {"pivots": ["en"], "temperature": -1.0}}}, "corpora.bitext_pairs.temperature",
     "temperature:", "out of range (value -1.0); expected a number > 0"),
    ({"corpora": {"bitext_pairs": {"pivots": ["en"]}, "hard_negatives": {"max_pairs_per_language": -1}}},
     "corpora.hard_negatives.max_pairs_per_language", "max_pairs_per_language:",
     "out of range (value -1); expected a number of pairs ≥ 1"),
]


@pytest.mark.parametrize(("sections", "key", "text", "message"), NONSENSE, ids=[n[1] for n in NONSENSE])
def test_nonsense_values_name_file_line_key_and_value(tmp_path: Path, sections: dict, key: str, text: str,
                                                      message: str) -> None:
    path = config(tmp_path, **sections)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{path}:{line_of(path, text)}: {key}: {message}" in str(err.value).splitlines()


def test_every_numeric_model_setting_has_a_range_except_seeds_and_additive_logits() -> None:
    """A new numeric setting must decide what values it takes (or join this short list of unbounded ones)."""
    unbounded = {"seed", "hard_negative_weight"}
    missing = []
    for cls in (v for v in vars(S).values() if dataclasses.is_dataclass(v) and v.__module__ == S.__name__):
        for name, tp in typing.get_type_hints(cls, include_extras=True).items():
            args = [tp, *typing.get_args(tp)]
            numeric = any(a in (int, float) for a in args) or any(
                typing.get_origin(a) is typing.Annotated for a in args)
            bounded = any(typing.get_origin(a) is typing.Annotated for a in args)
            if numeric and not bounded and name not in unbounded and cls is not S.Range:
                missing.append(f"{cls.__name__}.{name}")
    assert not missing


def test_the_bare_machine_reader_enforces_the_same_ranges() -> None:
    with pytest.raises(SettingsError, match=r"^TrainSettings\.objectives\.0\.batch_size: out of range \(value -8\); "
                                            r"expected an integer ≥ 1$"):
        from_mapping(S.TrainSettings, {"objectives": [{"kind": "contrastive", "batch_size": -8}]})
    with pytest.raises(SettingsError, match=r"TrainSettings\.max_grad_norm: out of range \(value 0\)"):
        from_mapping(S.TrainSettings, {"max_grad_norm": 0})
    ok = from_mapping(S.TrainSettings, {"steps": 1, "warmup_steps": 0, "max_grad_norm": None,
                                        "objectives": [{"kind": "mpcl", "group_members": None}]})
    assert ok.steps == 1 and ok.objectives[0].group_members is None


def test_validate_reports_missing_inputs_with_runs_message_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the CLI sets its offline defaults in os.environ
    path = config(tmp_path)
    (tmp_path / "en-de.de").unlink()
    assert main(["validate", str(path)]) == 2
    validate_err = capsys.readouterr().err
    assert main(["run", str(path), "--executor", "local"]) == 2
    assert capsys.readouterr().err == validate_err
    assert "1 input file(s) do not exist" in validate_err and f"bitext_pairs: {tmp_path / 'en-de.de'}" in validate_err
    assert not (tmp_path / "data").exists()


def test_entity_types_none_warns_that_no_ease_pair_will_be_built(tmp_path: Path) -> None:
    (tmp_path / "en.xml").write_text("<mediawiki/>", encoding="utf-8")
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({
        "name": "w", "sources": {"wikipedia": {"dumps": {"en": "en.xml"}}},
        "corpora": {"entities": {"types": "none"}},
        "training": {"e": {"objectives": [{"kind": "ease"}]}}}, sort_keys=False), encoding="utf-8")
    (warning,) = config_warnings(load_config(path), path)
    assert warning.startswith(f"{path}:{line_of(path, 'types:')}: corpora.entities.types: none (value 'none') gives "
                              "no entity a type")
    assert "hard_negatives will hold 0 EASE pairs" in warning and "training.e will be refused" in warning
    path.write_text(path.read_text().replace("types: none", "types: infobox"), encoding="utf-8")
    assert config_warnings(load_config(path), path) == []
