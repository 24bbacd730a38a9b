"""Reading XNLI in every form a user has (``XnliSource.format``) into one shape, and verifying row alignment.

Every reader returns, per language, an :class:`XnliLanguage`: a frame with ``premise``, ``hypothesis``, ``label``
(one of :data:`LABELS`; XNLI-MT's ``contradictory`` and the hub's ints 0/1/2 are normalised), ``line`` (1-based line
in ``origin``; null for hub rows) and ``pair_id`` (XNLI-1.0's ``pairID``; null where the format has none).

Tab-separated files are *not* CSV-quoted (XNLI texts contain bare ``"``), so they are parsed with polars
``read_csv(separator="\\t", quote_char=None)`` as the fast path. polars cannot tell a missing field or a blank line
from an empty field, so a parse is only trusted when no row has an empty last column, or failing that when the
file's newline and tab counts prove every line has exactly the header's number of fields. Anything else (a polars
error, invalid UTF-8, blank lines, ragged lines) goes to an exact line-by-line pass that skips blank lines, keeps line
numbers right, and raises :class:`XnliFormatError` naming ``file:line`` for the first bad line.

Measured on this 2-core machine, 392,702 lines (the XNLI-MT train shape, real XNLI rows replicated), file in the page
cache, ``format=xtreme`` (read + parse + label check + frame), best of 3: en (67 MB) 0.13 s, zh (60 MB) 0.12 s, ar
(100 MB) 0.16 s, ru (124 MB) 0.20 s; all 15 languages (5.9 M rows, 1.34 GB) 3.0–4.3 s, i.e. 0.20–0.29 s a language.
The ``xnli_mt`` folder layout (header, ``contradictory``) costs about the same (en 0.20 s, ru 0.31 s); from the zip,
inflating adds about 0.4 s per 100 MB (en 0.47 s, ru 0.82 s). The exact fallback pass takes about 1.6 s per 392k lines.
``verify_alignment`` on 15 × 392,702 rows takes about 0.2 s.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.hub import load_hub_dataset
from pipelines.language_codes import check_language
from pipelines.text_lines import line_count, strip_bom
from pipelines.xnli.sources import LABELS, XNLI_LANGUAGES, XnliSource

log = logging.getLogger("polysent.pipelines.xnli")

SPLITS = ("train", "dev", "test")
HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
HUB_LABELS = dict(enumerate(LABELS))  # facebook/xnli ClassLabel: 0 entailment, 1 neutral, 2 contradiction
LABEL_ALIASES = {"contradictory": "contradiction"}  # XNLI-MT spells it so
LOCAL_FORMATS = ("format 'xtreme' (dir with {split}-{lang}.tsv files), format 'xnli10' (path to XNLI-1.0.zip, its "
                 "folder or xnli.{dev,test}.tsv) or format 'xnli_mt' (path to XNLI-MT-1.0.zip or its folder; train)")
XNLI10_COLUMNS = {"language": "language", "gold_label": "label", "sentence1": "premise", "sentence2": "hypothesis",
                  "pairID": "pair_id"}
XNLI_MT_COLUMNS = {"premise": "premise", "hypo": "hypothesis", "label": "label"}
FRAME_SCHEMA = {"premise": pl.String, "hypothesis": pl.String, "label": pl.String, "line": pl.Int64,
                "pair_id": pl.String}


class XnliFormatError(ValueError):
    """A malformed XNLI file or misaligned languages; the message names the file (origin) and line."""


@dataclass
class XnliLanguage:
    lang: str
    frame: pl.DataFrame
    origin: str


# --------------------------------------------------------------------------------------------------------------------
# tab-separated parsing (shared with pipelines.nli.readers)


def _exact_shape(data: bytes, ncols: int, nlines: int) -> bool:
    """True when ``data`` has exactly ``nlines`` lines of exactly ``ncols`` tab-separated fields each, given that
    no line has more than ``ncols`` fields (polars parsed it)."""
    return line_count(data) == nlines and data.count(b"\t") == (ncols - 1) * nlines


def read_tab_separated(data: bytes, origin: str, names: Sequence[str] | None = None,
                       error: type[ValueError] = XnliFormatError) -> pl.DataFrame:
    """Parse unquoted tab-separated ``data``: all columns String plus ``line`` (Int64, 1-based line in ``origin``).

    ``names`` given: no header, exactly ``len(names)`` fields a line. ``names`` None: the first line is the header.
    Blank lines are skipped; a line with another number of fields or invalid UTF-8 raises ``error`` naming
    ``origin:line``.
    """
    data = strip_bom(data)
    header = names is None
    df = None
    if not data.startswith((b"\n", b"\r\n")):  # polars would silently skip a leading blank line
        try:
            if header:
                df = pl.read_csv(data, separator="\t", quote_char=None, has_header=True, infer_schema=False,
                                 empty_string_is_null=False)
            else:
                df = pl.read_csv(data, separator="\t", quote_char=None, has_header=False,
                                 schema=dict.fromkeys(names, pl.String), empty_string_is_null=False)
        except pl.exceptions.PolarsError:
            df = None
    # an empty last field is a blank line, a short line, or really empty: only the byte counts can tell
    if (df is not None and df.width and (df[df.columns[-1]] == "").any()
            and not _exact_shape(data, df.width, df.height + header)):
        df = None
    if df is None:
        return _read_tab_separated_exact(data, origin, names, error)
    if header:
        end = data.find(b"\n")
        first = data[: end if end >= 0 else len(data)].decode("utf-8").removesuffix("\r").split("\t")
        df.columns = _unique_names(first, origin, error)
    start = 2 if header else 1
    return df.with_columns(line=pl.int_range(start, df.height + start, dtype=pl.Int64))


def _unique_names(names: list[str], origin: str, error: type[ValueError]) -> list[str]:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise error(f"{origin}:1: header repeats column names {dup}")
    return names


def _read_tab_separated_exact(data: bytes, origin: str, names: Sequence[str] | None,
                              error: type[ValueError]) -> pl.DataFrame:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{origin}:{lineno}: invalid UTF-8 (byte {data[exc.start]:#04x})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lineno = 0
    if names is None:
        while lineno < len(lines) and lines[lineno].removesuffix("\r") == "":
            lineno += 1
        if lineno == len(lines):
            raise error(f"{origin}:1: empty file; expected a header line")
        names = _unique_names(lines[lineno].removesuffix("\r").split("\t"), origin, error)
        lineno += 1
    ncols = len(names)
    what = ", ".join(names) if ncols <= 4 else "as in the header"
    columns: list[list[str]] = [[] for _ in range(ncols)]
    numbers: list[int] = []
    for i in range(lineno, len(lines)):
        line = lines[i]
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != ncols:
            raise error(f"{origin}:{i + 1}: expected {ncols} tab-separated fields ({what}), found {len(parts)}")
        for col, value in zip(columns, parts, strict=True):
            col.append(value)
        numbers.append(i + 1)
    frame = pl.DataFrame({name: pl.Series(name, col, dtype=pl.String) for name, col in zip(names, columns,
                                                                                         strict=True)})
    return frame.with_columns(line=pl.Series("line", numbers, dtype=pl.Int64))


# --------------------------------------------------------------------------------------------------------------------
# labels and frames


def _normalise_labels(frame: pl.DataFrame, origin: str) -> pl.DataFrame:
    """``label`` to one of LABELS (``contradictory`` → ``contradiction``); anything else raises naming the line."""
    if frame["label"].is_in(LABELS).all():
        return frame
    frame = frame.with_columns(pl.col("label").replace(LABEL_ALIASES))
    bad = frame.filter(~pl.col("label").is_in(LABELS))
    if bad.height:
        row = bad.row(0, named=True)
        where = f"{origin}:{row['line']}" if row.get("line") is not None else origin
        raise XnliFormatError(f"{where}: label {row['label']!r}, expected one of {list(LABELS)}")
    return frame


def _finish(frame: pl.DataFrame, origin: str) -> pl.DataFrame:
    if "pair_id" not in frame.columns:
        frame = frame.with_columns(pair_id=pl.lit(None, dtype=pl.String))
    frame = frame.select(*FRAME_SCHEMA).cast(FRAME_SCHEMA)  # type: ignore[arg-type]
    return _normalise_labels(frame, origin)


def frame_from_hub_dataset(ds: Any, origin: str = "hub") -> pl.DataFrame:
    """A ``datasets.Dataset`` with ``premise``, ``hypothesis``, ``label`` (ClassLabel ints 0/1/2, or label strings)
    → the reader frame (``line`` and ``pair_id`` null). A label outside 0/1/2 raises naming the 0-based row."""
    table = ds.with_format("arrow")[:]
    missing = [c for c in ("premise", "hypothesis", "label") if c not in table.column_names]
    if missing:
        raise XnliFormatError(f"{origin}: dataset lacks columns {missing}; it has {table.column_names}")
    frame = pl.from_arrow(table.select(["premise", "hypothesis", "label"]))
    assert isinstance(frame, pl.DataFrame)
    if frame["label"].dtype.is_integer():
        label = pl.col("label").replace_strict(HUB_LABELS, default=None, return_dtype=pl.String)
    else:
        label = pl.col("label").cast(pl.String).replace(LABEL_ALIASES)
    frame = frame.with_row_index("_row").with_columns(label.alias("_label"))
    bad = frame.filter(~pl.col("_label").is_in(LABELS) | pl.col("_label").is_null())
    if bad.height:
        row = bad.row(0, named=True)
        raise XnliFormatError(f"{origin}: row {row['_row']} (0-based): label {row['label']!r}, expected 0/1/2 "
                              f"({', '.join(LABELS)})")
    return frame.select(
        pl.col("premise").cast(pl.String), pl.col("hypothesis").cast(pl.String), pl.col("_label").alias("label"),
        line=pl.lit(None, dtype=pl.Int64), pair_id=pl.lit(None, dtype=pl.String),
    )


# --------------------------------------------------------------------------------------------------------------------
# the four formats


def _check_languages(languages: list[str]) -> None:
    if not languages:
        raise ValueError("read_xnli: no languages given")
    for lang in languages:
        check_language(lang, "XNLI languages")
        if lang not in XNLI_LANGUAGES:
            raise ValueError(f"XNLI has no language {lang!r}; its 15 languages are {', '.join(XNLI_LANGUAGES)}")


def _zip_member(zf: zipfile.ZipFile, zip_path: Path, basename: str) -> str:
    found = [n for n in zf.namelist()
             if n.rsplit("/", 1)[-1] == basename and not n.startswith("__MACOSX/") and not n.endswith("/")]
    if not found:
        raise FileNotFoundError(f"{zip_path}: no member named {basename}")
    if len(found) > 1:
        raise XnliFormatError(f"{zip_path}: several members named {basename}: {found}")
    return found[0]


def _find_file(folder: Path, basename: str) -> Path:
    found = sorted(p for p in folder.rglob(basename) if "__MACOSX" not in p.parts and p.is_file())
    if not found:
        raise FileNotFoundError(f"{folder}: no file named {basename} (searched sub-folders too)")
    if len(found) > 1:
        raise XnliFormatError(f"{folder}: several files named {basename}: {[str(p) for p in found]}")
    return found[0]


def _select_columns(frame: pl.DataFrame, columns: dict[str, str], origin: str) -> pl.DataFrame:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise XnliFormatError(f"{origin}:1: header lacks columns {missing}; it has {frame.columns[:25]}")
    return frame.select(*[pl.col(src).alias(dst) for src, dst in columns.items()], "line")


def _read_xtreme(source: XnliSource, split: str, lang: str) -> XnliLanguage:
    assert source.dir is not None
    path = Path(source.dir) / f"{split}-{lang}.tsv"
    if not path.is_file():
        raise FileNotFoundError(f"XNLI file not found: {path} (format xtreme expects {{split}}-{{lang}}.tsv in "
                                f"{source.dir})")
    origin = str(path)
    raw = read_tab_separated(path.read_bytes(), origin, names=("premise", "hypothesis", "label"))
    return XnliLanguage(lang, _finish(raw, origin), origin)


def _read_xnli10(source: XnliSource, split: str, languages: list[str]) -> dict[str, XnliLanguage]:
    assert source.path is not None
    if split == "train":
        raise ValueError("format xnli10 has dev/test only (XNLI-1.0 has no train split); the train split is "
                         "XNLI-MT (format xnli_mt) or MultiNLI")
    path = Path(source.path)
    basename = f"xnli.{split}.tsv"
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            member = _zip_member(zf, path, basename)
            data, origin = zf.read(member), f"{path}:{member}"
    elif path.is_dir():
        found = _find_file(path, basename)
        data, origin = found.read_bytes(), str(found)
    elif path.is_file():
        other = {f"xnli.{s}.tsv" for s in ("dev", "test")} - {basename}
        if path.name in other:
            raise ValueError(f"{path} is not the {split} split (expected {basename})")
        data, origin = path.read_bytes(), str(path)
    else:
        raise FileNotFoundError(f"XNLI-1.0 not found: {path} (expected XNLI-1.0.zip, its folder or {basename})")
    table = _select_columns(read_tab_separated(data, origin), XNLI10_COLUMNS, origin)
    del data
    parts = table.partition_by("language", as_dict=True, maintain_order=True)
    present = sorted(k[0] for k in parts)
    out = {}
    for lang in languages:
        if (lang,) not in parts:
            raise XnliFormatError(f"{origin}: no rows for language {lang!r}; languages present: {present}")
        out[lang] = XnliLanguage(lang, _finish(parts[(lang,)], origin), origin)
    return out


def _read_xnli_mt(source: XnliSource, split: str, languages: list[str]) -> dict[str, XnliLanguage]:
    assert source.path is not None
    if split != "train":
        raise ValueError(f"format xnli_mt holds the machine-translated train split only, not {split!r}; read dev/test "
                         "with format xtreme, xnli10 or hub")
    path = Path(source.path)
    out = {}
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for lang in languages:
                member = _zip_member(zf, path, f"multinli.train.{lang}.tsv")
                out[lang] = _xnli_mt_language(lang, zf.read(member), f"{path}:{member}")
    elif path.is_dir():
        for lang in languages:
            found = _find_file(path, f"multinli.train.{lang}.tsv")
            out[lang] = _xnli_mt_language(lang, found.read_bytes(), str(found))
    elif path.exists():
        raise ValueError(f"{path}: format xnli_mt needs XNLI-MT-1.0.zip or its unpacked folder")
    else:
        raise FileNotFoundError(f"XNLI-MT not found: {path} (expected XNLI-MT-1.0.zip or its folder)")
    return out


def _xnli_mt_language(lang: str, data: bytes, origin: str) -> XnliLanguage:
    table = read_tab_separated(data, origin)
    if "hypothesis" in table.columns and "hypo" not in table.columns:
        table = table.rename({"hypothesis": "hypo"})
    return XnliLanguage(lang, _finish(_select_columns(table, XNLI_MT_COLUMNS, origin), origin), origin)


def _read_hub(source: XnliSource, split: str, lang: str) -> XnliLanguage:
    hub_split = HUB_SPLITS[split]
    ds = load_hub_dataset(source.hub_id, lang, hub_split, local_formats=LOCAL_FORMATS)
    origin = f"hub:{source.hub_id}/{lang}:{hub_split}"
    return XnliLanguage(lang, frame_from_hub_dataset(ds, origin), origin)


def read_xnli(source: XnliSource, split: str, languages: list[str]) -> dict[str, XnliLanguage]:
    """Read ``split`` (train/dev/test) of ``languages`` from ``source``; keys follow ``languages``' order."""
    if split not in SPLITS:
        raise ValueError(f"XNLI split {split!r}: expected one of {list(SPLITS)}")
    _check_languages(languages)
    languages = list(dict.fromkeys(languages))
    if source.format == "xtreme":
        return {lang: _read_xtreme(source, split, lang) for lang in languages}
    if source.format == "xnli10":
        return _read_xnli10(source, split, languages)
    if source.format == "xnli_mt":
        return _read_xnli_mt(source, split, languages)
    return {lang: _read_hub(source, split, lang) for lang in languages}


# --------------------------------------------------------------------------------------------------------------------
# alignment


def _where(table: XnliLanguage, i: int) -> str:
    line = table.frame["line"][i]
    return f"{table.origin}:{line}" if line is not None else f"{table.origin} row {i} (0-based)"


def _first_label_disagreement(t: XnliLanguage, ref: XnliLanguage) -> int | None:
    n = min(t.frame.height, ref.frame.height)
    bad = (t.frame["label"].head(n) != ref.frame["label"].head(n)).arg_true()
    return int(bad[0]) if len(bad) else None


def verify_alignment(tables: dict[str, XnliLanguage], anchor: str, max_boundary_mismatch: float = 0.0) -> None:
    """Check that every language is row-aligned with ``anchor``; raise :class:`XnliFormatError` otherwise.

    Row i must be the same item in every language: equal row counts, equal labels row by row (a file with a row
    deleted or inserted shows up as a label disagreement from there on), equal ``pair_id`` where both have one, and
    premise boundaries (rows where the premise differs from the row before) at the same rows. Translations can
    merge or split premises in principle, so boundary mismatches are tolerated up to ``max_boundary_mismatch``
    (a fraction of rows; default 0.0: none).
    """
    if anchor not in tables:
        raise ValueError(f"anchor language {anchor!r} is not among the tables read ({', '.join(tables)})")
    ref = tables[anchor]
    ref_frame = ref.frame
    ref_bounds = ref_frame["premise"] != ref_frame["premise"].shift(1)  # row 0 is null: never compared
    ref_has_ids = ref_frame["pair_id"].null_count() < ref_frame.height
    for lang, t in tables.items():
        if lang == anchor:
            continue
        df = t.frame
        if df.height != ref_frame.height:
            first = _first_label_disagreement(t, ref)
            hint = ("" if first is None else
                    f"; the first row where the labels disagree is {_where(t, first)} ({df['label'][first]!r}) vs "
                    f"{_where(ref, first)} ({ref_frame['label'][first]!r})")
            raise XnliFormatError(f"{t.origin}: {df.height} rows but {ref.origin} has {ref_frame.height}; XNLI "
                                  f"files must be row-aligned across languages{hint}")
        first = _first_label_disagreement(t, ref)
        if first is not None:
            raise XnliFormatError(f"{_where(t, first)}: label {df['label'][first]!r} but {_where(ref, first)} has "
                                  f"{ref_frame['label'][first]!r}; the files are not row-aligned (a row missing or "
                                  "added before this one?)")
        if ref_has_ids and df["pair_id"].null_count() < df.height:
            bad = (df["pair_id"] != ref_frame["pair_id"]).arg_true()  # null where either is null
            if len(bad):
                i = int(bad[0])
                raise XnliFormatError(f"{_where(t, i)}: pair_id {df['pair_id'][i]!r} but {_where(ref, i)} has "
                                      f"{ref_frame['pair_id'][i]!r}; the files are not row-aligned")
        bounds = df["premise"] != df["premise"].shift(1)
        mismatch = (bounds != ref_bounds).fill_null(False)
        count = int(mismatch.sum())
        if count:
            i = int(mismatch.arg_true()[0])
            fraction = count / df.height
            what = "starts" if bounds[i] else "does not start"
            msg = (f"{_where(t, i)} {what} a new premise but {_where(ref, i)} {'does' if ref_bounds[i] else 'does not'}"
                   f"; {count} of {df.height} rows ({fraction:.2%}) disagree on premise boundaries")
            if fraction > max_boundary_mismatch:
                raise XnliFormatError(f"{msg} (allowed: {max_boundary_mismatch:.2%}; the node's "
                                      "max_boundary_mismatch setting raises it); the files are not row-aligned")
            log.warning("%s", msg)
