"""NTREX-128 split by documents (pipelines/ntrex_documents.py) wherever a config reads NTREX: the ``nway`` bitext
source (``documents: train``), the xSIM set (``parallel``, ``documents: held_out``) and the leakage guard (an
``ntrex`` evaluation set) — and, with the shared data, a corpus built that way equals the experiments' kit's."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from pipelines.bitext.readers import BitextFormatError, count_pairs, iter_chunks
from pipelines.bitext.sources import NwaySource
from pipelines.eval_sets.parallel import ParallelSource, parallel_files, read_parallel
from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
from pipelines.ntrex_documents import document_ids, selected_lines, split_lines

CODES = {"en": "eng", "de": "deu", "fr": "fra"}
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _ntrex(root: Path, docs: list[str]) -> Path:
    """A purpose-built NTREX folder: line i of every language is ``<code>:<i>:<document>``."""
    folder = root / "ntrex128"
    folder.mkdir(parents=True)
    (folder / "DOCUMENT_IDS.tsv").write_text("\n".join(docs) + "\n", encoding="utf-8")
    for code in CODES.values():
        name = "newstest2019-src.eng.txt" if code == "eng" else f"newstest2019-ref.{code}.txt"
        (folder / name).write_text("\n".join(f"{code}:{i}:{d}" for i, d in enumerate(docs)) + "\n", encoding="utf-8")
    return folder


DOCS = [f"doc{k}" for k in range(12) for _ in range(k % 3 + 1)]  # 12 documents of 1–3 consecutive lines
HELD = {"doc4", "doc9"}  # the 5th and the 10th document


def test_every_fifth_document_is_held_out_whole_and_the_rest_trains() -> None:
    train, held = split_lines(DOCS, 5)
    assert {DOCS[i] for i in held} == HELD
    assert not {DOCS[i] for i in train} & HELD
    assert sorted(train + held) == list(range(len(DOCS)))
    assert split_lines(DOCS, 3)[1] != held  # the setting is read
    with pytest.raises(ValueError, match="held_out_every must be ≥ 2"):
        split_lines(DOCS, 1)


def test_document_ids_refuse_a_blank_id_and_a_count_that_is_not_the_files(tmp_path: Path) -> None:
    path = tmp_path / "DOCUMENT_IDS.tsv"
    path.write_text("a\n\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"DOCUMENT_IDS\.tsv:2: blank document id"):
        document_ids(path)
    path.write_text("a\na\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"3 document ids, but the data files have 4 lines"):
        selected_lines(path, "train", 5, n_lines=4)
    assert selected_lines(path, "all", 5, n_lines=4) is None
    with pytest.raises(FileNotFoundError, match="NTREX's document ids are missing"):
        document_ids(tmp_path / "missing.tsv")


def _bitext(source: NwaySource) -> pl.DataFrame:
    return pl.concat(list(iter_chunks(source, ["en"], chunk_rows=7)))


def test_nway_source_reads_the_training_documents_only_with_their_own_line_numbers(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path, DOCS)
    files = {"en": folder / "newstest2019-src.eng.txt", "de": folder / "newstest2019-ref.deu.txt",
             "fr": folder / "newstest2019-ref.fra.txt"}
    every = _bitext(NwaySource(format="nway", files=files))
    train = _bitext(NwaySource(format="nway", files=files, documents="train",
                               document_ids=folder / "DOCUMENT_IDS.tsv"))
    held = _bitext(NwaySource(format="nway", files=files, documents="held_out",
                              document_ids=folder / "DOCUMENT_IDS.tsv"))
    assert every.height == 2 * len(DOCS)
    assert train.height + held.height == every.height
    assert {t.rsplit(":", 1)[1] for t in held["src_text"]} == HELD
    assert not {t.rsplit(":", 1)[1] for t in train["src_text"]} & HELD
    # line numbers are the files' own (1-based), and both sides of a pair are the same line
    for df in (train, held):
        assert all(int(s.split(":")[1]) + 1 == n for s, n in zip(df["src_text"], df["line"], strict=True))
        assert all(s.split(":", 1)[1] == t.split(":", 1)[1]
                   for s, t in zip(df["src_text"], df["tgt_text"], strict=True))
    counts = count_pairs(NwaySource(format="nway", files=files, documents="train",
                                    document_ids=folder / "DOCUMENT_IDS.tsv"), ["en"])
    assert counts == {("en", "de"): train.height // 2, ("en", "fr"): train.height // 2}
    # dir + pattern reads dir/DOCUMENT_IDS.tsv by default
    with_dir = NwaySource(format="nway", dir=folder, pattern="newstest2019-ref.{code}.txt",
                          languages={"de": "deu", "fr": "fra"}, documents="train")
    assert with_dir.document_ids_file() == folder / "DOCUMENT_IDS.tsv"


def test_nway_documents_refuse_ids_that_do_not_match_the_files(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path, DOCS)
    (folder / "DOCUMENT_IDS.tsv").write_text("\n".join(DOCS[:-2]) + "\n", encoding="utf-8")
    source = NwaySource(format="nway", files={"en": folder / "newstest2019-src.eng.txt",
                                              "de": folder / "newstest2019-ref.deu.txt"},
                        documents="train", document_ids=folder / "DOCUMENT_IDS.tsv")
    with pytest.raises(BitextFormatError, match=rf"DOCUMENT_IDS\.tsv: {len(DOCS) - 2} document ids, but the nway "
                                                rf"files .* have {len(DOCS)} lines"):
        _bitext(source)
    with pytest.raises(BitextFormatError, match="document ids, but the nway files"):
        count_pairs(source, ["en"])
    with pytest.raises(ValidationError, match="documents: train needs document_ids"):
        NwaySource(format="nway", files={"en": folder / "a", "de": folder / "b"}, documents="train")


def test_the_xsim_set_reads_the_held_out_documents_and_hashes_their_ids(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path, DOCS)
    held = read_parallel(ParallelSource(format="ntrex", path=folder, languages=["deu"], documents="held_out"))
    assert set(held["lang"]) == {"eng", "deu"}
    assert {t.rsplit(":", 1)[1] for t in held["text"]} == HELD
    assert sorted(set(held["idx"])) == [i for i, d in enumerate(DOCS) if d in HELD]  # the files' own lines
    assert read_parallel(ParallelSource(format="ntrex", path=folder, languages=["deu"])).height == 2 * len(DOCS)
    assert folder / "DOCUMENT_IDS.tsv" in parallel_files(ParallelSource(format="ntrex", path=folder,
                                                                         documents="held_out"))
    assert folder / "DOCUMENT_IDS.tsv" not in parallel_files(ParallelSource(format="ntrex", path=folder))
    with pytest.raises(ValidationError, match="format flores has no document ids"):
        ParallelSource(format="flores", path=folder, documents="held_out")


def test_the_leakage_guard_reads_an_ntrex_set_by_documents_and_languages(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path, DOCS)
    spec = EvalSetSpec(name="ntrex_heldout", path=folder, format="ntrex", languages=["deu"], documents="held_out")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[spec]))
    texts = {tuple(t.split()) for t in index.texts["norm"]}  # normalised: "deu 4 doc4"
    held_lines = [i for i, d in enumerate(DOCS) if d in HELD]
    assert len(texts) == 2 * len(held_lines)  # eng and deu, the held-out lines only (fra not asked for)
    assert {t[0] for t in texts} == {"eng", "deu"}
    assert {int(t[1]) for t in texts} == set(held_lines)
    assert folder / "DOCUMENT_IDS.tsv" in spec.resolve()
    with pytest.raises(ValidationError, match="languages and documents are for format ntrex"):
        EvalSetSpec(name="x", path=folder, format="lines", documents="held_out")


@pytest.mark.skipif(not (SHARED / "parallel" / "ntrex128" / "DOCUMENT_IDS.tsv").is_file(),
                    reason=f"needs the shared NTREX-128 ({SHARED / 'parallel' / 'ntrex128'}), absent here")
def test_a_config_built_from_ntrex_documents_trains_on_what_the_kit_trains_on(tmp_path: Path) -> None:
    """The route a config takes (``nway`` + ``documents: train``, an ``ntrex`` leakage set of the held-out
    documents) and the kit's (the split written out as files, read as ``nway`` files and ``lines``) select the same
    pairs: configs/examples/me5-best.yaml trains on what experiments/me5_recipes measured."""
    from experiments.kits import HELD_OUT_EVERY, NTREX_CODES, _write_ntrex

    ntrex = SHARED / "parallel" / "ntrex128"
    codes = {"en": "eng", **NTREX_CODES}
    files = _write_ntrex(ntrex, codes, HELD_OUT_EVERY, tmp_path / "train", tmp_path / "held")
    published = {lang: ntrex / (f"newstest2019-ref.{code}.txt" if lang != "en" else "newstest2019-src.eng.txt")
                 for lang, code in codes.items()}
    a = _kit_and_config_pairs(tmp_path, files, NwaySource(format="nway", files=published, documents="train",
                                                          document_ids=ntrex / "DOCUMENT_IDS.tsv"),
                              EvalSetSpec(name="ntrex_heldout", path=ntrex, format="ntrex",
                                          languages=list(NTREX_CODES.values()), documents="held_out"))
    assert a.height > 1000


def test_the_document_fields_enter_a_dump_and_so_a_cache_key_only_when_set(tmp_path: Path) -> None:
    """Configs written before the split keep their cache keys (tests/test_dag_specs.py); one that sets it moves."""
    files = {"en": tmp_path / "en.txt", "de": tmp_path / "de.txt"}
    plain = NwaySource(format="nway", files=files).model_dump()
    assert not {"documents", "held_out_every", "document_ids"} & set(plain)
    split = NwaySource(format="nway", files=files, documents="train", document_ids=tmp_path / "ids.tsv").model_dump()
    assert split["documents"] == "train" and split["document_ids"] == tmp_path / "ids.tsv"
    assert "held_out_every" not in split  # still its default
    assert set(EvalSetSpec(name="x", path=tmp_path).model_dump()) == {"name", "path", "format", "columns"}
    assert EvalSetSpec(name="x", path=tmp_path, format="ntrex", languages=["deu"]).model_dump()["languages"] == ["deu"]
    assert "documents" not in ParallelSource(format="ntrex", path=tmp_path).model_dump()
    assert ParallelSource(format="ntrex", path=tmp_path, held_out_every=4).model_dump()["held_out_every"] == 4


def _all_language_source(ntrex: Path, **kw: object) -> NwaySource:
    """The config route to every NTREX language under the kit's names (configs/examples/me5-all-languages.yaml)."""
    from experiments.kits import NTREX_CODES, RANDOM_INIT_NTREX

    return NwaySource(format="nway", dir=ntrex, layout="ntrex", languages={**RANDOM_INIT_NTREX, **NTREX_CODES},
                      all_languages=True, **kw)


@pytest.mark.skipif(not (SHARED / "parallel" / "ntrex128" / "DOCUMENT_IDS.tsv").is_file(),
                    reason=f"needs the shared NTREX-128 ({SHARED / 'parallel' / 'ntrex128'}), absent here")
def test_a_config_reads_every_ntrex_language_under_the_kits_names() -> None:
    """``layout: ntrex`` + ``all_languages`` reads the files the kit's all-language corpora read
    (``experiments.kits.ntrex_all_languages``), each under the same language name: 128 languages, the second Spanish
    reference left out."""
    from experiments.kits import ntrex_all_languages

    ntrex = SHARED / "parallel" / "ntrex128"
    kit = {lang: ntrex / ("newstest2019-src.eng.txt" if code == "eng" else f"newstest2019-ref.{code}.txt")
           for lang, code in ntrex_all_languages(ntrex).items()}
    files = _all_language_source(ntrex, documents="train").language_files()
    assert files == kit
    assert len(files) == 128 and "newstest2019-ref-2.spa.txt" not in {p.name for p in files.values()}


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "parallel" / "ntrex128" / "DOCUMENT_IDS.tsv").is_file(),
                    reason=f"needs the shared NTREX-128 ({SHARED / 'parallel' / 'ntrex128'}), absent here")
def test_a_config_built_from_every_ntrex_language_trains_on_what_the_kit_trains_on(tmp_path: Path) -> None:
    """As the six-language test above, at NTREX's full width: the config route (``layout: ntrex``,
    ``all_languages``, ``documents: train``, an ``ntrex`` leakage set of every language's held-out documents) and the
    kit's (``all_language_corpora``'s split files) select the same pairs in all 128 languages."""
    from experiments.kits import HELD_OUT_EVERY, _write_ntrex, ntrex_all_languages

    ntrex = SHARED / "parallel" / "ntrex128"
    files = _write_ntrex(ntrex, ntrex_all_languages(ntrex), HELD_OUT_EVERY, tmp_path / "train", tmp_path / "held")
    a = _kit_and_config_pairs(tmp_path, files, _all_language_source(ntrex, documents="train"),
                              EvalSetSpec(name="ntrex_heldout", path=ntrex, format="ntrex", documents="held_out"))
    assert a["lang"].n_unique() == 127 and a.height > 400_000  # every language but the pivot en


def _kit_and_config_pairs(tmp_path: Path, kit_files: dict[str, Path], config_source: NwaySource,
                          config_guard: EvalSetSpec) -> pl.DataFrame:
    """The pairs of the kit's route (``kit_files``, the split ``_write_ntrex`` wrote under ``tmp_path``, guarded by
    its held-out files in ``tmp_path/held``) and of the config's (``config_source`` guarded by ``config_guard``),
    en/es pivots, 3,000 a language — checked to select the same texts and remove the same leaks; returns the kit's."""
    from pipelines.bitext.sampling import BitextSettings, build_pairs

    settings = BitextSettings(pivots=["en", "es"], quota_mode="equal", quota_per_language=3000)
    (tmp_path / "kit").mkdir()
    (tmp_path / "config").mkdir()
    kit = build_pairs(settings, [NwaySource(format="nway", files=kit_files)], EvalTextIndex.from_settings(
        LeakageSettings(eval_sets=[EvalSetSpec(name="ntrex_heldout", path=tmp_path / "held")])), tmp_path / "kit")
    config = build_pairs(settings, [config_source],
                         EvalTextIndex.from_settings(LeakageSettings(eval_sets=[config_guard])), tmp_path / "config")
    a = pl.read_parquet(tmp_path / "kit" / kit.tables["bitext_pairs"])
    b = pl.read_parquet(tmp_path / "config" / config.tables["bitext_pairs"])
    texts = [c for c in a.columns if c not in ("origin", "line")]
    assert a.select(texts).equals(b.select(texts))
    assert kit.stats["leaked"] == config.stats["leaked"]
    return a
