"""Empty corpora and nonsense settings (issue 21, items 2 and 4).

- A bitext whose every line is blank: the run completes, ``bitext_pairs`` is a view with 0 rows, a rerun hits the
  cache and works; a training objective on it is refused before training, naming the table and the reason.
- Settings that cannot mean anything (``batch_size: -8``, ``steps: 0``, ``max_pairs_per_language: -1``): ``validate``
  and ``run`` exit 2 naming file, line, key and value, and write nothing.
- Missing input files: ``validate`` lists them with ``run``'s message (exit 2, nothing written).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import write_config

from faults.harness import fault, flat, last_run_outcomes, leftovers, polysent, run_config, write_fault_config

pytestmark = pytest.mark.faults


def blank_bitext_config(folder: Path, training: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("en-de.en", "en-de.de"):
        (folder / name).write_text("\n  \n\n", encoding="utf-8")
    cfg: dict = {"name": "blank", "data_root": str(folder / "data"),
                 "sources": {"bitext": [{"src": "en", "tgt": "de", "src_file": str(folder / "en-de.en"),
                                         "tgt_file": str(folder / "en-de.de")}]},
                 "corpora": {"bitext_pairs": {"pivots": ["en"]}}}
    if training:
        cfg["training"] = {"tiny": {"steps": 2, "encoder": {"hidden_size": 32, "num_layers": 1, "num_heads": 2,
                                                            "intermediate_size": 64},
                                    "objectives": [{"kind": "contrastive", "data": "bitext_pairs", "batch_size": 4}]}}
    return write_config(folder / "blank.yaml", cfg)


def rows(data_root: Path, sql: str, env: dict[str, str]) -> str:
    done = polysent("sql", "--data-root", str(data_root), "--format", "csv", sql, env=env, timeout=120)
    assert done.rc == 0, done.explain()
    return done.stdout.strip()


def test_blank_bitext_completes_with_an_empty_view_and_reruns(env: dict[str, str], tmp_path: Path) -> None:
    config = blank_bitext_config(tmp_path / "corpus", training=False)
    data = config.parent / "data"
    with fault("bitext whose every line is blank"):
        first = run_config(config, env)
        assert first.rc == 0, first.explain()
        assert "bitext: no pair survived (read 3; 3 blank)" in first.log, first.explain()
        rerun = run_config(config, env)  # the empty artifact is a valid cache hit, not a trap
        assert rerun.rc == 0, rerun.explain()
        assert set(last_run_outcomes(data)[1].values()) == {"hit"}, last_run_outcomes(data)
        assert rows(data, "SELECT count(*) AS n FROM bitext_pairs", env).splitlines() == ["n", "0"]
        assert "pivot_text" in rows(data, "DESCRIBE bitext_pairs", env)
        assert rows(data, "SELECT \"table\", \"rows\" FROM read_parquet('"
                    + str(next(data.glob("artifacts/report/*/report_counts.parquet"))) + "')",
                    env).splitlines()[1:] == ["bitext_pairs,0"]
        assert not leftovers(data)


def test_training_on_an_empty_corpus_is_refused_before_training(env: dict[str, str], tmp_path: Path) -> None:
    config = blank_bitext_config(tmp_path / "train", training=True)
    data = config.parent / "data"
    with fault("training objective on an empty bitext corpus"):
        done = run_config(config, env)
        assert done.rc == 1, done.explain()
        assert ("EmptyCorpusError: training.tiny (contrastive): corpus table bitext_pairs has 0 rows: no bitext pair "
                "survived reading and filtering") in done.log, done.explain()
        assert "train.tiny: build failed" in done.log
        assert not list(data.glob("artifacts/train/*")) and not list(data.glob("cache/checkpoints/*/*"))
        assert not leftovers(data)


NONSENSE = [
    (("training", "tiny", "objectives", 0, "batch_size"), -8, "batch_size:",
     "training.tiny.objectives.0.batch_size: out of range (value -8); expected an integer ≥ 1"),
    (("training", "tiny", "steps"), 0, "steps: 0",
     "training.tiny.steps: out of range (value 0); expected an integer ≥ 1"),
    (("corpora", "hard_negatives", "max_pairs_per_language"), -1, "max_pairs_per_language:",
     "corpora.hard_negatives.max_pairs_per_language: out of range (value -1); expected a number of pairs ≥ 1"),
]


@pytest.mark.parametrize(("where", "value", "text", "message"), NONSENSE, ids=[n[3].split(":")[0] for n in NONSENSE])
def test_nonsense_settings_are_refused_before_anything_runs(where: tuple, value: int, text: str, message: str,
                                                            env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path / "cfg")
    cfg = yaml.safe_load(config.read_text())
    node = cfg
    for part in where[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[where[-1]] = value
    config = write_config(config, cfg)
    line = next(i for i, t in enumerate(config.read_text().splitlines(), 1) if text in t and str(value) in t)
    with fault(f"nonsense setting {message.split(':')[0]}: {value}"):
        for command in ("validate", "run"):
            done = polysent(command, str(config), env=env, timeout=120)
            assert done.rc == 2, done.explain()
            assert f"{config}:{line}: {message}" in flat(done.stderr), done.explain()
        assert not (tmp_path / "cfg" / "data").exists(), "an invalid configuration must not write anything"


def test_validate_lists_missing_inputs_like_run(env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path / "cfg")
    cfg = yaml.safe_load(config.read_text())
    gone = tmp_path / "moved" / "en-de.de"
    cfg["sources"]["bitext"][0]["tgt_file"] = str(gone)
    config = write_config(config, cfg)
    with fault("validate with a missing input file"):
        validate = polysent("validate", str(config), env=env, timeout=120)
        run = polysent("run", str(config), "--executor", "local", env=env, timeout=120)
        assert validate.rc == run.rc == 2, validate.explain() + run.explain()
        assert validate.stderr == run.stderr
        assert re.search(rf"1 input file\(s\) do not exist .*bitext_pairs: {re.escape(str(gone))}",
                         flat(validate.stderr)), validate.explain()
        assert "valid;" not in validate.stdout
        assert not (tmp_path / "cfg" / "data").exists()


def test_entity_types_none_is_announced_by_validate(env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path / "cfg")
    cfg = yaml.safe_load(config.read_text())
    cfg["corpora"].setdefault("entities", {})["types"] = "none"
    config = write_config(config, cfg)
    with fault("entities.types: none (no EASE pairs)"):
        done = polysent("validate", str(config), env=env, timeout=120)
        assert done.rc == 0, done.explain()
        assert re.search(r"warning: .*corpora\.entities\.types: none \(value 'none'\) .* hard_negatives will hold 0 "
                         r"EASE pairs; the objective\(s\) reading hard_negatives \(EASE, mSimCSE on its sentences\) "
                         r"of training\.tiny will be refused", flat(done.stderr)), \
            done.explain()
