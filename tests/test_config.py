from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, tiny_config_dict, write_config

from flows.config import ConfigError, load_config


def test_default_config_loads_and_resolves_paths_against_its_folder() -> None:
    cfg = load_config(REPO / "configs" / "default.yaml")
    assert cfg.data_root == REPO / "data"
    assert cfg.sources.wikipedia.dumps["ru"] == REPO / "sample" / "wikipedia" / "ruwiki-sample.xml.bz2"
    assert cfg.training["tiny_combined"].encoder.hidden_size == 128


def _config_error(tmp_path: Path, mutate) -> str:
    """Write the tiny config after ``mutate(cfg)`` and return the ConfigError message it must raise."""
    cfg = tiny_config_dict(tmp_path / "data")
    mutate(cfg)
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path / "c.yaml", cfg))
    return str(err.value)


def test_unknown_key_names_path_line_and_allowed_keys(tmp_path: Path) -> None:
    cfg = tiny_config_dict(tmp_path / "data")
    cfg["corpora"]["bitext_pairs"]["quota_per_languag"] = 5
    path = write_config(tmp_path / "c.yaml", cfg)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "corpora.bitext_pairs.quota_per_languag: unknown key" in msg
    assert "quota_per_language" in msg.split("expected one of:")[1]
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "quota_per_languag:" in t)
    assert f"{path}:{line}:" in msg


def test_unknown_key_inside_a_dataclass_section(tmp_path: Path) -> None:
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["encoder"].update(colour="red"))
    assert re.search(r"training\.tiny\.encoder\.colour: unknown key \(value 'red'\)", msg)


def test_wrong_type_names_value_and_expectation(tmp_path: Path) -> None:
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"].update(steps="many"))
    assert "training.tiny.steps" in msg
    assert "valid integer" in msg
    assert "'many'" in msg


def test_literal_choice_is_enforced(tmp_path: Path) -> None:
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["encoder"].update(pooling="max"))
    assert re.search(r"training\.tiny\.encoder\.pooling: .*'mean' or 'cls'", msg)


def test_cli_run_with_unknown_key_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    cfg = tiny_config_dict(data_root)
    cfg["evaluation"]["tatoeba"]["batchsize"] = 8
    path = write_config(tmp_path / "c.yaml", cfg)
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "run", str(path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "evaluation.tatoeba.batchsize: unknown key" in proc.stderr
    assert not data_root.exists()
    assert not (tmp_path / ".prefect").exists()


def test_training_data_must_be_produced(tmp_path: Path) -> None:
    from flows.dag import build_dag

    cfg = tiny_config_dict(tmp_path / "data")
    cfg["sources"]["bitext"] = []
    with pytest.raises(ValueError, match=r"training\.tiny\.objectives use \['bitext_pairs'\]"):
        build_dag(load_config(write_config(tmp_path / "c.yaml", cfg)))


def test_bitext_source_formats_are_checked_by_their_own_schema(tmp_path: Path) -> None:
    msg = _config_error(tmp_path, lambda c: c["sources"]["bitext"].append(
        {"format": "tmx", "path": "x.tmx", "src": "en", "tgt": "es", "src_file": "oops"}))
    assert "sources.bitext.6.tmx.src_file: unknown key" in msg
    assert "expected one of: format, path, src, tgt" in msg
    msg = _config_error(tmp_path, lambda c: c["sources"]["bitext"].append({"format": "csv", "path": "x"}))
    assert "sources.bitext.6" in msg and "csv" in msg
    msg = _config_error(tmp_path, lambda c: c["corpora"]["bitext_pairs"].update(pivots=["en", "xx"]))
    assert "unknown language code 'xx'" in msg
    msg = _config_error(tmp_path, lambda c: c["corpora"]["xnli_groups"].update(languages="most"))
    assert "unknown language preset 'most'" in msg


def test_objective_errors_name_the_objective_of_the_kind_given(tmp_path: Path) -> None:
    """The objectives list is a union told apart by ``kind``: an error speaks of the named kind only."""
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["objectives"][0].update(colour="red"))
    assert re.search(r"training\.tiny\.objectives\.0\.colour: unknown key \(value 'red'\)", msg), msg
    assert "ContrastiveObjective" not in msg and "EaseObjective" not in msg and len(msg.splitlines()) == 1
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["objectives"][0].update(kind="triplet"))
    assert re.search(r"training\.tiny\.objectives\.0\.kind: unknown objective kind \(value 'triplet'\); "
                     r"expected one of 'contrastive', 'ease', 'mpcl'", msg), msg
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["objectives"][1].update(temperature="hot"))
    assert "training.tiny.objectives.1.temperature" in msg and len(msg.splitlines()) == 1, msg


def test_default_config_has_a_vmsst_run_and_its_errors_name_vmsst_keys(tmp_path: Path) -> None:
    from models.objectives.vmsst import VmsstObjective

    run = load_config(REPO / "configs" / "default.yaml").training["tiny_vmsst"]
    assert [type(o) for o in run.objectives] == [VmsstObjective] and run.encoder.projection == 64
    assert run.tables() == ("bitext_pairs",)
    msg = _config_error(tmp_path, lambda c: c["training"]["tiny"]["objectives"].append(
        {"kind": "vmsst", "variant": "vae", "free_bit": 1.0}))
    assert "variant" in msg and "bitranslation" in msg and "free_bit: unknown key" in msg
    assert "MpclObjective" not in msg and "ContrastiveObjective" not in msg
