"""Hostile SQL, CSV of nested columns, a dump page with invalid UTF-8 and non-infobox templates (issue 21, items 5
and 7), each through the real ``polysent`` command line on a Wikipedia-only pipeline (seconds per run).

* ``polysent sql`` refuses every statement that would write a file or a database, install an extension or reach the
  network — in one query and in the interactive shell — leaves the data root as it was, and the next run is all
  verified hits with the same artifacts;
* ``--format csv`` writes list and struct columns as JSON text;
* a page whose bytes are not UTF-8 is dropped, counted in ``wiki_drop_counts`` and named in the log: no U+FFFD in any
  sentence;
* entity types taken from infoboxes (no Wikidata dump) come only from infobox templates, one type per case variant.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from conftest import REPO, SAMPLE, contents, write_config

from faults.harness import Finished, fault, last_run_outcomes, leftovers, polysent

pytestmark = pytest.mark.faults

LONG = "This sentence is long enough to be kept by the length filter of the extraction"


def wiki_config(folder: Path, dump: Path) -> Path:
    return write_config(folder / "wiki.yaml", {"name": "sql-and-pages", "data_root": str(folder / "data"),
                                               "sources": {"wikipedia": {"dumps": {"en": str(dump)}}}})


def run(config: Path, env: dict[str, str]) -> Finished:
    done = polysent("run", str(config), "--executor", "local", env=env, timeout=300)
    assert done.rc == 0, done.explain()
    return done


def sql(data_root: Path, query: str, env: dict[str, str], fmt: str = "table") -> Finished:
    return polysent("sql", "--data-root", str(data_root), "--format", fmt, query, env=env, timeout=120)


def files_of(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` with its content hash (and every folder), to prove that nothing was written."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def page(title: str, pid: int, text: str) -> bytes:
    return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>0</ns>\n    <id>{pid}</id>\n    <revision>\n"
            f"      <id>{pid + 7}</id>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f'      <text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>\n    </revision>\n'
            "  </page>\n").encode()


def damaged_dump(folder: Path) -> Path:
    """The English sample plus a page with invalid bytes and three pages whose templates test infobox typing: two
    case variants of one infobox, and layout boxes only."""
    xml = bz2.decompress((SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2").read_bytes())
    extra = [
        page("Damaged page", 990001, f"{LONG}, with BAD bytes, and links [[Germany]].").replace(b"BAD", b"caf\xc3("),
        page("Box one", 990002, "{{Infobox Country\n| name = One\n| capital = [[Paris]]\n}}\n"
             f"{LONG} and links [[Germany]] and [[Box two]]."),
        page("Box two", 990003, "{{infobox_country\n| name = Two\n| capital = [[Berlin]]\n}}\n"
             f"{LONG} and links [[France]] and [[Box one]]."),
        page("Box three", 990004, "{{Multiple image\n| image1 = a.jpg\n| image2 = b.jpg\n}}\n"
             "{{Weather box\n| location = Three\n| Jan high C = 3\n}}\n{{Bar box\n| title = t\n| bars = b\n}}\n"
             f"{LONG} and links [[Box one]] and [[Germany]]."),
    ]
    end = xml.rindex(b"</mediawiki>")
    dump = folder / "enwiki-damaged.xml.bz2"
    dump.write_bytes(bz2.compress(xml[:end] + b"".join(extra) + xml[end:]))
    return dump


def test_hostile_sql_is_refused_writes_nothing_and_the_next_run_is_all_hits(env: dict[str, str],
                                                                             tmp_path: Path) -> None:
    config = wiki_config(tmp_path, SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2")
    data_root = tmp_path / "data"
    run(config, env)
    built = contents(data_root)
    part = next(data_root.glob("artifacts/hard_negatives/*/hard_negatives/lang=*/*.parquet"))
    hostile = {
        # issue 21's own example: a second part file inside a published artifact
        f"COPY (SELECT * FROM hard_negatives) TO '{part.with_name('part-99999.parquet')}' (FORMAT parquet)":
            "COPY statement refused",
        f"ATTACH '{data_root / 'new.duckdb'}' AS n": "ATTACH statement refused",
        f"ATTACH '{data_root / 'warehouse.duckdb'}' AS w; CREATE TABLE w.x AS SELECT 1": "ATTACH statement refused",
        f"EXPORT DATABASE '{data_root / 'exported'}'": "EXPORT statement refused",
        "INSTALL httpfs": "INSTALL/LOAD statement refused",
        "SET autoinstall_known_extensions = true": "SET statement refused",
        f"SELECT 1; COPY (SELECT 2) TO '{data_root / 'second.csv'}'": "COPY statement refused",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{data_root / 'explained.csv'}'": "EXPLAIN of a non-query",
        f"SELECT * FROM enable_logging(storage = 'file', storage_path = '{data_root / 'logs'}')": "locked",
        "SELECT * FROM read_csv('https://example.invalid/x.csv')": "httpfs",
    }
    with fault("hostile SQL (COPY into an artifact, ATTACH, EXPORT, INSTALL, SET, network) via polysent sql"):
        before = files_of(data_root)
        for query, says in hostile.items():
            done = sql(data_root, query, env)
            assert done.rc == 2 and says in flat(done.stderr) and "Traceback" not in done.stderr, (query,
                                                                                                   done.explain())
        shell = subprocess.run(
            [sys.executable, "-m", "flows.cli", "sql", "--data-root", str(data_root)], cwd=REPO, env=env, text=True,
            capture_output=True, timeout=120,
            input=(f"COPY (SELECT 1) TO '{data_root / 'shell.csv'}';\n.schema hard_negatives; ATTACH "
                   f"'{data_root / 'schema.duckdb'}'\nselect count(*) as negatives from hard_negatives;\n.quit\n"))
        assert shell.returncode == 0, shell.stderr
        assert shell.stdout.count("statement refused") == 2 and "negatives" in shell.stdout, shell.stdout
        assert files_of(data_root) == before, "polysent sql wrote into the data root"
        # reading stays allowed: the views and any local file
        done = sql(data_root, f"SELECT (SELECT count(*) FROM hard_negatives) = (SELECT count(*) FROM "
                              f"read_parquet('{part.parent.parent}/**/*.parquet')) AS same", env, "csv")
        assert done.rc == 0 and done.stdout == "same\ntrue\n", done.explain()
        again = run(config, env)
        by_key, _ = last_run_outcomes(data_root)
        assert set(by_key.values()) == {"hit"}, again.explain()
        assert contents(data_root) == built and not leftovers(data_root)


def test_csv_output_of_list_and_struct_columns(env: dict[str, str], tmp_path: Path) -> None:
    config = wiki_config(tmp_path, SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2")
    data_root = tmp_path / "data"
    run(config, env)
    query = ("SELECT entity, candidates, {'entity': entity, 'n': len(candidates)} AS info FROM hard_negatives "
             "ORDER BY ALL")
    with fault("sql --format csv of a list column"):
        as_csv = sql(data_root, query, env, "csv")
        assert as_csv.rc == 0 and "Traceback" not in as_csv.stderr, as_csv.explain()
        as_json = sql(data_root, query, env, "json")
        assert as_json.rc == 0, as_json.explain()
        rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
        expected = json.loads(as_json.stdout)
        assert len(rows) == len(expected) > 0
        assert [{"entity": r["entity"], "candidates": json.loads(r["candidates"]), "info": json.loads(r["info"])}
                for r in rows] == expected


def test_a_page_with_invalid_utf8_is_dropped_and_counted(env: dict[str, str], tmp_path: Path) -> None:
    with fault("dump page with invalid UTF-8"):
        config = wiki_config(tmp_path, damaged_dump(tmp_path))
        data_root = tmp_path / "data"
        done = run(config, env)
        assert "invalid UTF-8" in done.log and "Damaged page" in done.log, done.explain()
        counts = sql(data_root, "SELECT stage, reason, sum(count)::BIGINT AS n FROM wiki_drop_counts WHERE reason = "
                                "'invalid_utf8_pages' GROUP BY ALL", env, "json")
        assert json.loads(counts.stdout) == [{"stage": "extract", "reason": "invalid_utf8_pages", "n": 1}]
        kept = sql(data_root, "SELECT (SELECT count(*) FROM wiki_pages WHERE title = 'Damaged page') AS damaged, "
                              "(SELECT count(*) FROM wiki_pages WHERE title LIKE 'Box %') AS boxes, "
                              "(SELECT count(*) FROM wiki_sentences WHERE contains(text, chr(65533))) AS fffd, "
                              "(SELECT count(*) FROM wiki_links WHERE contains(surface, chr(65533))) AS fffd_links",
                   env, "json")
        assert json.loads(kept.stdout) == [{"damaged": 0, "boxes": 3, "fffd": 0, "fffd_links": 0}], kept.explain()


def test_infobox_types_are_infobox_templates_one_per_case_variant(env: dict[str, str], tmp_path: Path) -> None:
    with fault("non-infobox templates and case variants as entity types"):
        config = wiki_config(tmp_path, damaged_dump(tmp_path))
        data_root = tmp_path / "data"
        run(config, env)
        boxes = sql(data_root, "SELECT e.title, t.type FROM entity_types t JOIN entities e USING (entity) "
                               "WHERE e.title LIKE 'Box %' ORDER BY ALL", env, "json")
        assert json.loads(boxes.stdout) == [{"title": "Box one", "type": "infobox:en:Infobox country"},
                                            {"title": "Box two", "type": "infobox:en:Infobox country"}], boxes.explain()
        layout = sql(data_root, "SELECT DISTINCT type_label FROM entity_types WHERE lower(type_label) SIMILAR TO "
                                "'(multiple image|weather box|bar box|navboxes|reflist).*' "
                                "OR lower(type_label) NOT SIMILAR TO '(infobox .+|.*taxobox|speciesbox)'", env, "json")
        assert json.loads(layout.stdout) == [], layout.stdout
        variants = sql(data_root, "SELECT lower(type) AS t FROM entity_types GROUP BY 1 "
                                  "HAVING count(DISTINCT type) > 1", env, "json")
        assert json.loads(variants.stdout) == [], variants.stdout


def flat(text: str) -> str:
    return " ".join(text.split())
