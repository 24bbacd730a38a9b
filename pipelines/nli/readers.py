"""Reading English NLI data (SNLI, MultiNLI, SimCSE's ``nli_for_simcse.csv``, hub datasets) for mSimCSE's supervised
strategies: labelled pairs, and (premise, entailment, contradiction) triples built from them the way SimCSE built
``nli_for_simcse.csv`` from SNLI+MNLI.

Frames carry ``origin`` (file path or ``hub:{id}[/{config}]:{split}``) and ``line`` (1-based line of the row in that
file; null for hub rows), so that every later error can name where a row came from. Errors in the files raise
:class:`NliFormatError` naming ``file:line``.

Fast paths: polars ``read_ndjson`` (jsonl), ``read_csv`` without quoting (tsv) and with quoting (simcse_csv); each
parse is trusted only when its row count matches the file's line count (and, for delimited files, when no row is short);
otherwise an exact line-by-line pass finds the first bad line.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.hub import load_hub_dataset
from pipelines.nli.sources import NliFileSource
from pipelines.text_lines import line_count, strip_bom
from pipelines.xnli.readers import read_tab_separated
from pipelines.xnli.sources import LABELS

NO_CONSENSUS = "-"  # SNLI/MultiNLI gold_label when the annotators did not agree
HUB_LABELS = dict(enumerate(LABELS))  # stanfordnlp/snli, nyu-mll/multi_nli: 0 entailment, 1 neutral, 2 contradiction
LOCAL_FORMATS = ("format 'jsonl' (SNLI/MultiNLI *.jsonl), format 'tsv' (their *.txt/*.tsv with header) or format "
                 "'simcse_csv' (SimCSE's nli_for_simcse.csv)")
ID_COLUMNS = ("captionID", "promptID")  # SNLI / MultiNLI: identify the premise
PAIR_SCHEMA = {"premise": pl.String, "hypothesis": pl.String, "label": pl.String, "premise_id": pl.String,
               "origin": pl.String, "line": pl.Int64}
TRIPLET_SCHEMA = {"sent0": pl.String, "sent1": pl.String, "hard_neg": pl.String, "origin": pl.String,
                  "line": pl.Int64}
TRIPLE_SCHEMA = {"premise": pl.String, "entailment": pl.String, "contradiction": pl.String, "origin": pl.String,
                 "line": pl.Int64}
SIMCSE_COLUMNS = ("sent0", "sent1", "hard_neg")
HUB_TRIPLET_COLUMNS = {"anchor": "sent0", "positive": "sent1", "negative": "hard_neg"}


class NliFormatError(ValueError):
    """A malformed NLI file; the message names the file and line."""


def _decode(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise NliFormatError(f"{origin}:{lineno}: invalid UTF-8 (byte {data[exc.start]:#04x})") from None


def _read_file(path: Path | None) -> tuple[bytes, str]:
    assert path is not None
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"NLI file not found: {path}")
    return strip_bom(path.read_bytes()), str(path)


# --------------------------------------------------------------------------------------------------------------------
# SNLI / MultiNLI files → raw columns sentence1, sentence2, gold_label, premise_id, line

JSONL_SCHEMA = {"sentence1": pl.String, "sentence2": pl.String, "gold_label": pl.String, "captionID": pl.String,
                "promptID": pl.String}


def _read_jsonl(data: bytes, origin: str) -> pl.DataFrame:
    df = None
    try:
        df = pl.read_ndjson(data, schema=JSONL_SCHEMA)
    except pl.exceptions.PolarsError:
        df = None
    if df is not None and df.height == line_count(data):  # no blank line skipped: row i is line i + 1
        df = df.with_columns(line=pl.int_range(1, df.height + 1, dtype=pl.Int64))
    else:
        df = _read_jsonl_exact(data, origin)
    return df.select("sentence1", "sentence2", "gold_label", pl.coalesce(*ID_COLUMNS).alias("premise_id"), "line")


def _read_jsonl_exact(data: bytes, origin: str) -> pl.DataFrame:
    text = _decode(data, origin)
    columns: dict[str, list[Any]] = {name: [] for name in JSONL_SCHEMA}
    numbers = []
    for i, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NliFormatError(f"{origin}:{i}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise NliFormatError(f"{origin}:{i}: expected a JSON object, found {type(obj).__name__}")
        for name, col in columns.items():
            value = obj.get(name)
            col.append(None if value is None else str(value))
        numbers.append(i)
    frame = pl.DataFrame({name: pl.Series(name, col, dtype=pl.String) for name, col in columns.items()})
    return frame.with_columns(line=pl.Series("line", numbers, dtype=pl.Int64))


def _read_snli_tsv(data: bytes, origin: str) -> pl.DataFrame:
    df = read_tab_separated(data, origin, error=NliFormatError)
    missing = [c for c in ("sentence1", "sentence2", "gold_label") if c not in df.columns]
    if missing:
        raise NliFormatError(f"{origin}:1: header lacks columns {missing}; it has {df.columns[:20]}")
    ids = [pl.col(c).replace("", None) for c in ID_COLUMNS if c in df.columns]
    premise_id = pl.coalesce(*ids) if ids else pl.lit(None, dtype=pl.String)
    return df.select("sentence1", "sentence2", "gold_label", premise_id.alias("premise_id"), "line")


def _pairs_from_raw(raw: pl.DataFrame, origin: str) -> pl.DataFrame:
    for col in ("sentence1", "sentence2", "gold_label"):
        missing = raw.filter(pl.col(col).is_null())
        if missing.height:
            raise NliFormatError(f"{origin}:{missing['line'][0]}: missing field {col!r}")
    bad = raw.filter(~pl.col("gold_label").is_in([*LABELS, NO_CONSENSUS]))
    if bad.height:
        raise NliFormatError(f"{origin}:{bad['line'][0]}: gold_label {bad['gold_label'][0]!r}, expected one of "
                             f"{list(LABELS)} or {NO_CONSENSUS!r} (no consensus)")
    return raw.filter(pl.col("gold_label") != NO_CONSENSUS).select(
        pl.col("sentence1").alias("premise"), pl.col("sentence2").alias("hypothesis"),
        pl.col("gold_label").alias("label"), pl.col("premise_id").cast(pl.String),
        pl.lit(origin, dtype=pl.String).alias("origin"), "line",
    )


# --------------------------------------------------------------------------------------------------------------------
# SimCSE csv


def _read_simcse_csv(data: bytes, origin: str) -> pl.DataFrame:
    df = None
    try:
        df = pl.read_csv(data, has_header=True, infer_schema=False, empty_string_is_null=False)
    except pl.exceptions.PolarsError:
        df = None
    # trusted when every record is one line (no quoted newline, no blank line) and none is short
    if (df is None or df.height + 1 != line_count(data) or not df.width
            or (df[df.columns[-1]] == "").any() or df.columns != list(SIMCSE_COLUMNS)):
        return _read_simcse_csv_exact(data, origin)
    return df.select(*SIMCSE_COLUMNS, pl.lit(origin, dtype=pl.String).alias("origin"),
                     line=pl.int_range(2, df.height + 2, dtype=pl.Int64))


def _read_simcse_csv_exact(data: bytes, origin: str) -> pl.DataFrame:
    reader = csv.reader(io.StringIO(_decode(data, origin), newline=""))
    columns: list[list[str]] = [[], [], []]
    numbers = []
    header = None
    start = 1
    try:
        for record in reader:
            if not record:  # blank line
                start = reader.line_num + 1
                continue
            if header is None:
                header = record
                if tuple(header) != SIMCSE_COLUMNS:
                    raise NliFormatError(f"{origin}:{start}: header {header}, expected {list(SIMCSE_COLUMNS)}")
            elif len(record) != 3:
                raise NliFormatError(f"{origin}:{start}: expected 3 comma-separated fields (sent0, sent1, hard_neg), "
                                     f"found {len(record)}")
            else:
                for col, value in zip(columns, record, strict=True):
                    col.append(value)
                numbers.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise NliFormatError(f"{origin}:{start}: {exc}") from None
    if header is None:
        raise NliFormatError(f"{origin}:1: empty file; expected header {','.join(SIMCSE_COLUMNS)}")
    frame = pl.DataFrame({name: pl.Series(name, col, dtype=pl.String) for name, col in zip(SIMCSE_COLUMNS, columns,
                                                                                           strict=True)})
    return frame.with_columns(pl.lit(origin, dtype=pl.String).alias("origin"),
                              line=pl.Series("line", numbers, dtype=pl.Int64))


# --------------------------------------------------------------------------------------------------------------------
# hub


def _hub_origin(source: NliFileSource) -> str:
    return f"hub:{source.hub_id}" + (f"/{source.config}" if source.config else "") + f":{source.split}"


def _hub_table(source: NliFileSource) -> Any:
    assert source.hub_id is not None
    ds = load_hub_dataset(source.hub_id, source.config, source.split, local_formats=LOCAL_FORMATS)
    return ds.with_format("arrow")[:]


def _is_triplet_table(table: Any) -> bool:
    return all(c in table.column_names for c in HUB_TRIPLET_COLUMNS)


def pairs_frame_from_hub_table(table: Any, origin: str) -> pl.DataFrame:
    """A pyarrow table with ``premise``, ``hypothesis``, ``label`` (0/1/2; -1 unlabelled, dropped) and optionally
    ``promptID`` → the pair frame."""
    missing = [c for c in ("premise", "hypothesis", "label") if c not in table.column_names]
    if missing:
        raise NliFormatError(f"{origin}: dataset lacks columns {missing}; it has {table.column_names}")
    ids = [c for c in ID_COLUMNS if c in table.column_names]
    cols = ["premise", "hypothesis", "label", *ids[:1]]
    frame = pl.from_arrow(table.select(cols))
    assert isinstance(frame, pl.DataFrame)
    premise_id = (pl.col(cols[3]).cast(pl.String) if len(cols) == 4 else pl.lit(None, dtype=pl.String))
    frame = frame.with_row_index("_row").filter(pl.col("label") != -1)
    bad = frame.filter(~pl.col("label").is_in(list(HUB_LABELS)))
    if bad.height:
        raise NliFormatError(f"{origin}: row {bad['_row'][0]} (0-based): label {bad['label'][0]!r}, expected "
                             "0/1/2 (or -1, unlabelled)")
    return frame.select(
        pl.col("premise").cast(pl.String), pl.col("hypothesis").cast(pl.String),
        pl.col("label").replace_strict(HUB_LABELS, return_dtype=pl.String), premise_id.alias("premise_id"),
        pl.lit(origin, dtype=pl.String).alias("origin"), pl.lit(None, dtype=pl.Int64).alias("line"),
    )


def triplets_frame_from_hub_table(table: Any, origin: str) -> pl.DataFrame:
    """A pyarrow table with ``anchor``, ``positive``, ``negative`` → the triplet frame."""
    frame = pl.from_arrow(table.select(list(HUB_TRIPLET_COLUMNS)))
    assert isinstance(frame, pl.DataFrame)
    return frame.select(
        *[pl.col(src).cast(pl.String).alias(dst) for src, dst in HUB_TRIPLET_COLUMNS.items()],
        pl.lit(origin, dtype=pl.String).alias("origin"), pl.lit(None, dtype=pl.Int64).alias("line"),
    )


# --------------------------------------------------------------------------------------------------------------------
# public API


def read_nli_pairs(source: NliFileSource) -> pl.DataFrame:
    """Labelled pairs: ``premise``, ``hypothesis``, ``label`` (one of LABELS; no-consensus ``-`` and hub ``-1`` rows
    dropped), ``premise_id`` (``captionID``/``promptID``, else null), ``origin``, ``line``."""
    if source.format == "simcse_csv":
        raise ValueError(f"NLI source {source.name!r}: format simcse_csv holds triplets, not labelled pairs; "
                         "use read_nli_triplets")
    if source.format == "hub":
        origin = _hub_origin(source)
        table = _hub_table(source)
        if _is_triplet_table(table) and "label" not in table.column_names:
            raise ValueError(f"NLI source {source.name!r}: {origin} holds triplets (anchor, positive, negative), "
                             "not labelled pairs; use read_nli_triplets")
        return pairs_frame_from_hub_table(table, origin)
    data, origin = _read_file(source.path)
    raw = _read_jsonl(data, origin) if source.format == "jsonl" else _read_snli_tsv(data, origin)
    return _pairs_from_raw(raw, origin).cast(PAIR_SCHEMA)  # type: ignore[arg-type]


def read_nli_triplets(source: NliFileSource) -> pl.DataFrame:
    """Triplets ``sent0`` (anchor), ``sent1`` (positive), ``hard_neg``, ``origin``, ``line``.

    simcse_csv and hub triplet datasets hold them as such; pair sources (jsonl, tsv, hub pair datasets) are turned
    into triplets by :func:`pairs_to_triples`, as SimCSE did (``line`` is then the entailment row's line).
    """
    if source.format == "simcse_csv":
        data, origin = _read_file(source.path)
        return _read_simcse_csv(data, origin)
    if source.format == "hub":
        origin = _hub_origin(source)
        table = _hub_table(source)
        if _is_triplet_table(table):
            return triplets_frame_from_hub_table(table, origin)
        triples = pairs_to_triples(pairs_frame_from_hub_table(table, origin))
    else:
        triples = pairs_to_triples(read_nli_pairs(source))
    return triples.select(pl.col("premise").alias("sent0"), pl.col("entailment").alias("sent1"),
                          pl.col("contradiction").alias("hard_neg"), "origin", "line")


def pairs_to_triples(pairs: pl.DataFrame) -> pl.DataFrame:
    """(premise, entailment, contradiction) triples from labelled pairs, SimCSE's construction.

    Rows are grouped by premise: ``premise_id`` (within one ``origin``) where present, else the premise text. In each
    group the i-th entailment hypothesis (file order) is paired with the (i mod k)-th of the group's k contradiction
    hypotheses; groups without both are dropped. Output follows the entailment rows' order; ``origin`` and ``line``
    are the entailment row's.
    """
    key = (pl.when(pl.col("premise_id").is_not_null())
           .then(pl.concat_str(pl.lit("id\x00"), pl.col("origin").fill_null(""), pl.lit("\x00"), pl.col("premise_id")))
           .otherwise(pl.concat_str(pl.lit("text\x00"), pl.col("premise"))))
    df = pairs.select("premise", "hypothesis", "label", "premise_id", "origin", "line").with_row_index("_pos")
    df = df.with_columns(_key=key)
    rank = pl.int_range(pl.len(), dtype=pl.Int64).over("_key")  # 0, 1, ... in file order within a premise
    con = (df.filter(pl.col("label") == "contradiction")
           .select("_key", rank.alias("_j"), pl.col("hypothesis").alias("contradiction")))
    counts = con.group_by("_key").agg(pl.len().cast(pl.Int64).alias("_k"))
    ent = (df.filter(pl.col("label") == "entailment")
           .with_columns(rank.alias("_i"))
           .join(counts, on="_key", how="inner")
           .with_columns((pl.col("_i") % pl.col("_k")).alias("_j")))
    out = ent.join(con, on=["_key", "_j"], how="inner").sort("_pos")
    return out.select("premise", pl.col("hypothesis").alias("entailment"), "contradiction", "origin",
                      "line").cast(TRIPLE_SCHEMA)  # type: ignore[arg-type]
