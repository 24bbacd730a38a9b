"""Cache behaviour of the whole DAG (in-process executor: same node contract as the Prefect flow, no start-up cost)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import REPO, tiny_config_dict, write_config

from flows.config import load_config
from flows.dag import build_dag
from flows.nodes import execute_local, plan
from flows.run import run_pipeline
from warehouse.artifacts import ArtifactStore
from warehouse.catalog import connect
from warehouse.hashing import FileHashCache
from warehouse.layout import DataRoot


def _run(path: Path, force: bool = False):
    return run_pipeline(load_config(path), path, execute_local, force=force)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("dag")
    path = write_config(tmp / "tiny.yaml", tiny_config_dict(tmp / "data", steps=10))
    first = _run(path)
    assert sorted(first.executed) == sorted(first.results)  # everything built the first time
    return path


def test_noop_rerun_executes_no_node(built: Path) -> None:
    assert _run(built).executed == []


def test_plan_reports_all_hits_without_running(built: Path) -> None:
    cfg = load_config(built)
    from flows.dag import build_dag

    root = DataRoot.at(cfg.data_root)
    rows = plan(build_dag(cfg), ArtifactStore(root), FileHashCache(root.file_hashes))
    assert {r.status for r in rows} == {"hit"} and all(r.key for r in rows)


def test_changing_an_evaluation_setting_reruns_only_evaluation_and_report(built: Path, tmp_path: Path) -> None:
    cfg = tiny_config_dict(load_config(built).data_root, steps=10)
    cfg["evaluation"]["tatoeba"]["languages"] = ["deu", "rus"]
    path = write_config(tmp_path / "eval_changed.yaml", cfg)
    from flows.dag import build_dag

    root = DataRoot.at(cfg["data_root"])
    statuses = {r.node: r.status for r in plan(build_dag(load_config(path)), ArtifactStore(root),
                                                FileHashCache(root.file_hashes))}
    assert statuses["evaluate.tiny"] == "miss" and statuses["report"] == "blocked"
    assert sorted(_run(path).executed) == ["evaluate.tiny", "report"]


def test_evaluation_change_with_identical_results_stops_at_the_evaluation(built: Path, tmp_path: Path) -> None:
    """Keys chain through *content* hashes: naming every Tatoeba language (instead of "all") changes the key, not the
    numbers, so the report is a hit."""
    cfg = tiny_config_dict(load_config(built).data_root, steps=10)
    cfg["evaluation"]["tatoeba"]["languages"] = ["deu", "fra", "rus", "spa"]
    path = write_config(tmp_path / "batch_changed.yaml", cfg)
    assert _run(path).executed == ["evaluate.tiny"]


def test_changing_a_corpus_setting_reruns_downstream_only(built: Path, tmp_path: Path) -> None:
    cfg = tiny_config_dict(load_config(built).data_root, steps=10)
    cfg["corpora"]["bitext_pairs"]["quota_per_language"] = 60
    path = write_config(tmp_path / "corpus_changed.yaml", cfg)
    assert sorted(_run(path).executed) == ["bitext_pairs", "evaluate.tiny", "report", "tokenizer",
                                           "train.tiny"]


def test_corrupted_artifact_is_rebuilt_and_downstream_stays_cached(built: Path) -> None:
    cfg = load_config(built)
    root = DataRoot.at(cfg.data_root)
    part = next((root.artifacts / "xnli_groups").glob("*/xnli_groups/lang=de/*.parquet"))
    part.write_bytes(part.read_bytes()[:-10] + b"0123456789")
    summary = _run(built)
    assert summary.executed == ["xnli_groups"]
    assert summary.results["xnli_groups"].outcome.value == "rebuilt"


def test_force_reruns_everything(built: Path) -> None:
    summary = _run(built, force=True)
    assert sorted(summary.executed) == sorted(summary.results)


def test_warehouse_views_answer_cross_table_questions(built: Path) -> None:
    con = connect(DataRoot.at(load_config(built).data_root))
    langs = con.sql("select lang, count(*) from xnli_groups group by 1 order by 1").fetchall()
    assert [lang for lang, _ in langs] == ["de", "en", "es", "fr", "ru"]
    # "how many de sentences link an entity of type city?"
    n = con.sql("""select count(distinct (l.page_id, l.sent_id)) from wiki_links l
                   join entity_titles e on e.lang = l.lang and e.page_id = l.target_page_id
                   join entity_types t on t.entity = e.entity
                   where l.lang = 'de' and t.type_label = 'city'""").fetchall()[0][0]
    assert n > 10
    # "which run has the best Tatoeba mean, and from which corpus artifact?"
    best = con.execute("""
        with m as (select run, model, avg(value) acc from eval_results
                   where task = 'tatoeba' and variant = 'canonical' group by all)
        select m.run, m.acc, l.input_key from m join lineage l on l.artifact_key = m.model
        where l.input_stage = 'xnli_groups' order by acc desc limit 1""").fetchone()
    assert best[0] == "tiny" and 0 <= best[1] <= 100 and len(best[2]) == 64
    runs = con.execute("select count(*) from runs where status = 'completed'").fetchone()[0]
    assert runs >= 1


def test_corpus_keys_do_not_depend_on_where_the_files_live(tmp_path: Path) -> None:
    keys = []
    for where in ("a", "b/deeper"):
        (tmp_path / where).mkdir(parents=True)
        shutil.copytree(REPO / "sample", tmp_path / where / "sample")
        shutil.copytree(REPO / "configs", tmp_path / where / "configs")
        cfg = load_config(tmp_path / where / "configs" / "default.yaml", data_root=tmp_path / where / "data")
        root = DataRoot.at(cfg.data_root)
        rows = plan(build_dag(cfg), ArtifactStore(root), FileHashCache(root.catalog / "hashes.json"))
        keys.append({r.node: r.key for r in rows if r.node in ("xnli_groups", "nli_triples", "bitext_pairs")})
    assert keys[0] == keys[1] and all(keys[0].values())
