"""mteb's hub copies of the evaluation sets → the same tables as the local readers (online only).

Ids and revisions are those of the installed mteb 2.26 task files (``mteb/tasks/…``); each dataset is loaded as mteb
loads it: multilingual "fast loading" tasks (Tatoeba, BUCC.v2, STS17) from the default config whose rows carry a
``lang`` column, MTOP and SIB-200 one config per language, the rest from their single config. Every load goes
through ``datasets.load_dataset(id, config, split=…, revision=…)`` (:func:`pipelines.hub.load_hub_dataset`, which
fails at once when ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` is set or the hub is unreachable); a failure is re-raised
as :class:`HubLoadError` naming the id, the revision, why (offline / no network), and the local format to use
instead. Tests inject ``loader`` (any ``(hub_id, config, split, revision) → datasets.Dataset``) instead of the hub.

Conversions (texts stripped; mteb's Tatoeba texts end in a line break):

- ``Tatoeba`` → ``eval_tatoeba`` (subset ``deu-eng`` → ``lang="deu"``; sentence1 = xx, sentence2 = English).
- ``BUCC.v2`` → ``eval_bucc`` + ``eval_bucc_gold``: mteb's rows are the *gold pairs* of BUCC's training split
  (sentence1 ↔ sentence2, row-aligned; no IDs, no distractors), so ``split="training-gold"`` and IDs
  ``{lang}-{row:09d}`` (1-based) are made up. Not a mining set (methods.md §7.3: mteb BUCC is retrieval).
- ``STS12``–``STS16``, ``STSBenchmark``, ``SICK-R`` → ``eval_sts`` (``subset`` = split); ``STS17`` → ``eval_sts``
  with ``subset`` = mteb's pair (``en-ar``), whose order is the column order.
- ``MTOPDomainClassification`` / ``MTOPIntentClassification`` / ``SIB200Classification`` → ``eval_classification``
  (label: ``label_text`` when present, else the ClassLabel name, else the value as text).
- ``FloresBitextMining`` / ``NTREXBitextMining`` → ``eval_parallel`` (one column per language code, rows aligned).
- ``MewsC16JaClustering`` → ``eval_clustering`` (JMTEB's 992-sentence test half of MewsC-16 ja, so its own
  ``dataset`` name).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipelines.eval_sets import bucc, classification, clustering, parallel, sts, tatoeba
from pipelines.eval_sets.lines import concat
from pipelines.language_codes import is_flores_code

log = logging.getLogger("polysent.pipelines.eval_sets")

Loader = Callable[[str, str | None, str, str], Any]


class HubLoadError(RuntimeError):
    """A hub dataset could not be loaded; the message says which, why, and which local format to use instead."""


@dataclass(frozen=True)
class HubDataset:
    hub_id: str
    revision: str
    table: str
    splits: tuple[str, ...]
    local: str  # the local alternative, named in errors
    dataset: str = ""  # value of the table's ``dataset`` column
    by_config: tuple[str, ...] = ()  # one config per subset (default subsets); () = a single config
    lang_column: bool = False  # mteb fast loading: the default config holds every subset in a ``lang`` column


_LOCAL_TATOEBA = "sources.eval.tatoeba: a folder of LASER tatoeba.{xxx}-eng.{xxx,eng} files"
_LOCAL_STS = "sources.eval.sts: an entry {format: semeval|stsbenchmark|sick|stsb_multi_mt, path: …}"
_LOCAL_CLS = "sources.eval.classification: an entry {format: mtop|mldoc|sib200, path: …}"
_LOCAL_PAR = "sources.eval.parallel: an entry {format: ntrex|flores, path: …}"
_MTOP = ("en", "de", "es", "fr", "hi", "th")

HUB_DATASETS: dict[str, HubDataset] = {
    "Tatoeba": HubDataset("mteb/tatoeba-bitext-mining", "69e8f12da6e31d59addadda9a9c8a2e601a0e282", "eval_tatoeba",
                          ("test",), _LOCAL_TATOEBA, lang_column=True),
    "BUCC.v2": HubDataset("mteb/bucc-bitext-mining", "1739dc11ffe9b7bfccd7f3d585aeb4c544fc6677", "eval_bucc",
                          ("test",), "sources.eval.bucc: a folder of BUCC 2018 {src}-en.{split}.{src,en,gold} files",
                          lang_column=True),
    "STS17": HubDataset("mteb/sts17-crosslingual-sts", "faeb762787bd10488a50c8b5be4a3b82e411949c", "eval_sts",
                        ("test",), _LOCAL_STS, dataset="sts17", lang_column=True),
    "STS12": HubDataset("mteb/sts12-sts", "a0d554a64d88156834ff5ae9920b964011b16384", "eval_sts", ("test",),
                        _LOCAL_STS, dataset="sts12"),
    "STS13": HubDataset("mteb/sts13-sts", "7e90230a92c190f1bf69ae9002b8cea547a64cca", "eval_sts", ("test",),
                        _LOCAL_STS, dataset="sts13"),
    "STS14": HubDataset("mteb/sts14-sts", "6031580fec1f6af667f0bd2da0a551cf4f0b2375", "eval_sts", ("test",),
                        _LOCAL_STS, dataset="sts14"),
    "STS15": HubDataset("mteb/sts15-sts", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3", "eval_sts", ("test",),
                        _LOCAL_STS, dataset="sts15"),
    "STS16": HubDataset("mteb/sts16-sts", "4d8694f8f0e0100860b497b999b3dbed754a0513", "eval_sts", ("test",),
                        _LOCAL_STS, dataset="sts16"),
    "STSBenchmark": HubDataset("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831", "eval_sts",
                               ("test",), _LOCAL_STS, dataset="stsb"),
    "SICK-R": HubDataset("mteb/sickr-sts", "20a6d6f312dd54037fe07a32d58e5e168867909d", "eval_sts", ("test",),
                         _LOCAL_STS, dataset="sick-r"),
    "MTOPDomainClassification": HubDataset(
        "mteb/MTOPDomainClassification", "a76d16fae880597b9c73047b50159220a441cb54", "eval_classification",
        ("train", "validation", "test"), _LOCAL_CLS, dataset="mtop_domain", by_config=_MTOP),
    "MTOPIntentClassification": HubDataset(
        "mteb/MTOPIntentClassification", "2992d820f31312593c49a4890430aadadb0f0039", "eval_classification",
        ("train", "validation", "test"), _LOCAL_CLS, dataset="mtop_intent", by_config=_MTOP),
    # 205 language configs (eng_Latn …): name the ones to load in eval_sets.hub_subsets
    "SIB200Classification": HubDataset("mteb/sib200", "a74d7350ea12af010cfb1c21e34f1f81fd2e615b",
                                       "eval_classification", ("train", "validation", "test"), _LOCAL_CLS,
                                       dataset="sib200", by_config=("eng_Latn",)),
    "FloresBitextMining": HubDataset("mteb/FloresBitextMining", "2144d16cc15edd22d4a9237d12bff5f31f5c07fc",
                                     "eval_parallel", ("devtest",), _LOCAL_PAR, dataset="flores200"),
    "NTREXBitextMining": HubDataset("mteb/NTREXBitextMining", "66b8b27efc99658903127730575e9fa0cb9f075c",
                                    "eval_parallel", ("test",), _LOCAL_PAR, dataset="ntrex128"),
    "MewsC16JaClustering": HubDataset("mteb/MewsC16JaClustering", "f50ef5a569175d8a1a04cbbe2c8012d138eb5e71",
                                      "eval_clustering", ("test",),
                                      "sources.eval.clustering: a MewsC-16 folder with ja_sentences.txt and "
                                      "ja_categories.txt", dataset="MewsC16JaClustering"),
}


def _hub_loader(hub_id: str, config: str | None, split: str, revision: str) -> Any:
    from pipelines.hub import load_hub_dataset

    return load_hub_dataset(hub_id, config, split, local_formats="the local format named below", revision=revision)


def _load(name: str, spec: HubDataset, config: str | None, split: str, loader: Loader) -> pl.DataFrame:
    try:
        ds = loader(spec.hub_id, config, split, spec.revision)
    except Exception as exc:
        flags = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
        raise HubLoadError(
            f"mteb dataset {name}: {spec.hub_id} (revision {spec.revision}, config {config or 'default'}, split "
            f"{split}) could not be loaded ({type(exc).__name__}: {str(exc)[:300]}). Hub datasets need network "
            f"access to huggingface.co (or a copy in the local datasets cache); with {flags}, offline or without "
            f"network, it cannot be downloaded. Use the local format instead: {spec.local}"
        ) from exc
    table = ds.with_format("arrow")[:]
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    label_names = getattr(getattr(ds, "features", {}).get("label"), "names", None)
    if label_names and "label" in df.columns and "label_text" not in df.columns:
        df = df.with_columns(label_text=pl.col("label").replace_strict(dict(enumerate(label_names)),
                                                                       return_dtype=pl.String))
    return df


def _need(df: pl.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise HubLoadError(f"{what}: the dataset lacks columns {missing}; it has {df.columns}")


def _strip(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.String).str.strip_chars()


def _by_lang(df: pl.DataFrame, subsets: Sequence[str], what: str) -> dict[str, pl.DataFrame]:
    _need(df, ["lang"], what)
    parts = {k[0]: v for k, v in df.partition_by("lang", as_dict=True, maintain_order=True).items()}
    wanted = list(subsets) or sorted(parts)
    missing = [s for s in wanted if s not in parts]
    if missing:
        raise HubLoadError(f"{what}: no rows for subsets {missing} (subsets present: {sorted(parts)})")
    return {s: parts[s] for s in wanted}


def _row_idx(offset: int = 0) -> pl.Expr:
    return pl.int_range(offset, pl.len() + offset, dtype=pl.Int32)


def _tatoeba(name: str, spec: HubDataset, subsets: Sequence[str], loader: Loader) -> dict[str, pl.DataFrame]:
    subsets = [s if "-" in s else f"{s}-eng" for s in subsets]
    frames = []
    for split in spec.splits:
        df = _load(name, spec, None, split, loader)
        for subset, part in _by_lang(df, subsets, f"{spec.hub_id} {split}").items():
            _need(part, ["sentence1", "sentence2"], f"{spec.hub_id} {subset}")
            frames.append(part.select(lang=pl.lit(subset.split("-")[0]), idx=_row_idx(), text=_strip("sentence1"),
                                      eng=_strip("sentence2")))
    return {"eval_tatoeba": concat(frames, tatoeba.SCHEMA)}


def _bucc(name: str, spec: HubDataset, subsets: Sequence[str], loader: Loader) -> dict[str, pl.DataFrame]:
    sentences, golds = [], []
    for split in spec.splits:
        df = _load(name, spec, None, split, loader)
        for pair, part in _by_lang(df, subsets, f"{spec.hub_id} {split}").items():
            _need(part, ["sentence1", "sentence2"], f"{spec.hub_id} {pair}")
            src = pair.split("-")[0]
            rows = part.with_row_index("row", offset=1).with_columns(
                src_id=pl.format(f"{src}-{{}}", pl.col("row").cast(pl.String).str.zfill(9)),
                tgt_id=pl.format("en-{}", pl.col("row").cast(pl.String).str.zfill(9)))
            for lang, id_col, text_col in ((src, "src_id", "sentence1"), ("en", "tgt_id", "sentence2")):
                sentences.append(rows.select(pair=pl.lit(pair), split=pl.lit("training-gold"), lang=pl.lit(lang),
                                             id=id_col, text=_strip(text_col), line=pl.col("row").cast(pl.Int32)))
            golds.append(rows.select(pair=pl.lit(pair), split=pl.lit("training-gold"), src_id="src_id",
                                     tgt_id="tgt_id"))
    return {"eval_bucc": concat(sentences, bucc.SCHEMA), "eval_bucc_gold": concat(golds, bucc.GOLD_SCHEMA)}


def _sts(name: str, spec: HubDataset, subsets: Sequence[str], loader: Loader) -> dict[str, pl.DataFrame]:
    frames = []
    for split in spec.splits:
        df = _load(name, spec, None, split, loader)
        parts = _by_lang(df, subsets, f"{spec.hub_id} {split}") if spec.lang_column else {split: df}
        for subset, part in parts.items():
            _need(part, ["sentence1", "sentence2", "score"], f"{spec.hub_id} {subset}")
            lang1, lang2 = subset.split("-") if spec.lang_column else ("en", "en")
            out = part.select(dataset=pl.lit(spec.dataset), subset=pl.lit(subset), lang1=pl.lit(lang1),
                              lang2=pl.lit(lang2), idx=_row_idx(1), s1=_strip("sentence1"), s2=_strip("sentence2"),
                              score=pl.col("score").cast(pl.Float64))
            bad = out.filter(~pl.col("score").is_between(sts.MIN_SCORE, sts.MAX_SCORE) | pl.col("score").is_nan())
            if bad.height:
                raise HubLoadError(f"{spec.hub_id} {subset}: row {bad['idx'][0]} (1-based) has score "
                                   f"{bad['score'][0]}, outside [{sts.MIN_SCORE:g}, {sts.MAX_SCORE:g}]")
            frames.append(out)
    return {"eval_sts": concat(frames, sts.SCHEMA)}


def _classification(name: str, spec: HubDataset, subsets: Sequence[str],
                    loader: Loader) -> dict[str, pl.DataFrame]:
    frames = []
    for config in list(subsets) or list(spec.by_config):
        for split in spec.splits:
            df = _load(name, spec, config, split, loader)
            label = next((c for c in ("label_text", "category", "label") if c in df.columns), None)
            _need(df, ["text", label or "label"], f"{spec.hub_id} {config} {split}")
            frames.append(df.select(dataset=pl.lit(spec.dataset), lang=pl.lit(config), split=pl.lit(split),
                                    idx=_row_idx(1), text=_strip("text"), label=_strip(label)))
    return {"eval_classification": concat(frames, classification.SCHEMA)}


def _parallel(name: str, spec: HubDataset, subsets: Sequence[str], loader: Loader) -> dict[str, pl.DataFrame]:
    frames = []
    for split in spec.splits:
        df = _load(name, spec, None, split, loader)
        langs = list(subsets) or [c for c in df.columns if is_flores_code(c)]
        _need(df, langs, f"{spec.hub_id} {split}")
        frames += [df.select(dataset=pl.lit(spec.dataset), lang=pl.lit(lang), idx=_row_idx(), text=_strip(lang))
                   for lang in langs]
    return {"eval_parallel": concat(frames, parallel.SCHEMA)}


def _clustering(name: str, spec: HubDataset, subsets: Sequence[str], loader: Loader) -> dict[str, pl.DataFrame]:
    frames = []
    for split in spec.splits:
        df = _load(name, spec, None, split, loader)
        _need(df, ["sentences", "labels"], f"{spec.hub_id} {split}")
        if df.schema["sentences"] == pl.List(pl.String):  # legacy layout: one row per cluster set
            df = df.explode("sentences", "labels")
        frames.append(df.select(dataset=pl.lit(spec.dataset), lang=pl.lit("ja"), idx=_row_idx(),
                                text=_strip("sentences"), label=_strip("labels")))
    return {"eval_clustering": concat(frames, clustering.SCHEMA)}


_CONVERTERS = {"eval_tatoeba": _tatoeba, "eval_bucc": _bucc, "eval_sts": _sts,
               "eval_classification": _classification, "eval_parallel": _parallel, "eval_clustering": _clustering}


def load_hub(name: str, subsets: Sequence[str] = (), loader: Loader | None = None) -> dict[str, pl.DataFrame]:
    """Table name → frame for the mteb dataset ``name`` (a key of :data:`HUB_DATASETS`); ``subsets`` picks mteb
    subsets (``deu-eng``, ``zh-en``, ``en-ar``), configs (``de``, ``eng_Latn``) or language columns; empty = all."""
    if name not in HUB_DATASETS:
        raise ValueError(f"unknown mteb dataset {name!r}; known: {sorted(HUB_DATASETS)}")
    spec = HUB_DATASETS[name]
    tables = _CONVERTERS[spec.table](name, spec, list(subsets), loader or _hub_loader)
    log.info("hub %s (%s@%s): %s", name, spec.hub_id, spec.revision[:12],
             ", ".join(f"{t}={df.height}" for t, df in tables.items()))
    return tables
