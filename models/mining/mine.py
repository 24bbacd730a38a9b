"""Mining two monolingual corpora for translation pairs: LASER ``mine_bitexts.py --unify --mode mine`` at scale.

Reference: LASER ``source/mine_bitexts.py`` (Artetxe & Schwenk, ACL 2019; WikiMatrix, Schwenk et al., EACL 2021;
CCMatrix, Schwenk et al., ACL 2021). Steps, as LASER runs them:

1. ``--unify``: identical texts per side are de-duplicated (first occurrence kept, its ID stands for the text);
2. the unique texts are embedded, streamed to memory-mapped files (:mod:`models.mining.embedding_file`);
3. cosine k-NN both ways (:mod:`models.mining.index`: faiss ``exact`` as LASER, or ``ivf`` / ``hnsw``);
4. ratio-margin scores of the k candidates each way and LASER's selection — the same code as the BUCC evaluation
   (:func:`models.evaluation.bucc.select_pairs`): ``max`` (forward and backward best pooled, 1:1 greedy by score),
   ``forward``, ``backward`` or ``intersect`` (mutual best);
5. pairs with margin > ``threshold`` are kept (LASER applies its threshold in ``max`` mode only and writes every
   forward / backward / mutual pair; here the threshold applies to every mode, so a mined table is always filtered).

Threshold. Default for the ratio margin: 1.06, CCMatrix's mining threshold (WikiMatrix's released pairs start at 1.04;
LASER's own default 0 keeps every 1:1 pair, which is BUCC's candidate list, not a corpus). A threshold must lie in the
margin's range: ratio [0, 2k] (the candidate is in its source's k-NN, so with non-negative cosines the denominator is
at least cos/2k), distance [−2, 2], absolute [−1, 1]; anything else is an error naming ``threshold``. Distance and
absolute margins have no default threshold: without one every selected pair is kept.

Output: one row per pair, ``(src_id, tgt_id, src, tgt, margin, cosine)`` in selection order (best margin first for
``max``), written as Parquet under a temporary name and renamed when complete.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from models.evaluation.bucc import select_pairs, unify_texts
from models.evaluation.knn import blocks
from models.evaluation.margin import MARGINS, Neighbourhoods
from models.mining.embedding_file import CHUNK_ROWS, encode_to_file, shared_path
from models.mining.index import IndexSettings, knn, load_rows, normalised

log = logging.getLogger("polysent.models.mining")
MODES = ("max", "forward", "backward", "intersect")
_RETRIEVAL = {"max": "max", "forward": "fwd", "backward": "bwd", "intersect": "intersect"}
#: CCMatrix's ratio-margin threshold (Schwenk et al., ACL 2021)
RATIO_THRESHOLD = 1.06


class MiningInputError(ValueError):
    """A corpus side that cannot be mined (empty, or empty after de-duplication)."""


@dataclass(frozen=True)
class MineSettings:
    """How two corpora are mined (module docstring: each step and the defaults)."""

    k: int = 4
    mode: Literal["max", "forward", "backward", "intersect"] = "max"
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    threshold: float | None = None  # None: 1.06 for the ratio margin, no threshold for the others
    index: IndexSettings = field(default_factory=IndexSettings)
    batch_size: int = 128  # encoding: texts per batch at most
    batch_tokens: int = 4096  # encoding: padded tokens per batch at most
    chunk_rows: int = CHUNK_ROWS  # encoding: texts per chunk written to the embedding file
    recall_sample: int = 1000  # ivf / hnsw: source queries whose k-NN is also searched exactly (0: no check)

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k: expected a positive integer, got {self.k!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        if self.margin not in MARGINS:
            raise ValueError(f"margin: expected one of {', '.join(MARGINS)}, got {self.margin!r}")
        if self.threshold is not None:
            lo, hi = margin_range(self.margin, self.k)
            if not lo <= self.threshold <= hi:
                raise ValueError(f"threshold: {self.threshold!r} is outside the {self.margin} margin's range "
                                 f"[{lo:g}, {hi:g}] (k = {self.k}); expected a value in it, e.g. "
                                 f"{RATIO_THRESHOLD if self.margin == 'ratio' else 0.0}")
        if self.recall_sample < 0:
            raise ValueError(f"recall_sample: expected 0 or a positive integer, got {self.recall_sample!r}")
        for name in ("batch_size", "batch_tokens", "chunk_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")

    def cutoff(self) -> float:
        """The margin a pair must exceed."""
        if self.threshold is not None:
            return float(self.threshold)
        return RATIO_THRESHOLD if self.margin == "ratio" else -np.inf


def margin_range(margin: str, k: int) -> tuple[float, float]:
    """The values a mining threshold can meaningfully take for ``margin`` (module docstring)."""
    if margin == "ratio":
        return 0.0, 2.0 * k
    if margin == "distance":
        return -2.0, 2.0
    if margin == "absolute":
        return -1.0, 1.0
    raise ValueError(f"margin: expected one of {', '.join(MARGINS)}, got {margin!r}")


#: an approximate run whose sampled recall@k is below this logs a warning
RECALL_WARNING = 0.95


def sampled_recall(x: np.ndarray | str | Path, y: np.ndarray | str | Path, found: np.ndarray, settings: MineSettings,
                   executor: Any = None) -> float | None:
    """recall@k of the approximate source → target neighbours ``found`` against exact search, on a seeded sample of
    ``settings.recall_sample`` source rows (the exact search costs sample / rows of a full exact pass). None for an
    exact index or a zero sample."""
    if settings.index.kind == "exact" or settings.recall_sample == 0:
        return None
    xs = load_rows(x)
    rows = np.sort(np.random.default_rng(settings.index.seed).choice(len(xs), min(len(xs), settings.recall_sample),
                                                                     replace=False))
    exact = dataclasses.replace(settings.index, kind="exact")
    _, truth = knn(np.asarray(xs[rows]), y, settings.k, exact, executor=None)
    hits = [len(set(a) & set(b)) / len(b) for a, b in zip(found[rows].tolist(), truth.tolist(), strict=True)]
    return float(np.mean(hits))


@dataclass(frozen=True)
class MinedRows:
    """Selected pairs as row numbers of the two embedding matrices, with margin and cosine, in selection order."""

    src_row: np.ndarray  # int64
    tgt_row: np.ndarray  # int64
    margin: np.ndarray  # float64
    cosine: np.ndarray  # float32
    recall: float | None = None  # sampled recall@k of an approximate index (None: exact)
    candidates: np.ndarray | None = None  # float64: the margin of every selected candidate, before the threshold

    def __len__(self) -> int:
        return len(self.src_row)


def _means(sim: np.ndarray) -> np.ndarray:
    """LASER's per-row mean of the k neighbour cosines, over the places an approximate index filled."""
    found = np.isfinite(sim)
    total = np.where(found, sim, 0).sum(axis=1, dtype=np.float32)
    return (total / np.maximum(found.sum(axis=1), 1)).astype(np.float32)


def pair_cosines(x: np.ndarray, y: np.ndarray, src_row: np.ndarray, tgt_row: np.ndarray,
                 chunk: int = 65536) -> np.ndarray:
    """cos(x[i], y[j]) of each selected pair, gathered a chunk of pairs at a time."""
    out = np.empty(len(src_row), dtype=np.float32)
    for lo, hi in blocks(len(src_row), chunk):
        a = normalised(x[np.sort(src_row[lo:hi])])  # sorted reads of a memory map, then back to pair order
        b = normalised(y[np.sort(tgt_row[lo:hi])])
        a = a[np.argsort(np.argsort(src_row[lo:hi], kind="stable"), kind="stable")]
        b = b[np.argsort(np.argsort(tgt_row[lo:hi], kind="stable"), kind="stable")]
        out[lo:hi] = np.einsum("ij,ij->i", a, b)
    return out


def mine_embeddings(x: np.ndarray | str | Path, y: np.ndarray | str | Path, settings: MineSettings = MineSettings(),
                    *, executor: Any = None, progress: Callable[[str, int, int], None] | None = None) -> MinedRows:
    """Steps 3–5 on two embedding matrices (arrays or ``.npy`` paths, one row per unique text): the selected pairs
    with margin > the threshold. ``progress(phase, done, total)`` reports the k-NN passes."""
    xs, ys = load_rows(x), load_rows(y)
    if len(xs) == 0 or len(ys) == 0:
        raise MiningInputError(f"nothing to mine: {len(xs)} source and {len(ys)} target embeddings")

    def report(phase: str, total: int) -> Callable[[int], None] | None:
        if progress is None:
            return None
        done = [0]
        progress(phase, 0, total)  # the phase starts now: its bar's rate counts from here

        def step(n: int) -> None:
            done[0] += n
            progress(phase, done[0], total)
        return step

    shards_y = -(-len(ys) // settings.index.shard_rows)
    shards_x = -(-len(xs) // settings.index.shard_rows)
    x2y_sim, x2y_ind = knn(x, y, settings.k, settings.index, executor=executor,
                           progress=report("k-NN source → target", len(xs) * shards_y))
    y2x_sim, y2x_ind = knn(y, x, settings.k, settings.index, executor=executor,
                           progress=report("k-NN target → source", len(ys) * shards_x))
    recall = sampled_recall(x, y, x2y_ind, settings, executor)
    if recall is not None:
        log_fn = log.warning if recall < RECALL_WARNING else log.info
        log_fn("%s index: recall@%d %.4f against exact search on %d sampled queries%s", settings.index.kind,
               settings.k, recall, min(len(xs), settings.recall_sample),
               "; raise nprobe (ivf) or ef_search (hnsw)" if recall < RECALL_WARNING else "")
    nb = Neighbourhoods(x2y_sim, x2y_ind, y2x_sim, y2x_ind, _means(x2y_sim), _means(y2x_sim))
    with np.errstate(invalid="ignore"):
        picked = select_pairs(nb, margin=settings.margin, retrieval=_RETRIEVAL[settings.mode], threshold=-np.inf)
    cutoff = settings.cutoff()
    kept = [(s, i, j) for s, i, j in picked if s > cutoff]
    src_row = np.fromiter((i for _, i, _ in kept), dtype=np.int64, count=len(kept))
    tgt_row = np.fromiter((j for _, _, j in kept), dtype=np.int64, count=len(kept))
    margin = np.fromiter((s for s, _, _ in kept), dtype=np.float64, count=len(kept))
    candidates = np.fromiter((s for s, _, _ in picked), dtype=np.float64, count=len(picked))
    return MinedRows(src_row, tgt_row, margin, pair_cosines(xs, ys, src_row, tgt_row), recall, candidates)


@dataclass(frozen=True)
class Side:
    """One corpus side: IDs and texts (rows aligned) and where they came from (for messages)."""

    ids: Sequence[str]
    texts: Sequence[str]
    source: str

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.texts):
            raise MiningInputError(f"{self.source}: {len(self.ids)} IDs but {len(self.texts)} texts")


@dataclass(frozen=True)
class UniqueSide:
    """A side after LASER's ``--unify``: unique non-blank texts in first-occurrence order with the first ID of each."""

    ids: list[str]
    texts: list[str]
    lines: int
    blank: int


def check_side(side: Side, name: str) -> list[int]:
    """The rows of ``side`` with text; :class:`MiningInputError` naming the input when it is empty or all blank
    (cheap: the CLI calls it before any model loads)."""
    if len(side.texts) == 0:
        raise MiningInputError(f"{name} {side.source}: no sentences to mine (the input is empty)")
    keep = [i for i, t in enumerate(side.texts) if t and not t.isspace()]
    if not keep:
        raise MiningInputError(f"{name} {side.source}: all {len(side.texts)} sentences are blank; nothing is left "
                               "to mine after de-duplication")
    return keep


def unify(side: Side, name: str) -> UniqueSide:
    """Step 1 for one side (blank texts dropped first, ``check_side``)."""
    keep = check_side(side, name)
    texts = [side.texts[i] for i in keep]
    inds, unique, _ = unify_texts(texts)
    first = np.empty(len(unique), dtype=np.int64)
    first[inds[::-1]] = np.arange(len(inds) - 1, -1, -1)  # written last to first: the first occurrence's row wins
    ids = [str(side.ids[keep[r]]) for r in first.tolist()]
    return UniqueSide(ids, unique, len(side.texts), len(side.texts) - len(keep))


def write_pairs(path: Path, src: UniqueSide, tgt: UniqueSide, rows: MinedRows,
                metadata: dict[str, str] | None = None, constants: dict[str, str] | None = None) -> None:
    """The mined pairs as Parquet ``(src_id, tgt_id, src, tgt, margin, cosine)`` (then a string column per entry of
    ``constants``, e.g. the two languages), written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    constants = constants or {}
    schema = pa.schema([("src_id", pa.string()), ("tgt_id", pa.string()), ("src", pa.string()), ("tgt", pa.string()),
                        ("margin", pa.float64()), ("cosine", pa.float32()),
                        *((name, pa.string()) for name in constants)],
                       metadata={k.encode(): v.encode() for k, v in (metadata or {}).items()})
    s, t = rows.src_row.tolist(), rows.tgt_row.tolist()
    table = pa.Table.from_arrays([pa.array([src.ids[i] for i in s], pa.string()),
                                  pa.array([tgt.ids[j] for j in t], pa.string()),
                                  pa.array([src.texts[i] for i in s], pa.string()),
                                  pa.array([tgt.texts[j] for j in t], pa.string()),
                                  pa.array(rows.margin, pa.float64()), pa.array(rows.cosine, pa.float32()),
                                  *(pa.array([v] * len(rows), pa.string()) for v in constants.values())],
                                 schema=schema)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class Encoder:
    """A sentence encoder as mining uses it: ``name`` (what the embedding files record), ``dim`` and ``encode``."""

    def __init__(self, model: str, *, device: str = "auto", max_length: int | None = None) -> None:
        from models.encoder import SentenceEncoder, pick_device
        from models.evaluation.embedding_cache import folder_hash

        self.device = pick_device(device)
        self.model = SentenceEncoder.load(model, self.device)
        if max_length is not None:
            self.model.max_length = max_length
        path = Path(model)
        self.name = f"{path.name}@{folder_hash(path)[:16]}" if path.exists() else f"hub:{model}"
        self.dim = int(self.model.dim)

    def encode(self, texts: list[str], settings: MineSettings,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        return self.model.encode(texts, settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens,
                                 progress=progress)


def _bar(desc: str, total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sent", mininterval=0.5, disable=not enabled)


FEW_PAIRS = 0.01  # below this share of the smaller side's sentences passing the threshold, mining warns


def margin_summary(candidates: np.ndarray) -> dict[str, float]:
    """Quantiles of the candidates' margins (what a threshold is chosen from)."""
    if len(candidates) == 0:
        return {}
    qs = np.quantile(candidates, [0.5, 0.9, 0.99, 1.0])
    return {"median": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]), "max": float(qs[3])}


def few_pairs_warning(pairs: int, smaller_side: int, threshold: float, candidates: np.ndarray | None) -> str | None:
    """A warning when fewer than ``FEW_PAIRS`` of the smaller side's sentences passed ``threshold``: the margin
    distribution of the candidates, so that a threshold suited to this model can be chosen (margins are per model:
    1.06 is CCMatrix's for LASER)."""
    if smaller_side == 0 or pairs >= FEW_PAIRS * smaller_side or candidates is None or len(candidates) == 0:
        return None
    q = margin_summary(candidates)
    return (f"only {pairs:,} of {smaller_side:,} sentences ({pairs / smaller_side:.2%}) passed the margin threshold "
            f"{threshold:g}; the {len(candidates):,} candidates' margins: median {q['median']:.4f}, 90th percentile "
            f"{q['p90']:.4f}, 99th {q['p99']:.4f}, max {q['max']:.4f}. Margins depend on the model: choose "
            f"--threshold from this distribution (or from pairs you know to be translations)")


def mine_corpora(src: Side, tgt: Side, encoder: Encoder, settings: MineSettings, out: Path, *, workdir: Path,
                 src_embeddings: Path | None = None, tgt_embeddings: Path | None = None, shared: bool = False,
                 executor: Any = None,
                 progress: bool = True, metadata: dict[str, str] | None = None,
                 constants: dict[str, str] | None = None) -> dict[str, Any]:
    """Steps 1–5 end to end: ``out`` gets the mined pairs; returns counts and timings per phase.

    Embeddings go to ``src_embeddings`` / ``tgt_embeddings`` (reused when they hold this model's vectors of these
    texts) or to ``workdir`` — as ``src.npy`` / ``tgt.npy``, or with ``shared`` under a name hashing model and texts,
    so that runs sharing the folder encode a side they share once. A progress bar per phase (encode each side, k-NN
    each way)."""
    t0 = time.perf_counter()
    usrc, utgt = unify(src, "source"), unify(tgt, "target")
    log.info("mining %s (%d lines, %d unique) × %s (%d lines, %d unique) with %s, index %s, k %d, %s, threshold %s",
             src.source, usrc.lines, len(usrc.texts), tgt.source, utgt.lines, len(utgt.texts), encoder.name,
             settings.index.kind, settings.k, settings.mode, settings.cutoff())
    seconds: dict[str, float] = {"unify": time.perf_counter() - t0}
    paths = {}
    for name, side, given in (("src", usrc, src_embeddings), ("tgt", utgt, tgt_embeddings)):
        t1 = time.perf_counter()
        if given is not None:
            path = Path(given)
        else:
            path = shared_path(workdir, encoder.name, side.texts) if shared else Path(workdir) / f"{name}.npy"
        bar = _bar(f"encode {name}", len(side.texts), progress)
        # the bar moves per encoded batch; a reused embedding file completes it at once
        encode_to_file(side.texts, lambda batch, bar=bar: encoder.encode(batch, settings, progress=bar.update), path,
                       model=encoder.name, dim=encoder.dim, chunk_rows=settings.chunk_rows)
        bar.update(len(side.texts) - bar.n)
        bar.close()
        paths[name] = path
        seconds[f"encode_{name}"] = time.perf_counter() - t1
    bars: dict[str, Any] = {}

    def knn_progress(phase: str, done: int, total: int) -> None:
        bar = bars.get(phase) or bars.setdefault(phase, _bar(phase, total, progress))
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    t1 = time.perf_counter()
    rows = mine_embeddings(paths["src"], paths["tgt"], settings, executor=executor, progress=knn_progress)
    for bar in bars.values():
        bar.close()
    seconds["search_and_select"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    write_pairs(out, usrc, utgt, rows, metadata, constants)
    seconds["write"] = time.perf_counter() - t1
    warning = few_pairs_warning(len(rows), min(len(usrc.texts), len(utgt.texts)), settings.cutoff(), rows.candidates)
    if warning:
        log.warning("%s", warning)
    stats = {"src_lines": usrc.lines, "src_blank": usrc.blank, "src_unique": len(usrc.texts),
             "tgt_lines": utgt.lines, "tgt_blank": utgt.blank, "tgt_unique": len(utgt.texts), "pairs": len(rows),
             "threshold": settings.cutoff(), "model": encoder.name, "dim": encoder.dim, "index": settings.index.kind,
             "sampled_recall": rows.recall,
             "candidate_margins": margin_summary(rows.candidates) if rows.candidates is not None else {},
             "warning": warning,
             "seconds": {k: round(v, 3) for k, v in seconds.items()}}
    log.info("mined %d pairs into %s (%.1f s)", len(rows), out, time.perf_counter() - t0)
    return stats
