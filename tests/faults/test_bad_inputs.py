"""Broken inputs: a dump cut in the middle, a bitext whose sides have different line counts, a misspelt config key.

Each must stop with a clear error that names the file (and the line, the last complete page or the key), exit with
the documented code (1: a node failed; 2: invalid configuration, nothing written), and publish nothing partial.
"""

from __future__ import annotations

import bz2
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import SAMPLE, write_config

from faults.harness import Finished, fault, leftovers, polysent, write_fault_config

pytestmark = pytest.mark.faults


def run_local(config: Path, env: dict[str, str]) -> Finished:
    return polysent("run", str(config), "--executor", "local", env=env, timeout=300)


def published(data_root: Path, stage: str) -> list[Path]:
    return list(data_root.glob(f"artifacts/{stage}/*"))


def multistream(xml: bytes, pages_per_stream: int = 4) -> bytes:
    """The dump re-packed the way Wikipedia publishes ``…-multistream.xml.bz2``: ``<siteinfo>`` in the first bz2
    stream, then a stream per few pages, then ``</mediawiki>``."""
    first = xml.index(b"<page>")
    first = xml.rindex(b"\n", 0, first) + 1
    last = xml.rindex(b"</page>") + len(b"</page>\n")
    pages = re.findall(rb"[ \t]*<page>.*?</page>\n", xml[first:last], flags=re.S)
    assert b"".join(pages) == xml[first:last]
    chunks = [xml[:first]] + [b"".join(pages[i:i + pages_per_stream]) for i in range(0, len(pages), pages_per_stream)]
    return b"".join(bz2.compress(c) for c in [*chunks, xml[last:]])


@pytest.mark.parametrize("kind", ["bz2", "bz2-multistream"])
def test_truncated_dump_names_the_file_and_the_last_complete_page(kind: str, env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    dump = tmp_path / "enwiki-cut.xml.bz2"
    data = (SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2").read_bytes()
    if kind == "bz2-multistream":
        data = multistream(bz2.decompress(data))
    config = write_config(tmp_path / "cut.yaml", {"name": "cut", "data_root": str(tmp_path / "data"),
                                                  "sources": {"wikipedia": {"dumps": {"en": str(dump)}}}})
    with fault(f"truncated {kind} dump"):
        dump.write_bytes(data[: len(data) // 2])
        done = run_local(config, env)
        assert done.rc == 1, done.explain()
        # one bz2 block (the sample) holds every page: cut anywhere, no page is complete; a multistream dump keeps
        # the pages of its complete streams and names the last one
        last = "the last complete page is '[^']+'" if kind == "bz2-multistream" else "before any complete page"
        assert re.search(rf"wiki_shard\.en\.0000: build failed \(TruncatedDumpError: {re.escape(str(dump))}: "
                         rf"[^;]*truncated[^;]*[;,] {last}", done.log), done.explain()
        assert "wiki_shard.en.0000: build failed" in done.log
        assert not published(tmp_path / "data", "wiki_shard") and not leftovers(tmp_path / "data")


def test_misaligned_bitext_names_both_files_and_their_line_counts(env: dict[str, str], tmp_path: Path) -> None:
    src, tgt = tmp_path / "en-de.en", tmp_path / "en-de.de"
    shutil.copyfile(SAMPLE / "bitext" / "en-de.en", src)
    lines = (SAMPLE / "bitext" / "en-de.de").read_bytes().splitlines(keepends=True)
    config = write_config(tmp_path / "bitext.yaml", {
        "name": "misaligned", "data_root": str(tmp_path / "data"),
        "sources": {"bitext": [{"src": "en", "tgt": "de", "src_file": str(src), "tgt_file": str(tgt)}]},
        "corpora": {"bitext_pairs": {"pivots": ["en"]}}})
    with fault("misaligned bitext (one line missing)"):
        del lines[len(lines) // 2]
        tgt.write_bytes(b"".join(lines))
        n_src = len(src.read_bytes().splitlines())
        done = run_local(config, env)
        assert done.rc == 1, done.explain()
        assert (f"line-aligned files differ in length: {src} has {n_src} lines, {tgt} has {n_src - 1} lines "
                f"(the shortest ends after line {n_src - 1})") in done.log, done.explain()
        assert "bitext_pairs: build failed" in done.log
        assert not published(tmp_path / "data", "bitext_pairs") and not leftovers(tmp_path / "data")


def test_unknown_config_key_names_file_line_and_key(env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path / "cfg")
    cfg = yaml.safe_load(config.read_text())
    cfg["corpora"]["bitext_pairs"]["quota_per_languag"] = 5
    config = write_config(config, cfg)
    line = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if "quota_per_languag:" in text)
    with fault("unknown config key"):
        for command in ("validate", "run"):
            done = polysent(command, str(config), env=env, timeout=120)
            assert done.rc == 2, done.explain()
            assert (f"{config}:{line}: corpora.bitext_pairs.quota_per_languag: unknown key (value 5); expected one of: "
                    "pivots, quota_mode, quota_per_language") in flat_err(done), done.explain()
        assert not (tmp_path / "cfg" / "data").exists(), "an invalid configuration must not write anything"


def flat_err(done: Finished) -> str:
    return re.sub(r"\s+", " ", done.stderr)


def test_a_node_failure_under_prefect_prints_its_error_once(env: dict[str, str], tmp_path: Path) -> None:
    """A node that fails inside a Prefect run: one line names the node and its error, one says the run failed; no
    traceback (Prefect's task- and flow-run copies of it stay in its API for the UI; -v prints the traceback)."""
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")  # a model folder whose config names no model type
    config = tmp_path / "c.yaml"
    config.write_text(f"name: broken\ndata_root: {tmp_path / 'data'}\nsources:\n  eval:\n"
                      f"    tatoeba: {SAMPLE / 'eval' / 'tatoeba'}\n"
                      f"evaluation:\n  models: {{broken: {model}}}\n  tatoeba: {{xtreme: false, mteb: false}}\n"
                      "  bucc: null\n  sts: null\n  clustering: null\n  classification: null\n  xsim: null\n"
                      "  geometry: null\n  langid: null\n", encoding="utf-8")
    with fault("a node failing inside a Prefect run"):
        done = polysent("run", str(config), "--executor", "prefect", env=env)
    assert done.rc == 1, done.explain()
    log = done.log
    assert "Traceback" not in log, done.explain()
    assert log.count("Should have a `model_type` key") == 1, done.explain()
    assert "evaluate.broken: build failed (ValueError: Unrecognized model" in log
    assert "pipeline failed at node evaluate.broken (its error is above" in log
