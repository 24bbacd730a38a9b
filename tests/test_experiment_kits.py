"""bench/replications.py's pure parts: the held-out NTREX documents and the figures a claim is judged on."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replications import (
    HELD_OUT_EVERY,
    NTREX_CODES,
    _ntrex_split,
    cap_clustering,
    merge_jobs,
    parse_job,
    row_precision,
    summarise,
    summary,
)
from models.evaluation.results import Results


def _ntrex(root: Path, docs: list[str]) -> Path:
    folder = root / "parallel" / "ntrex128"
    folder.mkdir(parents=True)
    (folder / "DOCUMENT_IDS.tsv").write_text("\n".join(docs) + "\n", encoding="utf-8")
    names = ["newstest2019-src.eng.txt"] + [f"newstest2019-ref.{c}.txt" for c in NTREX_CODES.values()]
    for name in names:
        (folder / name).write_text("\n".join(f"{name}:{i}:{d}" for i, d in enumerate(docs)) + "\n",
                                   encoding="utf-8")
    return folder


def test_every_fifth_document_is_held_out_whole(tmp_path: Path) -> None:
    docs = [f"doc{k}" for k in range(12) for _ in range(k % 3 + 1)]  # documents of 1–3 lines
    _ntrex(tmp_path / "data", docs)
    train, held = _ntrex_split(tmp_path / "data", tmp_path / "work")
    held_docs = {f"doc{k}" for k in range(12)[HELD_OUT_EVERY - 1::HELD_OUT_EVERY]}
    en_train = train["en"].read_text(encoding="utf-8").splitlines()
    en_held = (held / "newstest2019-src.eng.txt").read_text(encoding="utf-8").splitlines()
    assert {x.rsplit(":", 1)[1] for x in en_held} == held_docs
    assert not {x.rsplit(":", 1)[1] for x in en_train} & held_docs
    assert len(en_train) + len(en_held) == len(docs)
    for lang in NTREX_CODES:  # line-aligned across languages
        other = train[lang].read_text(encoding="utf-8").splitlines()
        assert [x.split(":", 1)[1] for x in other] == [x.split(":", 1)[1] for x in en_train]


def test_a_file_of_another_length_is_refused_by_name(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path / "data", ["a", "a", "b"])
    (folder / "newstest2019-ref.deu.txt").write_text("x\ny\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"newstest2019-ref\.deu\.txt: 2 lines, expected 3"):
        _ntrex_split(tmp_path / "data", tmp_path / "work")


def test_summarise_splits_trained_and_never_trained_languages(tmp_path: Path) -> None:
    r = Results("run", "model")
    for lang, acc in (("deu", 90.0), ("fra", 80.0), ("ita", 70.0), ("jpn", 50.0)):
        r.add("tatoeba", "canonical", lang, f"{lang}-eng", {"accuracy_mean": acc, "accuracy_xx_en": 0.0}, 300)
    r.add("tatoeba", "canonical", "all", "4 languages", {"accuracy_mean": 72.5}, 4)
    r.add("bucc", "oracle", "zh-en/sample", "zh-en", {"f1": 88.0, "precision": 1.0}, 257)
    r.add("sts", "canonical", "sts17/en-en", "en-en", {"spearman": 80.0}, 250)
    r.add("sts", "canonical", "sts17/es-es", "es-es", {"spearman": 70.0}, 250)
    r.add("xsim", "laser", "ntrex_heldout/deu-eng", "deu-eng", {"error_rate": 1.0}, 400)
    r.add("xsim", "laser", "ntrex_heldout/mean", "5 pairs", {"error_rate": 0.5}, 5)
    r.write(tmp_path / "eval_results.parquet")
    got = summarise(tmp_path / "eval_results.parquet", ("deu", "fra"))
    assert got["tatoeba_trained"] == pytest.approx(85.0)
    assert got["tatoeba_untrained"] == pytest.approx(60.0)  # ita, jpn; the "all" subset row is not a language
    assert (got["bucc_f1"], got["sts17_spearman"], got["xsim_error"]) == (88.0, 75.0, 0.5)
    text = summary([{"part": "mpcl", "scale": 1, "condition": c, **{"tatoeba_trained": v}}
                    for c, v in (("mpcl", 95.0), ("mpcl", 96.0), ("single", 94.0))])
    assert "mpcl x1 mpcl fp32 (n=2): tatoeba_trained 95.50 ± 0.71 [95.00, 96.00]" in text
    assert "mpcl x1 single fp32 (n=1): tatoeba_trained 94.00 [94.00]" in text


def test_rows_of_another_precision_are_never_pooled() -> None:
    rows = [{"part": "mpcl", "scale": 1, "condition": "mpcl", "device": "cpu", "tatoeba_trained": 95.0},
            {"part": "mpcl", "scale": 1, "condition": "mpcl", "device": "cuda", "precision": "fp32",
             "tatoeba_trained": 97.0},
            {"part": "mpcl", "scale": 1, "condition": "mpcl", "device": "cuda", "tatoeba_trained": 90.0},
            {"part": "mpcl", "scale": 1, "condition": "start", "seed": None, "tatoeba_trained": 80.0}]
    assert [row_precision(r) for r in rows] == ["fp32", "fp32", "bf16", None]  # older rows: bf16 on CUDA
    text = summary(rows)
    assert "mpcl x1 mpcl fp32 (n=2): tatoeba_trained 96.00 ± 1.41" in text
    assert "mpcl x1 mpcl bf16 (n=1): tatoeba_trained 90.00" in text
    assert "mpcl x1 start (n=1)" in text
    wall = {"part": "mpcl", "scale": 1, "condition": "part_wall_time", "seed": None, "wall_seconds": 1500.0,
            "runs": 2, "seeds": [13], "only": None, "device": "auto"}
    text = summary([*rows, wall])
    assert text.splitlines()[0] == "mpcl x1 wall time 25.0 min: 2 runs, seeds [13], device auto"
    assert "part_wall_time" not in text


def test_job_specs_and_their_rows(tmp_path: Path) -> None:
    assert parse_job("mpcl@10:single[none]:14") == ("mpcl", 10, "single[none]", 14)
    assert parse_job("msimcse@1:start") == ("msimcse", 1, "start", None)
    for bad in ("mpcl@10:single[none]", "nope@1:x:1", "mpcl:x:1", "mpcl@1:start:13", "mpcl@x:a:1"):
        with pytest.raises(SystemExit, match="expected PART@SCALE:CONDITION:SEED"):
            parse_job(bad)
    for tag, part in (("a", "mpcl-x10"), ("b", "mpcl-x10"), ("c", "vmsst-x1")):
        (tmp_path / "jobs" / tag).mkdir(parents=True)
        (tmp_path / "jobs" / tag / f"{part}.jsonl").write_text(f'{{"job": "{tag}"}}\n', encoding="utf-8")
    assert merge_jobs(tmp_path) == {"mpcl-x10.jsonl": 2, "vmsst-x1.jsonl": 1}
    assert (tmp_path / "mpcl-x10.jsonl").read_text(encoding="utf-8").splitlines() == ['{"job": "a"}', '{"job": "b"}']
    assert merge_jobs(tmp_path) == {}  # merged once only


def test_clustering_cap_keeps_the_same_hash_chosen_rows_per_language(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"dataset": "m", "lang": lang, "idx": i, "text": f"{lang} text {i}", "label": i % 3}
            for lang, n in (("en", 10), ("fr", 4)) for i in range(n)]
    for name in ("a", "b"):
        pq.write_table(pa.Table.from_pylist(rows if name == "a" else rows[::-1]), tmp_path / f"{name}.parquet")
        assert cap_clustering(tmp_path / f"{name}.parquet", 6) == {"en": 6, "fr": 4}
    a, b = (pq.read_table(tmp_path / f"{n}.parquet").to_pylist() for n in ("a", "b"))
    assert sorted(r["text"] for r in a) == sorted(r["text"] for r in b)  # chosen by content, not by file order
    assert {r["text"] for r in a} >= {f"fr text {i}" for i in range(4)}
    assert not list(tmp_path.glob("*.tmp"))
