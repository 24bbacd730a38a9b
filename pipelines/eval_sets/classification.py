"""Classification probe sets from user-supplied files → ``eval_classification`` (methods.md §7.6, §4.5).

Table ``eval_classification``: ``dataset``, ``lang``, ``split``, ``idx`` (1-based source line), ``text``, ``label``.

- MTOP (Li et al. 2021, the release ``mtop/{lang}/{train,eval,test}.txt``; mteb ``MTOPDomainClassification`` /
  ``MTOPIntentClassification`` hold the same utterances): tab-separated, no header, no quoting; the release's README
  lists 8 fields — ID, intent, slot string, utterance, domain, locale, decoupled form, tokens JSON. Copies without the
  ID field (7 fields, the first one the ``IN:`` intent) are read too. Every line gives a row of ``mtop_domain`` (label
  = domain) and of ``mtop_intent`` (label = intent as written, e.g. ``IN:GET_WEATHER``). The locale (``de_DE``) must be
  the folder's language.
- MLDoc (Schwenk & Li 2018, facebookresearch/MLDoc; EASE ``downstreams/cross-lingual-transfer``):
  ``{language}.{split}`` files such as ``english.train.1000``, ``german.test``; lines ``LABEL<TAB>text`` with labels
  CCAT, ECAT, GCAT, MCAT. Language names → ISO 639-1; ``split`` is the rest of the name (``train.1000``, ``dev``).
- SIB-200 layout (Adelani et al. 2023, dadelani/sib-200 ``data/annotated``): ``{lang_script}/{split}.tsv`` with the
  header ``index_id<TAB>category<TAB>text``, written by pandas, so fields holding ``"`` are CSV-quoted: read with
  the csv module (tab delimiter), as the dataset's own loader does with ``pandas.read_csv(sep="\\t")``. Any topic
  labelled N-way set in this layout can be read under its own ``dataset`` name.

A malformed row — wrong field count, empty text or label, a label outside MLDoc's four, a locale of another language —
is skipped, counted per file and problem with its lines, and logged (:class:`~pipelines.eval_sets.lines.BadRows`); a
file with no readable row fails naming it. Errors name ``file:line``: a wrong SIB-200 header, an MLDoc file name that
is no MLDoc language, a folder name that is no language tag (a folder's code is the data set's own and is kept whether
or not ICU knows it: SIB-200's ``taq_Tfng``).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field, field_validator

from pipelines.eval_sets.lines import (
    BadRows,
    EvalFormatError,
    Skipped,
    concat,
    drop_trailing_blank,
    read_text_lines,
    skipped_or_new,
)
from pipelines.eval_sets.source_config import StrictConfig, checked_languages
from pipelines.language_codes import data_language, primary_subtag

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"dataset": pl.String, "lang": pl.String, "split": pl.String, "idx": pl.Int32, "text": pl.String,
          "label": pl.String}

MLDOC_LANGUAGES = {"english": "en", "german": "de", "french": "fr", "spanish": "es", "italian": "it",
                   "japanese": "ja", "russian": "ru", "chinese": "zh"}
MLDOC_LABELS = ("CCAT", "ECAT", "GCAT", "MCAT")
MTOP_FIELDS = ("id", "intent", "slots", "utterance", "domain", "locale", "decoupled", "tokens")
SIB200_HEADER = ("index_id", "category", "text")
TABLE = "eval_classification"


def _rows(dataset: str, lang: str, split: str, rows: list[tuple[int, str, str]]) -> pl.DataFrame:
    return pl.DataFrame({"dataset": dataset, "lang": lang, "split": split, "idx": [r[0] for r in rows],
                         "text": [r[1] for r in rows], "label": [r[2] for r in rows]}, schema=SCHEMA)


def _select(found: dict[str, object], wanted: Sequence[str], what: str, where: Path) -> list[str]:
    wanted = list(dict.fromkeys(wanted)) or sorted(found)
    missing = [w for w in wanted if w not in found]
    if missing:
        raise FileNotFoundError(f"{where}: no {what} {missing} (found: {sorted(found)})")
    return wanted


def _folder(folder: Path, what: str) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{what} folder not found: {folder}")
    return folder


def _split_files_by_language(folder: Path, suffix: str, languages: Sequence[str], splits: Sequence[str],
                             what: str) -> dict[tuple[str, str], Path]:
    """(lang, split) → ``{lang}/{split}{suffix}`` in the layout MTOP and SIB-200 share: a folder per language (its
    name a language tag, kept as the data set writes it) holding a file per split; ``languages`` and ``splits``
    empty = all found, else each must be there (``what``: the folders, as errors name them)."""
    found = {d.name: d for d in sorted(folder.iterdir()) if d.is_dir() and any(d.glob(f"*{suffix}"))}
    out = {}
    for lang in _select(found, languages, what, folder):
        data_language(lang, str(found[lang]))
        files = {p.stem: p for p in sorted(found[lang].glob(f"*{suffix}"))}
        for split in _select(files, splits, f"{lang} split files", found[lang]):
            out[(lang, split)] = files[split]
    return out


# --------------------------------------------------------------------------------------------------------------------
# MTOP


def mtop_files(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = ()) -> dict[tuple[str, str], Path]:
    """(lang, split) → ``{lang}/{split}.txt``."""
    return _split_files_by_language(_folder(folder, "MTOP"), ".txt", languages, splits, "MTOP language folders")


def _mtop_file(path: Path, lang: str, split: str, skipped: Skipped) -> list[pl.DataFrame]:
    domain_rows, intent_rows = [], []
    bad = BadRows(path, TABLE)
    for i, line in enumerate(drop_trailing_blank(read_text_lines(path)), start=1):
        fields = line.split("\t")
        if len(fields) == len(MTOP_FIELDS) - 1 and fields[0].startswith("IN:"):
            fields = ["", *fields]  # a copy without the ID field
        if len(fields) != len(MTOP_FIELDS):
            bad.add(i, f"expected {len(MTOP_FIELDS)} tab-separated fields ({', '.join(MTOP_FIELDS)})",
                    f", found {len(fields)}")
            continue
        rec = dict(zip(MTOP_FIELDS, (f.strip() for f in fields), strict=True))
        empty = next((key for key in ("utterance", "intent", "domain") if not rec[key]), None)
        if empty:
            bad.add(i, f"empty {empty}")
            continue
        if rec["locale"] and primary_subtag(rec["locale"]) != lang:
            bad.add(i, f"locale is not the folder's language {lang!r}", f" ({rec['locale']!r})")
            continue
        domain_rows.append((i, rec["utterance"], rec["domain"]))
        intent_rows.append((i, rec["utterance"], rec["intent"]))
    bad.report(len(domain_rows), skipped)
    return [_rows("mtop_domain", lang, split, domain_rows), _rows("mtop_intent", lang, split, intent_rows)]


def read_mtop(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = (),
              skipped: Skipped | None = None) -> pl.DataFrame:
    """``mtop_domain`` and ``mtop_intent`` rows for ``languages`` × ``splits`` (empty = all found)."""
    skipped = skipped_or_new(skipped)
    frames = []
    for (lang, split), path in mtop_files(folder, languages, splits).items():
        frames += _mtop_file(path, lang, split, skipped)
        log.info("mtop %s %s: %d utterances", lang, split, frames[-1].height)
    return concat(frames, SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# MLDoc


def mldoc_files(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = ()) -> dict[tuple[str, str], Path]:
    """(ISO 639-1 lang, split) → ``{language}.{split}``; ``languages`` as ISO 639-1 codes or MLDoc names."""
    folder = _folder(folder, "MLDoc")
    found: dict[str, dict[str, Path]] = {}
    for path in sorted(folder.iterdir()):
        name, dot, split = path.name.partition(".")
        if not dot or not path.is_file() or name.startswith("."):
            continue
        if name.lower() not in MLDOC_LANGUAGES:
            raise EvalFormatError(f"{path}: unknown MLDoc language {name!r}; expected one of "
                                  f"{sorted(MLDOC_LANGUAGES)} as in english.train.1000")
        found.setdefault(MLDOC_LANGUAGES[name.lower()], {})[split] = path
    wanted = [MLDOC_LANGUAGES.get(lang.lower(), lang) for lang in languages]
    out = {}
    for lang in _select(found, wanted, "MLDoc files for languages", folder):
        for split in _select(found[lang], splits, f"MLDoc {lang} splits", folder):
            out[(lang, split)] = found[lang][split]
    return out


def read_mldoc(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = (),
               skipped: Skipped | None = None) -> pl.DataFrame:
    skipped = skipped_or_new(skipped)
    frames = []
    for (lang, split), path in mldoc_files(folder, languages, splits).items():
        rows = []
        bad = BadRows(path, TABLE)
        for i, line in enumerate(drop_trailing_blank(read_text_lines(path)), start=1):
            label, tab, text = line.partition("\t")
            label, text = label.strip(), text.strip()
            if not tab:
                bad.add(i, "no tab; expected LABEL<TAB>text")
            elif label not in MLDOC_LABELS:
                bad.add(i, f"label not one of {list(MLDOC_LABELS)}", f" ({label!r})")
            elif not text:
                bad.add(i, "empty text; expected LABEL<TAB>text")
            else:
                rows.append((i, text, label))
        bad.report(len(rows), skipped)
        frames.append(_rows("mldoc", lang, split, rows))
        log.info("mldoc %s %s: %d documents", lang, split, len(rows))
    return concat(frames, SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# SIB-200 layout


def sib200_files(folder: Path, languages: Sequence[str] = (),
                 splits: Sequence[str] = ()) -> dict[tuple[str, str], Path]:
    """(lang, split) → ``{lang}/{split}.tsv``."""
    return _split_files_by_language(_folder(folder, "SIB-200"), ".tsv", languages, splits, "language folders")


def _sib200_file(path: Path, skipped: Skipped) -> list[tuple[int, str, str]]:
    rows = []
    bad = BadRows(path, TABLE)
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        try:
            header = [h.strip() for h in next(reader, [])]
            if tuple(header) != SIB200_HEADER:
                raise EvalFormatError(f"{path}:1: header {header}; expected {list(SIB200_HEADER)}")
            for fields in reader:
                line = reader.line_num
                if not fields:
                    continue
                if len(fields) != len(SIB200_HEADER):
                    bad.add(line, "expected 3 tab-separated fields (index_id, category, text)",
                            f", found {len(fields)}")
                    continue
                label, text = fields[1].strip(), fields[2].strip()
                if not label or not text:
                    bad.add(line, f"empty {'category' if not label else 'text'}")
                    continue
                rows.append((line, text, label))
        except csv.Error as exc:
            raise EvalFormatError(f"{path}:{reader.line_num}: not valid tab-separated CSV ({exc})") from None
    bad.report(len(rows), skipped)
    return rows


def read_sib200(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = (),
                dataset: str = "sib200", skipped: Skipped | None = None) -> pl.DataFrame:
    skipped = skipped_or_new(skipped)
    frames = []
    for (lang, split), path in sib200_files(folder, languages, splits).items():
        frames.append(_rows(dataset, lang, split, _sib200_file(path, skipped)))
        log.info("%s %s %s: %d texts", dataset, lang, split, frames[-1].height)
    return concat(frames, SCHEMA)


# --------------------------------------------------------------------------------------------------------------------


class ClassificationSource(StrictConfig):
    format: Literal["mtop", "mldoc", "sib200"] = Field(
        description="mtop: {lang}/{split}.txt of the MTOP release; mldoc: {language}.{split} files; sib200: "
                    "{lang_script}/{split}.tsv with header index_id, category, text")
    path: Path = Field(description="the dataset's folder")
    languages: list[str] = Field(default_factory=list, description="language codes (folder names for mtop/sib200, "
                                                                   "ISO 639-1 for mldoc); empty = all found")
    splits: list[str] = Field(default_factory=list, description="split names as in the file names; empty = all")
    name: str | None = Field(None, description="dataset column for sib200-layout sets (default sib200)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "sources.eval.classification.languages")


def read_classification(source: ClassificationSource, skipped: Skipped | None = None) -> pl.DataFrame:
    """One configured entry of ``EvalSources.classification``."""
    if source.format == "mtop":
        return read_mtop(source.path, source.languages, source.splits, skipped)
    if source.format == "mldoc":
        return read_mldoc(source.path, source.languages, source.splits, skipped)
    return read_sib200(source.path, source.languages, source.splits, source.name or "sib200", skipped)


def classification_files(source: ClassificationSource) -> list[Path]:
    finder = {"mtop": mtop_files, "mldoc": mldoc_files, "sib200": sib200_files}[source.format]
    return sorted(finder(source.path, source.languages, source.splits).values())
